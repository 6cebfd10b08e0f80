"""A job's private view of the project: reads fall through, writes stay here until applied."""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import anyio
import anyio.to_thread

from remora.discovery.walk import DEFAULT_EXCLUDES
from remora.findings.results import Change


class WorkspaceError(PermissionError):
    """A path a tool may not use. A PermissionError so scripts can catch it as one."""


@dataclass(frozen=True)
class Original:
    text: str | None
    """Content with '\\n' line endings; None: the file did not exist."""
    sha256: str | None
    newline: str


class Workspace:
    """Copy-on-write overlay of `root`.

    The first read of a file pins it: the job sees one version of each file, `diff()` compares
    against it and applying refuses a file that changed since. Each command that needs files on
    disk gets `command_directory()`, a temporary tree that costs what the job touches, not the
    repository size.
    """

    def __init__(self, root: Path, *, keep: bool = False, copy_project: bool = False) -> None:
        self.root = root.resolve()
        self.keep = keep
        self.copy_project = copy_project
        """Commands get a full copy of the project instead of links into it: for hosts without
        the OS sandbox, where a link would let a command write the user's file."""
        self._original: dict[str, Original] = {}
        self._written: dict[str, str] = {}
        self._directory: Path | None = None
        """The last command's directory, when the workspace is kept."""

    # --- paths and reads ---------------------------------------------------------------------

    def key(self, path: str) -> str:
        """Normalise a tool-supplied path to a POSIX path inside the root, or refuse it."""
        if "\x00" in path:
            raise WorkspaceError("NUL byte in path")
        relative = PurePosixPath(path.replace("\\", "/"))
        if relative.is_absolute():
            try:
                relative = PurePosixPath(Path(relative).resolve().relative_to(self.root))
            except ValueError:
                raise WorkspaceError(f"{path}: outside the workspace") from None
        if any(part == ".." for part in relative.parts):
            raise WorkspaceError(f"{path}: '..' is not allowed in workspace paths")
        host = (self.root / relative).resolve()
        if not host.is_relative_to(self.root):
            raise WorkspaceError(f"{path}: leads outside the workspace (a symlink?)")
        return host.relative_to(self.root).as_posix()

    def _read_original(self, key: str) -> Original:
        if key not in self._original:
            host = self.root / key
            try:
                raw = _regular_file_bytes(host)
            except FileNotFoundError:
                self._original[key] = Original(text=None, sha256=None, newline="\n")
                return self._original[key]
            except IsADirectoryError:
                raise WorkspaceError(f"{key}: is a directory") from None
            try:
                decoded = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise WorkspaceError(f"{key}: not a UTF-8 text file") from None
            newline = "\r\n" if "\r\n" in decoded else "\n"
            self._original[key] = Original(
                text=decoded.replace("\r\n", "\n"),
                sha256=hashlib.sha256(raw).hexdigest(),
                newline=newline,
            )
        return self._original[key]

    def read_text(self, path: str) -> str:
        key = self.key(path)
        if key in self._written:
            return self._written[key]
        text = self._read_original(key).text
        if text is None:
            raise FileNotFoundError(f"{path}: no such file")
        return text

    def write_text(self, path: str, text: str) -> None:
        key = self.key(path)
        if (self.root / key).is_dir():
            raise WorkspaceError(f"{path}: is a directory")
        self._read_original(key)
        self._written[key] = text.replace("\r\n", "\n")

    def written(self) -> frozenset[str]:
        """The files the job wrote (keys, as `key` gives them)."""
        return frozenset(self._written)

    def is_file(self, path: str) -> bool:
        key = self.key(path)
        return key in self._written or (self.root / key).is_file()

    def exists(self, path: str) -> bool:
        key = self.key(path)
        return key in self._written or (self.root / key).exists()

    def list_dir(self, path: str = ".") -> list[str]:
        key = self.key(path)
        host = self.root / key
        names = {child.name for child in host.iterdir()} if host.is_dir() else set()
        prefix = "" if key == "." else key + "/"
        for written in self._written:
            if written.startswith(prefix):
                names.add(written[len(prefix) :].split("/", 1)[0])
        if not names and not host.is_dir():
            raise FileNotFoundError(f"{path}: no such directory")
        return sorted(names)

    # --- results -------------------------------------------------------------------------------

    def original_text(self, path: str) -> str | None:
        """The file as the job first saw it (None: it did not exist)."""
        return self._read_original(self.key(path)).text

    def before(self, key: str) -> str | None:
        """What a file in `diff()` held when the job first read it (None: it did not exist);
        `key` as `diff()` gives it, not resolved again (the file may be a link by now)."""
        return self._original[key].text

    def diff(self) -> list[Change]:
        changes = []
        for key in sorted(self._written):
            original = self._original[key]
            after = self._written[key]
            if original.text == after:
                continue
            changes.append(
                Change(
                    file=key,
                    diff=file_diff(key, original.text, after),
                    new_text=after,
                    original_sha256=original.sha256,
                    newline=original.newline,
                )
            )
        return changes

    # --- a real directory for each command --------------------------------------------------

    @contextlib.asynccontextmanager
    async def command_directory(
        self, extra: Mapping[str, str] | None = None
    ) -> AsyncIterator[Path]:
        """A fresh temporary tree that looks like the project with the job's view of every
        file, for one command, removed when it ends (kept, the last one, with `keep`). `extra`
        (path: text) adds files for this command only: never a change, never in the project
        (they are written where links would lead into it, so only through this).

        What the command writes there is thrown away: a job's changes are only what its tools
        write through the workspace (`write_text`), never what a program run by a tool (pytest
        over model-written tests, ruff) left on disk, and no command sees what an earlier one
        left. On disk the tree holds only the files the job read or wrote (and `extra`), in
        real folders: the rest of the project is linked in where the command runs, in the OS
        sandbox (sandbox/packing.py packs a link into the project for every entry a real folder
        lacks), so setting it up costs what the job touched, not a link per entry (a symlink
        costs 0.3 ms on an ext4 /tmp: 86 of them were a third of a lint command). The links are
        safe only because the project is mounted read-only there: a write through one fails.
        Without the sandbox (`copy_project`) the whole project is copied instead. The tree is
        removed in a worker thread: on the event loop's thread, which every job shares, removing
        145 of them was a tenth of a lint step.
        """
        directory = Path(tempfile.mkdtemp(prefix="remora-ws-"))
        try:
            if self.copy_project:
                _copy_project(self.root, directory)
            touched = {key for key, original in self._original.items() if original.text is not None}
            added = {self.key(path): text for path, text in (extra or {}).items()}
            for key in sorted(touched | set(self._written) | set(added)):
                text = added[key] if key in added else self._written.get(key)
                if key not in added and key not in self._written:
                    text = self._original[key].text
                if text is not None:
                    path = directory / key
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text, encoding="utf-8")
            yield directory
        finally:
            gone: Path | None = directory
            if self.keep:
                gone, self._directory = self._directory, directory
            if gone is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_remove, gone)

    @property
    def kept_directory(self) -> Path | None:
        """The last command's directory, left behind when the workspace is kept."""
        return self._directory if self.keep else None

    def close(self) -> None:
        """Nothing to remove: each command's directory went with its command."""


def _remove(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def _copy_project(root: Path, directory: Path) -> None:
    """Real folders and file copies of the whole project; symlinks are left out (a copied link
    would still lead to the user's file) and so are folders discovery skips."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [
            name
            for name in dirs
            if name not in DEFAULT_EXCLUDES and not os.path.islink(os.path.join(folder, name))
        ]
        relative = Path(folder).relative_to(root).as_posix()
        target = directory / relative
        target.mkdir(exist_ok=True)
        for name in files:
            source = os.path.join(folder, name)
            if not os.path.islink(source):
                with contextlib.suppress(OSError):
                    shutil.copyfile(source, target / name)


def file_diff(key: str, before: str | None, after: str) -> str:
    """A unified diff of one file (`before` None: a new file), as git and patch(1) read it."""
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile="/dev/null" if before is None else f"a/{key}",
        tofile=f"b/{key}",
    )
    # difflib leaves a last line without its newline; patch(1) and git expect a marker.
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _regular_file_bytes(path: Path) -> bytes:
    """The file's bytes; WorkspaceError for anything but a regular file. The repository is
    untrusted: a FIFO named setup.cfg blocked a plain read, and with it the whole run
    (opened without blocking, checked, then read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(str(path))
        if not stat.S_ISREG(info.st_mode):
            raise WorkspaceError(f"{path.name}: not a regular file (a FIFO, a device...)")
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)
