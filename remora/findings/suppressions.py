"""`# remora: ignore[agent/rule]` comments, on a finding's line or on a definition's line."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from remora.discovery.nodes import Node, NodeType
from remora.findings.results import Finding, JobResult

_IGNORE = re.compile(r"#\s*remora:\s*ignore(?:\[([^\]]*)\])?")


def _codes(line: str) -> set[str] | None:
    """The codes a line suppresses: None for no comment, {'*'} for a bare `ignore`."""
    match = _IGNORE.search(line)
    if match is None:
        return None
    if match.group(1) is None:
        return {"*"}
    return {code.strip() for code in match.group(1).split(",") if code.strip()}


def _matches(codes: set[str], agent: str, rule: str) -> bool:
    return bool(codes & {"*", f"{agent}/*", f"{agent}/{rule}", rule})


class Suppressions:
    """Built once per run: files are read only when a finding lands in them, and a definition's
    header comments are looked up only for files with findings. Applying it to a result
    without findings costs nothing, which matters: it runs once per job."""

    def __init__(self, nodes: Sequence[Node], root: Path) -> None:
        self.root = root
        self._nodes: dict[str, list[Node]] = {}
        for node in nodes:
            if node.type is not NodeType.FILE:  # a comment above the first definition must
                self._nodes.setdefault(node.file, []).append(node)  # not silence the file
        self._lines: dict[str, list[str]] = {}
        self._headers: dict[str, list[tuple[int, int, set[str]]]] = {}

    def lines_of(self, file: str) -> list[str]:
        if file not in self._lines:
            try:
                self._lines[file] = (self.root / file).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                self._lines[file] = []
        return self._lines[file]

    def headers_of(self, file: str) -> list[tuple[int, int, set[str]]]:
        """(first line, last line, codes) of the definitions with a comment on their header
        (their decorators or their `def`/`class` line)."""
        if file not in self._headers:
            lines = self.lines_of(file)
            found = []
            for node in self._nodes.get(file, []):
                header_end = node.start_line + next(
                    (i for i, line in enumerate(node.text.splitlines()) if _is_header(line)), 0
                )
                for number in range(node.start_line, min(header_end, len(lines)) + 1):
                    codes = _codes(lines[number - 1])
                    if codes is not None:
                        found.append((node.start_line, node.end_line, codes))
            self._headers[file] = found
        return self._headers[file]

    def suppressed(self, agent: str, finding: Finding) -> bool:
        lines = self.lines_of(finding.file)
        own = _codes(lines[finding.line - 1]) if 0 < finding.line <= len(lines) else None
        if own is not None and _matches(own, agent, finding.rule):
            return True
        return any(
            start <= finding.line <= end and _matches(codes, agent, finding.rule)
            for start, end, codes in self.headers_of(finding.file)
        )

    def apply(self, result: JobResult) -> int:
        """Drop the result's suppressed findings; returns how many."""
        if not result.findings:
            return 0
        kept = [f for f in result.findings if not self.suppressed(result.agent, f)]
        dropped = len(result.findings) - len(kept)
        result.findings = kept
        return dropped


def _is_header(line: str) -> bool:
    stripped = line.lstrip()
    return stripped.startswith(("def ", "async def ", "class "))
