"""`remora trust`: record that the user trusts a project's own configuration, keyed by its
content (a changed file needs trusting again), as direnv's `allow` does."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.markup import escape

from remora.cli.console import stderr
from remora.config import trust
from remora.config.loading import find_config_file, read_config_layer
from remora.errors import ExitCode, UserInputError


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "trust",
        help="trust a project's own configuration (or --revoke, --show)",
        description="Record that you trust the configuration of the project at PATH (its "
        "remora.yaml, .remora.yaml or [tool.remora]): its settings then apply as if you had "
        "written them, including those an untrusted project may not set (the sandbox, the "
        "project's Python, server URLs, paths outside the project, higher limits). The record "
        "is keyed by the configuration's content: after any change it is untrusted again. "
        "Records live in $XDG_STATE_HOME/remora/trusted.json (~/.local/state/remora/).",
    )
    parser.set_defaults(run=run)
    parser.add_argument("path", nargs="?", type=Path, default=Path("."), metavar="PATH")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--revoke", action="store_true", help="remove the record")
    action.add_argument("--show", action="store_true", help="say whether it is trusted")


def run(args: argparse.Namespace) -> int:
    start = args.path.resolve()
    if not start.exists():
        raise UserInputError(f"{args.path}: no such file or folder")
    skipped: list[str] = []
    file = find_config_file(start if start.is_dir() else start.parent, skipped)
    for message in skipped:
        stderr.print(f"remora: {escape(message)}")
    if file is None:
        stderr.print(
            f"remora: no project configuration at {escape(str(start))} or above: nothing to "
            "record (a record is keyed by a configuration's content; a project without one "
            "runs with your settings alone). To trust its .venv/ too, pass --trust-project for "
            "a run or list its folder in trusted_projects in your user configuration"
        )
        return ExitCode.OK
    project = trust.ProjectConfiguration.of(file, file.parent)
    store = trust.trust_store_file()
    asks = _what_it_asks(file)
    if args.show:
        state = "trusted" if trust.recorded(project, store) else "not trusted"
        stderr.print(f"remora: {escape(str(file))}: {state} (sha256 {project.digest[:12]})")
    elif args.revoke:
        trust.record(project, store, trusted=False)
        stderr.print(f"remora: {escape(str(file))}: no longer trusted")
    else:
        trust.record(project, store, trusted=True)
        stderr.print(
            f"remora: trusted {escape(str(file))} as it is now (sha256 {project.digest[:12]}); "
            "any change to it needs `remora trust` again"
        )
    if asks and not args.revoke:
        stderr.print("remora: settings in it that only a trusted project may set:")
        for line in asks:
            stderr.print(f"  {escape(line)}")
    return ExitCode.OK


def _what_it_asks(file: Path) -> list[str]:
    """The settings the file sets whose rule is not "any value", with their rule."""
    data = read_config_layer(file)
    return [
        f"{'.'.join(loc)} ({rule.value})"
        for loc in trust.leaves(data)
        if (rule := trust.rule_of(loc)) is not None and rule is not trust.Rule.ANY
    ]
