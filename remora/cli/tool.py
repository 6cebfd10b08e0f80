"""`remora tool check|run`: tool scripts checked, or one run by hand, without a model."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

import anyio

from remora.agents.registry import agent_entries, select_agents
from remora.analysis.requirements import check_requirements
from remora.cli.console import stderr
from remora.cli.flags import config_flags, load
from remora.errors import ExitCode, UserInputError
from remora.jobs.tool_commands import check_tools, find_node, find_tool, parse_arguments, run_tool
from remora.sandbox.interpreter import project_commands


def add_parser(commands: Any) -> None:
    tool = commands.add_parser(
        "tool", help="check and debug agents' tool scripts", description="Tool script commands."
    )
    actions = tool.add_subparsers(dest="tool_command", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        parents=[config_flags()],
        help="type-check every tool script of the agents",
        description="Validate each tool's header and type-check its script against the host "
        "functions its agent declares (host_functions: in agent.yaml) and its declared inputs. "
        "Exit 1 when a problem is found.",
    )
    check.set_defaults(run=run_check)
    check.add_argument("agents", nargs="*", metavar="AGENT", help="default: every known agent")
    run = actions.add_parser(
        "run",
        parents=[config_flags()],
        help="run one tool on one node, as the runner would",
        description="Run one tool exactly as the runner would (same injected context, sandbox "
        "and limits, a fresh workspace). The result goes to stdout, the workspace diff to "
        "stderr. Exit 1 when the tool fails.",
    )
    run.set_defaults(run=run_one)
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


def run_check(args: argparse.Namespace) -> int:
    loaded = load(args)
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


def run_one(args: argparse.Namespace) -> int:
    loaded = load(args)
    (agent,) = select_agents(loaded, [args.agent])
    tool = find_tool(agent, args.tool)
    arguments = parse_arguments(tool, args.args)
    root = Path.cwd().resolve()
    node = find_node(args.node, root)
    _, commands = project_commands(
        loaded.settings.sandbox.commands, root, trusted_project=loaded.project_trusted is not None
    )
    sandbox = loaded.settings.sandbox.model_copy(update={"commands": commands})
    settings = loaded.settings.model_copy(update={"sandbox": sandbox})
    check_requirements([agent], sandbox.commands)
    outcome, workspace = anyio.run(
        functools.partial(run_tool, agent, tool, node, arguments, settings=settings, root=root)
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
