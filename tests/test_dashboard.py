"""The dashboard: numbers folded from an event stream match the stream, computed here
independently; each job in flight shows what it is doing; a followed file is read as it grows,
a half-written last line waits for its newline; `analyze --dashboard` leaves the report alone.

tests/data/events-sample.jsonl was recorded by `record_events` below (two runs of two agents
over successful, failing and erroring jobs, the second run partly from the cache); regenerate
it with `python tests/test_dashboard.py`.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from remora.cli.main import main
from remora.dashboard.followers import EventFileFollower, StreamFollower, follow
from remora.dashboard.state import STATUSES, DashboardState
from remora.dashboard.view import render, show_following
from remora.models.scripted.replies import DelayedReply
from remora.models.scripted.server import (
    CallEveryTool,
    Reply,
    ScriptedModelServer,
    http_error,
    paced,
    text,
    tool_call,
)

SAMPLE = Path(__file__).parent / "data" / "events-sample.jsonl"

MIXED = "".join(
    f"def {name}():\n    # TODO: {name}\n    return 1\n\n\n"
    for name in ("ok1", "ok2", "ok3", "ok4", "boom", "mute")
)


# --- recording a stream ----------------------------------------------------------------------


def add_echo_agent(project: Path, probe_agent: Path) -> None:
    """A second agent (the probe under another name), so counts are per agent."""
    echo = probe_agent.parent.parent / "echo"
    shutil.copytree(probe_agent.parent, echo)
    definition = echo / "agent.yaml"
    definition.write_text(
        definition.read_text()
        .replace("name: probe", "name: echo")
        .replace("You inspect code.", "You echo code.")
    )
    config = project / "remora.yaml"
    config.write_text(config.read_text() + f"  echo: {{definition: {definition}}}\n")


def mixed_rule() -> Any:
    """boom's requests fail (error), mute never calls a tool (failed), the rest succeed after
    varied delays, so latency percentiles differ."""
    every = CallEveryTool(arguments={"replace_text": {"old": "zz", "new": "zz"}})
    delays = itertools.cycle([0.0, 0.004, 0.012, 0.03])

    def rule(body: dict[str, Any]) -> Reply:
        context = body["messages"][1]["content"]
        if context.startswith("Inspect boom"):
            return http_error(500, "the model fell over")
        if context.startswith("Inspect mute"):
            return text("I would rather not call any tool.")
        reply = every(body)
        assert not isinstance(reply, DelayedReply)
        return DelayedReply(reply, next(delays))

    return rule


def record_events(project: Path, events: Path) -> None:
    """Two runs into one file: the second answers the successful jobs from the cache."""
    (project / "pkg" / "mixed.py").write_text(MIXED)
    with ScriptedModelServer(rule=mixed_rule()) as server:
        for _ in range(2):
            main(
                [
                    "analyze",
                    "pkg",
                    "--agents",
                    "probe,echo",
                    "--events",
                    str(events),
                    "--base-url",
                    server.base_url,
                    "-c",
                    "runner.max_repairs=1",
                ]
            )


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- the numbers, computed independently -------------------------------------------------------


def expected_numbers(events: list[dict[str, Any]], window: float) -> dict[str, Any]:
    finished = [e for e in events if e["event"] == "job_finished"]
    statuses: dict[str, Counter[str]] = {}
    for event in finished:
        statuses.setdefault(event["agent"], Counter())[event["status"]] += 1
    responses = [e for e in events if e["event"] == "model_response"]
    latencies = [e["latency_s"] for e in responses]
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    first, last = events[0]["ts"], events[-1]["ts"]
    span = min(window, last - first)

    def recent(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in items if e["ts"] >= last - span]

    fresh = [e for e in finished if not e["cached"]]
    requests = [e for e in events if e["event"] == "model_request"]
    rated = [e["confidence"] for e in responses if e.get("confidence") is not None]
    return {
        "rated": len(rated),
        "low": sum(confidence < 0.5 for confidence in rated),
        "resamples": sum(e.get("attempt", 0) > 0 for e in requests),
        "statuses": statuses,
        "cached": Counter(e["agent"] for e in finished if e["cached"]),
        "p50": cuts[49],
        "p95": cuts[94],
        "p99": cuts[98],
        "responses": len(responses),
        "prompt": sum(e["prompt_tokens"] for e in responses),
        "completion": sum(e["completion_tokens"] for e in responses),
        "requests": len(requests),
        "jobs_per_s": len(recent(fresh)) / span,
        "requests_per_s": len(recent(requests)) / span,
        "tokens_per_s": sum(e["prompt_tokens"] + e["completion_tokens"] for e in recent(responses))
        / span,
        "errors": [e for e in finished if e["error"]],
    }


def check_dashboard(events: list[dict[str, Any]], window: float = 10.0) -> None:
    want = expected_numbers(events, window)
    state = DashboardState(window_s=window)
    state.feed_all(events)
    snap = state.snapshot()

    assert snap.in_flight == snap.queued == 0  # every job of every run finished
    assert (snap.activity, snap.activity_more) == ([], 0)
    assert {name: dict(c.statuses) for name, c in snap.agents.items()} == {
        name: {status: counts[status] for status in STATUSES}
        for name, counts in want["statuses"].items()
    }
    assert {name: c.cached for name, c in snap.agents.items()} == {
        name: want["cached"][name] for name in want["statuses"]
    }
    assert snap.latency is not None and snap.latency.count == want["responses"]
    assert snap.latency.p50 == pytest.approx(want["p50"])
    assert snap.latency.p95 == pytest.approx(want["p95"])
    assert snap.latency.p99 == pytest.approx(want["p99"])
    assert (snap.prompt_tokens, snap.completion_tokens) == (want["prompt"], want["completion"])
    assert snap.requests == want["requests"]
    assert snap.jobs_per_s == pytest.approx(want["jobs_per_s"])
    assert snap.requests_per_s == pytest.approx(want["requests_per_s"])
    assert snap.tokens_per_s == pytest.approx(want["tokens_per_s"])
    assert (snap.rated_replies, snap.low_confidence) == (want["rated"], want["low"])
    assert snap.resamples == want["resamples"]

    console = Console(record=True, width=160, color_system=None)
    console.print(render(snap))
    shown = console.export_text()
    cells = [line.replace("│", " ").split() for line in shown.splitlines()]
    rows = {cell[0]: cell[1:] for cell in cells if cell}
    for agent, counts in want["statuses"].items():
        # agent | success failed error skipped | cached | findings
        assert rows[agent][: len(STATUSES) + 1] == [
            *(str(counts[status]) for status in STATUSES),
            str(want["cached"][agent]),
        ], shown
    for name in ("p50", "p95", "p99"):
        assert f"{name} {want[name] * 1000:.1f} ms" in shown
    assert f"(n={want['responses']})" in shown
    assert (
        f"{want['prompt']} prompt  {want['completion']} completion  in {want['requests']} "
        "requests" in shown
    )
    assert f"{want['jobs_per_s']:.2f} jobs/s" in shown
    assert f"{want['tokens_per_s']:.1f} tokens/s" in shown
    assert "in flight 0  queued 0" in shown
    assert f"{want['resamples']} resamples" in shown
    newest = want["errors"][-1]
    assert f"{newest['node_id']} {newest['status']} {newest['error_code']}" in shown


# --- tests ---------------------------------------------------------------------------------------


def test_the_recorded_sample_shows_what_it_holds() -> None:
    events = load(SAMPLE)
    assert len({e["run_id"] for e in events}) == 2  # the sample is what it claims to be
    assert {e["status"] for e in events if e["event"] == "job_finished"} == {
        "success",
        "failed",
        "error",
    }
    assert any(e.get("cached") for e in events)
    check_dashboard(events)
    check_dashboard(events, window=0.05)  # a window shorter than the stream


def test_a_real_analyze_run_matches_its_dashboard(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    add_echo_agent(project, probe_agent)
    monkeypatch.chdir(project)
    events = tmp_path / "events.jsonl"
    record_events(project, events)
    capsys.readouterr()
    recorded = load(events)
    finished = [e for e in recorded if e["event"] == "job_finished"]
    assert len(finished) == 2 * 2 * 7  # two runs, two agents, 7 functions
    check_dashboard(recorded)

    assert main(["dashboard", "--events", str(events), "--no-follow"]) == 0
    shown = capsys.readouterr().out
    assert "remora dashboard" in shown and "p50 " in shown and "recent errors" in shown


def test_percentiles_of_few_values_and_no_values() -> None:
    state = DashboardState()
    assert state.snapshot().latency is None
    response = {"v": 1, "ts": 1.0, "run_id": "r", "event": "model_response", "job_id": "a:x"}
    state.feed({**response, "latency_s": 0.5, "prompt_tokens": 3, "completion_tokens": 1})
    latency = state.snapshot().latency
    assert latency is not None and (latency.p50, latency.p99, latency.count) == (0.5, 0.5, 1)


def test_in_flight_is_started_minus_finished_per_run() -> None:
    state = DashboardState()

    def job(event: str, run: str, node: str, **fields: Any) -> None:
        state.feed(
            {"v": 1, "ts": 1.0, "run_id": run, "event": event, "job_id": f"a:{node}",
             "node_id": node, "agent": "a", **fields}
        )  # fmt: skip

    state.feed({"v": 1, "ts": 1.0, "run_id": "r1", "event": "run_started", "jobs": 3})
    for node in ("x", "y", "z"):
        job("job_queued", "r1", node)
    job("job_started", "r1", "x")
    job("job_started", "r1", "y")
    job("job_started", "r2", "x")  # another run, the same job id
    assert (state.snapshot().in_flight, state.snapshot().queued) == (3, 1)
    job("job_finished", "r1", "x", status="success", cached=False, error=None)
    assert (state.snapshot().in_flight, state.snapshot().queued) == (2, 1)
    state.feed({"v": 1, "ts": 2.0, "run_id": "r1", "event": "run_finished", "summary": {}})
    assert (state.snapshot().in_flight, state.snapshot().queued) == (1, 0)  # r1 is over
    state.feed({"v": 1, "ts": 2.0, "event": "job_finished"})  # damaged: counted, not fatal
    state.feed_lines([b"not json", b"[1, 2]", b""])
    assert state.snapshot().unreadable == 3


def job_event(event: str, node: str, ts: float, run: str = "r1", **fields: Any) -> dict[str, Any]:
    return {"v": 1, "ts": ts, "run_id": run, "event": event, "job_id": f"probe:{node}",
            "node_id": node, "agent": "probe", **fields}  # fmt: skip


def response(node: str, ts: float, confidence: float | None, **fields: Any) -> dict[str, Any]:
    defaults = {
        "turn": 0,
        "attempt": 0,
        "latency_s": 0.1,
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "tool_calls": ["find_todos"],
        "confidence": confidence,
    }
    return job_event("model_response", node, ts, **{**defaults, **fields})


def shown_at(state: DashboardState, width: int, now: float | None = None) -> str:
    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    console.print(render(state.snapshot(now)))
    return console.export_text()


def test_jobs_in_flight_show_what_they_are_doing() -> None:
    """Two jobs in flight: one forming a call as its reply streams, then running the tool;
    the other waiting for the model. Each line goes once its job ends."""
    state = DashboardState()
    node_x, node_y = "pkg/mixed.py::ok1", "pkg/mixed.py::ok2"
    state.feed({"v": 1, "ts": 1.0, "run_id": "r1", "event": "run_started", "jobs": 2})
    for ts, node in ((1.0, node_x), (1.1, node_y)):
        state.feed(job_event("job_queued", node, ts))
        state.feed(job_event("job_started", node, ts))
    assert [(a.node_id, a.phase) for a in state.snapshot().activity] == [
        (node_x, "starting"),
        (node_y, "starting"),
    ]
    for node in (node_x, node_y):
        state.feed(job_event("model_request", node, 2.0, turn=0, attempt=0, messages=2,
                             tools=["find_todos", "replace_text"], payload=None))  # fmt: skip
    partial = '{"pattern": "TO'
    progress = {"turn": 0, "content_chars": 0}
    calls = [{"name": "find_todos", "arguments": partial}]
    state.feed(job_event("model_progress", node_x, 2.3, calls=calls, **progress))
    state.feed(job_event("model_progress", node_x, 2.6,
                         calls=[{"name": "find_todos", "arguments": partial + "DO"}],
                         **progress))  # fmt: skip
    snap = state.snapshot(now=3.0)
    assert snap.in_flight == 2 and snap.activity_more == 0
    forming, waiting = snap.activity  # in the order they started
    assert (forming.agent, forming.node_id, forming.phase) == ("probe", node_x, "forming")
    assert (forming.tool, forming.arguments) == ("find_todos", partial + "DO")
    assert forming.since_ts == 2.3  # the same call, growing: since its first progress
    assert (waiting.node_id, waiting.phase, waiting.since_ts) == (node_y, "waiting", 2.0)

    shown = shown_at(state, 100, now=3.0)
    assert 'forming find_todos({"pattern": "TODO)' in shown, shown
    assert "waiting for the model" in shown and node_y in shown
    assert "0.7s" in shown and "1.0s" in shown  # how long each has been at it
    narrow = shown_at(state, 80, now=3.0)
    lines = narrow.splitlines()  # one line a job, the arguments cut to fit
    assert any(node_x in line and "forming find_todos({" in line for line in lines), narrow
    assert any(node_y in line and "waiting for the model" in line for line in lines), narrow

    state.feed(response(node_x, 3.0, 0.9))
    assert state.snapshot().activity[0].phase == "replied"
    state.feed(job_event("tool_call", node_x, 3.1, tool="find_todos", payload=None))
    running = state.snapshot().activity[0]
    assert (running.phase, running.tool, running.arguments) == ("running", "find_todos", "")
    assert "running find_todos" in shown_at(state, 100)
    state.feed(job_event("tool_result", node_x, 3.2, tool="find_todos", ok=True,
                         duration_s=0.1, error=None, payload=None))  # fmt: skip
    state.feed(job_event("job_finished", node_x, 3.5, status="success", cached=False,
                         error=None, findings=1))  # fmt: skip
    assert [a.node_id for a in state.snapshot().activity] == [node_y]
    shown = shown_at(state, 100)
    assert "find_todos" not in shown and "waiting for the model" in shown

    state.feed(job_event("model_progress", node_y, 3.6, turn=0, calls=[], content_chars=40))
    assert "writing text (40 chars)" in shown_at(state, 100)
    state.feed({"v": 1, "ts": 4.0, "run_id": "r1", "event": "run_finished", "summary": {}})
    assert state.snapshot().activity == [] and "doing" not in shown_at(state, 100)
    # Events of jobs not known to be in flight change nothing; a damaged one is counted.
    state.feed(job_event("model_progress", node_y, 4.1, turn=0, calls=calls, content_chars=0))
    state.feed(job_event("model_progress", node_y, 4.1, turn=0, calls="find_todos"))
    assert (state.snapshot().activity, state.unreadable) == ([], 1)


def test_activity_rows_are_capped_with_a_count_of_the_rest() -> None:
    state = DashboardState(activity_rows=2)
    for index in range(5):
        state.feed(job_event("job_started", f"n{index}", 1.0 + index))
    state.feed(job_event("job_finished", "n0", 9.0, status="success", cached=False, error=None))
    snap = state.snapshot()
    assert [a.node_id for a in snap.activity] == ["n1", "n2"]
    assert (snap.in_flight, snap.activity_more) == (4, 2)
    assert "and 2 more" in shown_at(state, 80)


def test_confidence_and_resamples_are_counted() -> None:
    state = DashboardState()
    state.feed(job_event("job_started", "x", 1.0))
    request = {"turn": 0, "messages": 2, "tools": ["a", "b"], "payload": None}
    state.feed(job_event("model_request", "x", 1.0, attempt=0, **request))
    state.feed(response("x", 1.1, 0.3))  # unsure: resampled
    state.feed(job_event("model_request", "x", 1.2, attempt=1, **request))
    assert state.snapshot().activity[0].attempt == 1
    assert "waiting for the model (resample 1)" in shown_at(state, 100)
    state.feed(response("x", 1.3, 0.8, attempt=1))
    state.feed(response("x", 1.4, 0.5))  # not below 0.5
    state.feed(response("x", 1.5, None))  # no choice, or no log-probabilities
    old = response("x", 1.6, None)
    del old["confidence"], old["attempt"]  # a stream from before confidences
    state.feed(old)
    state.feed(job_event("model_request", "x", 1.7, **request))  # no attempt: the first
    snap = state.snapshot()
    assert (snap.rated_replies, snap.low_confidence, snap.resamples) == (3, 1, 1)
    assert (snap.requests, state.unreadable) == (3, 0)
    shown = shown_at(state, 100)
    assert "1/3 replies below 0.5 (33%)  1 resamples" in shown
    assert "50 prompt  10 completion  in 3 requests" in shown
    assert "no replies rated yet  0 resamples" in shown_at(DashboardState(), 100)


def test_follower_reads_appended_lines_and_waits_for_a_partial_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    follower = EventFileFollower(path)
    assert follower.read() == []  # not there yet: waited for
    lines = [json.dumps({"n": n}).encode() for n in range(4)]
    with path.open("ab") as out:
        out.write(lines[0] + b"\n" + lines[1] + b"\n" + lines[2][:3])
    assert follower.read() == lines[:2]
    assert follower.read() == []
    with path.open("ab") as out:
        out.write(lines[2][3:] + b"\n" + lines[3])
    assert follower.read() == [lines[2]]
    assert follower.finish() == [lines[3]]  # the stream ended without a newline
    path.write_bytes(lines[0] + b"\n")  # truncated and rewritten: read from the start
    assert follower.read() == [lines[0]]
    small = EventFileFollower(path, chunk=4)  # a long file is read a chunk at a time
    assert (small.read(), small.behind) == ([], True)
    assert (small.read(), small.behind) == ([], True)
    assert (small.read(), small.behind) == ([lines[0]], False)  # 9 bytes, newline included
    small.close()
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(lines[1] + b"\n")
    os.replace(replacement, path)  # replaced by another file (log rotation)
    assert follower.read() == [lines[1]]
    follower.close()


def test_follow_picks_up_lines_while_the_file_grows(tmp_path: Path) -> None:
    events = load(SAMPLE)
    path = tmp_path / "events.jsonl"
    state = DashboardState()
    polls = 0

    def on_poll() -> None:
        nonlocal polls
        polls += 1

    async def scenario() -> None:
        stop = anyio.Event()
        follower = EventFileFollower(path)
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: follow(follower, state, on_poll=on_poll, interval=0.01, stop=stop)
            )
            with path.open("a") as out:
                for index, event in enumerate(events):
                    line = json.dumps(event) + "\n"
                    if index == 10:  # a writer caught mid-line
                        out.write(line[:7])
                        out.flush()
                        await wait_for(lambda: state.events == 10)
                        await anyio.sleep(0.05)
                        assert state.events == 10 and state.unreadable == 0
                        line = line[7:]
                    out.write(line)
                    out.flush()
            await wait_for(lambda: state.events == len(events))
            stop.set()
        follower.close()

    anyio.run(scenario)
    assert state.unreadable == 0 and polls > 1
    check_numbers_equal(state, events)


def test_the_live_view_follows_a_file_and_shows_the_last_state_when_stopped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(SAMPLE.read_bytes())
    state = DashboardState()
    console = Console(record=True, width=160, file=io.StringIO(), color_system=None)

    follower = EventFileFollower(path)

    async def scenario() -> None:
        with anyio.move_on_after(0.3):  # as Ctrl-C would, later
            await show_following(follower, state, console, str(path))

    anyio.run(scenario)
    follower.close()
    shown = console.export_text()
    want = expected_numbers(load(SAMPLE), 10.0)
    assert f"remora dashboard  {path}" in shown
    assert f"p99 {want['p99'] * 1000:.1f} ms" in shown


def test_a_pipe_is_followed_until_it_ends() -> None:
    events = load(SAMPLE)
    read_end, write_end = os.pipe()
    follower = StreamFollower(read_end)
    try:
        state = DashboardState()
        assert follower.read() == []  # nothing yet, and no blocking
        data = "".join(json.dumps(e) + "\n" for e in events).encode()
        os.write(write_end, data[:100])
        state.feed_lines(follower.read())
        os.write(write_end, data[100:-1])  # all but the last newline
        os.close(write_end)
        state.feed_lines(follower.read())
        assert follower.ended
        check_numbers_equal(state, events)
    finally:
        follower.close()
        os.close(read_end)


def check_numbers_equal(state: DashboardState, events: list[dict[str, Any]]) -> None:
    whole = DashboardState()
    whole.feed_all(events)
    assert state.snapshot() == whole.snapshot()


def test_analyze_with_dashboard_keeps_the_report_whole(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    rule = CallEveryTool(arguments={"replace_text": {"old": "zz", "new": "zz"}})
    with ScriptedModelServer(rule=rule) as server:
        code = main(
            ["analyze", "pkg", "--agents", "probe", "--dashboard", "--format", "json",
             "--base-url", server.base_url]
        )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1  # the sample's TODO
    report = json.loads(captured.out)
    assert report["summary"]["jobs"] == 1
    # Not a terminal: the view is drawn once, when the run ends.
    assert "remora dashboard" in captured.err
    assert "p50 " in captured.err and "in flight 0" in captured.err


def test_dashboard_without_a_stream_says_how_to_give_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    assert main(["dashboard"]) == 2
    assert "--events FILE" in capsys.readouterr().out


async def wait_for(condition: Any) -> None:
    with anyio.fail_after(5):
        while not condition():  # noqa: ASYNC110 - the follower polls; so does its test
            await anyio.sleep(0.01)


if __name__ == "__main__":
    # Regenerate tests/data/events-sample.jsonl (uses the fixtures' files, in a temp folder).
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import FIND_TODOS, REPLACE_TEXT, SAMPLE_MODULE, TWO_TOOL_AGENT, write_files

    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        project_dir = write_files(base / "project", {"pkg/shout.py": SAMPLE_MODULE})
        agent_dir = write_files(
            base / "project" / "agents" / "probe",
            {
                "agent.yaml": TWO_TOOL_AGENT,
                "tools/find_todos.pym": FIND_TODOS,
                "tools/replace_text.pym": REPLACE_TEXT,
            },
        )
        (project_dir / "remora.yaml").write_text(
            "server:\n  retries: 0\n  timeout: 10\nagents:\n  lint: {enabled: false}\n"
            f"  probe: {{definition: {agent_dir / 'agent.yaml'}}}\n"
        )
        add_echo_agent(project_dir, agent_dir / "agent.yaml")
        os.chdir(project_dir)
        SAMPLE.unlink(missing_ok=True)
        record_events(project_dir, SAMPLE)
    print(f"wrote {SAMPLE}")


def test_dashboard_flags_are_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("analyze", "dashboard"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
    shown = capsys.readouterr().out
    for flag in ("--dashboard", "--events FILE", "--no-follow", "--window SECONDS"):
        assert flag in shown


def test_a_real_run_shows_the_call_each_job_is_forming(
    project: Path,
    probe_config: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A streamed reply that takes 1.5 s to form: the event stream of a real `analyze` shows
    its call by name, then its arguments as they grow; fed to the dashboard, the job is
    'forming find_todos(...)' until the reply is whole, then runs the tool."""
    monkeypatch.chdir(project)
    events = tmp_path / "events.jsonl"

    def rule(body: dict[str, Any]) -> Any:
        if len(body["messages"]) > 2:
            return tool_call("submit_result", {"summary": "ok", "todo_count": 0})
        return paced(tool_call("find_todos", {"marker": "FIXME-LATER"}), every=0.3)

    with ScriptedModelServer(rule=rule) as server:
        main(["analyze", "pkg", "--events", str(events), "--base-url", server.base_url])
    capsys.readouterr()
    recorded = load(events)
    progress = [event for event in recorded if event["event"] == "model_progress"]
    first = (progress[0]["job_id"], 1)  # one job's first turn
    progress = [event for event in progress if (event["job_id"], event["turn"]) == first]
    assert len(progress) >= 3  # the name, then the arguments growing, every 0.25 s or more
    shown = [event["calls"][0]["arguments"] for event in progress]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(shown))
    assert progress[0]["calls"][0]["name"] == "find_todos"

    state = DashboardState()
    doing = []
    for event in recorded:
        state.feed(event)
        doing += [(a.phase, a.tool, a.arguments) for a in state.snapshot().activity]
    forming = [entry for entry in doing if entry[0] == "forming"]
    assert forming and {tool for _, tool, _ in forming} == {"find_todos", "submit_result"}
    assert any("FIXME" in arguments for *_, arguments in forming)
    assert any(phase == "running" and tool == "find_todos" for phase, tool, _ in doing)
    assert not state.snapshot().activity  # all done
