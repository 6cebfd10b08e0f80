"""Calls people wrote: the calls of a function, a method or a constructor in the project's
files, its documentation's code examples (documented_calls) and the module's own, whose
arguments are all values a test can write, as their argument text. Parsed once per file text."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from functools import lru_cache


def call_sites(name: str, method: bool, sources: Mapping[str, str]) -> list[str]:
    """The argument texts of calls of `name` (as `x.name(...)` for a method) in `sources`
    whose arguments are literals or constructors: the calls people actually write."""
    found: list[str] = []
    for path in sorted(sources):
        for text in value_calls(sources[path]).get(("method" if method else "function", name), ()):
            if text not in found:
                found.append(text)
    return found


@lru_cache(maxsize=1024)
def value_calls(source: str) -> dict[tuple[str, str], tuple[str, ...]]:
    """Every call in `source` whose arguments are all values (`is_value`), as its argument
    text, in `ast.walk` order, by what it calls: ("function", name) for `name(...)`,
    ("method", name) for `x.name(...)` (and ("function", name) too where `x` is a module the
    text imports); {} when the text does not parse. Parsed once per
    text: every test and sample_data job of a run looks for its function's call sites in the
    same project files (a method's, and its class's constructor's)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[tuple[str, str], list[str]] = {}
    modules = imported_modules(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            key = ("method", func.attr)
            # `pyotp.HOTP(...)`, `iso8601.parse_date(...)`: a function (or class) called
            # through the module the text imports, as READMEs and other packages call them.
            through_module = isinstance(func.value, ast.Name) and func.value.id in modules
        elif isinstance(func, ast.Name):
            key, through_module = ("function", func.id), False
        else:
            continue
        if all(is_value(arg) for arg in [*node.args, *keyword_values(node)]):
            found.setdefault(key, []).append(arguments_text(node))
            if through_module:
                found.setdefault(("function", key[1]), []).append(arguments_text(node))
    return {key: tuple(texts) for key, texts in found.items()}


def imported_modules(tree: ast.Module) -> set[str]:
    """The names `import x` and `import x as y` bind anywhere in the text."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    return names


def keyword_values(node: ast.Call) -> list[ast.expr]:
    """The values of its keyword arguments, a `**mapping`'s too (`replace(**parts)` is no call
    of plain values: `parts` is a name)."""
    return [keyword.value for keyword in node.keywords]


def is_value(node: ast.expr) -> bool:
    """A literal, a container of them, or a call of a capitalized name (a constructor): what
    the allow-list may accept; it has the last word."""
    if isinstance(node, ast.Call):
        return (
            isinstance(node.func, ast.Name)
            and node.func.id[:1].isupper()
            and all(is_value(arg) for arg in [*node.args, *keyword_values(node)])
        )
    return is_literal(node)


def is_literal(node: ast.expr) -> bool:
    """A literal or a container of them (`ast.literal_eval` reads it)."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def arguments_text(node: ast.Call) -> str:
    parts = [ast.unparse(arg) for arg in node.args]
    parts += [
        f"{keyword.arg}={ast.unparse(keyword.value)}"
        if keyword.arg is not None
        else f"**{ast.unparse(keyword.value)}"  # never `None=parts`: not Python
        for keyword in node.keywords
    ]
    return ", ".join(parts)
