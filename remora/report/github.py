"""GitHub Actions workflow commands: findings as annotations on the pull request's files.

GitHub shows at most 10 annotations of each level per step (and 50 per job), and drops the
rest silently. So at most 10 of each level are emitted, the rest are listed in the log and in
the job summary (`$GITHUB_STEP_SUMMARY`), and one notice says how many were left out.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from remora.findings.results import Finding, JobResult, JobStatus, RunSummary

ANNOTATIONS_PER_LEVEL = 10
"""GitHub's limit per level per step."""
STEP_SUMMARY_BUDGET = 512 * 1024
"""GitHub refuses a step summary over 1 MiB (and shows none of it); the findings table stops
at half that, leaving room for the other steps of the job."""
UNFINISHED_LISTED = 200

_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}
_LEVEL_ORDER = ("error", "warning", "notice")


def render_github(
    results: list[JobResult], summary: RunSummary, *, step_summary: Path | None
) -> str:
    """Annotations for errored jobs and findings (at most 10 per level), the findings that did
    not fit as plain log lines, and a closing summary line. With `step_summary` (the file
    `$GITHUB_STEP_SUMMARY` names), every finding and the totals are appended to it as Markdown.
    """
    annotations = [_job_error(result) for result in results if result.status is JobStatus.ERROR]
    annotations += [_finding(finding, agent) for finding, agent in _sorted_findings(results)]
    shown, left_out = _cap(annotations)
    lines = [annotation.command for annotation in shown]

    summary_written = False
    summary_error: str | None = None
    if step_summary is not None:
        try:
            with step_summary.open("a", encoding="utf-8") as handle:
                handle.write(_step_summary(results, summary))
            summary_written = True
        except OSError as exc:
            summary_error = f"{step_summary}: {exc.strerror or exc}"
    if left_out:
        counts = Counter(annotation.level for annotation in left_out)
        detail = ", ".join(_count(counts[level], level) for level in _LEVEL_ORDER if counts[level])
        where = "listed below" + (" and in the job summary" if summary_written else "")
        message = (
            f"remora: {len(left_out)} more not shown as annotations ({detail}); GitHub shows "
            f"{ANNOTATIONS_PER_LEVEL} per level. They are {where}."
        )
        lines.append(f"::notice::{escape_data(message)}")
        lines.extend(annotation.plain for annotation in left_out)
    if summary_error is not None:
        lines.append(f"::warning::{escape_data(f'remora: no job summary: {summary_error}')}")
    lines.append(_totals(summary))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class _Annotation:
    level: str
    command: str
    plain: str
    """The same as a log line, for annotations left out."""


def _cap(annotations: list[_Annotation]) -> tuple[list[_Annotation], list[_Annotation]]:
    """At most 10 per level, in order. When anything is left out, one notice slot stays free
    for the notice that says so: GitHub would drop an 11th notice."""
    totals = Counter(annotation.level for annotation in annotations)
    limits = dict.fromkeys(_LEVEL_ORDER, ANNOTATIONS_PER_LEVEL)
    if any(count > ANNOTATIONS_PER_LEVEL for count in totals.values()):
        limits["notice"] -= 1
    shown: list[_Annotation] = []
    left_out: list[_Annotation] = []
    used: Counter[str] = Counter()
    for annotation in annotations:
        if used[annotation.level] < limits[annotation.level]:
            used[annotation.level] += 1
            shown.append(annotation)
        else:
            left_out.append(annotation)
    return shown, left_out


def _sorted_findings(results: list[JobResult]) -> list[tuple[Finding, str]]:
    return sorted(
        ((finding, result.agent) for result in results for finding in result.findings),
        key=lambda item: (item[0].file, item[0].line, item[0].column, item[1], item[0].rule),
    )


def _finding(finding: Finding, agent: str) -> _Annotation:
    level = _LEVELS[finding.severity]
    title = f"remora {agent}/{finding.rule}"
    properties = {
        "file": finding.file,
        "line": str(finding.line),
        "col": str(finding.column),
        "title": title,
    }
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    location = f"{finding.file}:{finding.line}:{finding.column}"
    return _Annotation(
        level=level,
        command=f"::{level} {props}::{escape_data(finding.message)}",
        plain=_one_line(f"{location}: {level}: {agent}/{finding.rule} {finding.message}"),
    )


def _job_error(result: JobResult) -> _Annotation:
    text = f"{result.node.id} [{result.agent}]: {_reason(result)}"
    return _Annotation(
        level="error",
        command=f"::error title={escape_property('remora job error')}::{escape_data(text)}",
        plain=_one_line(f"error: remora job error: {text}"),
    )


def _reason(result: JobResult) -> str:
    if result.error is not None:
        return f"{result.error.code.value}: {result.error.message}"
    return f"{result.status.value}: {result.summary or 'no detail'}"


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's toolkit does: a newline must not end
    the command early, and a literal `%0A` must stay literal."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: `:` and `,` also separate properties."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _one_line(text: str) -> str:
    # Left-out findings go to the log as plain text; a line starting with "::" would be read
    # as a command, so they start with the location instead.
    return " ".join(text.split())


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _totals(summary: RunSummary) -> str:
    return "\n".join(
        [*(f"remora: {line}" for line in summary.agent_lines()), f"remora: {summary.totals()}"]
    )


def _step_summary(results: list[JobResult], summary: RunSummary) -> str:
    findings = _sorted_findings(results)
    by_level = Counter(_LEVELS[finding.severity] for finding, _ in findings)
    levels = ", ".join(_count(by_level[level], level) for level in _LEVEL_ORDER if by_level[level])
    parts = [
        "## Remora\n\n",
        f"**{_count(summary.findings, 'finding')}**"
        + (f" ({levels})" if levels else "")
        + f" in {_count(summary.nodes, 'node')}. {_count(summary.jobs, 'job')}: "
        f"{summary.success} succeeded, {summary.failed} did not finish, {summary.error} errored, "
        f"{summary.skipped} skipped.\n\n",
    ]
    size = sum(len(part.encode()) for part in parts)
    if findings:
        parts.append("| level | location | rule | message |\n| --- | --- | --- | --- |\n")
        for listed, (finding, agent) in enumerate(findings):
            row = (
                f"| {_LEVELS[finding.severity]} "
                f"| {_cell(f'{finding.file}:{finding.line}:{finding.column}')} "
                f"| {_cell(f'{agent}/{finding.rule}')} | {_cell(finding.message)} |\n"
            )
            size += len(row.encode())
            if size > STEP_SUMMARY_BUDGET:
                parts.append(
                    f"\n{len(findings) - listed} more findings are not listed here: the job "
                    "summary has a size limit. The step's log lists them.\n"
                )
                break
            parts.append(row)
        parts.append("\n")
    unfinished = [r for r in results if r.status in (JobStatus.ERROR, JobStatus.FAILED)]
    if unfinished:
        parts.append("### Jobs that errored or did not finish\n\n")
        parts.append("| status | node | agent | reason |\n| --- | --- | --- | --- |\n")
        for result in unfinished[:UNFINISHED_LISTED]:
            parts.append(
                f"| {result.status.value} | {_cell(result.node.id)} | {_cell(result.agent)} "
                f"| {_cell(_reason(result))} |\n"
            )
        if len(unfinished) > UNFINISHED_LISTED:
            parts.append(f"\n{len(unfinished) - UNFINISHED_LISTED} more are not listed here.\n")
        parts.append("\n")
    return "".join(parts)


def _cell(text: str) -> str:
    """Plain text in a Markdown table cell: tool messages are not trusted to be Markdown."""
    escaped = html.escape(" ".join(text.split()), quote=False)
    for char in "\\|`*_[]":
        escaped = escaped.replace(char, "\\" + char)
    return escaped
