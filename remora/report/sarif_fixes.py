"""A change's unified diff as SARIF fix replacements: regions of the original file and their
new text."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def diff_replacements(diff: str) -> list[dict[str, Any]] | None:
    """SARIF replacements for a unified diff of one file: one per run of changed lines.

    Regions are in the original file's lines and columns (code points), whole lines: from
    column 1 of the first deleted line to column 1 of the line after the last one, so the
    deleted text includes its newline. None when the diff does not add up (a hunk whose line
    counts do not match its header): a wrong fix is worse than none.
    """
    lines = _split_keep_newlines(diff)
    replacements: list[dict[str, Any]] = []
    i = 0
    while i < len(lines) and not lines[i].startswith("@@"):
        i += 1
    while i < len(lines):
        header = _HUNK.match(lines[i])
        if header is None:
            if lines[i].strip() == "":
                i += 1
                continue
            return None
        old_start, old_count = int(header.group(1)), int(header.group(2) or "1")
        new_count = int(header.group(4) or "1")
        i += 1
        # An empty old side ("-5,0") means "insert after line 5".
        old_line = old_start if old_count else old_start + 1
        block: _Block | None = None
        last: _Block | None = None
        last_tag = ""
        while old_count > 0 or new_count > 0 or (i < len(lines) and lines[i].startswith("\\")):
            if i >= len(lines):
                return None
            line = lines[i]
            i += 1
            tag, body = (line[:1], line[1:]) if line not in ("\n", "") else (" ", line)
            if tag == "\\":
                # "\ No newline at end of file": the previous line had no newline.
                target = last if last_tag in "-+" else None
                if target is not None:
                    side = target.deleted if last_tag == "-" else target.inserted
                    side[-1] = side[-1].removesuffix("\n")
                continue
            if tag == " ":
                if block is not None:
                    replacements.append(block.replacement())
                    block = None
                old_line += 1
                old_count -= 1
                new_count -= 1
            elif tag == "-":
                block = block or _Block(old_line)
                block.deleted.append(body)
                old_line += 1
                old_count -= 1
            elif tag == "+":
                block = block or _Block(old_line)
                block.inserted.append(body)
                new_count -= 1
            else:
                return None
            if old_count < 0 or new_count < 0:
                return None
            last, last_tag = block, tag
        if block is not None:
            replacements.append(block.replacement())
    return replacements


@dataclass
class _Block:
    """A run of deleted and inserted lines, starting at `start` in the original file."""

    start: int
    deleted: list[str] = field(default_factory=list)
    inserted: list[str] = field(default_factory=list)

    def replacement(self) -> dict[str, Any]:
        end_line, end_column = self.start, 1
        if self.deleted:
            last = self.deleted[-1]
            if last.endswith("\n"):
                end_line = self.start + len(self.deleted)
            else:  # the file's last line, without a newline: delete to its end
                end_line = self.start + len(self.deleted) - 1
                end_column = len(last) + 1
        replacement: dict[str, Any] = {
            "deletedRegion": {
                "startLine": self.start,
                "startColumn": 1,
                "endLine": end_line,
                "endColumn": end_column,
            }
        }
        if self.inserted:
            replacement["insertedContent"] = {"text": "".join(self.inserted)}
        return replacement


def _split_keep_newlines(text: str) -> list[str]:
    """Like splitlines(keepends=True), but only '\n' ends a line: source lines may hold '\r',
    form feeds or U+2028, which are content here."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
