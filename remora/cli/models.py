"""The model side, without an analysis: `models pull` and `check-server`."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

import anyio

from remora.agents.registry import select_agents
from remora.cli.console import fail, stderr
from remora.cli.flags import agent_names, config_flags, load
from remora.errors import ExitCode
from remora.models.local.pull import pull_functiongemma
from remora.models.local.resolve import models_dir
from remora.protocol.messages import ModelError


def add_models(commands: Any) -> None:
    models = commands.add_parser(
        "models", help="models for the embedded engine", description="Embedded engine models."
    )
    actions = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    pull = actions.add_parser(
        "pull",
        parents=[config_flags()],
        help="download FunctionGemma for the embedded engine",
        description="Download a FunctionGemma GGUF from Hugging Face into Remora's model folder, "
        "checking its sha256 (local.hf_repo and local.hf_file choose the file).",
    )
    pull.set_defaults(run=run_pull)
    pull.add_argument("name", choices=["functiongemma"])


def add_check_server(commands: Any) -> None:
    check = commands.add_parser(
        "check-server",
        parents=[config_flags()],
        help="check that the model server is set up for Remora",
        description="Connect, list models and adapters, check every agent's model is served, "
        "make one real tool-call round trip, probe tool_choice=required, and say which "
        "runner.model_profile to use. Exit 0 when all is well, 2 otherwise.",
    )
    check.set_defaults(run=run_check_server)
    check.add_argument(
        "--base-url", action="append", metavar="URL", help="server URL (repeat for replicas)"
    )
    check.add_argument("--model", metavar="NAME", help="served model name")
    check.add_argument("--agents", metavar="A,B", help="check only these agents' models")


def run_pull(args: argparse.Namespace) -> int:
    local = load(args).settings.local
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


def run_check_server(args: argparse.Namespace) -> int:
    # Imported here: the server client (aiohttp) is not needed to start any other command.
    from remora.models.http.openai_client import SERVER_DOCS
    from remora.models.http.server_check import check_server, render_text

    loaded = load(args)
    server = loaded.settings.server
    if not server.base_urls:
        return fail(
            f"no server to check: pass --base-url or set server.base_url; see {SERVER_DOCS}"
        )
    agents = select_agents(loaded, list(agent_names(args.agents)) or None)
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
