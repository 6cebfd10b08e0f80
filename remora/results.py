"""What a job produces: the typed result every renderer and exit code is derived from."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from remora.discovery.nodes import Node


class JobStatus(StrEnum):
    SUCCESS = "success"
    """The model called `submit_result` with valid arguments."""
    FAILED = "failed"
    """The agent ran but did not finish: turn limit, time limit or too many bad replies."""
    SKIPPED = "skipped"
    """The job did not run (cancelled before it started)."""
    ERROR = "error"
    """Remora could not run the agent: the server failed, or a bug crashed the job."""


class ErrorCode(StrEnum):
    TURN_LIMIT = "turn_limit"
    TIME_LIMIT = "time_limit"
    INVALID_MODEL_OUTPUT = "invalid_model_output"
    MODEL_ERROR = "model_error"
    SERVER_UNREACHABLE = "server_unreachable"
    CANCELLED = "cancelled"
    INTERNAL = "internal_error"


Severity = Literal["error", "warning", "info"]


class Finding(BaseModel):
    rule: str
    message: str
    file: str
    line: int = Field(ge=1)
    column: int = Field(default=1, ge=1)
    severity: Severity = "warning"


class Change(BaseModel):
    file: str
    diff: str
    # What applying needs, kept out of reports:
    new_text: str = Field(default="", exclude=True)
    """The file's full new content, with '\n' line endings."""
    original_sha256: str | None = Field(default=None, exclude=True)
    """Hash of the bytes the job read; None when the file did not exist."""
    newline: str = Field(default="\n", exclude=True)
    """The original file's line ending, restored on write."""


class JobError(BaseModel):
    code: ErrorCode
    message: str


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class JobResult(BaseModel):
    node: Node
    agent: str
    status: JobStatus
    summary: str = ""
    findings: list[Finding] = Field(default_factory=list)
    changes: list[Change] = Field(default_factory=list)
    submitted: dict[str, object] | None = None
    """The arguments of the model's `submit_result` call, as validated."""
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0
    error: JobError | None = None
    workspace: str | None = None
    """The job's workspace directory, when kept with --keep-workspaces."""
    cached: bool = False
    """Answered from the result cache: no model request was made."""


class RunSummary(BaseModel):
    nodes: int
    jobs: int
    success: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    findings: int = 0

    @classmethod
    def of(cls, nodes: int, results: list[JobResult]) -> RunSummary:
        summary = cls(nodes=nodes, jobs=len(results))
        for result in results:
            setattr(summary, result.status.value, getattr(summary, result.status.value) + 1)
            summary.findings += len(result.findings)
        return summary

    def exit_code(self) -> int:
        """ruff's contract: 2 when something could not be analysed, 1 when there is something to
        look at (findings or agents that did not finish), else 0."""
        if self.error:
            return 2
        if self.findings or self.failed:
            return 1
        return 0
