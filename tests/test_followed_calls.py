"""Objects a call returns are used, as their code is: a combinator's, a factory's result is
tested through a method of its class that reads it (`exactly('abc').match('abc')`), since it
has no value of its own to pin. The call, then the method, run in the probe as one call; a
test names both. Written on a module made for these tests, not on a library of the
benchmark's pool."""

from __future__ import annotations

import ast
import importlib.util
import os
from pathlib import Path

import pytest

import remora.tool_library.call_probe as call_probe
from remora.tool_library.call_candidates import candidate_calls
from remora.tool_library.callable_values import fitting_functions
from remora.tool_library.method_roles import mutators, readers, result_class, returned_function
from remora.tool_library.parameter_types import usage
from remora.tool_library.parameter_values import union_kinds
from tests.test_call_exploration import (
    analyze,
    make_project,
    not_done,
    passes_under_pytest,
    written,
)

PATTERNS = """from typing import Callable, Optional


class Pattern:
    def __init__(self, check: Callable[[str], Optional[str]]):
        self.check = check

    def match(self, text: str) -> str:
        taken = self.check(text)
        if taken is None:
            raise ValueError(f"no match at the start of {text!r}")
        return taken

    def then(self, other: "Pattern") -> "Pattern":
        def both(text):
            first = self.check(text)
            if first is None:
                return None
            second = other.check(text[len(first):])
            return None if second is None else first + second

        return Pattern(both)

    def __or__(self, other: "Pattern") -> "Pattern":
        return Pattern(lambda text: self.check(text) or other.check(text))


def exactly(expected: str) -> Pattern:
    if not isinstance(expected, str):
        raise TypeError("a pattern matches text")

    def check(text):
        return expected if text.startswith(expected) else None

    return Pattern(check)


def first_word(text: str) -> Optional[str]:
    word = text.split(" ")[0]
    return word or None


class Rule:
    def __init__(self, function):
        self.function = function

    def __call__(self, text):
        return self.function(text)


@Rule
def digits(text: str) -> Optional[str]:
    taken = ""
    while taken != text and text[len(taken)].isdigit():
        taken += text[len(taken)]
    return taken or None


def test_pattern(pattern: Pattern, text: str) -> bool:
    return pattern.check(text) is not None
"""


def test_a_returned_object_is_tested_through_the_method_that_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, {"patterns": PATTERNS})
    results = analyze(project, "pkg/patterns.py", capsys, monkeypatch)

    # A function that returns a Pattern: the pattern is used on what it was made of, and on
    # what another call was made of (it turns that away).
    text = written(results["exactly"], "tests/test_patterns_exactly.py", project)
    assert (
        "def test_exactly_then_match_abc():\n    assert exactly('abc').match('abc') == 'abc'\n"
        in text
    )
    assert "        exactly('abc').match('Hello world')\n" in text
    # A combinator method (its result of its own class), an operator written in parentheses.
    text = written(results["Pattern.then"], "tests/test_patterns_Pattern_then.py", project)
    assert ".then(Pattern(" in text and ").match(" in text
    text = written(results["Pattern.__or__"], "tests/test_patterns_Pattern___or__.py", project)
    assert "    assert (pattern | Pattern(" in text and ").match(" in text
    # pytest would collect a function named test_* wherever a test file imported it.
    assert "pytest would run it as a test" in not_done(results["test_pattern"])
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_the_probe_calls_the_reader_on_the_result_and_only_there(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"patterns": PATTERNS})
    spec = importlib.util.spec_from_file_location(
        "probed_patterns", project / "pkg" / "patterns.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = os.path.realpath(str(module.__file__))
    lines = Path(path).read_text().split("\n")
    exactly = {"function": "exactly", "method": None, "lines": [[29, 36]]}

    def observed(request: dict[str, object], call: dict[str, object]) -> dict[str, object]:
        seen: dict[str, object] = call_probe.observe(module, path, lines, request, call, False)
        return seen

    read = observed(exactly, {"arguments": "'ab'", "instance": None, "then": ["match", "'abc'"]})
    assert read["outcome"] == "returned" and read["value"] == "'ab'"
    turned = observed(exactly, {"arguments": "'ab'", "instance": None, "then": ["match", "'x'"]})
    assert turned["outcome"] == "raised" and turned["exception"] == "ValueError"
    # The call itself raised: the candidate without `then` pins that, this one is not made.
    unmade = observed(exactly, {"arguments": "3", "instance": None, "then": ["match", "'x'"]})
    assert unmade["outcome"] == "setup_failed"
    # A name the allow-list let through that a decorator made into an object (`@Rule`).
    match = {"function": "match", "method": "match", "lines": [[8, 12]]}
    built = observed(match, {"arguments": "'12a'", "instance": "Pattern(digits)"})
    assert built["outcome"] == "returned" and built["value"] == "'12'"


def test_result_classes_readers_and_the_calls_followed() -> None:
    tree = ast.parse(PATTERNS)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    methods = {
        node.name: node for node in classes["Pattern"].body if isinstance(node, ast.FunctionDef)
    }
    assert result_class(functions["exactly"], "", classes) == "Pattern"
    assert result_class(methods["then"], "Pattern", classes) == "Pattern"
    assert result_class(functions["first_word"], "", classes) == ""
    # Without an annotation: what every `return` constructs.
    made = ast.parse("def make(n):\n    if n:\n        return Pattern(n)\n    return Pattern(0)\n")
    assert result_class(made.body[0], "", classes) == "Pattern"  # type: ignore[arg-type]
    either = ast.parse("def make(n):\n    if n:\n        return Pattern(n)\n    return None\n")
    assert result_class(either.body[0], "", classes) == ""  # type: ignore[arg-type]
    # `match` reads a pattern; `then` and `__or__` make another; `__init__` is special.
    assert [method.name for method in readers(classes["Pattern"], classes)] == ["match"]

    followed = [c for c in candidate_calls(PATTERNS, "exactly") if c.then]
    assert len(followed) <= 12 and {c.result for c in followed} == {"Pattern"}
    first = followed[0]
    assert (first.arguments, first.then) == ("'abc'", ("match", "'abc'"))
    assert first.followed("exactly") == [("Pattern().match('abc')", "Pattern.match")]
    assert ("'abc'", ("match", "'Hello world'")) in [(c.arguments, c.then) for c in followed]


def test_a_union_of_plain_types_gets_each_members_values_and_callables_their_return() -> None:
    assert union_kinds("str | bytes | list") == ["str", "bytes", "list"]
    assert union_kinds("typing.Union[int, None, float]") == ["int", "float", "none"]
    assert union_kinds("int") == [] and union_kinds("Pattern | Matcher") == []
    # A member of no plain kind gives nothing, the others their values (pluralizer's
    # `rule: str | re.Pattern[str]` was given 3 first, as if it said nothing).
    assert union_kinds("str | re.Pattern[str]") == ["str"]
    assert union_kinds("Pattern | None") == []
    # `Callable[[str], Optional[str]]`: the functions annotated to return that, never one
    # annotated to return another kind (`exactly` makes a Pattern), nor one named test_* (a
    # test file that imports it would have pytest run it).
    assert fitting_functions(ast.parse(PATTERNS), 1, "", "Optional[str]") == [
        "first_word",
        "digits",
    ]
    # The module's class, as `Callable[..., Trie[K, V]]` says: `exactly` only; `Any`, or a
    # TypeVar, says nothing of the kind.
    assert fitting_functions(ast.parse(PATTERNS), 1, "", "Pattern[K]") == ["exactly"]
    every = ["exactly", "first_word", "digits"]
    assert fitting_functions(ast.parse(PATTERNS), 1, "", "Any") == every
    assert fitting_functions(ast.parse(PATTERNS), 1, "", "T") == every


FACTORY = """from typing import Callable, TypeGuard


class Store:
    def __init__(self, **options):
        self.options = options
        self.keys = []

    def add(self, key):
        self.keys.append(str(key))


def is_key(value) -> TypeGuard[str]:
    return isinstance(value, str)


class KeySet:
    def __init__(self, factory: Callable[..., Store] = Store, **options):
        self._store = factory(**options)

    def __len__(self) -> int:
        return len(self._store.keys)
"""


def test_a_factory_parameter_is_given_no_function_that_returns_another_kind() -> None:
    """pygtrie's `PrefixSet(iterable=(), factory: Callable[..., Trie] = Trie)` was built as
    `PrefixSet(factory=_is_not_sentinel)`, a function that returns a bool, and every method
    of it ended with no test. A factory annotated to make a Store is given the default (the
    Store class) or a function that makes one, never `is_key`."""
    cases = [c.case("KeySet.__len__") for c in candidate_calls(FACTORY, "KeySet.__len__")]
    assert cases and not any("is_key" in case for case in cases), cases
    assert "KeySet().__len__()" in cases or "KeySet(factory=Store).__len__()" in cases, cases


DECORATORS = """import functools


def twice(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs) * 2

    return wrapper


def counted(func):
    calls = []

    def wrapper(value: int):
        calls.append(value)
        return (func(value), len(calls))

    return wrapper


def shout(text: str) -> str:
    return text.upper() + "!"


def square(n: int) -> int:
    return n * n
"""


def test_a_decorator_is_applied_to_a_function_and_what_it_returns_is_called(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, {"decorators": DECORATORS})
    results = analyze(project, "pkg/decorators.py", capsys, monkeypatch)

    # A wrapper of *args, **kwargs is called as the function it wraps is (its base call).
    text = written(results["twice"], "tests/test_decorators_twice.py", project)
    assert "def test_twice_func_shout_then_call_abc():\n" in text
    assert "    assert twice(shout)('abc') == 'ABC!ABC!'\n" in text
    assert "    assert twice(square)(3) == 18\n" in text
    # A wrapper with parameters of its own is called with their values.
    text = written(results["counted"], "tests/test_decorators_counted.py", project)
    assert "    assert counted(square)(3) == (9, 1)\n" in text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_the_function_a_function_returns_is_the_one_every_return_gives_back() -> None:
    tree = ast.parse(DECORATORS)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    wrapper = returned_function(functions["twice"])
    assert wrapper is not None and wrapper.name == "wrapper"
    assert returned_function(functions["shout"]) is None
    either = ast.parse(
        "def pick(flag):\n    def a():\n        pass\n    if flag:\n        return a\n"
        "    return None\n"
    )
    assert returned_function(either.body[0]) is None  # type: ignore[arg-type]
    branches = ast.parse(
        "def pick(flag):\n    if flag:\n        def fun(x):\n            return x\n"
        "    else:\n        def fun(x):\n            return -x\n    return fun\n"
    )
    found = returned_function(branches.body[0])  # type: ignore[arg-type]
    assert found is not None and found.name == "fun"


BOARD = """class Board:
    def __init__(self):
        self._rows = []
        self._align = None
        self._width = None

    def add_row(self, cells):
        if self._rows and len(cells) != len(self._rows[0]):
            raise ValueError(f"a row holds {len(self._rows[0])} cells")
        self._rows.append([str(cell) for cell in cells])
        return self

    def add_rows(self, rows):
        for row in rows:
            self.add_row(row)
        return self

    def set_align(self, align):
        if any(a not in ("l", "r") for a in align):
            raise ValueError("align each column 'l' or 'r'")
        self._align = list(align)
        return self

    def draw(self):
        if not self._rows:
            return None
        self._width = [max(len(row[i]) for row in self._rows) for i in range(len(self._rows[0]))]
        align = self._align or ["l"] * len(self._width)
        lines = []
        for row in self._rows:
            cells = [
                cell.ljust(width) if side == "l" else cell.rjust(width)
                for cell, width, side in zip(row, self._width, align)
            ]
            lines.append("| " + " | ".join(cells) + " |")
        return "\\n".join(lines)
"""

BOARD_README = """# board

```
    board = Board()
    board.add_rows([["name", "score"],
                    ["ada", 12],
                    ["bob", 7]])
    board.set_align(["l", "r"])
    print(board.draw())

Result:

    | name | score |
```
"""


def test_a_builders_setter_is_tested_through_what_it_draws_after_the_rows_people_add(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setter that returns its instance keeps its state private: what it did shows only in
    what a reader returns after it, on an instance holding what people put in (the README's
    `add_rows`, written over three lines in a block that is not all code). Without that, the
    setter's only tests were its errors; the empty board draws None whatever was set."""
    classes = {"Board": ast.parse(BOARD).body[0]}
    assert isinstance(classes["Board"], ast.ClassDef)
    # `draw` keeps its widths (it changes the instance) but takes nothing and returns text.
    assert [m.name for m in readers(classes["Board"], classes)] == ["draw"]
    project = make_project(tmp_path, {"board": BOARD})
    (project / "README.md").write_text(BOARD_README)
    results = analyze(project, "pkg/board.py", capsys, monkeypatch)
    text = written(results["Board.set_align"], "tests/test_board_Board_set_align.py", project)
    assert (
        "    board = Board()\n"
        "    board.add_rows([['name', 'score'], ['ada', 12], ['bob', 7]])\n"
        "    assert board.set_align(['l', 'r']).draw() == (\n"
        "        '| name | score |\\n'\n"
        "        '| ada  |    12 |\\n'\n"
        "        '| bob  |     7 |'\n"
        "    )\n"
    ) in text, text
    assert "draw() is None" not in text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


def test_a_parameter_read_item_by_item_is_given_tuples_of_that_many_numbers() -> None:
    """hsluv's `lch_to_luv(_hx_tuple)` reads `_hx_tuple[0]` to `[2]` through `float(...)`: it
    was given `[1, 2]`, `'abc'` and `{'a': 1}`, and its tests pinned the IndexError, ValueError
    and KeyError they raise. Read at positions 0 to n - 1 it is a tuple of n numbers; read at
    0 and 2 only, or also iterated, nothing is said of its length."""
    source = (
        "import math\n\n"
        "def to_polar(point):\n"
        "    x = float(point[0])\n"
        "    y = float(point[1])\n"
        "    return (math.hypot(x, y), math.atan2(y, x))\n\n"
        "def ends(row):\n"
        "    return row[0], row[2]\n\n"
        "def total(items):\n"
        "    return sum(items[i] for i in range(len(items))) + items[0] + items[1]\n"
    )
    polar = [c.arguments for c in candidate_calls(source, "to_polar")]
    assert polar[:2] == ["(0.25, 0.5)", "(1, 2)"], polar
    assert not any(c.arguments.startswith("(0.25") for c in candidate_calls(source, "ends"))
    assert usage(ast.parse(source).body[3]) == {}  # `items` has a length: no fixed size


PROTOCOL = """from typing import Protocol, TypeVar

T = TypeVar("T")


class Copier(Protocol):
    def __call__(self, value: T, /) -> T: ...


def same(value):
    return value


class Box:
    def __init__(self, value=1):
        self.value = value

    def copy(self, make_copy: Copier) -> "Box":
        return Box(self._copied(make_copy))

    def _copied(self, make_copy):
        return make_copy(self.value)
"""


def test_a_callable_protocol_is_given_a_function_never_built() -> None:
    """pygtrie's `_Node.copy(make_copy: _MakeCopy)`, a Protocol whose `__call__` takes one
    value: every call was `copy(_MakeCopy())`, which raised "Protocols cannot be
    instantiated", and its clone methods ended with no test after five model requests each.
    A Protocol is never built; one with `__call__` is a callable of that many arguments."""
    cases = [c.case("Box.copy") for c in candidate_calls(PROTOCOL, "Box.copy")]
    assert cases and not any("Copier(" in case for case in cases), cases
    assert "Box().copy(same)" in cases, cases


SHELF = '''class _Rack:
    def __init__(self):
        self._entries = []

    def _put(self, label, slot):
        if not isinstance(slot, tuple) or len(slot) != 2:
            raise ValueError("a slot is (row, column)")
        self._entries.append((slot, label))


class Shelf(_Rack):
    """Labels kept by slot.

    >>> shelf = Shelf()
    >>> shelf.place('jam', (2, 3))
    """

    def place(self, label, slot):
        self._put(label, slot)

    def at(self, slot):
        return [label for kept, label in self._entries if kept == slot]
'''


def test_what_was_put_in_is_looked_for_by_the_parameter_of_the_same_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`place(label, slot)` fills the shelf through its base's `_put` (a mutator by what it
    calls of its own lineage), and `at(slot)` is asked for the slot it was given, by name, not
    for its first argument (`at('jam')` finds nothing whatever `place` did). Before, `place`
    was no mutator, `at` was only asked of an empty shelf, and `place` pinned nothing."""
    project = make_project(tmp_path, {"shelf": SHELF})
    results = analyze(project, "pkg/shelf.py", capsys, monkeypatch)
    read_back = "    shelf.place('jam', (2, 3))\n    assert shelf.at((2, 3)) == ['jam']\n"
    text = written(results["Shelf.at"], "tests/test_shelf_Shelf_at.py", project)
    assert read_back in text, text
    text = written(results["Shelf.place"], "tests/test_shelf_Shelf_place.py", project)
    assert "    shelf.place('" in text and "    assert shelf.at((2, 3)) == ['" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


LEDGER = """class Ledger:
    def __init__(self, totals=None, table_class: type[dict] = dict):
        self._table = table_class()
        for name, amount in (totals or {}).items():
            self[name] = amount

    def __setitem__(self, name, amount):
        if amount < 0:
            raise ValueError("an amount is never negative")
        self._table[name] = self._table.get(name, 0) + amount

    def credit(self, name, amount):
        self[name] = amount

    def balances(self):
        return sorted(self._table.items())
"""


def test_a_class_parameter_keeps_its_default_and_an_item_set_on_the_instance_fills_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`table_class: type[dict] = dict` is called (`table_class()`), but it is a class: given
    `str` (a builtin a callable gets), every instance broke in its constructor, and flatdict's
    `__setitem__` and `clear` were "not possible". And `credit` fills the ledger through
    `self[name] = amount` (its `__setitem__`): it changes the instance, so `balances()` reads
    it back after; it was no mutator, and its test pinned only None."""
    calls = candidate_calls(LEDGER, "Ledger.credit")
    assert calls and all("table_class" not in str(c.instance) for c in calls), calls
    project = make_project(tmp_path, {"ledger": LEDGER})
    results = analyze(project, "pkg/ledger.py", capsys, monkeypatch)
    text = written(results["Ledger.credit"], "tests/test_ledger_Ledger_credit.py", project)
    assert ".credit(" in text and ".balances() == [(" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


TAGS = """class _Paths:
    def __init__(self):
        self._root = {}

    def _set_path(self, word):
        node = self._root
        for letter in word:
            node = node.setdefault(letter, {})
        node["."] = True

    def has(self, word):
        node = self._root
        for letter in word:
            if letter not in node:
                return False
            node = node[letter]
        return "." in node

    def words(self, node=None, prefix=""):
        node = self._root if node is None else node
        found = [prefix] if "." in node else []
        for letter in sorted(key for key in node if key != "."):
            found += self.words(node[letter], prefix + letter)
        return found


class Tags:
    def __init__(self):
        self._paths = _Paths()

    def add(self, word):
        self._paths._set_path(word)

    def clear(self):
        self._paths = _Paths()

    def __contains__(self, word):
        return self._paths.has(word)

    def __iter__(self):
        return iter(self._paths.words())
"""


def test_a_container_filled_through_what_it_holds_is_read_back_through_its_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`add` puts the word in through `self._paths._set_path(word)` (a method named for
    setting, of an object the instance holds, which sets through the node it walked to), so
    it is a mutator; `Tags` has no public method that gives a value back (`clear` returns
    nothing: no reader), so what `add` did is read through `list(tags)` and `in`. pygtrie's
    `PrefixSet.add` and `Trie.__setitem__` pinned nothing."""
    tree = ast.parse(TAGS)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assert [m.name for m in mutators(classes["Tags"], classes)] == ["add", "clear"]
    assert [m.name for m in mutators(classes["_Paths"], classes)] == []  # `_set_path`: private
    assert [m.name for m in readers(classes["Tags"], classes)] == ["__iter__", "__contains__"]
    project = make_project(tmp_path, {"tags": TAGS})
    results = analyze(project, "pkg/tags.py", capsys, monkeypatch)
    text = written(results["Tags.add"], "tests/test_tags_Tags_add.py", project)
    assert "    tags.add('" in text and "    assert list(tags) == ['" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)


TALLY = """class Tally(dict):
    def __setitem__(self, key, count):
        if not isinstance(key, str):
            raise TypeError("a key is text")
        super().__setitem__(key, count)
"""


def test_of_a_mutator_the_call_that_changed_the_instance_is_kept_not_the_one_that_did_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tally['a'] = 3` on a Tally holding `'a': 3` takes every branch and changes nothing;
    the branch cover chose it alone of the calls that returned, and a test of it asserts
    nothing (addict's `Dict.__setitem__` was "not possible"). The call that put a new key in
    is kept."""
    project = make_project(tmp_path, {"tally": TALLY})
    results = analyze(project, "pkg/tally.py", capsys, monkeypatch)
    text = written(results["Tally.__setitem__"], "tests/test_tally_Tally___setitem__.py", project)
    assert "    assert tally == {" in text, text
    assert "passed" in passes_under_pytest(project / "tests", tmp_path)
