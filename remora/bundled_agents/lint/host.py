"""The lint agent's host library: a ruff problem as a finding, and the rules a ruff fix removed
(its run_ruff and apply_fix both read ruff's JSON through them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from remora.host.context import HostContext


def ruff_finding(problem: dict[str, Any], line: int) -> dict[str, Any]:
    """One problem of `ruff check --output-format json`, reported on `line`."""
    code = problem["code"] or "syntax-error"
    return {
        "rule": code,
        "message": problem["message"],
        "line": line,
        "column": problem["location"]["column"],
        "severity": "error" if code == "syntax-error" or code.startswith("E9") else "warning",
        "help_uri": problem.get("url"),
    }


def ruff_fixed_rules(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """The rule codes of `ruff check --output-format json` problems that are fewer `after` a
    fix than `before` it, in the order `before` lists them."""
    counts: dict[str, int] = {}
    for problem in after:
        counts[problem["code"]] = counts.get(problem["code"], 0) + 1
    codes: list[str] = []
    for problem in before:
        code = problem["code"]
        counts[code] = counts.get(code, 0) - 1
        if counts[code] < 0 and code not in codes:
            codes.append(code)
    return codes


def host_functions(host: HostContext) -> dict[str, Callable[..., Any]]:
    """Pure functions of their arguments: the job's context is not needed."""
    return {"ruff_finding": ruff_finding, "ruff_fixed_rules": ruff_fixed_rules}
