"""What a job produces: the typed result every renderer and exit code is derived from."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from remora.discovery.nodes import Node
from remora.errors import ExitCode


class JobStatus(StrEnum):
    SUCCESS = "success"
    """A tool verified the agent's work (`outcome`): done, or nothing to do."""
    FAILED = "failed"
    """The agent ran but its work was not verified: submitted without it (`not_done`), turn
    limit, time limit or too many bad replies."""
    SUGGESTED = "suggested"
    """Nothing verified was written, but a tool proposed an edit for a reviewer to take by hand
    (a model-drafted docstring withheld): a finding with a suggestion, not a failure."""
    NOT_POSSIBLE = "not_possible"
    """The agent's tools found nothing they could do for this node, and said why (`summary`):
    a function no test can characterize, a definition no draft fits. Not a failure."""
    SKIPPED = "skipped"
    """The job did not run (cancelled before it started)."""
    ERROR = "error"
    """Remora could not run the agent: the server failed, the environment failed a tool (a
    program missing, a command timed out, the sandbox crashed), or a bug crashed the job."""


class ErrorCode(StrEnum):
    TURN_LIMIT = "turn_limit"
    TIME_LIMIT = "time_limit"
    INVALID_MODEL_OUTPUT = "invalid_model_output"
    MODEL_ERROR = "model_error"
    SERVER_UNREACHABLE = "server_unreachable"
    CANCELLED = "cancelled"
    INTERNAL = "internal_error"
    NOT_DONE = "not_done"
    """The model submitted, but no tool verified the agent's work."""
    LOW_CONFIDENCE = "low_confidence"
    """The model was unsure which tool to call, and the agent ends such jobs not done."""
    REQUIREMENT_MISSING = "requirement_missing"
    COMMAND_TIMEOUT = "command_timeout"
    SANDBOX_CRASHED = "sandbox_crashed"
    TOOL_ENVIRONMENT = "tool_environment"
    """A tool failed because of the environment (e.g. ruff could not read its configuration)."""
    AGENT_TEMPLATE = "agent_template"
    """The agent's `node_context` template failed on this node (a bound broken, an error)."""
    PROJECT_NOT_IMPORTABLE = "project_not_importable"
    """The node's module does not import in the project's Python (skipped before any job)."""


Severity = Literal["error", "warning", "info"]


class Finding(BaseModel):
    rule: str
    message: str
    file: str
    line: int = Field(ge=1)
    column: int = Field(default=1, ge=1)
    severity: Severity = "warning"
    help_uri: str | None = None
    """Where the rule is explained (ruff's page for a ruff rule); else the agent's `rules:`."""
    fix: Literal["edit", "suggestion"] | None = None
    """What the job did about it: an edit (`--fix` applies it, `--diff` shows it) or a
    suggestion (`--diff` shows it on stderr; never applied); None: neither."""


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
    requests: int = 0
    """Model requests (chat turns, resamples and tools' completions)."""


class TranscriptTurn(BaseModel):
    """One request to the model and what it wrote."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["chat", "completion"]
    """chat: a turn of the agent's conversation; completion: a tool's `complete` request."""
    prompt: str
    """The exact prompt text: the FunctionGemma rendering of the conversation and the tools
    offered on that turn (the bytes the server's chat template and the embedded engine
    produce), or a completion's raw prompt."""
    reply: str
    """What the model wrote, as it would have written it: for chat, the calls in the native
    format ending at the stop marker; for a completion, its text."""
    problems: tuple[str, ...] = ()
    """Why the runner refused this turn's calls (unknown tool, invalid arguments, a repeat);
    empty when every call was valid."""
    kept: bool | None = None
    """For a completion in a job that succeeded: whether the first line it wrote is in the
    job's verified changes (a draft the tool kept, not one it threw away); else None."""

    def kept_part(self) -> str:
        """A completion's text through its first non-blank line (and that line's end): the
        part a tool keeps of a draft."""
        start = len(self.reply) - len(self.reply.lstrip())
        end = self.reply.find("\n", start)
        return self.reply if end == -1 else self.reply[: end + 1]


class JobResult(BaseModel):
    node: Node
    agent: str
    status: JobStatus
    summary: str = ""
    """Written by Remora from the verified outcome (or why there is none), never by the model."""
    outcome: str | None = None
    """The verified outcome that completed the job (one of the agent's `done_when`)."""
    note: str | None = None
    """The model's own sentence from submit_result, unless it copied the agent's prompt."""
    findings: list[Finding] = Field(default_factory=list)
    changes: list[Change] = Field(default_factory=list)
    refused_changes: list[str] = Field(default_factory=list)
    """Changes the job made outside its agent's `writes:`, each `file: why`; never applied."""
    suggestions: list[Change] = Field(default_factory=list)
    """Edits a tool proposed but did not make (a withheld docstring draft), for a reviewer to
    take by hand: shown by `--diff` (on stderr), never applied."""
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
    confidence: float | None = None
    """The lowest confidence the model had in a tool it chose (turns where it had a choice, and
    the server gave log-probabilities)."""
    resamples: int = 0
    """Requests spent asking unsure turns again (`confidence.below: resample`)."""
    transcript: list[TranscriptTurn] | None = Field(default=None, exclude=True)
    """Every model request of the job, rendered, when the run records (`--record`); never in
    reports or the cache."""


class AgentTally(BaseModel):
    jobs: int = 0
    outcomes: dict[str, int] = Field(default_factory=dict)
    """Verified outcomes (`written`, `current`, ...) and how many jobs reached each."""
    suggested: int = 0
    """Jobs that left a suggested edit for a reviewer (status suggested)."""
    not_possible: int = 0
    """Jobs whose tools found nothing they could do, with the reason (status not_possible)."""
    not_done: int = 0
    """Jobs that ran but whose work no tool verified (status failed)."""
    error: int = 0
    skipped: int = 0

    def line(self, agent: str) -> str:
        """`docstring: 11 jobs: 1 current, 8 suggested, 2 not possible`."""
        parts = [f"{count} {name}" for name, count in sorted(self.outcomes.items())]
        for count, words in (
            (self.suggested, "suggested"),
            (self.not_possible, "not possible"),
            (self.not_done, "not done"),
            (self.error, "error" if self.error == 1 else "errors"),
            (self.skipped, "skipped"),
        ):
            if count:
                parts.append(f"{count} {words}")
        jobs = f"{self.jobs} job" + ("" if self.jobs == 1 else "s")
        return f"{agent}: {jobs}: " + (", ".join(parts) or "nothing done")


class EngineUsage(BaseModel):
    """What the embedded engine did over a run: the work behind the jobs' counted usage."""

    requests: int = 0
    """Requests answered: generations, score requests and replayed completions."""
    replayed: int = 0
    """Completions answered with an identical earlier request's reply: nothing evaluated."""
    prompt_tokens: int = 0
    """Tokens of every prompt, as the jobs count them."""
    prompt_tokens_evaluated: int = 0
    """Of those, run through the model; the rest were reused from a context's cache."""
    prompt_tokens_reused: int = 0
    completion_tokens: int = 0
    prompt_seconds: float = 0.0
    completion_seconds: float = 0.0

    @property
    def evaluated_share(self) -> float:
        return self.prompt_tokens_evaluated / self.prompt_tokens if self.prompt_tokens else 0.0

    def line(self) -> str:
        """`engine: 120 requests (8 replayed); 14,210 of 51,000 prompt tokens evaluated ...`"""
        seconds = self.prompt_seconds or float("inf")
        prompt_rate = self.prompt_tokens_evaluated / seconds
        rate = self.completion_tokens / (self.completion_seconds or float("inf"))
        return (
            f"engine: {self.requests} requests ({self.replayed} replayed); "
            f"{self.prompt_tokens_evaluated:,} of {self.prompt_tokens:,} prompt tokens evaluated "
            f"({self.evaluated_share:.0%}) at {prompt_rate:.0f}/s; "
            f"{self.completion_tokens:,} generated at {rate:.1f}/s"
        )


class RunSummary(BaseModel):
    nodes: int
    jobs: int
    success: int = 0
    suggested: int = 0
    not_possible: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    findings: int = 0
    cached: int = 0
    """Results answered from the result cache (no model request)."""
    agents: dict[str, AgentTally] = Field(default_factory=dict)
    """Per agent: what was done, verified, and what was not."""
    engine: EngineUsage | None = None
    """With the embedded engine: the prompt tokens it evaluated and reused, and its speed."""

    @classmethod
    def of(
        cls, nodes: int, results: list[JobResult], engine: EngineUsage | None = None
    ) -> RunSummary:
        summary = cls(nodes=nodes, jobs=len(results), engine=engine)
        for result in results:
            setattr(summary, result.status.value, getattr(summary, result.status.value) + 1)
            summary.findings += len(result.findings)
            summary.cached += result.cached
            tally = summary.agents.setdefault(result.agent, AgentTally())
            tally.jobs += 1
            if result.status is JobStatus.SUCCESS:
                name = result.outcome or "done"
                tally.outcomes[name] = tally.outcomes.get(name, 0) + 1
            elif result.status is JobStatus.SUGGESTED:
                tally.suggested += 1
            elif result.status is JobStatus.NOT_POSSIBLE:
                tally.not_possible += 1
            elif result.status is JobStatus.FAILED:
                tally.not_done += 1
            elif result.status is JobStatus.ERROR:
                tally.error += 1
            else:
                tally.skipped += 1
        return summary

    def totals(self) -> str:
        counts = [f"{self.success} success"]
        counts += [f"{self.suggested} suggested"] if self.suggested else []
        counts += [f"{self.not_possible} not possible"] if self.not_possible else []
        counts += [f"{self.failed} failed", f"{self.error} error", f"{self.skipped} skipped"]
        return (
            f"{_count(self.nodes, 'node')}, {_count(self.jobs, 'job')}: {', '.join(counts)}; "
            f"{_count(self.findings, 'finding')}"
            + (f"; {self.cached} from the cache" if self.cached else "")
        )

    def agent_lines(self) -> list[str]:
        """Per agent, what its tools verified: `docstring: 10 jobs, 3 written, 7 not done`."""
        return [tally.line(agent) for agent, tally in sorted(self.agents.items())]

    def exit_code(self) -> int:
        """ruff's contract: 2 when something could not be analysed, 1 when there is something to
        look at (findings or agents that did not finish), else 0."""
        if self.error:
            return ExitCode.ERROR
        # Jobs suggested or not possible were `failed` before they had their own words: the
        # exit code stays what it was for them.
        if self.findings or self.failed or self.suggested or self.not_possible:
            return ExitCode.FINDINGS
        return ExitCode.OK


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")
