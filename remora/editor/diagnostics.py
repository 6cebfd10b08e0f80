"""Job results as LSP diagnostics: a finding is one, at its line and column; a verified change
with no finding is one at the node's first line, so its code action has a place to be offered.

Only verified results become diagnostics. A job that did not finish (`not_done`) is not
something to fix in the code, so it is left to the log; a job that could not run (`error`) is
said once as a message by the server, not once per node."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlparse

from lsprotocol import types

from remora.agents.definition import RuleSpec
from remora.findings.results import Finding, JobResult, JobStatus

SOURCE = "remora"
CHANGE_RULE = "change"
"""The code of a diagnostic that only carries a change (`agent/change`)."""

_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}


def diagnostics(
    results: Iterable[JobResult], text: str, rules: Mapping[str, Mapping[str, RuleSpec]]
) -> list[types.Diagnostic]:
    """The diagnostics of one file's results; `text` is the file as the agents read it (for
    line ends and UTF-16 columns), `rules` each agent's declared rules (for help links)."""
    lines = text.split("\n")
    out = []
    for result in results:
        if result.status is not JobStatus.SUCCESS:
            continue
        agent_rules = rules.get(result.agent, {})
        for finding in result.findings:
            out.append(_diagnostic(result, finding, lines, agent_rules.get(finding.rule)))
        if result.changes and not result.findings:
            node = result.node
            placeholder = Finding(
                rule=CHANGE_RULE,
                message=f"{result.agent} proposes a change",
                file=node.file,
                line=node.start_line,
                column=node.start_column,
                severity="info",
            )
            out.append(_diagnostic(result, placeholder, lines, None))
    return out


def _diagnostic(
    result: JobResult, finding: Finding, lines: list[str], rule: RuleSpec | None
) -> types.Diagnostic:
    row = min(max(finding.line - 1, 0), max(len(lines) - 1, 0))
    line = lines[row] if lines else ""
    start = _utf16(line[: finding.column - 1])
    end = _utf16(line.rstrip("\r"))
    message = finding.message.strip() or (rule.short if rule else finding.rule)
    if result.summary.strip():
        message += f"\n{result.agent}: {result.summary.strip()}"
    link = finding.help_uri or (rule.help_uri if rule else None)
    return types.Diagnostic(
        range=types.Range(types.Position(row, start), types.Position(row, max(end, start))),
        message=message,
        severity=_SEVERITY[finding.severity],
        code=f"{result.agent}/{finding.rule}",
        code_description=types.CodeDescription(href=link) if link and _absolute(link) else None,
        source=SOURCE,
        data={"node": result.node.id, "agent": result.agent},
    )


def _utf16(text: str) -> int:
    """LSP columns count UTF-16 code units (the encoding every client supports)."""
    return len(text.encode("utf-16-le")) // 2


def _absolute(uri: str) -> bool:
    parts = urlparse(uri)
    return bool(parts.scheme) and bool(parts.netloc)
