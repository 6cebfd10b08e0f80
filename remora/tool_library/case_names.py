"""Names for generated tests, from what their inputs say: `test_apply_discount_percent_0`,
`test_parse_sku_sku_abc_raises_value_error`. A call is described by how its arguments differ
from the base call the others vary (one or two parameters with their values as words)."""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from collections.abc import Mapping, Sequence
from typing import Any

from remora.tool_library.case_checks import code_name
from remora.tool_library.standard_values import BYTE_BUILDERS


def describe(
    candidate: Mapping[str, Any],
    reference: Mapping[str, Any],
    parameters: Sequence[str],
    seen: Mapping[str, Any],
) -> str:
    """The name's tail: which argument differs from the reference call and how, and what the
    call did when it raised."""
    tail = ""
    mine = named_arguments(str(candidate.get("arguments", "")), parameters)
    theirs = named_arguments(str(reference.get("arguments", "")), parameters)
    differing = [key for key in mine if mine.get(key) != theirs.get(key)]
    differing += [key for key in theirs if key not in mine]
    if 0 < len(differing) <= 2:
        tail = "".join(f"_{key}_{value_word(mine.get(key, 'default'))}" for key in differing)
    elif differing:
        tail = "_" + "_".join(differing[:2])
    setup = candidate.get("setup") or []
    if setup and setup != reference.get("setup"):  # what was called on the instance first
        tail += "_after_" + "_".join(snake(str(step[0])) for step in setup)
    elif not tail and candidate.get("instance") != reference.get("instance"):
        tail = "_other_instance"
    if candidate.get("then"):  # the method called on what the call returned, its argument
        name, text = candidate["then"]
        given = list(named_arguments(str(text), []).values())
        tail += "_then_" + snake(str(name)) + (f"_{value_word(given[0])}" if given else "")
    if seen.get("outcome") == "raised":
        tail += "_raises_" + snake(str(seen.get("exception")))
    return tail


def named_arguments(text: str, parameters: Sequence[str]) -> dict[str, str]:
    try:
        node = ast.parse(f"_({text})", mode="eval").body
    except SyntaxError:
        return {}
    assert isinstance(node, ast.Call)
    found = {
        (parameters[i] if i < len(parameters) else f"arg{i}"): ast.unparse(arg)
        for i, arg in enumerate(node.args)
    }
    found |= {str(k.arg): ast.unparse(k.value) for k in node.keywords}
    return found


def value_word(text: str) -> str:
    """A value as a word for a test name: 101, minus_2, 2_5, empty, none, true, abc."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError):
        sliced = re.fullmatch(r"slice\((.*)\)", text)
        if sliced:  # slice(1, 3): slice_1_3; slice(None): slice_all
            words = [value_word(part.strip()) for part in sliced.group(1).split(",")]
            return "slice_" + ("all" if words == ["none"] else "_".join(words))
        held = re.fullmatch(r"(?:[a-z_]\w*\.)?(\w+)\((.*)\)", text)
        if held and held.group(1) in BYTE_BUILDERS:  # bytearray(b'abc'): abc
            return value_word(held.group(2) or "b''")
        if held and held.group(2) and value_word(held.group(2)) == "empty":
            return "empty"  # io.BytesIO(b'')
        if text.isidentifier():  # a function passed by name
            return snake(text)
        match = re.match(r"(?:[a-z_]\w*\.)?([A-Z]\w*)\(", text)  # `uuid.UUID(...)`: uuid
        return snake(match.group(1)) if match else "object"
    if value is None or isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        word = str(value).replace("-", "minus_").replace(".", "_")
        return word.replace("+", "")
    if isinstance(value, str | bytes | list | tuple | dict | set) and not value:
        return "empty"
    if isinstance(value, str | bytes):
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        word = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:16]
        return word or ("text" if isinstance(value, str) else "bytes")
    return type(value).__name__


def snake(name: str) -> str:
    """CamelCase and dotted names as snake_case."""
    name = name.replace(".", "_")
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return re.sub(r"_+", "_", name).lower().strip("_")


def named_test(base: str, tail: str, number: int | None = None) -> str:
    """`base` (a `code_name`) with the tail that says what the call's inputs were, where the
    whole is a `code_name` too (the tail holds the argument's and the exception's names), and
    the number that tells it from another test of the same name."""
    name = base + tail if code_name(base + tail) else base
    return name if number is None else f"{name}_{number}"


def instance_variable(owner: str) -> str:
    """The variable a method's tests hold the instance in: the class's name in snake_case, with
    a trailing underscore where that is a keyword (`class Lambda`: `lambda_`) or the class's
    own name (`class immutabledict`: `immutabledict_`, where `immutabledict = immutabledict()`
    made the name local and the test fail with UnboundLocalError) or a builtin's (`class Dict`:
    `dict_`, not a `dict` that hides the builtin from the rest of the test)."""
    variable = snake(owner)
    hidden = keyword.iskeyword(variable) or variable == owner or variable in BUILTIN_NAMES
    return variable + "_" if hidden else variable


BUILTIN_NAMES = frozenset(dir(builtins))
