"""What Remora sees of a project, without a model: `nodes`, `list-agents`, `config`, `clean`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from remora.agents.registry import agent_entries, describe_definition
from remora.analysis.plan import discover
from remora.analysis.request import project_root
from remora.analysis.requirements import unmet
from remora.cache.folder import cache_location, clean
from remora.cli.console import fail, stderr, stdout_console, warn
from remora.cli.flags import config_flags, load
from remora.config.loading import render_settings
from remora.errors import ExitCode
from remora.report.paths import shown_node


def add_nodes(commands: Any) -> None:
    nodes = commands.add_parser(
        "nodes", help="list the nodes discovery finds", description="List discovered nodes."
    )
    nodes.set_defaults(run=run_nodes)
    nodes.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    nodes.add_argument("--format", choices=["table", "json"], default="table")


def add_list_agents(commands: Any) -> None:
    agents = commands.add_parser(
        "list-agents",
        parents=[config_flags()],
        help="list installed and configured agents",
        description=(
            "List the agents Remora knows with their tools and where each came from: "
            "bundled with Remora, an installed package (the distribution's name), or the "
            "configuration (the definition's path)."
        ),
    )
    agents.set_defaults(run=run_list_agents)
    agents.add_argument("--format", choices=["table", "json"], default="table")


def add_clean(commands: Any) -> None:
    cleaning = commands.add_parser(
        "clean",
        parents=[config_flags()],
        help="remove the cache folder",
        description="Remove the cache folder: only a folder Remora made (not a symbolic "
        "link, tagged with Remora's own CACHEDIR.TAG, holding nothing but what Remora puts "
        "there). A cache folder the project's configuration names must lie inside the project.",
    )
    cleaning.set_defaults(run=run_clean)
    cleaning.add_argument(
        "--cache-dir", type=Path, metavar="DIR", help="default: the configured one"
    )


def add_config(commands: Any) -> None:
    config = commands.add_parser(
        "config",
        parents=[config_flags()],
        help="print the merged configuration",
        description="Print the configuration after merging file, environment and flags.",
    )
    config.set_defaults(run=run_config)
    config.add_argument("--format", choices=["yaml", "json"], default="yaml")


def run_nodes(args: argparse.Namespace) -> int:
    root = project_root(args.paths)
    found = discover(args.paths, root, None, warn)
    nodes = [shown_node(node, root) for node in found.nodes]
    if args.format == "json":
        sys.stdout.write(json.dumps([node.public_fields() for node in nodes], indent=2))
        sys.stdout.write("\n")
        return ExitCode.OK
    table = Table(show_edge=False, pad_edge=False)
    for column in ("file", "lines", "type", "qualified name"):
        table.add_column(column)
    for node in nodes:
        lines = f"{node.start_line}-{node.end_line}"
        table.add_row(escape(node.file), lines, node.type.value, escape(node.qualified_name))
    stdout_console().print(table)
    stderr.print(f"{len(found.nodes)} nodes in {len(found.files)} files")
    return ExitCode.OK


def run_list_agents(args: argparse.Namespace) -> int:
    loaded = load(args)
    rows = []
    for entry in agent_entries(loaded):
        definition, tools = describe_definition(entry.path)
        requires = definition.requires
        rows.append(
            {
                "name": entry.name,
                "enabled": entry.enabled,
                "bundled": entry.bundled,
                "origin": entry.origin,
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
            "bundled" if row["bundled"] else source_of(row),
            escape(", ".join(row["tools"])),  # type: ignore[arg-type]
            escape(f"{needs}: " + ("; ".join(row["unmet"]) if row["unmet"] else "met")),  # type: ignore[arg-type]
            escape(str(row["description"])),
        )
    stdout_console().print(table)
    return ExitCode.OK


def source_of(row: dict[str, object]) -> str:
    if row["origin"] == "configuration":
        return escape(str(row["definition"]))
    return escape(f"package {row['origin']}")


def run_clean(args: argparse.Namespace) -> int:
    loaded = load(args)
    directory = cache_location(loaded)
    try:
        removed = clean(directory)
    except ValueError as exc:
        return fail(str(exc))
    stderr.print(f"remora: {'removed' if removed else 'no cache at'} {escape(str(directory))}")
    return ExitCode.OK


def run_config(args: argparse.Namespace) -> int:
    loaded = load(args)
    source = loaded.config_file or "no config file; defaults"
    stderr.print(f"remora: configuration from {escape(str(source))}")
    sys.stdout.write(render_settings(loaded.settings, args.format))
    return ExitCode.OK
