"""`remora`: the parser built from every command's module, and the dispatch."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from remora import __version__
from remora.cli import analyze, dashboard, models, project, server, tool, train, trust, watch
from remora.cli.console import fail, stderr
from remora.errors import RunFailed, UserInputError
from remora.signals import exit_code, terminate_as_interrupt, terminated

COMMANDS = (
    analyze.add_parser,
    watch.add_parser,
    dashboard.add_parser,
    server.add_parser,
    project.add_nodes,
    project.add_list_agents,
    tool.add_parser,
    project.add_clean,
    models.add_models,
    models.add_check_server,
    train.add_parser,
    project.add_config,
    trust.add_parser,
)
"""The dispatch table, in the order `--help` lists the commands: each adds its parser, whose
`run` default is the function that runs it."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="remora",
        description="Run small local language models as code-analysis agents over Python code.",
    )
    parser.add_argument("--version", action="version", version=f"remora {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_parser in COMMANDS:
        add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with terminate_as_interrupt():
        try:
            code: int = args.run(args)
            return code
        except (UserInputError, RunFailed) as exc:
            return fail(str(exc))
        except KeyboardInterrupt as interrupt:
            what = "terminated" if terminated(interrupt) else "interrupted"
            stderr.print(f"remora: {what}; no report written")
            return exit_code(interrupt)
        except Exception as exc:  # a bug or an unforeseen OS error: 2, never 1 ("findings")
            while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]
            if isinstance(exc, UserInputError | RunFailed):
                return fail(str(exc))
            if os.environ.get("REMORA_DEBUG"):
                import traceback

                traceback.print_exception(exc)
            if isinstance(exc, OSError) and exc.strerror:
                what = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
            else:
                what = f"{type(exc).__name__}: {exc}"
            hint = "" if os.environ.get("REMORA_DEBUG") else " (REMORA_DEBUG=1 shows where)"
            return fail("internal error: " + " ".join(what.split()) + hint)
