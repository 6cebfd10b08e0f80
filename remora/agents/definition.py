"""Agent definitions: the YAML an agent author writes, validated strictly."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import jinja2
import jsonschema
from pathspec import GitIgnoreSpec
from pydantic import BaseModel, Field, ValidationError, field_validator

from remora.agents.adapters import CARD as ADAPTER_CARD
from remora.agents.adapters import GGUF as ADAPTER_GGUF
from remora.agents.adapters import Adapter, load_adapter
from remora.agents.context import ProviderName, provide
from remora.agents.examples import Example, check_examples
from remora.agents.host_declarations import check_declarations
from remora.agents.installed import HOST_STUBS_FILE, installed_agent_at
from remora.agents.limits import Limits, resolve_limits
from remora.agents.templates import BoundedEnvironment, render, template_line
from remora.agents.toolscript import (
    SUBMIT_RESULT,
    InputSpec,
    Strict,
    Tool,
    inputs_schema,
    load_tool,
)
from remora.agents.write_scope import check_scope
from remora.config.settings import ConfidencePolicy, SandboxLimits
from remora.config.yamlfile import YamlFile, validation_messages
from remora.discovery.nodes import Node, NodeType
from remora.errors import UserInputError
from remora.protocol.messages import Message, ModelReply, ToolCall, tool_message


class ToolRef(Strict):
    script: Path
    """The tool script, relative to the agent's YAML file; it declares its own inputs."""


class SubmitResultSpec(Strict):
    description: str = "Submit the final result of the analysis. Call it exactly once, at the end."
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    """The result schema: what the model reports when it is done."""


class RuleSpec(Strict):
    """A rule code the agent's tools report, described for reports (SARIF rules, tables)."""

    short: str
    """One line, e.g. "Bare except clause"."""
    full: str = ""
    """A paragraph on what the rule flags and why."""
    help: str = ""
    """How to fix it."""
    help_uri: str | None = None


class Requirements(Strict):
    """What the agent's tools run, checked before any job: a missing one stops the run."""

    programs: list[str] = Field(default_factory=list)
    """Executables its tools run with run_command, e.g. ruff."""
    python_modules: list[str] = Field(default_factory=list)
    """Modules its tools run as `python -m MODULE`, e.g. pytest."""
    project_imports: bool = False
    """Its tools import the node's module (tests do): before any job, each module is imported
    once in the project's Python; the jobs of a module that does not import are skipped, with
    one warning saying why, instead of each failing on its own."""


class AgentDefinition(Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    description: str
    node_types: list[NodeType] = Field(default_factory=lambda: list(NodeType), min_length=1)
    max_turns: int = Field(default=6, ge=1, le=100)
    system_prompt: str
    node_context: str
    """Jinja2 template for the first user message; sees `node`, `agent`, `options` and
    `context` (the providers listed under `context`)."""
    context: list[ProviderName] = Field(default_factory=list)
    """Context providers whose text the template can show, e.g. ruff_config."""
    tools: list[ToolRef] = Field(default_factory=list)
    submit_result: SubmitResultSpec
    options: dict[str, Any] = Field(default_factory=dict)
    """Defaults for agent-specific options (overridable under agents.<name>.options)."""
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    """Tool-call limits the agent's tools need: a preset and/or single values."""
    rules: dict[str, RuleSpec] = Field(default_factory=dict)
    """The rule codes the agent's tools report, keyed by code."""
    done_when: list[str] = Field(min_length=1)
    """The outcomes, reported by its tools (`{"outcome": NAME, "summary": ...}`), that complete
    a job: a job succeeds only when one of them was verified, never on the model's word."""
    requires: Requirements = Field(default_factory=Requirements)
    observe: list[str] = Field(default_factory=list)
    """Tools (without required inputs) the runner calls before the model's first turn. A
    result with `"final": true` ends the job there: no model request at all."""
    confidence: ConfidencePolicy = Field(default_factory=ConfidencePolicy)
    """What to do when the model is unsure which tool to call (a threshold, then resample or
    end the job not done)."""
    adapter: Path | None = None
    """A LoRA adapter folder made by `remora train`, relative to this file's folder."""
    writes: list[str] = Field(default_factory=list, max_length=16)
    """Where the agent's changes may go (agents/write_scope.py): `node` (inside the node's own
    lines), `node_file` (anywhere in the node's file), or a project path with placeholders
    `{project}`, `{folder}`, `{module}`, `{name}` and `{options.KEY}`. A change anywhere else is
    refused; an agent without `writes` changes no file."""
    reads: list[str] = Field(default_factory=list, max_length=16)
    """Python files of the node's project (`{project}`) besides the node that its tools'
    answers depend on, as gitignore-style patterns from that folder (the test agent: the
    project's test modules, which say whether a function is tested). A stored result is
    reused only while every file they match is as it was (cache/read_files.py)."""
    examples: list[Example] = Field(default_factory=list, max_length=2)
    """Worked examples the model sees before every job of this agent, the same bytes each time
    (a prefix the engine and vLLM's prefix cache evaluate once)."""
    host_functions: list[str] = Field(default_factory=list)
    """The host functions its tool scripts call: shared ones (agents/host_functions.pyi) and
    its own package's. A job gets these and no others."""
    verify_together: Literal["pytest"] | None = None
    """pytest: the files its successful jobs change are test files, shown and written only as a
    set that passes with the project's tests, in two orders (analysis/suite.py; the option
    `pytest_args`, if the agent has it, is passed too); a job whose file fails in company ends
    not_done. None: no check."""

    @field_validator("writes")
    @classmethod
    def _scopes_parse(cls, writes: list[str]) -> list[str]:
        for scope in writes:
            check_scope(scope)
        return writes

    @field_validator("reads")
    @classmethod
    def _reads_parse(cls, reads: list[str]) -> list[str]:
        for pattern in reads:
            if pattern.startswith("/") or ".." in pattern.split("/"):
                raise ValueError(f"reads: {pattern!r} must stay inside the project folder")
            GitIgnoreSpec.from_lines([pattern])  # raises on a pattern it cannot read
        return reads

    @field_validator("node_context")
    @classmethod
    def _template_compiles(cls, template: str) -> str:
        try:
            # Compiled, not only parsed: nesting too deep for the code generator or for
            # Python's compiler is a syntax error too (agents/templates.py).
            TEMPLATES.compile(template)
        except jinja2.TemplateSyntaxError as exc:
            raise ValueError(
                f"template syntax error on template line {exc.lineno}: {exc.message}"
            ) from None
        return template


# Agent folders may come with a project the user did not write: their templates render in
# jinja2's sandbox, where `{{ cycler.__init__.__globals__.os }}` is refused, not evaluated, and
# within bounds on size and time (agents/templates.py).
TEMPLATES = BoundedEnvironment(
    undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
)


class Agent(BaseModel):
    """A loaded, validated agent with its tools' sources and the user's settings applied."""

    definition: AgentDefinition
    source: Path
    tools: list[Tool]
    model: str
    max_turns: int
    options: dict[str, Any]
    tool_limits: Limits
    confidence: ConfidencePolicy
    adapter: Adapter | None = None
    """The LoRA adapter the agent's requests use (its name is then `model`, unless the
    configuration names another)."""
    host_library: str | None = None
    """The module of its own host functions: only an installed agent package has one."""
    host_stubs: Path | None = None

    @property
    def name(self) -> str:
        return self.definition.name

    def __getstate__(self) -> dict[Any, Any]:
        """Pickled (for worker processes) without the compiled template and validators, which
        `cached_property` keeps in `__dict__`: they are made again where they are used."""
        state = super().__getstate__()
        fields = type(self).model_fields
        state["__dict__"] = {k: v for k, v in state["__dict__"].items() if k in fields}
        return state

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

    @cached_property
    def submit_validator(self) -> jsonschema.Draft202012Validator:
        schema = {**inputs_schema(self.definition.submit_result.inputs)}
        return jsonschema.Draft202012Validator({**schema, "additionalProperties": False})

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools the model may call, in a fixed order, so the prompt prefix is identical for
        every job: every tool but the observations (the runner made those; a repeat would only
        be refused), then submit_result."""
        observed = set(self.definition.observe)
        offered = [tool.model_schema() for tool in self.tools if tool.name not in observed]
        return [*offered, self.submit_schema()]

    @cached_property
    def example_messages(self) -> tuple[Message, ...]:
        """The examples as transcript messages: each a user message and one call per turn with
        its result. Built once, so every job starts with the same bytes."""
        messages: list[Message] = []
        for number, example in enumerate(self.definition.examples):
            messages.append({"role": "user", "content": example.context})
            for index, turn in enumerate(example.turns):
                call = ToolCall(
                    id=f"example{number}_{index}",
                    name=turn.call,
                    arguments=json.dumps(turn.arguments, ensure_ascii=False),
                )
                messages.append(ModelReply(tool_calls=[call]).as_message())
                if turn.call != SUBMIT_RESULT:
                    content = (
                        turn.result if isinstance(turn.result, str) else json.dumps(turn.result)
                    )
                    messages.append(tool_message(call, content))
        return tuple(messages)

    def handles(self, node: Node) -> bool:
        return node.type in self.definition.node_types

    @cached_property
    def _template(self) -> jinja2.Template:
        return TEMPLATES.from_string(self.definition.node_context)

    def render_context(self, node: Node, root: Path) -> str:
        """The job's first user message. A node that makes the template break a bound (size,
        time, output: agents/templates.py) raises TemplateBoundError, a jinja2.TemplateError."""
        values = {
            "node": node.model_dump(),
            "agent": self.name,
            "options": self.options,
            "context": provide(self.definition.context, node, root),
        }
        return render(self._template, values)


def load_definition(path: Path) -> tuple[AgentDefinition, YamlFile]:
    document = YamlFile.load(path)
    if not isinstance(document.data, dict):
        raise UserInputError(f"{path}:1: an agent definition must be a mapping of keys")
    try:
        return AgentDefinition.model_validate(document.data), document
    except ValidationError as exc:
        lines = validation_messages(exc, document.where, AgentDefinition)
        raise UserInputError(f"invalid agent definition {path}:\n  " + "\n  ".join(lines)) from exc


def load_tools(definition: AgentDefinition, document: YamlFile) -> list[Tool]:
    tools: list[Tool] = []
    for index, ref in enumerate(definition.tools):
        script_path = (document.path.parent / ref.script).resolve()
        where = document.where(["tools", index, "script"])
        if not script_path.is_file():
            raise UserInputError(f"{where}: tools.{index}.script: no such file: {script_path}")
        tool = load_tool(script_path)
        if any(other.name == tool.name for other in tools):
            raise UserInputError(
                f"{where}: tools.{index}.script: a second tool named {tool.name!r}; "
                'tool names must be unique (set name = "..." in the script\'s header)'
            )
        tools.append(tool)
    return tools


def load_agent(
    path: Path,
    *,
    model: str,
    max_turns: int | None = None,
    options: dict[str, Any] | None = None,
    limits: Sequence[SandboxLimits] = (),
    confidence: ConfidencePolicy | None = None,
    adapter: Adapter | Literal[False] | None = None,
) -> Agent:
    """`limits` are the configuration's limit layers (the sandbox section, then the agent's
    section); they override the agent's own. `adapter` (the configuration's) replaces the
    agent's own `adapter:`; False runs the agent on the base model."""
    definition, document = load_definition(path)
    if adapter is None:
        adapter = _own_adapter(definition, document, path)
    tools = load_tools(definition, document)
    by_name = {tool.name: tool for tool in tools}
    for index, name in enumerate(definition.observe):
        where = document.where(["observe", index])
        if name not in by_name:
            known = ", ".join(by_name) or "none"
            raise UserInputError(f"{where}: observe: no tool {name!r}; the tools: {known}")
        needed = [key for key, spec in by_name[name].header.inputs.items() if spec.required]
        if needed:
            raise UserInputError(
                f"{where}: observe: {name} needs inputs ({', '.join(needed)}); the runner "
                "calls observations without arguments"
            )
    check_examples(definition.examples, definition.submit_result.inputs, document, by_name)
    installed = installed_agent_at(path)
    host_library = installed.checked_host_library() if installed else None
    stubs = installed.folder / HOST_STUBS_FILE if installed and host_library else None
    check_declarations(definition.host_functions, stubs, document)
    agent = Agent(
        definition=definition,
        source=path,
        tools=tools,
        model=model,
        max_turns=max_turns or definition.max_turns,
        options={**definition.options, **(options or {})},
        tool_limits=resolve_limits(definition.limits, *limits),
        confidence=confidence or definition.confidence,
        adapter=adapter or None,
        host_library=host_library,
        host_stubs=stubs,
    )
    _check_template_renders(agent, document)
    return agent


def _own_adapter(definition: AgentDefinition, document: YamlFile, path: Path) -> Adapter | None:
    """The YAML's `adapter:`, a folder inside the agent's own folder: an agent folder that came
    with a project may not point the engine at files elsewhere."""
    if definition.adapter is None:
        return None
    where = document.where(["adapter"])
    inside = path.parent.resolve()
    folder = (path.parent / definition.adapter).resolve()
    # The folder and its files (a symlink in the folder could point anywhere).
    files = (folder, folder / ADAPTER_CARD, folder / ADAPTER_GGUF)
    if not all(file.resolve().is_relative_to(inside) for file in files):
        raise UserInputError(f"{where}: adapter: {definition.adapter} is outside the agent folder")
    return load_adapter(folder, where=where)


def _check_template_renders(agent: Agent, document: YamlFile) -> None:
    """Catch undefined names and broken bounds in node_context at load time instead of in every
    job (a template that loops forever is stopped after RENDER_SECONDS)."""
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
        agent.render_context(sample, document.path.parent)
    # What a template's expressions raise ({{ 1 / 0 }}, {{ 'a' + 1 }}), as well as jinja2's own.
    except (jinja2.TemplateError, ArithmeticError, LookupError, TypeError, ValueError) as exc:
        where = document.where(["node_context"])
        line = template_line(exc)
        at = f" (template line {line})" if line else ""
        raise UserInputError(f"{where}: node_context: cannot render template{at}: {exc}") from exc
