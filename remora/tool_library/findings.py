"""Findings two tools of one agent report alike, written once: a ruff problem as a finding (the
lint agent's run_ruff and apply_fix), a missing or outdated docstring and why a definition is
left alone (the docstring agent's inspect_docstring and write_docstring)."""

from __future__ import annotations

from typing import Any


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


def docstring_finding(check: dict[str, Any], qualified_name: str, kind: str) -> dict[str, Any]:
    """DOC100 (missing) or DOC101 (disagrees with the signature) for check_docstring's result."""
    if check["status"] == "missing":
        rule, severity = "DOC100", "info"
        message = f"{kind} `{qualified_name}` has no docstring"
    else:
        rule, severity = "DOC101", "warning"
        message = f"the docstring of `{qualified_name}` " + "; ".join(check["problems"])
    return {
        "rule": rule,
        "message": message,
        "line": check["line"],
        "column": check["column"],
        "severity": severity,
    }


def docstring_skip_reason(
    check: dict[str, Any], qualified_name: str, include_private: bool
) -> str | None:
    """Why the project's options leave this definition alone, or None."""
    if include_private:
        return check["skip_reason"]  # type: ignore[no-any-return]
    for part in qualified_name.split("."):
        # Dunder names (__init__, __call__) are public API; _helper is not.
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return f"`{part}` is private (set the option include_private to document it)"
    if check["nested"]:
        return "nested in a function (set the option include_private to document it)"
    return check["skip_reason"]  # type: ignore[no-any-return]
