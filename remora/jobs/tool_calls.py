"""What the runner does with one tool call around running it: checks the model's call before it
runs, records the findings its result reports, and gives the model its view of the result."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from remora.discovery.nodes import Node
from remora.findings.results import Finding
from remora.protocol.messages import ToolCall
from remora.sandbox.executor import ToolOutcome

MAX_ARGUMENTS_BYTES = 1 << 20
"""Longer tool-call arguments are refused before parsing: no agent needs them."""
MODEL_VIEW = "model_view"
"""A result's key for what the model reads of it (docs/WRITING_AGENTS.md)."""


class BadCall(Exception):
    """A call the model got wrong; the message goes back to it as the tool result."""


def check_call(
    call: ToolCall,
    offered: set[str],
    validators: dict[str, jsonschema.Draft202012Validator],
    seen: set[tuple[str, str]],
) -> dict[str, Any]:
    """The call's arguments, checked against the tool's schema; `BadCall` says what is wrong.
    A call made before (`seen`, which this adds to) is refused: its result is above."""
    if call.name not in offered:
        raise BadCall(
            f"unknown tool {call.name[:80]!r}; available now: {', '.join(sorted(offered))}"
        )
    if len(call.arguments) > MAX_ARGUMENTS_BYTES:
        raise BadCall(f"arguments longer than {MAX_ARGUMENTS_BYTES} characters")
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise BadCall(f"arguments are not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise BadCall("arguments are nested too deeply") from None
    if not isinstance(arguments, dict):
        raise BadCall("arguments must be a JSON object")
    try:
        errors = [
            f"{'/'.join(str(p) for p in error.absolute_path) or 'arguments'}: {error.message}"
            for error in validators[call.name].iter_errors(arguments)
        ]
    except RecursionError:
        raise BadCall("arguments are nested too deeply") from None
    if errors:
        raise BadCall("invalid arguments: " + "; ".join(sorted(errors)))
    key = (call.name, json.dumps(arguments, sort_keys=True))
    if key in seen:
        raise BadCall("this exact call was already made; its result is above")
    seen.add(key)
    return arguments


def model_content(outcome: ToolOutcome) -> str:
    """The tool message the model reads: the result's `model_view` when it has one (what the
    model's choice needs, e.g. the problems to choose among with the lines around them, instead
    of every finding), else the whole result."""
    value = outcome.value
    if outcome.ok and isinstance(value, dict) and MODEL_VIEW in value:
        view = value[MODEL_VIEW]
        return view if isinstance(view, str) else json.dumps(view, default=str)
    return outcome.content()


def record_findings(findings: dict[tuple[object, ...], Finding], raw: object, node: Node) -> None:
    """Add a result's `findings` to the job's, once each (file and line default to the
    node's, and the column with the line: a method's `TST100` points at its `def`, not at the
    line's first column); ValidationError or TypeError for malformed ones."""
    if not isinstance(raw, list):
        raise TypeError("'findings' must be a list")
    for item in raw:
        if not isinstance(item, dict):
            raise TypeError("each finding must be a dict")
        data = {"file": node.file, "line": node.start_line, **item}
        if "line" not in item:
            data.setdefault("column", node.start_column)
        finding = Finding.model_validate(data)
        key = (finding.rule, finding.file, finding.line, finding.column, finding.message)
        if key not in findings or (finding.fix and not findings[key].fix):
            findings[key] = finding  # a later tool that made an edit for it says so
