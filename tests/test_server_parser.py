"""server/remora_functiongemma_parser.py without vLLM: the few vLLM 0.32 names it imports are
stood in for by small stubs with the same shapes, so the glue (registration, request tweaks,
non-streamed and streamed extraction, the structural tag) runs here; the parsing itself is
remora.protocol.functiongemma, tested in tests/test_functiongemma_protocol.py."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar, Literal

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from remora.protocol import functiongemma as fg

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "server"
PLUGIN_PATH = SERVER / "remora_functiongemma_parser.py"


# --------------------------------------------------------------------------------------------
# Stand-ins for vLLM 0.32 (vllm/entrypoints/generate/base/protocol.py, abstract_tool_parser.py,
# structural_tag_registry.py) and xgrammar's StructuralTag
# --------------------------------------------------------------------------------------------


class FunctionCall(BaseModel):
    id: str | None = Field(default=None, exclude=True)
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str = Field(default_factory=lambda: f"chatcmpl-tool-{uuid.uuid4().hex}")
    type: Literal["function"] = "function"
    function: FunctionCall


class DeltaFunctionCall(BaseModel):
    name: str | None = None
    arguments: str | None = None


class DeltaToolCall(BaseModel):
    id: str | None = None
    type: Literal["function"] | None = None
    index: int
    function: DeltaFunctionCall | None = None


class DeltaMessage(BaseModel):
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[DeltaToolCall] = Field(default_factory=list)


class ExtractedToolCallInformation(BaseModel):
    tools_called: bool
    tool_calls: list[ToolCall]
    content: str | None = None


class ToolParser:
    supports_required_and_named: bool = True
    structural_tag_model: str | None = None

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None) -> None:
        self.prev_tool_call_arr: list[dict[str, Any]] = []
        self.current_tool_id = -1
        self.current_tool_name_sent = False
        self.streamed_args_for_tool: list[str] = []
        self.model_tokenizer = tokenizer
        self.tools = list(tools or [])

    def adjust_request(self, request: Any) -> Any:
        return request

    def get_remaining_unstreamed_args(self) -> str:
        return ""


class ToolParserManager:
    lazy_parsers: ClassVar[dict[str, tuple[str, str]]] = {}

    @classmethod
    def register_module(cls, name: str) -> Any:
        def decorator(obj: type) -> type:
            cls.lazy_parsers[name] = (obj.__module__, obj.__name__)
            return obj

        return decorator


STRUCTURAL_TAGS: dict[str, Any] = {}


def register_vllm_structural_tag(model: str, *, builtin_tools: bool = False) -> Any:
    def decorator(function: Any) -> Any:
        STRUCTURAL_TAGS[model] = function
        return function

    return decorator


class StructuralTag:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> StructuralTag:
        json.dumps(data)
        return cls(data)


def _module(name: str, **attributes: Any) -> ModuleType:
    module = ModuleType(name)
    module.__path__ = []  # type: ignore[attr-defined]
    module.__dict__.update(attributes)
    return module


STUBS = {
    "vllm": _module("vllm"),
    "vllm.entrypoints": _module("vllm.entrypoints"),
    "vllm.entrypoints.generate": _module("vllm.entrypoints.generate"),
    "vllm.entrypoints.generate.base": _module("vllm.entrypoints.generate.base"),
    "vllm.entrypoints.generate.base.protocol": _module(
        "vllm.entrypoints.generate.base.protocol",
        DeltaFunctionCall=DeltaFunctionCall,
        DeltaMessage=DeltaMessage,
        DeltaToolCall=DeltaToolCall,
        ExtractedToolCallInformation=ExtractedToolCallInformation,
        FunctionCall=FunctionCall,
        ToolCall=ToolCall,
    ),
    "vllm.logger": _module("vllm.logger", init_logger=logging.getLogger),
    "vllm.renderers": _module("vllm.renderers"),
    "vllm.renderers.chat_utils": _module(
        "vllm.renderers.chat_utils",
        make_tool_call_id=lambda id_type="random", func_name=None, idx=None: (
            f"chatcmpl-tool-{uuid.uuid4().hex}"
        ),
    ),
    "vllm.tool_parsers": _module("vllm.tool_parsers"),
    "vllm.tool_parsers.abstract_tool_parser": _module(
        "vllm.tool_parsers.abstract_tool_parser",
        ToolParser=ToolParser,
        ToolParserManager=ToolParserManager,
    ),
    "vllm.tool_parsers.structural_tag_registry": _module(
        "vllm.tool_parsers.structural_tag_registry",
        register_vllm_structural_tag=register_vllm_structural_tag,
    ),
    "xgrammar": _module("xgrammar", StructuralTag=StructuralTag),
}


def _load_plugin(path: Path, name: str) -> ModuleType:
    """Like vLLM's ``import_from_path``: a module named after the file, put in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def stubs() -> Iterator[None]:
    saved = {name: sys.modules.get(name) for name in [*STUBS, "_remora_functiongemma_protocol"]}
    sys.modules.update(STUBS)
    yield
    for name, module in saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module


@pytest.fixture(scope="module")
def plugin(stubs: None) -> Iterator[ModuleType]:
    module = _load_plugin(PLUGIN_PATH, "remora_functiongemma_parser")
    yield module
    sys.modules.pop("remora_functiongemma_parser", None)


def make_parser(plugin: ModuleType) -> Any:
    return plugin.RemoraFunctionGemmaToolParser(tokenizer=None, tools=[])


def request(**fields: Any) -> SimpleNamespace:
    defaults: dict[str, Any] = {
        "tools": [{"type": "function"}],
        "tool_choice": "auto",
        "skip_special_tokens": True,
        "stop": [],
    }
    return SimpleNamespace(**{**defaults, **fields})


# --------------------------------------------------------------------------------------------
# Registration and request handling
# --------------------------------------------------------------------------------------------


def test_registers_parser_and_structural_tag(plugin: ModuleType) -> None:
    assert ToolParserManager.lazy_parsers["remora_functiongemma"] == (
        "remora_functiongemma_parser",
        "RemoraFunctionGemmaToolParser",
    )
    parser_class = plugin.RemoraFunctionGemmaToolParser
    assert parser_class.structural_tag_model == "remora_functiongemma"
    assert parser_class.supports_required_and_named is False
    assert STRUCTURAL_TAGS["remora_functiongemma"] is plugin.functiongemma_structural_tag


def test_adjust_request_keeps_markers_and_stops_before_invented_results(plugin: ModuleType) -> None:
    parser = make_parser(plugin)
    adjusted = parser.adjust_request(request(stop="END"))
    assert adjusted.skip_special_tokens is False
    assert adjusted.stop == ["END", "<start_function_response>"]
    assert parser.adjust_request(request(stop=None)).stop == ["<start_function_response>"]
    twice = parser.adjust_request(parser.adjust_request(request()))
    assert twice.stop == ["<start_function_response>"]
    untouched = parser.adjust_request(request(tool_choice="none", stop=None))
    assert untouched.skip_special_tokens is True and untouched.stop is None
    no_tools = parser.adjust_request(request(tools=None))
    assert no_tools.skip_special_tokens is True
    responses = SimpleNamespace(tools=[{}], tool_choice="required", skip_special_tokens=True)
    assert parser.adjust_request(responses).skip_special_tokens is False


def test_one_call_per_reply_stops_where_the_first_call_ends(plugin: ModuleType) -> None:
    parser = make_parser(plugin)
    single = parser.adjust_request(request(parallel_tool_calls=False, stop=None))
    assert single.stop == ["<start_function_response>", "<end_function_call>"]
    assert single.include_stop_str_in_output is True
    # What vLLM hands back when it stops there: the marker kept, so the call parses.
    text = "<start_function_call>call:run_ruff{path:<escape>a.py<escape>}<end_function_call>"
    extracted = parser.extract_tool_calls(text, single)
    assert [call.function.name for call in extracted.tool_calls] == ["run_ruff"]
    several = parser.adjust_request(request(parallel_tool_calls=True, stop=None))
    assert several.stop == ["<start_function_response>"]
    assert not hasattr(several, "include_stop_str_in_output")


@pytest.mark.parametrize("tool_choice", ["auto", "required", "forced"])
def test_structural_tag_comes_from_the_protocol_module(
    plugin: ModuleType, tool_choice: str
) -> None:
    class FunctionToolParam(BaseModel):  # xgrammar.openai_tool_call_schema's shape
        type: str = "function"
        function: dict[str, Any]

    tools = [
        FunctionToolParam(
            function={"name": "check_code", "parameters": {"type": "object"}, "strict": False}
        ),
        FunctionToolParam(
            function={
                "name": "submit_result",
                "parameters": {
                    "type": "object",
                    "properties": {"summary": {"type": "string"}},
                    "required": ["summary"],
                },
                "strict": True,
            }
        ),
    ]
    tag = plugin.functiongemma_structural_tag(tools, [], tool_choice, False, "")
    assert tag.data == fg.structural_tag([tool.model_dump() for tool in tools], tool_choice)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Non-streamed extraction
# --------------------------------------------------------------------------------------------


def test_extracts_typed_values(plugin: ModuleType) -> None:
    output = (
        "<start_function_call>call:check_code{count:3,label:<escape>123<escape>,ratio:0.5,"
        'flags:[true,false,null],nested:{deep:{k:<escape>{"json": 1}<escape>}},none:null}'
        "<end_function_call>"
    )
    result = make_parser(plugin).extract_tool_calls(output, request())
    assert result.tools_called is True
    assert result.content is None
    [call] = result.tool_calls
    assert call.type == "function" and call.id.startswith("chatcmpl-tool-")
    assert call.function.name == "check_code"
    assert json.loads(call.function.arguments) == {
        "count": 3,
        "label": "123",
        "ratio": 0.5,
        "flags": [True, False, None],
        "nested": {"deep": {"k": '{"json": 1}'}},
        "none": None,
    }


def test_parallel_calls_and_surrounding_text(plugin: ModuleType) -> None:
    output = (
        "  I will check.\n"
        + fg.render_call("check_code", {"rules": ["E722"]})
        + fg.render_call("submit_result", {"summary": "done"})
        + "<start_function_response>response:check_code{value:<escape>invented<escape>}"
    )
    result = make_parser(plugin).extract_tool_calls(output, request())
    assert [(c.function.name, json.loads(c.function.arguments)) for c in result.tool_calls] == [
        ("check_code", {"rules": ["E722"]}),
        ("submit_result", {"summary": "done"}),
    ]
    assert result.content == "I will check."


def test_plain_text_and_broken_calls_stay_content(
    plugin: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    parser = make_parser(plugin)
    plain = parser.extract_tool_calls("No calls needed.", request())
    assert plain.tools_called is False and plain.content == "No calls needed."
    assert parser.extract_tool_calls("  \n", request()).content is None
    broken = "<start_function_call>call:check_code{rules:[<escape>E722"
    with caplog.at_level(logging.WARNING):
        result = parser.extract_tool_calls(broken, request())
    assert result.tools_called is False
    assert result.content == broken
    assert "broken call" in caplog.text and "check_code" in caplog.text


# --------------------------------------------------------------------------------------------
# Streamed extraction, driven the way vLLM drives a tool parser
# --------------------------------------------------------------------------------------------


def stream_like_vllm(
    plugin: ModuleType, output: str, cuts: list[int]
) -> tuple[str, list[list[str]]]:
    parser = make_parser(plugin)
    previous = ""
    content = ""
    calls: dict[int, list[str]] = {}
    ends = sorted({*cuts, len(output)})
    for end in ends:
        current = output[:end]
        message = parser.extract_tool_calls_streaming(
            previous, current, current[len(previous) :], [], [], [], request()
        )
        if end == len(output) and message is not None and message.tool_calls:
            # Parser.finalize_generation: leftover arguments go on the last call of the last delta.
            last = message.tool_calls[-1]
            last.function.arguments = (last.function.arguments or "") + (
                parser.get_remaining_unstreamed_args()
            )
        previous = current
        if message is None:
            continue
        content += message.content or ""
        for delta in message.tool_calls:
            if delta.index not in calls:
                assert delta.id is not None and delta.type == "function"
                assert delta.function is not None and delta.function.name
                calls[delta.index] = ["", ""]
            else:
                assert delta.id is None and delta.function is not None
                assert delta.function.name is None
            calls[delta.index][0] += delta.function.name or ""
            calls[delta.index][1] += delta.function.arguments or ""
    return content, [calls[index] for index in sorted(calls)]


NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8).filter(lambda text: fg.ESCAPE not in text),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(NAMES, children, max_size=3),
    max_leaves=6,
)
CALLS = st.tuples(NAMES, st.dictionaries(NAMES, VALUES, max_size=4)).map(
    lambda call: fg.render_call(*call)
)
TEXT = st.text(max_size=10) | st.sampled_from([" ", "\n", "a < b", "<b>", "<start"])
OUTPUTS = st.tuples(
    st.lists(TEXT | CALLS, max_size=5),
    st.sampled_from(["", "<start_function_response>response:f{}", "<end_of_turn>"]),
).map(lambda parts: "".join(parts[0]) + parts[1])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    OUTPUTS.flatmap(
        lambda out: st.tuples(st.just(out), st.lists(st.integers(0, len(out)), max_size=12))
    )
)
def test_streamed_deltas_add_up_to_the_non_streamed_result(
    plugin: ModuleType, output_and_cuts: tuple[str, list[int]]
) -> None:
    output, cuts = output_and_cuts
    assume(fg.parse_output(output).ok)
    whole = fg.StreamingParser()
    whole.update(output)
    assume(not whole.finish())  # nothing held back at the very end (vLLM has no flush hook)
    content, calls = stream_like_vllm(plugin, output, cuts)
    expected = make_parser(plugin).extract_tool_calls(output, request())
    assert calls == [[c.function.name, c.function.arguments] for c in expected.tool_calls]
    assert (content.strip() or None) == (expected.content.strip() if expected.content else None)


def test_one_token_at_a_time(plugin: ModuleType) -> None:
    output = "Sure. " + fg.render_call("submit_result", {"summary": "1 print, no TODO", "n": 2})
    content, calls = stream_like_vllm(plugin, output, list(range(len(output))))
    assert content == "Sure. "
    assert calls == [["submit_result", '{"n": 2, "summary": "1 print, no TODO"}']]


def test_leftover_arguments_reach_the_last_call(plugin: ModuleType) -> None:
    parser = make_parser(plugin)
    text = "<start_function_call>call:f{a:12"
    first = parser.extract_tool_calls_streaming("", text, text, [], [], [], request())
    assert first.tool_calls[0].function.arguments == "{"
    assert parser.get_remaining_unstreamed_args() == ""
    closed = text + "}"
    last = parser.extract_tool_calls_streaming(text, closed, "}", [], [], [], request())
    assert last.tool_calls[0].function.arguments == '"a": 12}'


# --------------------------------------------------------------------------------------------
# One protocol module for client and server
# --------------------------------------------------------------------------------------------

SAMPLES = [
    "",
    "plain",
    fg.render_call("f", {"a": [1, {"b": None}], "c": "x<escape"}),
    "<start_function_call>call:f{a:1,a:2}<end_function_call>",
    "x" + fg.render_call("g", {}) + "<start_function_call>call:h{",
]


def test_plugin_runs_the_checkouts_protocol_module(plugin: ModuleType) -> None:
    assert Path(plugin.fg.__file__) == ROOT / "remora" / "protocol" / "functiongemma.py"
    assert plugin.fg.__file__ == fg.__file__
    for sample in SAMPLES:
        assert dataclasses.astuple(plugin.fg.parse_output(sample)) == dataclasses.astuple(
            fg.parse_output(sample)
        )
        assert plugin.fg.gbnf_grammar([{"function": {"name": "f"}}]) == fg.gbnf_grammar(
            [{"function": {"name": "f"}}]
        )


def test_image_layout_loads_the_copy_beside_the_plugin(stubs: None, tmp_path: Path) -> None:
    shutil.copy(PLUGIN_PATH, tmp_path / PLUGIN_PATH.name)
    shutil.copy(ROOT / "remora" / "protocol" / "functiongemma.py", tmp_path / "functiongemma.py")
    copy = _load_plugin(tmp_path / PLUGIN_PATH.name, "remora_functiongemma_parser_copy")
    try:
        assert Path(copy.fg.__file__) == tmp_path / "functiongemma.py"
        for sample in SAMPLES:
            assert dataclasses.astuple(copy.fg.parse_output(sample)) == dataclasses.astuple(
                fg.parse_output(sample)
            )
    finally:
        sys.modules.pop("remora_functiongemma_parser_copy", None)


def test_dockerfile_pins_vllm_and_ships_the_protocol_module(plugin: ModuleType) -> None:
    dockerfile = (SERVER / "Dockerfile").read_text(encoding="utf-8")
    assert f"ARG VLLM_VERSION={plugin.VLLM_VERSION}\n" in dockerfile
    assert "FROM vllm/vllm-openai:v${VLLM_VERSION}\n" in dockerfile
    copies = dict(re.findall(r"^COPY (\S+) (\S+)$", dockerfile, re.MULTILINE))
    assert copies["remora/protocol/functiongemma.py"] == "/opt/remora/functiongemma.py"
    assert (
        copies["server/remora_functiongemma_parser.py"]
        == "/opt/remora/remora_functiongemma_parser.py"
    )
    assert copies["server/functiongemma_chat_template.jinja"] == (
        "/opt/remora/functiongemma_chat_template.jinja"
    )
    assert "ENV REMORA_SERVER_DIR=/opt/remora\n" in dockerfile
    ignore = (SERVER / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    assert {f"!{source}" for source in copies} <= set(ignore)
    compose = (SERVER / "docker-compose.yml").read_text(encoding="utf-8")
    assert f"image: remora-vllm:{plugin.VLLM_VERSION}" in compose
    assert "/health" in compose and "driver: nvidia" in compose


def test_a_held_back_step_is_an_empty_delta_so_its_logprobs_are_sent(plugin: ModuleType) -> None:
    """vLLM drops a step whose delta is None, log-probabilities included; the call's opening
    (`<start_function_call>call:find`) is held back until the name is whole, and its tokens'
    log-probabilities are what the tool-choice confidence is computed from."""
    parser = make_parser(plugin)
    output = fg.render_call("find_todos", {"marker": "TODO"})
    previous = ""
    messages = []
    for end in range(1, len(output) + 1):
        current = output[:end]
        messages.append(
            parser.extract_tool_calls_streaming(
                previous, current, current[len(previous) :], [], [], [], request()
            )
        )
        previous = current
    assert all(message is not None for message in messages)  # every step sends a chunk
    named = [message for message in messages if message is not None and message.tool_calls]
    assert named[0].tool_calls[0].function is not None
    assert named[0].tool_calls[0].function.name == "find_todos"
    first = messages.index(named[0])
    assert first >= len("<start_function_call>call:find_todos")  # held back till then
    assert all(not m.tool_calls and m.content is None for m in messages[:first] if m is not None)
