"""Flag groups several commands share, defined once, and the flags' layer of the
configuration."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from remora.cli.console import warn
from remora.config.loading import LoadedSettings, deep_merge, load_settings, parse_override
from remora.report.render import FORMATS


def config_flags() -> argparse.ArgumentParser:
    """Which configuration: every command that reads one."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="config file (default: nearest remora.yaml, or [tool.remora] in pyproject.toml)",
    )
    flags.add_argument(
        "--isolated",
        action="store_true",
        help="ignore all configuration files (environment and flags still apply)",
    )
    flags.add_argument(
        "--trust-project",
        action="store_true",
        help="trust the project's own configuration for this run, as if you had written it "
        "(also REMORA_TRUST_PROJECT=1; to trust it for good: remora trust)",
    )
    flags.add_argument(
        "-c",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting, e.g. -c runner.max_turns=5 (repeatable)",
    )
    return flags


def run_flags() -> argparse.ArgumentParser:
    """What analyze and watch share: what to analyse, with which agents and model, how to
    report."""
    flags = argparse.ArgumentParser(add_help=False, parents=[model_flags()])
    flags.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    flags.add_argument(
        "--output-format",
        "--format",
        dest="output_format",
        choices=FORMATS,
        default="text",
        help="report format: text (the findings, as ruff prints them, then a few lines per "
        "agent), table (a row per job with its whole summary or reason, then the text), json, "
        "jsonl (streamed, one object per job, then a summary), sarif (GitHub code scanning), "
        "github (workflow annotations)",
    )
    flags.add_argument(
        "--statistics",
        action="store_true",
        help="text and table formats: count the findings per rule instead of listing them",
    )
    return flags


def model_flags() -> argparse.ArgumentParser:
    """Which agents run, which model answers them, where results are cached: every command
    that runs agents."""
    flags = argparse.ArgumentParser(add_help=False, parents=[server_flags()])
    flags.add_argument("--agents", metavar="A,B", help="run only these agents (comma-separated)")
    flags.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="cache folder (default .remora_cache; also cache_dir, REMORA_CACHE_DIR)",
    )
    return flags


def server_flags() -> argparse.ArgumentParser:
    """Which server answers, and how many jobs run at once."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument(
        "--base-url",
        action="append",
        metavar="URL",
        help="OpenAI-compatible server URL; repeat it to spread jobs over several replicas",
    )
    flags.add_argument("--model", metavar="NAME", help="served model name")
    flags.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="jobs asking the model at once (default 64; the embedded engine: two per slot); "
        "jobs that only run tools run beside them",
    )
    flags.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes that run jobs against a server, sharing --concurrency (default 0: one "
        "per usable core, one per 200 pending jobs; the embedded engine uses one)",
    )
    return flags


def engine_flags() -> argparse.ArgumentParser:
    """The engine choice, for commands that may run the embedded engine."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument(
        "--engine",
        choices=["auto", "server", "local"],
        help="server, local (the embedded CPU engine) or auto (default: the server when a "
        "base URL is set, else the embedded engine when installed)",
    )
    flags.add_argument(
        "--model-path", type=Path, metavar="FILE", help="GGUF file for the embedded engine"
    )
    return flags


def agent_names(value: str | None) -> tuple[str, ...]:
    """--agents a,b as names."""
    return tuple(name.strip() for name in (value or "").split(",") if name.strip())


def cli_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Flags as a settings tree: the top layer of the configuration."""
    tree: dict[str, Any] = {}
    for item in args.overrides:
        tree = deep_merge(tree, parse_override(item))
    flags = {
        ("server", "base_url"): getattr(args, "base_url", None),
        ("server", "model"): getattr(args, "model", None),
        ("concurrency",): getattr(args, "concurrency", None),
        ("workers",): getattr(args, "workers", None),
        ("cache_dir",): getattr(args, "cache_dir", None),
        ("engine",): getattr(args, "engine", None),
        ("trust_project",): True if getattr(args, "trust_project", False) else None,
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


def load(args: argparse.Namespace) -> LoadedSettings:
    """The configuration a command runs with: files, environment, then its flags."""
    start = args.paths[0] if getattr(args, "paths", None) else None
    loaded = load_settings(args.config, cli=cli_settings(args), cwd=start, isolated=args.isolated)
    for message in loaded.warnings:
        warn(message)
    return loaded
