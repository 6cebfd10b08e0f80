"""Pick the renderer for `--output-format`."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from remora.agents.definition import Agent
from remora.findings.results import JobResult, RunSummary
from remora.report.json import render_json
from remora.report.paths import as_shown
from remora.report.table import render_table
from remora.report.text import TextOptions, render_text

FORMATS = ("text", "table", "json", "jsonl", "sarif", "github")


def render_report(
    output_format: str,
    results: list[JobResult],
    summary: RunSummary,
    agents: Sequence[Agent],
    root: Path,
    *,
    color: bool = False,
    text: TextOptions = TextOptions(),  # noqa: B008 (frozen: one shared default is fine)
) -> str:
    if output_format != "sarif":  # SARIF: repository-relative URIs, with a uriBaseId
        results = as_shown(results, root)
    if output_format == "json":
        return render_json(results, summary)
    if output_format == "sarif":
        from remora.report.sarif import render_sarif  # only runs that ask for it pay the import

        return render_sarif(results, agents, root=root)
    if output_format == "github":
        from remora.report.github import render_github

        step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
        return render_github(
            results, summary, step_summary=Path(step_summary) if step_summary else None
        )
    if output_format == "table":
        return render_table(results, summary, agents, text, color=color and sys.stdout.isatty())
    return render_text(results, summary, agents, text)
