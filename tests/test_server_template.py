"""server/functiongemma_chat_template.jinja, rendered the way vLLM 0.32 renders it, against the
exact FunctionGemma prompt text and against remora.protocol.functiongemma.render_prompt."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any, ClassVar

import jinja2.ext
import jinja2.sandbox
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remora.jobs.runner import FINAL_REMINDER, REMINDER
from remora.protocol import functiongemma as fg
from remora.protocol.messages import ModelReply, ToolCall, tool_message

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "server"
TEMPLATE_PATH = SERVER / "functiongemma_chat_template.jinja"


# --------------------------------------------------------------------------------------------
# What vLLM does before and while rendering (vllm/renderers/chat_utils.py, transformers' jinja)
# --------------------------------------------------------------------------------------------


def vllm_conversation(messages: list[dict[str, Any]], content_format: str) -> list[dict[str, Any]]:
    """Messages as vLLM hands them to the template: content as one string
    (``--chat-template-content-format string``) or as text parts (``openai``), tool messages
    always as a string, ``name`` and ``tool_call_id`` kept, and tool-call arguments decoded from
    JSON (invalid JSON or a non-object becomes {}; an empty tool_calls list is dropped)."""
    conversation = []
    for message in messages:
        role = message["role"]
        content = message.get("content")
        parts = (
            []
            if content is None
            else [{"type": "text", "text": content}]
            if isinstance(content, str)
            else list(content)
        )
        texts = [part["text"] for part in parts if part.get("type") == "text"]
        result: dict[str, Any] = {"role": role}
        if content_format == "string" or role == "tool":
            result["content"] = "\n".join(texts)
        else:
            result["content"] = [{"type": "text", "text": text} for text in texts]
        if role == "assistant" and message.get("tool_calls") is not None:
            result["tool_calls"] = copy.deepcopy(message["tool_calls"])
        if role == "tool" and "tool_call_id" in message:
            result["tool_call_id"] = message["tool_call_id"]
        if isinstance(message.get("name"), str):
            result["name"] = message["name"]
        conversation.append(result)
    for result in conversation:
        if result["role"] != "assistant" or "tool_calls" not in result:
            continue
        if not result["tool_calls"]:
            del result["tool_calls"]
            continue
        for call in result["tool_calls"]:
            function = call["function"]
            raw = function.get("arguments")
            if not raw:
                function["arguments"] = {}
            elif not isinstance(raw, dict):
                try:
                    decoded = json.loads(raw)
                except json.JSONDecodeError:
                    decoded = None
                function["arguments"] = decoded if isinstance(decoded, dict) else {}
    return conversation


def vllm_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """``ChatCompletionToolsParam.model_dump()``: description and parameters always present."""
    if tools is None:
        return None
    dumped = []
    for tool in tools:
        function = tool["function"]
        entry = {
            "name": function["name"],
            "description": function.get("description"),
            "parameters": function.get("parameters"),
        }
        if function.get("strict") is not None:
            entry["strict"] = function["strict"]
        dumped.append({"type": "function", "function": entry})
    return dumped


def _raise(message: str) -> None:
    raise jinja2.TemplateError(message)


ENVIRONMENT = jinja2.sandbox.ImmutableSandboxedEnvironment(
    trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
)
ENVIRONMENT.globals["raise_exception"] = _raise
TEMPLATE = ENVIRONMENT.from_string(TEMPLATE_PATH.read_text(encoding="utf-8"))


def render_template(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    add_generation_prompt: bool = True,
    content_format: str = "string",
) -> str:
    return TEMPLATE.render(
        messages=vllm_conversation(messages, content_format),
        tools=vllm_tools(tools),
        add_generation_prompt=add_generation_prompt,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
    )


def both(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    add_generation_prompt: bool = True,
) -> str:
    """The prompt, after checking that template (both content formats) and module agree."""
    expected = fg.render_prompt(messages, tools, add_generation_prompt=add_generation_prompt)
    for content_format in ("string", "openai"):
        rendered = render_template(
            messages,
            tools,
            add_generation_prompt=add_generation_prompt,
            content_format=content_format,
        )
        assert rendered == expected, content_format
    return expected


# --------------------------------------------------------------------------------------------
# Conversations as remora/jobs/runner.py builds them
# --------------------------------------------------------------------------------------------


class LintAgent:
    """What the runner sends for an agent like the bundled lint agent: its system prompt and its
    tool schemas in the shape agent tools produce (``{"type": "function", "function": {name,
    description, parameters}}`` with ``description``, ``items`` and ``default`` per input and a
    ``required`` list). Written out here so the expected prompts stay put."""

    system_prompt = (
        "You review Python code. First call check_code. Then call submit_result with a "
        "one-sentence\nsummary of what check_code found.\n"
    )
    check_code: ClassVar[dict[str, Any]] = {
        "type": "function",
        "function": {
            "name": "check_code",
            "description": "Check the code for bare except clauses, print calls, mutable default "
            "arguments and TODO comments. Returns the findings.",
            "parameters": {
                "type": "object",
                "properties": {
                    "rules": {
                        "type": "array",
                        "description": "Rule codes to check; empty checks all of them.",
                        "items": {"type": "string", "enum": ["E722", "T201", "B006", "FIX002"]},
                        "default": [],
                    }
                },
                "required": [],
            },
        },
    }
    submit_result: ClassVar[dict[str, Any]] = {
        "type": "function",
        "function": {
            "name": "submit_result",
            "description": "Submit the review. Call it once, when done.",
            "parameters": {
                "type": "object",
                "properties": {
                    "summary": {
                        "type": "string",
                        "description": "One sentence on what check_code found.",
                    }
                },
                "required": ["summary"],
            },
        },
    }

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [self.check_code, self.submit_result]

    def submit_schema(self) -> dict[str, Any]:
        return self.submit_result


@pytest.fixture(scope="module")
def lint() -> LintAgent:
    return LintAgent()


USER = (
    "Review the function `shout` in app.py (lines 4-6):\n"
    "```python\ndef shout(text):\n    print(text)\n```\n"
)

LINT_DEVELOPER_TURN = (
    "<bos><start_of_turn>developer\n"
    "You review Python code. First call check_code. Then call submit_result with a one-sentence\n"
    "summary of what check_code found.\n"
    "You are a model that can do function calling with the following functions"
    "<start_function_declaration>declaration:check_code{description:<escape>Check the code for "
    "bare except clauses, print calls, mutable default arguments and TODO comments. Returns the "
    "findings.<escape>,parameters:{properties:{rules:{description:<escape>Rule codes to check; "
    "empty checks all of them.<escape>,items:{enum:[<escape>E722<escape>,<escape>T201<escape>,"
    "<escape>B006<escape>,<escape>FIX002<escape>],type:<escape>STRING<escape>},type:<escape>"
    "ARRAY<escape>}},type:<escape>OBJECT<escape>}}<end_function_declaration>"
    "<start_function_declaration>declaration:submit_result{description:<escape>Submit the "
    "review. Call it once, when done.<escape>,parameters:{properties:{summary:{description:"
    "<escape>One sentence on what check_code found.<escape>,type:<escape>STRING<escape>}},"
    "required:[<escape>summary<escape>],type:<escape>OBJECT<escape>}}<end_function_declaration>"
    "<end_of_turn>\n"
)
USER_TURN = (
    "<start_of_turn>user\n"
    "Review the function `shout` in app.py (lines 4-6):\n```python\ndef shout(text):\n"
    "    print(text)\n```<end_of_turn>\n"
)


def start(agent: LintAgent) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": agent.system_prompt},
        {"role": "user", "content": USER},
    ]


def test_first_turn(lint: LintAgent) -> None:
    prompt = both(start(lint), lint.tool_schemas())
    assert prompt == LINT_DEVELOPER_TURN + USER_TURN + "<start_of_turn>model\n"


def test_tool_results_continue_the_model_turn(lint: LintAgent) -> None:
    call = ToolCall(id="chatcmpl-tool-1", name="check_code", arguments='{"rules": ["T201"]}')
    reply = ModelReply(content=None, tool_calls=[call])
    findings = {"findings": [{"rule": "T201", "line": 5, "fixable": False, "score": 0.5}]}
    messages = [*start(lint), reply.as_message(), tool_message(call, json.dumps(findings))]
    prompt = both(messages, lint.tool_schemas())
    assert prompt == (
        LINT_DEVELOPER_TURN + USER_TURN + "<start_of_turn>model\n"
        "<start_function_call>call:check_code{rules:[<escape>T201<escape>]}<end_function_call>"
        "<start_function_response>response:check_code{value:<escape>"
        '{"findings": [{"rule": "T201", "line": 5, "fixable": false, "score": 0.5}]}'
        "<escape>}<end_function_response>"
    )
    # The last turn offers only submit_result: the developer turn changes, the rest does not.
    last = both(messages, [lint.submit_schema()])
    assert "declaration:check_code" not in last
    assert last.endswith(prompt[len(LINT_DEVELOPER_TURN) :])


def test_parallel_calls_typed_values_and_results_without_name(lint: LintAgent) -> None:
    calls = [
        ToolCall(
            id="a",
            name="check_code",
            arguments=json.dumps(
                {"rules": [], "depth": 2, "ratio": 0.25, "strict": True, "x": None}
            ),
        ),
        ToolCall(
            id="b", name="submit_result", arguments='{"summary": "1 print call, {x}: \\"quoted\\""}'
        ),
    ]
    reply = ModelReply(content="Checking.", tool_calls=calls)
    results = [
        {"role": "tool", "tool_call_id": "b", "content": "submitted"},
        {"role": "tool", "tool_call_id": "a", "content": '{"error": "boom"}'},
    ]
    prompt = both([*start(lint), reply.as_message(), *results], lint.tool_schemas())
    assert prompt.endswith(
        "<start_of_turn>model\nChecking."
        "<start_function_call>call:check_code{depth:2,ratio:0.25,rules:[],strict:true,x:null}"
        "<end_function_call>"
        '<start_function_call>call:submit_result{summary:<escape>1 print call, {x}: "quoted"'
        "<escape>}<end_function_call>"
        "<start_function_response>response:submit_result{value:<escape>submitted<escape>}"
        "<end_function_response>"
        '<start_function_response>response:check_code{value:<escape>{"error": "boom"}<escape>}'
        "<end_function_response>"
    )


def test_text_reply_then_reminder(lint: LintAgent) -> None:
    messages = [
        *start(lint),
        ModelReply(content="The code prints.").as_message(),
        {"role": "user", "content": REMINDER},
        ModelReply(content="  Still text.  ").as_message(),
        {"role": "user", "content": FINAL_REMINDER},
    ]
    prompt = both(messages, [lint.submit_schema()])
    assert prompt.endswith(
        USER_TURN + "<start_of_turn>model\nThe code prints.<end_of_turn>\n"
        f"<start_of_turn>user\n{REMINDER}<end_of_turn>\n"
        "<start_of_turn>model\nStill text.<end_of_turn>\n"
        f"<start_of_turn>user\n{FINAL_REMINDER}<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_results_then_a_new_user_turn_close_the_model_turn(lint: LintAgent) -> None:
    call = ToolCall(id="c", name="check_code", arguments="{}")
    messages = [
        *start(lint),
        ModelReply(tool_calls=[call]).as_message(),
        tool_message(call, "[]"),
        ModelReply(content="Nothing found.").as_message(),
    ]
    prompt = both(messages, lint.tool_schemas(), add_generation_prompt=False)
    assert prompt.endswith(
        "<start_function_call>call:check_code{}<end_function_call>"
        "<start_function_response>response:check_code{value:<escape>[]<escape>}"
        "<end_function_response>Nothing found.<end_of_turn>\n"
    )
    assert both(messages, lint.tool_schemas()).endswith("<end_of_turn>\n<start_of_turn>model\n")


def test_bad_arguments_render_as_vllm_decodes_them() -> None:
    for raw in ["not json", "[1, 2]", "42", "", None]:
        messages = [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "1", "type": "function", "function": {"name": "f", "arguments": raw}}
                ],
            },
        ]
        assert both(messages, None).endswith("<start_function_call>call:f{}<end_function_call>")


def test_escape_token_in_a_tool_result_cannot_end_the_string() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": 'ESCAPE = "<escape>"'},
    ]
    assert both(messages, None).endswith(
        '{value:<escape>ESCAPE = "&lt;escape&gt;"<escape>}<end_function_response>'
    )


def test_no_messages_and_no_tools() -> None:
    assert both([], None) == "<bos><start_of_turn>model\n"
    assert both([{"role": "user", "content": "hi"}], []) == (
        "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"
    )


# --------------------------------------------------------------------------------------------
# Any conversation: template and module agree byte for byte
# --------------------------------------------------------------------------------------------

TEXT = st.text(max_size=12) | st.sampled_from(
    ["", "  padded  ", "a\nb", "<escape>", "{x:1}", "ü🦈"]
)
NAMES = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,6}", fullmatch=True)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=6,
)
SCHEMA = st.recursive(
    st.sampled_from(
        [{"type": "string"}, {"type": "integer", "description": "n"}, {"type": "boolean"}, {}]
    )
    | st.lists(TEXT, min_size=1, max_size=3).map(lambda e: {"type": "string", "enum": e}),
    lambda children: (
        children.map(lambda s: {"type": "array", "items": s})
        | st.dictionaries(NAMES, children, max_size=3).map(
            lambda p: {"type": "object", "properties": p, "required": sorted(p)[:1]}
        )
    ),
    max_leaves=5,
)
TOOLS = st.lists(
    st.builds(
        lambda name, description, parameters: {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        },
        NAMES,
        st.none() | TEXT,
        st.none()
        | st.dictionaries(NAMES, SCHEMA, max_size=3).map(
            lambda p: {"type": "object", "properties": p, "required": sorted(p)}
        ),
    ),
    max_size=3,
)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append(
            {"role": draw(st.sampled_from(["system", "developer"])), "content": draw(TEXT)}
        )
    for turn in range(draw(st.integers(0, 3))):
        messages.append({"role": "user", "content": draw(TEXT)})
        calls = [
            {
                "id": f"call-{turn}-{index}",
                "type": "function",
                "function": {
                    "name": draw(NAMES),
                    "arguments": json.dumps(draw(st.dictionaries(TEXT, JSON, max_size=3))),
                },
            }
            for index in range(draw(st.integers(0, 3)))
        ]
        reply: dict[str, Any] = {"role": "assistant", "content": draw(st.none() | TEXT)}
        if calls or draw(st.booleans()):
            reply["tool_calls"] = calls
        messages.append(reply)
        for call in draw(st.permutations(calls)):
            result: dict[str, Any] = {"role": "tool", "content": draw(TEXT)}
            if draw(st.booleans()):
                result["tool_call_id"] = call["id"]
            if draw(st.booleans()):
                result["name"] = call["function"]["name"]
            messages.append(result)
        if calls and draw(st.booleans()):
            messages.append({"role": "assistant", "content": draw(TEXT)})
    return messages


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.none() | TOOLS, st.booleans())
def test_template_and_module_agree(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, generation: bool
) -> None:
    both(messages, tools, add_generation_prompt=generation)


# --------------------------------------------------------------------------------------------
# The entrypoint passes the template and parser to vLLM
# --------------------------------------------------------------------------------------------


def dry_run(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SERVER / "entrypoint.sh"), "--seed", "7"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "REMORA_DRY_RUN": "1", **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_entrypoint_flags() -> None:
    result = dry_run()
    assert result.returncode == 0, result.stderr
    command = result.stdout.split()
    assert command[:3] == ["vllm", "serve", "google/functiongemma-270m-it"]

    def flag(name: str) -> str:
        return command[command.index(name) + 1]

    assert flag("--chat-template") == str(TEMPLATE_PATH)
    assert flag("--chat-template-content-format") == "string"
    assert flag("--tool-parser-plugin") == str(SERVER / "remora_functiongemma_parser.py")
    assert flag("--tool-call-parser") == "remora_functiongemma"
    assert flag("--tool-strict-level") == "parameter"
    assert flag("--max-num-seqs") == "256"
    assert flag("--max-model-len") == "8192"
    assert "--enable-auto-tool-choice" in command
    assert "--enable-prefix-caching" in command
    assert "--enable-lora" not in command
    assert command[-2:] == ["--seed", "7"]


def test_entrypoint_lora_and_overrides() -> None:
    result = dry_run(
        REMORA_LORA_MODULES="lint=/adapters/lint  docstring=/adapters/doc",
        REMORA_MAX_LORA_RANK="32",
        REMORA_MODEL="/models/fg",
        REMORA_SERVED_MODEL_NAME="functiongemma",
        REMORA_ENABLE_PREFIX_CACHING="0",
        REMORA_SERVER_DIR="/opt/remora",
        REMORA_EXTRA_ARGS="--dtype bfloat16",
    )
    assert result.returncode == 0, result.stderr
    command = result.stdout.split()
    lora = command.index("--lora-modules")
    assert command[lora - 1] == "--enable-lora"
    assert command[lora + 1 : lora + 3] == ["lint=/adapters/lint", "docstring=/adapters/doc"]
    assert command[command.index("--max-lora-rank") + 1] == "32"
    assert command[command.index("--served-model-name") + 1] == "functiongemma"
    assert (
        command[command.index("--chat-template") + 1]
        == "/opt/remora/functiongemma_chat_template.jinja"
    )
    assert "--no-enable-prefix-caching" in command
    assert command[command.index("--dtype") + 1] == "bfloat16"


def test_entrypoint_serves_each_trained_adapter_under_its_card_name(tmp_path: Path) -> None:
    for agent in ("docstring", "test"):
        (tmp_path / agent / "peft").mkdir(parents=True)
        (tmp_path / agent / "card.json").write_text(json.dumps({"name": f"remora-{agent}"}))
    (tmp_path / "notes").mkdir()  # not an adapter: no card
    result = dry_run(REMORA_ADAPTERS_DIR=str(tmp_path), REMORA_LORA_MODULES="lint=/x/lint")
    assert result.returncode == 0, result.stderr
    command = result.stdout.split()
    lora = command.index("--lora-modules")
    assert command[lora + 1 : lora + 4] == [
        "lint=/x/lint",
        f"remora-docstring={tmp_path}/docstring/peft",
        f"remora-test={tmp_path}/test/peft",
    ]
    (tmp_path / "test" / "card.json").write_text("{")
    assert dry_run(REMORA_ADAPTERS_DIR=str(tmp_path)).returncode == 2


def test_entrypoint_rejects_bad_settings() -> None:
    assert dry_run(REMORA_LORA_MODULES="lint").returncode == 2
    assert dry_run(REMORA_ENABLE_PREFIX_CACHING="maybe").returncode == 2
