"""How many processes a sandboxed command may have at once (a fork bomb's limit).

RLIMIT_NPROC alone is not enough: the kernel does not enforce it for processes whose real uid
is 0 (it exempts INIT_USER), and bubblewrap's user namespace does not change the real uid.
Measured as root on this project's CI machine: under `prlimit --nproc=50`, inside bwrap with
every capability dropped, a fork bomb still made 2000 processes. CI and many containers run
as root.

So each command runs in a pids cgroup of its own whose `pids.max` is the limit, where this
process can create one: root on cgroup v1 (`/sys/fs/cgroup/pids` mounted read-write), or a
cgroup v2 tree that is writable and has the pids controller enabled for its children (a
delegated systemd scope or a container's own tree). The shell that starts bwrap creates the
cgroup, named after its own pid, and moves itself into it before it `exec`s bwrap, so every
process of the command is in it from the start. A fork past the limit fails with EAGAIN.

Where no such cgroup exists the limit is RLIMIT_NPROC, set inside the sandbox (see
confinement.py): enforced for every user but root, and counted per user namespace since
Linux 5.14 (on older kernels it also counts the user's processes outside the sandbox). As root
without a writable pids cgroup there is no process limit
(`Confinement.process_limit_enforced` says so).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from functools import cache
from pathlib import Path

PREFIX = "remora-"
OWN = re.compile(rf"{PREFIX}(\d+)-[0-9a-f]+")
"""Cgroups this module creates: remora-<pid of the shell that made it>-<random token>."""
BWRAP_PROCESSES = 2
"""bwrap's own processes in the cgroup: the one the shell became, and the namespace's init."""

JOIN = """\
cg="$1/{prefix}$$-$2"
mkdir "$cg"
echo "$3" > "$cg/pids.max"
echo $$ > "$cg/cgroup.procs"
"""
"""Shell lines (with `set -e`) that create the command's cgroup and move the shell into it."""


@cache
def pids_parent() -> Path | None:
    """The cgroup under which each command gets its own, or None where there is none to use."""
    for parent in _candidates():
        if _usable(parent):
            return parent
    return None


def join_arguments(parent: Path, limit: int) -> list[str]:
    """The arguments JOIN reads as $1 $2 $3, for a command of at most `limit` processes."""
    return [str(parent), secrets.token_hex(4), str(limit + BWRAP_PROCESSES)]


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


def _candidates() -> list[Path]:
    """This process's own pids cgroup: a v1 hierarchy with the pids controller, then v2."""
    try:
        memberships = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    own: dict[str, str] = {}  # controller ("" for v2) -> path inside its hierarchy
    for line in memberships:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    found: list[Path] = []
    for line in mounts:
        # mountinfo: id parent major:minor root mount-point options ... - fstype source super
        fields, _, tail = line.partition(" - ")
        parts, fstype = fields.split(), tail.split()[:1]
        if len(parts) < 5 or not fstype:
            continue
        root, mount_point, super_options = parts[3], parts[4], tail.split()[-1].split(",")
        if fstype == ["cgroup"] and "pids" in super_options and "pids" in own:
            path = own["pids"]
        elif fstype == ["cgroup2"] and "" in own:
            path = own[""]
        else:
            continue
        relative = os.path.relpath(path, root) if path.startswith(root) else None
        if relative is not None and not relative.startswith(".."):
            found.append(Path(mount_point) / relative)
    return found


def _usable(parent: Path) -> bool:
    """Whether a child cgroup made here gets a pids.max this process can set."""
    if not os.access(parent, os.W_OK):
        return False
    child = parent / f"{PREFIX}{os.getpid()}-probe"
    try:
        child.mkdir()
    except OSError:
        return False
    try:
        (child / "pids.max").write_text("16\n")
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            child.rmdir()
