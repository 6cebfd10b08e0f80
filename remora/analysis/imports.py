"""Whether the project's modules import in the project's Python, checked once per run for the
agents whose tools import them (`requires.project_imports`, the test agent's): a module that
does not import would fail every one of its jobs with the same error, so those jobs are skipped
with that error said once. The imports run inside the OS sandbox, like the tests would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from remora.agents.definition import Agent
from remora.config.settings import CommandSettings
from remora.discovery.nodes import Node
from remora.findings.results import ErrorCode, JobError, JobResult, JobStatus
from remora.sandbox.commands import FIXED_ENV, PASSED_ENV
from remora.sandbox.confinement import confinement
from remora.tool_library.module_paths import module_of

CHECK = """\
import importlib, json, sys
found = {}
for module, folder in json.loads(sys.argv[1]):
    sys.path.insert(0, folder)
    before = set(sys.modules)
    try:
        importlib.import_module(module)
        found[module] = None
    except BaseException as error:
        found[module] = (type(error).__name__ + ": " + str(error)).strip()
        # What the failed import left behind (a package's submodules, imported by its
        # __init__ before it failed) would let the next module of the package "import".
        for name in set(sys.modules) - before:
            del sys.modules[name]
    finally:
        sys.path.remove(folder)
print(json.dumps(found))
"""


def unimportable(
    jobs: Sequence[tuple[Agent, Node]], root: Path, commands: CommandSettings
) -> dict[str, tuple[str, str]]:
    """File -> (its module, why the module does not import), for the files of the jobs whose
    agent needs them; {} when every one imports (or no agent needs them)."""
    modules: dict[str, str] = {}
    files: dict[str, str] = {}
    for agent, node in jobs:
        if agent.definition.requires.project_imports and node.file not in files:
            module, folder = module_of(node.file, lambda path: (root / path).exists())
            if module:
                modules[module] = str(root / folder)
                files[node.file] = module
    if not modules:
        return {}
    python = str(commands.python or sys.executable)
    argv = [python, "-c", CHECK, json.dumps(sorted(modules.items()))]
    with tempfile.TemporaryDirectory(prefix="remora-imports-") as scratch:
        env = {key: os.environ[key] for key in PASSED_ENV if key in os.environ} | FIXED_ENV
        if commands.isolation == "bwrap":
            argv = confinement(commands).wrap(
                argv, workspace=Path(scratch), readable=[root], env=env
            )
        try:
            done = subprocess.run(
                argv,
                cwd=scratch,
                env=env | {"HOME": scratch},
                capture_output=True,
                text=True,
                timeout=commands.timeout_s,
                check=False,
            )
            found: dict[str, str | None] = json.loads(done.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return {}  # the check itself failed: let the jobs run and say what they see
    return {file: (module, error) for file, module in files.items() if (error := found.get(module))}


def skipped(agent: Agent, node: Node, why: str) -> JobResult:
    return JobResult(
        node=node,
        agent=agent.name,
        status=JobStatus.SKIPPED,
        error=JobError(code=ErrorCode.PROJECT_NOT_IMPORTABLE, message=why),
    )


def import_check(
    jobs: Sequence[tuple[Agent, Node]],
    root: Path,
    commands: CommandSettings,
    warn: Callable[[str], None],
) -> dict[int, JobResult]:
    """The import check, a stage of its own: the jobs (by index) skipped because their agent
    imports the node's module and the module does not import in the project's Python (each
    module said once, with how to fix it)."""
    broken = unimportable(jobs, root, commands)
    skip = {
        index: skipped(agent, node, broken[node.file][1])
        for index, (agent, node) in enumerate(jobs)
        if agent.definition.requires.project_imports and node.file in broken
    }
    for module, error in sorted(set(broken.values())):
        count = sum(1 for result in skip.values() if broken[result.node.file][0] == module)
        warn(
            f"{module} does not import in the project's Python {commands.python}: {error}; "
            + (
                f"its {count} jobs that need it are skipped"
                if count != 1
                else "its one job that needs it is skipped"
            )
            + ". Install the project's dependencies in that environment, or set "
            "sandbox.commands.python"
        )
    return skip
