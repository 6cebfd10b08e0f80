"""The docstring agent's host functions that run pydoclint (docstring_lint) or read its findings
(fix_plan): pydoclint runs as a program in the OS sandbox, in a throwaway copy of the job's view
of the project, once per run for each (arguments, file content, configuration) (the run's shared
results, as read-only commands share theirs)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from remora.discovery.nodes import Node
from remora.edits.workspace import Workspace
from remora.findings.results import ErrorCode
from remora.sandbox.commands import CommandRunner
from remora.tool_library.docstring_fix import fix_plan
from remora.tool_library.docstring_lint import (
    IGNORED_WITHOUT_CONFIG,
    config_candidates,
    config_table,
    docstring_style,
    init_documented_in_class,
    lint_command,
    located,
    owned_findings,
    read_report,
)


def docstring_functions(
    workspace: Workspace,
    node: Node,
    commands: CommandRunner,
    fault: Callable[[ErrorCode, str], None],
    reported: Callable[[str, list[str], Path], Awaitable[dict[str, Any]]],
) -> dict[str, Callable[..., Any]]:
    """`docstring_lint` and `fix_plan` for a job on `node`; `fault` records what the
    environment failed (the job then ends as an error); `reported` runs a command in a folder
    so (externals.py)."""

    async def docstring_lint(
        line: int, style: str = "google", text: str | None = None
    ) -> dict[str, Any]:
        """pydoclint on the node's file (or on `text` as that file), in the OS sandbox, with
        the project's configuration or Remora's defaults: the findings on the docstring of the
        definition starting on `line` (docstring_lint.py)."""
        path = node.file
        source = workspace.read_text(path) if text is None else str(text)
        config: str | None = None
        table: dict[str, Any] | None = None
        config_text = ""
        for candidate in config_candidates(path):
            if workspace.exists(candidate):
                config_text = workspace.read_text(candidate)
                table = config_table(config_text)
                if table is not None:
                    config = candidate
                    break
        used = style if config is not None else (docstring_style(source, int(line)) or style)
        args, options = lint_command(path, config, table, used)
        key = (
            "pydoclint:"
            + hashlib.sha256(
                json.dumps([args, source, config_text if config else None]).encode()
            ).hexdigest()
        )

        async def run() -> dict[str, Any]:
            with workspace.command_directory(extra={path: source}) as directory:
                return await reported("pydoclint", args, directory)

        ran = await commands.shared.get(key, run)
        if ran["timed_out"]:
            fault(
                ErrorCode.COMMAND_TIMEOUT,
                f"pydoclint took longer than sandbox.commands.timeout_s="
                f"{commands.settings.timeout_s}s",
            )
            raise TimeoutError("pydoclint timed out")
        try:
            found = read_report(path, ran["exit_code"], str(ran["stderr"]), str(ran["stdout"]))
        except ValueError as exc:
            fault(ErrorCode.TOOL_ENVIRONMENT, str(exc))
            raise
        if config is None:
            found = [f for f in found if f["rule"] not in IGNORED_WITHOUT_CONFIG]
        owned = owned_findings(located(found, source), source, int(line), options)
        return {
            **owned,
            "options": options,
            "style": used,
            "config": config,
            "command": "pydoclint " + " ".join(args),
            "skip_reason": init_documented_in_class(source, int(line), options),
        }

    return {"docstring_lint": docstring_lint, "fix_plan": fix_plan}
