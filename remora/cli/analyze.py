"""`remora analyze`: flags to an `AnalyzeRequest`, the outcome to a report and an exit code."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from remora.analysis.request import AnalysisHooks, AnalyzeOutcome, AnalyzeRequest, Edits
from remora.analysis.run import analyze
from remora.analysis.shard import parse_shard
from remora.cli.console import fail, say, stderr, warn
from remora.cli.flags import agent_names, config_flags, engine_flags, load, run_flags
from remora.config.loading import LoadedSettings
from remora.dashboard.view import run_with_dashboard
from remora.edits.apply import combined_patch
from remora.edits.atomic import output_problem, write_text_atomic
from remora.errors import ExitCode, RunFailed
from remora.events import Events
from remora.findings.results import Change, JobResult, JobStatus
from remora.report.jsonl import JsonLinesStream
from remora.report.paths import as_shown, shown_path
from remora.report.progress import JobProgress, ProgressLines
from remora.report.render import render_report
from remora.report.text import TextOptions


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "analyze",
        parents=[config_flags(), run_flags(), engine_flags()],
        help="run the agents over every node of the given paths",
        description="Run every enabled agent on every file, class, function and method found "
        "under PATH. Exit code: 0 no findings, 1 findings or unfinished agents, 2 errors.",
    )
    parser.set_defaults(run=run)
    parser.add_argument(
        "--output", "-o", type=Path, metavar="FILE", help="write the report to FILE (atomically)"
    )
    parser.add_argument(
        "--exit-zero", action="store_true", help="exit 0 even with findings (errors still exit 2)"
    )
    parser.add_argument(
        "--exit-non-zero-on-fix",
        action="store_true",
        help="with --fix, exit 1 when a file was changed, even if nothing else remains",
    )
    changed = parser.add_mutually_exclusive_group()
    changed.add_argument(
        "--diff-base",
        metavar="REV",
        help="analyse only nodes whose lines differ from git revision REV (plus untracked "
        "files); findings elsewhere are not reported",
    )
    changed.add_argument(
        "--staged",
        action="store_true",
        help="analyse only nodes with staged changes (for pre-commit)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="FILE",
        help="report only findings not in FILE; when FILE does not exist, record the current "
        "findings in it and report none",
    )
    parser.add_argument(
        "--shard",
        metavar="I/N",
        help="run only shard I of N (1-based); N CI jobs with I = 1..N cover every job once",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the result cache"
    )
    parser.add_argument(
        "--retry-not-done",
        action="store_true",
        help="ask again the jobs the result cache holds as not done (every finished job is "
        "cached, so without it a second run on an unchanged tree asks the model nothing)",
    )
    edits = parser.add_mutually_exclusive_group()
    edits.add_argument(
        "--fix",
        action="store_true",
        help="apply the changes of successful jobs to your files (atomically; a file that "
        "changed since an agent read it is reported as a conflict and left alone)",
    )
    edits.add_argument(
        "--diff",
        action="store_true",
        help="print the combined patch of all changes to stdout instead of the report; "
        "write nothing (edits a tool suggested but did not make, such as withheld docstring "
        "drafts, go to stderr)",
    )
    parser.add_argument(
        "--events",
        metavar="FILE",
        help="write the event stream (JSON Lines, docs/EVENTS.md) to FILE, or - for stderr",
    )
    parser.add_argument(
        "--events-payloads",
        action="store_true",
        help="include prompts, replies and tool outputs in events (cut to --events-payload-limit)",
    )
    parser.add_argument(
        "--events-payload-limit",
        type=int,
        default=2000,
        metavar="CHARS",
        help="longest payload kept in an event (default 2000 characters)",
    )
    parser.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="let agents apply fixes that may change behaviour (ruff's unsafe fixes); sets "
        "the option unsafe_fixes of every agent",
    )
    parser.add_argument(
        "--keep-workspaces",
        action="store_true",
        help="keep each job's last command directory (for debugging tools): the files the job "
        "read or wrote and what its last command left; paths in the report",
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        help="append every job's transcript (each prompt as the model saw it, what it wrote, "
        "the verified outcome) to DIR/AGENT.jsonl, for `remora train`; runs every job (no "
        "cache)",
    )
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="show a live dashboard on stderr while the analysis runs: jobs in flight, "
        "throughput, model latency, per-agent results, recent errors (see remora dashboard)",
    )


def request_from(args: argparse.Namespace) -> AnalyzeRequest:
    edits: Edits = "fix" if args.fix else "diff" if args.diff else "report"
    return AnalyzeRequest(
        paths=tuple(args.paths),
        agents=agent_names(args.agents),
        use_cache=not args.no_cache,
        retry_not_done=args.retry_not_done,
        diff_base=args.diff_base,
        staged=args.staged,
        baseline=args.baseline,
        shard=parse_shard(args.shard) if args.shard else None,
        edits=edits,
        unsafe_fixes=args.unsafe_fixes,
        keep_workspaces=args.keep_workspaces,
        record=args.record,
    )


@dataclass(frozen=True, kw_only=True)
class ReportOptions:
    """How a run is shown: the flags analyze and watch share, and analyze's own."""

    output_format: str = "text"
    statistics: bool = False
    output: Path | None = None
    diff: bool = False
    fix: bool = False
    exit_zero: bool = False
    exit_non_zero_on_fix: bool = False
    progress: bool = True
    """Progress on stderr: a bar on a terminal, elsewhere (CI) a line every 20 s."""


def options_from(args: argparse.Namespace) -> ReportOptions:
    return ReportOptions(
        output_format=args.output_format,
        statistics=args.statistics,
        output=args.output,
        diff=args.diff,
        fix=args.fix,
        exit_zero=args.exit_zero,
        exit_non_zero_on_fix=args.exit_non_zero_on_fix,
        # Progress lines in an event stream on stderr would be lines its reader (remora
        # dashboard) cannot read; the bar is for a person at a terminal.
        progress=not args.dashboard and (args.events != "-" or sys.stderr.isatty()),
    )


def run(args: argparse.Namespace) -> int:
    loaded = load(args)
    if args.output and (problem := output_problem(args.output)):
        return fail(f"cannot write the report to {problem}")  # before a long run, not after
    events = Events.to_target(
        args.events, payloads=args.events_payloads, payload_limit=args.events_payload_limit
    )
    request, options = request_from(args), options_from(args)

    async def work() -> int:
        code, _ = await analyze_and_report(request, options, loaded, events)
        return code

    try:
        if args.dashboard:
            return anyio.run(run_with_dashboard, work, events, stderr)
        return anyio.run(work)
    finally:
        events.close()


async def analyze_and_report(
    request: AnalyzeRequest, options: ReportOptions, loaded: LoadedSettings, events: Events
) -> tuple[int, AnalyzeOutcome | None]:
    """One run, its report written; the exit code and the outcome (None when the run failed).
    A coroutine: `remora watch` awaits it in its own event loop."""
    report = Report(options, root=request.root)
    try:
        outcome = await analyze(request, loaded, events=events, hooks=report.hooks())
    except RunFailed as exc:
        report.discard()
        return fail(str(exc)), None
    finally:
        report.stop_progress()
    tell_edits(options, outcome)
    return exit_code(options, outcome), outcome


class Report:
    """What the command line shows of one run: progress, the streamed or rendered report, the
    patch, and the lines about fixes."""

    def __init__(self, options: ReportOptions, *, root: Path) -> None:
        self.options = options
        self.root = root
        """The project root the results' paths are relative to (printed paths are not)."""
        streamed = options.output_format == "jsonl"
        self.stream = JsonLinesStream(options.output) if streamed else None
        self.progress: JobProgress | None = None
        self.lines: ProgressLines | None = None

    def hooks(self) -> AnalysisHooks:
        return AnalysisHooks(
            result=self.result,
            started=self.started,
            say=say,
            warn=warn,
            report=self.write,
            planned=self.planned,
            ended=self.ended,
        )

    def planned(self, jobs: dict[str, int]) -> None:
        if self.options.progress and not sys.stderr.isatty():
            self.lines = ProgressLines(jobs, stream=sys.stderr).start()

    def ended(self, result: JobResult) -> None:
        if self.lines is not None:
            self.lines.count(result)

    def started(self, pending: int) -> None:
        # rich takes a pipe for a terminal under FORCE_COLOR, which CI jobs often set: its bar
        # would fill the log with redraws. A real terminal only; the lines above serve the rest.
        enabled = self.options.progress and stderr.is_terminal and sys.stderr.isatty()
        self.progress = JobProgress(pending, enabled=enabled).__enter__()

    def result(self, result: JobResult) -> None:
        if self.stream is not None:
            self.stream.write(as_shown([result], self.root)[0])
        if self.progress is not None and not result.cached:
            self.progress.advance(result)

    def stop_progress(self) -> None:
        if self.progress is not None:
            self.progress.__exit__(None, None, None)
            self.progress = None
        if self.lines is not None:
            self.lines.stop()
            self.lines = None

    def discard(self) -> None:
        if self.stream is not None:
            self.stream.discard()

    def write(self, outcome: AnalyzeOutcome) -> None:
        """The report, before any fix: when it cannot be written, nothing is fixed."""
        self.stop_progress()
        options = self.options
        report_errors(as_shown(outcome.results, self.root))
        try:
            if self.stream is not None:
                self.stream.close(outcome.summary)
            else:
                text = render_report(
                    options.output_format, outcome.results, outcome.summary, outcome.agents,
                    outcome.root, text=TextOptions(statistics=options.statistics, fix=options.fix),
                )  # fmt: skip
                if options.output:
                    write_text_atomic(options.output, text)
                elif not options.diff:
                    sys.stdout.write(text)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            fixes = "; no fixes applied" if options.fix and outcome.changes else ""
            where = options.output or "stdout"
            raise RunFailed(f"cannot write the report to {where}: {reason}{fixes}") from exc
        if options.diff:
            sys.stdout.write(combined_patch(outcome.changes))
            suggested, count = suggested_edits(outcome)
            if suggested:  # on stderr: the patch on stdout stays what --fix would apply
                say(f"{count}, not made (take them by hand):")
                sys.stderr.write(combined_patch(suggested))


def suggested_edits(outcome: AnalyzeOutcome) -> tuple[list[Change], str]:
    """The edits tools suggested but did not make (withheld drafts), and how many in words."""
    suggested = [change for result in outcome.results for change in result.suggestions]
    return suggested, f"{len(suggested)} suggested edit{'' if len(suggested) == 1 else 's'}"


def exit_code(options: ReportOptions, outcome: AnalyzeOutcome) -> int:
    """ruff's contract for the outcome, with what --fix did (a conflict is something to look
    at; a file that could not be written, an error) and --exit-zero, --exit-non-zero-on-fix."""
    code = outcome.summary.exit_code()
    applied = outcome.applied
    if applied is not None:
        if applied.conflicts or (applied.applied and options.exit_non_zero_on_fix):
            code = max(code, ExitCode.FINDINGS)
        if applied.failed:
            code = ExitCode.ERROR
    if options.exit_zero and code == ExitCode.FINDINGS:
        return ExitCode.OK
    return code


def tell_edits(options: ReportOptions, outcome: AnalyzeOutcome) -> None:
    """On stderr: the files --fix wrote (or could not), else where edits not applied are."""
    applied = outcome.applied
    if applied is not None:
        for file in applied.applied:
            say(f"fixed {shown_path(file, outcome.root)}")
        for conflict in applied.conflicts:
            warn(f"conflict: {conflict}")
        for failure in applied.failed:
            fail(f"could not write {failure}")
    elif outcome.changes and not options.diff and not says_next(options):
        # The report says "docstring written": written in the job's workspace, not in the file.
        files = len({change.file for change in outcome.changes})
        noun = "file" if files == 1 else "files"
        say(f"edits to {files} {noun} not applied: --diff shows them, --fix applies them")
    suggested, count = suggested_edits(outcome)
    if suggested and not options.diff and not says_next(options):
        say(f"{count} not made: --diff shows them")


def says_next(options: ReportOptions) -> bool:
    """Whether the report itself says what to do next (the text and table reports on stdout);
    else stderr does."""
    return options.output_format in ("text", "table") and options.output is None


def report_errors(results: list[JobResult], limit: int = 20) -> None:
    """Jobs that errored, on stderr: the first `limit`, then a count (a dead server errors all)."""
    errored = [r for r in results if r.status is JobStatus.ERROR and r.error is not None]
    for result in errored[:limit]:
        assert result.error is not None
        warn(f"{result.node.id} [{result.agent}]: {result.error.code}: {result.error.message}")
    if len(errored) > limit:
        warn(f"... and {len(errored) - limit} more jobs with errors (see the report)")
