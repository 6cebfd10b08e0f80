# The lint agent's own host functions (host.py), beside the shared ones.
from typing import Any

# Findings two tools of one agent report alike.
def ruff_finding(problem: dict[str, Any], line: int) -> dict[str, Any]:
    """One problem of `ruff check --output-format json` as a finding on `line` (rule, message,
    line, column, severity: error for syntax errors and E9xx, else warning)."""

def ruff_fixed_rules(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """Rule codes with fewer problems in `after` (ruff's JSON after a fix) than in `before`,
    in the order `before` lists them: what the fix removed."""

# How the project's own files have ruff run on a file.
def ruff_options(path: str) -> dict[str, Any]:
    """From `path`'s folder up to the project root: `no_fix` (bool) where the nearest ruff
    configuration has ruff fix what it finds (`fix = true`) or extends another; `target_version`
    ("py37") and `declared_in` (the file) where the project declares its oldest Python only in
    setup.cfg or setup.py, which ruff does not read; else both None."""
