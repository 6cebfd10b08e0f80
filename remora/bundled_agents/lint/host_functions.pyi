# The lint agent's own host functions (host.py), beside the shared ones.
from typing import Any

# Findings two tools of one agent report alike.
def ruff_finding(problem: dict[str, Any], line: int) -> dict[str, Any]:
    """One problem of `ruff check --output-format json` as a finding on `line` (rule, message,
    line, column, severity: error for syntax errors and E9xx, else warning)."""

def ruff_fixed_rules(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """Rule codes with fewer problems in `after` (ruff's JSON after a fix) than in `before`,
    in the order `before` lists them: what the fix removed."""
