"""Atomic file writes: readers see the old file or the new one, never half of either.

The new content goes to a temporary file next to the target, named `.NAME.remora-PID-XXXXXXXX.tmp`
so that it is recognisably Remora's, then is renamed over the target. An interrupted write
removes its temporary file; one that could not (the process was killed with SIGKILL, or the
machine lost power) is removed by a later write into the same folder, once the process whose id
the name carries is gone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import time
from pathlib import Path

TEMPORARY = re.compile(r"\..*\.remora-(?P<pid>[0-9]+)-[0-9a-f]{8}\.tmp", re.DOTALL)
"""The name of a temporary file written by `write_bytes_at`."""
STALE_AFTER_S = 3600.0
"""A temporary file this old is stale even if its process id is in use (the id was reused)."""
_SWEEP_EVERY_S = 60.0
_swept: dict[tuple[int, int], float] = {}
"""Folders (device, inode) swept for stale temporary files by non-durable writes, and when."""


def write_text_atomic(path: Path, text: str, *, durable: bool = True) -> None:
    """Replace `path` (after following symlinks) by a file holding `text`, UTF-8 encoded.

    A replaced file keeps its permission bits (and, where allowed, its owner and group); a new
    file gets 0o666 less the umask, as `open()` gives. `durable=True` fsyncs the file and its
    folder before returning. `durable=False` skips fsync: for caches, where a lost entry after a
    power cut is only a miss (a damaged entry is ignored), and fsync would stall the event loop
    on every write."""
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        write_bytes_at(folder, path.name, text.encode("utf-8"), durable=durable)
    finally:
        os.close(folder)


def write_bytes_at(folder: int, name: str, data: bytes, *, durable: bool = True) -> None:
    """Replace the entry `name` of the open folder `folder` by a file holding `data`.

    The entry is replaced, never followed: a symlink named `name` is replaced by the file, the
    file it led to is untouched. Attributes are kept as `write_text_atomic` describes."""
    if durable or _due_for_sweep(folder):
        with contextlib.suppress(OSError):  # a folder that cannot be listed is still written
            remove_stale_temporaries(folder)
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    tmp, fd = _create_temporary(folder, name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if old is not None and stat.S_ISREG(old.st_mode):
                _keep_attributes(handle.fileno(), old)
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise
    if durable:
        try:
            os.fsync(folder)  # the rename itself survives a power cut only once the folder is
        except OSError as exc:  # synced; some file systems cannot sync a folder, and say so
            if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
                raise


def temporary_name(name: str) -> str:
    """`.NAME.remora-PID-XXXXXXXX.tmp`, NAME cut so the whole stays within 255 bytes."""
    short = os.fsdecode(os.fsencode(name)[:200])
    return f".{short}.remora-{os.getpid()}-{secrets.token_hex(4)}.tmp"


def _create_temporary(folder: int, name: str) -> tuple[str, int]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = temporary_name(name)
        try:
            # 0o666: the umask applies, as for any new file (mkstemp would give 0o600).
            return tmp, os.open(tmp, flags, 0o666, dir_fd=folder)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", name)


def _keep_attributes(fd: int, old: os.stat_result) -> None:
    """Owner and group first (a change of owner clears set-id bits), then the mode."""
    new = os.fstat(fd)
    if (new.st_uid, new.st_gid) != (old.st_uid, old.st_gid):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except OSError:
            with contextlib.suppress(OSError):
                os.fchown(fd, -1, old.st_gid)
    os.fchmod(fd, stat.S_IMODE(old.st_mode))


def _due_for_sweep(folder: int) -> bool:
    """Non-durable writes (cache entries, thousands a run) sweep a folder once a minute."""
    info = os.fstat(folder)
    key, now = (info.st_dev, info.st_ino), time.monotonic()
    if now - _swept.get(key, -_SWEEP_EVERY_S) < _SWEEP_EVERY_S:
        return False
    _swept[key] = now
    return True


def remove_stale_temporaries(folder: int) -> list[str]:
    """Remove the temporary files in `folder` left by Remora processes that are gone (killed
    with SIGKILL mid-write) or that are older than `STALE_AFTER_S`; return their names."""
    removed = []
    now = time.time()
    with os.scandir(folder) as entries:
        names = [entry.name for entry in entries if TEMPORARY.fullmatch(entry.name)]
    for name in names:
        match = TEMPORARY.fullmatch(name)
        assert match is not None
        pid = int(match["pid"])
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            continue
        if pid == os.getpid() and now - info.st_mtime < STALE_AFTER_S:
            continue  # this process is writing it (another thread)
        if _alive(pid) and now - info.st_mtime < STALE_AFTER_S:
            continue
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder)
            removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")  # killed, not yet reaped by its parent


def output_problem(path: Path) -> str | None:
    """Why a report could not be written to `path` (checked before a long run), or None."""
    target = path.resolve()
    if target.is_dir():
        return f"{path}: is a directory"
    if target.exists():
        if not target.is_file():
            return f"{path}: not a regular file"
        if not writable(target.stat(), target):
            return f"{path}: the file is read-only"
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{path}: {folder} is not a folder"
    if not writable(folder.stat(), folder):
        return f"{path}: folder {folder} is not writable"
    return None


def writable(info: os.stat_result, path: Path | str, *, dir_fd: int | None = None) -> bool:
    """Writable by this process, and not marked read-only: a file or folder without any write
    permission bit is refused even where the process could write it anyway (as root)."""
    if not info.st_mode & 0o222:
        return False
    mode = os.W_OK | (os.X_OK if stat.S_ISDIR(info.st_mode) else 0)
    return os.access(path, mode, dir_fd=dir_fd, follow_symlinks=False)
