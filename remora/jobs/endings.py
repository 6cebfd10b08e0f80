"""How a job ends: one family of exceptions that end the runner's turn loop early (`JobEnding`,
caught once), and the status the end gets from what the tools verified (never from the model's
words)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from remora.findings.results import ErrorCode, JobError, JobStatus


class JobEnding(Exception):
    """The turn loop ends before a valid submit_result. `status` is FAILED (not done) unless
    the environment or the server ended the job (ERROR); the status is settled from it and
    what the tools verified (`JobEnd.settled`)."""

    status = JobStatus.FAILED
    not_asked = ""
    """Why the model was not asked (a prompt too long for its context), if so."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = JobError(code=code, message=message)


class JobEnded(JobEnding):
    """The agent stopped without a valid submit_result: the turn limit, unusable replies, the
    time limit, or the model unsure below the agent's confidence threshold."""


class ToolFault(JobEnding):
    """The environment failed a tool (a program missing, a timeout, a crashed sandbox): nothing
    the model can repair, so the job ends as an error instead of going back to the model."""

    status = JobStatus.ERROR

    def __init__(self, error: JobError) -> None:
        super().__init__(error.code, error.message)


class ModelFailed(JobEnding):
    """The model server (or engine) failed a request: the job's error."""

    status = JobStatus.ERROR


class NotAsked(JobEnding):
    """A prompt too long for the model's context: that request refused, not made. A refusal,
    not an error: the job's verified work stays."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NOT_DONE, message)
        self.not_asked = message


def not_done_message(
    done_when: list[str], submitted: dict[str, Any] | None, final: str, refusals: list[str]
) -> str:
    """Why a job that ran has no verified outcome, in the words its error carries."""
    wanted = " or ".join(done_when)
    if submitted is None:  # a tool ended the job without an outcome that completes it
        return f"finished without a verified outcome ({wanted}): {final}"
    if not refusals:
        return f"submitted without a verified outcome ({wanted}); no tool reported one"
    return (
        f"submitted without a verified outcome ({wanted}); {len(refusals)} tool "
        f"refusal{'s' if len(refusals) > 1 else ''}, last: {refusals[-1]}"
    )


@dataclass(frozen=True)
class JobEnd:
    status: JobStatus
    """FAILED unless the environment or the server ended the job (ERROR)."""
    error: JobError | None
    verified: tuple[str, str] | None
    """The last outcome a tool verified that completes the job, and Remora's summary of it."""
    not_asked: str
    """Why the model was not asked (a prompt too long for its context), if so."""

    def settled(
        self, *, suggested: str, not_possible: str
    ) -> tuple[JobStatus, JobError | None, str | None, str]:
        """Status, error, outcome and summary. `success` needs a verified outcome, whoever
        ended the loop. A job not done whose tools left a suggested edit (`suggested`: their
        words) or said why nothing can be done (`not_possible`) is not a failure: it is
        `suggested` or `not_possible`, with those words as its summary."""
        if self.status is JobStatus.FAILED and self.verified is not None:
            outcome, summary = self.verified
            summary += f"; {self.not_asked}" if self.not_asked else ""
            return JobStatus.SUCCESS, None, outcome, summary
        not_done = self.error is not None and self.error.code is ErrorCode.NOT_DONE
        if self.status is JobStatus.FAILED and not_done:
            if suggested:
                return JobStatus.SUGGESTED, None, None, suggested
            if not_possible:
                return JobStatus.NOT_POSSIBLE, None, None, not_possible
        return self.status, self.error, None, ""
