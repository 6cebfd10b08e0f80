"""A missing docstring as a finding (pydocstyle's D1xx, as ruff names it) and why a definition is
left alone: the docstring agent's inspect_docstring and write_docstring both report them. Its
other findings are pydoclint's own (lint.py)."""

from __future__ import annotations

from typing import Any


def docstring_finding(check: dict[str, Any], qualified_name: str, kind: str) -> dict[str, Any]:
    """A missing docstring under pydocstyle's rule for it, as ruff names it (D101 class, D102
    method, D103 function, D105 magic method, D106 nested class, D107 `__init__`) and with its
    message; the definition's name column, as ruff reports it."""
    rule, message = missing_rule(check, qualified_name, kind)
    return {
        "rule": rule,
        "message": message,
        "line": check["line"],
        "column": check["column"],
        "severity": "info",
    }


def missing_rule(check: dict[str, Any], qualified_name: str, kind: str) -> tuple[str, str]:
    """pydocstyle's code and message for a definition without a docstring. A private or
    nested definition (documented with the option include_private) keeps its kind's code; its
    message does not call it public."""
    name = qualified_name.rsplit(".", 1)[-1]
    parts = qualified_name.split(".")
    private = check.get("nested") or any(
        part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
        for part in parts
    )
    public = "" if private else "public "
    if kind == "class":
        if len(parts) > 1 and not check.get("nested"):
            return "D106", f"Missing docstring in {public}nested class"
        return "D101", f"Missing docstring in {public}class"
    if kind == "method" or check.get("method"):
        if name == "__init__":
            return "D107", "Missing docstring in `__init__`"
        if name.startswith("__") and name.endswith("__"):
            return "D105", "Missing docstring in magic method"
        return "D102", f"Missing docstring in {public}method"
    return "D103", f"Missing docstring in {public}function"


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
