"""JSON Lines: one object per job as it finishes, then a summary object."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from remora.findings.results import JobResult, RunSummary
from remora.report.json import result_record


class JsonLinesStream:
    """Streams to stdout, or to a temporary file renamed over `output` when the run completes,
    so an interrupted run never leaves half a report behind."""

    def __init__(self, output: Path | None) -> None:
        self._target = output.resolve() if output else None
        self._tmp: Path | None = None
        self._handle: TextIO = sys.stdout
        if self._target is not None:
            self._target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._target.parent, prefix=f".{self._target.name}.")
            self._tmp = Path(tmp)
            self._handle = os.fdopen(fd, "w", encoding="utf-8")

    def write(self, result: JobResult) -> None:
        self._handle.write(json.dumps({"type": "result", **result_record(result)}) + "\n")
        self._handle.flush()

    def close(self, summary: RunSummary) -> None:
        self._handle.write(json.dumps({"type": "summary", **summary.model_dump()}) + "\n")
        self._handle.flush()
        if self._tmp is not None and self._target is not None:
            self._handle.close()
            os.replace(self._tmp, self._target)

    def discard(self) -> None:
        if self._tmp is not None:
            self._handle.close()
            self._tmp.unlink(missing_ok=True)
