"""The docstring agent's host functions: where a docstring goes and what it must document
(check.py), what the code says (context.py), pydoclint's findings on it run in the OS sandbox
(lint.py) and the edits they call for (fix.py), drafts ranked (rank.py), rendered (render.py),
checked to change nothing but the docstring (source_compare.py), and their Examples sections
(doctest_section.py); the sentences a docstring lacks drafted by the job's model
(drafting.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from remora.bundled_agents.docstring.library import findings
from remora.bundled_agents.docstring.library.check import check_docstring
from remora.bundled_agents.docstring.library.context import code_facts
from remora.bundled_agents.docstring.library.doctest_section import (
    doctest_examples,
    examples_section,
)
from remora.bundled_agents.docstring.library.drafting import Drafter, Prompts, raises_sections
from remora.bundled_agents.docstring.library.fix import fix_plan
from remora.bundled_agents.docstring.library.lint import (
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
from remora.bundled_agents.docstring.library.parse import parse_docstring
from remora.bundled_agents.docstring.library.render import keep_layout, render_docstring
from remora.bundled_agents.docstring.library.retrieval import EXAMPLES, nearest_examples
from remora.bundled_agents.docstring.library.source_compare import compare_python
from remora.findings.results import ErrorCode
from remora.host.context import HostContext
from remora.host.core import model_functions
from remora.tool_library.module_paths import project_of, python_sources


def host_functions(host: HostContext) -> dict[str, Callable[..., Any]]:
    node = host.node

    async def docstring_lint(
        line: int, style: str = "google", text: str | None = None
    ) -> dict[str, Any]:
        """pydoclint on the node's file (or on `text` as that file), in the OS sandbox, with
        the project's configuration or Remora's defaults: the findings on the docstring of the
        definition starting on `line` (lint.py)."""
        path = node.file
        source = host.workspace.read_text(path) if text is None else str(text)
        config: str | None = None
        table: dict[str, Any] | None = None
        config_text = ""
        for candidate in config_candidates(path):
            if host.workspace.exists(candidate):
                config_text = host.workspace.read_text(candidate)
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
            async with host.workspace.command_directory(extra={path: source}) as directory:
                # Its findings are its output.
                return await host.reported("pydoclint", args, directory, copy_back=False)

        ran = await host.commands.shared.get(key, run)
        if ran["timed_out"]:
            host.timed_out("pydoclint")
            raise TimeoutError("pydoclint timed out")
        try:
            found = read_report(path, ran["exit_code"], str(ran["stderr"]), str(ran["stdout"]))
        except ValueError as exc:
            host.fault(ErrorCode.TOOL_ENVIRONMENT, str(exc))
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

    async def lint_change(style: str, text: str, before: list[dict[str, Any]]) -> dict[str, Any]:
        """pydoclint on the new text: the codes of `before` it no longer reports (fixed), and
        the findings it reports that `before` did not have (new), on this definition."""
        after = await docstring_lint(node.start_line, style, text)
        old = [finding["rule"] for finding in before]
        now = [finding["rule"] for finding in after["findings"]]
        fixed = [code for code in old if code not in now]
        new = [finding for finding in after["findings"] if finding["rule"] not in old]
        return {"fixed": list(dict.fromkeys(fixed)), "new": new, "after": after}

    def docstring_examples(source: str, line: int, limit: int = EXAMPLES) -> dict[str, Any]:
        project = project_of(node.file, host.file_exists)
        sources = python_sources(project, "", host.workspace.list_dir, host.project_text)
        sources.pop(node.file, None)
        return nearest_examples(source, line, sources, limit, path=node.file)

    async def draft_docstring(
        template: dict[str, Any],
        needs: dict[str, Any],
        check: dict[str, Any],
        facts: dict[str, Any] | None,
        found: dict[str, Any],
        options: dict[str, Any],
        source: str,
    ) -> dict[str, Any]:
        if facts is None:
            raise ValueError("draft_docstring: no definition's facts (code_facts gave None)")
        model = model_functions(host)
        drafter = Drafter(model["complete_drafts"], model["score_text"], options)
        prompts = Prompts(source, check, found["examples"], node.text, node.end_line)
        return await drafter.fill(template, needs, check, facts, found, prompts)

    def docstring_finding(check: dict[str, Any]) -> dict[str, Any]:
        return findings.docstring_finding(check, node.qualified_name, node.type.value)

    def docstring_skip_reason(check: dict[str, Any], include_private: bool = False) -> str | None:
        return findings.docstring_skip_reason(check, node.qualified_name, include_private)

    return {
        "docstring_lint": docstring_lint,
        "docstring_examples": docstring_examples,
        "docstring_finding": docstring_finding,
        "docstring_skip_reason": docstring_skip_reason,
        "draft_docstring": draft_docstring,
        "lint_change": lint_change,
        # Pure functions of their arguments.
        "fix_plan": fix_plan,
        "check_docstring": check_docstring,
        "parse_docstring": parse_docstring,
        "render_docstring": render_docstring,
        "keep_layout": keep_layout,
        "compare_python": compare_python,
        "code_facts": code_facts,
        "doctest_examples": doctest_examples,
        "examples_section": examples_section,
        "raises_sections": raises_sections,
    }
