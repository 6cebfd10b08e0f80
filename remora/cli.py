"""Command line: parse flags, build the config, call the orchestrator, render, exit code."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from remora import __version__
from remora.agents.registry import agent_entries, describe_definition, select_agents
from remora.apply import apply_changes, combined_patch
from remora.atomic import write_text_atomic
from remora.config import LoadedSettings, deep_merge, load_settings, parse_override, render_settings
from remora.discovery import Discovery, DiscoveryError, discover_nodes
from remora.models.openai_client import SERVER_DOCS, OpenAIChatModel
from remora.orchestrator import plan_jobs, run_jobs
from remora.protocol.messages import ModelError
from remora.report.json import render_json
from remora.report.progress import JobProgress
from remora.report.table import render_table
from remora.results import JobResult, JobStatus, RunSummary
from remora.tool_commands import check_tools, find_node, find_tool, parse_arguments, run_tool
from remora.yamlfile import UserInputError

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def stdout_console() -> Console:
    """Pipes get wide lines: a wrapped table in a CI log helps nobody."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def warn(message: str) -> None:
    stderr.print(f"[yellow]remora: warning:[/] {escape(message)}")


def fail(message: str) -> int:
    stderr.print(f"[red]remora: error:[/] {escape(message)}")
    return EXIT_ERROR


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
        "-c",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting, e.g. -c runner.max_turns=5 (repeatable)",
    )

    analyze = commands.add_parser(
        "analyze",
        parents=[config_flags],
        help="run the agents over every node of the given paths",
        description="Run every enabled agent on every file, class, function and method found "
        "under PATH. Exit code: 0 no findings, 1 findings or unfinished agents, 2 errors.",
    )
    analyze.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    analyze.add_argument("--agents", metavar="A,B", help="run only these agents (comma-separated)")
    analyze.add_argument(
        "--format", choices=["table", "json"], default="table", help="report format"
    )
    analyze.add_argument(
        "--output", "-o", type=Path, metavar="FILE", help="write the report to FILE"
    )
    analyze.add_argument("--base-url", metavar="URL", help="OpenAI-compatible server URL")
    analyze.add_argument("--model", metavar="NAME", help="served model name")
    analyze.add_argument(
        "--concurrency", type=int, metavar="N", help="jobs in flight at once (default 64)"
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
        "--keep-workspaces",
        action="store_true",
        help="keep each job's workspace directory (for debugging tools); paths in the report",
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
    try:
        if args.command == "nodes":
            return cmd_nodes(args)
        loaded = load_settings(args.config, cli=cli_settings(args))
        if args.command == "config":
            source = loaded.config_file or "no config file; defaults"
            stderr.print(f"remora: configuration from {escape(str(source))}")
            sys.stdout.write(render_settings(loaded.settings, args.format))
            return EXIT_OK
        if args.command == "list-agents":
            return cmd_list_agents(args, loaded)
        if args.command == "tool":
            return (
                cmd_tool_check(args, loaded)
                if args.tool_command == "check"
                else cmd_tool_run(args, loaded)
            )
        return cmd_analyze(args, loaded)
    except UserInputError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        stderr.print("remora: interrupted; nothing was written")
        return EXIT_INTERRUPTED


def cli_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Flags as a settings tree: the top layer of the configuration."""
    tree: dict[str, Any] = {}
    for item in args.overrides:
        tree = deep_merge(tree, parse_override(item))
    flags = {
        ("server", "base_url"): getattr(args, "base_url", None),
        ("server", "model"): getattr(args, "model", None),
        ("concurrency",): getattr(args, "concurrency", None),
    }
    for path, value in flags.items():
        if value is not None:
            node = tree
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = value
    return tree


def discover(paths: list[Path]) -> tuple[Discovery, Path]:
    root = project_root(paths)
    try:
        found = discover_nodes(paths, root=root)
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
        return EXIT_OK
    table = Table(show_edge=False, pad_edge=False)
    for column in ("file", "lines", "type", "qualified name"):
        table.add_column(column)
    for node in found.nodes:
        lines = f"{node.start_line}-{node.end_line}"
        table.add_row(escape(node.file), lines, node.type.value, escape(node.qualified_name))
    stdout_console().print(table)
    stderr.print(f"{len(found.nodes)} nodes in {len(found.files)} files")
    return EXIT_OK


def cmd_list_agents(args: argparse.Namespace, loaded: LoadedSettings) -> int:
    rows = []
    for entry in agent_entries(loaded):
        description, tools = describe_definition(entry.path)
        rows.append(
            {
                "name": entry.name,
                "enabled": entry.enabled,
                "bundled": entry.bundled,
                "description": description,
                "tools": tools,
                "definition": str(entry.path),
            }
        )
    if args.format == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return EXIT_OK
    table = Table(show_edge=False, pad_edge=False)
    for column in ("agent", "enabled", "source", "tools", "description"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            escape(str(row["name"])),
            "yes" if row["enabled"] else "no",
            "bundled" if row["bundled"] else escape(str(row["definition"])),
            escape(", ".join(row["tools"])),  # type: ignore[arg-type]
            escape(str(row["description"])),
        )
    stdout_console().print(table)
    return EXIT_OK


def cmd_analyze(args: argparse.Namespace, loaded: LoadedSettings) -> int:
    settings = loaded.settings
    names = [name.strip() for name in (args.agents or "").split(",") if name.strip()]
    agents = select_agents(loaded, names or None)
    if not agents:
        return fail("no agents enabled; enable one in remora.yaml or name one with --agents")
    found, root = discover(args.paths)
    jobs = plan_jobs(agents, found.nodes)
    if not settings.server.base_url:
        return fail(
            "no model server configured. Start one (e.g. vLLM serving "
            f"{settings.server.model}) and pass --base-url http://127.0.0.1:8000/v1, or set "
            f"server.base_url in remora.yaml or REMORA_SERVER__BASE_URL; see {SERVER_DOCS}"
        )
    if not jobs:
        warn("no nodes matched the enabled agents; nothing to analyse")

    async def analyze() -> list[JobResult]:
        model = OpenAIChatModel(settings.server)
        try:
            served = await model.list_models()
            missing = sorted({agent.model for agent in agents} - set(served))
            if served and missing:
                raise UserInputError(
                    f"the server at {settings.server.base_url} does not serve "
                    f"{', '.join(missing)}; it serves: {', '.join(served)}. Set server.model "
                    "(--model) or agents.<name>.model to one of those"
                )
            with JobProgress(len(jobs), enabled=stderr.is_terminal) as progress:
                return await run_jobs(
                    jobs,
                    model=model,
                    settings=settings,
                    root=root,
                    keep_workspaces=args.keep_workspaces,
                    on_result=progress.advance,
                )
        finally:
            await model.aclose()

    try:
        results = anyio.run(analyze)
    except ModelError as exc:
        return fail(exc.message)
    summary = RunSummary.of(len(found.nodes), results)
    report = (
        render_json(results, summary)
        if args.format == "json"
        else render_table(results, summary, color=args.output is None and sys.stdout.isatty())
    )
    changes = [
        change
        for result in results
        if result.status is JobStatus.SUCCESS
        for change in result.changes
    ]
    if args.output:
        write_text_atomic(args.output, report)
    elif not args.diff:
        sys.stdout.write(report)
    if args.diff:
        sys.stdout.write(combined_patch(changes))
    report_errors(results)
    exit_code = summary.exit_code()
    if args.fix and changes:
        applied = apply_changes(changes, root)
        for file in applied.applied:
            stderr.print(f"remora: fixed {escape(file)}")
        for conflict in applied.conflicts:
            warn(f"conflict: {conflict}")
        if applied.conflicts:
            exit_code = max(exit_code, EXIT_FINDINGS)
    return exit_code


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
    return EXIT_FINDINGS if problems else EXIT_OK


def cmd_tool_run(args: argparse.Namespace, loaded: LoadedSettings) -> int:
    (agent,) = select_agents(loaded, [args.agent])
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
    return EXIT_OK if outcome.ok else EXIT_FINDINGS


def report_errors(results: list[JobResult], limit: int = 20) -> None:
    """Jobs that errored, on stderr: the first `limit`, then a count (a dead server errors all)."""
    errored = [r for r in results if r.status is JobStatus.ERROR and r.error is not None]
    for result in errored[:limit]:
        assert result.error is not None
        warn(f"{result.node.id} [{result.agent}]: {result.error.code}: {result.error.message}")
    if len(errored) > limit:
        warn(f"... and {len(errored) - limit} more jobs with errors (see the report)")
