"""The `analyze` use case called from Python: a request in, an outcome back, no argparse, no
console, no exit code. The model is the scripted one over real HTTP."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from remora.analysis.request import AnalysisHooks, AnalyzeOutcome, AnalyzeRequest, project_root
from remora.analysis.run import analyze
from remora.config.loading import load_settings
from remora.errors import RunFailed, UserInputError
from remora.events import Events
from remora.findings.results import JobResult, JobStatus
from remora.models.scripted.server import ScriptedModelServer, tool_call

FIND_THEN_REPLACE = [
    tool_call("find_todos", {}),
    tool_call("replace_text", {"old": "# TODO: handle None", "new": "# NOTE: handle None"}),
    tool_call("submit_result", {"summary": "one TODO", "todo_count": 1}),
]


def run(
    project: Path, base_url: str, request: AnalyzeRequest, hooks: AnalysisHooks | None = None
) -> AnalyzeOutcome:
    loaded = load_settings(None, cli={"server": {"base_url": base_url}}, cwd=project)
    return anyio.run(lambda: analyze(request, loaded, hooks=hooks or AnalysisHooks()))


def test_analyze_is_a_function_of_a_request(
    project: Path, probe_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    seen: list[JobResult] = []
    said: list[str] = []
    reported: list[AnalyzeOutcome] = []
    hooks = AnalysisHooks(result=seen.append, say=said.append, report=reported.append)
    request = AnalyzeRequest(paths=(Path("pkg"),), edits="fix")
    with ScriptedModelServer(script=FIND_THEN_REPLACE) as server:
        outcome = run(project, server.base_url, request, hooks)
    (result,) = outcome.results
    assert result.status is JobStatus.SUCCESS and result.outcome == "checked"
    assert [finding.rule for finding in result.findings] == ["TD001"]
    assert outcome.summary.jobs == 1 and outcome.summary.findings == 1
    assert outcome.summary.agents["probe"].outcomes == {"checked": 1}
    assert [agent.name for agent in outcome.agents] == ["probe"]
    assert outcome.root == project.resolve() and outcome.cached == 0
    assert outcome.model_requests == 3
    assert seen == outcome.results and reported == [outcome]
    # The fix was applied after the report hook, and the outcome says so.
    assert outcome.applied is not None and outcome.applied.applied == ["pkg/shout.py"]
    assert "# NOTE: handle None" in (project / "pkg" / "shout.py").read_text()

    # Again, through the result cache: no model request, the same outcome.
    request = AnalyzeRequest(paths=(Path("pkg"),))
    (project / "pkg" / "shout.py").write_text(
        (project / "pkg" / "shout.py").read_text().replace("NOTE", "TODO")
    )
    with ScriptedModelServer(script=FIND_THEN_REPLACE) as server:
        again = run(project, server.base_url, request)
        assert server.requests == []
    assert again.cached == 1 and again.model_requests == 0
    assert again.results[0].findings == result.findings


def test_a_report_hook_that_fails_leaves_the_files_alone(
    project: Path, probe_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    before = (project / "pkg" / "shout.py").read_text()

    def cannot_write(outcome: AnalyzeOutcome) -> None:
        raise RunFailed("the report could not be written")

    request = AnalyzeRequest(paths=(Path("pkg"),), edits="fix", use_cache=False)
    with (
        ScriptedModelServer(script=FIND_THEN_REPLACE) as server,
        pytest.raises(RunFailed, match="could not be written"),
    ):
        run(project, server.base_url, request, AnalysisHooks(report=cannot_write))
    assert (project / "pkg" / "shout.py").read_text() == before


def test_bad_requests_raise_instead_of_exiting(
    project: Path, probe_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    with pytest.raises(UserInputError, match="unknown agent"):
        run(project, "http://127.0.0.1:9", AnalyzeRequest(paths=(Path("pkg"),), agents=("x",)))
    # A server that is not there: one RunFailed before any job, not an error per job.
    events = Events()
    kinds: list[str] = []
    events.listeners.append(lambda event: kinds.append(event["event"]))
    loaded = load_settings(
        None, cli={"server": {"base_url": "http://127.0.0.1:9", "retries": 0}}, cwd=project
    )
    request = AnalyzeRequest(paths=(Path("pkg"),), use_cache=False)
    with pytest.raises(RunFailed, match=r"127\.0\.0\.1:9"):
        anyio.run(lambda: analyze(request, loaded, events=events))
    assert "job_started" not in kinds and kinds[:2] == ["discovery_done", "run_started"]


def test_a_file_outside_the_working_directory_is_read_from_its_own_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`remora analyze ../lib/pkg/mod.py` from another folder: the root is the folder holding
    the project file, so `pkg.mod` imports as its package (a relative import in it works), not
    `mod` from inside `pkg`."""
    library = tmp_path / "lib"
    (library / "pkg").mkdir(parents=True)
    (library / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (library / "pkg" / "__init__.py").write_text("")
    (library / "pkg" / "mod.py").write_text("from .rules import RULES\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert project_root([library / "pkg" / "mod.py"]) == library.resolve()
    assert project_root([library / "pkg"]) == library.resolve()
    # Without a project file or .git up the tree, the paths' own folder, as before.
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "one.py").write_text("")
    assert project_root([loose / "one.py"]) == loose.resolve()
    # Inside the working directory the working directory stays the root.
    monkeypatch.chdir(library / "pkg")
    assert project_root([Path("mod.py")]) == (library / "pkg").resolve()
