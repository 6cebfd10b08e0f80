"""pydoclint as the docstring agent's ground truth: which configuration applies to a file (the
project's `[tool.pydoclint]`, else Remora's defaults for the style), the command that checks it,
its report read back, and which of its findings belong to which definition.

pydoclint runs as a program in the OS sandbox (the host function `docstring_lint` in this
package's __init__.py), like ruff for the lint agent; everything here is pure: text in, plain
data out (results cross into the tool sandbox).
"""

from __future__ import annotations

import ast
import re
import tomllib
from typing import Any

from remora.bundled_agents.docstring.library.parse import MAIN_PARAMETER_SECTIONS, parse_docstring

FINDING = re.compile(r"^(?P<file>.+?):(?P<line>\d+): (?P<code>DOC\d{3}): (?P<message>.*)$")
"""One line of `pydoclint --show-filenames-in-every-violation-message=True` (on stderr)."""

HELP_URI = "https://jsh9.github.io/pydoclint/violation_codes.html"

PYDOCLINT_DEFAULTS: dict[str, Any] = {
    "style": "numpy",
    "arg_type_hints_in_signature": True,
    "arg_type_hints_in_docstring": True,
    "check_return_types": True,
    "check_yield_types": True,
    "allow_init_docstring": False,
    "skip_checking_raises": False,
    "skip_checking_short_docstrings": True,
    "check_class_attributes": True,
    "check_arg_order": True,
    "should_document_star_arguments": True,
    "omit_stars_when_documenting_varargs": False,
    "ignore_underscore_only_args": True,
    "ignore_private_args": False,
    "ignore_special_dunder_args": False,
    "ignore_private_class_attributes": True,
    "ignore_underscore_only_class_attributes": True,
    "ignore_special_dunder_class_attributes": True,
}
"""pydoclint 0.12.0's own defaults for the options the fixes depend on."""

REMORA_DEFAULTS: dict[str, Any] = {
    "arg_type_hints_in_signature": False,
    "arg_type_hints_in_docstring": False,
    "check_return_types": False,
    "check_yield_types": False,
}
"""Remora's configuration for a project without `[tool.pydoclint]` (with the style and
`allow_init_docstring` below): names, sections and exceptions are checked, not where types
are written, which is a convention each project chooses (pydoclint has no setting that
accepts both; with these, DOC108 and DOC111 are the two codes that only say a type is
written somewhere, and they are not reported: IGNORED_WITHOUT_CONFIG)."""

IGNORED_WITHOUT_CONFIG = frozenset({"DOC108", "DOC111"})

INIT_DOCSTRING_BY_STYLE = {"numpy": False, "google": True, "sphinx": True}
"""Without a configuration: numpydoc documents a constructor's parameters in the class
docstring (ruff's numpy convention ignores D107); Google and Sphinx projects may give
`__init__` a docstring of its own (pydocstyle's conventions report D107 when it has none)."""


def config_table(text: str) -> dict[str, Any] | None:
    """The `[tool.pydoclint]` table of a pyproject.toml's text, keys as pydoclint reads them
    (`arg-type-hints-in-docstring` -> `arg_type_hints_in_docstring`); None without one or
    when the file is not TOML (pydoclint then ignores it too)."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return None
    tool = data.get("tool")
    table = tool.get("pydoclint") if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        return None
    return {str(key).replace("-", "_"): value for key, value in table.items()}


def config_candidates(path: str) -> list[str]:
    """pyproject.toml files from the file's folder up to the project root, nearest first."""
    parts = path.split("/")[:-1]
    found = []
    while True:
        found.append("/".join([*parts, "pyproject.toml"]))
        if not parts:
            return found
        parts = parts[:-1]


def docstring_style(source: str, line: int) -> str | None:
    """The style the docstring of the definition starting on `line` is written in (None:
    none, or one without sections)."""
    definition = definition_at(parse_module(source), line)
    if definition is None:
        return None
    text = ast.get_docstring(definition)
    return parse_docstring(text)["style"] if text else None


def lint_command(
    path: str, config: str | None, table: dict[str, Any] | None, style: str
) -> tuple[list[str], dict[str, Any]]:
    """The arguments of `pydoclint` that check `path`, and the options in effect.

    With a configuration (`config`, its `[tool.pydoclint]` `table`) pydoclint reads it as it
    does in the project's CI, its own defaults for what it leaves out, the style included.
    Without one: Remora's defaults (REMORA_DEFAULTS) in `style`, excluding nothing.
    """
    head = ["--quiet", "--show-filenames-in-every-violation-message=True"]
    if config is not None:
        options = {**PYDOCLINT_DEFAULTS, **(table or {})}
        return [*head, f"--config={config}", path], options
    options = {
        **PYDOCLINT_DEFAULTS,
        **REMORA_DEFAULTS,
        "style": style,
        "allow_init_docstring": INIT_DOCSTRING_BY_STYLE.get(style, False),
    }
    flags = [
        f"--style={style}",
        *(
            f"--{key.replace('_', '-')}={options[key]}"
            for key in (*REMORA_DEFAULTS, "allow_init_docstring")
        ),
        "--exclude=",
    ]
    return [*head, *flags, path], options


def read_report(path: str, exit_code: int | None, stderr: str, stdout: str) -> list[dict[str, Any]]:
    """pydoclint's findings on `path` ({line, rule, message}); ValueError with pydoclint's own
    words when it did not check the file (a bad configuration, an option it removed)."""
    findings = []
    notes = []
    for text in (stderr + "\n" + stdout).split("\n"):
        match = FINDING.match(text.strip())
        if match and match["file"] == path:
            findings.append(
                {"line": int(match["line"]), "rule": match["code"], "message": match["message"]}
            )
        elif text.strip():
            notes.append(text.strip())
    baseline = any("baseline" in note.lower() for note in notes)
    if exit_code not in (0, 1) or (exit_code == 1 and not findings and not baseline):
        said = " ".join(notes)[:500] or f"exit code {exit_code}"
        raise ValueError(f"pydoclint failed: {said}")
    return findings


def owned_findings(
    findings: list[dict[str, Any]], source: str, line: int, options: dict[str, Any]
) -> dict[str, Any]:
    """The findings that concern the docstring of the definition starting on `line`, as
    pydoclint decides which docstring it checks: a function's own findings are on its `def`
    line; a constructor's argument, return and raise findings are about the class docstring
    when `__init__` has none or may not have one (allow_init_docstring false): they stay on
    the `__init__` line, as pydoclint reports them, and belong to the class. Returns findings,
    the `subject` ("function", "class" or "none") and `signature_line`: the def line whose
    arguments the docstring must document (the class's `__init__` for a class)."""
    tree = parse_module(source)
    definition = definition_at(tree, line)
    if definition is None:
        return {"findings": [], "subject": "none", "signature_line": None}
    if isinstance(definition, ast.ClassDef):
        init = constructor(definition)
        mine = [f for f in findings if f["line"] == definition.lineno]
        if init is not None and not _init_documents_itself(init, options):
            mine += [f for f in findings if f["line"] == init.lineno and f["rule"] not in INIT_OWN]
        return {
            "findings": mine,
            "subject": "class",
            "signature_line": init.lineno if init is not None else None,
        }
    parent = _parent_class(tree, definition)
    if (
        definition.name == "__init__"
        and parent is not None
        and constructor(parent) is definition
        and not _init_documents_itself(definition, options)
    ):
        mine = [f for f in findings if f["line"] == definition.lineno and f["rule"] in INIT_OWN]
        return {"findings": mine, "subject": "none", "signature_line": definition.lineno}
    mine = [f for f in findings if f["line"] == definition.lineno]
    return {"findings": mine, "subject": "function", "signature_line": definition.lineno}


INIT_OWN = frozenset({"DOC301", "DOC303"})
"""Findings on an `__init__` line about `__init__`'s own docstring, whatever it documents."""


def _init_documents_itself(
    init: ast.FunctionDef | ast.AsyncFunctionDef, options: dict[str, Any]
) -> bool:
    return bool(options.get("allow_init_docstring")) and bool(ast.get_docstring(init, clean=False))


def init_documented_in_class(source: str, line: int, options: dict[str, Any]) -> str | None:
    """Why an `__init__` (starting on `line`) without a docstring needs none, or None: its
    class's docstring is where pydoclint checks its arguments (allow_init_docstring false), or
    that docstring already documents them."""
    tree = parse_module(source)
    definition = definition_at(tree, line)
    if not isinstance(definition, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    parent = _parent_class(tree, definition)
    if definition.name != "__init__" or parent is None or ast.get_docstring(definition):
        return None
    if not options.get("allow_init_docstring"):
        return (
            "its arguments are documented in the class docstring "
            "(pydoclint's allow-init-docstring is false)"
        )
    doc = ast.get_docstring(parent)
    parsed = parse_docstring(doc) if doc else None
    if parsed and any(
        p["section"].lower() in MAIN_PARAMETER_SECTIONS for p in parsed["parameters"]
    ):
        return "its arguments are documented in the class docstring"
    return None


def constructor(cls: ast.ClassDef) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The class's `__init__` that pydoclint checks: the last one (earlier ones are overloads)."""
    found = None
    for statement in cls.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef) and (
            statement.name == "__init__"
        ):
            found = statement
    return found


Definition = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def definition_at(tree: ast.Module | None, line: int) -> Definition | None:
    """The class or function whose first line (its first decorator's, else its own) is
    `line`."""
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            if line in (first, node.lineno):
                return node
    return None


def _parent_class(tree: ast.Module | None, target: Definition) -> ast.ClassDef | None:
    for node in ast.walk(tree) if tree is not None else []:
        if isinstance(node, ast.ClassDef) and any(child is target for child in node.body):
            return node
    return None


def parse_module(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def located(findings: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    """pydoclint's findings as Remora reports them: the column of the definition's name on
    its line (pydoclint gives none), severity and where each code is explained."""
    lines = source.split("\n")
    shown = []
    for finding in findings:
        text = lines[finding["line"] - 1] if 0 < finding["line"] <= len(lines) else ""
        match = re.search(r"\b(?:def|class)\s+(\w+)", text)
        column = match.start(1) + 1 if match else len(text) - len(text.lstrip()) + 1
        shown.append(
            {
                **finding,
                "column": column,
                "severity": "warning",
                "help_uri": HELP_URI,
            }
        )
    return shown
