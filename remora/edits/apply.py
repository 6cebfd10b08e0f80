"""Applying agents' changes to the user's files: atomically, and never over a newer version.

Jobs on different nodes of one file each return the whole file as they left it. Their edits
are merged line by line when they do not touch: lint fixing one function and the docstring agent
documenting another both land in one write. Edits that overlap (or touch) are refused as
conflicts rather than merged blindly.

A `Change` is untrusted data (it may come from a result-cache entry read back from disk), so
its `file` must be a plain relative path inside the project, and every folder on the way and the
file itself must be real (no symlinks) when it is checked and again when it is written: Remora
never writes outside the project root. Every file is checked before any is written (the file is
a regular file, or absent for a new one; unchanged since the agent read it; UTF-8; not
read-only; its folder writable): a refusal is reported as a conflict and the other files are
still written. Lines the agents did not touch are kept byte for byte, line endings included.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import hashlib
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from remora.discovery.walk import DEFAULT_EXCLUDES
from remora.edits.atomic import writable, write_bytes_at
from remora.findings.results import Change

_NO_FOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class ApplyReport:
    applied: list[str] = field(default_factory=list)
    """Files written (each once)."""
    conflicts: list[str] = field(default_factory=list)
    """Messages for changes refused, not written: the user's file was left as it was."""
    failed: list[str] = field(default_factory=list)
    """Messages for files that passed every check but could not be written (an I/O error)."""


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    """Lines [start, end) of the original are replaced by `lines` (with their line endings)."""
    lines: list[str]

    def touches(self, other: _Edit) -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class _Plan:
    file: str
    folders: tuple[str, ...]
    name: str
    sha256: str | None
    """What the file held when checked (None: absent); it must still hold it when written."""
    data: bytes


class _Refused(Exception):
    """A file not to write; the message says why."""


def apply_changes(changes: list[Change], root: Path) -> ApplyReport:
    report = ApplyReport()
    root = root.resolve()
    by_file: dict[str, list[Change]] = {}
    for change in changes:
        by_file.setdefault(change.file, []).append(change)
    plans = []
    for file, group in by_file.items():  # every file is checked before any is written
        try:
            plan = _plan(root, file, group, report.conflicts)
        except _Refused as refusal:
            report.conflicts.append(f"{_shown(file)}: {refusal}; not written")
            continue
        if plan is not None:
            plans.append(plan)
    for plan in plans:
        try:
            _write(root, plan)
        except _Refused as refusal:  # the file or a folder changed since the check
            report.conflicts.append(f"{_shown(plan.file)}: {refusal}; not written")
        except OSError as exc:
            report.failed.append(f"{_shown(plan.file)}: {_reason(exc)}; not written")
        else:
            report.applied.append(plan.file)
    return report


def _plan(root: Path, file: str, group: list[Change], conflicts: list[str]) -> _Plan | None:
    """Check one file and merge its changes; None when every change was refused."""
    folders, name = _parts(file)
    with _Folder(root, folders, create=False) as folder:
        raw = _read(folder.last, name) if folder.complete else None
        if not writable(os.fstat(folder.last), ".", dir_fd=folder.last):
            raise _Refused(f"folder {'/'.join(folder.existing) or '.'} is not writable")
    current_hash = hashlib.sha256(raw).hexdigest() if raw is not None else None
    matching = []
    for change in group:
        if change.original_sha256 != current_hash:
            conflicts.append(f"{_shown(file)}: changed since the agent read it; not written")
        else:
            matching.append(change)
    if not matching:
        return None
    try:
        base = _split(raw.decode("utf-8")) if raw is not None else []
    except UnicodeDecodeError:
        raise _Refused("not a UTF-8 text file") from None
    newline = _common_newline(base, matching[0].newline)
    accepted: list[_Edit] = []
    for change in matching:
        try:
            change.new_text.encode("utf-8")
        except UnicodeEncodeError:
            conflicts.append(f"{_shown(file)}: the new text is not valid Unicode; not written")
            continue
        edits = _edits(base, change.new_text, newline)
        if any(edit.touches(other) for edit in edits for other in accepted):
            conflicts.append(f"{_shown(file)}: overlaps another change to this file; not written")
            continue
        accepted += edits
    if not accepted:
        return None
    merged = [content + ending for content, ending in base]
    for edit in sorted(accepted, key=lambda e: e.start, reverse=True):
        merged[edit.start : edit.end] = edit.lines
    data = "".join(merged).encode("utf-8")
    return _Plan(file=file, folders=folders, name=name, sha256=current_hash, data=data)


def _write(root: Path, plan: _Plan) -> None:
    """Write one checked file, checking again on the way: the folders are opened one by one
    without following symlinks, and the file must still hold what the check read."""
    with _Folder(root, plan.folders, create=True) as folder:
        raw = _read(folder.last, plan.name)
        if (hashlib.sha256(raw).hexdigest() if raw is not None else None) != plan.sha256:
            raise _Refused("changed while the changes were being applied")
        write_bytes_at(folder.last, plan.name, plan.data)


def _parts(file: str) -> tuple[tuple[str, ...], str]:
    """A change's `file` as folders and a name: a plain relative POSIX path, or refused."""
    if not file or "\x00" in file or "\\" in file:
        raise _Refused("not a valid path")
    path = PurePosixPath(file)
    if path.is_absolute():
        raise _Refused("outside the project (an absolute path)")
    if ".." in path.parts:
        raise _Refused("outside the project ('..' in the path)")
    if path.as_posix() != file or path.name in ("", "."):
        raise _Refused("not a normalised path inside the project")
    # No agent writes version control, environments or caches; a tampered cache entry writing
    # .git/hooks/pre-commit would run code at the user's next commit.
    skipped = [part for part in path.parts[:-1] if part in DEFAULT_EXCLUDES]
    if skipped:
        raise _Refused(f"inside {skipped[0]}/, which agents never write")
    return path.parts[:-1], path.name


class _Folder:
    """The file's folder, opened from the project root one component at a time with
    O_NOFOLLOW: a symlink (which could lead outside the project) or a non-folder on the way is
    refused. `last` is the deepest folder opened: the file's own when `complete`. With
    `create=False` a missing folder leaves it incomplete (the file would be new); with
    `create=True` missing folders are made."""

    def __init__(self, root: Path, folders: tuple[str, ...], *, create: bool) -> None:
        self.root = root
        self.folders = folders
        self.create = create
        self.complete = False
        self.last = -1
        self.existing: tuple[str, ...] = ()

    def __enter__(self) -> _Folder:
        try:
            self.last = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise _Refused(f"cannot open the project folder: {_reason(exc)}") from None
        try:
            for index, part in enumerate(self.folders):
                child = self._open(part)
                if child is None:
                    return self
                os.close(self.last)
                self.last = child
                self.existing = self.folders[: index + 1]
        except BaseException:
            self.close()
            raise
        self.complete = True
        return self

    def _open(self, part: str) -> int | None:
        """The folder `part` of `last`, made if missing and `create`; None if missing."""
        shown = "/".join((*self.existing, part))
        if self.create:
            try:
                os.mkdir(part, 0o777, dir_fd=self.last)  # the umask applies
            except FileExistsError:
                pass
            except OSError as exc:
                raise _Refused(f"cannot create folder {shown}: {_reason(exc)}") from None
        try:
            return os.open(part, _NO_FOLLOW | os.O_DIRECTORY, dir_fd=self.last)
        except FileNotFoundError:
            if self.create:
                raise _Refused(f"folder {shown} vanished") from None
            return None
        except OSError as exc:
            with contextlib.suppress(OSError):  # O_DIRECTORY can win: ENOTDIR for a link too
                if stat.S_ISLNK(os.stat(part, dir_fd=self.last, follow_symlinks=False).st_mode):
                    raise _Refused(f"folder {shown} is a symbolic link") from None
            if exc.errno == errno.ENOTDIR:
                raise _Refused(f"{shown} is not a folder") from None
            raise _Refused(f"cannot open folder {shown}: {_reason(exc)}") from None

    def close(self) -> None:
        if self.last >= 0:
            os.close(self.last)
            self.last = -1

    def __exit__(self, *_: object) -> None:
        self.close()


def _read(folder: int, name: str) -> bytes | None:
    """The bytes of the regular file `name` in `folder`, None if there is none; anything else
    there (a symlink, a folder, a device, a pipe) or a read-only file is refused."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _Refused(_reason(exc)) from None
    if stat.S_ISLNK(info.st_mode):
        raise _Refused("is a symbolic link")
    if stat.S_ISDIR(info.st_mode):
        raise _Refused("is a directory now")
    if not stat.S_ISREG(info.st_mode):
        raise _Refused("is not a regular file")
    if not writable(info, name, dir_fd=folder):
        raise _Refused("the file is read-only")
    try:
        # O_NONBLOCK: a file swapped for a pipe since the stat must not hang the run.
        fd = os.open(name, _NO_FOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError as exc:
        raise _Refused(f"cannot read it: {_reason(exc)}") from None
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            raise _Refused("was replaced while being read")
        try:
            return handle.read()
        except OSError as exc:
            raise _Refused(f"cannot read it: {_reason(exc)}") from None


def _split(text: str) -> list[tuple[str, str]]:
    """Lines as (content, line ending): '\\r\\n', '\\n', or '' for a last line without one."""
    pieces = text.split("\n")
    last = pieces.pop()
    lines = [(p[:-1], "\r\n") if p.endswith("\r") else (p, "\n") for p in pieces]
    if last:
        lines.append((last, ""))
    return lines


def _common_newline(base: list[tuple[str, str]], fallback: str) -> str:
    """The file's most common line ending; for a file without any, the change's."""
    counts = Counter(ending for _, ending in base if ending)
    if counts["\r\n"] != counts["\n"]:
        return "\r\n" if counts["\r\n"] > counts["\n"] else "\n"
    return fallback if fallback in ("\n", "\r\n") else "\n"


def _edits(base: list[tuple[str, str]], new_text: str, newline: str) -> list[_Edit]:
    """The agent's text against the file, compared with line endings normalised. A new or
    changed line takes the ending of the line it replaces, else the file's most common one."""
    before = [content + "\n" if ending else content for content, ending in base]
    pieces = new_text.split("\n")  # as in the file: lines end only at '\n'
    after = [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    edits = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        replaced = [ending for _, ending in base[i1:i2]]
        lines = []
        for offset, line in enumerate(after[j1:j2]):
            if not line.endswith("\n"):
                lines.append(line)
                continue
            ending = replaced[offset] if offset < len(replaced) else ""
            if not ending:
                ending = next((e for e in reversed(replaced) if e), newline)
            lines.append(line[:-1] + ending)
        edits.append(_Edit(start=i1, end=i2, lines=lines))
    return edits


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _shown(file: str) -> str:
    """An untrusted name, safe to print on a terminal."""
    return file if file.isprintable() else ascii(file)


def combined_patch(changes: list[Change]) -> str:
    return "".join(change.diff for change in changes)
