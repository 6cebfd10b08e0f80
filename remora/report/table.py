"""The terminal report: a row per job, the findings ruff-style, then totals."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from remora.findings.results import JobResult, JobStatus, RunSummary

STATUS_STYLE = {
    JobStatus.SUCCESS: "green",
    JobStatus.FAILED: "yellow",
    JobStatus.SKIPPED: "dim",
    JobStatus.ERROR: "bold red",
}


def render_table(results: list[JobResult], summary: RunSummary, *, color: bool = False) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=color, no_color=not color, width=120)
    if results:
        table = Table(show_edge=False, pad_edge=False)
        table.add_column("node", overflow="fold")
        table.add_column("agent")
        table.add_column("status")
        table.add_column("findings", justify="right")
        table.add_column("summary", overflow="fold")
        for result in results:
            node = result.node
            detail = result.summary or (result.error.message if result.error else "")
            table.add_row(
                escape(f"{node.file}:{node.start_line} {node.qualified_name}"),
                escape(result.agent),
                f"[{STATUS_STYLE[result.status]}]{result.status.value}[/]",
                str(len(result.findings)),
                escape(_shorten(detail)),
            )
        console.print(table)
    findings = [(finding, result.agent) for result in results for finding in result.findings]
    if findings:
        console.print()
        for finding, agent in sorted(findings, key=lambda f: (f[0].file, f[0].line, f[0].column)):
            location = f"{finding.file}:{finding.line}:{finding.column}"
            console.print(
                escape(f"{location}: {finding.rule} {finding.message} [{agent}]"), highlight=False
            )
    console.print()
    for line in summary.agent_lines():
        console.print(escape(line), highlight=False)
    console.print(summary.totals(), highlight=False)
    return buffer.getvalue()


def _shorten(text: str, limit: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
