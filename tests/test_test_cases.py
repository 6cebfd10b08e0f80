"""parse_test_case, the test agent's allow-list of cases: what it accepts (and the text it
regenerates for rendering), and what it refuses, hostile proposals first."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from remora.tool_library.test_cases import MAX_DEPTH, MAX_NODES, parse_test_case

MODULE = """
import os


class Widget:
    def __init__(self, size=0, label=""):
        self.size = size


class BadSku(Exception):
    pass


def f(a, b=0, *rest, **options):
    return a


async def g(a):
    return a


class Holder:
    def method(self):
        return 1
"""


def fullwidth(text: str) -> str:
    """`text` in fullwidth letters, which Python's NFKC folding reads as ASCII identifiers."""
    return "".join(chr(ord(char) + 0xFEE0) for char in text)


HOSTILE = 'f((x for x in [1]).gi_frame.f_builtins["exec"]("print(1)") or 100, 10)'
"""The reproduced finding: exec reached through a generator frame, past the old deny-list."""


@pytest.mark.parametrize(
    ("case", "kind", "call", "expected", "names"),
    [
        ("f(1, 2) == 3", "equals", "f(1, 2)", "3", ["f"]),
        ('assert f("a", b=-1.5) == 2.5', "approx", 'f("a", b=-1.5)', "2.5", ["f"]),  # as written
        ("f(1) == -0.5", "approx", "f(1)", "-0.5", ["f"]),
        ("f(1) == (1+2j)", "equals", "f(1)", "1+2j", ["f"]),
        ("f(1) == {'a': [1, (2, None)], 3: {b'x'}}", "equals", "f(1)", None, ["f"]),
        (
            "f(Widget(3)) raises BadSku",
            "raises",
            "f(Widget(3))",
            "BadSku",
            ["f", "Widget", "BadSku"],
        ),
        ("f(Widget(size=1, label='x'), Widget()) == 1", "equals", None, "1", ["f", "Widget"]),
        (
            "f([1, (2,)], {'a': {1}}, b'x', None, True) raises ValueError",
            "raises",
            None,
            "ValueError",
            ["f"],
        ),
        ("f(1) raises ZeroDivisionError", "raises", "f(1)", "ZeroDivisionError", ["f"]),
        ("f(-1, +2.5, -3j, 1e309)", "call", "f(-1, +2.5, -3j, 1e309)", "", ["f"]),
        ("f(1, b=2, extra='x')", "call", "f(1, b=2, extra='x')", "", ["f"]),
        ("f(slice(1, -3, None)) == [2]", "equals", "f(slice(1, -3, None))", "[2]", ["f"]),
        ('f(" raises X")', "call", 'f(" raises X")', "", ["f"]),  # the keyword inside a string
        ('f("caf\u00e9")', "call", "f('caf\u00e9')", "", ["f"]),  # not ASCII: unparsed
        ("f(1)  # a comment is not rendered", "call", "f(1)", "", ["f"]),
        (fullwidth("f") + "(1)", "call", "f(1)", "", ["f"]),  # NFKC-folded, rendered unparsed
        ("f('" + "a" * 400 + "')", "call", None, "", ["f"]),
        ("f(" + "[" * 8 + "]" * 8 + ")", "call", None, "", ["f"]),
    ],
)
def test_accepted_cases_are_regenerated_from_the_tree(
    case: str, kind: str, call: str | None, expected: str | None, names: list[str]
) -> None:
    parsed = parse_test_case(case, "f", MODULE)
    assert parsed["kind"] == kind
    assert parsed["names"] == names
    if call is not None:
        assert parsed["call"] == call
    if expected is not None:
        assert parsed["expected"] == expected
    # What a script renders is plain Python, and reading it back gives the same case.
    ast.parse(parsed["call"], mode="eval")
    assert parse_test_case(parsed["case"], "f", MODULE) == parsed


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        (HOSTILE, "'and'/'or' cannot be part of a case"),
        ("f((x for x in [1]).gi_frame, 10)", "attribute access"),
        ("f(x for x in [1])", "generator expressions"),
        ("f(__import__('os').system('id'))", "calling __import__('os').system"),
        ("f(__import__('os'))", "calling __import__"),
        ("f(getattr(Widget, 'size'))", "calling getattr"),
        ("f(eval('1'))", "calling eval"),
        ("f(lambda: 1)", "lambdas"),
        ("f([x for x in 'ab'])", "comprehensions"),
        ("f({x: 1 for x in 'ab'})", "comprehensions"),
        ("f(''.join(['a']))", "calling ''.join"),
        ("f(().__class__)", "attribute access"),
        ("f((1).real)", "attribute access"),
        ("f(Widget(1).size)", "attribute access"),
        ("f(os.getcwd())", "calling os.getcwd"),
        ("f([1, 2][0])", "subscripts"),
        ("f('a' * 10 ** 9)", "operators"),
        ("f(10 ** 10 ** 10)", "operators"),
        ("f(1 or 2)", "'and'/'or'"),
        ("f(f'{1}')", "f-strings"),
        ("f(f'x')", "f-strings"),
        (f"f({fullwidth('exec')}('1'))", "calling exec"),  # NFKC folds it to `exec`
        (f"f({fullwidth('getattr')}(Widget, 'size'))", "calling getattr"),
        ("f(open)", "the name open"),
        ("f(os)", "the name os"),
        ("f(Widget)", "the name Widget"),
        ("f(f(1))", "calling f"),
        ("f(Holder().method())", "calling Holder().method"),
        ("f(a := 1)", "':='"),
        ("f(*[1, 2])", "'*' unpacking"),
        ("f(**{'b': 1})", "'**' unpacking"),
        ("f({**{}})", "'**' unpacking"),
        ("f(-True)", "unary operators"),
        ("f(slice('a'))", "slice(...) takes one to three integers or None"),
        ("f(slice(1.5))", "slice(...) takes one to three integers or None"),
        ("f(slice(stop=1))", "slice(...) takes one to three numbers or None"),
        ("f(slice())", "slice(...) takes one to three numbers or None"),
        ("f(slice(open()))", "calling open"),
        ("f(--1)", "unary operators"),
        ("f(not 1)", "unary operators"),
        ("f(~1)", "unary operators"),
        ("f(1 if True else 2)", "conditional expressions"),
        ("f(1 < 2)", "comparisons inside the call"),
        ("f(...)", "'...'"),
        ("f(x=1, x=2)", "keyword argument x given twice"),
        ("f(1); f(2)", "not a Python expression"),
        ("f(1) == 2 == 3", "one '=='"),
        ("f(1) < 2", "one '=='"),
        ("f(1) == g(1)", "the expected value must be a literal"),
        ("f(1) == [].__class__", "the expected value must be a literal"),
        ("f(1) == 'a' * 3", "the expected value must be a literal"),
        ("f(1) raises Foo", "Foo is neither a built-in exception nor a class of the module"),
        ("f(1) raises os", "os is neither"),
        (f"f(1) raises Value{fullwidth('E')}rror", "one exception name"),
        ("f(1) raises ValueError.mro", "'raises' takes one exception name"),
        ("f(1) raises ValueError raises KeyError", "not a Python expression"),
        ("Widget(1)", "the case must be one call of f(...)"),
        ("g(1)", "the case must be one call of f(...)"),
        ("f", "the case must be one call of f(...)"),
        ("f.__call__(1)", "the case must be one call of f(...)"),
        ("f(1)\nf(2)", "one line per case"),
        ("", "empty case"),
        ("   ", "empty case"),
        ("f('\0')", "not a Python expression"),
        ("f('" + "a" * 600 + "')", "longer than 500 characters"),
        ("f(" + "[" * 20 + "]" * 20 + ")", f"nested more than {MAX_DEPTH} levels"),
        ("f(" + "-" * 300 + "1)", f"nested more than {MAX_DEPTH} levels"),
        ("f(" + "(" * 240 + "1" + ")" * 240 + ")", "not a Python expression"),
        ("f([" + ",".join(["1"] * 240) + "])", f"more than {MAX_NODES} parts"),
    ],
)
def test_everything_else_is_refused_with_a_reason(case: str, reason: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_test_case(case, "f", MODULE)
    assert reason in str(refused.value)


@pytest.mark.parametrize(
    ("function", "source", "reason"),
    [
        ("method", MODULE, "method is not a function defined at the top level"),
        ("missing", MODULE, "missing is not a function defined at the top level"),
        ("f", "def f(:\n", "the module is not valid Python"),
    ],
)
def test_the_function_must_be_a_top_level_function_of_a_valid_module(
    function: str, source: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_test_case(f"{function}(1)", function, source)


def test_a_module_exception_that_shadows_a_builtin_is_imported() -> None:
    source = "class ValueError(Exception):\n    pass\n\n\ndef f(a):\n    raise ValueError(a)\n"
    parsed: dict[str, Any] = parse_test_case("f(1) raises ValueError", "f", source)
    assert parsed["names"] == ["f", "ValueError"]


def test_a_builtin_given_as_a_function_is_not_imported_unless_the_module_defines_it() -> None:
    parsed: dict[str, Any] = parse_test_case(
        "f(str) == 'a'", "f", "def f(key):\n    return key('a')\n"
    )
    assert parsed["names"] == ["f"]
    with pytest.raises(ValueError, match="str is both the module's and a builtin"):
        parse_test_case("f(str)", "f", "def str(x):\n    return x\n\n\ndef f(key):\n    return 1\n")


def test_arguments_must_be_strings() -> None:
    with pytest.raises(TypeError):
        parse_test_case(1, "f", MODULE)  # type: ignore[arg-type]
