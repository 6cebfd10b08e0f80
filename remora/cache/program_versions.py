"""What identifies the programs tools run, for the result cache's key: a cached result is
reused only while ruff, pytest and friends are the versions that produced it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

from remora.config.settings import CommandSettings
from remora.sandbox.commands import FIXED_ENV, PASSED_ENV
from remora.sandbox.interpreter import ask_python
from remora.sandbox.program_paths import find_program

VERSION_TIMEOUT_S = 10.0


def program_versions(commands: CommandSettings) -> dict[str, str]:
    """What identifies each program tools may run: `PROGRAM --version` for executables
    (looked up as `run_command` does), the installed distribution's version for `python -m`
    modules. Nothing machine-specific (no paths), so a cache restored in CI still answers."""
    versions = {"python": platform.python_version()}
    for name in commands.allowed:
        if name != "python":  # run_command("python", ...) runs only the modules below
            versions[name] = executable_version(find_program(name))
    if commands.python is not None and Path(commands.python) != Path(sys.executable):
        # The project's own interpreter: its Python and its modules, asked once.
        asked = _versions_in(Path(commands.python), commands.python_modules, commands)
        versions["python"] = asked.get("python", "not runnable")
        for module in commands.python_modules:
            versions[f"python -m {module}"] = asked.get(module, "not installed")
        return versions
    for module in commands.python_modules:
        versions[f"python -m {module}"] = module_version(module)
    return versions


def _versions_in(python: Path, modules: list[str], commands: CommandSettings) -> dict[str, str]:
    """The project's interpreter's version and its modules' (asked in the OS sandbox: it may
    be any program a cloned repository committed)."""
    code = (
        "import importlib.metadata as m, json, platform, sys\n"
        "found = {'python': platform.python_version()}\n"
        "for name in sys.argv[1:]:\n"
        "    top = name.partition('.')[0]\n"
        "    try:\n"
        "        found[name] = name + ' ' + m.version(top)\n"
        "    except Exception:\n"
        "        pass\n"
        "print(json.dumps(found))"
    )
    answer = ask_python(python, code, modules, commands)
    try:
        found = json.loads(answer) if answer is not None else None
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(key): str(value) for key, value in found.items()}


def executable_version(path: str | None) -> str:
    """`PROGRAM --version`, else (no answer) a hash of the program's bytes."""
    if path is None:
        return "not installed"
    return _ask_version(path) or _content_hash(path)


def _ask_version(path: str) -> str | None:
    env = {key: os.environ[key] for key in PASSED_ENV if key in os.environ}
    with tempfile.TemporaryDirectory(prefix="remora-version-") as scratch:
        env.update(FIXED_ENV, HOME=scratch)
        try:
            done = subprocess.run(
                [path, "--version"],
                cwd=scratch,  # not the project: its configuration is keyed separately
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=VERSION_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
    output = (done.stdout.strip() or done.stderr.strip()).decode("utf-8", "replace")
    return output[:500] if done.returncode == 0 and output else None


def _content_hash(path: str) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        return f"not readable: {exc.strerror}"
    return f"sha256:{digest.hexdigest()}"


def module_version(module: str) -> str:
    top = module.partition(".")[0]
    try:
        return f"{module} {metadata.version(top)}"
    except (metadata.PackageNotFoundError, ValueError):
        pass
    names = sorted(set(metadata.packages_distributions().get(top, [])))
    if names:
        versions = []
        for name in names:
            with contextlib.suppress(metadata.PackageNotFoundError):
                versions.append(f"{name} {metadata.version(name)}")
        return ", ".join(versions)
    try:
        return "not installed" if find_spec(top) is None else "no version"
    except (ImportError, ValueError):
        return "not installed"
