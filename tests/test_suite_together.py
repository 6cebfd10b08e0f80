"""The suite check (remora/analysis/suite.py): generated test files are written only as a set
that passes together with the project's tests, in two orders, run by the real pytest in the
project's Python in the real OS sandbox. The stage is called directly on results with changes,
and through `analyze` with an agent whose tool writes the test file the scripted model gives."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest

from remora.agents.definition import Agent, load_agent
from remora.analysis.request import AnalysisHooks, AnalyzeOutcome, AnalyzeRequest
from remora.analysis.run import analyze
from remora.analysis.suite import check_suites
from remora.cli.main import main
from remora.config.loading import load_settings
from remora.config.settings import CommandSettings
from remora.discovery.nodes import Node, NodeType
from remora.edits.workspace import file_diff
from remora.errors import UserInputError
from remora.events import Events
from remora.findings.results import Change, ErrorCode, Finding, JobResult, JobStatus
from remora.models.scripted.server import ScriptedModelServer, tool_call

MODULE = """\
RULES = []


def add(x):
    RULES.append(x)
    return len(RULES)


def count():
    return len(RULES)


def double(x):
    return 2 * x
"""
HEADER = (
    "import pathlib\nimport sys\n\n"
    "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))\n\n"
    "from m import {name}  # noqa: E402\n\n\n"
)
TESTS = {
    # Each passes alone; after test_m_add.py (sorted first), count() is 1, not 0.
    "add": "def test_add_0():\n    assert add(1) == 1\n",
    "count": "def test_count_0():\n    assert count() == 0\n",
    "double": "def test_double_0():\n    assert double(2) == 4\n",
}
AGENT = """\
name: gen
description: Writes the test file the model gives.
node_types: [function]
max_turns: 3
system_prompt: Write tests.
node_context: "Write tests for `{{ node.qualified_name }}` in {{ node.file }}"
tools:
  - script: tools/write_test.pym
host_functions: [write_file]
done_when: [written]
writes: ["{project}/tests/test_{module}_{name}.py"]
verify_together: pytest
options:
  # Passed to the check's pytest too; hypothesis's plugin adds seconds to each start.
  pytest_args: ["-p", "no:hypothesispytest"]
submit_result:
  inputs:
    summary: {type: string, description: One sentence.}
"""
WRITE_TEST = """\
# /// remora-tool
# description = "Write the test file of the function."
# inputs.text = {type = "string", description = "The test module."}
# ///
path = "tests/test_m_" + node["name"] + ".py"
write_file(path, text)
{"outcome": "written", "summary": "tests written (" + path + ")", "findings": [
    {"rule": "TST100", "message": "Function without tests", "line": node["start_line"]}]}
"""


def generated(name: str) -> str:
    return HEADER.format(name=name) + TESTS[name]


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    folder = write(
        tmp_path / "agents" / "gen", {"agent.yaml": AGENT, "tools/write_test.pym": WRITE_TEST}
    )
    return load_agent(folder / "agent.yaml", model="scripted")


def result_for(agent: Agent, project: str, name: str, text: str | None = None) -> JobResult:
    """A successful job of `agent` on m.py's function `name` that wrote its test file."""
    source = f"{project}/m.py" if project else "m.py"
    start = MODULE.splitlines().index(f"def {name}(x):" if name != "count" else "def count():")
    node = Node(
        id=f"{source}::{name}",
        type=NodeType.FUNCTION,
        name=name,
        qualified_name=name,
        file=source,
        start_line=start + 1,
        start_column=1,
        end_line=start + 3,
        start_byte=0,
        end_byte=1,
        text=f"def {name}(x): ...\n",
    )
    file = f"{project}/tests/test_m_{name}.py" if project else f"tests/test_m_{name}.py"
    text = generated(name) if text is None else text
    change = Change(file=file, diff=file_diff(file, None, text), new_text=text)
    finding = Finding(rule="TST100", message="Function without tests", file=source, line=start + 1)
    return JobResult(
        node=node,
        agent=agent.name,
        status=JobStatus.SUCCESS,
        outcome="written",
        summary=f"tests written ({file})",
        findings=[finding],
        changes=[change],
    )


class Seen:
    """What the stage told the user and the event stream."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.warned: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.stream = Events()
        self.stream.listeners.append(self.events.append)
        self.hooks = AnalysisHooks(say=self.said.append, warn=self.warned.append)


def check(
    root: Path,
    results: list[JobResult],
    agent: Agent,
    seen: Seen,
    settings: CommandSettings | None = None,
) -> list[JobResult]:
    async def run() -> list[JobResult]:
        return await check_suites(
            results,
            [agent],
            root=root,
            commands=settings or CommandSettings(),
            events=seen.stream,
            hooks=seen.hooks,
        )

    return anyio.run(run)


@pytest.mark.parametrize(
    ("project", "isolation"), [("", "bwrap"), ("services/calc", "bwrap"), ("", "none")]
)
def test_a_file_that_fails_in_company_is_dropped_and_the_other_kept(
    tmp_path: Path, agent: Agent, project: str, isolation: Literal["bwrap", "none"]
) -> None:
    """test_m_count.py passes alone, and fails after test_m_add.py (the order as written): it
    is dropped, its job not done with the reason and without its changes, its finding kept;
    test_m_add.py passes in both orders then, and is kept as it was. The same in a project
    folder below the analysed root (pytest's rootdir is that folder), and without the OS
    sandbox (each session in a full copy of the project)."""
    folder = tmp_path / project
    write(folder, {"pyproject.toml": "[project]\nname = 'm'\n", "m.py": MODULE})
    results = [result_for(agent, project, "add"), result_for(agent, project, "count")]
    seen = Seen()
    checked = check(tmp_path, results, agent, seen, CommandSettings(isolation=isolation))

    add, count = checked
    assert add is results[0]  # kept: the very result
    assert count.status is JobStatus.FAILED and count.outcome is None
    assert count.changes == []
    assert count.error is not None and count.error.code is ErrorCode.NOT_DONE
    prefix = f"{project}/" if project else ""
    assert count.summary == count.error.message
    assert count.summary == (
        f"{prefix}tests/test_m_count.py passes alone but fails when run with the project's "
        f"other tests (order as written: {prefix}tests/test_m_count.py::test_count_0): a test "
        "changes state that other tests see, or what it pins changes from run to run (random "
        "numbers, the clock); not written"
    )
    assert count.findings == results[1].findings  # "Function without tests" stays
    assert seen.said[0] == (
        "checking 2 generated test files together with the project's tests (2 orders)"
    )
    (event,) = [event for event in seen.events if event["event"] == "suite_checked"]
    assert event["project"] == (project or ".")
    assert event["kept"] == [f"{prefix}tests/test_m_add.py"]
    assert [d["job_id"] for d in event["dropped"]] == [f"gen:{prefix}m.py::count"]
    assert event["dropped"][0]["status"] == "failed"
    assert event["orders"] == ["order as written", "order reversed"]
    assert event["verified"] is True and event["rounds"] == 2 and event["runs"] == 3
    assert seen.warned == []


def test_a_set_that_passes_in_both_orders_is_kept_intact(tmp_path: Path, agent: Agent) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": "",
            "m.py": MODULE,
            "tests/test_existing.py": HEADER.format(name="double")
            + "def test_it():\n    assert double(0) == 0\n",
        },
    )
    results = [result_for(agent, "", "add"), result_for(agent, "", "double")]
    seen = Seen()
    assert check(tmp_path, results, agent, seen) == results
    (event,) = [event for event in seen.events if event["event"] == "suite_checked"]
    assert event["kept"] == ["tests/test_m_add.py", "tests/test_m_double.py"]
    assert event["dropped"] == [] and event["runs"] == 2 and event["rounds"] == 1
    assert len(seen.said) == 1  # nothing dropped: nothing more to say
    # Nothing was written to the project by the sessions.
    assert sorted(path.name for path in (tmp_path / "tests").iterdir()) == ["test_existing.py"]


def test_an_existing_test_failing_only_in_company_drops_the_file_that_ran_before_it(
    tmp_path: Path, agent: Agent
) -> None:
    """tests/test_registry.py (sorted after both generated files) pins count() == 0: it passes
    alone, and fails after test_m_add.py. The generated files that ran before it are narrowed
    by halves to the one that makes it fail; test_m_double.py is kept. An existing test that
    fails alone (test_broken.py) counts against no one."""
    write(
        tmp_path,
        {
            "setup.cfg": "",
            "m.py": MODULE,
            "tests/test_registry.py": HEADER.format(name="count")
            + "def test_empty():\n    assert count() == 0\n",
            "tests/test_broken.py": "def test_always():\n    assert False\n",
        },
    )
    results = [result_for(agent, "", "add"), result_for(agent, "", "double")]
    seen = Seen()
    add, double = check(tmp_path, results, agent, seen)
    assert double is results[1]
    assert add.status is JobStatus.FAILED and add.changes == []
    assert add.summary == (
        "tests/test_m_add.py changes state that other tests see: "
        "tests/test_registry.py::test_empty fails after it (order as written) and passes "
        "without it; not written"
    )
    (event,) = [event for event in seen.events if event["event"] == "suite_checked"]
    assert event["kept"] == ["tests/test_m_double.py"] and event["verified"] is True
    # Two orders, the baseline of the order as written, one half (add) that made it fail; the
    # second round's two orders, where test_broken.py fails as it does alone (the reversed
    # order's baseline says so).
    assert event["runs"] == 7 and event["rounds"] == 2


def test_state_changed_on_import_drops_every_file_that_could_have_done_it(
    tmp_path: Path, agent: Agent
) -> None:
    """A generated file calls add() when it is imported: pytest imports every file before the
    first test, so the existing test sorted first fails in both orders, after no generated
    file. Which one did it cannot be told by order: none of the set is written."""
    write(
        tmp_path,
        {
            "pyproject.toml": "",
            "m.py": MODULE,
            "tests/test_a_registry.py": HEADER.format(name="count")
            + "def test_empty():\n    assert count() == 0\n",
        },
    )
    on_import = HEADER.format(name="add") + "add(0)\n\n\n" + "def test_add_0():\n    pass\n"
    results = [result_for(agent, "", "add", on_import), result_for(agent, "", "double")]
    seen = Seen()
    for result in check(tmp_path, results, agent, seen):
        assert result.status is JobStatus.FAILED and result.changes == []
        assert result.summary.endswith(
            "changes state that other tests see: tests/test_a_registry.py::test_empty fails "
            "when it and 1 other generated file run (order as written) and passes without "
            "them; not written"
        )


def test_of_two_files_that_each_pin_the_first_call_one_is_kept(
    tmp_path: Path, agent: Agent
) -> None:
    """test_m_add.py and test_m_count.py both call add() first and pin 1: each fails after the
    other. Only what fails in the first order is dropped; the second round keeps the other."""
    write(tmp_path, {"pyproject.toml": "", "m.py": MODULE})
    first = HEADER.format(name="add") + "def test_count_0():\n    assert add(2) == 1\n"
    results = [result_for(agent, "", "add"), result_for(agent, "", "count", first)]
    seen = Seen()
    add, count = check(tmp_path, results, agent, seen)
    assert add is results[0]
    assert count.status is JobStatus.FAILED and "(order as written: " in count.summary


def test_a_set_that_could_not_be_checked_is_not_written(tmp_path: Path, agent: Agent) -> None:
    """pytest over the folder takes longer than 5 times sandbox.commands.timeout_s: nothing of the
    set was verified, so none of it is written; the jobs are errors (command_timeout), and one
    warning says why."""
    write(tmp_path, {"pyproject.toml": "", "m.py": MODULE})
    slow = HEADER.format(name="double") + "def test_slow():\n    import time\n    time.sleep(30)\n"
    results = [result_for(agent, "", "add"), result_for(agent, "", "double", slow)]
    seen = Seen()
    checked = check(tmp_path, results, agent, seen, CommandSettings(timeout_s=0.4))
    for result in checked:
        assert result.status is JobStatus.ERROR and result.changes == []
        assert result.error is not None and result.error.code is ErrorCode.COMMAND_TIMEOUT
        assert "was not checked with the project's tests: pytest took longer" in result.summary
        assert result.findings  # kept
    (warning,) = seen.warned
    assert warning.startswith("the generated test files in . were not checked together")
    (event,) = [event for event in seen.events if event["event"] == "suite_checked"]
    assert event["verified"] is False and event["kept"] == []


def test_the_key_is_checked_where_it_is_written(tmp_path: Path) -> None:
    folder = write(
        tmp_path / "agents" / "gen",
        {
            "agent.yaml": AGENT.replace("verify_together: pytest", "verify_together: nose"),
            "tools/write_test.pym": WRITE_TEST,
        },
    )
    with pytest.raises(UserInputError) as raised:
        load_agent(folder / "agent.yaml", model="scripted")
    line = AGENT.splitlines().index("verify_together: pytest") + 1
    assert f"agent.yaml:{line}: verify_together: Input should be 'pytest'" in str(raised.value)
    plain = AGENT.replace("verify_together: pytest\n", "")
    (folder / "agent.yaml").write_text(plain)
    assert load_agent(folder / "agent.yaml", model="scripted").definition.verify_together is None


def model(body: dict[str, Any]) -> Any:
    """write_test with the function's test file, then submit."""
    context: str = body["messages"][1]["content"]
    name = context.split("`")[1]
    if any(message["role"] == "tool" for message in body["messages"]):
        return tool_call("submit_result", {"summary": "done"})
    return tool_call("write_test", {"text": generated(name)})


def project_with_agent(tmp_path: Path, agent_folder: Path) -> Path:
    project = write(tmp_path / "project", {"pyproject.toml": "", "m.py": MODULE})
    shutil.copytree(agent_folder, project / "agents" / "gen")  # the project ships its agent
    (project / "remora.yaml").write_text(
        "server:\n  retries: 0\n  timeout: 10\n"
        "agents:\n  gen: {definition: agents/gen/agent.yaml}\n"
    )
    return project


def test_analyze_reports_writes_and_streams_only_the_set_that_passes_together(
    tmp_path: Path, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through `analyze`: the report, the summary, the streamed results, the recorded
    transcripts and `--fix` all see test_m_count.py dropped and the other two files written."""
    project = project_with_agent(tmp_path, agent.source.parent)
    monkeypatch.chdir(project)
    streamed: list[JobResult] = []
    reported: list[AnalyzeOutcome] = []
    kinds: list[dict[str, Any]] = []
    events = Events()
    events.listeners.append(kinds.append)
    hooks = AnalysisHooks(result=streamed.append, report=reported.append)
    recorded = tmp_path / "transcripts"
    request = AnalyzeRequest(paths=(Path("m.py"),), agents=("gen",), edits="fix", record=recorded)
    with ScriptedModelServer(rule=model) as server:
        loaded = load_settings(None, cli={"server": {"base_url": server.base_url}}, cwd=project)
        outcome = anyio.run(lambda: analyze(request, loaded, events=events, hooks=hooks))
    by_name = {result.node.name: result for result in outcome.results}
    assert by_name["count"].status is JobStatus.FAILED
    assert "changes state that other tests see" in by_name["count"].summary
    assert by_name["add"].status is JobStatus.SUCCESS
    assert by_name["double"].status is JobStatus.SUCCESS
    assert outcome.summary.success == 2 and outcome.summary.failed == 1
    assert outcome.summary.agents["gen"].not_done == 1
    assert outcome.summary.findings == 3  # every job's finding stays
    assert sorted(change.file for change in outcome.changes) == [
        "tests/test_m_add.py",
        "tests/test_m_double.py",
    ]
    # Streamed once each, as final: the same results the report has.
    assert sorted(streamed, key=lambda r: r.node.name) == sorted(
        outcome.results, key=lambda r: r.node.name
    )
    assert reported == [outcome]
    assert outcome.applied is not None
    assert sorted(outcome.applied.applied) == ["tests/test_m_add.py", "tests/test_m_double.py"]
    assert sorted(path.name for path in (project / "tests").iterdir()) == [
        "test_m_add.py",
        "test_m_double.py",
    ]
    names = [event["event"] for event in kinds]
    assert names.index("suite_checked") < names.index("changes_applied")
    # Recorded (`--record`, training data) as the report says, not as the job first ended.
    lines = (recorded / "gen.jsonl").read_text().splitlines()
    statuses = {json.loads(line)["node"]: json.loads(line)["status"] for line in lines}
    assert statuses == {"m.py::add": "success", "m.py::count": "failed", "m.py::double": "success"}


def test_diff_shows_the_same_set(
    tmp_path: Path,
    agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = project_with_agent(tmp_path, agent.source.parent)
    monkeypatch.chdir(project)
    with ScriptedModelServer(rule=model) as server:
        flags = ["--agents", "gen", "--no-cache", "--base-url", server.base_url]
        code = main(["analyze", "m.py", "--diff", *flags])
        patch = capsys.readouterr().out
        assert main(["analyze", "m.py", "--format", "json", *flags]) == 1
        report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert "+++ b/tests/test_m_add.py" in patch and "+++ b/tests/test_m_double.py" in patch
    assert "test_m_count.py" not in patch
    assert not (project / "tests").exists()
    (count,) = [r for r in report["results"] if r["node"]["name"] == "count"]
    assert count["status"] == "failed" and count["changes"] == []
    assert count["error"]["code"] == "not_done"
    assert report["summary"]["agents"]["gen"]["not_done"] == 1


def test_a_dropped_file_is_remembered_by_the_cache_until_asked_again(
    tmp_path: Path,
    agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The job whose file failed in company is stored as dropped: the second run answers it
    from the cache with the same reason, and its check runs the other files once (one
    round, not a second round to find the same file again); `--retry-not-done` asks it again,
    and the check drops it again."""
    project = project_with_agent(tmp_path, agent.source.parent)
    monkeypatch.chdir(project)

    def run(*extra: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        events = tmp_path / "events.jsonl"
        events.unlink(missing_ok=True)
        flags = ["--agents", "gen", "--format", "json", "--events", str(events)]
        with ScriptedModelServer(rule=model) as server:
            code = main(["analyze", "m.py", *flags, "--base-url", server.base_url, *extra])
        assert code == 1
        report = json.loads(capsys.readouterr().out)
        checked = [
            record
            for line in events.read_text().splitlines()
            if (record := json.loads(line))["event"] == "suite_checked"
        ]
        return report, checked

    first, (first_check,) = run()
    second, (second_check,) = run()
    dropped = [r for r in first["results"] if r["node"]["name"] == "count"]
    again = [r for r in second["results"] if r["node"]["name"] == "count"]
    assert dropped[0]["status"] == "failed" and "changes state" in dropped[0]["summary"]
    assert [{k: r[k] for k in ("status", "summary", "error")} for r in again] == [
        {k: r[k] for k in ("status", "summary", "error")} for r in dropped
    ]
    assert (first_check["rounds"], len(first_check["files"])) == (2, 3)
    assert (second_check["rounds"], second_check["files"]) == (
        1,
        ["tests/test_m_add.py", "tests/test_m_double.py"],
    )
    assert second["summary"]["agents"]["gen"]["not_done"] == 1
    retried, (retried_check,) = run("--retry-not-done")
    assert (retried_check["rounds"], len(retried_check["files"])) == (2, 3)
    assert [r["status"] for r in retried["results"] if r["node"]["name"] == "count"] == ["failed"]
