"""FunctionGemma's native format: value encoding, declarations, prompts, parsing, streaming and
the grammars (checked with a small GBNF interpreter, so no llama.cpp or xgrammar is needed)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from functools import cache
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from remora.protocol import functiongemma as fg
from remora.protocol.functiongemma import (
    ESCAPE,
    START_FUNCTION_CALL,
    START_FUNCTION_RESPONSE,
    encode_value,
    parse_output,
    render_call,
)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def canonical(value: Any) -> str:
    """Type-exact comparison: 1, 1.0 and True differ."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# A GBNF interpreter for the subset the grammar builders write
# --------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r'\s*(?:(?P<lit>"(?:[^"\\]|\\.)*")|(?P<cls>\[(?:[^\]\\]|\\.)*\])|(?P<name>[A-Za-z0-9_-]+)'
    r"|(?P<op>[()|?*+]))"
)
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "]": "]", "[": "["}


def _unescape(body: str) -> str:
    out, index = [], 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
        elif body[index + 1] in _HEX_ESCAPES:
            size = _HEX_ESCAPES[body[index + 1]]
            out.append(chr(int(body[index + 2 : index + 2 + size], 16)))
            index += 2 + size
        else:
            out.append(_ESCAPES[body[index + 1]])
            index += 2
    return "".join(out)


def _tokenize(body: str) -> list[re.Match[str]]:
    tokens, pos = [], 0
    while body[pos:].strip():
        match = _TOKEN.match(body, pos)
        assert match is not None, f"not GBNF at {body[pos : pos + 20]!r}"
        tokens.append(match)
        pos = match.end()
    return tokens


class Gbnf:
    """Parses ``name ::= body`` lines and matches whole strings (all end positions, memoised)."""

    def __init__(self, source: str) -> None:
        self.rules: dict[str, Any] = {}
        for line in source.strip("\n").split("\n"):
            name, body = line.split(" ::= ", 1)
            tokens = _tokenize(body)
            node, rest = self._alt(tokens)
            assert not rest, f"unparsed tokens in rule {name}"
            self.rules[name] = node
        for name in self._refs():
            assert name in self.rules, f"undefined rule {name}"

    def _refs(self) -> set[str]:
        found: set[str] = set()

        def walk(node: Any) -> None:
            if node[0] == "ref":
                found.add(node[1])
            elif node[0] in ("alt", "seq"):
                for child in node[1]:
                    walk(child)
            elif node[0] == "rep":
                walk(node[1])

        for node in self.rules.values():
            walk(node)
        return found

    def _alt(self, tokens: list[re.Match[str]]) -> tuple[Any, list[re.Match[str]]]:
        options = []
        while True:
            seq, tokens = self._seq(tokens)
            options.append(seq)
            if tokens and tokens[0].group("op") == "|":
                tokens = tokens[1:]
                continue
            return ("alt", options), tokens

    def _seq(self, tokens: list[re.Match[str]]) -> tuple[Any, list[re.Match[str]]]:
        items = []
        while tokens and tokens[0].group("op") not in ("|", ")"):
            token, tokens = tokens[0], tokens[1:]
            if token.group("lit"):
                item: Any = ("lit", _unescape(token.group("lit")[1:-1]))
            elif token.group("cls"):
                item = self._class(token.group("cls")[1:-1])
            elif token.group("name"):
                item = ("ref", token.group("name"))
            else:
                assert token.group("op") == "(", token.group()
                item, tokens = self._alt(tokens)
                assert tokens and tokens[0].group("op") == ")"
                tokens = tokens[1:]
            while tokens and tokens[0].group("op") in ("?", "*", "+"):
                item = ("rep", item, tokens[0].group("op"))
                tokens = tokens[1:]
            items.append(item)
        return ("seq", items), tokens

    @staticmethod
    def _class(body: str) -> Any:
        negated = body.startswith("^")
        chars = _unescape(body[1:] if negated else body)
        ranges = []
        index = 0
        while index < len(chars):
            if index + 2 < len(chars) and chars[index + 1] == "-":
                ranges.append((chars[index], chars[index + 2]))
                index += 3
            else:
                ranges.append((chars[index], chars[index]))
                index += 1
        return ("cls", negated, tuple(ranges))

    def accepts(self, text: str, root: str = "root") -> bool:
        memo: dict[tuple[str, int], frozenset[int]] = {}

        def match(node: Any, pos: int) -> frozenset[int]:
            kind = node[0]
            if kind == "lit":
                return (
                    frozenset({pos + len(node[1])})
                    if text.startswith(node[1], pos)
                    else frozenset()
                )
            if kind == "cls":
                if pos >= len(text):
                    return frozenset()
                inside = any(low <= text[pos] <= high for low, high in node[2])
                return frozenset({pos + 1}) if inside != node[1] else frozenset()
            if kind == "ref":
                key = (node[1], pos)
                if key not in memo:
                    memo[key] = match(self.rules[node[1]], pos)
                return memo[key]
            if kind == "alt":
                return frozenset().union(*(match(option, pos) for option in node[1]))
            if kind == "seq":
                ends = frozenset({pos})
                for item in node[1]:
                    ends = frozenset().union(*(match(item, end) for end in ends))
                    if not ends:
                        break
                return ends
            item, op = node[1], node[2]
            if op == "?":
                return frozenset({pos}) | match(item, pos)
            reached: set[int] = {pos} if op == "*" else set()
            frontier = match(item, pos)
            while frontier - reached:
                new = frontier - reached
                reached |= new
                frontier = frozenset().union(*(match(item, end) for end in new))
            return frozenset(reached)

        return len(text) in match(("ref", root), 0)


@cache
def grammar_for(source: str) -> Gbnf:
    return Gbnf(source)


# --------------------------------------------------------------------------------------------
# Strategies: the schemas Remora agents declare, and values valid under them
# --------------------------------------------------------------------------------------------

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
TRICKY = [
    "<escape",
    "escape>",
    "<esc",
    "< escape >",
    "<ESCAPE>",
    "<escape\u200b>",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    '"',
    "'",
    "\\",
    "\n",
    "\r\n",
    "\t",
    " ",
    "123",
    "-4.5e3",
    "true",
    "null",
    '{"a": 1}',
    "[1, 2]",
    "<start_function_call>",
    "<end_function_call>",
    "<start_function_response>",
    "<end_of_turn>",
    "ü",
    "日本語",
    "🦈",
    "key:<escape",
]
STRINGS = (
    st.lists(st.one_of(st.sampled_from(TRICKY), st.text(max_size=6)), max_size=5)
    .map("".join)
    .filter(lambda text: ESCAPE not in text)
)
NUMBERS = st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False))

SCALAR_SCHEMAS = st.one_of(
    st.just({"type": "string"}),
    st.lists(STRINGS, min_size=1, max_size=4, unique=True).map(
        lambda values: {"type": "string", "enum": values}
    ),
    st.just({"type": "integer"}),
    st.just({"type": "number"}),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.just({"type": ["string", "null"]}),
)


def _object_schema(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    return st.dictionaries(NAMES, children, min_size=1, max_size=4).flatmap(
        lambda properties: st.lists(st.sampled_from(sorted(properties)), unique=True).map(
            lambda required: {"type": "object", "properties": properties, "required": required}
        )
    )


SCHEMAS = st.recursive(
    SCALAR_SCHEMAS,
    lambda children: st.one_of(
        children.map(lambda items: {"type": "array", "items": items}),
        _object_schema(children),
    ),
    max_leaves=6,
)
PARAMETERS = _object_schema(
    SCHEMAS.flatmap(
        lambda schema: st.fixed_dictionaries(
            {}, optional={"description": STRINGS, "default": st.just(None)}
        ).map(lambda extra: {**schema, **extra})
    )
)


def values_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of(*(values_for({**schema, "type": item}) for item in kind))
    if kind == "string":
        return STRINGS
    if kind == "integer":
        return st.integers()
    if kind == "number":
        return NUMBERS
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(values_for(schema["items"]), max_size=3)
    properties = schema["properties"]
    required = set(schema.get("required", []))
    return st.fixed_dictionaries(
        {name: values_for(prop) for name, prop in properties.items() if name in required},
        optional={
            name: values_for(prop) for name, prop in properties.items() if name not in required
        },
    )


SCHEMA_AND_ARGUMENTS = PARAMETERS.flatmap(
    lambda schema: values_for(schema).map(lambda arguments: (schema, arguments))
)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, STRINGS),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(NAMES, children, max_size=3)
    ),
    max_leaves=8,
)
ARGUMENTS = st.dictionaries(NAMES, JSON_VALUES, max_size=4)


# --------------------------------------------------------------------------------------------
# Encoding and declarations
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("Tokyo, JP", "<escape>Tokyo, JP<escape>"),
        ("123", "<escape>123<escape>"),
        ("", "<escape><escape>"),
        (15, "15"),
        (-2, "-2"),
        (0.5, "0.5"),
        (1e20, "1e+20"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
        ([1, "a", None], "[1,<escape>a<escape>,null]"),
        ([], "[]"),
        ({}, "{}"),
        ({"b": 1, "a": {"y": [True], "X": "s"}}, "{a:{X:<escape>s<escape>,y:[true]},b:1}"),
        ("say <escape> twice", "<escape>say &lt;escape&gt; twice<escape>"),
    ],
)
def test_values_are_encoded_by_type(value: Any, encoded: str) -> None:
    assert encode_value(value) == encoded


def test_declaration_matches_googles_documented_example() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Gets the current weather in a given location.",
            "parameters": {
                "type": "object",
                "properties": {
                    "unit": {
                        "type": "string",
                        "enum": ["celsius", "fahrenheit"],
                        "description": "The unit to return the temperature in.",
                    },
                    "location": {
                        "type": "string",
                        "description": (
                            'The city and state, e.g. "San Francisco, CA" or "Tokyo, JP"'
                        ),
                    },
                },
                "required": ["location"],
            },
        },
    }
    assert fg.render_declaration(tool) == (
        "<start_function_declaration>declaration:get_current_weather{description:<escape>Gets "
        "the current weather in a given location.<escape>,parameters:{properties:{location:"
        '{description:<escape>The city and state, e.g. "San Francisco, CA" or "Tokyo, JP"'
        "<escape>,type:<escape>STRING<escape>},unit:{description:<escape>The unit to return the "
        "temperature in.<escape>,enum:[<escape>celsius<escape>,<escape>fahrenheit<escape>],"
        "type:<escape>STRING<escape>}},required:[<escape>location<escape>],type:<escape>OBJECT"
        "<escape>}}<end_function_declaration>"
    )


def test_declaration_of_nested_and_empty_schemas() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "t",
            "description": None,
            "parameters": {
                "type": "object",
                "properties": {
                    "Zeta": {"type": "array", "items": {"type": "integer"}, "default": []},
                    "alpha": {
                        "type": "object",
                        "properties": {"b": {"type": ["string", "null"]}},
                        "required": [],
                    },
                },
                "required": [],
            },
        },
    }
    assert fg.render_declaration(tool) == (
        "<start_function_declaration>declaration:t{parameters:{properties:{alpha:{properties:"
        "{b:{type:[<escape>STRING<escape>,<escape>NULL<escape>]}},type:<escape>OBJECT<escape>},"
        "Zeta:{items:{type:<escape>INTEGER<escape>},type:<escape>ARRAY<escape>}},"
        "type:<escape>OBJECT<escape>}}<end_function_declaration>"
    )
    bare = {"type": "function", "function": {"name": "ping"}}
    assert fg.render_declaration(bare) == (
        "<start_function_declaration>declaration:ping{}<end_function_declaration>"
    )


# --------------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------------

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def test_prompt_without_system_message_gets_the_trigger_phrase() -> None:
    prompt = fg.render_prompt([{"role": "user", "content": " Weather in Oslo? \n"}], [WEATHER])
    assert prompt == (
        "<bos><start_of_turn>developer\n"
        "You are a model that can do function calling with the following functions"
        "<start_function_declaration>declaration:get_weather{description:<escape>Weather now."
        "<escape>,parameters:{properties:{city:{type:<escape>STRING<escape>}},required:"
        "[<escape>city<escape>],type:<escape>OBJECT<escape>}}<end_function_declaration>"
        "<end_of_turn>\n"
        "<start_of_turn>user\nWeather in Oslo?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_system_prompt_keeps_its_own_trigger_phrase() -> None:
    system = f"Context line.\n{fg.FUNCTION_CALLING_TRIGGER}"
    prompt = fg.render_prompt(
        [{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
        [WEATHER],
        add_generation_prompt=False,
    )
    assert prompt.startswith(
        f"<bos><start_of_turn>developer\nContext line.\n{fg.FUNCTION_CALLING_TRIGGER}"
        "<start_function_declaration>"
    )
    assert prompt.count(fg.FUNCTION_CALLING_TRIGGER) == 1
    assert prompt.endswith("<start_of_turn>user\nhi<end_of_turn>\n")


def test_no_tools_no_trigger_and_plain_turns() -> None:
    prompt = fg.render_prompt(
        [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            {"role": "assistant", "content": "ok"},
            {"role": "system", "content": "later"},
        ]
    )
    assert prompt == (
        "<bos><start_of_turn>developer\nBe brief.<end_of_turn>\n"
        "<start_of_turn>user\na\nb<end_of_turn>\n"
        "<start_of_turn>model\nok<end_of_turn>\n"
        "<start_of_turn>developer\nlater<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_calls_and_results_share_the_model_turn() -> None:
    messages = [
        {"role": "user", "content": "Oslo and Rome?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "not json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "rain"},
        {"role": "tool", "tool_call_id": "a", "name": "get_weather", "content": '{"temp": 3}'},
    ]
    prompt = fg.render_prompt(messages, [WEATHER])
    assert prompt.endswith(
        "<start_of_turn>user\nOslo and Rome?<end_of_turn>\n<start_of_turn>model\n"
        "<start_function_call>call:get_weather{city:<escape>Oslo<escape>}<end_function_call>"
        "<start_function_call>call:get_weather{}<end_function_call>"
        "<start_function_response>response:get_weather{value:<escape>rain<escape>}"
        "<end_function_response>"
        '<start_function_response>response:get_weather{value:<escape>{"temp": 3}<escape>}'
        "<end_function_response>"
    )
    closed = fg.render_prompt([*messages, {"role": "user", "content": "and?"}], [WEATHER])
    assert closed.endswith(
        "<end_function_response><end_of_turn>\n<start_of_turn>user\nand?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_result_names_fall_back_to_call_id_then_position() -> None:
    calls = [
        {"id": "x1", "type": "function", "function": {"name": "first", "arguments": "{}"}},
        {"id": "x2", "type": "function", "function": {"name": "second", "arguments": "{}"}},
    ]
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "x2", "content": "by id"},
        {"role": "tool", "content": "by position"},
        {"role": "tool", "content": "nothing left"},
    ]
    prompt = fg.render_prompt(messages)
    assert "response:second{value:<escape>by id<escape>}" in prompt
    assert "response:second{value:<escape>by position<escape>}" in prompt
    assert "response:unknown{value:<escape>nothing left<escape>}" in prompt


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


@FAST
@given(SCHEMA_AND_ARGUMENTS, NAMES)
def test_render_then_parse_returns_the_same_typed_values(
    schema_and_arguments: tuple[dict[str, Any], dict[str, Any]], name: str
) -> None:
    schema, arguments = schema_and_arguments
    jsonschema.validate(arguments, schema)
    parsed = parse_output(render_call(name, arguments))
    assert parsed.errors == ()
    assert parsed.content == ""
    [call] = parsed.calls
    assert call.name == name
    assert canonical(call.arguments) == canonical(arguments)
    assert canonical(json.loads(call.arguments_json())) == canonical(arguments)


@FAST
@given(ARGUMENTS)
def test_any_json_arguments_round_trip(arguments: dict[str, Any]) -> None:
    [call] = parse_output(render_call("f", arguments)).calls
    assert canonical(call.arguments) == canonical(arguments)


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_strings_stay_strings(text: str) -> None:
    [call] = parse_output(render_call("f", {"s": text, "n": [text]})).calls
    assert call.arguments == {"n": [text], "s": text}


def test_a_literal_escape_token_cannot_survive_a_string() -> None:
    [call] = parse_output(render_call("f", {"s": "a<escape>b"})).calls
    assert call.arguments == {"s": "a&lt;escape&gt;b"}


def test_leading_text_between_and_trailing_content() -> None:
    output = (
        "Checking. "
        + render_call("a", {"x": 1})
        + "\n"
        + render_call("b", {})
        + " done"
        + START_FUNCTION_RESPONSE
        + "response:a{value:<escape>made up<escape>}"
    )
    result = parse_output(output)
    assert [(c.name, c.arguments) for c in result.calls] == [("a", {"x": 1}), ("b", {})]
    assert result.content == "Checking. \n done"
    assert result.ok


@pytest.mark.parametrize(
    ("output", "arguments"),
    [
        (
            "<start_function_call>call:f{ a : 1 , b : <escape>x<escape> }<end_function_call>",
            {"a": 1, "b": "x"},
        ),
        ("<start_function_call>f{a:1}<end_function_call>", {"a": 1}),
        # A bare string with a comma cannot be told from the next argument: broken.
        ("<start_function_call>call:f{a:Tokyo, Japan,b:2}<end_function_call>", None),
        (
            "<start_function_call>call:f{a:Tokyo Japan,b:2}<end_function_call>",
            {"a": "Tokyo Japan", "b": 2},
        ),
        ("<start_function_call>call:f{a:[1,2,],}<end_function_call>", {"a": [1, 2]}),
        ("<start_function_call>call:f{a:1}", {"a": 1}),
        ("<start_function_call>call:f{a:1}<end_of_turn>", {"a": 1}),
        (
            "<start_function_call>call:f{a:-0.5e2,b:007,c:True,d:NaN}<end_function_call>",
            {"a": -50.0, "b": "007", "c": "True", "d": "NaN"},
        ),
        (
            "<start_function_call>call:f{<escape>odd key<escape>:1}<end_function_call>",
            {"odd key": 1},
        ),
        ("<start_function_call>call:f{a:1e999}<end_function_call>", {"a": "1e999"}),
    ],
)
def test_lenient_parsing(output: str, arguments: dict[str, Any] | None) -> None:
    result = parse_output(output)
    if arguments is None:
        assert not result.ok
        return
    assert result.ok, result.errors
    [call] = result.calls
    assert canonical(call.arguments) == canonical(arguments)


def test_names_with_dashes_and_dots_are_recognised() -> None:
    [call] = parse_output("<start_function_call>call:my-tool.v2{}<end_function_call>").calls
    assert call.name == "my-tool.v2"


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("<start_function_call>call:f{a:<escape>cut", "ends inside the call"),
        ("<start_function_call>call:f{a:1", "ends inside the call"),
        ("<start_function_call>call:get_wea", "ends inside the call"),
        ("<start_function_call>call:f{a 1}<end_function_call>", "expected ':'"),
        ("<start_function_call>call:f{a:1 b:2}<end_function_call>", "expected ',' or '}'"),
        ("<start_function_call>call:f{a:1,a:2}<end_function_call>", "appears twice"),
        ("<start_function_call>call:f{a:}<end_function_call>", "expected a value"),
        ("<start_function_call>call:{a:1}<end_function_call>", "expected a function name"),
        ("<start_function_call>call:f(a=1)<end_function_call>", "expected '{'"),
        ("<start_function_call>call:f{a:1}junk<end_function_call>", "expected <end_function_call>"),
        ("<start_function_call>call:f{a:" + "[" * 100 + "]" * 100 + "}", "nested too deeply"),
    ],
)
def test_broken_calls_are_reported_not_raised(output: str, message: str) -> None:
    result = parse_output("Before " + output)
    assert result.calls == ()
    assert len(result.errors) == 1
    assert message in result.errors[0]
    assert result.content == "Before " + output


def test_a_broken_call_does_not_hide_the_next_one() -> None:
    output = "<start_function_call>call:f{a b}<end_function_call>" + render_call("g", {"x": "y"})
    result = parse_output(output)
    assert [c.name for c in result.calls] == ["g"]
    assert len(result.errors) == 1
    assert result.content == "<start_function_call>call:f{a b}<end_function_call>"


MARKERS = [START_FUNCTION_CALL, fg.END_FUNCTION_CALL, ESCAPE, START_FUNCTION_RESPONSE, "call:f"]
NOISE = st.lists(
    st.one_of(
        st.sampled_from([*MARKERS, "{", "}", "[", "]", ",", ":", "a", "1", " "]),
        st.text(max_size=3),
    ),
    max_size=30,
).map("".join)


@FAST
@given(NOISE)
def test_parsing_never_raises(text: str) -> None:
    result = parse_output(text)
    for call in result.calls:
        json.loads(call.arguments_json())
    parser = fg.StreamingParser()
    for end in range(0, len(text) + 1, 3):
        parser.update(text[:end])
    parser.update(text)
    parser.finish()


# --------------------------------------------------------------------------------------------
# Streaming
# --------------------------------------------------------------------------------------------

PLAIN = st.text(st.characters(exclude_characters="<"), max_size=8) | st.sampled_from(
    ["<", "a < b", "<b>", "<start", "<escape>", "<end_function_call>"]
)
SEGMENTS = st.lists(
    st.one_of(PLAIN, st.tuples(NAMES, ARGUMENTS).map(lambda call: render_call(*call))),
    max_size=5,
)


def well_formed_outputs() -> st.SearchStrategy[str]:
    tail = st.sampled_from(["", START_FUNCTION_RESPONSE + "response:x{}", fg.END_OF_TURN])
    return st.tuples(SEGMENTS, tail).map(lambda parts: "".join(parts[0]) + parts[1])


def stream(
    output: str, cuts: list[int], finish: Callable[[fg.StreamingParser], Any]
) -> tuple[str, dict[int, list[str]]]:
    parser = fg.StreamingParser()
    content = ""
    calls: dict[int, list[str]] = {}
    for end in [*sorted(cuts), len(output)]:
        update = parser.update(output[:end])
        content += update.content
        for delta in update.tool_calls:
            entry = calls.setdefault(delta.index, ["", ""])
            entry[0] += delta.name or ""
            entry[1] += delta.arguments
    final = finish(parser)
    content += final.content
    for delta in final.tool_calls:
        entry = calls.setdefault(delta.index, ["", ""])
        entry[0] += delta.name or ""
        entry[1] += delta.arguments
    return content, calls


@FAST
@given(
    well_formed_outputs().flatmap(
        lambda out: st.tuples(st.just(out), st.lists(st.integers(0, len(out))))
    )
)
def test_streamed_deltas_add_up_to_the_parse(output_and_cuts: tuple[str, list[int]]) -> None:
    output, cuts = output_and_cuts
    expected = parse_output(output)
    assume(expected.ok)
    content, calls = stream(output, cuts, fg.StreamingParser.finish)
    assert content == expected.content
    assert [calls[index] for index in sorted(calls)] == [
        [call.name, call.arguments_json()] for call in expected.calls
    ]


@FAST
@given(st.tuples(NAMES, ARGUMENTS))
def test_arguments_stream_character_by_character(call: tuple[str, dict[str, Any]]) -> None:
    output = render_call(*call)
    parser = fg.StreamingParser()
    pieces = []
    for end in range(len(output) + 1):
        for delta in parser.update(output[:end]).tool_calls:
            pieces.append(delta)
    assert pieces[0].name == call[0]
    [parsed] = parse_output(output).calls
    assert "".join(delta.arguments for delta in pieces) == parsed.arguments_json()
    assert parser.finish() == fg.StreamUpdate()
    assert parser.remaining_arguments() == ""


def test_string_values_stream_as_they_grow() -> None:
    parser = fg.StreamingParser()
    seen = [
        parser.update(text)
        for text in [
            "Hi <start_fun",
            "Hi <start_function_call>call:f",
            "Hi <start_function_call>call:f{a:1,b:<escape>hel",
            "Hi <start_function_call>call:f{a:1,b:<escape>hello<esc",
            "Hi <start_function_call>call:f{a:1,b:<escape>hello<escape>}",
        ]
    ]
    assert [update.content for update in seen] == ["Hi ", "", "", "", ""]
    assert seen[1].tool_calls == ()
    assert seen[2].tool_calls == (fg.ToolCallDelta(0, "f", '{"a": 1, "b": "hel'),)
    assert seen[3].tool_calls == (fg.ToolCallDelta(0, None, "lo"),)
    assert seen[4].tool_calls == (fg.ToolCallDelta(0, None, '"}'),)


def test_held_back_text_and_a_missing_end_marker_come_out_at_the_finish() -> None:
    parser = fg.StreamingParser()
    assert parser.update("a <").content == "a "
    assert parser.finish().content == "<"
    parser = fg.StreamingParser()
    parser.update("<start_function_call>call:f{x:12")
    assert parser.update("<start_function_call>call:f{x:12").tool_calls == ()
    assert parser.remaining_arguments() == ""
    update = parser.update("<start_function_call>call:f{x:12}")
    assert update.tool_calls == (fg.ToolCallDelta(0, None, '"x": 12}'),)


def test_a_call_that_breaks_stops_growing() -> None:
    parser = fg.StreamingParser()
    first = parser.update("<start_function_call>call:f{a:1,")
    assert first.tool_calls == (fg.ToolCallDelta(0, "f", '{"a": 1'),)
    assert (
        parser.update("<start_function_call>call:f{a:1,b c:2}<end_function_call>ok").tool_calls
        == ()
    )
    assert parser.finish().tool_calls == ()


# --------------------------------------------------------------------------------------------
# Grammars
# --------------------------------------------------------------------------------------------


@FAST
@given(SCHEMA_AND_ARGUMENTS)
def test_strict_grammar_admits_every_schema_valid_call(
    schema_and_arguments: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    schema, arguments = schema_and_arguments
    encoded = encode_value(arguments)
    assert grammar_for(fg.arguments_grammar(schema)).accepts(encoded)
    assert grammar_for(fg.arguments_grammar(schema, strict=False)).accepts(encoded)


@FAST
@given(SCHEMA_AND_ARGUMENTS, st.data())
def test_strict_grammar_output_parses_to_schema_valid_arguments(
    schema_and_arguments: tuple[dict[str, Any], dict[str, Any]], data: st.DataObject
) -> None:
    schema, arguments = schema_and_arguments
    encoded = encode_value(arguments)
    # Mutate one byte: whatever the grammar still admits must parse and validate.
    index = data.draw(st.integers(0, len(encoded) - 1))
    char = data.draw(st.sampled_from([*'{}[],:"a1-.e<>', ESCAPE]))
    mutated = encoded[:index] + char + encoded[index + 1 :]
    if grammar_for(fg.arguments_grammar(schema)).accepts(mutated):
        result = parse_output(f"{START_FUNCTION_CALL}call:f{mutated}{fg.END_FUNCTION_CALL}")
        assert result.ok, result.errors
        try:
            jsonschema.validate(result.calls[0].arguments, schema)
        except jsonschema.ValidationError as error:
            # The one gap: a number too large for a float (1e309) is kept as its text.
            assert isinstance(error.instance, str)
            assert re.fullmatch(r"-?[0-9.]+[eE][-+]?[0-9]+", error.instance)
            assert math.isinf(float(error.instance))


SCHEMA = {
    "type": "object",
    "properties": {
        "rules": {"type": "array", "items": {"type": "string", "enum": ["E722", "T201"]}},
        "path": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "Flag": {"type": "boolean"},
    },
    "required": ["path", "count"],
}


@pytest.mark.parametrize(
    ("arguments", "ok"),
    [
        ("{count:3,path:<escape>a<escape>}", True),
        (
            "{count:-3,Flag:false,path:<escape><escape>,ratio:2.5e-3,rules:[<escape>T201<escape>]}",
            True,
        ),
        ("{count:3}", False),
        ("{path:<escape>a<escape>,count:3}", False),
        ("{count:3.0,path:<escape>a<escape>}", False),
        ("{count:3,path:a}", False),
        ("{count:3,path:<escape>a<escape>,extra:1}", False),
        ("{count:3,path:<escape>a<escape>,rules:[<escape>X<escape>]}", False),
        ("{count:3,path:<escape>a<escape>b<escape>}", False),
        ("{count: 3,path:<escape>a<escape>}", False),
        ("{count:03,path:<escape>a<escape>}", False),
    ],
)
def test_strict_grammar_rejects_what_the_schema_rejects(arguments: str, ok: bool) -> None:
    assert grammar_for(fg.arguments_grammar(SCHEMA)).accepts(arguments) is ok


def test_no_parameters_means_empty_braces_and_free_objects_stay_free() -> None:
    empty = grammar_for(fg.arguments_grammar({"type": "object", "properties": {}, "required": []}))
    assert empty.accepts("{}")
    assert not empty.accepts("{a:1}")
    free = grammar_for(fg.arguments_grammar({"type": "object"}))
    assert free.accepts("{a:1,b:[<escape>x<escape>,{c:null}]}")
    assert free.accepts("{}")


TOOLS = [
    {"type": "function", "function": {"name": "check_code", "parameters": SCHEMA}},
    {
        "type": "function",
        "function": {
            "name": "submit_result",
            "parameters": {
                "type": "object",
                "properties": {"summary": {"type": "string"}},
                "required": ["summary"],
            },
        },
    },
]
CHECK = render_call("check_code", {"path": "p", "count": 1})
SUBMIT = render_call("submit_result", {"summary": "s, {x} <end_function_call>"})


@pytest.mark.parametrize(
    ("tool_choice", "parallel", "expected"),
    [
        ("required", True, [True, True, True, False, False, False]),
        ("required", False, [True, False, True, False, False, False]),
        ("forced", True, [True, False, True, False, False, False]),
        ("auto", True, [True, True, True, True, True, False]),
    ],
)
def test_whole_reply_grammar(
    tool_choice: fg.ToolChoice, parallel: bool, expected: list[bool]
) -> None:
    grammar = grammar_for(fg.gbnf_grammar(TOOLS, tool_choice=tool_choice, parallel=parallel))
    replies = [
        CHECK,
        CHECK + SUBMIT,
        CHECK + START_FUNCTION_RESPONSE,
        "plain text",
        "text first " + SUBMIT,
        "<start_function_call>call:unknown{}<end_function_call>",
    ]
    assert [grammar.accepts(reply) for reply in replies] == expected


def test_gbnf_rule_names_suit_llama_cpp() -> None:
    source = fg.gbnf_grammar(TOOLS, tool_choice="auto")
    for line in source.splitlines():
        assert re.fullmatch(r"[a-zA-Z0-9-]+", line.split(" ::= ")[0])


def test_structural_tag_shapes() -> None:
    required = fg.structural_tag(TOOLS, "required")
    assert required["type"] == "structural_tag"
    calls, stop = required["format"]["elements"]
    assert calls["type"] == "tags_with_separator"
    assert calls["at_least_one"] and not calls["stop_after_first"]
    assert [tag["begin"] for tag in calls["tags"]] == [
        "<start_function_call>call:check_code",
        "<start_function_call>call:submit_result",
    ]
    assert {tag["end"] for tag in calls["tags"]} == {fg.END_FUNCTION_CALL}
    assert stop == {
        "type": "optional",
        "content": {"type": "const_string", "value": START_FUNCTION_RESPONSE},
    }
    tag_grammar = grammar_for(calls["tags"][0]["content"]["grammar"])
    assert tag_grammar.accepts("{count:1,path:<escape>p<escape>}")

    forced = fg.structural_tag(TOOLS[1:], "forced")["format"]["elements"][0]
    assert forced["stop_after_first"] and len(forced["tags"]) == 1

    auto = fg.structural_tag(TOOLS, "auto")["format"]
    assert auto["type"] == "triggered_tags"
    assert auto["triggers"] == [START_FUNCTION_CALL]
    assert fg.structural_tag([], "auto")["format"] == {"type": "any_text"}
    json.dumps(required)


def test_per_tool_strict_flag_overrides_the_default() -> None:
    loose = {"type": "function", "function": {**TOOLS[0]["function"], "strict": False}}
    grammar = fg.structural_tag([loose], "required", strict=True)["format"]["elements"][0]["tags"][
        0
    ]
    assert grammar_for(grammar["content"]["grammar"]).accepts("{anything:1}")
    strict = fg.structural_tag(TOOLS[:1], "required", strict=True)["format"]["elements"][0]["tags"][
        0
    ]
    assert not grammar_for(strict["content"]["grammar"]).accepts("{anything:1}")


def test_marker_free_strings_keep_call_markers_out_of_strings() -> None:
    """For a model that spells the markers as text (the embedded engine's stand-in), a string
    may not hold a call marker: the reply would reach the stop sequence mid-call."""
    tool = {
        "type": "function",
        "function": {
            "name": "submit_result",
            "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}},
        },
    }
    plain = grammar_for(fg.gbnf_grammar([tool], tool_choice="forced"))
    strict = grammar_for(fg.gbnf_grammar([tool], tool_choice="forced", marker_free_strings=True))

    def call(summary: str) -> str:
        arguments = f"{{summary:<escape>{summary}<escape>}}"
        return f"<start_function_call>call:submit_result{arguments}<end_function_call>"

    for fine in ("done", "a <b>bold</b> <e> <s> <end> <start_", "x < y"):
        assert plain.accepts(call(fine)) and strict.accepts(call(fine))
    for marker in ("<end_function_call>", "<start_function_response>", "<start_function_call>"):
        assert plain.accepts(call("a" + marker))
        assert not strict.accepts(call("a" + marker))
