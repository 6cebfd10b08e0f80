"""What a job's answer rests on besides its node, as the cache key records it: a file's content
hash (`file_digest`), and the files an agent's `reads:` names (`ReadFiles`: the test agent's
"tests exist: tests/test_roman.py" was answered from the cache after that file was deleted)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from pathspec import GitIgnoreSpec

from remora.discovery.nodes import Node
from remora.discovery.walk import iter_python_files
from remora.tool_library.module_paths import project_of


def file_digest(path: str, top: str) -> str | None:
    """The content hash of a file, None when there is none; a path that exists but cannot be
    read counts as what it is, so that fixing it changes the key. A link from inside the
    project to a file outside it is not read (the sandboxed programs cannot read it either)."""
    inside = os.path.realpath(path).startswith(os.path.join(os.path.realpath(top), ""))
    if path.startswith(os.path.join(top, "")) and not inside and os.path.lexists(path):
        return "a link outside the project: not read"
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"not readable: {exc.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"  # a folder, a FIFO: never opened (a FIFO would block)
    try:
        with open(path, "rb") as handle:  # in chunks: a repository's file may be huge
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as exc:
        return f"not readable: {exc.strerror}"


class ReadFiles:
    """[path, content hash] of the Python files of a node's project (`{project}`, walked as
    discovery walks: no `.venv`, nothing `.gitignore` ignores) that an agent's `reads:`
    patterns match, from that folder. Walked once per project and patterns per run, so that
    a job's lookup and its store agree, and the files a run writes count from the next."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, tuple[str, ...]], list[list[str | None]]] = {}

    def of(self, patterns: Sequence[str], node: Node, root: Path) -> list[list[str | None]]:
        if not patterns:
            return []
        project = project_of(node.file, lambda path: (root / path).exists())
        known = self._found.get((project, tuple(patterns)))
        if known is not None:
            return known
        top = os.path.abspath(root)
        folder = Path(top, project)
        spec = GitIgnoreSpec.from_lines(patterns)
        found: list[list[str | None]] = []
        if folder.is_dir():
            for path in sorted(iter_python_files([folder], Path(top))):
                if spec.match_file(path.relative_to(folder).as_posix()):
                    shown = path.relative_to(top).as_posix()
                    found.append([shown, file_digest(str(path), top)])
        self._found[project, tuple(patterns)] = found
        return found
