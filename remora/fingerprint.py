"""Finding fingerprints that survive code moving: no line numbers, only names and content."""

from __future__ import annotations

import hashlib
import json

from remora.results import Finding, JobResult


def finding_fingerprint(result: JobResult, finding: Finding) -> str:
    """Agent, rule, file, qualified name, the node's text with whitespace normalised, the
    finding's line within the node, and its message."""
    node = result.node
    normalised = " ".join(node.text.split())
    parts = [
        result.agent,
        finding.rule,
        node.file,
        node.qualified_name,
        hashlib.sha256(normalised.encode()).hexdigest(),
        finding.line - node.start_line,
        finding.message,
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]
