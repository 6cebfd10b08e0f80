"""The default report: findings first, as ruff prints them, then a few lines per agent in the
user's words, then what to do next. `--output-format table` adds the row per job before it;
`--statistics` counts findings per rule instead of listing them (ruff's flag)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from remora.agents.definition import Agent
from remora.findings.results import Finding, JobResult, JobStatus, RunSummary

MARKS = {"edit": "[*]", "suggestion": "[~]"}
"""ruff's `[*]` for a finding an edit of this run fixes (`--fix` applies it); `[~]` for one with
a suggested edit (`--diff` shows it; a reviewer takes it by hand)."""
LISTED_PROBLEMS = 20
"""Jobs not done or in error listed by name (all of them are in JSON and the table)."""


@dataclass(frozen=True)
class TextOptions:
    statistics: bool = False
    fix: bool = False
    """The run applies its edits (`--fix`): the report, written before they are, does not say
    how to apply them (the lines after it say what was fixed, and any conflict)."""


def render_text(
    results: list[JobResult],
    summary: RunSummary,
    agents: Sequence[Agent] = (),
    options: TextOptions = TextOptions(),
) -> str:
    marked = [
        (finding, _mark(result, finding)) for result in results for finding in result.findings
    ]
    marked.sort(key=lambda item: (item[0].file, item[0].line, item[0].column, item[0].rule))
    lines = _statistics(marked, agents) if options.statistics else [_line(*item) for item in marked]
    if lines:
        lines.append("")
    lines += summary.agent_lines()
    lines += _problems(results)
    lines.append(summary.totals())
    lines += _next(results, summary, fixed=options.fix)
    return "\n".join(lines) + "\n"


def _mark(result: JobResult, finding: Finding) -> str:
    if finding.fix == "edit" and result.status is JobStatus.SUCCESS and result.changes:
        return MARKS["edit"]
    if finding.fix == "suggestion" and result.suggestions:
        return MARKS["suggestion"]
    return ""


def _line(finding: Finding, mark: str) -> str:
    """`path:line:col: CODE [*] message`, one line (a message's own line breaks folded)."""
    message = " ".join(finding.message.split())
    return f"{finding.file}:{finding.line}:{finding.column}: {finding.rule} " + (
        f"{mark} {message}" if mark else message
    )


def _statistics(marked: list[tuple[Finding, str]], agents: Sequence[Agent]) -> list[str]:
    """`count<TAB>CODE<TAB>[*] what the rule is`, most frequent first, as ruff's --statistics."""
    counts = Counter(finding.rule for finding, _ in marked)
    fixable = {finding.rule for finding, mark in marked if mark == MARKS["edit"]}
    rules = {code: spec for agent in agents for code, spec in agent.definition.rules.items()}
    example: dict[str, str] = {}
    for finding, _ in marked:
        example.setdefault(finding.rule, " ".join(finding.message.split())[:80])
    width = len(str(max(counts.values(), default=0)))
    return [
        f"{count:>{width}}\t{rule}\t"
        + ("[*] " if rule in fixable else "")
        + (rules[rule].short if rule in rules else example[rule])
        for rule, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def _problems(results: list[JobResult]) -> list[str]:
    """Jobs that errored or were not done, with their whole reason: these need a person."""
    wanted = (JobStatus.ERROR, JobStatus.FAILED)
    troubled = [r for r in results if r.status in wanted and r.error is not None]
    lines = []
    for result in troubled[:LISTED_PROBLEMS]:
        assert result.error is not None
        node = result.node
        what = "error" if result.status is JobStatus.ERROR else "not done"
        lines.append(
            f"  {node.file}:{node.start_line} {node.qualified_name} [{result.agent}] {what}: "
            f"{result.error.code}: {' '.join(result.error.message.split())}"
        )
    if len(troubled) > LISTED_PROBLEMS:
        more = len(troubled) - LISTED_PROBLEMS
        lines.append(f"  ... and {more} more (--output-format table or json lists every job)")
    return lines


def _next(results: list[JobResult], summary: RunSummary, *, fixed: bool) -> list[str]:
    """What to do next, in one or two lines."""
    lines = []
    edited = {change.file for result in results for change in result.changes}
    suggested = sum(len(result.suggestions) for result in results)
    if edited and not fixed:
        noun = "file" if len(edited) == 1 else "files"
        lines.append(f"Edits to {len(edited)} {noun}: --diff shows them, --fix applies them.")
    if suggested:
        noun = "edit" if suggested == 1 else "edits"
        lines.append(
            f"{suggested} suggested {noun}, never applied: --diff shows them (on stderr) to "
            "take by hand."
        )
    if summary.not_possible:
        lines.append(
            f"{summary.not_possible} not possible: --output-format table says why for each."
        )
    return lines
