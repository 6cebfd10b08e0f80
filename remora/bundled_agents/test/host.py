"""The test agent's host library: where a function's tests go (`test_location`), a test module
rendered from explored calls (`test_file_text`), and pytest on a candidate file in a throwaway
copy of the project (`check_tests`). The calls themselves come from the shared `explore_calls`
(remora/host/calls.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from remora.findings.results import ErrorCode
from remora.host.context import HostContext, checked_path
from remora.tool_library.case_render import UNUSED_PLUGINS, render_module
from remora.tool_library.module_paths import locate_tests, module_of


def host_functions(host: HostContext) -> dict[str, Callable[..., Any]]:
    def test_location(path: str, function: str, tests_dir: str = "") -> dict[str, str]:
        if not isinstance(function, str) or not isinstance(tests_dir, str):
            raise TypeError("test_location: function and tests_dir must be str")
        return locate_tests(checked_path(path), function, tests_dir, host.file_exists)

    async def check_tests(path: str, text: str, args: list[str] | None = None) -> dict[str, Any]:
        """pytest on `text` as the file `path`, in a throwaway copy of the project: which
        tests passed and which failed (with pytest's line), nothing written."""
        key = host.workspace.key(checked_path(path))
        # The file is added to the command's copy of the project only: written there as a real
        # file, never through a link into the project (a tests/ folder that exists is a link).
        async with host.workspace.command_directory(extra={key: text}) as directory:
            # `--color=no` over the project's own `addopts = "--color=yes"` (humanize's): the
            # report below is read line by line, and colour codes hid every PASSED.
            argv = ["-m", "pytest", "-q", "-rA", "--tb=line", "--color=no"]
            argv += ["-p", "no:cacheprovider"]
            for plugins in (UNUSED_PLUGINS, ()):  # the configuration or a fixture needs them
                ran = await host.reported(
                    "python",
                    [*argv, *plugins, *(args or []), key],
                    directory,
                    copy_back=False,  # its report is stdout
                )
                if ran["exit_code"] != 4 and not re.search("^ERROR ", ran["stdout"], re.M):
                    break
        output = str(ran["stdout"])
        tail = " | ".join([line for line in output.strip().splitlines() if line][-3:])
        if ran["exit_code"] == 4:  # a usage error, with our plugins disabled and without
            # The project's pytest configuration asks for what its Python lacks (an `addopts`
            # of a plugin not installed: `--cov=...` without pytest-cov): no test can run there,
            # and the job ends as an error that says so, not as tests that "ran no test".
            said = str(ran.get("stderr", "")).splitlines()
            error = [line.strip() for line in said if "error:" in line][-1:]
            where = [line.rpartition("/")[2] for line in said if "inifile:" in line][:1]
            tail = " ".join(error or said[-1:])[:300]
            host.fault(
                ErrorCode.TOOL_ENVIRONMENT,
                "pytest could not start with the project's configuration"
                + "".join(f" ({name})" for name in where)
                + f": {tail}"
                + "; install what its pytest configuration needs (the plugins of its addopts) "
                "in the project's Python, or run Remora with that environment active",
            )
        passed = re.findall(r"^PASSED \S+::(\w+)", output, re.MULTILINE)
        failed = [
            {"name": name, "message": message or "failed"}
            for name, message in re.findall(
                r"^(?:FAILED|ERROR) \S+::(\w+)(?:\[[^\]\n]*\])?(?: - (.*))?$", output, re.MULTILINE
            )
        ]
        return {
            "passed": passed,
            "failed": failed,
            "exit_code": ran["exit_code"],
            "timed_out": ran["timed_out"],
            "output_tail": tail[:600],
        }

    def test_file_text(
        tests: list[dict[str, Any]], title: list[str], tests_folder: str, import_root: str
    ) -> str:
        module, _ = module_of(host.node.file, host.file_exists)
        return render_module(title, module, tests_folder, import_root, tests)

    return {
        "test_location": test_location,
        "check_tests": check_tests,
        "test_file_text": test_file_text,
    }
