"""The project's Python: where `run_command("python", ["-m", MODULE, ...])` runs, so that tests
import the project's own dependencies, not Remora's (Remora may be installed with pipx or
`uv tool`, or in another environment).

Chosen once per run, in this order: `sandbox.commands.python`; the active virtual environment
(`$VIRTUAL_ENV`); `.venv/` or `venv/` at the project root; else Remora's own interpreter.
Choosing one runs nothing. Every question Remora asks an interpreter other than its own (which
modules it has, their versions, where it imports from) runs inside the OS sandbox, like the
tests: a cloned repository's `.venv/bin/python` may be any program (git keeps the executable
bit), and it must not run on the host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from remora.config.settings import CommandSettings
from remora.errors import UserInputError
from remora.sandbox.confinement import confinement
from remora.sandbox.program_paths import is_own

VENV_FOLDERS = (".venv", "venv")
CHECK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ProjectPython:
    path: Path
    why: str
    """How it was chosen, said to the user once per run."""
    trusted: bool
    """The user's: their setting, their active environment, Remora's own, or the environment
    of a project they trust. Else (a `.venv/` the project may have shipped) it is asked
    questions only in the OS sandbox."""


def project_python(
    setting: Path | None,
    root: Path,
    environ: Mapping[str, str] = os.environ,
    *,
    trusted_project: bool = False,
) -> ProjectPython:
    """`setting` has passed the configuration's trust rules: only the user (or a trusted
    project) sets it."""
    if setting is not None:
        path = setting if setting.is_absolute() else root / setting
        if not _runs(path):
            raise UserInputError(
                f"sandbox.commands.python: {path} is not a Python interpreter that can run here"
            )
        return ProjectPython(path, "sandbox.commands.python", trusted=True)
    active = environ.get("VIRTUAL_ENV")
    if active and _runs(found := _in_venv(Path(active))):
        return ProjectPython(found, "the active virtual environment ($VIRTUAL_ENV)", trusted=True)
    for folder in VENV_FOLDERS:
        if _runs(found := _in_venv(root / folder)):
            why = f"{folder}/ at the project root"
            why += "" if trusted_project else ", asked only in the sandbox"
            return ProjectPython(found, why, trusted=trusted_project)
    own = "Remora's own Python (no project environment)"
    return ProjectPython(Path(sys.executable), own, trusted=True)


def project_commands(
    commands: CommandSettings, root: Path, *, trusted_project: bool
) -> tuple[ProjectPython, CommandSettings]:
    """The project's Python, and the command settings that run it."""
    python = project_python(commands.python, root, trusted_project=trusted_project)
    update = {"python": python.path, "python_trusted": python.trusted or commands.python_trusted}
    return python, commands.model_copy(update=update)


def missing_modules(python: Path, modules: Sequence[str], commands: CommandSettings) -> list[str]:
    """The modules `python` cannot find (one process for all of them), asked inside the OS
    sandbox unless it is Remora's own interpreter or `commands.isolation` is none."""
    if not modules:
        return []
    code = (
        "import importlib.util, json, sys\n"
        "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]))"
    )
    answer = ask_python(python, code, list(modules), commands)
    try:
        missing = json.loads(answer) if answer is not None else None
    except ValueError:
        missing = None
    if not isinstance(missing, list):
        return list(modules)
    return [module for module in modules if module in missing]


def ask_python(python: Path, code: str, args: list[str], commands: CommandSettings) -> str | None:
    """What `python -c CODE ARGS...` prints, or None when it fails. Remora's own interpreter
    runs on the host; any other (the project's, which a cloned repository may have committed)
    only inside the OS sandbox, where it sees its own installation and nothing else of the
    host. With `isolation: none` (a setting only the user may make) it runs on the host."""
    argv = [str(python), "-c", code, *args]
    mine = is_own(python) or (commands.python_trusted and python == commands.python)
    if commands.isolation == "bwrap" and not mine:
        return confinement(commands).answer(argv)
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def _in_venv(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _runs(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
