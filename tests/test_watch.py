"""`remora watch`: after a change, only the changed nodes reach the model; ignored and non-Python
files start no run; files that come and go do not stop it; Ctrl-C exits 130 without a
traceback.

The main test runs `python -m remora watch` as a separate process against the scripted model
server in this one, and counts the server's requests per job: the first request of a job has
two messages (system prompt, node context), which name the agent and the node.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from remora.cli.flags import cli_settings
from remora.cli.main import build_parser
from remora.cli.watch import RunTally, relevant_changes, watch, watch_roots
from remora.config.loading import load_settings
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer

MORE = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
AGENTS = ("probe", "echo")


def add_echo_agent(project: Path, probe_agent: Path) -> None:
    """A second agent, the probe under another name, so "one job per agent" means two."""
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


def jobs(server: ScriptedModelServer) -> Counter[tuple[str, str]]:
    """(agent, node) of every job that reached the model."""
    started: Counter[tuple[str, str]] = Counter()
    for request in list(server.requests):
        messages = request["messages"]
        if len(messages) == 2:  # a job's first turn
            node = messages[1]["content"].split()[1]  # "Inspect <qualified name> in <file>:"
            agent = "echo" if messages[0]["content"].startswith("You echo") else "probe"
            started[(agent, node)] += 1
    return started


def read_events(events: Path) -> list[dict[str, Any]]:
    # Whole lines only: the watcher may be halfway through writing the last one.
    text = events.read_text() if events.exists() else ""
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def finished_runs(events: Path) -> list[dict[str, Any]]:
    return [event for event in read_events(events) if event["event"] == "run_finished"]


def run_finished_after_jobs_of(events: Path, node: str) -> bool:
    """A run has ended after jobs for `node` finished (so its report is out)."""
    seen = False
    for event in read_events(events):
        seen = seen or (event["event"] == "job_finished" and event["node_id"].endswith(node))
        if seen and event["event"] == "run_finished":
            return True
    return False


def wait_until(
    condition: Callable[[], bool], process: subprocess.Popen[bytes], err: Path, timeout: float = 10
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"watch exited {process.returncode}:\n{err.read_text()}"
        assert time.monotonic() < deadline, f"timed out; stderr:\n{err.read_text()}"
        time.sleep(0.05)


def test_watch_reruns_only_changed_nodes_and_survives_files_coming_and_going(
    project: Path, probe_config: Path, probe_agent: Path, tmp_path: Path
) -> None:
    add_echo_agent(project, probe_agent)
    (project / "pkg" / "more.py").write_text(MORE)
    (project / ".gitignore").write_text("ignored/\n")
    events, out, err = tmp_path / "events.jsonl", tmp_path / "out.txt", tmp_path / "err.txt"
    rule = CallEveryTool(arguments={"replace_text": {"old": "zz", "new": "zz"}})
    with ScriptedModelServer(rule=rule) as server:
        command = [
            sys.executable, "-m", "remora", "watch", ".", "--agents", "probe,echo",
            "--debounce", "50", "--events", str(events), "--base-url", server.base_url,
        ]  # fmt: skip
        with out.open("w") as stdout, err.open("w") as stderr:
            process = subprocess.Popen(command, cwd=project, stdout=stdout, stderr=stderr)
        try:
            # The first run: every node, each agent once.
            wait_until(lambda: len(finished_runs(events)) == 1, process, err)
            first = jobs(server)
            assert first == {(a, n): 1 for a in AGENTS for n in ("shout", "a", "b")}

            # Ignored and non-Python files: no run, and they are not named as changes.
            (project / "ignored").mkdir()
            (project / "ignored" / "skip.py").write_text("def skip():\n    pass\n")
            (project / "notes.txt").write_text("not code\n")
            time.sleep(0.4)  # several debounce periods, for a run that must not come
            assert len(finished_runs(events)) == 1

            # One function's body changes: one new job for it per agent, nothing else.
            (project / "pkg" / "more.py").write_text(MORE.replace("return 2", "return 3"))
            wait_until(lambda: len(finished_runs(events)) == 2, process, err)
            assert jobs(server) - first == {("probe", "b"): 1, ("echo", "b"): 1}
            assert finished_runs(events)[1]["summary"]["jobs"] == 6  # the rest from the cache

            # A file goes, another comes: no crash, the new file's node is analysed.
            before = jobs(server)
            (project / "pkg" / "shout.py").unlink()
            (project / "pkg" / "fresh.py").write_text("def fresh():\n    # TODO: all\n    pass\n")
            wait_until(lambda: run_finished_after_jobs_of(events, "::fresh"), process, err)
            assert jobs(server) - before == {("probe", "fresh"): 1, ("echo", "fresh"): 1}
            assert process.poll() is None
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
            process.wait(timeout=10)

    assert process.returncode == 130
    log = err.read_text()
    assert "Traceback" not in log and "remora: watch stopped" in log
    assert "run 2: pkg/more.py changed" in log
    assert "skip" not in log and "notes" not in log
    report = out.read_text()
    assert "pkg/shout.py:5:7: TD001" in report  # each run prints its report
    assert "pkg/fresh.py:2:7: TD001" in report


def test_watching_a_file_that_is_deleted_and_comes_back(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In process, with the stop event: a missing path makes a failed run, not a dead watch."""
    monkeypatch.chdir(project)
    target = project / "pkg" / "more.py"
    target.write_text(MORE)
    rule = CallEveryTool(arguments={"replace_text": {"old": "zz", "new": "zz"}})
    runs: list[RunTally] = []
    done_send, done_receive = anyio.create_memory_object_stream[RunTally](10)

    def on_run(number: int, tally: RunTally) -> None:
        runs.append(tally)
        done_send.send_nowait(tally)

    with ScriptedModelServer(rule=rule) as server:
        argv = ["watch", "pkg/more.py", "--agents", "probe", "--debounce", "20"]
        args = build_parser().parse_args([*argv, "--base-url", server.base_url])
        loaded = load_settings(None, cli=cli_settings(args), cwd=args.paths[0])

        async def scenario() -> int:
            stop = anyio.Event()
            code = 0

            async def run_watch() -> None:
                nonlocal code
                code = await watch(args, loaded, stop=stop, on_run=on_run)

            async def next_run() -> None:
                with anyio.fail_after(10):
                    await done_receive.receive()

            async with anyio.create_task_group() as group:
                group.start_soon(run_watch)
                await next_run()
                target.unlink()
                await next_run()
                target.write_text(MORE.replace("return 1", "return 0"))
                await next_run()
                stop.set()
            return code

        code = anyio.run(scenario)
    done_send.close()
    done_receive.close()
    assert [run.exit_code for run in runs] == [0, 2, 0]
    assert [run.jobs - run.cached for run in runs] == [2, 0, 1]  # a changed, b from the cache
    assert code == 0
    assert "path does not exist: pkg/more.py" in capsys.readouterr().err


def test_max_runs_stops_after_the_first_run(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from remora.cli.main import main

    monkeypatch.chdir(project)
    rule = CallEveryTool(arguments={"replace_text": {"old": "zz", "new": "zz"}})
    with ScriptedModelServer(rule=rule) as server:
        argv = ["watch", "pkg", "--agents", "probe", "--max-runs", "1"]
        assert main([*argv, "--base-url", server.base_url]) == 1  # the sample's TODO
    captured = capsys.readouterr()
    assert "TD001" in captured.out and "run 1 done" in captured.err
    assert main(["watch", "pkg", "--max-runs", "0"]) == 2
    assert main(["watch", "nowhere"]) == 2
    assert "path does not exist: nowhere" in capsys.readouterr().err


def test_relevant_changes_follow_the_analysed_files(tmp_path: Path) -> None:
    a, b, c = (str(tmp_path / name) for name in ("a.py", "b.py", "c.py"))
    before = frozenset({a, b})
    assert relevant_changes({a}, before, before) == [a]  # edited
    assert relevant_changes({str(tmp_path / "x.txt")}, before, before) == []
    assert relevant_changes({str(tmp_path / "ignored.py")}, before, before) == []
    assert relevant_changes({b}, before, frozenset({a})) == [b]  # deleted
    assert relevant_changes({c}, before, before | {c}) == [c]  # added
    # A folder moved in: only the folder is reported, the new files still count.
    assert relevant_changes({str(tmp_path / "sub")}, before, before | {c}) == [c]
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("")
    assert watch_roots([tmp_path / "pkg" / "m.py", tmp_path / "pkg", tmp_path]) == [tmp_path]


def test_every_watch_flag_is_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["watch", "--help"])
    shown = capsys.readouterr().out
    for flag in ("--agents", "--format", "--base-url", "--model", "--concurrency", "--config",
                 "--isolated", "-c KEY=VALUE", "--cache-dir", "--events", "--debounce MS",
                 "--max-runs N"):  # fmt: skip
        assert flag in shown
