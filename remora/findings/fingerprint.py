"""Finding fingerprints that survive code moving and edits elsewhere in the file.

Version 2 (current) hashes the agent, rule, file, qualified name and message with the
finding's own line and the nearest non-blank line above and below it inside its node, each
with whitespace normalised, as GitHub's `primaryLocationLineHash` hashes a line and its
neighbours: blank lines added anywhere, code moved, or another function edited leave it as it
was. Repeats (the same rule on two identical lines) are told apart by the report's occurrence
number. Version 1 hashed the whole node's text, so any edit to a file changed the fingerprints
of its file-level findings; it is kept to read baselines recorded with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from remora.findings.results import Finding, JobResult

FINGERPRINT_VERSION = 2

Fingerprint = Callable[[JobResult, Finding], str]


def finding_fingerprint(result: JobResult, finding: Finding) -> str:
    node = result.node
    lines = node.text.splitlines()
    at = finding.line - node.start_line
    inside = 0 <= at < len(lines)
    here = _normalised(lines[at]) if inside else ""
    above = next((_normalised(line) for line in reversed(lines[:at]) if line.strip()), "")
    below = next((_normalised(line) for line in lines[at + 1 :] if line.strip()), "")
    parts = [
        result.agent,
        finding.rule,
        node.file,
        node.qualified_name,
        finding.message,
        above if inside else "",
        here,
        below if inside else "",
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def finding_fingerprint_v1(result: JobResult, finding: Finding) -> str:
    """Version 1: the node's whole text, normalised, and the finding's line within it."""
    node = result.node
    parts = [
        result.agent,
        finding.rule,
        node.file,
        node.qualified_name,
        hashlib.sha256(_normalised(node.text).encode()).hexdigest(),
        finding.line - node.start_line,
        finding.message,
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


FINGERPRINTS: dict[int, Fingerprint] = {1: finding_fingerprint_v1, 2: finding_fingerprint}
"""Every version Remora can still compute, for baselines recorded with it."""


def _normalised(text: str) -> str:
    return " ".join(text.split())
