"""Filtering: what of a job's findings the run reports. Applied to each result as it arrives,
so a streamed result is final: `# remora: ignore` suppressions, the changed-lines filter, then
the baseline."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from remora.analysis.baseline import Baseline
from remora.analysis.changed import ChangedLines, touches
from remora.discovery.nodes import Node
from remora.findings.results import JobResult
from remora.findings.suppressions import Suppressions


class ResultFilters:
    def __init__(
        self,
        nodes: Sequence[Node],
        root: Path,
        *,
        changed: ChangedLines | None,
        baseline: Baseline | None,
    ) -> None:
        self.suppressions = Suppressions(nodes, root)
        self.changed = changed
        self.baseline = baseline

    def apply(self, result: JobResult) -> None:
        """Drop the findings this run does not report (in place)."""
        self.suppressions.apply(result)
        if self.changed is not None:
            lines = changed_lines_of(result.node, self.changed)
            result.findings = [f for f in result.findings if f.line in lines]
        if self.baseline is not None:
            self.baseline.filter(result)


def changed_lines_of(node: Node, changed: ChangedLines) -> range | set[int]:
    """Lines where findings of a changed-only run count: the job's node, if it changed."""
    return range(node.start_line, node.end_line + 1) if touches(node, changed) else set()
