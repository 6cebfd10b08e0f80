"""What a template's values take, and what one step of a template could make, worked out before
it is made: the size bounds of agent templates (templates.py renders within them)."""

from __future__ import annotations

import re
import types
from collections.abc import Callable, ItemsView, Iterable, KeysView, Mapping, ValuesView
from string import Formatter
from typing import Any

from jinja2.exceptions import SecurityError
from jinja2.utils import Namespace

MAX_CHARS = 1024 * 1024
"""Most characters a value a template makes may take, as `str()` shows it (a value held twice
counted twice), and most characters it may render."""
MADE_CHARS = 8 * MAX_CHARS
"""Most characters (references, for lists) all the values one render makes may take together."""
MAX_INT_BITS = 1 << 16
"""Largest integer a template may make (19,729 digits; Python prints at most 4,300)."""
NAMESPACE_CHARS = MAX_CHARS // 8
"""Most characters a `namespace()` may hold. Its attributes can change after it is made, so it
counts as this much wherever it is held: a list made while it was small cannot grow later."""
STRIPTAGS_WORK = 1 << 30
"""Most characters striptags may copy (a second or so)."""
_OTHER_CHARS = 24
"""What counts for a number, None, an iterator or an object `str()` shows by its type."""


class TemplateBoundError(SecurityError):
    """A template broke a bound (size, time or output) on a node; the message says which."""


def refuse_over(chars: int, what: str) -> None:
    if chars > MAX_CHARS:
        raise TemplateBoundError(f"{what} would make more than {MAX_CHARS:,} characters")


def size(value: object, indent: int = 0) -> int:
    """The characters `str(value)` takes (with `indent` more per line and level of nesting, as
    json.dumps or pprint print it); counting stops past MAX_CHARS. Each distinct value is
    visited once: `[a, a]` nested forty times is sized in forty steps, not 2**40."""
    return _size(value, indent, 0, {})


def _size(value: object, indent: int, depth: int, seen: dict[Any, tuple[object, int]]) -> int:
    if isinstance(value, str | bytes | bytearray):
        return len(value)
    if isinstance(value, int):
        return value.bit_length() // 3 + 2
    if isinstance(value, Namespace):
        return NAMESPACE_CHARS
    items: Iterable[object]
    if isinstance(value, Mapping):
        items = (part for pair in value.items() for part in pair)
    elif isinstance(value, ItemsView):
        items = (part for pair in value for part in pair)
    elif isinstance(value, list | tuple | set | frozenset | KeysView | ValuesView):
        items = value
    else:
        return _OTHER_CHARS
    key = (id(value), depth if indent else 0)
    if key in seen:  # met again, or inside itself (printed as [...])
        return seen[key][1]
    seen[key] = (value, 0)  # holds the value, so that its id is not reused meanwhile
    total, per_item = 2, 2 + indent * (depth + 1)
    for item in items:
        # Text and numbers are sized here: a call per item would take a second for a million.
        if isinstance(item, str):
            total += len(item) + per_item
        elif type(item) is int:
            total += item.bit_length() // 3 + 2 + per_item
        else:
            total += _size(item, indent, depth + 1, seen) + per_item
        if total > MAX_CHARS:
            break
    seen[key] = (value, total)
    return total


def _int(value: Any) -> int:
    """An argument that should be a count: any other type fails in the call itself."""
    return value if isinstance(value, int) else 0


def _width(value: Any) -> int:
    """An indent: a count, or the string itself."""
    return len(value) if isinstance(value, str) else _int(value)


def _replaced(text: Any, old: Any, new: Any, count: Any) -> int:
    if not isinstance(text, bytes):
        text, old, new = str(text), str(old), str(new)  # Markup escapes them: 5 times at most
    elif not (isinstance(old, bytes) and isinstance(new, bytes)):
        return 0  # the call fails
    found: int = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * len(new)


def _joined(sep: Any, items: list[Any]) -> int:
    total = size(sep) * max(len(items) - 1, 0)
    for item in items:  # mostly text: sized here, spared a call each
        total += len(item) if isinstance(item, str) else size(item)
    return total


def _fields(length: int, fields: int, widths: list[str], values: list[Any]) -> int:
    """A format string `length` long with `fields` fields, each as wide as the widest width
    (digits, or `*` for one taken from the arguments) and showing the largest argument."""
    numbers = [value for value in values if isinstance(value, int)]
    widest = [int(w[:19]) if w.isdigit() else max(numbers, default=0) for w in widths]
    return length + fields * (max(map(size, values), default=0) + max(widest, default=0))


# The regular expressions here run on text a template made: none may backtrack far, or
# matching 1 MB would take minutes.
_PRINTF = re.compile(r"%[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")
_SPEC_WIDTH = re.compile(r"\d+|\{")


def _printf(fmt: Any, args: Any) -> int:
    """`fmt % args`, and the format filter."""
    if not isinstance(fmt, str | bytes):
        return 0
    text = fmt if isinstance(fmt, str) else fmt.decode("latin-1")
    if isinstance(args, Mapping):  # `%(key)5s`: a key can hold anything, so any number can be
        widths = _DIGITS.findall(text)  # a width (a number in the text counts as one)
        return _fields(len(text), text.count("%"), widths, list(args.values()))
    values = list(args) if isinstance(args, tuple) else [args]
    specs = list(_PRINTF.finditer(text))
    return _fields(len(text), len(specs), [w for m in specs for w in m.groups() if w], values)


def _format(fmt: str, values: list[Any]) -> int:
    """`fmt.format(...)`: a field's spec may take its width from an argument (`{:{width}}`)."""
    try:
        specs = [spec or "" for _, name, spec, _ in Formatter().parse(fmt) if name is not None]
    except ValueError:
        return 0  # the call raises it
    widths = [w if w.isdigit() else "*" for spec in specs for w in _SPEC_WIDTH.findall(spec)]
    return _fields(len(fmt), len(specs), widths, values)


def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)


def _padded(s: Any, a: tuple[Any, ...], k: Mapping[str, Any]) -> int:
    return _int(_arg(a, k, 0, "width"))


def _tabs(s: Any, a: tuple[Any, ...], k: Mapping[str, Any]) -> int:
    tabs: int = s.count("\t") if isinstance(s, str) else s.count(b"\t")
    return len(s) + tabs * _int(_arg(a, k, 0, "tabsize") or 8)


def _translated(s: Any, a: tuple[Any, ...], k: Mapping[str, Any]) -> int:
    table = a[0] if a else None
    longest = max([size(v) for v in table.values()] if isinstance(table, Mapping) else [1])
    return len(s) * longest


def _stripped(value: Any, a: Any = (), k: Any = None) -> int:
    """Markup.striptags (and the filter) copies the text once per tag."""
    text = str(value)
    if text.count("<") * len(text) > STRIPTAGS_WORK:
        raise TemplateBoundError(f"striptags would copy over {STRIPTAGS_WORK:,} characters")
    return len(text)


_METHOD_COSTS: dict[str, Callable[[Any, tuple[Any, ...], Mapping[str, Any]], int]] = {
    "center": _padded,
    "ljust": _padded,
    "rjust": _padded,
    "zfill": _padded,
    "to_bytes": lambda n, a, k: _int(_arg(a, k, 0, "length")),
    "expandtabs": _tabs,
    "replace": lambda s, a, k: _replaced(
        s, _arg(a, k, 0, "old"), _arg(a, k, 1, "new"), _arg(a, k, 2, "count")
    ),
    "translate": _translated,
    "format": lambda s, a, k: _format(s, [*a, *k.values()]),
    "format_map": lambda s, a, k: _format(s, list(a[0].values()) if a else []),
    "striptags": _stripped,
}
"""Built-in methods (of str, bytes, int) that can make far more than they are given."""


def call_cost(
    obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any], what: str
) -> tuple[Any, ...]:
    """Refuses a built-in method call that would make too much. Returns `args`, with what
    `sep.join()` joins listed first (its items sized as they are made, by the other hooks)."""
    if isinstance(obj, types.FunctionType):  # jinja2's wrapper of str.format
        obj = getattr(obj, "__wrapped__", None)
    if not isinstance(obj, types.BuiltinMethodType | types.MethodType):  # Markup's are Python's
        return args
    owner, name = obj.__self__, obj.__name__
    if not isinstance(owner, str | bytes | bytearray | int):
        return args
    if name == "join" and len(args) == 1:
        args = (list(args[0]),)
        refuse_over(_joined(owner, args[0]), what)
    elif name in _METHOD_COSTS:
        refuse_over(_METHOD_COSTS[name](owner, args, kwargs), what)
    return args


def binop_cost(operator: str, left: Any, right: Any) -> None:
    """Refuses strings and sequences repeated or added, integers multiplied or raised, and
    printf-style formatting, that would make too much."""
    what, chars, bits = f"'{operator}'", 0, 0
    if operator == "*" and isinstance(left, int) and not isinstance(right, int):
        left, right = right, left
    if operator == "*" and isinstance(left, int) and isinstance(right, int):
        bits = left.bit_length() + right.bit_length()
    elif operator == "*" and isinstance(left, str | bytes | list | tuple):
        chars = size(left) * max(_int(right), 0)
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        bits = max(abs(left).bit_length() - 1, 0) * right
    elif operator == "+" and isinstance(left, str | bytes | list | tuple):
        chars = size(left) + size(right)
    elif operator == "%":
        chars = _printf(left, right)
    if bits > MAX_INT_BITS:
        raise TemplateBoundError(f"{what} would make an integer of over {MAX_INT_BITS:,} bits")
    refuse_over(chars, what)


def _wrapped(a: dict[str, Any]) -> int:
    text = str(a["s"])
    lines = text.count("\n") + 1 + len(text) // max(_int(a["width"]), 1)
    if not a["break_long_words"]:
        lines = len(text) + 1
    return len(text) + lines * len(str(a["wrapstring"] or "\n"))


def _listed(a: dict[str, Any]) -> int:
    items = a["value"] = list(a["value"])  # a generator: listed once, then joined
    return _joined(a["d"], items)


def _linked(a: dict[str, Any]) -> int:
    """Each word with a `.`, `:` or `@` can become a link, which adds its attributes."""
    text = str(a["value"])
    links = min(sum(map(text.count, ".:@")), len(text.split()))
    attributes = sum(size(a[key]) for key in ("target", "rel", "extra_schemes"))
    return 2 * len(text) + links * (64 + attributes)


def _numeric_start(a: dict[str, Any]) -> int:
    if not isinstance(a["start"], int | float):  # a sum of lists copies them quadratically
        raise TemplateBoundError("the sum filter adds numbers only (start must be a number)")
    return 0


FILTER_COSTS: dict[str, Callable[[dict[str, Any]], int]] = {
    "center": lambda a: _int(a["width"]),
    "batch": lambda a: 4 * _int(a["linecount"]),
    "slice": lambda a: 4 * _int(a["slices"]),
    "indent": lambda a: len(str(a["s"])) + (str(a["s"]).count("\n") + 1) * _width(a["width"]),
    "wordwrap": _wrapped,
    "replace": lambda a: _replaced(a["s"], a["old"], a["new"], a["count"]),
    "join": _listed,
    "format": lambda a: _printf(str(a["value"]), a["kwargs"] or a["args"]),
    "tojson": lambda a: size(a["value"], _width(a["indent"])),
    "pprint": lambda a: size(a["value"], 2),
    "sum": _numeric_start,
    "striptags": lambda a: _stripped(a["value"]),
    "urlize": _linked,
}
"""Filters that can make far more than they are given, by the arguments they were given (all
of them, defaults included, by name)."""
