"""Literals in a function's code that make good inputs for it: what the body compares a name
with and the values beside it (`percent > 100` gives 101, 100, 99; through arithmetic and
conversions, `abs(int(n)) % 100 in (11, 12, 13)`), text shaped for the str methods it calls on a
parameter (`startswith("/")` gives "/abc"), quoted examples in its docstring, and the module's
most frequent literals. The syntax tree only (ast)."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Sequence


def docstring_strings(definition: ast.FunctionDef) -> list[str]:
    """Quoted examples in the docstring ("Split a SKU such as "BOLT-0042"..."): values the
    author thought typical."""
    docstring = ast.get_docstring(definition) or ""
    found = re.findall(r"(?<![\w])([\"'])([^\"'\n]{1,40})\1", docstring)
    return list(dict.fromkeys(repr(text) for _, text in found))


def compared_literals(definition: ast.FunctionDef) -> dict[str, list[str]]:
    """For each name the body compares with a number or string: that literal and, for numbers,
    its neighbours (the boundary and both sides of it)."""
    found: dict[str, list[str]] = {}
    for node in ast.walk(definition):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for left, right in itertools.pairwise(operands):
            for name_node, value_node in ((left, right), (right, left)):
                name = subject(name_node)
                constants = [value_node]
                if isinstance(value_node, ast.Tuple | ast.List | ast.Set):
                    constants = list(value_node.elts)  # `x in (11, 12, 13)`
                for constant in constants:
                    if name and isinstance(constant, ast.Constant):
                        found.setdefault(name, []).extend(neighbours(constant.value))
    for name, values in text_shapes(definition).items():
        found.setdefault(name, []).extend(values)
    return {name: list(dict.fromkeys(values)) for name, values in found.items()}


SHAPED_BY = {
    "startswith": lambda part: [part + "abc", part],
    "endswith": lambda part: ["abc" + part, part],
    "split": lambda part: ["a" + part + "b", part + "a" + part + "b"],
    "rsplit": lambda part: ["a" + part + "b"],
    "partition": lambda part: ["a" + part + "b"],
    "rpartition": lambda part: ["a" + part + "b"],
    "find": lambda part: ["a" + part + "b"],
    "index": lambda part: ["a" + part + "b"],
    "count": lambda part: ["a" + part + "b" + part],
    "replace": lambda part: ["a" + part + "b"],
    "strip": lambda part: [part + "abc" + part],
}
"""Text that exercises a str method the body calls on a parameter with a literal:
`pointer.startswith("/")` makes "/abc" (and "/") worth trying, `sku.split("-")` "a-b"."""


def text_shapes(definition: ast.FunctionDef) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for node in ast.walk(definition):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner, method = node.func.value, node.func.attr
        argument = node.args[0] if node.args else None
        if not isinstance(owner, ast.Name) or method not in SHAPED_BY:
            continue
        if not isinstance(argument, ast.Constant) or not isinstance(argument.value, str):
            continue
        if 0 < len(argument.value) <= 10:
            shaped = SHAPED_BY[method](argument.value)
            found.setdefault(owner.id, []).extend(repr(text) for text in shaped)
    return found


def subject(node: ast.expr) -> str:
    """The name a comparison is about: `x`, or the one name in an arithmetic or conversion
    of it (`abs(int(n)) % 100 in (11, 12, 13)` is about `n`: the literals are numbers it
    reaches); not `len(x)` (a length's neighbours are no values of x)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "len":
        return ""
    names = {
        child.id
        for child in ast.walk(node)
        if isinstance(child, ast.Name) and not is_called(child, node)
    }
    numeric = isinstance(node, ast.BinOp | ast.UnaryOp | ast.Call)
    return names.pop() if numeric and len(names) == 1 else ""


def is_called(name: ast.Name, tree: ast.expr) -> bool:
    return any(isinstance(n, ast.Call) and n.func is name for n in ast.walk(tree))


def neighbours(value: object) -> list[str]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int):
        return [repr(value + 1), repr(value), repr(value - 1)]
    if isinstance(value, float):
        return [repr(value + 1.0), repr(value), repr(value - 1.0)]
    if isinstance(value, str) and len(value) <= 40:
        return [repr(value)]
    return []


def words(tree: ast.Module) -> list[str]:
    """The module's one-word string literals (`'person'`, `'sheep'`): the data a text
    function's tables hold (irregular plurals, keywords), each one an input that may take
    another path through those tables than any made-up word. Each top-level statement's in the
    order they appear, taking turns: the first of each, then the second of each (pluralizer's
    irregular words and its uncountable ones alike, where the first forty were all pronouns)."""
    tables = [
        [
            repr(value)
            for *_, value in sorted(
                (node.lineno, node.col_offset, node.value)
                for node in ast.walk(statement)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and 1 < len(node.value) <= 20
                and node.value.isalpha()
            )
        ]
        for statement in tree.body
    ]
    return list(dict.fromkeys(taking_turns(tables)))


def taking_turns(lists: Sequence[Sequence[str]]) -> list[str]:
    """The first of each list, then the second of each, and so on."""
    longest = max((len(items) for items in lists), default=0)
    return [items[i] for i in range(longest) for items in lists if i < len(items)]


def literals(tree: ast.Module) -> list[str]:
    """Short number and string literals anywhere in the module, most frequent first."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
            continue
        value = node.value
        if isinstance(value, int | float) or (
            isinstance(value, str) and 0 < len(value) <= 20 and "\n" not in value
        ):
            counts[repr(value)] = counts.get(repr(value), 0) + 1
    return sorted(counts, key=lambda text: -counts[text])[:40]


MIRRORED = str.maketrans("([{<", ")]}>")


def delimited_texts(module_literals: Sequence[str]) -> list[str]:
    """Text holding a word between a pair of the module's delimiters (`'{{'` and `'}}'`, `'<%'`
    and `'%>'`, `'${'` and `'}'`): what a template engine or a markup parser reads, where the
    delimiters alone, or words without them, never reach a tag's code. At most two, from the
    module's literals most frequent first."""
    texts = [ast.literal_eval(text) for text in module_literals if text[:1] in "'\""]
    found = []
    for opening in [t for t in texts if isinstance(t, str) and 0 < len(t) <= 3]:  # most used first
        brackets = "".join(c for c in opening if c in "([{<")
        if not brackets:
            continue
        for closing in (opening[::-1].translate(MIRRORED), brackets[::-1].translate(MIRRORED)):
            if closing in texts and closing != opening:
                found.append(repr(f"Hello {opening}name{closing}!"))
                break
    return found[:2]


def case_variants(arguments: str) -> list[str]:
    """A call people wrote with its first lower-case word argument in capitals and capitalised
    (`plural('apple')` gives `plural('APPLE')`, `plural('Apple')`): text code branches on case
    (keeping a word's case in what it returns, title-casing), and only the written word is
    sure to be one the code knows."""
    try:
        call = ast.parse(f"_({arguments})", mode="eval").body
    except SyntaxError:
        return []
    assert isinstance(call, ast.Call)
    for node in [*call.args, *(keyword.value for keyword in call.keywords)]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            word = node.value
            if len(word) > 1 and word.isalpha() and word.islower():
                found = []
                for cased in (word.upper(), word.capitalize()):
                    node.value = cased
                    found.append(ast.unparse(call)[2:-1])
                return found
    return []


def shorter(default: str) -> list[str]:
    """A container default's own elements in smaller containers: its first alone, and none
    (`("'",)` and `()` for `("'", '"')`): values of the kind of contents the code reads, tried
    before a generic `(1, 2)`, which gives a tuple of quote characters integers."""
    value = ast.literal_eval(default)
    if not isinstance(value, tuple | list | set | dict) or not value:
        return []
    if isinstance(value, dict):
        return [repr(dict([next(iter(value.items()))])), "{}"]
    items = sorted(value, key=repr) if isinstance(value, set) else list(value)
    return [repr(type(value)(items[:1])), repr(type(value)())]


def literal_kind(text: str) -> str:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError):
        return ""
    return "none" if value is None else type(value).__name__


def fits(value: str, kind: str) -> bool:
    """Whether a literal suits a parameter of `kind` ("" fits anything; an int suits float)."""
    have = literal_kind(value)
    return not kind or have == kind or (kind == "float" and have == "int")
