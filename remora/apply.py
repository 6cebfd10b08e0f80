"""Applying agents' changes to the user's files: atomically, and never over a newer version."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from remora.atomic import write_text_atomic
from remora.results import Change


@dataclass
class ApplyReport:
    applied: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    """Messages: the file changed since a job read it (or another change to it came first)."""


def apply_changes(changes: list[Change], root: Path) -> ApplyReport:
    """Write each change whose file is still as the job read it; report the others.

    Two jobs that changed the same file both read the same original, so the second conflicts
    once the first is applied: nothing is merged blindly.
    """
    report = ApplyReport()
    for change in changes:
        path = root / change.file
        try:
            current = path.read_bytes()
            current_hash: str | None = hashlib.sha256(current).hexdigest()
        except FileNotFoundError:
            current_hash = None
        if current_hash != change.original_sha256:
            report.conflicts.append(
                f"{change.file}: changed since the agent read it; not written"
                if change.file not in report.applied
                else f"{change.file}: another change to this file was applied first; not written"
            )
            continue
        write_text_atomic(path, change.new_text.replace("\n", change.newline))
        report.applied.append(change.file)
    return report


def combined_patch(changes: list[Change]) -> str:
    return "".join(change.diff for change in changes)
