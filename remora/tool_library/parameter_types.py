"""What a parameter holds, as its docstring, its use in the function's body and its name say,
where it has no annotation: a type the docstring gives it (`:type word: string`, `word (str):`,
`word : str`), a str-only method called on it makes it text, arithmetic a number (`+` and `*`
only with a literal: `prefix + line` of two names may join text), iterating over it a list; a
parameter passed on to another function of the module, or to another method of its class, is
what it is there. The syntax tree (ast) and the docstring (docstring_parser)."""

from __future__ import annotations

import ast
import copy
import re

import docstring_parser

from remora.tool_library.value_flow import stored_attributes

STR_METHODS = frozenset(dir(str)) - frozenset(dir(list)) - frozenset(dir(dict))
LIST_METHODS = frozenset({"append", "extend", "insert", "sort", "pop", "remove"})
DICT_METHODS = frozenset({"items", "keys", "values", "get", "setdefault", "update"})


def by_name(names_of: dict[str, str]) -> dict[str, str]:
    """Each name's kind, from each kind's names (space-separated)."""
    return {name: kind for kind, names in names_of.items() for name in names.split()}


NAMED_TYPES = by_name(
    {
        "str": "name text path sku key label title word prefix suffix sep separator line s msg "
        "fname",
        "int": "count n size number index width quantity amount limit i k ms millis",
        "float": "price rate ratio factor seconds secs timeout delay interval",
        "list": "items values elements sequence seq array rows",
    }
)
"""What an unannotated parameter's name says it holds, where its use says nothing."""
FLAG_PREFIXES = ("is_", "has_", "should_", "use_", "allow_")
"""A name that asks a yes-or-no question, or says whether to use or allow something, holds a
bool (chevron's `is_standalone` was given `[1, 2]`, rfc3339's `use_system_timezone` `3`)."""
TEXT_ARGUMENTS = frozenset(
    {"split", "rsplit", "startswith", "endswith", "find", "rfind", "rindex", "replace"}
    | {"partition", "rpartition", "removeprefix", "removesuffix"}
)
"""str methods whose first argument is text too: `template.split(r_del, 1)` makes `r_del` text
(not `index` and `count`: a list's too)."""


DOCUMENTED_TYPES = by_name(
    {
        "str": "str string unicode basestring text",
        "int": "int integer long",
        "float": "float",
        "bool": "bool boolean",
        "list": "list sequence iterable",
        "tuple": "tuple",
        "dict": "dict dictionary mapping",
        "set": "set",
        "bytes": "bytes",
    }
)
"""The kind a docstring's type names (reST, Google and numpydoc docstrings of code written
before annotations: durations' `:type str_representation: string`)."""


def documented(definition: ast.FunctionDef) -> dict[str, str]:
    """The kind of each parameter whose docstring entry gives one of DOCUMENTED_TYPES as its
    first word (`string`, `list of int`, `str, optional`; not `str or None`, a choice)."""
    try:
        parsed = docstring_parser.parse(ast.get_docstring(definition) or "")
    except (docstring_parser.ParseError, ValueError):
        return {}
    found = {}
    for entry in parsed.params:
        words = re.findall(r"[\w.]+", (entry.type_name or "").lower())
        if words and " or " not in f" {' '.join(words)} ":
            kind = DOCUMENTED_TYPES.get(words[0].rpartition(".")[2], "")
            if kind:
                found[entry.arg_name] = kind
    return found


def named_type(name: str) -> str:
    """The kind an unannotated parameter's name says it holds, or "": the name, a flag's
    prefix, or the name's last word of two letters or more (retrying's `attempt_number` and
    `delay_since_first_attempt_ms` were given `'abc'`; `total_s` says nothing)."""
    last = name.rsplit("_", 1)[-1]
    flag = "bool" if name.startswith(FLAG_PREFIXES) else ""
    return NAMED_TYPES.get(name) or flag or (NAMED_TYPES.get(last, "") if len(last) > 1 else "")


def annotation(arg: ast.arg) -> str:
    return ast.unparse(arg.annotation) if arg.annotation is not None else ""


def names_a_class(text: str) -> bool:
    """Whether an annotation takes a class itself (`type[dict]`, `Type[Node]`): called, it
    builds an instance, and its default is the class to use (flatdict's `dict_class`)."""
    return re.match(r"(typing\.)?[Tt]ype\[", text) is not None


def usage(definition: ast.FunctionDef) -> dict[str, str]:
    """The type each name's use in the body suggests: a str-only method called on it, a list
    or dict method, arithmetic with it, iterating over it; a string key (`mdict['hours']`)
    says dict whatever else it is given (`mdict.pop(...)` is a list's method too); a name read
    only at the positions 0 to n - 1 (`rgb[0]`, `rgb[1]`, `rgb[2]`), where nothing else says
    what it is, a tuple of n values (`tuple[3]`: hsluv's `lch_to_luv(_hx_tuple)` was given
    `[1, 2]` and `'abc'`, and its tests pinned the IndexError and ValueError they raise)."""
    found: dict[str, str] = {}
    positions: dict[str, set[object]] = {}  # the constants each name is subscripted with
    attributes: dict[str, set[str]] = {}  # what is read of each name: `d.year`, `td.days`
    for node in ast.walk(definition):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            # `items[i]` or `len(items)` reads a length of its own: no fixed size (None).
            held = node.slice.value if isinstance(node.slice, ast.Constant) else None
            positions.setdefault(node.value.id, set()).add(held)
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "len" and node.args:
            positions.setdefault(ast.unparse(node.args[0]), set()).add(None)
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Name):
            # `l_del == '{{'`, `mode in ('r', 'w')`: compared with text, so text
            compared = [
                c.elts if isinstance(c, ast.Tuple | ast.List | ast.Set) else [c]
                for c in node.comparators
            ]
            if all(
                isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops
            ) and all(
                isinstance(c, ast.Constant) and isinstance(c.value, str)
                for group in compared
                for c in group
            ):
                found.setdefault(node.left.id, "str")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in TEXT_ARGUMENTS
            and node.args
            and isinstance(node.args[0], ast.Name)
            and not isinstance(getattr(node.func.value, "value", None), bytes)  # `b'a'.find(x)`
        ):
            found.setdefault(node.args[0].id, "str")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            name, attribute = node.value.id, node.attr
            attributes.setdefault(name, set()).add(attribute)
            if attribute in STR_METHODS:
                found.setdefault(name, "str")
            elif attribute in DICT_METHODS:
                found.setdefault(name, "dict")
            elif attribute in LIST_METHODS:
                found.setdefault(name, "list")
        elif isinstance(node, ast.BinOp) and not isinstance(node.op, ast.Mod):
            for operand, other in ((node.left, node.right), (node.right, node.left)):
                # `prefix + line` joins text as often as it adds numbers: only a literal on the
                # other side says which (textwrap's `indent` was given `prefix=3`).
                unknown = isinstance(node.op, ast.Add | ast.Mult) and not isinstance(
                    other, ast.Constant
                )
                if isinstance(operand, ast.Name) and not unknown:
                    # `"  +--" + label` joins text; `"-" * n` not
                    value = other.value if isinstance(other, ast.Constant) else None
                    joined = isinstance(node.op, ast.Add) and isinstance(value, str | bytes)
                    found.setdefault(operand.id, type(value).__name__ if joined else "int")
        elif isinstance(node, ast.For | ast.comprehension) and isinstance(node.iter, ast.Name):
            found.setdefault(node.iter.id, "list")
        elif (  # `for i, x in enumerate(array)`: iterated too
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ITERATING
            and node.args
            and isinstance(node.args[0], ast.Name)
        ):
            found.setdefault(node.args[0].id, "list")
    for name, read in positions.items():
        if 2 <= len(read) <= MAX_POSITIONS and read == set(range(len(read))):
            found.setdefault(name, f"tuple[{len(read)}]")
    # `mdict['hours']`: only a mapping takes a string key.
    keyed = [name for name, read in positions.items() if any(isinstance(k, str) for k in read)]
    temporal = {name: temporal_kind(read) for name, read in attributes.items()}
    return found | dict.fromkeys(keyed, "dict") | {n: k for n, k in temporal.items() if k}


TEMPORAL = {  # what each reads of its own, then all it has (`d.replace(...)` is a str's too)
    "datetime.timedelta": ({"days", "seconds", "microseconds"}, {"total_seconds"}),
    "datetime.date": ({"year", "month", "day"}, {"weekday", "isoweekday", "isoformat",
                      "isocalendar", "strftime", "toordinal", "replace", "timetuple", "ctime"}),
    "datetime.datetime": ({"year", "month", "day", "hour", "minute", "second", "microsecond",
                          "tzinfo"}, {"fold", "utcoffset", "timestamp", "date", "time", "dst",
                          "astimezone", "tzname", "utctimetuple"}),
}  # fmt: skip
"""The standard temporal types by what code reads of them, the narrowest first."""


def temporal_kind(read: set[str]) -> str:
    """The temporal type (TEMPORAL) whose attributes are all a name's reads, where one of them
    is its own (`d.year`, `d.hour`, `d.isoformat()`: a datetime; `td.days`: a timedelta), or
    "": rfc3339's `_string(d)` read `d.year` to `d.second` and was given `3` and `'abc'`."""
    has: set[str] = set()
    for kind, (own, more) in TEMPORAL.items():
        has = (has if kind != "datetime.timedelta" else set()) | own | more
        if read & own and read <= has:
            return kind
    return ""


MAX_POSITIONS = 6
"""Positions a tuple read item by item has, at most (a colour's three, a box's four)."""


def sized_tuples(size: int) -> list[str]:
    """Tuples of `size` numbers (what a colour's or a point's items are turned into with
    `float(...)`, or computed with; words there only raise what a reviewer deletes)."""
    return [
        repr(tuple(round(0.25 * (i + 1), 2) for i in range(size))),
        repr(tuple(range(1, size + 1))),
    ]


ITERATING = frozenset({"enumerate", "zip", "sorted", "reversed"})
"""Builtins whose first argument is iterated (not `list()` or `len()`: a string is given them
as often)."""


def callee_usage(
    definition: ast.FunctionDef, tree: ast.Module | None, owner: ast.ClassDef | None = None
) -> dict[str, str]:
    """What a parameter passed on to another function of the module, or to another method of
    its class `owner` through `self`, is used as or documented as there
    (`toposort_flatten(data)` calls `toposort(data)`, which calls `data.items()`; durations'
    `Scale.__init__` passes `str_representation` to `self.get`, whose docstring says string)."""
    functions = {n.name: n for n in (tree.body if tree else []) if isinstance(n, ast.FunctionDef)}
    methods = {n.name: n for n in (owner.body if owner else []) if isinstance(n, ast.FunctionDef)}
    receiver = [a.arg for a in definition.args.args[:1]] if owner else []
    found: dict[str, str] = {}
    for node in ast.walk(definition):
        if not isinstance(node, ast.Call):
            continue
        callee, skipped = None, 0
        if isinstance(node.func, ast.Name):
            callee = functions.get(node.func.id)
        elif (
            isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and [node.func.value.id] == receiver
        ):
            callee = methods.get(node.func.attr)
            static = callee is not None and "staticmethod" in map(
                ast.unparse, callee.decorator_list
            )
            skipped = 0 if static else 1  # its own `self` is not passed
        if callee is None or callee is definition:
            continue
        names = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]][skipped:]
        uses = usage(callee) | documented(callee)
        for position, argument in enumerate(node.args[: len(names)]):
            if isinstance(argument, ast.Name) and uses.get(names[position]):
                found.setdefault(argument.id, uses[names[position]])
    return kept_usage(definition, owner) | found


def kept_usage(definition: ast.FunctionDef, owner: ast.ClassDef | None) -> dict[str, str]:
    """What a constructor's parameter kept as `self.x = x` is used as by the class's other
    methods (`self.store[key]`, `self.store.keys()`): pylru's `WriteThroughCacheManager(store,
    size)` was given `store=3`, and every call of it raised AttributeError."""
    if owner is None or definition.name != "__init__":
        return {}
    kept = {a: name for a, name in stored_attributes(definition).items() if name != "self"}
    found: dict[str, str] = {}
    for method in owner.body:
        if isinstance(method, ast.FunctionDef) and method is not definition and kept:
            read = _AsNames(kept).visit(copy.deepcopy(method))
            found = usage(read) | found
    return {name: kind for name, kind in found.items() if name in kept.values()}


class _AsNames(ast.NodeTransformer):
    """`self.store` read as the name of the parameter it keeps (`store`), for `usage`."""

    def __init__(self, kept: dict[str, str]) -> None:
        self.kept = kept

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in self.kept:
            return ast.copy_location(ast.Name(self.kept[node.attr], ast.Load()), node)
        return self.generic_visit(node)


def keyed_dicts(definition: ast.FunctionDef) -> dict[str, list[str]]:
    """Dicts holding the string keys the body reads of a parameter (`matches['tz_hour']`,
    `matches.get('timezone')`, `'sign' in matches`), each key given the literal the body
    compares its value with (`matches['timezone'] == 'Z'`), else `'1'` (text a regular
    expression's group holds, which `int()` reads too); then every key `'1'`, then `1`: the
    records a parser's groups or a configuration hand the function, where `{'a': 1}` reached
    no key it reads."""
    names = {a.arg for a in [*definition.args.posonlyargs, *definition.args.args]}
    names |= {a.arg for a in definition.args.kwonlyargs}
    keys: dict[str, dict[str, str]] = {}

    def read(node: ast.AST) -> tuple[str, str] | None:  # (parameter, key) of `p['k']`...
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            holder, key = node.value.id, node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop")
            and isinstance(node.func.value, ast.Name)
            and node.args
        ):
            holder, key = node.func.value.id, node.args[0]
        else:
            return None
        if holder in names and isinstance(key, ast.Constant) and isinstance(key.value, str):
            return holder, key.value
        return None

    for node in ast.walk(definition):
        found = read(node)
        if found is not None:
            keys.setdefault(found[0], {}).setdefault(found[1], "")
        if not isinstance(node, ast.Compare) or len(node.comparators) != 1:
            continue
        left, right, operator = node.left, node.comparators[0], node.ops[0]
        if isinstance(operator, ast.In | ast.NotIn) and isinstance(right, ast.Name):
            if right.id in names and isinstance(left, ast.Constant) and isinstance(left.value, str):
                keys.setdefault(right.id, {}).setdefault(left.value, "")  # `'sign' in matches`
        elif isinstance(operator, ast.Eq | ast.NotEq):
            for value, other in ((left, right), (right, left)):
                found = read(value)
                if found is not None and isinstance(other, ast.Constant):
                    held = keys.setdefault(found[0], {})
                    held[found[1]] = held.get(found[1]) or repr(other.value)
    dicts: dict[str, list[str]] = {}
    for name, held in keys.items():
        texts = [", ".join(f"{k!r}: {v or repr('1')}" for k, v in held.items())]
        texts += [", ".join(f"{k!r}: {plain}" for k in held) for plain in ("'1'", "1")]
        dicts[name] = list(dict.fromkeys("{" + text + "}" for text in texts))
    return dicts
