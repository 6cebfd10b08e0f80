"""The command's folder as the sandbox receives it: a tar in a sealed memfd of this process
(folder.py says how it travels and comes back).

The tar holds what is on disk (the job's copies, in real folders) and, for every entry of the
project that a real folder lacks, a link into the project, made only in the tar: a symlink on
an ext4 disk costs 0.3 ms, a folder of the project holds a hundred entries, and a lint command
spent a third of its time making and removing them.
"""

from __future__ import annotations

import fcntl
import os
import stat
import tarfile
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path
from typing import BinaryIO

MIB = 1024 * 1024


def empty_source() -> str:
    """The source of an empty folder, for a command that starts in one and whose leavings
    nobody reads (it answers on stdout): no CommandFolder to keep."""
    pid = os.getpid()
    return f"/proc/{pid}/fd/{_empty(pid)}"


@cache
def _empty(pid: int) -> int:
    """An archive without members (tar refuses an empty stream); `pid` keys the cache: a forked
    child makes its own."""
    return sealed(lambda file: tarfile.open(fileobj=file, mode="w").close())


def pack(directory: Path, project: Path | None) -> int:
    """The directory as a tar in a sealed memfd (symbolic links as links), with a link into
    `project` for each entry of its mirrored folder that a folder lacks."""

    def write(file: BinaryIO) -> None:
        mirror = str(project) if project is not None else None
        _add_tree(file, str(directory), ".", os.lstat(directory), mirror)
        file.write(bytes(2 * tarfile.BLOCKSIZE))  # the end of the archive

    return sealed(write)


def _add_tree(
    file: BinaryIO, path: str, name: str, info: os.stat_result, mirror: str | None
) -> None:
    """The folder `path` as `name`, and its folders, regular files and links below it; where
    `mirror` (the project's folder at the same place) is a folder, a link to each of its
    entries that `path` lacks. Headers written by hand (`TarInfo.tobuf`), not with
    `TarFile.add`, which looks up every entry's owner names (the sandbox has no /etc/passwd to
    map them, and `tar -o` ignores owners); a link's header is the same for every command
    (`_link_header`), and a lint command packs a hundred of them."""
    file.write(_header(name, tarfile.DIRTYPE, stat.S_IMODE(info.st_mode), int(info.st_mtime)))
    with os.scandir(path) as found:
        entries: dict[str, os.DirEntry[str] | str] = {entry.name: entry for entry in found}
    if mirror is not None and os.path.isdir(mirror) and not os.path.islink(mirror):
        with os.scandir(mirror) as linked:
            for project_entry in linked:
                entries.setdefault(project_entry.name, project_entry.path)
    for entry_name in sorted(entries):
        entry = entries[entry_name]
        member = f"{name}/{entry_name}"
        if isinstance(entry, str):  # the project's: a link to it, in the tar only
            file.write(_link_header(member, entry))
            continue
        entry_info = entry.stat(follow_symlinks=False)
        if entry.is_symlink():
            file.write(_link_header(member, os.readlink(entry.path)))
        elif entry.is_dir(follow_symlinks=False):
            inner = os.path.join(mirror, entry_name) if mirror is not None else None
            _add_tree(file, entry.path, member, entry_info, inner)
        elif entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as content:
                size = os.fstat(content.fileno()).st_size
                mode = stat.S_IMODE(entry_info.st_mode)
                file.write(_header(member, tarfile.REGTYPE, mode, int(entry_info.st_mtime), size))
                left = size  # no more than the header says, should it grow meanwhile
                while left and (chunk := content.read(min(MIB, left))):
                    file.write(chunk)
                    left -= len(chunk)
            if left:
                raise OSError(f"{entry.path} shrank while it was packed")
            file.write(bytes(-size % tarfile.BLOCKSIZE))


@lru_cache(maxsize=65536)
def _link_header(name: str, target: str) -> bytes:
    return _header(name, tarfile.SYMTYPE, 0o777, 0, linkname=target)


def _header(
    name: str, kind: bytes, mode: int, mtime: int, size: int = 0, *, linkname: str = ""
) -> bytes:
    member = tarfile.TarInfo(name)
    member.type, member.mode, member.mtime, member.size = kind, mode, mtime, size
    member.linkname = linkname
    return member.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")


def sealed(write: Callable[[BinaryIO], None]) -> int:
    """A memfd of this process that `write` filled, sealed: the launcher reads it through /proc
    and nothing can change it."""
    fd = os.memfd_create("remora-folder", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    with open(fd, "wb", closefd=False) as file:
        write(file)
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd
