"""The sandbox: limits, host functions, run_command and hostile scripts, all against real Monty
workers, real files and real programs."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from remora.agents.limits import PRESETS, resolve_limits
from remora.agents.toolscript import load_tool
from remora.config.settings import CommandSettings, LimitsPreset, SandboxLimits
from remora.discovery.discover import discover_nodes
from remora.discovery.nodes import Node
from remora.edits.workspace import Workspace
from remora.findings.results import ErrorCode, JobError
from remora.host.context import HostContext
from remora.host.library import own_functions, shared_functions
from remora.protocol.completion import Completion, DraftsRequest
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolOutcome, ToolSandbox

pytestmark = pytest.mark.anyio

HEADER = '# /// remora-tool\n# description = "test tool"\n# ///\n'
FAST = resolve_limits(SandboxLimits(preset=LimitsPreset.STRICT, timeout_s=1.0))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def sandbox() -> AsyncIterator[ToolSandbox]:
    async with ToolSandbox(max_workers=2) as pool:
        yield pool


@pytest.fixture
def node(project: Path) -> Node:
    return next(n for n in discover_nodes([project], root=project).nodes if n.name == "shout")


async def run_script(
    code: str,
    sandbox: ToolSandbox,
    project: Path,
    node: Node,
    *,
    commands: CommandSettings | None = None,
    limits: Any = FAST,
    workspace: Workspace | None = None,
) -> ToolOutcome:
    script = project.parent / "tool_under_test.pym"
    script.write_text(HEADER + code)
    tool = load_tool(script)
    workspace = workspace or Workspace(project)
    context = HostContext(workspace, node, CommandRunner(commands or CommandSettings()))
    # The shared functions and the test agent's (check_tests).
    host = shared_functions(context) | own_functions("remora.bundled_agents.test.host", context)
    try:
        return await sandbox.run(tool, {"node": node.model_dump(), "options": {}}, host, limits)
    finally:
        workspace.close()


# --- limits --------------------------------------------------------------------------------


def test_presets_and_overrides_resolve_in_order() -> None:
    assert resolve_limits() == PRESETS[LimitsPreset.DEFAULT]
    agent_own = SandboxLimits(preset=LimitsPreset.PERMISSIVE, timeout_s=30)
    config = SandboxLimits(max_memory_mb=100)
    per_agent = SandboxLimits(timeout_s=5)
    limits = resolve_limits(agent_own, config, per_agent)
    assert (limits.timeout_s, limits.max_memory_mb, limits.max_host_calls) == (5, 100, 10000)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("while True:\n    pass\n", "TimeoutError"),
        ("a = []\nwhile True:\n    a.append('x' * 100000)\n", "MemoryError"),
        ("def f(n):\n    return f(n + 1)\nf(0)\n", "RecursionError"),
        ("for i in range(1000):\n    file_exists('x')\n", "suspension limit"),
        ("x = (\n", "SyntaxError"),
        ("import os\nos.system('id')\n", "AttributeError"),
        ("import subprocess\n", "ModuleNotFoundError"),
        ("import socket\n", "ModuleNotFoundError"),
        ("__import__('os')\n", "NameError"),
        ("eval(\"__import__('os')\")\n", "NameError"),
        ("open('/etc/passwd').read()\n", "PermissionError"),
        ("import os\nos.environ\n", "not supported"),
    ],
)
async def test_hostile_or_broken_scripts_become_error_results(
    code: str, expected: str, sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    outcome = await run_script(code, sandbox, project, node)
    assert not outcome.ok
    assert expected in (outcome.error or "")
    assert outcome.error is not None and outcome.error.startswith("tool_under_test.pym:")
    # The pool still serves the next call.
    assert (await run_script("1 + 1\n", sandbox, project, node)).value == 2


async def test_error_result_carries_the_script_line(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    outcome = await run_script("x = 1\n\ny = {}['missing']\n", sandbox, project, node)
    assert outcome.error == "tool_under_test.pym:6: KeyError: missing"


async def test_host_functions_run_on_the_event_loops_thread(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    """Monty calls a plain host function from a thread of its own: run there, host code would
    run beside Remora's other code (CPython 3.11's `ast` is not thread-safe). Each call, plain
    or async, runs on the thread of the loop that runs the tool; an exception still reaches the
    script as one it can catch."""
    seen: list[str] = []

    def plain(fail: bool) -> str:
        seen.append(threading.current_thread().name)
        if fail:
            raise ValueError("refused")
        return "plain"

    async def awaited() -> str:
        seen.append(threading.current_thread().name)
        return "awaited"

    script = project.parent / "tool_under_test.pym"
    script.write_text(
        HEADER + "a = plain(False)\nb = await awaited()\ntry:\n    plain(True)\n"
        "except ValueError as exc:\n    c = str(exc)\n[a, b, c]\n"
    )
    host = {"plain": plain, "awaited": awaited}
    outcome = await sandbox.run(load_tool(script), {}, host, FAST)
    assert outcome.value == ["plain", "awaited", "refused"], outcome.error
    assert seen == [threading.current_thread().name] * 3


async def test_print_is_captured_not_written_to_stdout(
    sandbox: ToolSandbox, project: Path, node: Node, capfd: pytest.CaptureFixture[str]
) -> None:
    outcome = await run_script("print('hello from the tool')\n'done'\n", sandbox, project, node)
    assert outcome.value == "done"
    assert outcome.printed == "hello from the tool\n"
    assert "hello from the tool" not in capfd.readouterr().out


async def test_a_killed_worker_fails_only_that_call(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    def monty_workers() -> list[int]:
        mine = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text().split()
                    cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                except OSError:
                    continue
                if int(stat[3]) == os.getpid() and b"monty" in cmdline:
                    mine.append(int(entry))
        return mine

    assert (await run_script("1\n", sandbox, project, node)).ok
    workers = monty_workers()
    assert workers
    for pid in workers:
        os.kill(pid, 9)
    results = [await run_script(f"{i} * 2\n", sandbox, project, node) for i in range(3)]
    assert [r.value for r in results if r.ok] == [i * 2 for i, r in enumerate(results) if r.ok]
    assert results[-1].ok and results[-1].value == 4


# --- host functions and the workspace ------------------------------------------------------

ESCAPES = ["/etc/passwd", "~/.ssh/id_rsa", "../outside.txt", "pkg/../../outside.txt"]


@pytest.mark.parametrize("function", ["read_file", "write_file", "list_dir", "file_exists"])
async def test_host_functions_refuse_paths_outside_the_project(
    function: str, sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    (project.parent / "outside.txt").write_text("secret outside")
    call = f"{function}(p, 'x')" if function == "write_file" else f"{function}(p)"
    code = (
        "results = []\n"
        f"for p in {ESCAPES!r}:\n"
        "    try:\n"
        f"        results.append(['ok', {call}])\n"
        "    except (PermissionError, FileNotFoundError) as exc:\n"
        "        results.append([type(exc).__name__, str(exc)])\n"
        "results\n"
    )
    outcome = await run_script(code, sandbox, project, node)
    assert outcome.ok, outcome.error
    for (kind, detail), path in zip(outcome.value, ESCAPES, strict=True):
        if path.startswith("~"):
            # A relative name inside the project that happens to start with '~': harmless.
            assert kind in ("FileNotFoundError", "ok")
            assert detail in (False, None) or "no such" in str(detail)
        else:
            assert kind == "PermissionError", (path, kind, detail)
    assert "secret outside" not in json.dumps(outcome.value)
    assert (project.parent / "outside.txt").read_text() == "secret outside"


async def test_symlink_inside_the_project_pointing_out_is_refused(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    (project.parent / "outside.txt").write_text("secret outside")
    (project / "pkg" / "link.txt").symlink_to(project.parent / "outside.txt")
    code = (
        "try:\n    r = read_file('pkg/link.txt')\nexcept PermissionError as e:\n    r = str(e)\nr\n"
    )
    outcome = await run_script(code, sandbox, project, node)
    assert outcome.value == "pkg/link.txt: leads outside the workspace (a symlink?)"


@pytest.mark.parametrize("path", ["pkg/\x00shout.py", "a" * 5000])
async def test_odd_paths_are_errors_not_crashes(
    path: str, sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    code = (
        f"try:\n    r = read_file({path!r})\nexcept Exception as e:\n    r = type(e).__name__\nr\n"
    )
    outcome = await run_script(code, sandbox, project, node)
    assert outcome.ok
    assert outcome.value in ("PermissionError", "OSError", "FileNotFoundError")


async def test_writes_stay_in_the_workspace_and_show_in_the_diff(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    before = (project / "pkg" / "shout.py").read_bytes()
    workspace = Workspace(project)
    code = (
        "text = read_file(node['file'])\n"
        "write_file(node['file'], text.replace('upper', 'lower'))\n"
        "write_file('pkg/new.py', 'x = 1\\n')\n"
        "[read_file(node['file']).count('lower'), list_dir('pkg'), file_exists('pkg/new.py')]\n"
    )
    outcome = await run_script(code, sandbox, project, node, workspace=workspace)
    assert outcome.value == [1, ["new.py", "shout.py"], True]
    assert (project / "pkg" / "shout.py").read_bytes() == before
    assert not (project / "pkg" / "new.py").exists()
    diffs = {change.file: change.diff for change in workspace.diff()}
    assert "+    return text.lower()" in diffs["pkg/shout.py"]
    assert diffs["pkg/new.py"].startswith("--- /dev/null\n+++ b/pkg/new.py")


async def test_ten_megabyte_argument_is_handled(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    script = project.parent / "big.pym"
    script.write_text(
        '# /// remora-tool\n# description = "d"\n# inputs.text = {type = "string"}\n# ///\n'
        "len(text)\n"
    )
    tool = load_tool(script)
    host = shared_functions(HostContext(Workspace(project), node, CommandRunner(CommandSettings())))
    big = "x" * 10_000_000
    outcome = await sandbox.run(tool, {"text": big, "node": {}, "options": {}}, host, FAST)
    assert outcome.ok and outcome.value == 10_000_000


async def test_node_info_describes_the_definition(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    outcome = await run_script("node_info()\n", sandbox, project, node)
    info = outcome.value
    assert info["signature"] == "def shout(text)"
    assert info["parameters"] == [
        {"name": "text", "annotation": None, "default": None, "kind": "positional_or_keyword"}
    ]
    assert (info["start_line"], info["end_line"], info["docstring"]) == (4, 6, None)


# --- run_command ---------------------------------------------------------------------------


async def call_command(
    name: str,
    args: list[str],
    sandbox: ToolSandbox,
    project: Path,
    node: Node,
    **settings: Any,
) -> dict[str, Any]:
    code = (
        "try:\n"
        f"    result = await run_command({name!r}, {args!r})\n"
        "except PermissionError as exc:\n"
        "    result = {'refused': str(exc)}\n"
        "result\n"
    )
    commands = CommandSettings(**settings)
    limits = resolve_limits(SandboxLimits(timeout_s=5))
    outcome = await run_script(code, sandbox, project, node, commands=commands, limits=limits)
    assert outcome.ok, outcome.error
    assert isinstance(outcome.value, dict)
    return outcome.value


async def test_ruff_runs_in_the_workspace_directory(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    result = await call_command(
        "ruff",
        ["check", "--output-format", "json", "--select", "F", "pkg/shout.py"],
        sandbox,
        project,
        node,
    )
    assert result["exit_code"] == 0, result
    assert json.loads(result["stdout"]) == []


async def test_command_sees_workspace_writes_but_what_it_writes_is_no_change(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    """A command runs in a throwaway copy: ruff --fix sees the job's write and fixes it there,
    and a second command sees neither that fix nor a file the first one created."""
    workspace = Workspace(project)
    code = (
        "write_file('pkg/shout.py', read_file('pkg/shout.py') + 'import os\\n')\n"
        "r = await run_command('ruff', ['check', '--select', 'F401', '--fix', 'pkg/shout.py'])\n"
        "again = await run_command('ruff', ['check', '--select', 'F401', 'pkg/shout.py'])\n"
        "[r['exit_code'], again['exit_code'], read_file('pkg/shout.py').endswith('import os\\n')]\n"
    )
    limits = resolve_limits(SandboxLimits(timeout_s=5))
    outcome = await run_script(code, sandbox, project, node, workspace=workspace, limits=limits)
    # ruff fixed its copy (exit 0); the next command saw the job's own write again (exit 1)
    assert outcome.value == [0, 1, True]
    [change] = workspace.diff()
    assert change.file == "pkg/shout.py" and change.new_text.endswith("import os\n")
    assert "import os" not in (project / "pkg" / "shout.py").read_text()


async def test_what_a_command_deletes_is_back_for_the_next_one(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    """Code under pytest that deletes a configuration link leaves it in place for the next
    command (a shared, read-only ruff run computed without it would mislead every job)."""
    (project / "ruff.toml").write_text("line-length = 100\n")
    deletes = "def test_delete():\n    import os\n    os.unlink('ruff.toml')\n"
    checks = "def test_there():\n    import os\n    assert os.path.exists('ruff.toml')\n"
    code = (
        "src = read_file('pkg/shout.py')\n"
        "pytest = ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'pkg/shout.py']\n"
        f"write_file('pkg/shout.py', src + {deletes!r})\n"
        "first = await run_command('python', pytest)\n"
        f"write_file('pkg/shout.py', src + {checks!r})\n"
        "second = await run_command('python', pytest)\n"
        "write_file('pkg/shout.py', src)\n"
        "[first['exit_code'], second['exit_code']]\n"
    )
    limits = resolve_limits(SandboxLimits(timeout_s=60))
    outcome = await run_script(code, sandbox, project, node, limits=limits)
    assert outcome.value == [0, 0], outcome
    assert (project / "ruff.toml").exists()


async def test_a_sandbox_that_fails_at_run_time_is_an_environment_fault(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    """bubblewrap failing to build the sandbox (here: the project it must bind is gone) is the
    environment's fault, which ends the job as an error, never the command's result."""
    script = project.parent / "tool_under_test.pym"
    script.write_text(HEADER + "await run_command('ruff', ['--version'])\n")
    tool = load_tool(script)
    workspace = Workspace(project)
    shutil.rmtree(project)
    faults: list[JobError] = []
    host = shared_functions(HostContext(workspace, node, CommandRunner(CommandSettings()), faults))
    outcome = await sandbox.run(tool, {"node": node.model_dump(), "options": {}}, host, FAST)
    assert outcome.error is not None
    [fault] = faults
    assert fault.code is ErrorCode.SANDBOX_CRASHED
    assert "bwrap:" in fault.message


async def test_workspace_directory_costs_what_the_job_touches(project: Path) -> None:
    """On disk, only what the job touched; in the sandbox, the rest of the project through
    links the command's tar brings, which stay out of what comes back."""
    for i in range(200):
        (project / "pkg" / f"other_{i}.py").write_text("import os\n")
    workspace = Workspace(project)
    workspace.write_text("pkg/shout.py", "changed\n")
    runner = CommandRunner(CommandSettings())
    async with workspace.command_directory() as directory:
        on_disk = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*"))
        assert on_disk == ["pkg", "pkg/shout.py"]
        args = ["check", "--output-format", "json", "--exit-zero", "pkg/other_7.py"]
        result = await runner.run("ruff", args, directory, project=workspace.root)
        [problem] = json.loads(result["stdout"])
        assert problem["code"] == "F401"
        after = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*"))
        assert after == on_disk
        assert (directory / "pkg" / "shout.py").read_text() == "changed\n"
    assert not directory.exists()


@pytest.mark.parametrize(
    ("name", "args", "refusal"),
    [
        ("curl", ["http://example.com"], "'curl' is not allowed"),
        ("python", ["-c", "print(1)"], "python is allowed only as python -m MODULE"),
        ("python", ["-m", "http.server"], "python is allowed only as python -m MODULE"),
        ("ruff", ["check", "/etc"], "points outside the workspace"),
        ("ruff", ["check", "../outside"], "points outside the workspace"),
        ("ruff", ["check", "--config=/tmp/x.toml"], "points outside the workspace"),
        ("ruff", ["check", "~/.ssh"], "points outside the workspace"),
        ("ruff", ["check", "a\x00b"], "NUL byte"),
    ],
)
async def test_run_command_refusals(
    name: str, args: list[str], refusal: str, sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    result = await call_command(name, args, sandbox, project, node)
    assert refusal in result["refused"]


async def test_command_that_floods_stdout_is_capped(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    result = await call_command(
        "yes", [], sandbox, project, node, allowed=["yes"], timeout_s=1, output_limit_kb=4
    )
    assert result["timed_out"] is True and result["truncated"] is True
    assert len(result["stdout"]) == 4096


async def test_command_that_sleeps_forever_is_killed(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    result = await call_command(
        "sleep", ["1000"], sandbox, project, node, allowed=["sleep"], timeout_s=0.5
    )
    assert result["timed_out"] is True
    assert result["exit_code"] is None


async def test_commands_get_no_secrets_and_no_stdin(
    sandbox: ToolSandbox, project: Path, node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("REMORA_SERVER__API_KEY", "remora-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "gh-secret")
    result = await call_command("env", [], sandbox, project, node, allowed=["env"])
    assert result["exit_code"] == 0
    assert "secret" not in result["stdout"]
    assert "PATH=" in result["stdout"]
    cat = await call_command("cat", [], sandbox, project, node, allowed=["cat"], timeout_s=5)
    assert cat["exit_code"] == 0 and cat["stdout"] == "" and cat["timed_out"] is False


# --- check_tests ---------------------------------------------------------------------------

PLUGIN_STATE = (
    "def test_plugin(pytestconfig):\n"
    "    assert pytestconfig.pluginmanager.has_plugin('hypothesispytest') is {}\n"
)


@pytest.mark.parametrize(
    ("configuration", "loaded"),
    [
        ("", False),  # a generated file never uses it: its import was most of a check's time
        ('[tool.pytest.ini_options]\naddopts = "--hypothesis-show-statistics"\n', True),
    ],
)
async def test_check_tests_loads_hypothesis_only_where_the_configuration_needs_it(
    sandbox: ToolSandbox, project: Path, node: Node, configuration: str, loaded: bool
) -> None:
    pytest.importorskip("hypothesis")
    (project / "pyproject.toml").write_text(configuration)
    text = PLUGIN_STATE.format(loaded)
    code = f"await check_tests('tests/test_plugin.py', {text!r})\n"
    outcome = await run_script(code, sandbox, project, node, limits=resolve_limits())
    assert outcome.ok, outcome.error
    assert (outcome.value["passed"], outcome.value["failed"]) == (["test_plugin"], [])
    assert not (project / "tests").exists()  # a throwaway copy: nothing written


async def test_check_tests_loads_the_plugins_a_projects_fixture_needs(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    """An autouse fixture of the project's conftest.py asks for anyio's `anyio_backend`: left
    out, the plugin leaves every test an ERROR, so the check runs again with every plugin."""
    pytest.importorskip("anyio")
    (project / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture(autouse=True)\n"
        "def backend(anyio_backend):\n    return anyio_backend\n"
    )
    text = "def test_plain():\n    assert 1 + 1 == 2\n"
    code = f"await check_tests('tests/test_plain.py', {text!r})\n"
    outcome = await run_script(code, sandbox, project, node, limits=resolve_limits())
    assert outcome.ok, outcome.error
    assert (outcome.value["passed"], outcome.value["failed"]) == (["test_plain"], [])


# --- complete_drafts -----------------------------------------------------------------------


async def test_drafts_beyond_a_batch_are_asked_in_batches_in_order(
    sandbox: ToolSandbox, project: Path, node: Node
) -> None:
    """A batch holds four drafts: six temperatures are two requests, the texts in the order of
    the temperatures (the model here is a stand-in naming each draft's temperature)."""
    asked: list[list[float]] = []

    async def drafting(request: DraftsRequest) -> list[Completion]:
        asked.append(request.temperatures)
        return [Completion(text=f"t={t}") for t in request.temperatures]

    script = project.parent / "drafts.pym"
    script.write_text(
        HEADER + "await complete_drafts('x = (', ['\\n'], 8, [0.0, 0.3, 0.5, 0.7, 0.9, 1.1])\n"
    )
    workspace = Workspace(project)
    commands = CommandRunner(CommandSettings())
    host = shared_functions(HostContext(workspace, node, commands, drafting=drafting))
    try:
        outcome = await sandbox.run(
            load_tool(script), {"node": node.model_dump(), "options": {}}, host, FAST
        )
    finally:
        workspace.close()
    assert outcome.ok, outcome.error
    assert outcome.value == ["t=0.0", "t=0.3", "t=0.5", "t=0.7", "t=0.9", "t=1.1"]
    assert asked == [[0.0, 0.3, 0.5, 0.7], [0.9, 1.1]]


async def test_a_command_whose_output_is_all_that_is_read_copies_nothing_back(
    tmp_path: Path,
) -> None:
    (tmp_path / "m.py").write_text("import os\n")
    runner = CommandRunner(CommandSettings())
    args = ["check", "--fix", "--output-format", "json", "--exit-zero", "m.py"]
    for copy_back, left in ((False, "import os\n"), (True, "")):
        directory = tmp_path / f"folder-{copy_back}"
        directory.mkdir()
        (directory / "m.py").write_text("import os\n")
        result = await runner.run("ruff", args, directory, copy_back=copy_back)
        assert result["exit_code"] == 0 and json.loads(result["stdout"]) == []
        assert (directory / "m.py").read_text() == left
