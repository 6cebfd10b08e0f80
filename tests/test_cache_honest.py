"""The result cache answers only what would be answered the same again, and never stops a run.

Every test drives `remora analyze` (or the cache classes) against real files, the real ruff and
the scripted model server: the key covers the tools' configuration files and programs, only
successful jobs are stored, a cache folder that breaks mid-run costs a warning and no report,
and entries read back from disk are data to check, not to trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remora.cache import store
from remora.cache.folder import cache_dir_problem
from remora.cache.program_versions import program_versions
from remora.cache.store import ResultCache, folder_hash, remora_code
from remora.cli.main import main
from remora.config.loading import load_settings
from remora.config.settings import CommandSettings
from remora.discovery.cache import DefinitionCache, content_key, encode_entry
from remora.discovery.discover import discover_nodes
from remora.findings.results import ErrorCode, JobError, JobResult, JobStatus
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer, tool_call
from remora.sandbox.commands import CommandRunner
from remora.sandbox.program_paths import find_program
from tests.conftest import write_files

LINTED = """\
import os


def pick():
    l = 1
    return l
"""
"""F401 on line 1 (the file node), E741 on line 5 (the function node)."""

TWO_FUNCTIONS = '''\
"""Module."""


def shout(text):
    # TODO: handle None
    return text.upper()


def whisper(text):
    # TODO: handle empty strings
    return text.lower()
'''


def ruff_config(select: str) -> str:
    return f'[tool.ruff]\nline-length = 100\n\n[tool.ruff.lint]\nselect = ["{select}"]\n'


@pytest.fixture
def lint_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = write_files(
        tmp_path / "lintproject",
        {
            "remora.yaml": "server:\n  retries: 0\n  timeout: 10\n",
            "pyproject.toml": ruff_config("E"),
            "pkg/mod.py": LINTED,
            "other/keep.py": "X = 1\n",
        },
    )
    monkeypatch.chdir(root)
    return root


def linter(body: dict[str, Any]) -> Any:
    """Runs ruff once, then submits: the lint agent's job is done when ruff ran."""
    ran = any(message["role"] == "tool" for message in body["messages"])
    offered = {tool["function"]["name"] for tool in body["tools"]}
    if not ran and "run_ruff" in offered:
        return tool_call("run_ruff", {})
    return tool_call("submit_result", {"summary": "ruff ran"})


def lint(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[dict[str, bool], Any, str]:
    """`remora analyze pkg other --agents lint`: per node file, whether it was answered from
    the cache (all its nodes), the findings, and stderr."""
    with ScriptedModelServer(rule=linter) as server:
        args = ["analyze", "pkg", "other", "--agents", "lint", "--format", "json"]
        code = main([*args, "--base-url", server.base_url, *flags])
    out, err = capsys.readouterr()
    assert code == 1, err
    report = json.loads(out)
    assert {result["status"] for result in report["results"]} == {"success"}
    cached: dict[str, bool] = {}
    for result in report["results"]:
        file = result["node"]["file"]
        cached[file] = cached.get(file, True) and result["cached"]
    return cached, rules(report), err


def rules(report: dict[str, Any]) -> list[tuple[str, str, int]]:
    return sorted(
        (finding["rule"], finding["file"], finding["line"])
        for result in report["results"]
        for finding in result["findings"]
    )


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "results").glob("*/*.json"))


FRESH = {"other/keep.py": False, "pkg/mod.py": False}
HITS = {"other/keep.py": True, "pkg/mod.py": True}


# --- 1. everything a tool reads is in the key -----------------------------------------------


def test_a_changed_ruff_selection_is_not_answered_from_the_cache(
    lint_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lint(capsys)[:2] == (FRESH, [("E741", "pkg/mod.py", 5)])

    (lint_project / "pyproject.toml").write_text(ruff_config("F"))
    cached, findings, err = lint(capsys)
    assert (cached, findings) == (FRESH, [("F401", "pkg/mod.py", 1)])  # not the old E741
    assert "answered from the cache" not in err

    cached, findings, err = lint(capsys)  # the configuration did not change: all hits
    assert (cached, findings) == (HITS, [("F401", "pkg/mod.py", 1)])
    assert "2 of 2 jobs answered from the cache" in err


def test_a_config_file_counts_in_its_folder_and_below_not_beside(
    lint_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lint(capsys)
    # A ruff.toml next to pkg/mod.py: ruff now uses it instead of pyproject.toml.
    (lint_project / "pkg" / "ruff.toml").write_text('[lint]\nselect = ["F"]\n')
    cached, findings, _ = lint(capsys)
    assert (cached, findings) == (
        {"other/keep.py": True, "pkg/mod.py": False},
        [("F401", "pkg/mod.py", 1)],
    )
    # One in a folder beside pkg/ reaches only the nodes under it.
    (lint_project / "other" / "ruff.toml").write_text('[lint]\nselect = ["E"]\n')
    cached, findings, _ = lint(capsys)
    assert (cached, findings) == (
        {"other/keep.py": False, "pkg/mod.py": True},
        [("F401", "pkg/mod.py", 1)],
    )


@pytest.mark.parametrize("name", ["conftest.py", "setup.cfg", "tox.ini", "pytest.ini"])
def test_pytest_configuration_at_the_root_is_in_every_key(
    lint_project: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    lint(capsys)
    (lint_project / name).write_text("# changed\n")
    assert lint(capsys)[0] == FRESH
    assert lint(capsys)[0] == HITS


def test_the_list_of_configuration_files_is_a_setting(
    lint_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only = ["-c", "sandbox.commands.config_files=[ruff.toml]"]
    lint(capsys, *only)
    (lint_project / "tox.ini").write_text("[tox]\n")  # not listed: the key does not change
    assert lint(capsys, *only)[0] == HITS
    (lint_project / "ruff.toml").write_text('[lint]\nselect = ["F"]\n')
    assert lint(capsys, *only)[:2] == (FRESH, [("F401", "pkg/mod.py", 1)])
    assert main(["config", "-c", "sandbox.commands.config_files=[a/ruff.toml]"]) == 2
    assert "not a plain file name" in capsys.readouterr().err


def test_program_versions_are_the_programs_own_answers() -> None:
    versions = program_versions(CommandSettings())
    ruff = subprocess.run(["ruff", "--version"], capture_output=True, text=True, check=True)
    assert versions["ruff"] == ruff.stdout.strip()
    assert versions["pytest"] == f"pytest {pytest.__version__}"
    assert versions["python -m pytest"] == f"pytest {pytest.__version__}"
    assert versions["python -m ruff"].split()[-1] == ruff.stdout.split()[-1]
    # The executables asked are those run_command runs.
    runner = CommandRunner(CommandSettings(isolation="none"))
    for name in ("ruff", "pytest"):
        assert find_program(name) == runner.resolve(name, [])[0]
    missing = program_versions(CommandSettings(allowed=["no-such-program-x"], python_modules=[]))
    assert missing["no-such-program-x"] == "not installed"


def test_a_program_upgrade_reruns_every_job_and_versions_are_asked_once_per_run(
    repo_with_tool: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, version, calls = repo_with_tool
    flags = ["-c", "sandbox.commands.allowed=[ruff, pytest, mytool]"]

    def run() -> int:
        with ScriptedModelServer(rule=CallEveryTool()) as server:
            code = main(
                ["analyze", "pkg", "--format", "json", "--base-url", server.base_url, *flags]
            )
        capsys.readouterr()
        assert code == 1
        return len(server.requests)

    assert run() == 6  # two jobs, three turns each
    assert run() == 0
    assert calls.read_text().count("asked") == 2  # once per run, not once per job
    version.write_text("mytool 2.0\n")
    assert run() == 6
    assert run() == 0


@pytest.fixture
def repo_with_tool(
    project: Path, probe_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path, Path]:
    """The sample project with two functions, and `mytool` on PATH, which prints the version
    in a file and records each time it is asked."""
    (project / "pkg" / "shout.py").write_text(TWO_FUNCTIONS)
    bin_dir, version, calls = tmp_path / "bin", tmp_path / "version.txt", tmp_path / "calls.txt"
    bin_dir.mkdir()
    version.write_text("mytool 1.0\n")
    tool = bin_dir / "mytool"
    tool.write_text(f"#!/bin/sh\necho asked >> '{calls}'\ncat '{version}'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(project)
    return project, version, calls


# --- 2. only successful jobs are stored -----------------------------------------------------


def half_done(body: dict[str, Any]) -> Any:
    """whisper: find_todos verifies the work (outcome `checked`); shout: submits without it."""
    if "Inspect shout" in body["messages"][1]["content"]:
        return tool_call("submit_result", {"summary": "nothing", "todo_count": 0})
    if not any(message["role"] == "tool" for message in body["messages"]):
        return tool_call("find_todos", {})
    return tool_call("submit_result", {"summary": "one", "todo_count": 1})


def test_a_second_run_asks_nothing_with_not_done_jobs_in_the_first(
    repo_with_tool: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Every finished job is cached, not_done included: the same model and seeds would answer
    the same way, so an unchanged tree costs no request; --retry-not-done asks those again."""
    project, _, _ = repo_with_tool

    def run(*flags: str) -> tuple[dict[str, str], list[str], dict[str, Any], str]:
        with ScriptedModelServer(rule=half_done) as server:
            main(["analyze", "pkg", "--format", "json", "--base-url", server.base_url, *flags])
            asked = [body["messages"][1]["content"].split()[1] for body in server.requests]
        out, err = capsys.readouterr()
        report = json.loads(out)
        statuses = {r["node"]["name"]: r["status"] for r in report["results"]}
        return statuses, asked, report["summary"], err

    statuses, asked, summary, _ = run()
    assert statuses == {"shout": "failed", "whisper": "success"}
    assert sorted(set(asked)) == ["shout", "whisper"]
    assert len(entries(project / ".remora_cache")) == 2  # the not-done job's too
    assert summary["cached"] == 0
    statuses, asked, summary, err = run()
    assert statuses == {"shout": "failed", "whisper": "success"}
    assert asked == []  # no model request at all
    assert summary["cached"] == 2 and "2 of 2 jobs answered from the cache" in err
    statuses, asked, summary, _ = run("--retry-not-done")
    assert set(asked) == {"shout"}  # only the not-done job is asked again
    assert summary["cached"] == 1


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (JobStatus.FAILED, ErrorCode.TIME_LIMIT),
        (JobStatus.ERROR, ErrorCode.MODEL_ERROR),
        (JobStatus.ERROR, ErrorCode.COMMAND_TIMEOUT),
        (JobStatus.SKIPPED, ErrorCode.CANCELLED),
    ],
)
def test_put_stores_finished_jobs_only(
    project: Path, probe_config: Path, tmp_path: Path, status: JobStatus, code: ErrorCode
) -> None:
    """A job that ran out of time, or that the environment or the server failed, is not the
    model's answer: never stored. A finished one, done or not, is."""
    cache, agent, node = cache_for(project, tmp_path)
    cache.prepare()
    error = JobError(code=code, message="m")
    cache.put(agent, JobResult(node=node, agent=agent.name, status=status, error=error), project)
    assert (cache.stores, entries(cache.directory)) == (0, [])
    not_done = JobError(code=ErrorCode.NOT_DONE, message="submitted without a verified outcome")
    failed = JobResult(node=node, agent=agent.name, status=JobStatus.FAILED, error=not_done)
    cache.put(agent, failed, project)
    assert (cache.stores, len(entries(cache.directory))) == (1, 1)
    hit = cache.get(agent, node, project)
    assert hit is not None and hit.cached and hit.error == not_done
    settings = load_settings(config_file=project / "remora.yaml").settings
    retrying = ResultCache(cache.directory, settings, 64, retry_not_done=True)
    assert retrying.get(agent, node, project) is None


def cache_for(project: Path, tmp_path: Path) -> tuple[ResultCache, Any, Any]:
    from remora.agents.registry import select_agents

    loaded = load_settings(config_file=project / "remora.yaml")
    (agent,) = select_agents(loaded)
    found = discover_nodes([project / "pkg"], root=project)
    node = next(node for node in found.nodes if node.name == "shout")
    return ResultCache(tmp_path / "cache", loaded.settings, 64), agent, node


# --- 3. a broken cache folder ---------------------------------------------------------------


def probe_run(
    capsys: pytest.CaptureFixture[str], *flags: str, rule: Callable[[dict[str, Any]], Any]
) -> tuple[int, str, str, int]:
    with ScriptedModelServer(rule=rule) as server:
        code = main(["analyze", "pkg", "--format", "json", "--base-url", server.base_url, *flags])
        requests = len(server.requests)
    out, err = capsys.readouterr()
    return code, out, err, requests


@pytest.mark.parametrize("inside", ["", "results", "discovery"])
def test_a_cache_dir_in_the_way_of_a_file_stops_before_any_work(
    repo_with_tool: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], inside: str
) -> None:
    project, _, _ = repo_with_tool
    cache = project / "cachedir"
    blocker = cache / inside if inside else cache
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a folder\n")
    code, out, err, requests = probe_run(capsys, "--cache-dir", str(cache), rule=CallEveryTool())
    assert (code, out, requests) == (2, "", 0)
    assert str(blocker) in err
    assert "is not a folder" in err and "--no-cache" in err and "--cache-dir" in err
    assert blocker.read_text() == "not a folder\n"  # left alone
    assert "Traceback" not in err
    assert cache_dir_problem(project / "fresh" / "cache") is None  # not there yet: fine


def test_a_cache_dir_under_a_file_stops_before_any_work(
    repo_with_tool: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    project, _, _ = repo_with_tool
    (project / "afile").write_text("x")
    code, out, err, requests = probe_run(capsys, "--cache-dir", "afile/cache", rule=CallEveryTool())
    assert (code, out, requests) == (2, "", 0)
    assert "afile" in err and "not a folder" in err


def replaced_by_a_file(path: Callable[[], Path]) -> Callable[[dict[str, Any]], Any]:
    """CallEveryTool, which on the first request replaces a folder by a file: mid-run."""
    every = CallEveryTool()

    def rule(body: dict[str, Any]) -> Any:
        target = path()
        if target.is_dir():
            shutil.rmtree(target)
            target.write_text("in the way\n")
        return every(body)

    return rule


@pytest.mark.parametrize("folder", [".remora_cache", ".remora_cache/results"])
def test_a_cache_folder_that_becomes_a_file_mid_run_costs_one_warning(
    repo_with_tool: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], folder: str
) -> None:
    project, _, _ = repo_with_tool
    rule = replaced_by_a_file(lambda: project / folder)
    code, out, err, requests = probe_run(capsys, rule=rule)
    assert requests == 6
    assert code == 1, err  # the findings, as without a cache
    report = json.loads(out)
    assert [r["status"] for r in report["results"]] == ["success", "success"]
    assert err.count("result cache not written") == 1, err
    assert "Traceback" not in err and "internal error" not in err
    assert (project / folder).read_text() == "in the way\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_cache_is_still_read_and_warns_once(
    repo_with_tool: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    project, _, _ = repo_with_tool
    assert probe_run(capsys, rule=CallEveryTool())[3] == 6
    (project / "pkg" / "shout.py").write_text(TWO_FUNCTIONS.replace("lower", "casefold"))
    results = project / ".remora_cache" / "results"
    folders = [results, *results.iterdir()]
    for folder in folders:
        folder.chmod(0o555)
    try:
        code, out, err, requests = probe_run(capsys, rule=CallEveryTool())
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert (code, requests) == (1, 3)  # shout from the cache, whisper asked again
    assert err.count("result cache not written") == 1
    assert len(json.loads(out)["results"]) == 2


# --- entries read back are untrusted ----------------------------------------------------------


def edit(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(entry: dict[str, Any]) -> None:
        *path, last = field.split(".")
        target: Any = entry
        for part in path:
            target = target[int(part)] if part.isdigit() else target[part]
        target[last] = value

    return apply


TAMPERED = {
    "absolute change": edit("changes.0.change.file", "/tmp/remora-evil.py"),
    "dotdot change": edit("changes.0.change.file", "../evil.py"),
    "git hook change": edit("changes.0.change.file", ".git/hooks/pre-commit"),
    "backslash change": edit("changes.0.change.file", "pkg\\..\\..\\evil.py"),
    "bad newline": edit("changes.0.newline", "\n\n"),
    "bad original hash": edit("changes.0.original_sha256", "not a hash"),
    "line as a string": edit("result.findings.0.line", "5"),
    "line zero": edit("result.findings.0.line", 0),
    "finding elsewhere": edit("result.findings.0.file", "../../etc/passwd"),
    "status error": edit("result.status", "error"),
    "no outcome": edit("result.outcome", None),
    "other agent": edit("result.agent", "lint"),
    "other node": edit("result.node.qualified_name", "whisper"),
    "summary not a string": edit("result.summary", ["x"]),
}


@pytest.fixture
def cached_change(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Path:
    """One run whose job changed the file (TODO -> NOTE) was cached; returns its entry."""
    monkeypatch.chdir(project)
    rule = CallEveryTool(arguments={"replace_text": {"old": "TODO", "new": "NOTE"}})
    _, out, _, requests = probe_run(capsys, rule=rule)
    assert requests == 3
    (result,) = json.loads(out)["results"]
    assert result["changes"][0]["file"] == "pkg/shout.py"
    (entry,) = entries(project / ".remora_cache")
    return entry


def rerun(capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], int]:
    rule = CallEveryTool(arguments={"replace_text": {"old": "TODO", "new": "NOTE"}})
    _, out, err, requests = probe_run(capsys, rule=rule)
    assert "Traceback" not in err
    (result,) = json.loads(out)["results"]
    return result, requests


def test_an_untouched_entry_is_answered_from_the_cache(
    cached_change: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result, requests = rerun(capsys)
    assert (requests, result["cached"], result["changes"][0]["file"]) == (0, True, "pkg/shout.py")


def results_by_node(out: str) -> dict[str, dict[str, Any]]:
    return {result["node"]["name"]: result for result in json.loads(out)["results"]}


def test_a_change_inside_its_node_is_made_again_after_an_edit_elsewhere(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """shout's change stays inside shout: after whisper is edited, shout is answered from the
    cache with its change made on the file as it is now, whisper's edit kept."""
    monkeypatch.chdir(project)
    source = project / "pkg" / "shout.py"
    source.write_text(TWO_FUNCTIONS)
    rule = CallEveryTool(arguments={"replace_text": {"old": "None", "new": "None or b''"}})
    assert probe_run(capsys, rule=rule)[3] == 6
    source.write_text(TWO_FUNCTIONS.replace("text.lower()", "text.casefold()"))
    _, out, _, requests = probe_run(capsys, rule=rule)
    shout = results_by_node(out)["shout"]
    assert (requests, shout["cached"]) == (3, True)  # whisper asked again, shout not
    (change,) = shout["changes"]
    assert "+    # TODO: handle None or b''" in change["diff"]
    probe_run(capsys, "--fix", "--agents", "probe", rule=rule)
    assert source.read_text() == (
        TWO_FUNCTIONS.replace("text.lower()", "text.casefold()").replace("None", "None or b''")
    )


def test_a_change_that_reaches_outside_its_node_is_asked_again_after_an_edit_elsewhere(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each job's replace_text changes both functions' TODOs: that cannot be made again on a
    file whose other function changed, so both jobs go to the model."""
    monkeypatch.chdir(project)
    source = project / "pkg" / "shout.py"
    source.write_text(TWO_FUNCTIONS)
    rule = CallEveryTool(arguments={"replace_text": {"old": "TODO", "new": "NOTE"}})
    assert probe_run(capsys, rule=rule)[3] == 6
    assert probe_run(capsys, rule=rule)[3] == 0
    source.write_text(TWO_FUNCTIONS.replace("text.lower()", "text.casefold()"))
    assert probe_run(capsys, rule=rule)[3] == 6


WRITES_NOTES = 'writes: [node_file, "notes/{name}.txt"]'
"""The probe may write its notes too."""
WRITE_NOTE = """\
# /// remora-tool
# description = "Write a note about the node to notes/<name>.txt."
# ///
write_file("notes/" + node["name"] + ".txt", node["name"] + " noted\\n")
"noted"
"""


def note_taker(body: dict[str, Any]) -> Any:
    done = sum(1 for message in body["messages"] if message["role"] == "tool")
    if done == 0:
        return tool_call("find_todos", {})
    if done == 1:
        return tool_call("write_note", {})
    return tool_call("submit_result", {"summary": "noted", "todo_count": 1})


def test_a_change_that_creates_another_file_is_reused_while_that_file_does_not_exist(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    (probe_agent.parent / "tools" / "write_note.pym").write_text(WRITE_NOTE)
    tools = "  - script: tools/replace_text.pym\n"
    definition = probe_agent.read_text().replace("writes: [node_file]", WRITES_NOTES)
    definition = definition.replace("host_functions: [", "host_functions: [file_exists, ")
    probe_agent.write_text(definition.replace(tools, tools + "  - script: tools/write_note.pym\n"))
    source = project / "pkg" / "shout.py"
    source.write_text(TWO_FUNCTIONS)
    assert probe_run(capsys, rule=note_taker)[3] == 6
    source.write_text(TWO_FUNCTIONS.replace("text.lower()", "text.casefold()"))
    _, out, _, requests = probe_run(capsys, rule=note_taker)
    shout = results_by_node(out)["shout"]
    assert (requests, shout["cached"]) == (3, True)  # only whisper asked again
    assert [change["file"] for change in shout["changes"]] == ["notes/shout.txt"]
    (project / "notes").mkdir()
    (project / "notes" / "shout.txt").write_text("mine\n")
    source.write_text(TWO_FUNCTIONS.replace("text.lower()", "text.swapcase()"))
    _, out, _, requests = probe_run(capsys, rule=note_taker)
    assert requests == 6  # the note exists now: shout's cached change no longer holds


@pytest.mark.parametrize("tamper", TAMPERED.values(), ids=TAMPERED.keys())
def test_a_hand_edited_entry_is_a_miss(
    cached_change: Path, capsys: pytest.CaptureFixture[str], tamper: Callable[..., None]
) -> None:
    entry = json.loads(cached_change.read_text())
    tamper(entry)
    cached_change.write_text(json.dumps(entry))
    result, requests = rerun(capsys)
    assert requests == 3  # asked the model again
    assert result["cached"] is False
    assert [change["file"] for change in result["changes"]] == ["pkg/shout.py"]


@pytest.mark.parametrize("kind", ["garbage", "symlink", "fifo", "folder", "empty"])
def test_an_entry_that_is_not_a_plain_json_file_is_a_miss(
    cached_change: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    content = cached_change.read_bytes()
    cached_change.unlink()
    if kind == "garbage":
        cached_change.write_bytes(content[: len(content) // 2])
    elif kind == "symlink":  # a valid entry, but reached through a link
        (tmp_path / "elsewhere.json").write_bytes(content)
        cached_change.symlink_to(tmp_path / "elsewhere.json")
    elif kind == "fifo":  # would block a plain open() forever
        os.mkfifo(cached_change)
    elif kind == "folder":
        cached_change.mkdir()
    else:
        cached_change.write_bytes(b"")
    result, requests = rerun(capsys)
    assert (requests, result["cached"]) == (3, False)
    if kind == "symlink":  # replaced by a real entry, never written through
        assert not cached_change.is_symlink()
        assert (tmp_path / "elsewhere.json").read_bytes() == content


# --- the parse cache's entries are untrusted too ----------------------------------------------


DEFINITION = ("function", "f", "f", 1, 1, 2, 0, 20)


@pytest.mark.parametrize(
    "row",
    [
        ["function", "f", "f", "1", 1, 2, 0, 20],
        ["function", "f", "f", 1, 1, 2, 0, 20.5],
        ["function", "f", "f", True, 1, 2, 0, 20],
        ["function", "f", 7, 1, 1, 2, 0, 20],
        ["function", "f", "f", 3, 1, 2, 0, 20],
        ["function", "f", "f", 1, 0, 2, 0, 20],
        ["function", "f", "f", 1, 1, 2, 20, 0],
        ["function", "f", "f", 1, 1, 2, -1, 20],
        ["file", "f", "f", 1, 1, 2, 0, 20],
        [["function"], "f", "f", 1, 1, 2, 0, 20],
        ["function", "f", "f", 1, 1, 2, 0],
        "function",
    ],
)
def test_a_parse_cache_entry_with_a_recomputed_checksum_is_still_checked(
    tmp_path: Path, row: Any
) -> None:
    cache = DefinitionCache(tmp_path / "cache")
    data = b"def f():\n    pass\n"
    key = content_key(data)
    assert cache.put(key, []) is None  # creates the folders
    entry = Path(cache._entry(key))
    body = json.dumps({"key": key, "definitions": [row]}, separators=(",", ":")).encode()
    entry.write_bytes(hashlib.blake2b(body, digest_size=16).hexdigest().encode() + b"\n" + body)
    assert cache.get(key) is None
    good = json.dumps({"key": key, "definitions": [list(DEFINITION)]}, separators=(",", ":"))
    entry.write_bytes(
        hashlib.blake2b(good.encode(), digest_size=16).hexdigest().encode() + b"\n" + good.encode()
    )
    (definition,) = cache.get(key) or []
    assert definition[1:] == DEFINITION[1:]


def test_a_parse_cache_entry_that_is_a_fifo_or_symlink_is_a_miss(tmp_path: Path) -> None:
    cache = DefinitionCache(tmp_path / "cache")
    key = content_key(b"x = 1\n")
    assert cache.put(key, []) is None
    entry = Path(cache._entry(key))
    valid = entry.read_bytes()
    assert valid == encode_entry(key, [])
    entry.unlink()
    os.mkfifo(entry)
    assert cache.get(key) is None  # returns at once, never waits for a writer
    entry.unlink()
    (tmp_path / "real").write_bytes(valid)
    entry.symlink_to(tmp_path / "real")
    assert cache.get(key) is None
    assert stat.S_ISLNK(entry.lstat().st_mode)


def test_discovery_warns_once_when_its_cache_cannot_be_written(tmp_path: Path) -> None:
    project = write_files(tmp_path / "p", {"a.py": "def a():\n    pass\n", "b.py": "B = 1\n"})
    (tmp_path / "cachefile").write_text("x")
    found = discover_nodes([project], root=project, cache_dir=tmp_path / "cachefile")
    assert [node.name for node in found.nodes] == ["a.py", "a", "b.py"]
    assert len(found.warnings) == 1
    assert "parse cache not written" in found.warnings[0].message


CHECK_NOTE = """\
# /// remora-tool
# description = "Say whether the node has its note in notes/<name>.txt."
# ///
there = file_exists("notes/" + node["name"] + ".txt")
{"outcome": "checked", "summary": "note exists" if there else "no note", "final": True}
"""


def test_a_file_the_job_may_write_is_in_its_key(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The result of a job whose agent may write a file of its own (the test agent's test file)
    depends on what is there: after the file was deleted or edited by hand, a stored "tests
    exist" is not the answer (it was, before this was in the key)."""
    monkeypatch.chdir(project)
    (probe_agent.parent / "tools" / "check_note.pym").write_text(CHECK_NOTE)
    definition = probe_agent.read_text().replace("writes: [node_file]", WRITES_NOTES)
    definition = definition.replace("host_functions: [", "host_functions: [file_exists, ")
    probe_agent.write_text(
        definition.replace("tools:\n", "tools:\n  - script: tools/check_note.pym\n").replace(
            "done_when: [checked]",
            "done_when: [checked]\nobserve: [check_note]",
        )
    )
    (project / "pkg" / "shout.py").write_text(TWO_FUNCTIONS)
    (project / "notes").mkdir()
    note = project / "notes" / "shout.txt"
    note.write_text("mine\n")

    def summaries() -> dict[str, tuple[str, bool]]:
        out = probe_run(capsys, rule=CallEveryTool())[1]
        return {name: (r["summary"], r["cached"]) for name, r in results_by_node(out).items()}

    assert summaries()["shout"] == ("note exists", False)
    assert summaries()["shout"] == ("note exists", True)  # nothing changed: from the cache
    note.write_text("edited by hand\n")
    assert summaries()["shout"] == ("note exists", False)  # asked again
    note.unlink()
    assert summaries() == {"shout": ("no note", False), "whisper": ("no note", True)}


def test_a_change_to_remoras_own_code_is_a_new_cache_key(tmp_path: Path) -> None:
    """The key holds a hash of Remora's package files (`remora_code`): with an editable install,
    a tool's code changes while `__version__` stays, and the old results are not this code's."""
    package = tmp_path / "remora"
    (package / "tool_library").mkdir(parents=True)
    (package / "tool_library" / "call_probe.py").write_text("LIMIT = 300\n")
    first = folder_hash(package)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert folder_hash(package) == first  # bytecode is not the code
    (package / "tool_library" / "call_probe.py").write_text("LIMIT = 301\n")
    assert folder_hash(package) != first
    (package / "tool_library" / "call_probe.py").write_text("LIMIT = 300\n")
    (package / "tool_library" / "moved.py").write_text("")
    assert folder_hash(package) != first
    assert remora_code() == folder_hash(Path(store.__file__).resolve().parents[1])
