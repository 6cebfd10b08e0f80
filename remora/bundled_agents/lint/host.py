"""The lint agent's host library: a ruff problem as a finding, the rules a ruff fix removed
(its run_ruff and apply_fix both read ruff's JSON through them), and the options the project's
own files give ruff."""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from collections.abc import Callable
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from remora.host.context import HostContext, checked_path

RUFF_CONFIGS = (".ruff.toml", "ruff.toml", "pyproject.toml")
"""In ruff's own order within one folder."""
NEWEST_TARGET = 12
"""The newest `--target-version` (3.12) passed: every ruff Remora supports (>= 0.6) knows it,
and a newer floor is left to ruff's default (an older target only holds back fixes)."""


OLDEST_FIXED = 6
"""The oldest Python 3 minor version whose code ruff's fixes are written for (its oldest target,
3.7, with the f-strings of 3.6): a project that supports an older Python is reported, not
fixed (pyupgrade's fixes remove `u''` and `from __future__ import division`)."""


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


CLASSIFIER = re.compile(r"Programming Language :: Python :: ([23])\.(\d+)\s*$")
"""A trove classifier naming one Python version (`... :: Python :: 2.7`, `... :: 3.5`)."""


def declared_python_floor(name: str, text: str) -> int | None:
    """The oldest Python 3 minor version that setup.cfg's `[options] python_requires` or
    setup.py's `python_requires="..."` admits (setup.py is parsed, never run), else the oldest
    its trove classifiers name (wcwidth lists `Python :: 2.7` and `:: 3.5` and no
    python_requires); -1 where that is a Python 2; None where the file says none or not as
    plain text."""
    declared: object = None
    classifiers: list[str] = []
    try:
        if name == "setup.cfg":
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(text)
            declared = parser.get("options", "python_requires", fallback=None)
            classifiers = parser.get("metadata", "classifiers", fallback="").splitlines()
        else:
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    classifiers.append(node.value)
                for keyword in node.keywords if isinstance(node, ast.Call) else []:
                    if keyword.arg == "python_requires" and isinstance(keyword.value, ast.Constant):
                        declared = keyword.value.value
        specifier = SpecifierSet(declared) if isinstance(declared, str) else None
    # A hostile setup.py nested past the parser's depth: no floor read, the job goes on.
    except (configparser.Error, SyntaxError, ValueError, InvalidSpecifier, RecursionError):
        return None
    if specifier is None:
        named = [CLASSIFIER.search(line.strip()) for line in classifiers]
        versions = [(int(m.group(1)), int(m.group(2))) for m in named if m]
        return None if not versions else -1 if min(versions)[0] == 2 else min(versions)[1]
    if specifier.contains("2.7.99"):
        return -1
    admitted = (minor for minor in range(40) if specifier.contains(f"3.{minor}.99"))
    return next(admitted, None)


def ruff_options(host: HostContext, path: str) -> dict[str, Any]:
    """What the project's files say about how ruff runs on `path`, from its folder up to the
    project root: `no_fix` where the nearest ruff configuration has `ruff check` fix what it
    finds (`fix = true`) or extends one not read here (every run then says --no-fix, or ruff
    reports the problems of a text it fixed); `target_version` ("py37") where the project
    declares its oldest Python only in setup.cfg or setup.py, which ruff does not read: ruff
    would take its own default (3.10 for ruff 0.17), and its fixes (`X | None`) would break
    the code on the older Pythons the project supports. None where ruff knows the version
    itself (`target-version`, or `requires-python` in a pyproject.toml) or a file cannot be
    read (then also `no_fix`: the code is reported as it is)."""
    unread = {"no_fix": True, "target_version": None, "declared_in": None}
    ruff_table: dict[str, Any] | None = None
    ruff_knows = False
    floor: tuple[int, str] | None = None
    parts = checked_path(path).split("/")[:-1]
    for depth in range(len(parts), -1, -1):
        prefix = "".join(part + "/" for part in parts[:depth])
        try:
            for name in RUFF_CONFIGS:
                if host.workspace.exists(prefix + name):
                    data = tomllib.loads(host.workspace.read_text(prefix + name))
                    table = data.get("tool", {}).get("ruff") if name == "pyproject.toml" else data
                    if ruff_table is None and isinstance(table, dict):
                        ruff_table = table
                    ruff_knows |= isinstance(table, dict) and bool(
                        {"target-version", "extend"} & set(table)
                    )
                    ruff_knows |= "requires-python" in data.get("project", {})
            for name in ("setup.cfg", "setup.py"):
                if floor is None and host.workspace.exists(prefix + name):
                    minor = declared_python_floor(name, host.workspace.read_text(prefix + name))
                    floor = None if minor is None else (minor, prefix + name)
        except (OSError, ValueError, AttributeError, TypeError):
            return unread
    no_fix = ruff_table is not None and (ruff_table.get("fix") is True or "extend" in ruff_table)
    if ruff_knows or floor is None or floor[0] > NEWEST_TARGET:
        return {"no_fix": no_fix, "target_version": None, "declared_in": None}
    if floor[0] < OLDEST_FIXED:  # no ruff target is that old: its fixes would break the code
        too_old = "2" if floor[0] < 0 else f"3.{floor[0]}"
        return {"no_fix": True, "target_version": None, "declared_in": floor[1], "too_old": too_old}
    return {"no_fix": no_fix, "target_version": f"py3{max(floor[0], 7)}", "declared_in": floor[1]}


def host_functions(host: HostContext) -> dict[str, Callable[..., Any]]:
    """ruff_options reads the project's files as the job sees them; the others are pure."""
    return {
        "ruff_finding": ruff_finding,
        "ruff_fixed_rules": ruff_fixed_rules,
        "ruff_options": lambda path: ruff_options(host, path),
    }
