"""A cgroup per sandboxed command: how many processes it may have at once (a fork bomb's limit)
and how much memory all of them together may use.

Processes. RLIMIT_NPROC alone is not enough: the kernel does not enforce it for processes whose
real uid is 0 (it exempts INIT_USER), and bubblewrap's user namespace does not change the real
uid. Measured as root on this project's CI machine: under `prlimit --nproc=50`, inside bwrap
with every capability dropped, a fork bomb still made 2000 processes. CI and many containers
run as root. So the limit is the `pids.max` of the command's cgroup; a fork past it fails with
EAGAIN.

Memory. RLIMIT_AS bounds one process: with up to `max_processes` of them, a command could hold
that many times `memory_mb` (measured before this: three processes of 1 GiB each held at once
under a 2 GiB limit). So the command's cgroup has a memory limit of `memory_mb` (cgroup v1
`memory.limit_in_bytes`, v2 `memory.max`) for all its processes together, and no swap beyond
it (`memory.memsw.limit_in_bytes` equal to it, `memory.swap.max` 0, where swap is accounted);
past it the kernel's OOM killer ends a process of the command, never one outside it. The
pages of the command's tmpfs (its folder, /tmp, /dev/shm) are charged to it as well.
RLIMIT_AS per process stays, as a second bound.

Where. A cgroup is made where this process can: root on cgroup v1 (the `pids` and `memory`
hierarchies mounted read-write, one cgroup in each), or a cgroup v2 tree that is writable and
has the controller enabled for its children (a delegated systemd scope or a container's own
tree: one cgroup with both). The shell that starts bwrap creates them, named after its own
pid, and moves itself in before it `exec`s bwrap, so every process of the command is in them
from the start. Each controller is found on its own: a host may offer one and not the other.

Without a pids cgroup the limit is RLIMIT_NPROC, set inside the sandbox (see confinement.py):
enforced for every user but root, and counted per user namespace since Linux 5.14 (on older
kernels it also counts the user's processes outside the sandbox); as root there is then no
process limit. Without a memory cgroup there is no bound for the command as a whole, only
RLIMIT_AS per process. `Confinement.process_limit_enforced` and `memory_limit_enforced` say
which, and Remora warns once where a bound is missing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

log = logging.getLogger("remora.sandbox.confinement")  # where its warnings always came from
PREFIX = "remora-"
OWN = re.compile(rf"{PREFIX}(\d+)-[0-9a-f]+")
"""Cgroups this module creates: remora-<pid of the shell that made it>-<random token>."""
OWN_PROCESSES = 3
"""Sandbox processes besides the command's: the bwrap the shell became, the namespace's init,
and the shell that fills and copies back the command's folder (folder.py), whose tar runs
before the command starts and after it ended."""
CONTROLLERS = ("pids", "memory")


@dataclass(frozen=True)
class Hierarchy:
    """Where commands get a cgroup, and the limit files it has there."""

    parent: Path
    pids: bool
    """Whether `pids.max` limits the command's processes here."""
    memory: str | None
    """The file that bounds its memory here: memory.limit_in_bytes (v1), memory.max (v2)."""
    swap: str | None
    """The file that bounds its swap: memory.memsw.limit_in_bytes (v1, where the kernel
    accounts swap: swapaccount=1), memory.swap.max (v2)."""

    def limit_files(self, max_processes: int, memory_mb: int) -> list[tuple[str, int]]:
        """The files to write in a command's cgroup, in order: v1 refuses a memsw limit below
        the memory limit, so the memory limit goes first."""
        files: list[tuple[str, int]] = []
        if self.pids:
            files.append(("pids.max", max_processes + OWN_PROCESSES))
        if self.memory is not None:
            files.append((self.memory, memory_mb * 1024 * 1024))
        if self.swap == "memory.memsw.limit_in_bytes":
            files.append((self.swap, memory_mb * 1024 * 1024))  # memory and swap together
        elif self.swap is not None:
            files.append((self.swap, 0))  # swap alone
        return files


@cache
def hierarchies() -> tuple[Hierarchy, ...]:
    """Where each command gets its cgroups (one per hierarchy: v1 has one per controller),
    for the controllers this process can use; empty where there is none."""
    pids = next(filter(None, (_probe(path, "pids") for path in _candidates("pids"))), None)
    memory = next(filter(None, (_probe(path, "memory") for path in _candidates("memory"))), None)
    found: dict[Path, Hierarchy] = {}
    if pids is not None:
        found[pids[0]] = Hierarchy(pids[0], pids=True, memory=None, swap=None)
    if memory is not None:
        parent, files = memory
        limit = "memory.limit_in_bytes" if "memory.limit_in_bytes" in files else "memory.max"
        swaps = ("memory.memsw.limit_in_bytes", "memory.swap.max")
        swap = next((name for name in swaps if name in files), None)
        found[parent] = Hierarchy(parent, pids=parent in found, memory=limit, swap=swap)
    return tuple(found.values())


def join_script(
    chosen: tuple[Hierarchy, ...], max_processes: int, memory_mb: int
) -> tuple[str, list[str]]:
    """Shell lines (run with `set -e`) that create the command's cgroups and move the shell
    into them, and the arguments they read as $1 (a random token), $2, $3... (the parents);
    nothing where there is no cgroup to make."""
    if not chosen:
        return "", []
    script = ""
    for index, hierarchy in enumerate(chosen, start=2):
        script += f'cg="${{{index}}}/{PREFIX}$$-$1"\nmkdir "$cg"\n'
        for name, value in hierarchy.limit_files(max_processes, memory_mb):
            script += f'echo {value} > "$cg/{shlex.quote(name)}"\n'
        script += 'echo $$ > "$cg/cgroup.procs"\n'
    return script, [secrets.token_hex(4), *(str(hierarchy.parent) for hierarchy in chosen)]


def sweep(parent: Path) -> None:
    """Remove the cgroups of commands that have ended. One whose shell is still alive (its
    command runs), or that still holds a process, stays: rmdir refuses a busy cgroup."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            found = OWN.fullmatch(entry.name)
            if found and entry.is_dir(follow_symlinks=False) and not _alive(int(found[1])):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _candidates(controller: str) -> list[Path]:
    """This process's own cgroup in a v1 hierarchy of `controller`, then in cgroup v2."""
    try:
        memberships = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    own: dict[str, str] = {}  # controller ("" for v2) -> path inside its hierarchy
    for line in memberships:
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            own[name] = path
    found: list[tuple[int, Path]] = []
    for line in mounts:
        # mountinfo: id parent major:minor root mount-point options ... - fstype source super
        fields, _, tail = line.partition(" - ")
        parts, fstype = fields.split(), tail.split()[:1]
        if len(parts) < 5 or not fstype:
            continue
        root, mount_point, super_options = parts[3], parts[4], tail.split()[-1].split(",")
        if fstype == ["cgroup"] and controller in super_options and controller in own:
            path, version = own[controller], 1
        elif fstype == ["cgroup2"] and "" in own:
            path, version = own[""], 2
        else:
            continue
        relative = os.path.relpath(path, root) if path.startswith(root) else None
        if relative is not None and not relative.startswith(".."):
            found.append((version, Path(mount_point) / relative))
    return [path for _, path in sorted(found, key=lambda item: item[0])]


LIMIT_FILES = {
    "pids": (("pids.max", "16"),),
    "memory": (("memory.limit_in_bytes", "268435456"), ("memory.max", "268435456")),
}
"""What the probe writes in a trial cgroup: one file of each controller (v1 or v2 names)."""


def _probe(parent: Path, controller: str) -> tuple[Path, frozenset[str]] | None:
    """`parent` and the files of a child cgroup made there, when this process can make one
    and set its `controller` limit; None otherwise."""
    if not os.access(parent, os.W_OK):
        return None
    child = parent / f"{PREFIX}{os.getpid()}-probe"
    try:
        child.mkdir()
    except OSError:
        return None
    try:
        files = frozenset(os.listdir(child))
        for name, value in LIMIT_FILES[controller]:
            if name in files:
                (child / name).write_text(f"{value}\n")
                return parent, files
        return None
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            child.rmdir()


@cache
def warn_unenforced(*, processes: bool, memory: bool) -> None:
    """Say once what a command's limits cannot hold on this host."""
    if processes:
        log.warning(
            "running as root without a writable pids cgroup: the kernel does not apply "
            "RLIMIT_NPROC to root, so sandboxed commands have no process limit "
            "(sandbox.commands.max_processes)"
        )
    if memory:
        log.warning(
            "no writable memory cgroup: sandbox.commands.memory_mb bounds the address space of "
            "each process of a sandboxed command, not the command as a whole (cgroup v1 as "
            "root, or a delegated cgroup v2 tree with the memory controller, bounds the whole "
            "command)"
        )
