"""Command line: parse flags, build the config, call the orchestrator, render, exit code."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from remora import __version__
from remora.agents.definition import Agent
from remora.agents.registry import agent_entries, describe_definition, select_agents
from remora.agents.requirements import check_requirements, unmet
from remora.apply import apply_changes, combined_patch
from remora.atomic import output_problem, write_text_atomic
from remora.baseline import Baseline
from remora.cache import ResultCache, cache_dir_problem, clean
from remora.changed import ChangedLines, changed_lines, touches
from remora.config import (
    LoadedSettings,
    ModelProfileName,
    deep_merge,
    load_settings,
    parse_override,
    render_settings,
)
from remora.dashboard import cmd_dashboard, run_with_dashboard
from remora.discovery import Discovery, DiscoveryError, discover_nodes
from remora.errors import ExitCode, UserInputError
from remora.events import Events
from remora.models.engine import server_model
from remora.models.local import INSTALL_HINT, LocalChatModel
from remora.models.openai_client import SERVER_DOCS
from remora.models.resolve import (
    models_dir,
    open_local_model,
    pull_functiongemma,
    select_engine,
)
from remora.models.router import Replica, ReplicaRouter
from remora.orchestrator import Job, emit_finished, job_id, plan_jobs, run_jobs
from remora.protocol.messages import ModelError
from remora.report.jsonl import JsonLinesStream
from remora.report.progress import JobProgress
from remora.report.render import FORMATS, render_report
from remora.results import JobResult, JobStatus, RunSummary
from remora.server_check import check_server, render_text
from remora.shard import parse_shard, select_shard
from remora.signals import Terminated, exit_code, terminate_as_interrupt
from remora.suppressions import Suppressions
from remora.tool_commands import check_tools, find_node, find_tool, parse_arguments, run_tool

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def stdout_console() -> Console:
    """Pipes get wide lines: a wrapped table in a CI log helps nobody."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def warn(message: str) -> None:
    stderr.print(f"[yellow]remora: warning:[/] {escape(message)}")


def fail(message: str) -> int:
    stderr.print(f"[red]remora: error:[/] {escape(message)}")
    return ExitCode.ERROR


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remora",
        description="Run small local language models as code-analysis agents over Python code.",
    )
    parser.add_argument("--version", action="version", version=f"remora {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    config_flags = argparse.ArgumentParser(add_help=False)
    config_flags.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="config file (default: nearest remora.yaml, or [tool.remora] in pyproject.toml)",
    )
    config_flags.add_argument(
        "--isolated",
        action="store_true",
        help="ignore all configuration files (environment and flags still apply)",
    )
    config_flags.add_argument(
        "-c",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting, e.g. -c runner.max_turns=5 (repeatable)",
    )

    # What analyze and watch share: what to analyse, with which agents and model, how to report.
    run_flags = argparse.ArgumentParser(add_help=False)
    run_flags.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    run_flags.add_argument(
        "--agents", metavar="A,B", help="run only these agents (comma-separated)"
    )
    run_flags.add_argument(
        "--output-format",
        "--format",
        dest="output_format",
        choices=FORMATS,
        default="table",
        help="report format: table, json, jsonl (streamed, one object per job, then a "
        "summary), sarif (GitHub code scanning), github (workflow annotations)",
    )
    run_flags.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="cache folder (default .remora_cache; also cache_dir, REMORA_CACHE_DIR)",
    )
    run_flags.add_argument(
        "--base-url",
        action="append",
        metavar="URL",
        help="OpenAI-compatible server URL; repeat it to spread jobs over several replicas",
    )
    run_flags.add_argument("--model", metavar="NAME", help="served model name")
    run_flags.add_argument(
        "--concurrency", type=int, metavar="N", help="jobs in flight at once (default 64)"
    )

    analyze = commands.add_parser(
        "analyze",
        parents=[config_flags, run_flags],
        help="run the agents over every node of the given paths",
        description="Run every enabled agent on every file, class, function and method found "
        "under PATH. Exit code: 0 no findings, 1 findings or unfinished agents, 2 errors.",
    )
    analyze.add_argument(
        "--output", "-o", type=Path, metavar="FILE", help="write the report to FILE (atomically)"
    )
    analyze.add_argument(
        "--exit-zero", action="store_true", help="exit 0 even with findings (errors still exit 2)"
    )
    analyze.add_argument(
        "--exit-non-zero-on-fix",
        action="store_true",
        help="with --fix, exit 1 when a file was changed, even if nothing else remains",
    )
    changed = analyze.add_mutually_exclusive_group()
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
    analyze.add_argument(
        "--baseline",
        type=Path,
        metavar="FILE",
        help="report only findings not in FILE; when FILE does not exist, record the current "
        "findings in it and report none",
    )
    analyze.add_argument(
        "--shard",
        metavar="I/N",
        help="run only shard I of N (1-based); N CI jobs with I = 1..N cover every job once",
    )
    analyze.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the result cache"
    )
    analyze.add_argument(
        "--engine",
        choices=["auto", "server", "local"],
        help="server, local (the embedded CPU engine) or auto (default: the server when a "
        "base URL is set, else the embedded engine when installed)",
    )
    analyze.add_argument(
        "--model-path", type=Path, metavar="FILE", help="GGUF file for the embedded engine"
    )
    edits = analyze.add_mutually_exclusive_group()
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
        "write nothing",
    )
    analyze.add_argument(
        "--events",
        metavar="FILE",
        help="write the event stream (JSON Lines, docs/EVENTS.md) to FILE, or - for stderr",
    )
    analyze.add_argument(
        "--events-payloads",
        action="store_true",
        help="include prompts, replies and tool outputs in events (cut to --events-payload-limit)",
    )
    analyze.add_argument(
        "--events-payload-limit",
        type=int,
        default=2000,
        metavar="CHARS",
        help="longest payload kept in an event (default 2000 characters)",
    )
    analyze.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="let agents apply fixes that may change behaviour (ruff's unsafe fixes); sets "
        "the option unsafe_fixes of every agent",
    )
    analyze.add_argument(
        "--keep-workspaces",
        action="store_true",
        help="keep each job's workspace directory (for debugging tools); paths in the report",
    )
    analyze.add_argument(
        "--dashboard",
        action="store_true",
        help="show a live dashboard on stderr while the analysis runs: jobs in flight, "
        "throughput, model latency, per-agent results, recent errors (see remora dashboard)",
    )

    watch = commands.add_parser(
        "watch",
        parents=[config_flags, run_flags],
        help="analyse, then re-analyse what changes, until Ctrl-C",
        description="Analyse PATH like analyze, then watch it: after each burst of changes to "
        "Python files, run again through the result cache, so only changed nodes reach the "
        "model. The report goes to stdout after every run, a summary line to stderr. "
        "Ctrl-C stops (exit 130).",
    )
    watch.add_argument(
        "--events",
        metavar="FILE",
        help="append the event stream of every run to FILE (follow it with remora dashboard)",
    )
    watch.add_argument(
        "--debounce",
        type=int,
        default=200,
        metavar="MS",
        help="wait until files have been quiet for MS milliseconds before a run (default 200)",
    )
    watch.add_argument(
        "--max-runs",
        type=int,
        metavar="N",
        help="exit after N runs, the first full one included, with the last run's exit code",
    )

    dashboard = commands.add_parser(
        "dashboard",
        help="live view of an event stream: progress, throughput, latency, errors",
        description="Follow an event stream (remora analyze --events FILE) as it grows and "
        "show jobs in flight, throughput, model latency percentiles, per-agent results and "
        "the most recent errors. Ctrl-C stops.",
    )
    dashboard.add_argument(
        "--events",
        default="-",
        metavar="FILE",
        help="the event file to follow (default -: standard input)",
    )
    dashboard.add_argument(
        "--no-follow",
        action="store_true",
        help="read what is there, print the dashboard once and exit",
    )
    dashboard.add_argument(
        "--window",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="throughput over the last SECONDS of events (default 10)",
    )

    nodes = commands.add_parser(
        "nodes", help="list the nodes discovery finds", description="List discovered nodes."
    )
    nodes.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    nodes.add_argument("--format", choices=["table", "json"], default="table")

    agents = commands.add_parser(
        "list-agents",
        parents=[config_flags],
        help="list bundled and configured agents",
        description="List bundled and configured agents with their tools.",
    )
    agents.add_argument("--format", choices=["table", "json"], default="table")

    tool = commands.add_parser(
        "tool", help="check and debug agents' tool scripts", description="Tool script commands."
    )
    tool_commands = tool.add_subparsers(dest="tool_command", required=True, metavar="ACTION")
    check = tool_commands.add_parser(
        "check",
        parents=[config_flags],
        help="type-check every tool script of the agents",
        description="Validate each tool's header and type-check its script against the host "
        "functions and its declared inputs. Exit 1 when a problem is found.",
    )
    check.add_argument("agents", nargs="*", metavar="AGENT", help="default: every known agent")
    run = tool_commands.add_parser(
        "run",
        parents=[config_flags],
        help="run one tool on one node, as the runner would",
        description="Run one tool exactly as the runner would (same injected context, sandbox "
        "and limits, a fresh workspace). The result goes to stdout, the workspace diff to "
        "stderr. Exit 1 when the tool fails.",
    )
    run.add_argument("agent", metavar="AGENT")
    run.add_argument("tool", metavar="TOOL")
    run.add_argument(
        "--node", required=True, metavar="FILE::QUALNAME", help="e.g. src/app.py::Cart.total"
    )
    run.add_argument("--args", default="{}", metavar="JSON", help="the tool's arguments")
    run.add_argument(
        "--format",
        choices=["json", "text"],
        default="json",
        help="json: the outcome; text: the tool message the model would read",
    )

    commands.add_parser(
        "clean",
        parents=[config_flags],
        help="remove the cache folder",
        description="Remove the cache folder (only one tagged with CACHEDIR.TAG).",
    ).add_argument("--cache-dir", type=Path, metavar="DIR", help="default: the configured one")

    models = commands.add_parser(
        "models", help="models for the embedded engine", description="Embedded engine models."
    )
    models_actions = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    pull = models_actions.add_parser(
        "pull",
        parents=[config_flags],
        help="download FunctionGemma for the embedded engine",
        description="Download a FunctionGemma GGUF from Hugging Face into Remora's model folder, "
        "checking its sha256 (local.hf_repo and local.hf_file choose the file).",
    )
    pull.add_argument("name", choices=["functiongemma"])

    check = commands.add_parser(
        "check-server",
        parents=[config_flags],
        help="check that the model server is set up for Remora",
        description="Connect, list models and adapters, check every agent's model is served, "
        "make one real tool-call round trip, probe tool_choice=required, and say which "
        "runner.model_profile to use. Exit 0 when all is well, 2 otherwise.",
    )
    check.add_argument(
        "--base-url", action="append", metavar="URL", help="server URL (repeat for replicas)"
    )
    check.add_argument("--model", metavar="NAME", help="served model name")
    check.add_argument("--agents", metavar="A,B", help="check only these agents' models")

    config = commands.add_parser(
        "config",
        parents=[config_flags],
        help="print the merged configuration",
        description="Print the configuration after merging file, environment and flags.",
    )
    config.add_argument("--format", choices=["yaml", "json"], default="yaml")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with terminate_as_interrupt():
        try:
            return run_command(args)
        except KeyboardInterrupt as interrupt:
            what = "terminated" if isinstance(interrupt, Terminated) else "interrupted"
            stderr.print(f"remora: {what}; no report written")
            return exit_code(interrupt)
        except Exception as exc:  # a bug or an unforeseen OS error: 2, never 1 ("findings")
            while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]
            if os.environ.get("REMORA_DEBUG"):
                import traceback

                traceback.print_exception(exc)
            if isinstance(exc, OSError) and exc.strerror:
                what = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
            else:
                what = f"{type(exc).__name__}: {exc}"
            hint = "" if os.environ.get("REMORA_DEBUG") else " (REMORA_DEBUG=1 shows where)"
            return fail("internal error: " + " ".join(what.split()) + hint)


def run_command(args: argparse.Namespace) -> int:
    try:
        if args.command == "nodes":
            return cmd_nodes(args)
        if args.command == "dashboard":
            return cmd_dashboard(args)
        start = args.paths[0] if getattr(args, "paths", None) else None
        loaded = load_settings(
            args.config, cli=cli_settings(args), cwd=start, isolated=args.isolated
        )
        if args.command == "config":
            source = loaded.config_file or "no config file; defaults"
            stderr.print(f"remora: configuration from {escape(str(source))}")
            sys.stdout.write(render_settings(loaded.settings, args.format))
            return ExitCode.OK
        if args.command == "list-agents":
            return cmd_list_agents(args, loaded)
        if args.command == "models":
            return cmd_models_pull(loaded)
        if args.command == "check-server":
            return cmd_check_server(args, loaded)
        if args.command == "clean":
            return cmd_clean(loaded)
        if args.command == "tool":
            return (
                cmd_tool_check(args, loaded)
                if args.tool_command == "check"
                else cmd_tool_run(args, loaded)
            )
        if args.command == "watch":
            from remora.watch import cmd_watch  # watchfiles is only imported to watch

            return cmd_watch(args, loaded)
        if getattr(args, "output", None) and (problem := output_problem(args.output)):
            return fail(f"cannot write the report to {problem}")  # before a long run, not after
        return cmd_analyze(args, loaded)
    except UserInputError as exc:
        return fail(str(exc))


def cli_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Flags as a settings tree: the top layer of the configuration."""
    tree: dict[str, Any] = {}
    for item in args.overrides:
        tree = deep_merge(tree, parse_override(item))
    flags = {
        ("server", "base_url"): getattr(args, "base_url", None),
        ("server", "model"): getattr(args, "model", None),
        ("concurrency",): getattr(args, "concurrency", None),
        ("cache_dir",): getattr(args, "cache_dir", None),
        ("engine",): getattr(args, "engine", None),
        ("local", "model_path"): (
            args.model_path.resolve() if getattr(args, "model_path", None) else None
        ),
    }
    for path, value in flags.items():
        if value is not None:
            node = tree
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = value
    return tree


def discover(paths: list[Path], cache: Path | None = None) -> tuple[Discovery, Path]:
    root = project_root(paths)
    try:
        found = discover_nodes(paths, root=root, cache_dir=cache)
    except DiscoveryError as exc:
        raise UserInputError(str(exc)) from exc
    for warning in found.warnings:
        warn(f"{warning.file}: {warning.message}")
    return found, root


def project_root(paths: list[Path]) -> Path:
    """The working directory, unless the paths lie elsewhere: then their common folder."""
    cwd = Path.cwd().resolve()
    resolved = [path.resolve() for path in paths]
    if all(path.is_relative_to(cwd) for path in resolved):
        return cwd
    common = Path(os.path.commonpath(resolved))
    return common if common.is_dir() else common.parent


def cmd_nodes(args: argparse.Namespace) -> int:
    found, _ = discover(args.paths)
    if args.format == "json":
        sys.stdout.write(json.dumps([node.public_fields() for node in found.nodes], indent=2))
        sys.stdout.write("\n")
        return ExitCode.OK
    table = Table(show_edge=False, pad_edge=False)
    for column in ("file", "lines", "type", "qualified name"):
        table.add_column(column)
    for node in found.nodes:
        lines = f"{node.start_line}-{node.end_line}"
        table.add_row(escape(node.file), lines, node.type.value, escape(node.qualified_name))
    stdout_console().print(table)
    stderr.print(f"{len(found.nodes)} nodes in {len(found.files)} files")
    return ExitCode.OK


def cmd_list_agents(args: argparse.Namespace, loaded: LoadedSettings) -> int:
    rows = []
    for entry in agent_entries(loaded):
        definition, tools = describe_definition(entry.path)
        requires = definition.requires
        rows.append(
            {
                "name": entry.name,
                "enabled": entry.enabled,
                "bundled": entry.bundled,
                "description": definition.description,
                "tools": tools,
                "definition": str(entry.path),
                "requires": [*requires.programs, *requires.python_modules],
                "unmet": unmet(requires, loaded.settings.sandbox.commands),
            }
        )
    if args.format == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return ExitCode.OK
    table = Table(show_edge=False, pad_edge=False)
    for column in ("agent", "enabled", "source", "tools", "requires", "description"):
        table.add_column(column, overflow="fold")
    for row in rows:
        needs = ", ".join(row["requires"]) or "-"  # type: ignore[arg-type]
        table.add_row(
            escape(str(row["name"])),
            "yes" if row["enabled"] else "no",
            "bundled" if row["bundled"] else escape(str(row["definition"])),
            escape(", ".join(row["tools"])),  # type: ignore[arg-type]
            escape(f"{needs}: " + ("; ".join(row["unmet"]) if row["unmet"] else "met")),  # type: ignore[arg-type]
            escape(str(row["description"])),
        )
    stdout_console().print(table)
    return ExitCode.OK


def cmd_analyze(args: argparse.Namespace, loaded: LoadedSettings) -> int:
    events = Events.to_target(
        args.events, payloads=args.events_payloads, payload_limit=args.events_payload_limit
    )
    try:
        if args.dashboard:
            work = functools.partial(analyze_async, args, loaded, events)
            return anyio.run(run_with_dashboard, work, events, stderr)
        return analyze(args, loaded, events)
    finally:
        events.close()


def analyze(args: argparse.Namespace, loaded: LoadedSettings, events: Events) -> int:
    return anyio.run(analyze_async, args, loaded, events)


async def analyze_async(args: argparse.Namespace, loaded: LoadedSettings, events: Events) -> int:
    """One run; a coroutine so that `remora watch` can await it in its own event loop."""
    started = time.perf_counter()
    settings = loaded.settings
    names = [name.strip() for name in (args.agents or "").split(",") if name.strip()]
    agents = select_agents(loaded, names or None)
    if not agents:
        return fail("no agents enabled; enable one in remora.yaml or name one with --agents")
    check_requirements(agents, settings.sandbox.commands)
    for agent in agents if args.unsafe_fixes else []:
        agent.options["unsafe_fixes"] = True
    urls = settings.server.base_urls
    local_model = None
    if select_engine(settings.engine, base_url=urls[0] if urls else None) == "local":
        try:
            local_model = use_local_engine(loaded, agents)
        except ModelError as exc:
            return fail(exc.message)
    cache_folder = None if args.no_cache else cache_dir(loaded)
    if cache_folder is not None and (problem := cache_dir_problem(cache_folder)):
        return fail(problem)  # before any work, not on the first write
    found, root = discover(args.paths, cache_folder)
    events.emit(
        "discovery_done",
        files=len(found.files),
        nodes=len(found.nodes),
        warnings=len(found.warnings),
        duration_s=time.perf_counter() - started,
    )
    # Ctrl-C during discovery (blocking) is delivered here, before anything is written.
    await anyio.lowlevel.checkpoint()
    if not found.nodes:
        if found.warnings:
            return fail("discovery failed: no file could be read (see the warnings above)")
        warn("no Python files found; nothing to analyse")
    nodes = found.nodes
    changed = None
    if args.diff_base or args.staged:
        changed = changed_lines(root, base=args.diff_base, staged=args.staged)
        nodes = [node for node in nodes if touches(node, changed)]
    jobs = plan_jobs(agents, nodes)
    if args.shard:
        index, total = parse_shard(args.shard)
        jobs = select_shard(jobs, [f"{a.name}::{n.id}" for a, n in jobs], index, total)
    if found.nodes and not jobs:
        warn("no nodes matched the enabled agents (or the changed lines); nothing to analyse")

    cache = (
        None
        if cache_folder is None
        else ResultCache(cache_folder, settings, settings.cache_max_mb, warn=warn)
    )
    known = {i: hit for i, (a, n) in enumerate(jobs) if cache and (hit := cache.get(a, n, root))}
    pending = [job for i, job in enumerate(jobs) if i not in known]
    baseline = Baseline.load(args.baseline) if args.baseline else None
    stream = JsonLinesStream(args.output) if args.output_format == "jsonl" else None
    suppressions = Suppressions(found.nodes, root)

    def finish(result: JobResult) -> None:
        """Per result, as it arrives: filters first, so a streamed line is final."""
        suppressions.apply(result)
        if changed is not None:
            result.findings = [f for f in result.findings if f.line in _lines(result, changed)]
        if baseline is not None:
            baseline.filter(result)
        if stream is not None:
            stream.write(result)

    events.emit(
        "run_started",
        paths=[str(path) for path in args.paths],
        agents=[agent.name for agent in agents],
        jobs=len(jobs),
        cached=len(known),
        concurrency=settings.concurrency,
    )
    results_by_index: dict[int, JobResult] = {}
    for index, hit in known.items():
        finish(hit)
        agent = jobs[index][0]
        emit_finished(events.for_job(job_id(agent, hit.node), hit.node.id, agent.name), hit)
        results_by_index[index] = hit
    if pending:
        if local_model is None and not settings.server.base_url:
            return fail(
                "no model server configured and no embedded engine installed. Either start a "
                f"server (e.g. vLLM serving {settings.server.model}) and pass --base-url "
                "http://127.0.0.1:8000/v1 (or server.base_url, REMORA_SERVER__BASE_URL; see "
                f"{SERVER_DOCS}), or install the embedded CPU engine: {INSTALL_HINT} "
                "(docs/LOCAL_ENGINE.md)"
            )
        if cache is not None:
            cache.prepare()
        try:
            fresh = await run_pending(
                pending,
                agents,
                loaded,
                root,
                cache,
                args.keep_workspaces,
                finish,
                events,
                progress=not args.dashboard,
                local_model=local_model,
            )
        except ModelError as exc:
            if stream is not None:
                stream.discard()
            return fail(exc.message)
        pending_indexes = [i for i in range(len(jobs)) if i not in known]
        results_by_index.update(zip(pending_indexes, fresh, strict=True))
    if cache is not None and pending:
        cache.evict()
    results = [results_by_index[i] for i in sorted(results_by_index)]
    # And Ctrl-C while jobs were answered from the cache, before the report is written.
    await anyio.lowlevel.checkpoint()
    if known:
        stderr.print(f"remora: {len(known)} of {len(jobs)} jobs answered from the cache")
    if baseline is not None:
        baseline.report(args.baseline, results, stderr)
    summary = RunSummary.of(len(nodes), results)

    report_errors(results)
    changes = [
        change
        for result in results
        if result.status is JobStatus.SUCCESS
        for change in result.changes
    ]
    try:
        if stream is not None:
            stream.close(summary)
        else:
            report = render_report(args.output_format, results, summary, agents, root)
            if args.output:
                write_text_atomic(args.output, report)
            elif not args.diff:
                sys.stdout.write(report)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        fixes = "; no fixes applied" if args.fix and changes else ""
        return fail(f"cannot write the report to {args.output or 'stdout'}: {reason}{fixes}")
    if args.diff:
        sys.stdout.write(combined_patch(changes))
    exit_code = summary.exit_code()
    if args.fix and changes:
        applied = apply_changes(changes, root)
        for file in applied.applied:
            stderr.print(f"remora: fixed {escape(file)}")
        for conflict in applied.conflicts:
            warn(f"conflict: {conflict}")
        for failure in applied.failed:
            fail(f"could not write {failure}")
        if applied.conflicts:
            exit_code = max(exit_code, ExitCode.FINDINGS)
        if applied.applied and args.exit_non_zero_on_fix:
            exit_code = max(exit_code, ExitCode.FINDINGS)
        if applied.failed:
            exit_code = ExitCode.ERROR
        events.emit("changes_applied", files=applied.applied, conflicts=applied.conflicts)
    events.emit(
        "run_finished", summary=summary.model_dump(), duration_s=time.perf_counter() - started
    )
    if args.exit_zero and exit_code == ExitCode.FINDINGS:
        return ExitCode.OK
    return exit_code


def _lines(result: JobResult, changed: ChangedLines) -> range | set[int]:
    """Lines where findings of a changed-only run count: the job's node, if it changed."""
    node = result.node
    return range(node.start_line, node.end_line + 1) if touches(node, changed) else set()


async def run_pending(
    jobs: list[Job],
    agents: list[Agent],
    loaded: LoadedSettings,
    root: Path,
    cache: ResultCache | None,
    keep_workspaces: bool,
    finish: Callable[[JobResult], None],
    events: Events,
    *,
    progress: bool = True,
    local_model: LocalChatModel | None = None,
) -> list[JobResult]:
    settings = loaded.settings
    model: LocalChatModel | Replica
    if local_model is not None:
        model = local_model
        seconds = await local_model.load()
        stderr.print(f"remora: model loaded in {seconds:.1f} s")
    else:
        model = server_model(settings.server, connections=settings.concurrency)
    try:
        if not isinstance(model, LocalChatModel):  # the embedded engine answers to any name
            await check_served(model, agents)
        with JobProgress(len(jobs), enabled=progress and stderr.is_terminal) as bar:

            def on_result(result: JobResult) -> None:
                finish(result)
                bar.advance(result)

            return await run_jobs(
                jobs,
                model=model,
                settings=settings,
                root=root,
                keep_workspaces=keep_workspaces,
                cache=cache,
                events=events,
                on_result=on_result,
            )
    finally:
        await model.aclose()


async def check_served(model: Replica, agents: list[Agent]) -> None:
    """One request before any job: an unreachable server is one error, not one per job."""
    served = await model.list_models()
    if isinstance(model, ReplicaRouter):
        for replica in model.stats():
            if replica.down or replica.excluded:
                warn(f"replica {replica.base_url} skipped: {replica.last_error}")
    missing = sorted({agent.model for agent in agents} - set(served))
    if served and missing:
        raise UserInputError(
            f"the server at {model.base_url} does not serve {', '.join(missing)}; it serves: "
            f"{', '.join(served)}. Set server.model (--model) or agents.<name>.model to one of "
            "those"
        )


def use_local_engine(loaded: LoadedSettings, agents: list[Agent]) -> LocalChatModel:
    """Set the run up for the embedded engine: the model file (said once on stderr), its
    identity as every agent's model (so cached results never mix engines), the profile whose
    grammar forces a named submit_result, and a concurrency the engine can serve."""
    settings = loaded.settings
    model, resolved = open_local_model(settings.local, base_dir=loaded.base_dir)
    stderr.print(f"remora: {resolved.description}")
    for agent in agents:
        agent.model = resolved.identity
    if settings.runner.model_profile is ModelProfileName.AUTO:
        settings.runner = settings.runner.model_copy(
            update={"model_profile": ModelProfileName.FUNCTIONGEMMA_KIT}
        )
    if not any("concurrency" in layer for layer in loaded.layers.values()):
        settings.concurrency = model.recommended_concurrency
    return model


def cmd_models_pull(loaded: LoadedSettings) -> int:
    local = loaded.settings.local
    try:
        path = pull_functiongemma(
            models_dir(local.models_dir),
            repo=local.hf_repo,
            filename=local.hf_file,
            progress=stderr.is_terminal,
        )
    except ModelError as exc:
        return fail(exc.message)
    sys.stdout.write(f"{path}\n")
    return ExitCode.OK


def cmd_check_server(args: argparse.Namespace, loaded: LoadedSettings) -> int:
    server = loaded.settings.server
    if not server.base_urls:
        return fail(
            f"no server to check: pass --base-url or set server.base_url; see {SERVER_DOCS}"
        )
    names = [name.strip() for name in (args.agents or "").split(",") if name.strip()]
    agents = select_agents(loaded, names or None)
    report = anyio.run(
        functools.partial(
            check_server,
            server.base_urls,
            api_key=server.api_key.get_secret_value(),
            agent_models={agent.name: agent.model for agent in agents},
            request_timeout=server.timeout,
        )
    )
    sys.stdout.write(render_text(report))
    return ExitCode.OK if report.ok else ExitCode.ERROR


def cache_dir(loaded: LoadedSettings) -> Path:
    return loaded.base_dir / loaded.settings.cache_dir


def cmd_clean(loaded: LoadedSettings) -> int:
    directory = cache_dir(loaded)
    try:
        removed = clean(directory)
    except ValueError as exc:
        return fail(str(exc))
    stderr.print(f"remora: {'removed' if removed else 'no cache at'} {escape(str(directory))}")
    return ExitCode.OK


def cmd_tool_check(args: argparse.Namespace, loaded: LoadedSettings) -> int:
    names = args.agents or [entry.name for entry in agent_entries(loaded)]
    problems: list[str] = []
    agents = []
    for name in names:
        try:
            agents += select_agents(loaded, [name])
        except UserInputError as exc:
            problems.append(str(exc))
    problems += anyio.run(check_tools, agents)
    for problem in problems:
        sys.stdout.write(problem + "\n")
    tools = sum(len(agent.tools) for agent in agents)
    stderr.print(f"remora: checked {tools} tools of {len(agents)} agents: {len(problems)} problems")
    return ExitCode.FINDINGS if problems else ExitCode.OK


def cmd_tool_run(args: argparse.Namespace, loaded: LoadedSettings) -> int:
    (agent,) = select_agents(loaded, [args.agent])
    check_requirements([agent], loaded.settings.sandbox.commands)
    tool = find_tool(agent, args.tool)
    arguments = parse_arguments(tool, args.args)
    root = Path.cwd().resolve()
    node = find_node(args.node, root)
    outcome, workspace = anyio.run(
        functools.partial(
            run_tool, agent, tool, node, arguments, settings=loaded.settings, root=root
        )
    )
    try:
        if args.format == "json":
            sys.stdout.write(outcome.model_dump_json(indent=2) + "\n")
        else:
            sys.stdout.write(outcome.content() + "\n")
        for change in workspace.diff():
            stderr.out(change.diff, highlight=False, end="")
    finally:
        workspace.close()
    return ExitCode.OK if outcome.ok else ExitCode.FINDINGS


def report_errors(results: list[JobResult], limit: int = 20) -> None:
    """Jobs that errored, on stderr: the first `limit`, then a count (a dead server errors all)."""
    errored = [r for r in results if r.status is JobStatus.ERROR and r.error is not None]
    for result in errored[:limit]:
        assert result.error is not None
        warn(f"{result.node.id} [{result.agent}]: {result.error.code}: {result.error.message}")
    if len(errored) > limit:
        warn(f"... and {len(errored) - limit} more jobs with errors (see the report)")
