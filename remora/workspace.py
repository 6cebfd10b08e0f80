"""A job's private view of the project: reads fall through, writes stay here until applied."""

from __future__ import annotations

import difflib
from pathlib import Path, PurePosixPath

from remora.results import Change


class WorkspaceError(PermissionError):
    """A path a tool may not use. A PermissionError so scripts can catch it as one."""


class Workspace:
    """Copy-on-write overlay of `root`.

    The first read of a file is remembered, so a job sees one consistent version of each file
    and `diff()` compares against what the job actually read.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._original: dict[str, str | None] = {}
        self._written: dict[str, str] = {}

    def _key(self, path: str) -> str:
        """Normalise a tool-supplied path to a POSIX path inside the root, or refuse it."""
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
            raise WorkspaceError(f"{path}: leads outside the workspace")
        return host.relative_to(self.root).as_posix()

    def _read_original(self, key: str) -> str | None:
        if key not in self._original:
            host = self.root / key
            try:
                self._original[key] = host.read_text(encoding="utf-8")
            except FileNotFoundError:
                self._original[key] = None
            except IsADirectoryError:
                raise WorkspaceError(f"{key}: is a directory") from None
            except UnicodeDecodeError:
                raise WorkspaceError(f"{key}: not a UTF-8 text file") from None
        return self._original[key]

    def read_text(self, path: str) -> str:
        key = self._key(path)
        if key in self._written:
            return self._written[key]
        text = self._read_original(key)
        if text is None:
            raise FileNotFoundError(f"{path}: no such file")
        return text

    def write_text(self, path: str, text: str) -> None:
        key = self._key(path)
        if (self.root / key).is_dir():
            raise WorkspaceError(f"{path}: is a directory")
        self._read_original(key)
        self._written[key] = text

    def exists(self, path: str) -> bool:
        key = self._key(path)
        return key in self._written or (self.root / key).exists()

    def list_dir(self, path: str = ".") -> list[str]:
        key = self._key(path)
        host = self.root / key
        names = {child.name for child in host.iterdir()} if host.is_dir() else set()
        prefix = "" if key == "." else key + "/"
        for written in self._written:
            if written.startswith(prefix):
                names.add(written[len(prefix) :].split("/", 1)[0])
        if not names and not host.is_dir():
            raise FileNotFoundError(f"{path}: no such directory")
        return sorted(names)

    def original_text(self, path: str) -> str | None:
        """The file as the job first saw it (None: it did not exist)."""
        return self._read_original(self._key(path))

    def written_files(self) -> dict[str, str]:
        return dict(self._written)

    def diff(self) -> list[Change]:
        changes = []
        for key in sorted(self._written):
            before = self._original.get(key)
            after = self._written[key]
            if before == after:
                continue
            lines = difflib.unified_diff(
                (before or "").splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile="/dev/null" if before is None else f"a/{key}",
                tofile=f"b/{key}",
            )
            changes.append(Change(file=key, diff="".join(lines)))
        return changes
