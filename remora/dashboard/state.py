"""Events folded into the numbers the dashboard shows; nothing here knows of terminals."""

from __future__ import annotations

import json
import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

STATUSES = ("success", "failed", "error", "skipped", "suggested", "not_possible")
REFRESH_S = 0.25
"""How often the live view is redrawn and a followed file polled."""
LOW_CONFIDENCE = 0.5
"""A reply whose confidence (in the tool it chose) is below this counts as unsure."""


def percentile(values: list[float], percent: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method); `values` sorted."""
    if not values:
        return math.nan
    rank = percent / 100 * (len(values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (rank - low)


@dataclass(frozen=True, slots=True)
class Latency:
    count: int
    p50: float
    p95: float
    p99: float


@dataclass(frozen=True, slots=True)
class AgentCounts:
    statuses: dict[str, int]
    cached: int
    findings: int


@dataclass(frozen=True, slots=True)
class JobProblem:
    ts: float
    agent: str
    node_id: str
    status: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class JobActivity:
    """What a job in flight is doing now, since `since_ts` (an event's time)."""

    agent: str
    node_id: str
    phase: str
    """`starting`; `waiting` for the model; `forming` a call as the reply streams (`tool`,
    `arguments` so far); `writing` text (`chars` so far); `replied` (`tool`: the calls chosen,
    if any); `running` a tool; `ran` it."""
    since_ts: float
    tool: str = ""
    arguments: str = ""
    attempt: int = 0
    """0 for a turn's first request, 1.. for resamples of it."""
    chars: int = 0


@dataclass(frozen=True, slots=True)
class RunProgress:
    run_id: str
    jobs: int
    done: int
    cached: int
    finished: bool


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    events: int
    runs: int
    latest: RunProgress | None
    queued: int
    in_flight: int
    window_s: float
    """The span the rates are over: the window, or less when the stream is younger."""
    jobs_per_s: float
    requests_per_s: float
    tokens_per_s: float
    prompt_tokens: int
    completion_tokens: int
    requests: int
    latency: Latency | None
    agents: dict[str, AgentCounts]
    problems: list[JobProblem]
    tool_failures: int
    bad_calls: int
    unreadable: int
    """Lines or events that could not be used (not JSON, or missing fields)."""
    rated_replies: int
    """Model responses with a confidence (the model had a choice of tools, and log-probs)."""
    low_confidence: int
    """Of those, the ones below `LOW_CONFIDENCE`."""
    resamples: int
    """Requests that asked a turn again (`attempt` > 0)."""
    activity: list[JobActivity]
    """Jobs in flight in the order they started, at most `activity_rows` of them."""
    activity_more: int
    """Jobs in flight beyond those."""


@dataclass(slots=True)
class _Run:
    jobs: int = 0
    done: int = 0
    cached: int = 0
    finished: bool = False


@dataclass(slots=True)
class _AgentTally:
    statuses: Counter[str] = field(default_factory=Counter)
    cached: int = 0
    findings: int = 0


class DashboardState:
    """Numbers folded from events, in the order they are fed.

    Times come from the events' `ts`, never the clock, so a recorded stream always gives the
    same numbers; a live view passes the clock as `now` so that rates fall when work stops.
    """

    def __init__(
        self,
        *,
        window_s: float = 10.0,
        latency_sample: int = 10_000,
        problems: int = 8,
        activity_rows: int = 12,
    ) -> None:
        self.window_s = window_s
        self.activity_rows = activity_rows
        self.events = 0
        self.unreadable = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self._runs: dict[str, _Run] = {}
        self._latest_run: str | None = None
        # Keyed by run as well: job ids repeat across runs appending to one file (watch).
        self._queued: set[tuple[str, str]] = set()
        # In the order they started; what each is doing now.
        self._in_flight: dict[tuple[str, str], JobActivity] = {}
        # (ts, amount) within the window: finished jobs, requests, tokens.
        self._jobs: deque[tuple[float, int]] = deque()
        self._requests: deque[tuple[float, int]] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._latencies: deque[float] = deque(maxlen=latency_sample)
        self.requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._agents: dict[str, _AgentTally] = {}
        self._problems: deque[JobProblem] = deque(maxlen=problems)
        self.tool_failures = 0
        self.bad_calls = 0
        self.rated_replies = 0
        self.low_confidence = 0
        self.resamples = 0

    def feed_all(self, events: Iterable[Mapping[str, Any]]) -> None:
        for event in events:
            self.feed(event)

    def feed_lines(self, lines: Iterable[bytes | str]) -> None:
        """JSON Lines; a line that is not a JSON object is counted as unreadable (a stream
        that mixes in stderr has warnings in it)."""
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                self.unreadable += 1
                continue
            if isinstance(event, dict):
                self.feed(event)
            else:
                self.unreadable += 1

    def feed(self, event: Mapping[str, Any]) -> None:
        try:
            self._feed(event)
        except (KeyError, TypeError, ValueError):
            # Another version or a damaged line: count it, keep the view alive.
            self.unreadable += 1

    def _feed(self, event: Mapping[str, Any]) -> None:
        kind = event["event"]
        ts = float(event["ts"])
        run = str(event.get("run_id", ""))
        self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
        self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        job = (run, str(event.get("job_id", "")))
        if kind == "run_started":
            self._runs[run] = _Run(jobs=int(event["jobs"]))
            self._latest_run = run
        elif kind == "run_finished":
            self._runs.setdefault(run, _Run()).finished = True
            # A run is over: whatever it left queued or started will never finish.
            self._queued = {key for key in self._queued if key[0] != run}
            self._in_flight = {
                key: doing for key, doing in self._in_flight.items() if key[0] != run
            }
        elif kind == "job_queued":
            self._queued.add(job)
        elif kind == "job_started":
            self._queued.discard(job)
            self._in_flight[job] = JobActivity(
                str(event.get("agent", "")), str(event.get("node_id", "")), "starting", ts
            )
        elif kind == "job_finished":
            self._job_finished(event, ts, run, job)
        elif kind == "model_request":
            attempt = int(event.get("attempt") or 0)
            self.requests += 1
            self.resamples += attempt > 0
            self._add(self._requests, ts, 1)
            self._doing(job, ts, "waiting", attempt=attempt)
        elif kind == "model_progress":
            self._progress(event, ts, job)
        elif kind == "model_response":
            prompt, completion = int(event["prompt_tokens"]), int(event["completion_tokens"])
            latency = float(event["latency_s"])
            confidence = event.get("confidence")
            confidence = None if confidence is None else float(confidence)
            calls = ", ".join(str(name) for name in event.get("tool_calls") or ())
            self._latencies.append(latency)
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self._add(self._tokens, ts, prompt + completion)
            if confidence is not None:
                self.rated_replies += 1
                self.low_confidence += confidence < LOW_CONFIDENCE
            self._doing(job, ts, "replied", tool=calls)
        elif kind == "tool_call":
            self._doing(job, ts, "running", tool=str(event.get("tool", "")))
        elif kind == "tool_result":
            self.tool_failures += not event.get("ok", True)
            self._doing(job, ts, "ran", tool=str(event.get("tool", "")))
        elif kind == "bad_call":
            self.bad_calls += 1
        self.events += 1  # counted once it was usable

    def _job_finished(
        self, event: Mapping[str, Any], ts: float, run: str, job: tuple[str, str]
    ) -> None:
        status, cached = str(event["status"]), bool(event.get("cached"))
        tally = self._agents.setdefault(str(event["agent"]), _AgentTally())
        tally.statuses[status] += 1
        tally.cached += cached
        tally.findings += int(event.get("findings") or 0)
        self._queued.discard(job)
        self._in_flight.pop(job, None)
        progress = self._runs.setdefault(run, _Run())
        progress.done += 1
        progress.cached += cached
        if not cached:  # cache hits arrive all at once and would swamp the rate
            self._add(self._jobs, ts, 1)
        if event.get("error"):
            self._problems.append(
                JobProblem(
                    ts=ts,
                    agent=str(event["agent"]),
                    node_id=str(event.get("node_id", "")),
                    status=status,
                    code=str(event.get("error_code") or ""),
                    message=str(event["error"]),
                )
            )

    def _progress(self, event: Mapping[str, Any], ts: float, job: tuple[str, str]) -> None:
        """A streamed reply forming: the last call's name and arguments so far, or text."""
        calls, chars = event["calls"], int(event.get("content_chars") or 0)
        if not isinstance(calls, list):
            raise TypeError("calls is not a list")
        if calls:
            name, arguments = str(calls[-1]["name"]), str(calls[-1]["arguments"])
            self._doing(job, ts, "forming", tool=name, arguments=arguments, chars=chars)
        else:
            self._doing(job, ts, "writing", chars=chars)

    def _doing(
        self,
        job: tuple[str, str],
        ts: float,
        phase: str,
        *,
        tool: str = "",
        arguments: str = "",
        chars: int = 0,
        attempt: int | None = None,
    ) -> None:
        """A job in flight does something else now; `since_ts` stays while it goes on doing
        the same (a call's arguments growing). Jobs not known to be in flight are left out."""
        current = self._in_flight.get(job)
        if current is None:
            return
        attempt = current.attempt if attempt is None else attempt
        same = (current.phase, current.tool, current.attempt) == (phase, tool, attempt)
        self._in_flight[job] = replace(
            current,
            phase=phase,
            tool=tool,
            arguments=arguments,
            chars=chars,
            attempt=attempt,
            since_ts=current.since_ts if same else ts,
        )

    def _add(self, series: deque[tuple[float, int]], ts: float, amount: int) -> None:
        series.append((ts, amount))
        # Only the window is kept; events from several writers may be slightly out of order.
        horizon = (self.last_ts or ts) - self.window_s
        while series and series[0][0] < horizon:
            series.popleft()

    def snapshot(self, now: float | None = None) -> Snapshot:
        """The numbers as of `now` (default: the newest event's time)."""
        now = now if now is not None else (self.last_ts or 0.0)
        span = min(self.window_s, now - self.first_ts) if self.first_ts is not None else 0.0
        latest = None
        if self._latest_run is not None:
            run = self._runs[self._latest_run]
            latest = RunProgress(self._latest_run, run.jobs, run.done, run.cached, run.finished)
        ordered = sorted(self._latencies)
        latency = (
            Latency(
                len(ordered),
                percentile(ordered, 50),
                percentile(ordered, 95),
                percentile(ordered, 99),
            )
            if ordered
            else None
        )
        return Snapshot(
            now=now,
            events=self.events,
            runs=len(self._runs),
            latest=latest,
            queued=len(self._queued),
            in_flight=len(self._in_flight),
            window_s=span,
            jobs_per_s=_rate(self._jobs, now, span),
            requests_per_s=_rate(self._requests, now, span),
            tokens_per_s=_rate(self._tokens, now, span),
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            requests=self.requests,
            latency=latency,
            agents={
                name: AgentCounts(
                    {status: tally.statuses[status] for status in STATUSES},
                    tally.cached,
                    tally.findings,
                )
                for name, tally in sorted(self._agents.items())
            },
            problems=list(reversed(self._problems)),
            tool_failures=self.tool_failures,
            bad_calls=self.bad_calls,
            unreadable=self.unreadable,
            rated_replies=self.rated_replies,
            low_confidence=self.low_confidence,
            resamples=self.resamples,
            activity=list(self._in_flight.values())[: self.activity_rows],
            activity_more=max(0, len(self._in_flight) - self.activity_rows),
        )


def _rate(series: deque[tuple[float, int]], now: float, span: float) -> float:
    """Amount per second over the `span` seconds up to `now` (both ends included)."""
    if span <= 0:
        return 0.0
    return sum(amount for ts, amount in series if now - span <= ts <= now) / span


# --------------------------------------------------------------------------- rendering
