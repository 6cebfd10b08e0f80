"""Applying agents' changes to the user's files: atomically, and never over a newer version.

Jobs on different nodes of one file each return the whole file as they left it. Their edits
are merged line by line when they do not touch: lint fixing one function and the docstring agent
documenting another both land in one write. Edits that overlap (or touch) are refused as
conflicts rather than merged blindly.
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from remora.atomic import write_text_atomic
from remora.results import Change


@dataclass
class ApplyReport:
    applied: list[str] = field(default_factory=list)
    """Files written (each once)."""
    conflicts: list[str] = field(default_factory=list)
    """Messages for changes not written."""


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    """Lines [start, end) of the original are replaced by `lines`."""
    lines: list[str]

    def touches(self, other: _Edit) -> bool:
        return self.start <= other.end and other.start <= self.end


def apply_changes(changes: list[Change], root: Path) -> ApplyReport:
    report = ApplyReport()
    by_file: dict[str, list[Change]] = {}
    for change in changes:
        by_file.setdefault(change.file, []).append(change)
    for file, group in by_file.items():
        path = root / file
        try:
            raw: bytes | None = path.read_bytes()
        except FileNotFoundError:
            raw = None
        current_hash = hashlib.sha256(raw).hexdigest() if raw is not None else None
        base = raw.decode("utf-8").replace("\r\n", "\n") if raw is not None else ""
        base_lines = base.splitlines(keepends=True)
        accepted: list[_Edit] = []
        newline = "\n"
        for change in group:
            if change.original_sha256 != current_hash:
                report.conflicts.append(f"{file}: changed since the agent read it; not written")
                continue
            edits = _edits(base_lines, change.new_text.splitlines(keepends=True))
            if any(edit.touches(other) for edit in edits for other in accepted):
                report.conflicts.append(
                    f"{file}: overlaps another change to this file; not written"
                )
                continue
            accepted += edits
            newline = change.newline
        if not accepted:
            continue
        merged = list(base_lines)
        for edit in sorted(accepted, key=lambda e: e.start, reverse=True):
            merged[edit.start : edit.end] = edit.lines
        write_text_atomic(path, "".join(merged).replace("\n", newline))
        report.applied.append(file)
    return report


def _edits(before: list[str], after: list[str]) -> list[_Edit]:
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return [
        _Edit(start=i1, end=i2, lines=after[j1:j2])
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def combined_patch(changes: list[Change]) -> str:
    return "".join(change.diff for change in changes)
