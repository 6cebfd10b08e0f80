"""Values of the standard library's value types, for parameters that take one.

A parameter annotated `uuid.UUID` (or `_uu.UUID` after `import uuid as _uu`, or `date` after
`from datetime import date`), or one the body checks with `isinstance(x, UUID)`, is given
instances written through the type's module, `uuid.UUID('12345678-...')`: a test file imports
that module (`import uuid`), and the name can never be one of the module's own (test_cases'
allow-list admits only these calls, with literal arguments, and only where the module under test
defines no function or class of the module's name). The types are those whose repr a test can
also pin (call_probe.VALUE_TYPES, case_checks.VALUE_IMPORTS), and the streams a reader or writer
takes (`io.StringIO` for `TextIO`, `io.BytesIO` for `BinaryIO`); the values are ones a reader
recognises.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

STANDARD_VALUES: dict[str, list[str]] = {
    "uuid.UUID": [
        "uuid.UUID('12345678-1234-5678-1234-567812345678')",
        "uuid.UUID(int=0)",
        "uuid.UUID('6ba7b810-9dad-11d1-80b4-00c04fd430c8')",
    ],
    "datetime.date": [
        "datetime.date(2024, 1, 15)",
        "datetime.date(2000, 2, 29)",
        "datetime.date(1999, 12, 31)",
    ],
    "datetime.datetime": [
        "datetime.datetime(2024, 1, 15, 10, 30)",
        "datetime.datetime(2000, 2, 29, 23, 59, 59)",
        "datetime.datetime(1970, 1, 1, 0, 0)",
    ],
    "datetime.time": ["datetime.time(10, 30)", "datetime.time(0, 0)", "datetime.time(23, 59, 59)"],
    "datetime.timedelta": [
        "datetime.timedelta(days=1)",
        "datetime.timedelta(hours=1, minutes=30)",
        "datetime.timedelta(0)",
        "datetime.timedelta(days=-1)",
    ],
    "datetime.timezone": ["datetime.timezone(datetime.timedelta(hours=1))"],
    "decimal.Decimal": [
        "decimal.Decimal('1.5')", "decimal.Decimal('0')", "decimal.Decimal('-2.25')"
    ],
    "fractions.Fraction": [
        "fractions.Fraction(1, 3)", "fractions.Fraction(0)", "fractions.Fraction(-3, 4)"
    ],
    # Streams a reader or writer is given: text, and bytes with a high bit set (varint and
    # other binary decoders read on while it is set).
    "io.StringIO": [
        "io.StringIO('abc')", "io.StringIO('line one\\nline two\\n')", "io.StringIO('')"
    ],
    "io.BytesIO": ["io.BytesIO(b'abc')", "io.BytesIO(b'\\xff\\x01')", "io.BytesIO(b'')"],
}  # fmt: skip
"""Values by the type's dotted name, the most ordinary first."""
BYTE_BUILDERS = ("bytearray", "memoryview")
"""The builtins an argument of bytes may be built with besides the types above: of one bytes
literal (a bytearray also of a list of integers; test_cases.check_value), no import."""
CALLABLE_BUILTINS: dict[str, range] = {"str": range(2), "len": range(1, 2)}
"""Builtins a callable parameter is given where the module has no function it can call with
that many arguments (callable_values.fitting_functions), by how many they take: `str` for a
key, a receiver or a formatter, `len` for a size. Real functions a reader knows, written by
name with no import (test_cases' allow-list; call_probe.PASSED_BUILTINS binds them and writes
a value that is one of them by its name: `[str]`)."""
STREAMS = {"BinaryIO": "io.BytesIO", "IO[bytes]": "io.BytesIO", "TextIO": "io.StringIO",
           "IO[str]": "io.StringIO"}  # fmt: skip
"""typing's stream annotations, by the stream a test builds for them."""


def imported_names(tree: ast.Module) -> dict[str, str]:
    """What each name the module imports stands for, dotted: `import uuid as _uu` gives
    {"_uu": "uuid"}, `from datetime import date` {"date": "datetime.date"} (anywhere in the
    module: an import under `if TYPE_CHECKING:` names annotations too)."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = alias.name
                else:  # `import a.b` binds `a`
                    top = alias.name.split(".")[0]
                    found[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def standard_type(text: str, imports: Mapping[str, str]) -> str:
    """The STANDARD_VALUES type an annotation (or isinstance's class) names, or "": its
    Optional/`| None` read as its other member, its head resolved through the module's imports."""
    text = text.strip().strip("'\"").replace("typing.", "")
    match = re.fullmatch(r"Optional\[(.*)\]", text)
    if match:
        text = match.group(1)
    parts = [part.strip() for part in text.split("|") if part.strip() != "None"]
    if len(parts) == 1:  # `BinaryIO`, `IO[bytes]`, `from typing import TextIO`
        parts[0] = STREAMS.get(imports.get(parts[0], parts[0]).replace("typing.", ""), parts[0])
    if len(parts) != 1 or not re.fullmatch(r"[A-Za-z_][\w.]*", parts[0]):
        return ""
    if parts[0] in STANDARD_VALUES and "." in parts[0]:  # written through its module
        return parts[0]
    head, _, rest = parts[0].partition(".")
    dotted = imports.get(head, head) + (f".{rest}" if rest else "")
    return dotted if dotted in STANDARD_VALUES else ""


def union_members(text: str) -> list[ast.expr]:
    """An annotation's members: those of `Union[...]`, `Optional[...]` and `a | b | c`, else
    the annotation alone; [] where it is not Python."""
    try:
        node = ast.parse(text.replace("typing.", "") or "_", mode="eval").body
    except SyntaxError:
        return []
    members: list[ast.expr] = [node]
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("Union", "Optional"):
        members = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    while any(isinstance(m, ast.BinOp) for m in members):  # `a | b | c`: ((a | b) | c)
        members = [
            p for m in members for p in ([m.left, m.right] if isinstance(m, ast.BinOp) else [m])
        ]
    return members


SCALARS = frozenset({"str", "bytes", "int", "float", "bool"})


def contradicts_elements(value: str, annotation: str) -> bool:
    """Whether a list, tuple or set literal holds items the annotation's containers do not:
    `[1, 2, 3]` for `str | Iterable[str] | Iterable[bytes]` (itsdangerous's `_make_keys_list`
    returned it unchanged, and its test pinned a call the annotation rules out). Only where
    every subscripted member names one scalar item type (`dict[str, int]` says nothing here)."""
    allowed: set[str] = set()
    for member in union_members(annotation):
        if isinstance(member, ast.Subscript):
            item = member.slice
            if not (isinstance(item, ast.Name) and item.id in SCALARS):
                return False
            allowed.add(item.id)
    try:
        held = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    if not allowed or not isinstance(held, list | tuple | set) or not held:
        return False
    return not any(type(item).__name__ in allowed for item in held)


def union_standard_types(text: str, imports: Mapping[str, str]) -> list[str]:
    """The STANDARD_VALUES types among a union's members, in its order (`Union[datetime,
    timedelta, int, float]`: datetime.datetime, datetime.timedelta), or []."""
    members = union_members(text)
    found = [standard_type(ast.unparse(member), imports) for member in members]
    return [name for name in dict.fromkeys(found) if name] if len(members) > 1 else []


def isinstance_checks(definition: ast.FunctionDef) -> dict[str, str]:
    """The class each name is checked against with `isinstance(name, C)` in the body (the
    first of a tuple of classes), as written: a valid input is one of those."""
    found: dict[str, str] = {}
    for node in ast.walk(definition):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Name)
        ):
            continue
        kind = node.args[1]
        if isinstance(kind, ast.Tuple) and kind.elts:
            kind = kind.elts[0]
        if isinstance(kind, ast.Name | ast.Attribute):
            found.setdefault(node.args[0].id, ast.unparse(kind))
    return found
