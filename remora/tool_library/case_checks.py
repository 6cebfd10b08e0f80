"""What a rendered test may hold of what the probe reported, checked here before rendering.

The probe (call_probe.py) runs in the sandbox and reports what it saw: values as reprs, the
public state of objects by attribute name. A key of a mapping the model chose can be such a name
(`self.__dict__.update(fields)`, `setattr` in a loop), so a report written into a test unchecked
would be code the model chose (`assert result.a == 0 or __import__("os").system(...) == 0 or
result.a == 1`), run by check_tests and then, after `--fix`, by the user's pytest. So every name
a test writes as code (an attribute, a keyword argument, a test's parameter or variable, an
imported name, an exception, a test's name) is a `code_name`, every value is a `data_literal`,
and `writable` leaves out of an observation whatever is neither: it is not pinned.
"""

from __future__ import annotations

import ast
import keyword
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from remora.tool_library.standard_values import BYTE_BUILDERS, CALLABLE_BUILTINS, STANDARD_VALUES


def code_name(name: object) -> bool:
    """Whether `name` may be written as a name in a test's code: an identifier that is not a
    keyword (soft keywords such as `match` are names), and its own NFKC form (Python folds an
    identifier to it, so `result.\ufb01le` would read the attribute `file`, not `\ufb01le`)."""
    return (
        isinstance(name, str)
        and name.isidentifier()
        and not keyword.iskeyword(name)
        and unicodedata.normalize("NFKC", name) == name
    )


def data_literal(text: object) -> str | None:
    """The code for a value the probe saw (its repr), or None when it is not a literal: the
    text's syntax tree, when `ast.literal_eval` reads it (numbers, strings, bytes, True, False,
    None, containers of them; a CALLABLE_BUILTINS name read as one more literal: the `str` a
    callable parameter was given, held in a list), unparsed, so nothing else of the text
    reaches a test (a call, a comment that would swallow the rest of the line)."""
    if not isinstance(text, str):
        return None
    try:
        tree = ast.parse(text, mode="eval")
        ast.literal_eval(_BuiltinsAsConstants().visit(ast.parse(text, mode="eval")))
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    return ast.unparse(tree)


class _BuiltinsAsConstants(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.expr:
        return ast.Constant(0) if node.id in CALLABLE_BUILTINS else node


VALUE_IMPORTS = {
    "datetime": "import datetime",
    "Decimal": "from decimal import Decimal",
    "Fraction": "from fractions import Fraction",
    "UUID": "from uuid import UUID",
}
"""The standard value types a probe may report a value of, by the name their repr uses, and
the import a test needs for it (call_probe.VALUE_TYPES)."""
BUILTIN_VALUES = frozenset({"bytearray", "frozenset"})
"""The builtin types it may report a value of (`bytearray(b'\\x01')`; call_probe.BUILTIN_VALUES):
no import."""


def constructed_value(text: object, names: object) -> tuple[str, list[str], list[str]] | None:
    """The code for a value the probe saw built (`datetime.timedelta(days=1)`, `Decimal('1.5')`,
    `Color.RED`, `Point(x=1, y=2)`: call_probe.constructed), the imports it needs and the
    module's names it uses; or None when it is anything else: only calls of those names (and
    `datetime.<type>`) with literal arguments and keywords, and public attributes of them,
    are code here; every other name, a dunder, a subscript, a lambda is refused."""
    if not isinstance(text, str) or not isinstance(names, list):
        return None
    if not all(code_name(name) for name in names):
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    known = set(VALUE_IMPORTS) | set(BUILTIN_VALUES) | set(CALLABLE_BUILTINS) | set(names)
    used: set[str] = set()
    leaves = (ast.Constant, ast.Load, ast.USub, ast.UAdd, ast.Expression)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id not in known:
                return None
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            if not code_name(node.attr) or node.attr.startswith("_"):
                return None
            if not isinstance(node.value, ast.Name | ast.Attribute):
                return None
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name | ast.Attribute):
                return None
        elif isinstance(node, ast.keyword):
            if node.arg is None or not code_name(node.arg):
                return None
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.USub | ast.UAdd):
                return None
        elif not isinstance(node, (*leaves, ast.Tuple, ast.List, ast.Dict, ast.Set)):
            return None
    own = sorted(name for name in used if name in names)
    imports = sorted(VALUE_IMPORTS[n] for n in used if n in VALUE_IMPORTS and n not in names)
    return ast.unparse(tree), imports, own


CONTENTS = "=="
"""The state entry (call_probe.public_state) of what a dict, list or set holds: asserted by
comparing the object itself, `assert d == {'a': 1}`."""


def writable(seen: Mapping[str, Any]) -> dict[str, Any]:
    """The probe's observation of one call with only what a test can write: the value a
    literal or a `constructed_value` (with `value_imports` and `value_names`; else None: not
    pinned), the entries of the returned object's and the instance's
    state and of the mutated arguments named by a `code_name` (the others are not pinned), and
    an exception whose name is no `code_name` as its nearest built-in base."""
    kept = dict(seen)
    kept.pop("value_names", None)
    if "value" in kept:
        kept["value"] = data_literal(kept["value"])
        built = constructed_value(seen["value"], seen.get("value_names"))
        if kept["value"] is None and built is not None:
            kept["value"], kept["value_imports"], kept["value_names"] = built
    for key in ("attributes", "instance", "mutated"):
        state = seen.get(key)
        if state is None:
            continue
        entries = state.items() if isinstance(state, Mapping) else []
        values = {
            name: data_literal(text)
            for name, text in entries
            if code_name(name) or name == CONTENTS
        }
        # A mutated argument's None says it changed to no literal (which a test cannot pin,
        # but the selection counts); state entries are pinned or left out.
        keep_none = key == "mutated"
        kept[key] = {name: text for name, text in values.items() if text is not None or keep_none}
    if "exception_bases" in seen:
        bases = seen["exception_bases"] if isinstance(seen["exception_bases"], list) else []
        kept["exception_bases"] = [base for base in bases if code_name(base)]
    if seen.get("outcome") == "raised" and not code_name(seen.get("exception")):
        kept["exception"] = (kept.get("exception_bases") or ["Exception"])[0]
        kept["exception_module"] = "builtins"
    return kept


def used_names(text: str) -> list[str]:
    """The module's names a call text uses, in their order, to import: its constructors and the
    functions it passes by name (every name the allow-list let through), each a `code_name`.
    The module of a standard value type (`datetime` of `datetime.date(...)`) is not one:
    `standard_imports`."""
    try:
        tree = ast.parse(f"_({text})", mode="eval")
    except SyntaxError:
        return []
    standard = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in standard]
    found.sort(key=lambda node: node.col_offset)
    builtins = ("_", "slice", *BYTE_BUILDERS, *CALLABLE_BUILTINS)
    names = [n.id for n in found if n.id not in builtins]
    return [name for name in dict.fromkeys(names) if code_name(name)]


def standard_imports(text: str) -> list[str]:
    """The imports of the standard modules a call text builds values through (`import datetime`
    for `datetime.date(2024, 1, 15)`: the only attributes the allow-list lets through)."""
    try:
        tree = ast.parse(f"_({text})", mode="eval")
    except SyntaxError:
        return []
    modules = {
        node.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    }
    return sorted(f"import {module}" for module in modules if module in STANDARD_MODULES)


STANDARD_MODULES = frozenset(dotted.split(".")[0] for dotted in STANDARD_VALUES)
"""The modules of the standard value types an argument may be built with."""


def pattern_literal(message: str) -> str:
    """A string literal of a regular expression matching `message` literally, escaping only
    what regular expressions give a meaning (re.escape also escapes spaces and dashes, which
    makes the message unreadable); raw when it needs a backslash and can be one."""
    pattern = re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", message)
    raw = "\\" in pattern and "'" not in pattern and not pattern.endswith("\\")
    if raw and pattern.isprintable():
        return f"r'{pattern}'"
    return repr(pattern)
