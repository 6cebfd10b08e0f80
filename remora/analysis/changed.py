"""Changed-only runs: which lines differ from a git revision (or the index), with real git."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from remora.discovery.nodes import Node
from remora.errors import UserInputError

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)

ChangedLines = dict[str, set[int] | None]
"""Root-relative POSIX path -> changed line numbers; None means the whole file is new."""


def _git(args: list[str], cwd: Path) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
        )
    except FileNotFoundError as exc:
        raise UserInputError("changed-only runs need git, which is not installed") from exc
    if done.returncode != 0:
        raise UserInputError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout


def changed_lines(root: Path, *, base: str | None = None, staged: bool = False) -> ChangedLines:
    """Lines added or modified against `base` (working tree, untracked files included), or in
    the index against HEAD with `staged`. Deleted lines mark the line where they were."""
    top = Path(_git(["rev-parse", "--show-toplevel"], root).strip())
    if staged:
        diff = _git(["diff", "--cached", "--unified=0", "--no-color", "--no-ext-diff"], top)
        untracked: list[str] = []
    else:
        assert base is not None
        _git(["rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"], top)
        diff = _git(["diff", "--unified=0", "--no-color", "--no-ext-diff", base, "--"], top)
        listing = _git(["ls-files", "--others", "--exclude-standard", "-z"], top)
        untracked = [name for name in listing.split("\0") if name]
    changed: ChangedLines = {}
    for section in re.split(r"^diff --git ", diff, flags=re.MULTILINE)[1:]:
        target = re.search(r"^\+\+\+ (?:b/)?(.+)$", section, re.MULTILINE)
        if target is None or target.group(1) == "/dev/null":
            continue  # a deleted file
        lines: set[int] = set()
        for match in _HUNK.finditer(section):
            start, count = int(match.group(1)), int(match.group(2) or 1)
            lines.update(range(start, start + count) if count else {max(start, 1)})
        changed[_relative(top / target.group(1), root)] = lines
    for name in untracked:
        changed[_relative(top / name, root)] = None
    return changed


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def touches(node: Node, changed: ChangedLines) -> bool:
    if node.file not in changed:
        return False
    lines = changed[node.file]
    return lines is None or any(node.start_line <= line <= node.end_line for line in lines)
