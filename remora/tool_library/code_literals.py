"""Literals in a function's code that make good inputs for it: what the body compares a name
with and the values beside it (`percent > 100` gives 101, 100, 99; through arithmetic and
conversions, `abs(int(n)) % 100 in (11, 12, 13)`), text shaped for the str methods it calls on a
parameter (`startswith("/")` gives "/abc"), quoted examples in its docstring, and the module's
most frequent literals. The syntax tree only (ast)."""

from __future__ import annotations

import ast
import itertools
import re
import string
from collections.abc import Mapping, Sequence


def quoted_examples(definition: ast.FunctionDef) -> list[str]:
    """Quoted examples in the docstring ("Split a SKU such as "BOLT-0042"...") and in the
    messages it raises ("Please enter a valid number word (eg. 'two million twenty three
    thousand and forty nine')"): values the author thought typical, or valid."""
    docstring = ast.get_docstring(definition) or ""
    found = re.findall(r"(?<![\w])([\"'])([^\"'\n]{1,40})\1", docstring)
    for node in ast.walk(definition):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for text in ast.walk(node.exc):
                if isinstance(text, ast.Constant) and isinstance(text.value, str):
                    found += re.findall(r"(?<![\w])([\"'])([^\"'\n{}%]{2,60})\1", text.value)
    return list(dict.fromkeys(repr(text) for _, text in found))


def compared_literals(definition: ast.FunctionDef) -> dict[str, list[str]]:
    """For each name the body compares with a number or string: that literal and, for numbers,
    its neighbours (the boundary and both sides of it)."""
    found: dict[str, list[str]] = {}
    lengths: dict[str, list[object]] = {}  # `len(data) in [16, 20, 24]`
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
                    elif measured(name_node) and isinstance(constant, ast.Constant):
                        lengths.setdefault(measured(name_node), []).append(constant.value)
    for name, sizes in lengths.items():
        found.setdefault(name, []).extend(sized_values(sizes))
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


def measured(node: ast.expr) -> str:
    """The name whose length a node is (`len(data)`), or ""."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "len" and node.args:
        return node.args[0].id if isinstance(node.args[0], ast.Name) else ""
    return ""


MAX_LENGTH = 64
"""The longest value made to a length the code asks for."""


def sized_values(sizes: Sequence[object]) -> list[str]:
    """Text, a list and bytes of the shortest and the longest of the lengths the code compares
    a name's length with (fill_pools keeps those of its type): mnemonic's `to_mnemonic(data)`
    takes 16 to 32 bytes (`len(data) not in [16, 20, 24, 28, 32]`) and was given only `b'abc'`,
    so its one test was the ValueError."""
    fitting = sorted({n for n in sizes if type(n) is int and 2 <= n <= MAX_LENGTH})
    found = []
    for n in dict.fromkeys(fitting[:1] + fitting[-1:]):
        text = (string.ascii_lowercase * 3)[:n]
        found += [repr(text), repr(list(range(1, n + 1))), repr(text.encode())]
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
    return list(dict.fromkeys(taking_turns([statement_words(s) for s in tree.body])))


def statement_words(statement: ast.stmt) -> list[str]:
    return [
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


def bound_words(trees: Sequence[ast.Module]) -> dict[str, list[str]]:
    """The one-word strings of each module-level assignment, by the names it binds, in the
    module and those it imports from its own package (its first binding of a name counts)."""
    found: dict[str, list[str]] = {}
    for tree in trees:
        for statement in tree.body:
            targets = (
                statement.targets
                if isinstance(statement, ast.Assign)
                else [statement.target]
                if isinstance(statement, ast.AnnAssign)
                else []
            )
            held = statement_words(statement) if targets else []
            for name in (n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
                if held:
                    found.setdefault(name.id, held)
    return found


def read_words(node: ast.AST, bound: Mapping[str, list[str]]) -> list[str]:
    """The one-word strings of the tables `node` reads (`bound`: bound_words): the words a
    class or function looks its input up in (a scale's names, a pluraliser's irregular
    words), where the module's other words may be anything."""
    read = [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    tables = [bound[name] for name in dict.fromkeys(read) if name in bound]
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
    """A call with its first lower-case word argument in capitals, capitalised and in mixed
    case (`plural('man')` gives `plural('MAN')`, `plural('Man')`, `plural('mAN')`): text code
    branches on case (keeping a word's case in what it returns, title-casing), and only a
    word people wrote, or one that took the code somewhere, is sure to be one it knows."""
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
                for cased in (word.upper(), word.capitalize(), word[0] + word[1:].upper()):
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


TABLE_KEYS = 4
"""Keys of a table tried as a parameter's values, at most (and lists of one to that many)."""


def table_keys(definition: ast.FunctionDef, tree: ast.Module) -> dict[str, list[str]]:
    """Keys of the module's dict tables a name is looked up in (`NUMBERS[word]`,
    `NUMBERS.get(word)`, `word in NUMBERS`), and lists of one to TABLE_KEYS of them for a name
    whose items are (`for word in words: NUMBERS[word]`): the only values such code reads on
    past its lookup (word2number's `number_formation(['one'])` and longer; `[1, 2, 3]` raised
    KeyError). Keys whose value is falsy come last: a zero multiplies away what code computes."""
    tables: dict[str, list[object]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Dict):
            pairs = zip(statement.value.keys, statement.value.values, strict=True)
            entries: list[tuple[object, ast.expr]] = [
                (k.value, v) for k, v in pairs if isinstance(k, ast.Constant)
            ]
            zero = [key for key, v in entries if isinstance(v, ast.Constant) and not v.value]
            keys: list[object] = [key for key, _ in entries if key not in zero] + zero
            tables |= {t.id: keys for t in statement.targets if isinstance(t, ast.Name) and keys}
    items = {
        node.target.id: node.iter.id
        for node in ast.walk(definition)
        if isinstance(node, ast.For | ast.comprehension)
        and isinstance(node.target, ast.Name)
        and isinstance(node.iter, ast.Name)
    }
    found: dict[str, list[str]] = {}
    for node in ast.walk(definition):
        pair: tuple[ast.expr, ast.expr] | None = None  # (table, looked up)
        if isinstance(node, ast.Subscript):
            pair = (node.value, node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            pair = (node.func.value, node.args[0]) if node.func.attr == "get" else None
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
            pair = (node.comparators[0], node.left)
        table, looked = pair or (None, None)
        if not (isinstance(table, ast.Name) and isinstance(looked, ast.Name)):
            continue
        keys = tables.get(table.id, [])[:TABLE_KEYS]
        if keys and looked.id in items:
            found.setdefault(items[looked.id], [repr(keys[:n]) for n in range(1, len(keys) + 1)])
        elif keys:
            found.setdefault(looked.id, [repr(key) for key in keys])
    return found
