"""Tool scripts: Python files run in the sandbox, whose inputs are declared in a header.

The header is a TOML block in comments at the top of the script (like PEP 723's inline script
metadata), so the script stays plain Python that Monty runs as it is:

    # /// remora-tool
    # description = "Report TODO comments in the node."
    # context = ["file_text"]
    #
    # [inputs.marker]
    # type = "string"
    # default = "TODO"
    # description = "The comment marker to look for."
    # ///

One loader turns the header into the model-facing JSON schema, the argument validator and the
inputs bound in the sandbox. `name` defaults to the file's stem.
"""

from __future__ import annotations

import re
import tomllib
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from remora.config.yamlfile import validation_messages
from remora.errors import UserInputError

TOOL_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
SUBMIT_RESULT = "submit_result"
HEADER_START = "# /// remora-tool"
HEADER_END = "# ///"

InputType = Literal["string", "integer", "number", "boolean", "array", "object"]
ContextName = Literal["file_text"]
"""Context providers a tool may ask for, on top of `node` and `options` which every tool gets."""

INJECTED_NAMES = frozenset({"node", "options", "file_text"})
PYTHON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list[Any]",
    "object": "dict[str, Any]",
}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InputSpec(Strict):
    """One argument the model supplies. It is required unless it has a `default`."""

    type: InputType
    description: str = ""
    default: Any = None
    enum: list[Any] | None = None
    items: dict[str, Any] | None = None
    """JSON schema of the elements, for `type = "array"`."""
    properties: dict[str, Any] | None = None
    """JSON schemas of the keys, for `type = "object"`."""

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


class ToolHeader(Strict):
    name: str | None = Field(default=None, pattern=TOOL_NAME_PATTERN)
    """Letters, digits and underscores: FunctionGemma's parsers drop names with '-' or '.'."""
    description: str
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    context: list[ContextName] = Field(default_factory=list)
    """Injected values the script needs besides `node` and `options`; never shown to the model."""

    @field_validator("name")
    @classmethod
    def _not_submit_result(cls, name: str | None) -> str | None:
        if name == SUBMIT_RESULT:
            raise ValueError(f"'{SUBMIT_RESULT}' is declared in the agent's YAML, not as a tool")
        return name

    @field_validator("inputs")
    @classmethod
    def _valid_inputs(cls, inputs: dict[str, InputSpec]) -> dict[str, InputSpec]:
        clash = sorted(INJECTED_NAMES & inputs.keys())
        if clash:
            raise ValueError(f"input names {clash} are reserved for injected context")
        bad = sorted(name for name in inputs if not name.isidentifier())
        if bad:
            raise ValueError(f"input names must be Python identifiers: {bad}")
        for name, spec in inputs.items():
            if not spec.required:
                try:
                    jsonschema.validate(spec.default, spec.json_schema())
                except jsonschema.ValidationError as exc:
                    raise ValueError(f"{name}: default does not fit: {exc.message}") from None
        return inputs


class Tool(BaseModel):
    """A tool ready to run: its declarations plus the script source, read once."""

    name: str
    header: ToolHeader
    script_path: Path
    source: str
    header_lines: int
    """Lines the header takes; line numbers in errors count from the top of the file."""

    @property
    def description(self) -> str:
        return self.header.description

    def model_schema(self) -> dict[str, Any]:
        """What the model sees: only the arguments it can know."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.header.description,
                "parameters": inputs_schema(self.header.inputs),
            },
        }

    @cached_property
    def validator(self) -> jsonschema.Draft202012Validator:
        # Unknown argument names are rejected: they mean the model invented a parameter.
        schema = {**inputs_schema(self.header.inputs), "additionalProperties": False}
        return jsonschema.Draft202012Validator(schema)

    def sandbox_inputs(self, arguments: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """Defaults, then the model's arguments, then injected context (which always wins)."""
        defaults = {
            name: spec.default for name, spec in self.header.inputs.items() if not spec.required
        }
        return {**defaults, **arguments, **context}

    def type_stubs(self) -> str:
        """Declarations of every name the script gets, for Monty's type checker."""
        lines = ["from typing import Any", ""]
        for name, spec in self.header.inputs.items():
            lines.append(f"{name}: {PYTHON_TYPES[spec.type]}")
        lines += ["node: dict[str, Any]", "options: dict[str, Any]"]
        if "file_text" in self.header.context:
            lines.append("file_text: str")
        return "\n".join(lines) + "\n"


_HEADER_KEY = re.compile(r"^#\s*\[?\s*([A-Za-z_][\w.-]*)\s*(\]|=)")


def load_tool(path: Path) -> Tool:
    """Read a tool script and validate its header; errors name the file, line and key."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{path}: cannot read tool script: {exc}") from exc
    lines = source.splitlines()
    if not lines or lines[0].strip() != HEADER_START:
        raise UserInputError(
            f"{path}:1: a tool script starts with a '{HEADER_START}' header declaring its "
            "description and inputs (see docs/WRITING_AGENTS.md)"
        )
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == HEADER_END), None)
    if end is None:
        raise UserInputError(f"{path}:1: the '{HEADER_START}' header has no closing '{HEADER_END}'")
    header_lines = lines[1:end]
    not_comment = next((i for i, line in enumerate(header_lines, 2) if not line.startswith("#")), 0)
    if not_comment:
        raise UserInputError(f"{path}:{not_comment}: every header line must start with '#'")
    toml_text = "\n".join(line[2:] if line.startswith("# ") else line[1:] for line in header_lines)
    try:
        data = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        line = int(match.group(1)) + 1 if match else 1
        raise UserInputError(f"{path}:{line}: header is not valid TOML: {exc}") from exc
    try:
        header = ToolHeader.model_validate(data)
    except ValidationError as exc:

        def where(loc: tuple[str | int, ...]) -> str:
            return f"{path}:{_header_line(header_lines, loc)}"

        messages = validation_messages(exc, where, ToolHeader)
        raise UserInputError(f"invalid tool header in {path}:\n  " + "\n  ".join(messages)) from exc
    name = header.name or path.stem
    if not re.match(TOOL_NAME_PATTERN, name):
        raise UserInputError(
            f"{path}:1: tool name {name!r} (from the file name) must match {TOOL_NAME_PATTERN}; "
            'set name = "..." in the header'
        )
    return Tool(name=name, header=header, script_path=path, source=source, header_lines=end + 1)


def _header_line(header_lines: list[str], loc: tuple[str | int, ...]) -> int:
    """Best-effort line of a key: each part of `loc` is looked for in the key paths of the
    lines (`[inputs.NAME]` tables, `key =` and `a.b =` lines) after the previous part's line."""
    line_no = 2  # the header's first line
    for part in (str(part) for part in loc if isinstance(part, str)):
        for index, line in enumerate(header_lines[line_no - 2 :], line_no):
            match = _HEADER_KEY.match(line)
            if match and part in match.group(1).split("."):
                line_no = index
                break
    return line_no
