"""The project's Python: where `run_command("python", ["-m", MODULE, ...])` runs, so that tests
import the project's own dependencies, not Remora's (Remora may be installed with pipx or
`uv tool`, or in another environment).

Chosen once per run, in this order: `sandbox.commands.python`; the active virtual environment
(`$VIRTUAL_ENV`); `.venv/` or `venv/` at the project root; else Remora's own interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from remora.errors import UserInputError

VENV_FOLDERS = (".venv", "venv")
CHECK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ProjectPython:
    path: Path
    why: str
    """How it was chosen, said to the user once per run."""


def project_python(
    setting: Path | None, root: Path, environ: Mapping[str, str] = os.environ
) -> ProjectPython:
    if setting is not None:
        path = setting if setting.is_absolute() else root / setting
        if not _runs(path):
            raise UserInputError(
                f"sandbox.commands.python: {path} is not a Python interpreter that can run here"
            )
        return ProjectPython(path, "sandbox.commands.python")
    active = environ.get("VIRTUAL_ENV")
    if active and _runs(found := _in_venv(Path(active))):
        return ProjectPython(found, "the active virtual environment ($VIRTUAL_ENV)")
    for folder in VENV_FOLDERS:
        if _runs(found := _in_venv(root / folder)):
            return ProjectPython(found, f"{folder}/ at the project root")
    return ProjectPython(Path(sys.executable), "Remora's own Python (no project environment)")


def missing_modules(python: Path, modules: Sequence[str]) -> list[str]:
    """The modules `python` cannot find (one process for all of them)."""
    if not modules:
        return []
    code = (
        "import importlib.util, json, sys\n"
        "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]))"
    )
    try:
        done = subprocess.run(
            [str(python), "-c", code, *modules],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            check=True,
        )
        missing: list[str] = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return list(modules)
    return missing


def _in_venv(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _runs(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
