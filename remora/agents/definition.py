"""Agent definitions: the YAML an agent author writes, validated strictly."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import jinja2
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from remora.discovery.nodes import Node, NodeType
from remora.yamlfile import UserInputError, YamlFile, validation_messages

TOOL_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
SUBMIT_RESULT = "submit_result"

InputType = Literal["string", "integer", "number", "boolean", "array", "object"]
ContextName = Literal["file_text"]
"""Context providers a tool may ask for, on top of `node` and `options` which every tool gets."""

INJECTED_NAMES = frozenset({"node", "options", "file_text"})


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputSpec(Strict):
    """One argument the model supplies. It is required unless it has a `default`."""

    type: InputType
    description: str = ""
    default: Any = None
    enum: list[Any] | None = None
    items: dict[str, Any] | None = None
    """JSON schema of the elements, for `type: array`."""
    properties: dict[str, Any] | None = None
    """JSON schemas of the keys, for `type: object`."""

    @property
    def required(self) -> bool:
        return "default" not in self.model_fields_set

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": self.type}
        if self.description:
            schema["description"] = self.description
        if self.enum is not None:
            schema["enum"] = self.enum
        if self.items is not None:
            schema["items"] = self.items
        if self.properties is not None:
            schema["properties"] = self.properties
        if not self.required:
            schema["default"] = self.default
        return schema


def inputs_schema(inputs: dict[str, InputSpec]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: spec.json_schema() for name, spec in inputs.items()},
        "required": [name for name, spec in inputs.items() if spec.required],
    }


class ToolSpec(Strict):
    name: str = Field(pattern=TOOL_NAME_PATTERN)
    """Letters, digits and underscores: FunctionGemma's parsers drop names with '-' or '.'."""
    script: Path
    """The tool script, relative to the agent's YAML file."""
    description: str
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    context: list[ContextName] = Field(default_factory=list)
    """Injected values the script needs besides `node` and `options`; never shown to the model."""

    @field_validator("name")
    @classmethod
    def _not_submit_result(cls, name: str) -> str:
        if name == SUBMIT_RESULT:
            raise ValueError(f"'{SUBMIT_RESULT}' is declared under the submit_result key")
        return name

    @field_validator("inputs")
    @classmethod
    def _no_injected_names(cls, inputs: dict[str, InputSpec]) -> dict[str, InputSpec]:
        clash = sorted(INJECTED_NAMES & inputs.keys())
        if clash:
            raise ValueError(f"input names {clash} are reserved for injected context")
        return inputs


class SubmitResultSpec(Strict):
    description: str = "Submit the final result of the analysis. Call it exactly once, at the end."
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    """The result schema: what the model reports when it is done."""


class AgentDefinition(Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    description: str
    node_types: list[NodeType] = Field(default_factory=lambda: list(NodeType), min_length=1)
    max_turns: int = Field(default=6, ge=1, le=100)
    system_prompt: str
    node_context: str
    """Jinja2 template for the first user message; sees `node`, `agent` and `options`."""
    tools: list[ToolSpec] = Field(default_factory=list)
    submit_result: SubmitResultSpec
    options: dict[str, Any] = Field(default_factory=dict)
    """Defaults for agent-specific options (overridable under agents.<name>.options)."""

    @field_validator("node_context")
    @classmethod
    def _template_compiles(cls, template: str) -> str:
        try:
            TEMPLATES.parse(template)
        except jinja2.TemplateSyntaxError as exc:
            raise ValueError(
                f"template syntax error on template line {exc.lineno}: {exc.message}"
            ) from None
        return template

    @model_validator(mode="after")
    def _unique_tool_names(self) -> AgentDefinition:
        names = [tool.name for tool in self.tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique; repeated: {duplicates}")
        return self


TEMPLATES = jinja2.Environment(
    undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
)


class Tool(BaseModel):
    """A tool ready to run: its spec plus the script source, read once."""

    spec: ToolSpec
    script_path: Path
    source: str

    @property
    def name(self) -> str:
        return self.spec.name

    def model_schema(self) -> dict[str, Any]:
        """What the model sees: only the arguments it can know."""
        return {
            "type": "function",
            "function": {
                "name": self.spec.name,
                "description": self.spec.description,
                "parameters": inputs_schema(self.spec.inputs),
            },
        }


class Agent(BaseModel):
    """A loaded, validated agent with its tools' sources and the user's settings applied."""

    definition: AgentDefinition
    source: Path
    tools: list[Tool]
    model: str
    max_turns: int
    options: dict[str, Any]

    @property
    def name(self) -> str:
        return self.definition.name

    def submit_schema(self) -> dict[str, Any]:
        spec = self.definition.submit_result
        return {
            "type": "function",
            "function": {
                "name": SUBMIT_RESULT,
                "description": spec.description,
                "parameters": inputs_schema(spec.inputs),
            },
        }

    def tool_schemas(self) -> list[dict[str, Any]]:
        """Every tool in a fixed order, so the prompt prefix is identical for every job."""
        return [tool.model_schema() for tool in self.tools] + [self.submit_schema()]

    def handles(self, node: Node) -> bool:
        return node.type in self.definition.node_types

    def render_context(self, node: Node) -> str:
        template = TEMPLATES.from_string(self.definition.node_context)
        return template.render(node=node.model_dump(), agent=self.name, options=self.options)


def load_definition(path: Path) -> AgentDefinition:
    document = YamlFile.load(path)
    if not isinstance(document.data, dict):
        raise UserInputError(f"{path}:1: an agent definition must be a mapping of keys")
    try:
        return AgentDefinition.model_validate(document.data)
    except ValidationError as exc:
        lines = validation_messages(exc, document.where, AgentDefinition)
        raise UserInputError(f"invalid agent definition {path}:\n  " + "\n  ".join(lines)) from exc


def load_agent(
    path: Path,
    *,
    model: str,
    max_turns: int | None = None,
    options: dict[str, Any] | None = None,
) -> Agent:
    definition = load_definition(path)
    tools = []
    for index, spec in enumerate(definition.tools):
        script_path = (path.parent / spec.script).resolve()
        try:
            source = script_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            line = YamlFile.load(path).where(["tools", index, "script"])
            raise UserInputError(
                f"{line}: tools.{index}.script: cannot read tool script {script_path}: {exc}"
            ) from exc
        tools.append(Tool(spec=spec, script_path=script_path, source=source))
    agent = Agent(
        definition=definition,
        source=path,
        tools=tools,
        model=model,
        max_turns=max_turns or definition.max_turns,
        options={**definition.options, **(options or {})},
    )
    _check_template_renders(agent, path)
    return agent


def _check_template_renders(agent: Agent, path: Path) -> None:
    """Catch undefined names in node_context at load time instead of in every job."""
    sample = Node(
        id="example.py::f",
        type=NodeType.FUNCTION,
        name="f",
        qualified_name="f",
        file="example.py",
        start_line=1,
        start_column=1,
        end_line=2,
        start_byte=0,
        end_byte=20,
        text="def f():\n    pass\n",
    )
    try:
        agent.render_context(sample)
    except jinja2.TemplateError as exc:
        where = YamlFile.load(path).where(["node_context"])
        raise UserInputError(f"{where}: node_context: cannot render template: {exc}") from exc
