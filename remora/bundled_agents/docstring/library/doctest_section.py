"""An Examples section for a docstring from calls that really ran: `explore_calls` (the test
agent's input generator, run in the OS sandbox) pins what a call of a plain function returned as
the literal repr of the value; such a call becomes a doctest (`>>> f(1, 2)` then `3`), and the
agent keeps the section only when doctest, run on the written file, passes it."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

MAX_LINE = 72
"""A call or value longer than this makes an example nobody reads."""


def doctest_examples(
    tests: Sequence[Mapping[str, Any]], function: str, limit: int = 2
) -> list[dict[str, str]]:
    """Up to `limit` examples {call, value} from `explore_calls`' rendered tests: each a test
    whose only statement is `assert function(...) == LITERAL` (or `pytest.approx(LITERAL)`),
    the literal being the repr the probe saw, so doctest prints the same text."""
    found: list[dict[str, str]] = []
    # A parametrized table's rows are tests of their own too (`singles`).
    each = [single for test in tests for single in [test, *test.get("singles", [])]]
    for test in each:
        body = str(test.get("code", "")).split("\n")[1:]
        statements = [line.strip() for line in body if line.strip()]
        if len(statements) != 1:
            continue
        example = _example(statements[0], function)
        if example is not None and example not in found:
            found.append(example)
        if len(found) >= limit:
            break
    return found


def _example(statement: str, function: str) -> dict[str, str] | None:
    try:
        tree = ast.parse(statement)
    except SyntaxError:
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.Assert) or not isinstance(node.test, ast.Compare):
        return None
    compare = node.test
    if len(compare.ops) != 1 or not isinstance(compare.ops[0], ast.Eq):
        return None
    call, expected = compare.left, compare.comparators[0]
    if not (
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == function
    ):
        return None
    if (
        isinstance(expected, ast.Call)
        and isinstance(expected.func, ast.Attribute)
        and expected.func.attr == "approx"
        and len(expected.args) == 1
    ):
        expected = expected.args[0]
    try:
        value = ast.literal_eval(expected)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    shown = repr(value)
    text = ast.get_source_segment(statement, call) or ast.unparse(call)
    if value is None or len(text) > MAX_LINE or len(shown) > MAX_LINE or "\n" in shown:
        return None  # doctest prints nothing for None
    return {"call": text, "value": shown}


def examples_section(examples: Sequence[Mapping[str, str]], style: str) -> dict[str, str]:
    """The examples as a docstring section in `style` (render_docstring's `sections` item)."""
    lines = []
    for example in examples:
        lines += [">>> " + example["call"], example["value"]]
    body = "\n".join(lines)
    return {"title": "" if style == "sphinx" else "Examples", "body": body}
