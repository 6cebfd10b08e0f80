"""`# remora: ignore[agent/rule]` comments, on a finding's line or on a definition's line."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from remora.discovery.nodes import Node, NodeType
from remora.results import Finding, JobResult

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


def apply_suppressions(results: Sequence[JobResult], nodes: Sequence[Node], root: Path) -> int:
    """Drop suppressed findings in place; returns how many were dropped.

    A comment on a definition's header line (its decorators or its `def`/`class` line)
    covers every line of that definition.
    """

    @cache
    def lines_of(file: str) -> list[str]:
        try:
            return (root / file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return []

    headers: dict[str, list[tuple[int, int, set[str]]]] = {}
    for node in nodes:
        if node.type is NodeType.FILE:
            continue  # a comment above the first definition must not silence the whole file
        header_end = node.start_line + next(
            (i for i, line in enumerate(node.text.splitlines()) if _is_header(line)), 0
        )
        lines = lines_of(node.file)
        for number in range(node.start_line, min(header_end, len(lines)) + 1):
            codes = _codes(lines[number - 1])
            if codes is not None:
                headers.setdefault(node.file, []).append((node.start_line, node.end_line, codes))

    def suppressed(agent: str, finding: Finding) -> bool:
        lines = lines_of(finding.file)
        own = _codes(lines[finding.line - 1]) if 0 < finding.line <= len(lines) else None
        if own is not None and _matches(own, agent, finding.rule):
            return True
        return any(
            start <= finding.line <= end and _matches(codes, agent, finding.rule)
            for start, end, codes in headers.get(finding.file, [])
        )

    dropped = 0
    for result in results:
        kept = [f for f in result.findings if not suppressed(result.agent, f)]
        dropped += len(result.findings) - len(kept)
        result.findings = kept
    return dropped


def _is_header(line: str) -> bool:
    stripped = line.lstrip()
    return stripped.startswith(("def ", "async def ", "class "))
