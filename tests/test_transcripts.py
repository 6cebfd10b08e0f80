"""`remora analyze --record DIR`: every turn as the model saw and wrote it, with its outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.errors import UserInputError
from remora.jobs.transcripts import FORMAT, read_transcripts
from remora.models.scripted.server import ScriptedModelServer, tool_call
from remora.protocol.functiongemma import START_FUNCTION_RESPONSE, render_prompt
from tests.test_analyze_e2e import run_cli


def test_record_writes_each_turn_as_the_model_saw_it(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    script = [
        tool_call("find_todos", {"marker": 7}),  # invalid: refused, goes back to the model
        tool_call("find_todos", {}),
        tool_call("submit_result", {"summary": "One TODO, now a NOTE.", "todo_count": 1}),
    ]
    record = project / "transcripts"
    with ScriptedModelServer(script=script) as server:
        args = ["analyze", "pkg", "--base-url", server.base_url, "--record", str(record)]
        code, out, err = run_cli([*args, "--format", "json"], capsys)
        requests = server.requests
    assert code == 1, out + err  # the TODO is a finding

    (line,) = (record / "probe.jsonl").read_text().splitlines()
    assert json.loads(line)["format"] == FORMAT
    (transcript,) = read_transcripts(record)
    assert (transcript.agent, transcript.file, transcript.node) == (
        "probe",
        "pkg/shout.py",
        "pkg/shout.py::shout",
    )
    assert transcript.verified and transcript.outcome == "checked"
    assert [turn.kind for turn in transcript.turns] == ["chat"] * 3
    # Each prompt is the exact FunctionGemma rendering of what the server was sent; each reply
    # is the assistant message the next request carries, as the model writes it.
    for turn, request in zip(transcript.turns, requests, strict=True):
        assert turn.prompt == render_prompt(request["messages"], request["tools"])
    # ... and the reply is what the model wrote: the next prompt goes on from prompt + reply.
    # (Rendered with this turn's tools: the last turn offers only submit_result.)
    for turn, request, after in zip(transcript.turns[:2], requests[:2], requests[1:], strict=True):
        following = render_prompt(after["messages"], request["tools"])
        assert following.startswith(turn.prompt + turn.reply)
        assert turn.reply.endswith(START_FUNCTION_RESPONSE)
    assert "call:submit_result{" in transcript.turns[2].reply
    assert transcript.turns[0].problems and "marker" in transcript.turns[0].problems[0]
    assert transcript.turns[1].problems == ()

    # A second recorded run appends (and runs every job again: the cache is not read).
    with ScriptedModelServer(script=script[1:]) as server:
        args = ["analyze", "pkg", "--base-url", server.base_url, "--record", str(record)]
        assert run_cli(args, capsys)[0] == 1
        assert len(server.requests) == 2
    assert len(read_transcripts(record)) == 2


def test_a_bad_transcript_line_is_named(tmp_path: Path) -> None:
    (tmp_path / "docstring.jsonl").write_text('{"format": "remora-transcript/0"}\n')
    with pytest.raises(UserInputError, match=r"docstring.jsonl:1: .*remora-transcript/1"):
        read_transcripts(tmp_path)
    with pytest.raises(UserInputError, match="no transcripts"):
        read_transcripts(tmp_path / "missing")
    (tmp_path / "docstring.jsonl").write_bytes(b'{"format": "\xff"}\n')
    with pytest.raises(UserInputError, match=r"docstring.jsonl: cannot read transcripts: .*utf-8"):
        read_transcripts(tmp_path)


def test_a_transcript_line_nested_too_deeply_is_named(tmp_path: Path) -> None:
    """`[[[[...]]]]` 100,000 deep: json.loads raised RecursionError, which escaped the reader
    (and `remora train --transcripts DIR`) as a traceback."""
    good = '{"format": "remora-transcript/0"}'  # never reached: line 1 is read first
    (tmp_path / "docstring.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n" + good + "\n")
    with pytest.raises(UserInputError) as caught:
        read_transcripts(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'docstring.jsonl'}:1: not a transcript: values nested too deeply to read"
    )
