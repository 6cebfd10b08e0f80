"""Faults: a flaky server, bad model output, files changing underneath, signals. Under each,
Remora keeps going, reports the failure once with a code, and never corrupts a user's file."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from remora.cli.main import main
from remora.config.settings import RemoraSettings
from remora.models.scripted.faults import FaultInjector
from remora.models.scripted.replies import DelayedReply
from remora.models.scripted.server import (
    ScriptedModelServer,
    TextReply,
    http_error,
    text,
    tool_call,
)

SUBMIT = tool_call("submit_result", {"summary": "ok", "todo_count": 0})
FIND = tool_call("find_todos", {"marker": "FIXME"})
"""The probe's work (its `done_when` outcome): without it a submit is `not_done`."""


def converse(body: dict[str, Any]) -> Any:
    """A normal job: find_todos on the first turn, then submit_result."""
    return FIND if len(body["messages"]) == 2 else SUBMIT


TWO_FUNCTIONS = "def alpha():\n    return 1\n\n\ndef beta():\n    return 2\n"


def run(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    server: ScriptedModelServer,
    *flags: str,
) -> tuple[int, dict[str, Any], str]:
    code = main(
        ["analyze", "pkg", "--format", "json", "--no-cache", "--base-url", server.base_url, *flags]
    )
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else {}, captured.err


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {result["node"]["name"]: result for result in report["results"]}


@pytest.fixture
def two(project: Path, probe_config: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two functions to analyse (the sample's `shout` removed), retries off, cwd = project."""
    (project / "pkg" / "shout.py").write_text(TWO_FUNCTIONS)
    monkeypatch.chdir(project)
    return project


def per_node(faulty: str, fault: Any) -> Any:
    """A rule: the job on node `faulty` gets `fault`, every other job a normal conversation."""

    def rule(body: dict[str, Any]) -> Any:
        if f"Inspect {faulty} " in body["messages"][1]["content"]:
            return fault
        return converse(body)

    return rule


# --- the server ------------------------------------------------------------------------------


def test_refused_connection_is_detected_once_within_seconds(
    two: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedModelServer(script=[]) as server:
        url = server.base_url
    started = time.monotonic()
    code = main(["analyze", "pkg", "--base-url", url, "-c", "server.retries=3"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2
    assert elapsed < 10  # one probe with backoff, not retries x timeout for every job
    assert err.count("cannot reach the model server") == 1


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("drop", "no reply from"),
        ("truncated", "unusable reply"),
        ("not_json", "unusable reply"),
        ("no_choices", "has no message"),
        ("null_message", "has no message"),
        ("500", "HTTP 500"),
        ("503", "HTTP 503"),
    ],
)
def test_a_broken_reply_errors_that_job_and_the_others_finish(
    fault: str, message: str, two: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = FaultInjector(lambda body: SUBMIT, rate=1.0).fault_reply(fault)
    with ScriptedModelServer(rule=per_node("alpha", broken)) as server:
        code, report, err = run(two, capsys, server)
    results = by_name(report)
    assert code == 2
    assert results["beta"]["status"] == "success"
    assert results["alpha"]["status"] == "error"
    assert results["alpha"]["error"]["code"] == "model_error"
    assert message in results["alpha"]["error"]["message"]
    assert err.count("pkg/shout.py::alpha [probe]: model_error") == 1


def test_retry_after_is_honoured(two: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (two / "pkg" / "shout.py").write_text("def alpha():\n    return 1\n")
    script = [http_error(429, "slow down", headers={"Retry-After": "1"}), FIND, SUBMIT]
    with ScriptedModelServer(script=script) as server:
        started = time.monotonic()
        code, report, _ = run(two, capsys, server, "-c", "server.retries=1")
        elapsed = time.monotonic() - started
    assert code == 0 and report["results"][0]["status"] == "success"
    assert elapsed >= 1.0


def test_bursts_of_5xx_are_ridden_out_with_backoff(
    two: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (two / "pkg" / "shout.py").write_text("def alpha():\n    return 1\n")
    script = [http_error(500), http_error(502), http_error(503), FIND, SUBMIT]
    with ScriptedModelServer(script=script) as server:
        code, report, _ = run(two, capsys, server, "-c", "server.retries=3")
        assert len(server.requests) == 5
    assert code == 0 and report["results"][0]["status"] == "success"


def test_a_reply_that_never_starts_ends_at_the_job_timeout(
    two: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No byte for 5 s: the server may be queueing the request, which server.timeout (a
    no-progress timeout) does not end; runner.job_timeout does. Stalls after a reply started
    are tests/test_server_faults.py's."""
    slow = DelayedReply(TextReply("late"), 5.0)
    with ScriptedModelServer(rule=per_node("alpha", slow)) as server:
        started = time.monotonic()
        code, report, _ = run(
            two, capsys, server, "-c", "server.timeout=0.3", "-c", "runner.job_timeout=1.5"
        )
        elapsed = time.monotonic() - started
    results = by_name(report)
    assert code == 1 and elapsed < 5
    assert results["alpha"]["error"]["code"] == "time_limit"
    assert "runner.job_timeout=1.5s" in results["alpha"]["error"]["message"]
    assert results["beta"]["status"] == "success"


def test_a_huge_reply_is_answered_with_a_reminder(
    two: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (two / "pkg" / "shout.py").write_text("def alpha():\n    return 1\n")
    # 1 MB of text, 5 MB on the wire with its log-probabilities (server.max_reply_mb is 16).
    with ScriptedModelServer(script=[text("x" * 1_000_000), FIND, SUBMIT]) as server:
        code, report, _ = run(two, capsys, server)
    assert code == 0 and report["results"][0]["status"] == "success"


def test_a_model_that_loops_on_tools_ends_at_the_turn_limit(
    two: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    counter = iter(range(10**6))

    def loop(body: dict[str, Any]) -> Any:  # never the probe's work, never a submit
        return tool_call("replace_text", {"old": f"M{next(counter)}", "new": "N"})

    with ScriptedModelServer(rule=loop) as server:
        code, report, _ = run(two, capsys, server)
    assert code == 1  # agents that did not finish are something to look at, not an error
    for result in report["results"]:
        assert result["status"] == "failed"
        assert result["error"]["code"] == "turn_limit"
        assert result["turns"] == 3


# --- bad model output ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (tool_call("fïnd_tödös_😀", {}), "unknown tool 'fïnd_tödös_😀'"),
        (tool_call("x" * 10_000, {}), "unknown tool 'xxxxxxxx"),
        (tool_call("find_todos", '{"marker": "' + "a" * 1_100_000 + '"}'), "longer than"),
        (tool_call("find_todos", '{"marker": ' + "[" * 50_000 + "]" * 50_000 + "}"), "nested"),
        (tool_call("find_todos", {"marker": [[[[[["deep"]]]]]]}), "is not of type 'string'"),
    ],
)
def test_malformed_calls_become_error_results(
    call: Any, expected: str, two: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (two / "pkg" / "shout.py").write_text("def alpha():\n    return 1\n")
    with ScriptedModelServer(script=[call, FIND, SUBMIT]) as server:
        code, report, _ = run(two, capsys, server)
        second = server.requests[1]
    assert code == 0 and report["results"][0]["status"] == "success"
    error = json.loads(second["messages"][-1]["content"])["error"]
    assert expected in error
    assert len(error) < 1000  # the model is not fed its own 10 KB name back


# --- input changing underneath -------------------------------------------------------------


def test_a_file_deleted_during_the_run_is_an_error_result_not_a_crash(
    two: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = two / "pkg" / "shout.py"

    def delete_then_call(body: dict[str, Any]) -> Any:
        if len(body["messages"]) == 2:
            source.unlink(missing_ok=True)
            return tool_call("find_todos", {})
        return SUBMIT

    with ScriptedModelServer(rule=delete_then_call) as server:
        code, report, _ = run(two, capsys, server, "--fix")
    # find_todos could not read the file: no job verified its work, none crashed.
    assert code == 1
    assert {result["status"] for result in report["results"]} == {"failed"}
    assert {result["error"]["code"] for result in report["results"]} == {"not_done"}
    assert not source.exists()  # --fix had nothing to write, and wrote nothing


def test_a_file_rewritten_during_the_run_is_a_conflict(
    two: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = two / "pkg" / "shout.py"

    def edit_then_race(body: dict[str, Any]) -> Any:
        if "Inspect alpha " not in body["messages"][1]["content"]:
            return converse(body)
        if len(body["messages"]) == 2:
            return tool_call("replace_text", {"old": "return 1", "new": "return 10"})
        if len(body["messages"]) == 4:
            return FIND
        source.write_text(TWO_FUNCTIONS + "# the user typed this\n")
        return SUBMIT

    with ScriptedModelServer(rule=edit_then_race) as server:
        code, _, err = run(two, capsys, server, "--fix")
    assert code == 1
    assert "conflict: pkg/shout.py" in err
    assert source.read_text() == TWO_FUNCTIONS + "# the user typed this\n"


# --- configuration -------------------------------------------------------------------------

INVALID = {
    "string": ["a", "list"],
    "integer": "many",
    "number": "fast",
    "boolean": "maybe",
    "object": 3,
    "array": "not-a-list",
}


def leaf_keys() -> list[tuple[str, Any]]:
    """Every configurable key with a value of the wrong type for it."""
    schema = RemoraSettings.model_json_schema()
    definitions = schema.get("$defs", {})
    found: list[tuple[str, Any]] = []

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, prop in node.get("properties", {}).items():
            ref = prop.get("$ref") or next(
                (option["$ref"] for option in prop.get("anyOf", []) if "$ref" in option), None
            )
            if ref:
                walk(definitions[ref.rsplit("/", 1)[1]], f"{prefix}{name}.")
                continue
            extra = prop.get("additionalProperties")
            if isinstance(extra, dict) and "$ref" in extra:
                target = extra["$ref"].rsplit("/", 1)[1]
                walk(definitions[target], f"{prefix}{name}.sample.")
                continue
            types = [prop.get("type")] + [o.get("type") for o in prop.get("anyOf", [])]
            if "enum" in prop or any("enum" in o for o in prop.get("anyOf", [])):
                found.append((prefix + name, "not-a-choice"))
            elif "integer" in types or "number" in types:
                found.append((prefix + name, "not-a-number"))
            elif "boolean" in types and "string" not in types:  # a path or false: no word fails
                found.append((prefix + name, "maybe"))
            elif "array" in types or "object" in types:
                found.append((prefix + name, 5))
            else:
                found.append((prefix + name, ["not", "a", "string"]))

    walk(schema, "")
    return found


@pytest.mark.parametrize(("key", "value"), leaf_keys())
def test_every_invalid_value_of_every_key_names_file_line_and_key(
    key: str,
    value: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    *parents, leaf = key.split(".")
    document: dict[str, Any] = {}
    node = document
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    config = tmp_path / "remora.yaml"
    config.write_text(json.dumps(document))  # JSON is YAML
    monkeypatch.chdir(tmp_path)
    assert main(["config"]) == 2
    err = capsys.readouterr().err
    assert f"{config}:1: {key}: " in err, err


def test_a_definition_with_two_submit_result_keys_is_refused(
    probe_agent: Path, two: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe_agent.write_text(probe_agent.read_text() + "submit_result:\n  inputs: {}\n")
    assert main(["analyze", "pkg", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err
    assert f"{probe_agent}:" in err and "submit_result: duplicate key (first at line" in err


# --- signals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signum", "expected", "delay", "workers"),
    [
        (signal.SIGINT, 130, 0.3, 1),
        (signal.SIGTERM, 143, 0.3, 1),
        (signal.SIGTERM, 143, 1.2, 1),
        (signal.SIGINT, 130, 2.0, 1),
        (signal.SIGTERM, 143, 1.5, 2),
        (signal.SIGINT, 130, 2.0, 2),
    ],
)
def test_signals_leave_files_whole_and_nothing_behind(
    signum: int,
    expected: int,
    delay: float,
    workers: int,
    project: Path,
    probe_config: Path,
    tmp_path: Path,
) -> None:
    """Signals land at different points of a --fix run, in one process or with worker
    processes; every file ends whole, and no workspace or process is left."""
    originals = {}
    for i in range(6):
        path = project / "pkg" / f"m{i}.py"
        path.write_text(f"def f{i}():\n    return 1\n")
        originals[path] = path.read_text()
    scratch = tmp_path / "tmp"
    scratch.mkdir()

    def edit(body: dict[str, Any]) -> Any:
        if len(body["messages"]) == 2:
            return tool_call("replace_text", {"old": "return 1", "new": "return 2"})
        return SUBMIT

    with ScriptedModelServer(rule=edit, latency=0.25) as server:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "remora",
                "analyze",
                "pkg",
                "--fix",
                "--no-cache",
                "--concurrency",
                "2",
                "--workers",
                str(workers),
            ],
            cwd=project,
            env={**os.environ, "REMORA_SERVER__BASE_URL": server.base_url, "TMPDIR": str(scratch)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        time.sleep(delay)
        # As a terminal sends Ctrl-C: to the whole process group; SIGTERM to the process only.
        if signum == signal.SIGINT:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        _, err = process.communicate(timeout=30)
    assert process.returncode in (expected, 0, 1), err
    assert "Traceback" not in err
    for path, original in originals.items():
        assert path.read_text() in (original, original.replace("return 1", "return 2"))
    assert list(scratch.iterdir()) == []  # no workspace or temporary file left
    assert not list(project.rglob(".*.tmp"))
    leftover = subprocess.run(["pgrep", "-f", str(scratch)], capture_output=True, text=True)
    assert leftover.stdout == ""
    assert not outliving(process.pid)  # no process of the run, worker processes included


def outliving(group: int, wait: float = 3.0) -> str:
    """Processes of the process group `group`, or worker processes, still there after `wait`
    seconds (a process that just exited may linger a moment as a zombie until it is reaped)."""
    deadline = time.monotonic() + wait
    while True:
        left = subprocess.run(["pgrep", "-a", "-g", str(group)], capture_output=True, text=True)
        workers = subprocess.run(
            ["pgrep", "-a", "-f", "remora.jobs.workers.child"], capture_output=True, text=True
        )
        found = left.stdout + workers.stdout
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# --- many jobs against a faulty server -----------------------------------------------------


@pytest.mark.parametrize("workers", ["1", "2"])
def test_hundreds_of_jobs_against_a_faulty_server_all_end_and_add_up(
    workers: str,
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The full-size run (10,000 jobs at capacity 512) is bench/faults.py; this is its small
    sibling that CI runs."""
    from remora.models.scripted.server import CallEveryTool

    jobs = 300
    (project / "pkg" / "many.py").write_text(
        "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(jobs - 1))
    )
    monkeypatch.chdir(project)
    injector = FaultInjector(
        CallEveryTool(arguments={"replace_text": {"old": "zz", "new": "zz"}}),
        rate=0.05,
        seed=7,
        slow_seconds=3.0,
    )
    with ScriptedModelServer(rule=injector) as server:
        code, report, _ = run(
            project,
            capsys,
            server,
            "--concurrency",
            "64",
            "-c",
            "server.retries=1",
            "-c",
            "server.timeout=1",
            "--workers",
            workers,
        )
    summary = report["summary"]
    assert summary["jobs"] == len(report["results"]) == jobs
    assert summary["success"] + summary["failed"] + summary["error"] == jobs
    assert sum(injector.injected.values()) > 0
    assert summary["error"] > 0 and summary["success"] > jobs * 0.7
    assert code == 2
    for result in report["results"]:
        assert (result["error"] is None) == (result["status"] == "success")


# --- big and odd inputs --------------------------------------------------------------------


def test_a_directory_of_20000_files(tmp_path: Path) -> None:
    from remora.discovery.discover import discover_nodes

    for folder in range(100):
        directory = tmp_path / f"d{folder}"
        directory.mkdir()
        for index in range(200):
            (directory / f"m{index}.py").write_text(f"def f{index}():\n    return {index}\n")
    started = time.monotonic()
    found = discover_nodes([tmp_path], root=tmp_path)
    assert len(found.files) == 20_000
    assert len(found.nodes) == 40_000
    assert time.monotonic() - started < 60


def test_a_five_megabyte_file(tmp_path: Path) -> None:
    from remora.discovery.discover import discover_nodes

    body = "".join(f"def f{i}(a, b):\n    return a + b + {i}\n\n\n" for i in range(120_000))
    (tmp_path / "big.py").write_text(body)
    assert len(body) > 5_000_000
    found = discover_nodes([tmp_path], root=tmp_path)
    assert len(found.nodes) == 120_001
    assert found.nodes[-1].start_line == 4 * 119_999 + 1


def test_paths_with_spaces_and_unicode_end_to_end(
    tmp_path: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = tmp_path / "my prøject"
    (project / "süb dir").mkdir(parents=True)
    (project / "süb dir" / "mödule one.py").write_text("def grüß():\n    # TODO: x\n    pass\n")
    shutil.copytree(probe_agent.parent, project / "ägents" / "pröbe")  # the project's own
    (project / "remora.yaml").write_text(
        "agents:\n  lint: {enabled: false}\n  probe: {definition: 'ägents/pröbe/agent.yaml'}\n"
    )
    monkeypatch.chdir(project)
    with ScriptedModelServer(script=[tool_call("find_todos", {}), SUBMIT]) as server:
        code = main(
            [
                "analyze",
                "süb dir",
                "--agents",
                "probe",
                "--format",
                "json",
                "--base-url",
                server.base_url,
            ]
        )
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    (result,) = report["results"]
    assert result["node"]["id"] == "süb dir/mödule one.py::grüß"
    assert result["findings"][0]["file"] == "süb dir/mödule one.py"


def test_an_interrupt_a_library_wrapped_at_startup_still_exits_as_an_interrupt() -> None:
    """A SIGTERM 0.3 s after start landed while pydantic built a validator during Remora's
    imports: pydantic reported it as a SchemaError naming the KeyboardInterrupt, and Remora
    said "cannot start" with exit 2 instead of 143 (seen once in a CI run of the case above)."""
    from pydantic_core import SchemaError

    from remora.__main__ import interrupted_within

    assert interrupted_within(
        SchemaError('Error building "model" validator:\n  KeyboardInterrupt: ')
    )
    chained = ValueError("while importing")
    chained.__context__ = KeyboardInterrupt()
    assert interrupted_within(chained)
    assert not interrupted_within(ImportError("No module named 'llama_cpp'"))
