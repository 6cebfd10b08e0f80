"""What a command's program needs to see inside the sandbox, besides the system's folders:
its executable and, for a Python program (the interpreter itself, or a script such as `pytest`
whose `#!` line names one), that interpreter's whole installation and every folder it imports
from; and where `run_command` finds a program.

The folders come from the interpreter itself, asked once per run: `sys.prefix` and
`sys.exec_prefix` (its virtual environment), `sys.base_prefix` and `sys.base_exec_prefix` (the
installation the environment was made from, with the standard library: under
~/.pyenv/versions/... for a pyenv Python), and each entry of `sys.path` (site-packages, folders
that `.pth` files add, such as an editable install's source tree) plus the source folders of
setuptools' editable finders (`MAPPING` in `__editable___*_finder.py`), which are not in
`sys.path`. It runs with `-I`: no PYTHONPATH, no user site-packages, as inside the sandbox
(clean environment, a home on the sandbox's tmpfs).

Remora's own interpreter is asked on the host. Any other (the project's `.venv/bin/python`,
which a cloned repository may have committed as a script of its own) is asked only inside the
sandbox, with nothing of the host but its own installation (`python_installation`), and its
answers are believed only where they lie in that installation once links are resolved: a
hostile interpreter cannot make the sandbox show any other folder of the host (Remora's own
installation aside: an environment may import packages from it through a `.pth` file).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

QUERY_TIMEOUT_S = 30.0
PYTHON_NAME = re.compile(r"(python|pypy)[0-9.]*")
QUERY = """\
import json, sys
paths = [path for path in sys.path if path]
for finder in sys.meta_path:
    module = sys.modules.get(getattr(finder, "__module__", None) or "")
    mapping = getattr(module, "MAPPING", None)
    if isinstance(mapping, dict):
        paths += [str(path) for path in mapping.values()]
prefixes = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
print(json.dumps([sys.executable, *prefixes, *paths]))
"""

Ask = Callable[[str, tuple[Path, ...]], str | None]
"""Runs `[interpreter, "-I", "-c", QUERY]` in the sandbox with only the given folders of the
host visible (read-only); its stdout, or None when it did not answer."""


def find_program(name: str) -> str | None:
    """Where `run_command(name, ...)` finds `name`: next to Remora's Python, then in the
    absolute folders of PATH. A relative entry (`.`, an empty one: some CI images have them)
    would find a program the project ships in the working folder; a name with a folder part is
    never a program to look up."""
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        return None
    folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
    absolute = os.pathsep.join(folder for folder in folders if os.path.isabs(folder))
    return shutil.which(name, path=str(Path(sys.executable).parent)) or (
        shutil.which(name, path=absolute) if absolute else None
    )


def program_paths(executable: str, ask: Ask, trusted: str | None = None) -> list[Path]:
    """Paths (as given and resolved; some may not exist) the program needs to run. `trusted`:
    an interpreter besides Remora's own that is the user's (their environment, their setting,
    a trusted project's), asked on the host and believed like Remora's own."""
    path = Path(executable)
    interpreter = path if PYTHON_NAME.fullmatch(path.name) else _script_interpreter(path)
    python = interpreter is not None and PYTHON_NAME.fullmatch(interpreter.name) is not None
    mine = interpreter is not None and (is_own(interpreter) or str(interpreter) == trusted)
    if interpreter is not None and python and not mine:
        # Another Python: only its own installation, checked, and what it says inside that.
        own = python_installation(interpreter)
        asked = python_paths(str(interpreter), ask, on_host=False)
        return [*own, *_believed(asked, _visible(interpreter))]
    found = [path, path.resolve()]
    if interpreter is not None:
        found += [interpreter, interpreter.resolve()]
        if python:
            found += python_paths(str(interpreter), ask, on_host=True)
    return found


def python_installation(interpreter: Path) -> tuple[Path, ...]:
    """The folders that hold an interpreter's own files, each one checked to be what it
    claims, so that a link in a cloned repository cannot name any folder of the host: its
    virtual environment (the folder above `bin/`, holding `pyvenv.cfg`), and the installation
    its executable resolves to, or that `pyvenv.cfg` names as its home, when that folder holds
    a standard library (`lib/python3.*/os.py`)."""
    found: list[Path] = []
    environment = interpreter.parent.parent
    if (environment / "pyvenv.cfg").is_file():
        found.append(environment)
        home = _venv_home(environment / "pyvenv.cfg")
        if home is not None and _installation(home.parent):
            found.append(home.parent.resolve())
    executable = interpreter.resolve()
    if PYTHON_NAME.fullmatch(executable.name) and _installation(executable.parent.parent):
        found.append(executable.parent.parent)
    return tuple(dict.fromkeys(found))


@cache
def python_paths(interpreter: str, ask: Ask, *, on_host: bool) -> tuple[Path, ...]:
    """The installation and import folders of `interpreter`, asked once per run: on the host
    for an interpreter that is the user's, in the sandbox (`ask`) for any other."""
    if on_host:
        try:
            done = subprocess.run(
                [interpreter, "-I", "-c", QUERY],
                capture_output=True,
                text=True,
                timeout=QUERY_TIMEOUT_S,
                check=True,
                env={},
            )
            answer: str | None = done.stdout
        except (OSError, subprocess.SubprocessError):
            answer = None
    else:
        answer = ask(interpreter, _visible(Path(interpreter)))
    try:
        listed = json.loads(answer) if answer else None
    except ValueError:
        listed = None
    if not isinstance(listed, list):
        # Not a Python that runs here (the command will say so): bind where a virtual
        # environment and the installation it links to would keep their files.
        executable = Path(interpreter)
        return (executable.parent.parent, executable.resolve().parent.parent)
    return tuple(Path(entry) for entry in listed if isinstance(entry, str) and entry)


def is_own(interpreter: Path) -> bool:
    """Remora's own interpreter: one beside the executable this process runs on (`python`,
    `python3`, `python3.11` of the same folder)."""
    return os.path.abspath(interpreter.parent) == os.path.abspath(Path(sys.executable).parent)


def _visible(interpreter: Path) -> tuple[Path, ...]:
    """What another interpreter may see of the host, and be believed about: its own
    installation, and Remora's (an environment may import from it through a `.pth` file)."""
    return (*python_installation(interpreter), Path(sys.prefix), Path(sys.base_prefix))


def _believed(paths: tuple[Path, ...], own: tuple[Path, ...]) -> list[Path]:
    """The paths that lie, links resolved, in one of the interpreter's own folders."""
    folders = [Path(os.path.realpath(folder)) for folder in own]
    return [
        path
        for path in paths
        if any(Path(os.path.realpath(path)).is_relative_to(folder) for folder in folders)
    ]


def _installation(prefix: Path) -> bool:
    return any(prefix.glob("lib/python3*/os.py")) or any(prefix.glob("lib/pypy3*/os.py"))


def _venv_home(config: Path) -> Path | None:
    try:
        lines = config.read_text(encoding="utf-8", errors="replace").splitlines()[:50]
    except OSError:
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and os.path.isabs(value.strip()):
            return Path(value.strip())
    return None


def _script_interpreter(path: Path) -> Path | None:
    """The program a `#!` script runs with: `#!/path/python`, `#!/usr/bin/env python3`, or the
    `#!/bin/sh` + `'''exec' /path/python` form pip writes when the path is too long."""
    try:
        with path.open("rb") as file:
            head = file.read(1024).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = head[0][2:].split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        named = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
        found = shutil.which(named[0]) if named else None
        return Path(found) if found else None
    if Path(words[0]).name == "sh":
        for line in head[1:3]:
            if line.startswith("'''exec' "):
                return Path(line.split()[1])
    return Path(words[0])
