"""What fix_plan (docstring_fix.py) reads from the code and from pydoclint's messages: the
arguments and class attributes pydoclint expects documented, in its order, the exceptions it
finds raised, the yielded type of an annotation; the lists in its messages (DOC103's and
DOC603's `[name: type, ...]`, DOC503's and DOC203's Python lists). The messages are those of
the pinned pydoclint (0.12.0); the re-check after an edit is the proof either way."""

from __future__ import annotations

import ast
import re
from typing import Any

from remora.bundled_agents.docstring.library.lint import constructor
from remora.bundled_agents.docstring.library.parse import bare_name

ARGUMENT_CODES = frozenset(
    {"DOC101", "DOC102", "DOC103", "DOC104", "DOC105", "DOC109", "DOC110", "DOC111"}
)
RESULT_CODES = frozenset({"DOC201", "DOC202", "DOC203", "DOC402", "DOC403", "DOC404"})
RAISE_CODES = frozenset({"DOC501", "DOC503"})
ATTRIBUTE_CODES = frozenset({"DOC601", "DOC602", "DOC603", "DOC604", "DOC605"})
FIXABLE = ARGUMENT_CODES | RESULT_CODES | RAISE_CODES | ATTRIBUTE_CODES
"""Codes fix_plan may fix; every other code is a finding only."""

ITERATORS = frozenset(
    {"Iterator", "Iterable", "Generator", "AsyncIterator", "AsyncIterable", "AsyncGenerator"}
)


def raised_exceptions(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The exceptions pydoclint finds raised in the function's own body (not nested
    definitions'), sorted: `raise X(...)` and `raise a.b.X` by their names, a bare `raise`
    or `raise e` in `except (A, B) as e` as A and B."""
    found: set[str] = set()

    def visit(node: ast.AST, handler: ast.ExceptHandler | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
            ):
                continue
            if isinstance(child, ast.ExceptHandler):
                visit(child, child)
                continue
            if isinstance(child, ast.Raise):
                found.update(_raise_names(child, handler))
            visit(child, handler)

    visit(function, None)
    return sorted(found)


def _raise_names(node: ast.Raise, handler: ast.ExceptHandler | None) -> list[str]:
    raised = node.exc
    if raised is None:
        return _handler_names(handler)
    if isinstance(raised, ast.Call):
        raised = raised.func
    if isinstance(raised, ast.Attribute):
        return [ast.unparse(raised)]
    if isinstance(raised, ast.Name):
        if handler is not None and handler.name == raised.id:
            return _handler_names(handler)
        return [raised.id]
    return ["(" + ast.unparse(raised) + ")"]


def _handler_names(handler: ast.ExceptHandler | None) -> list[str]:
    if handler is None or handler.type is None:
        return []
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return [ast.unparse(kind) for kind in kinds if isinstance(kind, ast.Name | ast.Attribute)]


def class_attributes(cls: ast.ClassDef, options: dict[str, Any]) -> list[dict[str, str]]:
    """The class-level names pydoclint expects documented, in order, with their annotations."""
    found: list[dict[str, str]] = []
    for statement in cls.body:
        targets: list[tuple[ast.expr, str]] = []
        if isinstance(statement, ast.AnnAssign):
            targets = [(statement.target, ast.unparse(statement.annotation))]
        elif isinstance(statement, ast.Assign):
            targets = [(target, "") for target in statement.targets]
        for target, annotation in targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            for name in names:
                if isinstance(name, ast.Name) and not _ignored_name(
                    name.id, options, "class_attributes"
                ):
                    found.append({"name": name.id, "type": annotation})
    return found


def signature_arguments(
    function: ast.FunctionDef | ast.AsyncFunctionDef, method: bool, options: dict[str, Any]
) -> list[dict[str, str]]:
    """The arguments pydoclint expects documented, in its order: positional, positional-only,
    keyword-only, then *args and **kwargs (named with their stars); no self or cls."""
    arguments = function.args
    listed = [*arguments.args, *arguments.posonlyargs, *arguments.kwonlyargs]
    found = [{"name": a.arg, "type": _annotation(a.annotation)} for a in listed]
    for star, arg in (("*", arguments.vararg), ("**", arguments.kwarg)):
        if arg is not None and options.get("should_document_star_arguments", True):
            found.append({"name": star + arg.arg, "type": _annotation(arg.annotation)})
    names = [d.id for d in function.decorator_list if isinstance(d, ast.Name)]
    static = "staticmethod" in names and "classmethod" not in names[names.index("staticmethod") :]
    if method and not static and found and not found[0]["name"].startswith("*"):
        found = found[1:]
    return [f for f in found if not _ignored_name(bare_name(f["name"]), options, "args")]


def _annotation(node: ast.expr | None) -> str:
    return ast.unparse(node) if node is not None else ""


def argument_renames(
    documented: list[str],
    order: list[str],
    extra: list[str],
    missing: list[str],
    texts: dict[str, str],
) -> dict[str, str]:
    """Entries renamed with the signature: as many extra entries as missing arguments, each
    standing where its argument stands in the signature, and none whose text names its old
    name ("depth: The depth." documents depth, not a renamed height)."""
    if not missing or len(missing) != len(extra):
        return {}
    olds = sorted(extra, key=documented.index)
    news = sorted(missing, key=order.index)
    pairs = list(zip(olds, news, strict=True))
    for old, new in pairs:
        words = set(re.findall(r"[a-z0-9]+", str(texts.get(old) or "").lower()))
        if documented.index(old) != order.index(new) or old.lower() in words:
            return {}
    return dict(pairs)


def named_in_message(message: str, lead: str) -> list[str]:
    """The comma-separated names after `lead` in a message (DOC105's arguments)."""
    at = message.find(lead)
    if at < 0:
        return []
    return [
        name.strip().lstrip("*") for name in message[at + len(lead) :].split(",") if name.strip()
    ]


def _ignored_name(name: str, options: dict[str, Any], kind: str) -> bool:
    stripped = name.strip("_")
    if not stripped:
        return bool(options.get(f"ignore_underscore_only_{kind}", True))
    if name.startswith("__") and name.endswith("__"):
        return bool(options.get(f"ignore_special_dunder_{kind}", kind != "args"))
    if name.startswith("_"):
        return bool(options.get(f"ignore_private_{kind}", kind != "args"))
    return False


def signature_function(
    tree: ast.Module | None, subject: ast.AST | None
) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef | None, bool]:
    """The function whose signature the docstring documents (a class's: its `__init__`), and
    whether it is a method."""
    if tree is None or subject is None:
        return None, False
    if isinstance(subject, ast.ClassDef):
        return constructor(subject), True
    if not isinstance(subject, ast.FunctionDef | ast.AsyncFunctionDef):
        return None, False
    method = any(
        isinstance(node, ast.ClassDef) and any(child is subject for child in node.body)
        for node in ast.walk(tree)
    )
    return subject, method


def yield_type(annotation: ast.expr | None) -> str | None:
    if not isinstance(annotation, ast.Subscript):
        return None
    name = ast.unparse(annotation.value).split(".")[-1]
    if name not in ITERATORS:
        return None
    inner = annotation.slice
    first = inner.elts[0] if isinstance(inner, ast.Tuple) and inner.elts else inner
    return ast.unparse(first)


def exception_like(name: str) -> bool:
    last = name.split(".")[-1]
    return (
        bool(re.fullmatch(r"[A-Za-z_][\w.]*", name))
        and last[:1].isupper()
        and not name.startswith(("self.", "cls."))
    )


def message_difference(
    message: str, first: str, second: str
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The two lists of a DOC103 or DOC603 message: in the `first` but not the `second`, and
    the reverse (`name: type` items)."""
    missing = _items(message, f"in the {first} but not in the {second}: ")
    extra = _items(message, f"in the {second} but not in the {first}: ")
    if not extra:
        extra = _items(message, f"in the {second} but not in the actual class attributes: ")
    return missing, extra


def _items(message: str, lead: str) -> list[dict[str, str]]:
    at = message.find(lead)
    if at < 0:
        return []
    text = _bracketed(message[at + len(lead) :])
    items = []
    for item in _split_top(text):
        name, _, kind = item.partition(":")
        if name.strip():
            items.append({"name": name.strip(), "type": kind.strip()})
    return items


def listed_in_message(message: str, lead: str) -> list[str]:
    """A Python list of strings after `lead: ` in a message (`['str']`)."""
    at = message.find(lead)
    if at < 0:
        return []
    text = _bracketed(message[at + len(lead) :].lstrip(": "))
    try:
        value = ast.literal_eval("[" + text + "]")
    except (ValueError, SyntaxError):
        return []
    return [str(item) for item in value] if isinstance(value, list) else []


def _bracketed(text: str) -> str:
    """What the bracket opening `text` holds (to its matching close)."""
    if not text.startswith("["):
        return ""
    depth = 0
    for index, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth == 0:
            return text[1:index]
    return text[1:]


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return [part.strip() for part in parts]


def default_parameter_title(style: str) -> str:
    return {"google": "Args", "numpy": "Parameters", "sphinx": "param"}[style]


def parse_module(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
