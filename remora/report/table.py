"""`--output-format table`: a row per job (its status and its whole summary or reason), then the
text report (findings, per-agent lines, what to do next)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from remora.agents.definition import Agent
from remora.findings.results import JobResult, JobStatus, RunSummary
from remora.report.text import TextOptions, render_text

STATUS_STYLE = {
    JobStatus.SUCCESS: "green",
    JobStatus.SUGGESTED: "cyan",
    JobStatus.NOT_POSSIBLE: "dim",
    JobStatus.FAILED: "yellow",
    JobStatus.SKIPPED: "dim",
    JobStatus.ERROR: "bold red",
}
STATUS_WORDS = {JobStatus.NOT_POSSIBLE: "not possible"}


def render_table(
    results: list[JobResult],
    summary: RunSummary,
    agents: Sequence[Agent] = (),
    options: TextOptions = TextOptions(),  # noqa: B008 (frozen: one shared default is fine)
    *,
    color: bool = False,
) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=color, no_color=not color, width=120)
    if results:
        table = Table(show_edge=False, pad_edge=False)
        table.add_column("node", overflow="fold")
        table.add_column("agent")
        table.add_column("status")
        table.add_column("findings", justify="right")
        table.add_column("summary or reason", overflow="fold")
        for result in results:
            node = result.node
            detail = result.summary or (result.error.message if result.error else "")
            words = STATUS_WORDS.get(result.status, result.status.value)
            table.add_row(
                escape(f"{node.file}:{node.start_line} {node.qualified_name}"),
                escape(result.agent),
                f"[{STATUS_STYLE[result.status]}]{words}[/]",
                str(len(result.findings)),
                escape(" ".join(detail.split())),  # whole: folded, never cut
            )
        console.print(table)
        console.print()
    return buffer.getvalue() + render_text(results, summary, agents, options)
