"""One pytest session over a list of test files, as the project would run them with generated
files in place: the files in the order given, in the project's Python, in the OS sandbox, in a
throwaway tree that shows the project with those files (edits/workspace.py). What the session
says is read from its JUnit XML report, not from its output (which is cut at
`sandbox.commands.output_limit_kb`): which tests failed or errored, by file.

A session of generated files alone (no test of the project's own in it) runs first without the
hypothesis and anyio plugins, as each of those files was checked on its own (`check_tests`):
the files are plain synchronous pytest, and hypothesis's plugin imports all of hypothesis at
the end of a session (1-8 s on 2 cores, most of such a session). Its answer is taken when every
test passed (or none was collected); any other answer is asked again of a session with every
plugin, whose answer counts, as before."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from remora.config.settings import CommandSettings
from remora.edits.workspace import Workspace
from remora.findings.results import ErrorCode
from remora.sandbox.commands import CommandRefused, CommandRunner, SandboxFailed
from remora.sandbox.confinement import SandboxUnavailable
from remora.tool_library.case_render import UNUSED_PLUGINS

TIMEOUT_FACTOR = 5
"""A session runs a folder of tests, not one file: it may take this many times
`sandbox.commands.timeout_s` (wall clock, and CPU seconds per process at least as many)."""
REPORT = ".remora-suite/report.xml"
"""Where pytest writes its JUnit report, inside the session's throwaway tree."""
REPORT_LIMIT = 32 * 1024 * 1024
"""A larger report is not believed: the session ran code the model wrote."""
PYTEST_ARGS = (
    "-q",
    "--tb=no",
    "--maxfail=0",  # every file runs, whatever `-x` the configuration or the agent adds
    "-p",
    "no:randomly",  # the order is the one given; nothing shuffles it
    "--continue-on-collection-errors",  # a file that does not import fails, the rest still run
    f"--junitxml={REPORT}",
    "-o",
    "junit_family=xunit1",  # each test's `file`
)


class Unverifiable(Exception):
    """A session said nothing about the tests: pytest timed out, the sandbox failed, pytest
    could not run them (a usage error, an internal error), or wrote no readable report."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Failure:
    file: str
    """The test's file, relative to the analysed root ("" when the report does not say)."""
    test: str
    """The test as pytest names it: `tests/test_a.py::test_x` (the file alone for a file that
    did not import)."""


class SuiteRunner:
    """Runs sessions for the run's suite check; counts them."""

    def __init__(self, root: Path, settings: CommandSettings, args: list[str]) -> None:
        self.root = root.resolve()
        timeout = settings.timeout_s * TIMEOUT_FACTOR
        self.settings = settings.model_copy(
            update={
                "timeout_s": timeout,
                "cpu_time_s": max(settings.cpu_time_s, math.ceil(timeout)),
            }
        )
        self.args = args
        """Extra pytest arguments (the agent's `pytest_args` option)."""
        self.runs = 0
        self._commands: CommandRunner | None = None

    @property
    def commands(self) -> CommandRunner:
        if self._commands is None:
            self._commands = CommandRunner(self.settings)
        return self._commands

    async def session(
        self, project: str, files: list[str], view: dict[str, str]
    ) -> frozenset[Failure]:
        """The tests that failed or errored when pytest ran `files` (paths relative to the root,
        in this order) with `project` as its rootdir, where the files in `view` (path: text)
        have that text. Unverifiable when the session said nothing."""
        self.runs += 1
        try:
            commands = self.commands
            workspace = Workspace(self.root, copy_project=commands.confinement is None)
            for key, text in view.items():
                workspace.write_text(key, text)
            generated_only = all(file in view for file in files)
            for plugins in (UNUSED_PLUGINS, ()) if generated_only else ((),):
                # Ours after the agent's: where they disagree, ours hold.
                args = ["-m", "pytest", *self.args, *plugins, *PYTEST_ARGS]
                args.append(f"--rootdir={project or '.'}")
                async with workspace.command_directory() as directory:
                    result = await commands.run(
                        "python", [*args, *files], directory, project=self.root
                    )
                    if plugins and (result["timed_out"] or result["exit_code"] not in (0, 5)):
                        continue  # not all passed: the session with every plugin says
                    report = _read_report(directory / REPORT, result)
                break
        except SandboxFailed as exc:
            raise Unverifiable(ErrorCode.SANDBOX_CRASHED, str(exc)) from exc
        except (CommandRefused, SandboxUnavailable, OSError) as exc:
            raise Unverifiable(ErrorCode.TOOL_ENVIRONMENT, str(exc)) from exc
        return _failures(report, project)


def _read_report(path: Path, result: dict[str, Any]) -> str:
    if result["timed_out"]:
        raise Unverifiable(
            ErrorCode.COMMAND_TIMEOUT,
            f"pytest took longer than {TIMEOUT_FACTOR} times sandbox.commands.timeout_s",
        )
    code = result["exit_code"]
    output = f"{result['stdout']}\n{result['stderr']}"
    tail = " | ".join([line.strip() for line in output.splitlines() if line.strip()][-3:])
    # 0: passed, 1: some failed, 5: no test collected (nothing failed either).
    if code not in (0, 1, 5):
        raise Unverifiable(ErrorCode.TOOL_ENVIRONMENT, f"pytest exited with {code}: {tail}")
    if code == 5:
        return ""
    if not path.is_file() or path.is_symlink() or path.stat().st_size > REPORT_LIMIT:
        raise Unverifiable(ErrorCode.TOOL_ENVIRONMENT, f"pytest wrote no usable report: {tail}")
    return path.read_text(encoding="utf-8", errors="replace")


def _failures(report: str, project: str) -> frozenset[Failure]:
    """The failed and errored test cases of a JUnit XML report (pytest's xunit1: each case has
    its `file`, relative to the rootdir `project`). A report with a DOCTYPE (entities) is not
    pytest's and is refused before it is parsed."""
    if not report:
        return frozenset()
    if "<!DOCTYPE" in report or "<!ENTITY" in report:
        raise Unverifiable(ErrorCode.TOOL_ENVIRONMENT, "pytest's report is not JUnit XML")
    try:
        tree = ElementTree.fromstring(report)
    except ElementTree.ParseError as exc:
        raise Unverifiable(ErrorCode.TOOL_ENVIRONMENT, f"pytest's report: {exc}") from exc
    found = set()
    for case in tree.iter("testcase"):
        if not any(child.tag in ("failure", "error") for child in case):
            continue
        given = case.get("file", "")
        file = PurePosixPath(project, given).as_posix() if given and project else given
        found.add(Failure(file=file, test=_test_name(case, given, file)))
    return frozenset(found)


def _test_name(case: ElementTree.Element, given: str, file: str) -> str:
    """`file::Class::test` from a case's classname (`tests.test_a.Class`: `given`, the file
    relative to the rootdir, as a module) and name; the file alone for a file that did not
    import (its case has no classname)."""
    classname, name = case.get("classname", ""), case.get("name", "")
    if not classname:
        return file or name
    module = given.removesuffix(".py").replace("/", ".")
    inner = classname[len(module) + 1 :] if classname.startswith(module + ".") else ""
    return "::".join(part for part in (file or classname, inner, name) if part)
