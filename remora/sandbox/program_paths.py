"""What a command's program needs to see inside the sandbox, besides the system's folders:
its executable and, for a Python program (the interpreter itself, or a script such as `pytest`
whose `#!` line names one), that interpreter's whole installation and every folder it imports
from.

The folders come from the interpreter itself, run once per run on the host: `sys.prefix` and
`sys.exec_prefix` (its virtual environment), `sys.base_prefix` and `sys.base_exec_prefix` (the
installation the environment was made from, with the standard library: under
~/.pyenv/versions/... for a pyenv Python), and each entry of `sys.path` (site-packages, folders
that `.pth` files add, such as an editable install's source tree) plus the source folders of
setuptools' editable finders (`MAPPING` in `__editable___*_finder.py`), which are not in
`sys.path`. It runs with `-I`: no PYTHONPATH, no user site-packages, as inside the sandbox
(clean environment, a home on the sandbox's tmpfs).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
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


def program_paths(executable: str) -> list[Path]:
    """Paths (as given and resolved; some may not exist) the program needs to run."""
    path = Path(executable)
    found = [path, path.resolve()]
    interpreter = path if PYTHON_NAME.fullmatch(path.name) else _script_interpreter(path)
    if interpreter is not None:
        found += [interpreter, interpreter.resolve()]
        if PYTHON_NAME.fullmatch(interpreter.name):
            found += python_paths(str(interpreter))
    return found


@cache
def python_paths(interpreter: str) -> tuple[Path, ...]:
    """The installation and import folders of `interpreter`, asked once per run."""
    try:
        done = subprocess.run(
            [interpreter, "-I", "-c", QUERY],
            capture_output=True,
            text=True,
            timeout=QUERY_TIMEOUT_S,
            check=True,
            env={},
        )
        listed = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        listed = None
    if not isinstance(listed, list):
        # Not a Python that runs here (the command will say so): bind where a virtual
        # environment and the installation it links to would keep their files.
        executable = Path(interpreter)
        return (executable.parent.parent, executable.resolve().parent.parent)
    return tuple(Path(entry) for entry in listed if isinstance(entry, str) and entry)


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
