"""`remora server`: the language server over stdio, for editors (docs/EDITORS.md)."""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
from typing import Any, BinaryIO, cast

from remora.cli.flags import agent_names, cli_settings, config_flags, engine_flags, model_flags


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "server",
        parents=[config_flags(), model_flags(), engine_flags()],
        help="the language server for editors (LSP over stdio)",
        description="Speak the Language Server Protocol over stdin and stdout. Opened and "
        "saved Python files are analysed as `remora analyze` would in the workspace folder "
        "(same configuration and result cache): diagnostics from the cache at once, then "
        "from the agents for the nodes that changed; an agent's verified edit is a code "
        "action. Setup for Neovim and VS Code: docs/EDITORS.md.",
    )
    parser.set_defaults(run=run)
    parser.add_argument(
        "--debounce",
        type=int,
        default=300,
        metavar="MS",
        help="wait this long after a save before analysing, so a burst of saves is one run "
        "(default 300)",
    )
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="talk over stdin and stdout (the only transport; accepted because editors pass it)",
    )
    parser.add_argument(
        "--log-file",
        metavar="FILE",
        help="append the server's log to FILE (default: stderr, which editors show in their "
        "LSP log)",
    )


def run(args: argparse.Namespace) -> int:
    # The heavy imports (pygls, the analysis) only for this command.
    from remora.editor.runs import RunOptions
    from remora.editor.server import BoundedStdin, build_server

    logging.basicConfig(
        filename=args.log_file,
        level=logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("remora").setLevel(logging.INFO)
    # pygls logs every message it could not send with a traceback; a client that went away is
    # said once by pygls itself, and the server exits.
    logging.getLogger("pygls.protocol.json_rpc").addFilter(
        lambda record: not (record.exc_info and isinstance(record.exc_info[1], BrokenPipeError))
    )
    options = RunOptions(
        config=args.config,
        isolated=args.isolated,
        flags=cli_settings(args),
        agents=agent_names(args.agents),
    )
    server = build_server(options, debounce=max(args.debounce, 0) / 1000)
    # pygls reads stdin only through readline() and read(n): the bounded reader is all it needs.
    stdin = BoundedStdin(cast(io.BufferedReader, sys.stdin.buffer))
    server.start_io(cast(BinaryIO, stdin), protocol_output())
    return 0


def protocol_output() -> BinaryIO:
    """The protocol gets stdout to itself. Anything else that writes to file descriptor 1 (a
    library's print, a native library's log) would corrupt the message stream, and llama-cpp
    points descriptor 1 at /dev/null while it loads a model (its `verbose=False`), which
    swallowed the responses sent meanwhile. So the protocol writes to a copy of the descriptor,
    and descriptor 1 becomes stderr, which editors show in their LSP log."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return channel
