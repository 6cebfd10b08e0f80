"""The JSON report: one document with the summary and every job's result."""

from __future__ import annotations

import json
from typing import Any

from remora import __version__
from remora.findings.results import JobResult, RunSummary


def result_record(result: JobResult) -> dict[str, Any]:
    record = result.model_dump(mode="json", exclude={"node"})
    return {"node": result.node.public_fields(), **record}


def render_json(results: list[JobResult], summary: RunSummary) -> str:
    document = {
        "version": __version__,
        "summary": summary.model_dump(),
        "results": [result_record(result) for result in results],
    }
    return json.dumps(document, indent=2) + "\n"
