"""How a test writes a call of a method: special methods the way code uses them (`len(x)`,
`x[1:3]`, `'a' in x`, `x < y`, `x + y`, `x[k] = v`, `del x[k]`), every other method as
`x.method(...)`; the calls made on the instance before the tested one (`tree.add('abc')`), and an
argument's own text in a candidate."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from remora.tool_library.case_checks import CONTENTS, code_name
from remora.tool_library.case_names import instance_variable
from remora.tool_library.standard_values import CALLABLE_BUILTINS

PROTOCOL = {
    "__len__": "len({0})",
    "__iter__": "list({0})",
    "__reversed__": "list(reversed({0}))",
    "__repr__": "repr({0})",
    "__str__": "str({0})",
    "__bool__": "bool({0})",
    "__getitem__": "{0}[{1}]",
    "__contains__": "{1} in {0}",
    "__eq__": "{0} == {1}",
    "__ne__": "{0} != {1}",
    "__lt__": "{0} < {1}",
    "__le__": "{0} <= {1}",
    "__gt__": "{0} > {1}",
    "__ge__": "{0} >= {1}",
    # Operators that bind tighter than `==`: `x | y == z` compares the union.
    "__and__": "{0} & {1}",
    "__or__": "{0} | {1}",
    "__sub__": "{0} - {1}",
    "__xor__": "{0} ^ {1}",
    "__add__": "{0} + {1}",
    "__mul__": "{0} * {1}",
    "__truediv__": "{0} / {1}",
    "__floordiv__": "{0} // {1}",
    "__mod__": "{0} % {1}",
    # Reflected: the instance on the right of a value that does not take it (`{'a': 1} | d`).
    "__radd__": "{1} + {0}",
    "__rsub__": "{1} - {0}",
    "__rmul__": "{1} * {0}",
    "__ror__": "{1} | {0}",
    "__rand__": "{1} & {0}",
    "__rxor__": "{1} ^ {0}",
    "__neg__": "-{0}",
    "__abs__": "abs({0})",
    "__int__": "int({0})",
    "__float__": "float({0})",
    "__getattr__": "getattr({0}, {1})",  # `{0}.name` where the name is one (attribute_call)
}
"""Special methods a test calls the way code does: `len(items)`, not `items.__len__()`."""
STATEMENTS = {
    "__setitem__": "{0}[{1}] = {2}",
    "__delitem__": "del {0}[{1}]",
    "__setattr__": "setattr({0}, {1}, {2})",
    "__delattr__": "delattr({0}, {1})",
}
"""Special methods code calls as a statement: their test is what the statement changed."""


def method_call(variable: str, method: str, arguments: Sequence[str]) -> str:
    if method == "__call__":  # an instance called as the function it is: `render(tree)`
        return f"{variable}({', '.join(arguments)})"
    form = PROTOCOL.get(method) or STATEMENTS.get(method)
    if form is None or len(arguments) != form.count("{") - 1 or "=" in "".join(arguments):
        return f"{variable}.{method}({', '.join(arguments)})"
    if method in ("__getitem__", "__setitem__", "__delitem__"):
        arguments = [subscript_text(arguments[0]), *arguments[1:]]
    return attribute_call(variable, method, arguments) or form.format(variable, *arguments)


ATTRIBUTE_FORMS = {
    "__getattr__": "{0}.{1}",
    "__setattr__": "{0}.{1} = {2}",
    "__delattr__": "del {0}.{1}",
}


def attribute_call(variable: str, method: str, arguments: Sequence[str]) -> str:
    """`config.name`, `config.name = 1`, `del config.name` for the attribute hooks given a
    name as a string literal; "" for any other name (`getattr(config, key)`). The name is the
    probe's argument, so it is written as code only where it is one (case_checks.code_name)."""
    form = ATTRIBUTE_FORMS.get(method)
    if form is None:
        return ""
    try:
        name = ast.literal_eval(arguments[0])
    except (ValueError, SyntaxError):
        return ""
    return form.format(variable, name, *arguments[1:]) if code_name(name) else ""


def subscript_text(argument: str) -> str:
    """`slice(1, 3)` as an index is written `1:3` (`slice(None)`: `:`); anything else as is."""
    try:
        node = ast.parse(argument, mode="eval").body
    except SyntaxError:
        return argument
    if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "slice"):
        return argument
    parts = ["" if ast.unparse(part) == "None" else ast.unparse(part) for part in node.args]
    if len(parts) == 1:  # slice(stop)
        parts = ["", parts[0]]
    text = ":".join(parts[:2])
    return f"{text}:{parts[2]}" if len(parts) == 3 and parts[2] else text


def is_operator(call: str) -> bool:
    """Whether the call is written as a comparison (`x < y`, `'a' in x`): it needs parentheses
    before `== expected`, and is itself the assertion of a bool it returns."""
    try:
        node = ast.parse(call, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, ast.Compare)


def negated(call: str) -> str:
    """The comparison that holds where `call` is False: `not in` for `in`, `!=` for `==`, else
    `not (...)` (`not x < y` is not `x >= y` for every order)."""
    if " in " in call:
        return call.replace(" in ", " not in ", 1)
    if " == " in call:
        return call.replace(" == ", " != ", 1)
    return f"not ({call})"


def writable_step(step: Sequence[Any]) -> bool:
    """Whether a call made on the instance first names a method and keywords a test may
    write as code."""
    if len(step) != 2 or not code_name(step[0]):
        return False
    try:
        node = ast.parse(f"_({step[1]})", mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, ast.Call) and all(code_name(k.arg) for k in node.keywords)


def receiver(owner: str, candidate: Mapping[str, Any]) -> tuple[str, list[str]]:
    """What a method's test calls it on, and the lines that build that first: the class
    itself for a class or static method (its calls' instance is the class's name), else a
    variable holding the instance, after the calls made on it first."""
    if candidate["instance"] == owner:
        return owner, []
    variable = instance_variable(owner)
    # Not a name the instance is built with: `board = board([[1, 2]])` is an UnboundLocalError.
    built_with = ast.parse(str(candidate["instance"]), mode="eval")
    if any(isinstance(n, ast.Name) and n.id == variable for n in ast.walk(built_with)):
        variable += "_"
    built = [f"    {variable} = {candidate['instance']}", *setup_lines(variable, candidate)]
    return variable, built


def setup_lines(variable: str, candidate: Mapping[str, Any]) -> list[str]:
    """The calls made on the instance before the tested one (`tree.add('abc')`), each as code
    calls it (`store['a'] = 1`)."""
    steps = candidate.get("setup") or []
    return [f"    {method_call(variable, str(name), step_arguments(text))}" for name, text in steps]


def step_arguments(text: object) -> list[str]:
    """The argument texts of a step's call (a setup's, a `then`'s), keywords as `name=value`."""
    node = ast.parse(f"_({text})", mode="eval").body
    assert isinstance(node, ast.Call)
    arguments = [source_of(str(text), argument) for argument in node.args]
    return arguments + [f"{k.arg}={source_of(str(text), k.value)}" for k in node.keywords]


def steps_of(candidate: Mapping[str, Any]) -> list[Sequence[Any]]:
    """The calls a candidate makes besides its own: on the instance first, on its result after."""
    return [
        *(candidate.get("setup") or []),
        *([candidate["then"]] if candidate.get("then") else []),
    ]


def followed_call(call: str, candidate: Mapping[str, Any], variable: str) -> tuple[list[str], str]:
    """The lines made before the call a test asserts, and that call: the call itself, and
    where the candidate names a method called on what it returned (`then`), that method called
    on it: `string('abc').parse('abc')`, `(a + b).parse('ab')`, or the function it returned
    called, `twice(shout)('abc')`; where the method is called on the instance `variable` after
    the call (`then_on`), the call is a line of its own and the method's call is asserted."""
    if not candidate.get("then"):
        return [], call
    name, text = candidate["then"]
    if candidate.get("then_on") == "instance":
        return [f"    {call}"], method_call(variable, name, step_arguments(text))
    primary = (ast.Call, ast.Attribute, ast.Subscript, ast.Name)
    if not isinstance(ast.parse(call, mode="eval").body, primary):  # `a + b`, `-a`, `a * 3`
        call = f"({call})"
    if name == "__call__":  # a function the call returned: `twice(shout)('abc')`
        return [], f"{call}({', '.join(step_arguments(text))})"
    return [], f"{call}.{name}({', '.join(step_arguments(text))})"


def source_of(text: str, node: ast.expr) -> str:
    """The node's own text in the candidate (the proposer's quoting), else unparsed."""
    segment = ast.get_source_segment(f"_({text})", node)
    return segment if segment is not None else ast.unparse(node)


def restoring(keys: Sequence[str], function: str) -> tuple[str, list[str], list[str]]:
    """For the class attributes a call sets ("Class.attr": the probe's `restored`): the test's
    parameter (pytest's `monkeypatch` fixture, which puts each back after the test, so no other
    test sees it), the lines that hand them to it, and the classes those lines name."""
    if not keys:
        return "", [], []
    pairs = [str(key).split(".", 1) for key in keys]
    lines = [f"    # {function} sets {', '.join(keys)}: monkeypatch puts it back after the test."]
    lines += [
        f"    monkeypatch.setattr({owner}, {name!r}, {owner}.{name})" for owner, name in pairs
    ]
    return "monkeypatch", lines, list(dict.fromkeys(owner for owner, _ in pairs))


def asserted_equal(call: str, value: str) -> list[str]:
    """`assert call == value`; a text of several lines written one line of it per line of
    code, as its author would lay out the table it draws."""
    text = ast.literal_eval(value) if value[:1] in "'\"" else None  # not `Decimal('1.5')`
    if not isinstance(text, str) or text.count("\n") < 2:
        return [f"    assert {call} {compared(value)} {value}"]
    pieces = [f"        {piece!r}" for piece in text.splitlines(keepends=True)]
    return [f"    assert {call} == (", *pieces, "    )"]


MAX_STATE_ASSERTS = 4
"""Attributes asserted after a call: the ones that show the behaviour, not a dump."""


def state_asserts(variable: str, state: Mapping[str, Any] | None) -> list[str]:
    """An object's state asserted: what a dict, list or set holds (CONTENTS) compared with the
    object itself, each attribute through its name."""
    items = list((state or {}).items())[:MAX_STATE_ASSERTS]
    return [
        f"    assert {variable}{'' if n == CONTENTS else '.' + n} {compared(t)} {t}"
        for n, t in items
    ]


def compared(text: str) -> str:
    """The comparison a test asserts a value with: `is` for None, True and False (`== None` is
    what linters flag: E711, E712) and a builtin passed as a function (`str`), else `==`."""
    return "is" if text in ("None", "True", "False", *CALLABLE_BUILTINS) else "=="
