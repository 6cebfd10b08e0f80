"""FunctionGemma's native format: render prompts, parse calls, constrain decoding.

One module owns every byte of the format, so the vLLM server kit (``server/``: chat template and
tool-parser plugin) and an embedded engine render and parse the same way. It depends on the
standard library only: the server image copies this file next to its parser plugin.

The format, as this module writes it (the chat template in ``server/`` renders the same bytes):

* The prompt starts with ``<bos>``. A ``developer`` turn comes first when the conversation starts
  with a ``system`` (or ``developer``) message or offers tools: the system text (trimmed), then,
  when tools are offered and the text lacks it, a newline and the trigger phrase
  ``You are a model that can do function calling with the following functions``, then one
  ``<start_function_declaration>declaration:NAME{...}<end_function_declaration>`` per tool.
* A declaration body holds ``description`` and ``parameters``; a schema holds ``description``,
  ``enum``, ``items``, ``properties``, ``required`` and ``type``, in that (alphabetical) order,
  each only when present and non-empty. Property names are sorted case-insensitively (like
  Jinja's ``dictsort``) and written bare; types are upper-case strings (``type:<escape>STRING
  <escape>``).
* Values are encoded by type: strings ``<escape>text<escape>``, numbers as Python writes them
  (``3``, ``0.5``), ``true``/``false``, ``null``, objects ``{key:value,...}`` with bare keys sorted
  case-insensitively, lists ``[a,b]``. A string cannot contain the ``<escape>`` token; the renderer
  writes such text as ``&lt;escape&gt;``.
* Turns are ``<start_of_turn>ROLE\\n`` + trimmed text + ``<end_of_turn>\\n`` with roles
  ``developer``, ``user`` and ``model`` (for ``assistant``); a later ``system`` message becomes a
  ``developer`` turn.
* An assistant message writes its trimmed text, then one
  ``<start_function_call>call:NAME{args}<end_function_call>`` per call, and then stays open: the
  tool results follow as ``<start_function_response>response:NAME{value:<escape>text<escape>}
  <end_function_response>`` inside the same model turn, and the next assistant message continues
  that turn without a new header. ``NAME`` is the tool message's ``name``, else the name of the
  call whose ``id`` is its ``tool_call_id``, else the call at the same position. Any other
  message closes an open model turn with ``<end_of_turn>\\n`` first.
* The generation prompt is ``<start_of_turn>model\\n``, or nothing when the model turn is still
  open (after tool calls or results): the model continues where the results end.
* Message content is a string, ``None`` (empty) or a list of ``{"type": "text", "text": ...}``
  parts joined with newlines. Tool-call arguments may be a JSON string (as the OpenAI API sends
  them): it is decoded the way vLLM decodes it before rendering (invalid JSON or a non-object
  becomes ``{}``).

Model output is parsed leniently (whitespace, a missing ``call:`` prefix, trailing commas, a
missing ``<end_function_call>`` at the very end, values written without ``<escape>``: numbers,
``true``/``false``/``null``, else text up to the next ``,:{}[]<``) and never raises: a broken call
is reported in :attr:`ParsedOutput.errors` and its text kept in the content. ``<escape>`` strings
stay strings whatever they look like; a number too large for a float stays text. Parsing stops at
``<start_function_response>`` (the model inventing a tool result; it is also a stop sequence) and
at ``<end_of_turn>``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BOS",
    "END_FUNCTION_CALL",
    "END_FUNCTION_DECLARATION",
    "END_FUNCTION_RESPONSE",
    "END_OF_TURN",
    "ESCAPE",
    "ESCAPE_REPLACEMENT",
    "FUNCTION_CALLING_TRIGGER",
    "START_FUNCTION_CALL",
    "START_FUNCTION_DECLARATION",
    "START_FUNCTION_RESPONSE",
    "START_OF_TURN",
    "STOP_SEQUENCES",
    "ParsedCall",
    "ParsedOutput",
    "StreamUpdate",
    "StreamingParser",
    "ToolCallDelta",
    "ToolChoice",
    "arguments_grammar",
    "encode_string",
    "encode_value",
    "gbnf_grammar",
    "parse_output",
    "render_call",
    "render_declaration",
    "render_prompt",
    "render_reply",
    "render_response",
    "structural_tag",
]

BOS = "<bos>"
START_OF_TURN = "<start_of_turn>"
END_OF_TURN = "<end_of_turn>"
START_FUNCTION_DECLARATION = "<start_function_declaration>"
END_FUNCTION_DECLARATION = "<end_function_declaration>"
START_FUNCTION_CALL = "<start_function_call>"
END_FUNCTION_CALL = "<end_function_call>"
START_FUNCTION_RESPONSE = "<start_function_response>"
END_FUNCTION_RESPONSE = "<end_function_response>"
ESCAPE = "<escape>"
ESCAPE_REPLACEMENT = "&lt;escape&gt;"
"""How a literal ``<escape>`` inside a string value is written: the token would end the string."""
FUNCTION_CALLING_TRIGGER = (
    "You are a model that can do function calling with the following functions"
)
STOP_SEQUENCES = (START_FUNCTION_RESPONSE,)
"""Stop generation here: after its calls the model would go on to invent the tool's result."""

_TERMINATORS = (START_FUNCTION_RESPONSE, END_OF_TURN)
_CALL_PREFIX = "call:"
_MAX_DEPTH = 64

ToolChoice = Literal["auto", "required", "forced"]

# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

_SCHEMA_KEYS = ("description", "enum", "items", "properties", "required", "type")


def encode_string(text: str) -> str:
    """``<escape>text<escape>``; a literal ``<escape>`` inside becomes ``&lt;escape&gt;``."""
    return ESCAPE + text.replace(ESCAPE, ESCAPE_REPLACEMENT) + ESCAPE


def encode_value(value: Any) -> str:
    """Encode a JSON value the way FunctionGemma reads and writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return encode_string(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{key}:{encode_value(item)}" for key, item in _dictsort(value)) + "}"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Iterable):
        return "[" + ",".join(encode_value(item) for item in value) + "]"
    return str(value)


def _dictsort(mapping: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
    """Jinja's ``dictsort``: by key, case-insensitively, ties in their original order."""
    return sorted(mapping.items(), key=lambda item: _ignore_case(item[0]))


def _ignore_case(key: Any) -> Any:
    return key.lower() if isinstance(key, str) else key


def _present(value: Any) -> bool:
    """Rendered at all: not missing, not null, not an empty string, list or object."""
    if value is None:
        return False
    return not (isinstance(value, str | list | tuple | dict) and len(value) == 0)


def _encode_schema(schema: Mapping[str, Any]) -> str:
    parts = []
    for key in _SCHEMA_KEYS:
        value = schema.get(key)
        if not _present(value):
            continue
        if key == "items" and isinstance(value, Mapping):
            encoded = _encode_schema(value)
        elif key == "properties" and isinstance(value, Mapping):
            encoded = (
                "{" + ",".join(f"{k}:{_encode_property(v)}" for k, v in _dictsort(value)) + "}"
            )
        elif key == "type" and isinstance(value, str):
            encoded = encode_string(value.upper())
        elif key == "type" and isinstance(value, list):
            encoded = (
                "["
                + ",".join(
                    encode_string(item.upper()) if isinstance(item, str) else encode_value(item)
                    for item in value
                )
                + "]"
            )
        else:
            encoded = encode_value(value)
        parts.append(f"{key}:{encoded}")
    return "{" + ",".join(parts) + "}"


def _encode_property(schema: Any) -> str:
    return _encode_schema(schema) if isinstance(schema, Mapping) else encode_value(schema)


def _function_of(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``function`` object of an OpenAI tool, or the tool itself when it is already flat."""
    function = tool.get("function")
    return function if isinstance(function, Mapping) else tool


def render_declaration(tool: Mapping[str, Any]) -> str:
    """One tool (OpenAI ``{"type": "function", "function": {...}}``) as a declaration block."""
    function = _function_of(tool)
    parts = []
    description = function.get("description")
    if _present(description):
        parts.append(f"description:{encode_value(description)}")
    parameters = function.get("parameters")
    if _present(parameters):
        encoded = (
            _encode_schema(parameters)
            if isinstance(parameters, Mapping)
            else encode_value(parameters)
        )
        parts.append(f"parameters:{encoded}")
    return (
        f"{START_FUNCTION_DECLARATION}declaration:{function.get('name')}"
        + "{"
        + ",".join(parts)
        + "}"
        + END_FUNCTION_DECLARATION
    )


def render_call(name: str, arguments: Mapping[str, Any]) -> str:
    """``<start_function_call>call:NAME{key:value,...}<end_function_call>``, keys sorted."""
    return f"{START_FUNCTION_CALL}{_CALL_PREFIX}{name}{encode_value(arguments)}{END_FUNCTION_CALL}"


def render_response(name: str, content: str) -> str:
    """A tool result: its text as the string ``value`` of the response."""
    return (
        f"{START_FUNCTION_RESPONSE}response:{name}"
        + "{value:"
        + encode_string(content)
        + "}"
        + END_FUNCTION_RESPONSE
    )


def render_reply(message: Mapping[str, Any]) -> str:
    """What the model writes for an assistant message, after its prompt: the trimmed text, the
    calls, and the stop the model ends on (``<start_function_response>`` after calls, where the
    results will follow; ``<end_of_turn>`` after text alone). The target text of training."""
    tool_calls = message.get("tool_calls")
    made = list(tool_calls) if isinstance(tool_calls, list) else []
    functions = [_function_of(call) for call in made if isinstance(call, Mapping)]
    calls = "".join(
        render_call(str(function.get("name")), _call_arguments(function.get("arguments")))
        for function in functions
    )
    end = START_FUNCTION_RESPONSE if calls else END_OF_TURN
    return _text(message.get("content")).strip() + calls + end


def _text(content: Any) -> str:
    """Message content as text: a string, nothing, or text parts joined with newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable) and not isinstance(content, Mapping):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return str(content)


def _call_arguments(raw: Any) -> Mapping[str, Any]:
    """Tool-call arguments the way vLLM hands them to the chat template: JSON text decoded,
    anything that is not an object (or not valid JSON) replaced by ``{}``."""
    if isinstance(raw, Mapping):
        return raw
    if isinstance(raw, str) and raw:
        try:
            decoded = json.loads(raw)
        except json.JSONDecodeError:
            return {}
        return decoded if isinstance(decoded, dict) else {}
    return {}


def _response_name(message: Mapping[str, Any], calls: Sequence[Any], position: int) -> str:
    name = message.get("name")
    if isinstance(name, str) and name:
        return name
    call_id = message.get("tool_call_id")
    for call in calls:
        if isinstance(call, Mapping) and call.get("id") is not None and call.get("id") == call_id:
            return str(_function_of(call).get("name"))
    if position < len(calls) and isinstance(calls[position], Mapping):
        return str(_function_of(calls[position]).get("name"))
    return "unknown"


def render_prompt(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
    bos_token: str = BOS,
) -> str:
    """The exact prompt text for a chat-completions conversation and tool list."""
    out = [bos_token]
    rest = list(messages)
    system: str | None = None
    if rest and rest[0].get("role") in ("system", "developer"):
        system = _text(rest[0].get("content")).strip()
        rest = rest[1:]
    if system is not None or tools:
        developer = system or ""
        if tools and FUNCTION_CALLING_TRIGGER not in developer:
            developer = (
                f"{developer}\n{FUNCTION_CALLING_TRIGGER}"
                if developer
                else FUNCTION_CALLING_TRIGGER
            )
        declarations = "".join(render_declaration(tool) for tool in tools or ())
        out.append(f"{START_OF_TURN}developer\n{developer}{declarations}{END_OF_TURN}\n")

    model_turn_open = False
    calls: list[Any] = []
    position = 0
    for message in rest:
        role = message.get("role")
        if role == "assistant":
            if not model_turn_open:
                out.append(f"{START_OF_TURN}model\n")
            out.append(_text(message.get("content")).strip())
            tool_calls = message.get("tool_calls")
            made = list(tool_calls) if isinstance(tool_calls, list) else []
            for call in made:
                function = _function_of(call) if isinstance(call, Mapping) else {}
                arguments = _call_arguments(function.get("arguments"))
                out.append(render_call(str(function.get("name")), arguments))
            if made:
                model_turn_open, calls, position = True, made, 0
            else:
                out.append(f"{END_OF_TURN}\n")
                model_turn_open = False
        elif role == "tool":
            if not model_turn_open:
                out.append(f"{START_OF_TURN}model\n")
            name = _response_name(message, calls, position)
            out.append(render_response(name, _text(message.get("content"))))
            model_turn_open = True
            position += 1
        else:
            if model_turn_open:
                out.append(f"{END_OF_TURN}\n")
                model_turn_open = False
            turn_role = "developer" if role == "system" else str(role)
            text = _text(message.get("content")).strip()
            out.append(f"{START_OF_TURN}{turn_role}\n{text}{END_OF_TURN}\n")
    if add_generation_prompt and not model_turn_open:
        out.append(f"{START_OF_TURN}model\n")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?P<float>(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_KEY_STOP = frozenset(':,{}[]<>"')
_BARE_STOP = frozenset(",}]<:{[")


@dataclass(frozen=True)
class ParsedCall:
    """One well-formed call: its name, typed arguments and where it sits in the output."""

    name: str
    arguments: dict[str, Any]
    start: int
    end: int

    def arguments_json(self) -> str:
        """The arguments as the OpenAI API carries them (JSON text, keys in the model's order)."""
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True)
class ParsedOutput:
    """Model output split into plain text and calls. Never raised from: bad output is data."""

    content: str
    """Everything that is not a well-formed call (a broken call's text stays here)."""
    calls: tuple[ParsedCall, ...] = ()
    errors: tuple[str, ...] = ()
    """One message per broken or truncated call."""

    @property
    def ok(self) -> bool:
        return not self.errors


class _EndOfText(Exception):
    """The text ends inside a construct: more output may complete it."""


class _Malformed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Cursor:
    __slots__ = ("pos", "text")

    def __init__(self, text: str, pos: int) -> None:
        self.text, self.pos = text, pos

    def skip_ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos].isspace():
            pos += 1
        self.pos = pos

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos]

    def starts(self, marker: str) -> bool:
        return self.text.startswith(marker, self.pos)

    def cut_short(self, marker: str) -> bool:
        """The rest of the text is a proper prefix of ``marker`` (it may still become it)."""
        rest = self.text[self.pos :]
        return len(rest) < len(marker) and marker.startswith(rest)

    def snippet(self) -> str:
        return repr(self.text[self.pos : self.pos + 20])


def _classify_bare(token: str) -> Any:
    """A value written without ``<escape>``: a number, true/false/null, or else a string."""
    if token == "true":
        return True
    if token == "false":
        return False
    if token == "null":
        return None
    match = _NUMBER.fullmatch(token)
    if match is not None:
        if not match.group("float"):
            return int(token)
        number = float(token)
        if math.isfinite(number):
            return number
    return token


def _parse_string(cursor: _Cursor) -> str:
    start = cursor.pos + len(ESCAPE)
    end = cursor.text.find(ESCAPE, start)
    if end == -1:
        raise _EndOfText
    cursor.pos = end + len(ESCAPE)
    return cursor.text[start:end]


def _parse_value(cursor: _Cursor, depth: int) -> Any:
    cursor.skip_ws()
    if cursor.at_end():
        raise _EndOfText
    if cursor.starts(ESCAPE):
        return _parse_string(cursor)
    if cursor.cut_short(ESCAPE):
        raise _EndOfText
    char = cursor.peek()
    if char == "{":
        return _parse_object(cursor, depth + 1)
    if char == "[":
        return _parse_array(cursor, depth + 1)
    start = cursor.pos
    text = cursor.text
    pos = start
    while pos < len(text) and text[pos] not in _BARE_STOP:
        pos += 1
    if pos >= len(text):
        raise _EndOfText
    cursor.pos = pos
    token = text[start:pos].strip()
    if not token:
        raise _Malformed(f"expected a value at {cursor.snippet()}")
    return _classify_bare(token)


def _parse_key(cursor: _Cursor) -> str:
    cursor.skip_ws()
    if cursor.at_end():
        raise _EndOfText
    if cursor.starts(ESCAPE):
        return _parse_string(cursor)
    if cursor.cut_short(ESCAPE):
        raise _EndOfText
    text = cursor.text
    start = pos = cursor.pos
    while pos < len(text) and text[pos] not in _KEY_STOP and not text[pos].isspace():
        pos += 1
    if pos >= len(text):
        raise _EndOfText
    if pos == start:
        raise _Malformed(f"expected an argument name at {cursor.snippet()}")
    cursor.pos = pos
    return text[start:pos]


def _parse_members(
    cursor: _Cursor,
    depth: int,
    on_member: Callable[[str, Any], None] | None = None,
    on_open_string: Callable[[str, str], None] | None = None,
) -> dict[str, Any]:
    """``{key:value,...}`` from the ``{`` on. ``on_member(key, value)`` sees each member as soon
    as its value is complete; ``on_open_string(key, text)`` sees a string value cut off by the end
    of the text (both only for streaming)."""
    if depth > _MAX_DEPTH:
        raise _Malformed("values are nested too deeply")
    cursor.pos += 1
    members: dict[str, Any] = {}
    cursor.skip_ws()
    if cursor.at_end():
        raise _EndOfText
    if cursor.peek() == "}":
        cursor.pos += 1
        return members
    while True:
        key = _parse_key(cursor)
        cursor.skip_ws()
        if cursor.at_end():
            raise _EndOfText
        if cursor.peek() != ":":
            raise _Malformed(f"expected ':' after {key!r}, found {cursor.snippet()}")
        cursor.pos += 1
        cursor.skip_ws()
        if on_open_string is not None and cursor.starts(ESCAPE):
            start = cursor.pos + len(ESCAPE)
            if cursor.text.find(ESCAPE, start) == -1:
                on_open_string(key, cursor.text[start:])
                raise _EndOfText
        value = _parse_value(cursor, depth)
        if key in members:
            raise _Malformed(f"argument {key!r} appears twice")
        members[key] = value
        if on_member is not None:
            on_member(key, value)
        cursor.skip_ws()
        if cursor.at_end():
            raise _EndOfText
        char = cursor.peek()
        cursor.pos += 1
        if char == "}":
            return members
        if char != ",":
            cursor.pos -= 1
            raise _Malformed(f"expected ',' or '}}' after {key!r}, found {cursor.snippet()}")
        cursor.skip_ws()
        if cursor.at_end():
            raise _EndOfText
        if cursor.peek() == "}":
            cursor.pos += 1
            return members


def _parse_object(cursor: _Cursor, depth: int) -> dict[str, Any]:
    return _parse_members(cursor, depth)


def _parse_array(cursor: _Cursor, depth: int) -> list[Any]:
    if depth > _MAX_DEPTH:
        raise _Malformed("values are nested too deeply")
    cursor.pos += 1
    items: list[Any] = []
    cursor.skip_ws()
    if cursor.at_end():
        raise _EndOfText
    if cursor.peek() == "]":
        cursor.pos += 1
        return items
    while True:
        items.append(_parse_value(cursor, depth))
        cursor.skip_ws()
        if cursor.at_end():
            raise _EndOfText
        char = cursor.peek()
        cursor.pos += 1
        if char == "]":
            return items
        if char != ",":
            cursor.pos -= 1
            raise _Malformed(f"expected ',' or ']' in a list, found {cursor.snippet()}")
        cursor.skip_ws()
        if cursor.at_end():
            raise _EndOfText
        if cursor.peek() == "]":
            cursor.pos += 1
            return items


_COMPLETE, _INCOMPLETE, _BROKEN = "complete", "incomplete", "broken"


@dataclass
class _Block:
    """One ``<start_function_call>`` block and how far it got."""

    start: int
    end: int = -1
    status: str = _INCOMPLETE
    name: str | None = None
    members: list[tuple[str, Any]] = field(default_factory=list)
    open_string: tuple[str, str] | None = None
    closed: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    def arguments_prefix(self) -> str:
        """The part of the final arguments JSON that can no longer change."""
        items = [
            f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"
            for key, value in self.members
        ]
        text = "{" + ", ".join(items)
        if self.closed:
            return text + "}"
        if self.open_string is not None:
            key, partial = self.open_string
            partial = partial[: len(partial) - _held_back(partial, (ESCAPE,))]
            text += (", " if items else "") + json.dumps(key, ensure_ascii=False) + ": "
            text += json.dumps(partial, ensure_ascii=False)[:-1]
        return text


def _held_back(text: str, markers: Iterable[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a marker."""
    longest = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return longest


def _parse_block(text: str, start: int, *, final: bool) -> _Block:
    block = _Block(start=start)
    cursor = _Cursor(text, start + len(START_FUNCTION_CALL))
    try:
        cursor.skip_ws()
        if cursor.starts(_CALL_PREFIX):
            cursor.pos += len(_CALL_PREFIX)
        elif cursor.cut_short(_CALL_PREFIX):
            raise _EndOfText
        name_start = cursor.pos
        while not cursor.at_end() and cursor.peek() in _NAME_CHARS:
            cursor.pos += 1
        name = text[name_start : cursor.pos]
        cursor.skip_ws()
        if cursor.at_end():
            raise _EndOfText
        if not name:
            raise _Malformed(f"expected a function name, found {cursor.snippet()}")
        if cursor.peek() != "{":
            raise _Malformed(f"expected '{{' after the function name {name!r}")
        block.name = name

        def on_member(key: str, value: Any) -> None:
            block.members.append((key, value))

        def on_open_string(key: str, partial: str) -> None:
            block.open_string = (key, partial)

        block.arguments = _parse_members(cursor, 1, on_member, on_open_string)
        block.closed = True
        cursor.skip_ws()
        if cursor.starts(END_FUNCTION_CALL):
            cursor.pos += len(END_FUNCTION_CALL)
        elif cursor.at_end():
            if not final:
                raise _EndOfText
        elif not (cursor.starts(START_FUNCTION_CALL) or any(map(cursor.starts, _TERMINATORS))):
            markers = (END_FUNCTION_CALL, START_FUNCTION_CALL, *_TERMINATORS)
            if final or not any(map(cursor.cut_short, markers)):
                raise _Malformed(f"expected {END_FUNCTION_CALL} after the arguments")
            raise _EndOfText
        block.end = cursor.pos
        block.status = _COMPLETE
    except _EndOfText:
        if final:
            block.status = _BROKEN
            block.error = "the output ends inside the call (cut off, e.g. by max_tokens)"
        else:
            block.status = _INCOMPLETE
    except _Malformed as exc:
        block.status = _BROKEN
        block.error = exc.message
    return block


def _recovery_end(finder: _Finder, start: int, *, final: bool) -> int | None:
    """Where a broken block's text ends: after its ``<end_function_call>``, else at the next
    call or terminator, else at the end (``None`` while streaming: not known yet)."""
    after = start + len(START_FUNCTION_CALL)
    next_start = finder.find(START_FUNCTION_CALL, after)
    end_call = finder.find(END_FUNCTION_CALL, after)
    if end_call != -1 and (next_start == -1 or end_call < next_start):
        return end_call + len(END_FUNCTION_CALL)
    stops = [i for i in (next_start, *finder.find_all(_TERMINATORS, after)) if i != -1]
    if stops:
        return min(stops)
    return len(finder.text) if final else None


class _Finder:
    """`str.find` that remembers each marker's next occurrence. The scan only moves forward, so
    each marker is searched for at most once per occurrence: linear time however many blocks
    (thousands of unclosed `<start_function_call>` would otherwise be quadratic)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._next: dict[str, tuple[int, int]] = {}
        """marker -> (searched from, found at or -1)."""

    def find(self, marker: str, start: int) -> int:
        cached = self._next.get(marker)
        if cached is not None:
            searched_from, found = cached
            if searched_from <= start and (found == -1 or found >= start):
                return found
        found = self.text.find(marker, start)
        self._next[marker] = (start, found)
        return found

    def find_all(self, markers: Iterable[str], start: int) -> list[int]:
        return [self.find(marker, start) for marker in markers]


@dataclass
class _Scan:
    content: str
    blocks: list[_Block]


def _scan(text: str, *, final: bool) -> _Scan:
    """Split output into content and call blocks. With ``final=False`` (streaming) stop at an
    unfinished block, hold back a tail that may still become a marker, and leave broken blocks'
    text out of the content (their start was already streamed as a call)."""
    content: list[str] = []
    blocks: list[_Block] = []
    finder = _Finder(text)
    pos = 0
    while True:
        call_at = finder.find(START_FUNCTION_CALL, pos)
        stops = [index for index in finder.find_all(_TERMINATORS, pos) if index != -1]
        stop_at = min(stops) if stops else -1
        if stop_at != -1 and (call_at == -1 or stop_at < call_at):
            content.append(text[pos:stop_at])
            break
        if call_at == -1:
            tail = text[pos:]
            if not final:
                tail = tail[: len(tail) - _held_back(tail, (START_FUNCTION_CALL, *_TERMINATORS))]
            content.append(tail)
            break
        content.append(text[pos:call_at])
        block = _parse_block(text, call_at, final=final)
        blocks.append(block)
        if block.status == _COMPLETE:
            pos = block.end
            continue
        if block.status == _INCOMPLETE:
            break
        end = _recovery_end(finder, call_at, final=final)
        if end is None:
            break
        if final:
            content.append(text[call_at:end])
        pos = end
    return _Scan(content="".join(content), blocks=blocks)


def parse_output(text: str) -> ParsedOutput:
    """Split complete model output into content and typed calls; never raises."""
    scan = _scan(text, final=True)
    calls = []
    errors = []
    for block in scan.blocks:
        if block.status == _COMPLETE and block.name is not None:
            calls.append(ParsedCall(block.name, block.arguments, block.start, block.end))
        else:
            label = f"call {block.name!r}" if block.name else "function call"
            errors.append(f"{label} at offset {block.start}: {block.error}")
    return ParsedOutput(content=scan.content, calls=tuple(calls), errors=tuple(errors))


# --------------------------------------------------------------------------------------------
# Streaming
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCallDelta:
    """New output for one call: ``name`` on its first delta, then pieces of the arguments."""

    index: int
    name: str | None
    arguments: str


@dataclass(frozen=True)
class StreamUpdate:
    content: str = ""
    tool_calls: tuple[ToolCallDelta, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.content or self.tool_calls)


@dataclass
class _Sent:
    index: int
    arguments: str = ""
    stopped: bool = False


class StreamingParser:
    """Turns growing model output into deltas: content as soon as it cannot turn into a marker,
    a call's name once ``call:NAME{`` is complete, its arguments JSON as each member completes
    (a string value as it grows). For well-formed output the concatenated deltas equal
    :func:`parse_output` of the whole output; a call that turns out broken cannot be taken back
    and simply stops growing.

    Feed it the whole text so far (:meth:`update`); at the end call :meth:`finish` (or, where
    the caller only has a hook for leftover arguments, like vLLM, :meth:`remaining_arguments`).
    """

    def __init__(self) -> None:
        self._text = ""
        self._content = ""
        self._sent: dict[int, _Sent] = {}

    @property
    def calls_started(self) -> int:
        return len(self._sent)

    def update(self, text: str) -> StreamUpdate:
        self._text = text
        scan = _scan(text, final=False)
        content = self._advance_content(scan.content)
        deltas = []
        for block in scan.blocks:
            if block.status == _BROKEN:
                if block.start in self._sent:
                    self._sent[block.start].stopped = True
                continue
            delta = self._advance(block.start, block.name, block.arguments_prefix())
            if delta is not None:
                deltas.append(delta)
        return StreamUpdate(content=content, tool_calls=tuple(deltas))

    def finish(self) -> StreamUpdate:
        """What is left once the output is complete: held-back text, the close of a call cut
        off right after its arguments."""
        result = parse_output(self._text)
        content = self._advance_content(result.content)
        deltas = []
        for call in result.calls:
            delta = self._advance(call.start, call.name, call.arguments_json())
            if delta is not None:
                deltas.append(delta)
        return StreamUpdate(content=content, tool_calls=tuple(deltas))

    def remaining_arguments(self) -> str:
        """What the complete output adds to the arguments of the last streamed call."""
        if not self._sent:
            return ""
        start = max(self._sent, key=lambda key: self._sent[key].index)
        for call in parse_output(self._text).calls:
            if call.start == start:
                delta = self._advance(start, call.name, call.arguments_json())
                return delta.arguments if delta is not None else ""
        return ""

    def _advance_content(self, content: str) -> str:
        if len(content) <= len(self._content) or not content.startswith(self._content):
            return ""
        piece = content[len(self._content) :]
        self._content = content
        return piece

    def _advance(self, start: int, name: str | None, arguments: str) -> ToolCallDelta | None:
        sent = self._sent.get(start)
        if sent is None:
            if name is None:
                return None
            sent = self._sent[start] = _Sent(index=len(self._sent), arguments=arguments)
            return ToolCallDelta(index=sent.index, name=name, arguments=arguments)
        if sent.stopped or len(arguments) <= len(sent.arguments):
            return None
        if not arguments.startswith(sent.arguments):
            sent.stopped = True
            return None
        piece = arguments[len(sent.arguments) :]
        sent.arguments = arguments
        return ToolCallDelta(index=sent.index, name=None, arguments=piece)


# --------------------------------------------------------------------------------------------
# Grammars: GBNF (llama.cpp) and xgrammar EBNF / structural tags (vLLM) share one dialect
# --------------------------------------------------------------------------------------------


def _literal(text: str) -> str:
    out = ['"']
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif not char.isprintable():  # control characters, line separators, invisible ones
            # \u and \U take exactly 4 and 8 digits in llama.cpp and xgrammar alike (\x does not).
            code = ord(char)
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _excluding(markers: str | Sequence[str], rule: str) -> dict[str, str]:
    """Rules for any text that contains none of ``markers`` (each starting with its only
    ``<``): a run without ``<``, then segments ``<`` + a run that does not spell the rest of
    any marker (a trie of the markers' rests, walked one character at a time)."""
    wanted = [markers] if isinstance(markers, str) else list(markers)
    assert all(marker[0] == "<" and "<" not in marker[1:] for marker in wanted)
    return {rule: f'[^<]* ( "<" {rule}-seg )*', f"{rule}-seg": _segment([m[1:] for m in wanted])}


def _segment(rests: list[str]) -> str:
    """After a ``<``: text that completes none of ``rests``."""
    firsts = sorted({rest[0] for rest in rests if rest})
    escaped = "".join("\\]" if char == "]" else char for char in firsts)
    options = [f"[^<{escaped}] [^<]*"]
    for char in firsts:
        tails = [rest[1:] for rest in rests if rest[0] == char]
        if "" in tails:  # a marker ends here: it may not be completed
            continue
        options.append(f"{_literal(char)} {_segment(tails)}")
    return f"( {' | '.join(options)} )?"


_BASE_RULES = {
    "str": f"{_literal(ESCAPE)} str-body {_literal(ESCAPE)}",
    **_excluding(ESCAPE, "str-body"),
    "int": '"-"? ( "0" | [1-9] [0-9]* )',
    "num": 'int ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?',
    "bool": '"true" | "false"',
    "null": '"null"',
    "key": "[A-Za-z_] [A-Za-z0-9_]*",
    "any": "str | num | bool | null | any-obj | any-arr",
    "any-obj": '"{" ( key ":" any ( "," key ":" any )* )? "}"',
    "any-arr": '"[" ( any ( "," any )* )? "]"',
}
_MARKER_FREE_STRINGS = _excluding(
    [ESCAPE, START_FUNCTION_CALL, END_FUNCTION_CALL, START_FUNCTION_RESPONSE], "str-body"
)
"""Strings that hold no call marker either. Where the markers are plain text (a base model
without FunctionGemma's control tokens), a string the model fills with `<end_function_call>`
and `<start_function_response>` would otherwise reach the stop sequence in the middle of the
call; no argument needs those markers as text."""


class _Grammar:
    def __init__(self, *, marker_free_strings: bool = False) -> None:
        self.rules: dict[str, str] = {}
        self._count = 0
        self.base = {**_BASE_RULES, **(_MARKER_FREE_STRINGS if marker_free_strings else {})}

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def value(self, schema: Any) -> str:
        """An expression for values valid under ``schema`` (the kinds of schema agents
        declare: typed scalars, enums, arrays, objects with properties; anything else: any)."""
        if not isinstance(schema, Mapping):
            return "any"
        if "const" in schema:
            return _literal(encode_value(schema["const"]))
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            choices = dict.fromkeys(_literal(encode_value(item)) for item in enum)
            return "( " + " | ".join(choices) + " )"
        for combinator in ("anyOf", "oneOf"):
            options = schema.get(combinator)
            if isinstance(options, list) and options:
                return "( " + " | ".join(self.value(option) for option in options) + " )"
        kind = schema.get("type")
        if isinstance(kind, list) and kind:
            return "( " + " | ".join(self.value({**schema, "type": item}) for item in kind) + " )"
        if kind == "string":
            return "str"
        if kind == "integer":
            return "int"
        if kind == "number":
            return "num"
        if kind == "boolean":
            return "bool"
        if kind == "null":
            return "null"
        if kind == "array":
            item = self.value(schema.get("items"))
            name = self.fresh("arr")
            self.rules[name] = f'"[" ( {item} ( "," {item} )* )? "]"'
            return name
        if kind == "object":
            return self.object(schema)
        return "any"

    def object(self, schema: Mapping[str, Any], *, strict: bool = True) -> str:
        properties = schema.get("properties")
        if not strict or not isinstance(properties, Mapping):
            return "any-obj"
        if not properties:
            return '"{}"'

        required = schema.get("required")
        required_names = set(required) if isinstance(required, list) else set()
        ordered = _dictsort(properties)
        name = self.fresh("obj")
        members = [f"{_literal(f'{key}:')} {self.value(prop)}" for key, prop in ordered]
        tails: list[str | None] = [None] * (len(ordered) + 1)
        for index in range(len(ordered) - 1, 0, -1):
            key = ordered[index][0]
            step = f'"," {members[index]}'
            if key not in required_names:
                step = f"( {step} )?"
            rule = f"{name}-t{index}"
            self.rules[rule] = " ".join(filter(None, [step, tails[index + 1]]))
            tails[index] = rule
        choices = []
        optional = "?"
        for index, (key, _prop) in enumerate(ordered):
            choices.append(" ".join(filter(None, [members[index], tails[index + 1]])))
            if key in required_names:
                optional = ""
                break
        self.rules[name] = '"{" ( ' + " | ".join(choices) + f' ){optional} "}}"'
        return name

    def render(self, root: str) -> str:
        rules = {"root": root, **self.rules, **self.base}
        return "".join(f"{name} ::= {body}\n" for name, body in rules.items())


def _tool_strict(tool: Mapping[str, Any], default: bool) -> bool:
    strict = _function_of(tool).get("strict")
    return strict if isinstance(strict, bool) else default


def arguments_grammar(parameters: Mapping[str, Any] | None, *, strict: bool = True) -> str:
    """A grammar (llama.cpp GBNF, also valid xgrammar EBNF) whose ``root`` is one argument
    block ``{...}``. ``strict``: only the declared keys, in rendering order, required ones
    present, values of the declared types; otherwise any well-formed block."""
    grammar = _Grammar()
    root = grammar.object(parameters or {}, strict=strict)
    return grammar.render(root)


def gbnf_grammar(
    tools: Sequence[Mapping[str, Any]],
    *,
    tool_choice: ToolChoice = "required",
    parallel: bool = True,
    strict: bool = True,
    marker_free_strings: bool = False,
) -> str:
    """A grammar for a whole reply (llama.cpp GBNF, also valid xgrammar EBNF).

    ``required``: one call (several if ``parallel``) to any of ``tools``; ``forced``: exactly one
    call to the first tool; ``auto``: text without calls, optionally followed by calls. Calls may
    be followed by ``<start_function_response>``, the stop sequence. ``strict`` is the default
    for tools without their own ``strict`` flag. ``marker_free_strings``: strings hold no call
    marker (for models that spell the markers as plain text).
    """
    if not tools:
        raise ValueError("a grammar for calls needs at least one tool")
    grammar = _Grammar(marker_free_strings=marker_free_strings)
    chosen = tools[:1] if tool_choice == "forced" else tools
    names = []
    for index, tool in enumerate(chosen):
        function = _function_of(tool)
        parameters = function.get("parameters")
        arguments = grammar.object(
            parameters if isinstance(parameters, Mapping) else {},
            strict=_tool_strict(tool, strict),
        )
        begin = f"{START_FUNCTION_CALL}{_CALL_PREFIX}{function.get('name')}"
        grammar.rules[f"call{index}"] = (
            f"{_literal(begin)} {arguments} {_literal(END_FUNCTION_CALL)}"
        )
        names.append(f"call{index}")
    grammar.rules["call"] = " | ".join(names)
    repeat = "call+" if parallel and tool_choice != "forced" else "call"
    calls = f"{repeat} {_literal(START_FUNCTION_RESPONSE)}?"
    if tool_choice == "auto":
        grammar.rules.update(_excluding(START_FUNCTION_CALL, "text"))
        return grammar.render(f"text ( {calls} )?")
    return grammar.render(calls)


def structural_tag(
    tools: Sequence[Mapping[str, Any]],
    tool_choice: ToolChoice,
    *,
    strict: bool = True,
) -> dict[str, Any]:
    """An xgrammar structural tag (JSON-ready dict) for vLLM's structured outputs.

    Each call is a tag ``<start_function_call>call:NAME`` + arguments grammar +
    ``<end_function_call>``. ``auto``: free text, calls dispatched on ``<start_function_call>``;
    ``required``: one or more calls back to back; ``forced``: exactly one call to the first tool.
    A call may be followed by ``<start_function_response>`` (the stop sequence). ``strict`` is the
    default for tools without their own ``strict`` flag (vLLM sets it on every tool).
    """
    chosen = tools[:1] if tool_choice == "forced" else tools
    tags = []
    for tool in chosen:
        function = _function_of(tool)
        parameters = function.get("parameters")
        tags.append(
            {
                "type": "tag",
                "begin": f"{START_FUNCTION_CALL}{_CALL_PREFIX}{function.get('name')}",
                "content": {
                    "type": "grammar",
                    "grammar": arguments_grammar(
                        parameters if isinstance(parameters, Mapping) else None,
                        strict=_tool_strict(tool, strict),
                    ),
                },
                "end": END_FUNCTION_CALL,
            }
        )
    if tool_choice == "auto" and not tags:
        return {"type": "structural_tag", "format": {"type": "any_text"}}
    if tool_choice == "auto":
        calls: dict[str, Any] = {
            "type": "triggered_tags",
            "triggers": [START_FUNCTION_CALL],
            "tags": tags,
            "at_least_one": False,
            "stop_after_first": False,
        }
        return {"type": "structural_tag", "format": calls}
    if not tags:
        raise ValueError(f"tool_choice={tool_choice!r} needs at least one tool")
    calls = {
        "type": "tags_with_separator",
        "tags": tags,
        "separator": "",
        "at_least_one": True,
        "stop_after_first": tool_choice == "forced",
    }
    stop = {
        "type": "optional",
        "content": {"type": "const_string", "value": START_FUNCTION_RESPONSE},
    }
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": [calls, stop]}}
