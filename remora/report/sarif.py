"""SARIF 2.1.0 for GitHub code scanning (and any other SARIF consumer).

Layout: one SARIF run per agent, each with `automationDetails.id = "<category>/<agent>/"`.
GitHub keeps one analysis per category, so a run of a subset of the agents (`--agents`) leaves
the other agents' alerts alone, and the runs of one file never share a category (codeql-action
rejects an upload whose runs have the same tool and automation id). A run without results
still says "this agent found nothing", which closes the agent's fixed alerts.

Alerts are matched across commits by `partialFingerprints["remora/v2"]`, built from the node's
qualified name and the finding's line with its neighbours instead of line numbers (see
`remora.findings.fingerprint`), so an alert survives its code moving and edits elsewhere in the
file.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, urlsplit

from remora import __version__
from remora.agents.definition import Agent, RuleSpec
from remora.discovery.nodes import NodeType
from remora.findings.fingerprint import FINGERPRINT_VERSION, finding_fingerprint
from remora.findings.results import Finding, JobResult, JobStatus
from remora.report.sarif_fixes import diff_replacements

__all__ = [
    "FINGERPRINT_KEY",
    "INFORMATION_URI",
    "SARIF_SCHEMA_URI",
    "diff_replacements",
    "finding_fingerprint",
    "render_sarif",
]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
INFORMATION_URI = "https://pypi.org/project/remora/"
FINGERPRINT_KEY = f"remora/v{FINGERPRINT_VERSION}"
SRCROOT = "%SRCROOT%"
CHANGE_RULE = "change"

_LEVELS = {"error": "error", "warning": "warning", "info": "note"}
_LOGICAL_KINDS = {
    NodeType.FUNCTION: "function",
    NodeType.METHOD: "member",
    NodeType.CLASS: "type",
    NodeType.FILE: "module",
}
_CHANGE_SPEC = RuleSpec(
    short="Proposed change",
    full="The agent proposed an edit; the result's fix holds it. Remora never writes your files "
    "unless asked to.",
    help="Review the fix, then apply it with `remora analyze --fix` (`--diff` shows the patch).",
)


def render_sarif(
    results: list[JobResult],
    agents: Sequence[Agent],
    *,
    root: Path,
    category: str = "remora",
    information_uri: str = INFORMATION_URI,
) -> str:
    """The SARIF log of a run: one run per agent in `agents` (even without results), then one
    per other agent that appears in `results`.

    `root` is the project root that finding and change paths are relative to; it becomes
    `originalUriBaseIds["%SRCROOT%"]`. `category` prefixes every run's automation id (give
    each CI shard its own, e.g. "remora/shard-2-of-4", or their uploads replace each other).
    """
    prefix = category.strip("/")
    runs: dict[str, _Run] = {}
    for agent in agents:
        runs.setdefault(agent.name, _Run(agent.name, agent.definition.rules))
    for result in results:
        run = runs.get(result.agent)
        if run is None:
            run = runs[result.agent] = _Run(result.agent, {})
        run.add(result)
    srcroot = root.absolute().as_uri().rstrip("/") + "/"
    document = {
        "$schema": SARIF_SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [
            run.to_sarif(
                automation_id=f"{prefix}/{run.agent}/" if prefix else f"{run.agent}/",
                srcroot=srcroot,
                information_uri=information_uri,
            )
            for run in runs.values()
        ],
    }
    return json.dumps(document, indent=2) + "\n"


@dataclass
class _Run:
    agent: str
    declared: dict[str, RuleSpec]
    rules: list[dict[str, Any]] = field(default_factory=list)
    rule_index: dict[str, int] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    errored: bool = False
    fingerprints: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        # Declared rules first, in the agent's order, whether reported or not: GitHub shows
        # their help for every alert, and the rule list is the same from run to run.
        for code, spec in self.declared.items():
            self._add_rule(code, spec)

    def add(self, result: JobResult) -> None:
        if result.status is JobStatus.ERROR:
            self.errored = True
        if result.status in (JobStatus.ERROR, JobStatus.FAILED):
            self.notifications.append(_notification(result))
        fix = _fix(result) if result.status is JobStatus.SUCCESS else None
        for finding in result.findings:
            self.results.append(self._result(result, finding, fix))
        if fix is not None and not result.findings:
            # Changes without findings still deserve an alert, or the edit would be lost.
            node = result.node
            placeholder = Finding(
                rule=CHANGE_RULE,
                # Not the summary: the model words it differently from run to run, and the
                # fingerprint must not change with it.
                message="proposed change",
                file=node.file,
                line=node.start_line,
                column=node.start_column,
                severity="info",
            )
            sarif_result = self._result(result, placeholder, fix)
            if result.summary.strip():
                sarif_result["message"]["text"] = result.summary.strip()
            self.results.append(sarif_result)

    def _result(
        self, result: JobResult, finding: Finding, fix: dict[str, Any] | None
    ) -> dict[str, Any]:
        index = self._rule(finding)
        fingerprint = finding_fingerprint(result, finding)
        # Two identical findings in one node (the same rule twice on a line) would share a
        # fingerprint and be merged into one alert; number them as GitHub numbers its own.
        self.fingerprints[fingerprint] += 1
        location: dict[str, Any] = {
            "physicalLocation": {
                "artifactLocation": _artifact_location(finding.file),
                "region": _region(result, finding),
            }
        }
        node = result.node
        if node.type is not NodeType.FILE:
            location["logicalLocations"] = [
                {
                    "name": node.name,
                    "fullyQualifiedName": node.qualified_name,
                    "kind": _LOGICAL_KINDS[node.type],
                }
            ]
        sarif_result: dict[str, Any] = {
            "ruleId": self.rules[index]["id"],
            "ruleIndex": index,
            "level": _LEVELS[finding.severity],
            "message": {
                "text": finding.message.strip() or self.rules[index]["shortDescription"]["text"]
            },
            "locations": [location],
            "partialFingerprints": {
                FINGERPRINT_KEY: f"{fingerprint}:{self.fingerprints[fingerprint]}"
            },
            "properties": {"node": node.id, "agent": result.agent},
        }
        if fix is not None:
            sarif_result["fixes"] = [fix]
        return sarif_result

    def _rule(self, finding: Finding) -> int:
        if finding.rule not in self.rule_index:
            spec = _CHANGE_SPEC if finding.rule == CHANGE_RULE else _undeclared(self, finding)
            self._add_rule(finding.rule, spec)
        return self.rule_index[finding.rule]

    def _add_rule(self, code: str, spec: RuleSpec) -> None:
        short = _one_line(spec.short) or code
        full = spec.full.strip() or short
        rule: dict[str, Any] = {
            "id": f"{self.agent}/{code}",
            "name": code,
            "shortDescription": {"text": short},
            "fullDescription": {"text": full},
            "help": {"text": spec.help.strip() or full},
        }
        if spec.help_uri and _is_absolute_uri(spec.help_uri):
            rule["helpUri"] = spec.help_uri
        self.rule_index[code] = len(self.rules)
        self.rules.append(rule)

    def to_sarif(self, *, automation_id: str, srcroot: str, information_uri: str) -> dict[str, Any]:
        invocation: dict[str, Any] = {"executionSuccessful": not self.errored}
        if self.notifications:
            invocation["toolExecutionNotifications"] = self.notifications
        return {
            "tool": {
                "driver": {
                    "name": "remora",
                    "version": __version__,
                    "semanticVersion": __version__,
                    "informationUri": information_uri,
                    "rules": self.rules,
                }
            },
            "automationDetails": {"id": automation_id},
            "invocations": [invocation],
            "originalUriBaseIds": {SRCROOT: {"uri": srcroot}},
            # Finding columns count characters, not the UTF-16 units SARIF assumes by default.
            "columnKind": "unicodeCodePoints",
            "results": self.results,
        }


def _undeclared(run: _Run, finding: Finding) -> RuleSpec:
    """A rule the agent's definition does not describe: described by its first message."""
    return RuleSpec(
        short=_one_line(finding.message) or finding.rule,
        full=f"Rule {finding.rule} of the {run.agent} agent; the agent's definition does not "
        "describe it (add it under `rules:` in the agent's YAML).",
        help_uri=finding.help_uri,
    )


def _notification(result: JobResult) -> dict[str, Any]:
    node = result.node
    if result.error is not None:
        code, detail = result.error.code.value, result.error.message
    else:
        code, detail = result.status.value, result.summary or "the agent did not finish"
    notification: dict[str, Any] = {
        "level": "error" if result.status is JobStatus.ERROR else "warning",
        "message": {"text": f"{node.id} [{result.agent}]: {code}: {detail}"},
        "descriptor": {"id": code},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": _artifact_location(node.file),
                    "region": {"startLine": node.start_line, "endLine": node.end_line},
                }
            }
        ],
    }
    return notification


def _region(result: JobResult, finding: Finding) -> dict[str, int]:
    """One line: from the finding's column to the end of its source line, which the node's
    text holds when the finding lies inside the node."""
    start = finding.column
    end = start + 1
    node = result.node
    offset = finding.line - node.start_line
    if finding.file == node.file and offset >= 0:
        lines = node.text.split("\n")
        if offset < len(lines):
            # The node's text starts at its column, so its first line is shifted.
            shift = node.start_column - 1 if offset == 0 else 0
            end = max(end, len(lines[offset].rstrip()) + shift + 1)
    return {
        "startLine": finding.line,
        "startColumn": start,
        "endLine": finding.line,
        "endColumn": end,
    }


def _fix(result: JobResult) -> dict[str, Any] | None:
    changes = []
    for change in result.changes:
        replacements = diff_replacements(change.diff)
        if replacements:
            changes.append(
                {"artifactLocation": _artifact_location(change.file), "replacements": replacements}
            )
    if not changes:
        return None
    description = result.summary.strip() or f"Edit proposed by the {result.agent} agent"
    return {"description": {"text": description}, "artifactChanges": changes}


def _artifact_location(path: str) -> dict[str, Any]:
    posix = PurePosixPath(path)
    if posix.is_absolute():  # a file outside the project root
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(posix.as_posix(), safe="/"), "uriBaseId": SRCROOT}


def _is_absolute_uri(value: str) -> bool:
    parts = urlsplit(value)
    return bool(parts.scheme) and not any(char.isspace() for char in value)


def _one_line(text: str, limit: int = 120) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
