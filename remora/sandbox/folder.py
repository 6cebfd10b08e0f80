"""The command's folder, bounded in total: a tmpfs of `sandbox.commands.folder_mb` MiB inside the
sandbox, filled from the host directory before the command runs and copied back after it.

Why: the folder is the one place a command may write, and a host folder has no total size
(RLIMIT_FSIZE bounds one file: 1,000 MiB in five files of 200 MiB reached the host's disk, at
some 3.5 GiB/s). A size watcher that kills the command is racy at that pace, bubblewrap's
overlays write to the host or to a tmpfs without a size, and quotas or loop mounts need root.
A tmpfs with `--size` is a hard bound (ENOSPC), in memory the command's memory cgroup is
charged for (cgroups.py).

How, for each command:
- the host packs the directory as a tar in a sealed memfd, which the launcher opens for bwrap
  (confinement.LAUNCHER_FDS): the job's copies, and links into the project made only in the
  tar (packing.py);
- bwrap mounts the tmpfs at the directory's own path; SHELL, the sandbox's first program,
  unpacks the tar there, writes STARTED on the copy-back channel (a pipe: the launcher's stdin,
  moved to another descriptor) and runs the command (its limits set by prlimit) without
  either descriptor;
- after the command, SHELL writes a tar of the folder to the channel; the host reads it as the
  command runs and ends, at most `folder_mb` plus HEADER_ROOM, and mirrors it into the host
  directory (CommandFolder.collect), but for the links into the project the tar added, which
  stay out of it.
So what a command leaves (pytest's reports, the call probe's result, coverage files) is there
afterwards, as before, and the directory is never mounted in the sandbox.

The copy-back is untrusted: a process of the command can open the channel through
/proc/<shell>/fd and write anything there. The host reads it as a tar with a size cap, refuses
oversized headers, and writes only below the directory, never through a link: each path is
walked one folder at a time with O_NOFOLLOW, and only folders, regular files, symbolic links
and hard links within the folder are made (no devices, no FIFOs).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import stat
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from remora.sandbox.packing import MIB, pack

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

HEADER_ROOM = 64 * MIB
"""What the copy-back may hold beyond `folder_mb`: tar spends 512 bytes of header on each entry
and pads each file to 512 bytes (some 130,000 files' worth)."""
MAX_EXTENSION = MIB
"""The largest long-name or pax header read (tarfile keeps them in memory)."""
STARTED = b"R"
"""The channel's first byte: the folder was filled and the command started. Written before the
command runs, so the command cannot forge it: no byte, no command."""
EXTENSIONS = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)
SHELL = """\
tar="$1"
shift
if ! error=$("$tar" -xof - <&{source} 2>&1); then
    echo "remora-sandbox: cannot fill the command's folder: $error" >&2
    exit 125
fi
exec {source}<&-
printf {started} >&{channel}
"$@" {channel}>&-
status=$?
{copy_back}exit $status
"""
"""The sandbox's first program, in the folder: fill it, run the command, copy it back (unless
nobody reads what it left). `tar -o` (GNU and busybox): files owned by whoever unpacks them.
The exit status is the command's (128 + the signal that ended it, as bwrap reports it)."""
COPY_BACK = '"$tar" -cf - . >&{channel} 2>/dev/null\n'


def shell(source_fd: int, channel_fd: int, copy_back: bool) -> str:
    """SHELL for these descriptors (single digits: /bin/sh may be dash)."""
    back = COPY_BACK.format(channel=channel_fd) if copy_back else ""
    return SHELL.format(
        source=source_fd, channel=channel_fd, started=STARTED.decode(), copy_back=back
    )


class CommandFolder:
    """One command's transfer: `source` for the launcher to open (a sealed memfd of this
    process, the directory as a tar, with links into `project` for what its folders lack),
    `writer` for the launcher's stdin (the copy-back channel), and `collect()`, which mirrors
    what comes back into `directory`. Without `copy_back` nothing comes back: the channel says
    only that the command started (for a command whose output is all its caller reads: ruff's
    findings, pytest's report; parsing a folder of links came back cost a lint command 3 ms of
    the event loop's thread)."""

    def __init__(
        self,
        directory: Path,
        folder_mb: int,
        project: Path | None = None,
        *,
        copy_back: bool = True,
    ) -> None:
        self.directory = directory
        self.folder_mb = folder_mb
        self.project = project
        self.copy_back = copy_back
        self.started = False
        """Whether the sandbox filled the folder and started the command."""
        self.note: str | None = None
        """Why what came back is incomplete, for the command's stderr."""
        self._source = pack(directory, project)
        self.reader, self.writer = os.pipe()

    @property
    def source(self) -> str:
        return f"/proc/{os.getpid()}/fd/{self._source}"

    def close_writer(self) -> None:
        """After the launcher started (it has its own copy): then the channel ends with the
        sandbox."""
        if self.writer >= 0:
            os.close(self.writer)
            self.writer = -1

    def close(self) -> None:
        """After `collect` ended (it closes the reader itself)."""
        self.close_writer()
        for fd in (self._source, self.reader):
            if fd >= 0:
                os.close(fd)
        self._source = self.reader = -1

    def collect(self) -> None:
        """Read the channel to its end (blocking: run it in a thread while the command runs)
        and mirror the tar into the directory; the directory stays as it was when nothing
        readable comes back. Closes the reader when done: a writer still at it (past the cap,
        or past the tar's end) then fails with EPIPE instead of waiting for ever."""
        try:
            self._collect(_Capped(self.reader, self.folder_mb * MIB + HEADER_ROOM))
        finally:
            os.close(self.reader)
            self.reader = -1

    def _collect(self, stream: _Capped) -> None:
        if stream.read(1) != STARTED:
            return
        self.started = True
        if not self.copy_back:
            return  # what a process of the command writes to the channel meets a closed pipe
        seen: set[tuple[str, ...]] = set()
        root = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with tarfile.open(fileobj=stream, mode="r|", tarinfo=_Bounded) as archive:
                while (member := archive.next()) is not None:
                    # tarfile keeps every member it read: a stream has no use for them
                    archive.members.clear()  # type: ignore[attr-defined]  # not in typeshed
                    parts = _parts(member.name)
                    if parts:
                        seen.update(tuple(parts[:end]) for end in range(1, len(parts) + 1))
                        if not self._linked(member, parts):
                            _extract(archive, member, parts, root)
            _remove_unseen(self.directory, seen)
        except (tarfile.TarError, OSError, EOFError) as exc:
            self.note = (
                f"remora: the command left more in its folder than "
                f"sandbox.commands.folder_mb ({self.folder_mb} MiB) holds; part of it was "
                "not copied back"
                if stream.exceeded
                else f"remora: what the command left in its folder was not all copied back: {exc}"
            )
        finally:
            os.close(root)

    def _linked(self, member: tarfile.TarInfo, parts: list[str]) -> bool:
        """Whether `member` is one of the links into the project the tar brought (or one just
        like it) where the directory has nothing: left out, as it was."""
        if self.project is None or not member.issym():
            return False
        if member.linkname != os.path.join(self.project, *parts):
            return False
        return not os.path.lexists(os.path.join(self.directory, *parts))


class _Bounded(tarfile.TarInfo):
    """Refuses long-name and pax headers larger than MAX_EXTENSION before tarfile reads them
    into memory."""

    @classmethod
    def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> _Bounded:
        info = super().frombuf(buf, encoding, errors)
        if info.type in EXTENSIONS and info.size > MAX_EXTENSION:
            raise tarfile.ReadError(f"a {info.size}-byte header")
        return info


class _Capped(io.RawIOBase):
    """The channel's first `limit` bytes; `exceeded` once more was there."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd, self.room, self.exceeded = fd, limit, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        if self.room <= 0:
            self.exceeded = self.exceeded or bool(os.read(self.fd, 1))
            return 0
        view = memoryview(buffer).cast("B")[: self.room]
        count = os.readv(self.fd, [view])
        self.room -= count
        return count


def left_file(directory: Path, key: str, limit: int) -> str | None:
    """The text of the regular file `key` (relative, POSIX) that a command left in its folder,
    read as untrusted: through no link, at most `limit` bytes, UTF-8. None where there is no
    such file or it is larger."""
    parts = _parts(key)
    if not parts:
        return None
    root = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        parent = _walk(root, parts[:-1], create=False)
    finally:
        os.close(root)
    if parent is None:
        return None
    try:
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
    except OSError:
        return None
    finally:
        os.close(parent)
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = file.read(limit + 1)
    try:
        return data.decode("utf-8") if len(data) <= limit else None
    except UnicodeDecodeError:
        return None


def _extract(
    archive: tarfile.TarFile, member: tarfile.TarInfo, parts: list[str], root: int
) -> None:
    """Make what `member` says at `parts` below `root`, replacing what was there; an entry that
    already is what it says (the links into the project, mostly) is left alone."""
    parent = _walk(root, parts[:-1], create=True)
    if parent is None:
        return  # through a link or a file: refused
    name = parts[-1]
    try:
        found = _lstat(name, parent)
        if member.isdir():
            if found is None or not stat.S_ISDIR(found.st_mode):
                _vacate(name, parent, found)
                os.mkdir(name, member.mode & 0o777 | 0o700, dir_fd=parent)
        elif member.isreg():
            _vacate(name, parent, found)
            source = archive.extractfile(member)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, member.mode & 0o777 | 0o600, dir_fd=parent)
            with open(fd, "wb") as file:
                if source is not None:
                    shutil.copyfileobj(source, file, MIB)
                file.flush()
                os.utime(fd, (member.mtime, member.mtime))
        elif member.issym():
            same = found is not None and stat.S_ISLNK(found.st_mode)
            if not same or os.readlink(name, dir_fd=parent) != member.linkname:
                _vacate(name, parent, found)
                os.symlink(member.linkname, name, dir_fd=parent)
        elif member.islnk():
            _vacate(name, parent, found)
            _hard_link(member.linkname, root, name, parent)
    except OSError:
        pass  # this entry only: the rest still comes back
    finally:
        os.close(parent)


def _parts(name: str) -> list[str] | None:
    """The path's parts below the folder, or None: `..` anywhere, or the folder itself."""
    parts = [part for part in name.split("/") if part not in ("", ".")]
    return None if not parts or ".." in parts else parts


def _walk(root: int, parts: list[str], *, create: bool) -> int | None:
    """A new descriptor of the folder `parts` below `root`, made where missing when `create`;
    None where a part is a link or not a folder."""
    fd = os.dup(root)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            inner = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = inner
    except OSError:
        os.close(fd)
        return None
    return fd


def _lstat(name: str, parent: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _vacate(name: str, parent: int, found: os.stat_result | None) -> None:
    """Remove what is at `name` (a folder with its contents; a link itself, never its
    target)."""
    if found is None:
        return
    if stat.S_ISDIR(found.st_mode):
        shutil.rmtree(name, dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)


def _remove_unseen(directory: Path, seen: set[tuple[str, ...]]) -> None:
    """Remove what the command removed: every entry the copy-back did not name. Nothing else
    writes the directory (the sandbox does not see it), and nothing here follows a link."""
    for folder, folders, files in os.walk(directory):
        here = Path(folder).relative_to(directory).parts
        for name in [*folders, *files]:
            if (*here, name) in seen:
                continue
            path = os.path.join(folder, name)
            if name in folders and not os.path.islink(path):
                folders.remove(name)
                shutil.rmtree(path)
            else:
                os.unlink(path)


def _hard_link(target: str, root: int, name: str, parent: int) -> None:
    """A hard link to an entry already copied back (the link itself, were it a symlink)."""
    parts = _parts(target)
    source = _walk(root, parts[:-1], create=False) if parts else None
    if parts is None or source is None:
        return
    try:
        os.link(parts[-1], name, src_dir_fd=source, dst_dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(source)
