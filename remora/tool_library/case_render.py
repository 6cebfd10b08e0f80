"""Chosen calls (call_selection.py) as a pytest module a reviewer would keep.

One test per behaviour, named for what its inputs say (`test_apply_discount_percent_101_raises_
value_error`, not `test_apply_discount_5`). A test asserts the return value (floats with
`pytest.approx`), or the exception with its message (`pytest.raises(ValueError, match=...)`,
escaped) where the message is deterministic, and what the call left behind: the arguments it
mutated, a method's instance state, a returned object's public state. Every call is text the
allow-list (test_cases.py) accepted; every name written as code is a `code_name`, every value of
the probe's a `data_literal` or a `constructed_value` (case_checks.py: the rest is not pinned)."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from typing import Any

from remora.tool_library.call_forms import (
    STATEMENTS,
    asserted_equal,
    followed_call,
    is_operator,
    method_call,
    negated,
    receiver,
    restoring,
    source_of,
    state_asserts,
    steps_of,
    writable_step,
)
from remora.tool_library.case_checks import (
    STANDARD_MODULES,
    VALUE_IMPORTS,
    code_name,
    pattern_literal,
    standard_imports,
    used_names,
    writable,
)
from remora.tool_library.case_names import describe, instance_variable, named_test, snake
from remora.tool_library.module_paths import root_expression

ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


UNUSED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:anyio")
"""Plugins a generated test file never uses (it is plain and synchronous) that cost most of a
check's time when installed: hypothesis's imports all of hypothesis at every session's end."""


def render_tests(
    target: str,
    chosen: Sequence[Mapping[str, Any]],
    parameters: Sequence[str],
    module_name: str,
    base: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """{name, code, names (what the module must import), uses_pytest} per chosen call.
    `parameters`: the target's parameter names in order (without self); `module_name`: the
    dotted name the probe imported (its own exceptions are imported from it); `base`: the call
    the others vary (names say how a call differs from it; else the first call that returned)."""
    owner, _, method = target.rpartition(".")
    base_name = "test_" + snake(f"{owner}_{method}" if owner else method)
    written = [method, base_name, *([owner, instance_variable(owner)] if owner else [])]
    if not all(code_name(name) for name in written):
        return []
    # Only what a test can write of the probe's reports (new items: tables match by identity),
    # and calls made first on the instance only where their names can be written as code.
    chosen = [
        {"candidate": item["candidate"], "seen": writable(item["seen"])}
        for item in chosen
        if all(writable_step(step) for step in steps_of(item["candidate"]))
        and all(
            code_name(part) for key in item["seen"].get("restored") or [] for part in key.split(".")
        )
    ]
    reference = base or next(
        (item["candidate"] for item in chosen if item["seen"].get("outcome") == "returned"),
        chosen[0]["candidate"] if chosen else {},
    )
    tests: list[dict[str, Any]] = []
    used: set[str] = set()
    tables = example_tables(chosen, parameters) if method not in STATEMENTS else []
    for item in chosen:
        candidate, seen = item["candidate"], item["seen"]
        table = next((rows for rows in tables if rows[0] is item), None)
        if table is not None:
            name = base_name if base_name not in used else base_name + "_examples"
            number = 2
            while name in used:  # a table for each instance its calls were made on
                name = f"{base_name}_examples_{number}"
                number += 1
            used.add(name)
            test = render_table(name, owner, method, table, parameters)
            # Each row as a test of its own, for when one row fails under pytest: the rest stay.
            test["singles"] = []
            for number, row in enumerate(table, 1):
                tail = describe(row["candidate"], reference, parameters, row["seen"])
                call = (owner, method, row["candidate"], row["seen"], parameters, module_name)
                single = render_one(named_test(base_name, tail, number), *call)
                test["singles"] += [single] if single is not None else []
            tests.append(test)
            continue
        if any(item in rows for rows in tables):
            continue
        tail = describe(candidate, reference, parameters, seen)
        name = named_test(base_name, tail)
        number = 2
        while name in used:
            name = named_test(base_name, tail, number)
            number += 1
        one = render_one(name, owner, method, candidate, seen, parameters, module_name)
        if one is not None:  # else a name in the call cannot be written as code
            used.add(name)
            tests.append(one)
    return tests


def plain_return(seen: Mapping[str, Any]) -> bool:
    """A call whose whole behaviour is its literal return value."""
    return (
        seen.get("outcome") == "returned"
        and seen.get("value") not in (None, "None")
        and len(str(seen.get("value"))) <= 300  # a drawn table is no row of a table
        and not seen.get("mutated")
        and not seen.get("instance")
    )


def example_tables(
    chosen: Sequence[Mapping[str, Any]], parameters: Sequence[str]
) -> list[list[Mapping[str, Any]]]:
    """Calls that only return a value, with the same arguments passed the same way (and, for a
    method, the same instance), as one parametrized test: a table of inputs and results reads
    better than a test each, and each row still pins a value."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for item in chosen:
        if not plain_return(item["seen"]) or item["candidate"].get("then"):
            continue  # a table's rows vary the call, never a method called on its result
        names = argument_names(str(item["candidate"]["arguments"]), parameters)
        if names is None:
            continue
        built = (item["candidate"].get("instance"), repr(item["candidate"].get("setup")))
        key = (*built, tuple(names), bool(item["seen"].get("generator")))
        groups.setdefault(key, []).append(item)
    return [rows for rows in groups.values() if len(rows) >= 2]


def argument_names(text: str, parameters: Sequence[str]) -> list[str] | None:
    """The names the arguments of a call bind to (positional by the parameters' order), or None
    where one cannot be a test's parameter (unknown position, a clash with `expected`, a name
    that is no `code_name`: it is written as code)."""
    try:
        node = ast.parse(f"_({text})", mode="eval").body
    except SyntaxError:
        return None
    assert isinstance(node, ast.Call)
    if len(node.args) > len(parameters):
        return None
    names = [*parameters[: len(node.args)], *(str(k.arg) for k in node.keywords)]
    if "expected" in names or len(set(names)) != len(names):
        return None
    return names if all(code_name(name) for name in names) else None


def render_table(
    name: str,
    owner: str,
    method: str,
    rows: Sequence[Mapping[str, Any]],
    parameters: Sequence[str],
) -> dict[str, Any]:
    first = rows[0]["candidate"]
    names = argument_names(str(first["arguments"]), parameters) or []
    used, imports = [] if owner else [method], []
    for row in rows:
        names_of_row, imports_of_row = built_from(row["candidate"])
        used += [*names_of_row, *(row["seen"].get("value_names") or [])]
        imports += [*imports_of_row, *(row["seen"].get("value_imports") or [])]
    # A column named like something the test body uses (leb128's `i = _I()` and its `i`
    # parameter, a `uuid` parameter and `import uuid`) would hide it: it takes a suffix.
    variable = instance_variable(owner) if owner else ""
    restored = [key for row in rows for key in row["seen"].get("restored") or []]
    parameter, restore, restored_names = restoring(list(dict.fromkeys(restored)), method)
    used += restored_names
    taken = {variable, method, "pytest", "expected", *used, *(i.split()[-1] for i in imports)}
    taken.add("monkeypatch")
    columns = [f"{n}_value" if n in taken else n for n in names]
    head = ast.parse(f"_({first['arguments']})", mode="eval").body
    positional = len(head.args) if isinstance(head, ast.Call) else 0
    header = ", ".join(repr(n) for n in [*columns, "expected"])
    lines = ["@pytest.mark.parametrize(", f"    ({header}),", "    ["]
    for row in rows:
        node = ast.parse(f"_({row['candidate']['arguments']})", mode="eval").body
        assert isinstance(node, ast.Call)
        text = str(row["candidate"]["arguments"])
        values = [source_of(text, arg) for arg in node.args]
        values += [source_of(text, keyword.value) for keyword in node.keywords]
        lines.append(f"        ({', '.join([*values, str(row['seen']['value'])])}),")
    fixtures = [parameter] if parameter else []
    lines += ["    ],", ")", f"def {name}({', '.join([*columns, 'expected', *fixtures])}):"]
    lines += restore
    keywords = zip(names[positional:], columns[positional:], strict=True)
    arguments = [*columns[:positional], *(f"{n}={column}" for n, column in keywords)]
    call = f"{method}({', '.join(arguments)})"
    if owner:
        variable, built = receiver(owner, first)
        lines += built
        call = method_call(variable, method, arguments)
    if rows[0]["seen"].get("generator") and not call.startswith("list("):
        call = f"list({call})"
    if call.startswith(("(", "not ", "-")) or is_operator(call):
        call = f"({call})"
    # `pytest.approx` for floats, where every row is a number (it refuses a datetime's).
    kinds = {row["seen"].get("type") for row in rows}
    floats = "float" in kinds and kinds <= {"float", "int"}
    lines.append(f"    assert {call} == {'pytest.approx(expected)' if floats else 'expected'}")
    return {
        "name": name,
        "code": "\n".join(lines) + "\n",
        "names": list(dict.fromkeys(used)),
        "imports": sorted(set(imports)),
        "uses_pytest": True,
        "cases": len(rows),
    }


def render_one(
    name: str,
    owner: str,
    method: str,
    candidate: Mapping[str, Any],
    seen: Mapping[str, Any],
    parameters: Sequence[str],
    module_name: str,
) -> dict[str, Any] | None:
    """One call's test (`seen` is `writable`), or None where a keyword argument's name is no
    `code_name` (`**{...}`): the call cannot be written."""
    parameter, restore, names = restoring(seen.get("restored") or [], method)
    lines = [f"def {name}({parameter}):", *restore]
    uses_pytest = False
    call_node = ast.parse(f"_({candidate['arguments']})", mode="eval").body
    assert isinstance(call_node, ast.Call)
    if not all(code_name(named.arg) for named in call_node.keywords):
        return None
    mutated: Mapping[str, str | None] = seen.get("mutated") or {}
    arguments = []
    variables = []  # the mutated arguments, held in variables to assert afterwards
    for position, argument in enumerate(call_node.args):
        parameter = parameters[position] if position < len(parameters) else ""
        if code_name(parameter) and mutated.get(parameter) is not None:
            lines.append(f"    {parameter} = {ast.unparse(argument)}")
            arguments.append(parameter)
            variables.append(parameter)
        else:
            arguments.append(source_of(candidate["arguments"], argument))
    for named in call_node.keywords:
        if mutated.get(str(named.arg)) is not None:
            lines.append(f"    {named.arg} = {ast.unparse(named.value)}")
            arguments.append(f"{named.arg}={named.arg}")
            variables.append(str(named.arg))
        else:
            arguments.append(f"{named.arg}={source_of(candidate['arguments'], named.value)}")
    if owner:
        variable, built = receiver(owner, candidate)
        lines += built
        call = method_call(variable, method, arguments)
        written_as_call = call.startswith(f"{variable}.{method}(")  # no statement form fits
    else:
        call, written_as_call = f"{method}({', '.join(arguments)})", True
    made, call = followed_call(call, candidate, variable if owner else "")
    lines += made
    if seen.get("generator") and not call.startswith("list("):
        call = f"list({call})"
    if seen.get("outcome") == "returned" and seen.get("type") == "bool" and is_operator(call):
        # `assert 'a' in items`, `assert items != other`: the operator is the assertion.
        truth = seen.get("value") == "True"
        lines.append(f"    assert {call if truth else negated(call)}")
        return finished(name, lines, owner, method, candidate, [], False)
    if seen.get("kind_only"):  # drawn at random: only its kind is the same every time
        lines.append(f"    assert isinstance({call}, {seen['type']})")
        return finished(name, lines, owner, method, candidate, [], False)
    if seen.get("outcome") == "raised":
        uses_pytest = True
        exception = str(seen["exception"])
        if seen.get("exception_module") == module_name:
            names.append(exception)
        elif seen.get("exception_module") != "builtins":  # pinned as its nearest built-in base
            exception = str((seen.get("exception_bases") or ["Exception"])[0])
        message = str(seen.get("message") or "")
        match = ""
        if message and len(message) <= 120 and not ADDRESS.search(message):
            match = f", match={pattern_literal(message)}"
        lines.append(f"    with pytest.raises({exception}{match}):")
        lines.append(f"        {call}")
    elif method in STATEMENTS and owner and not (candidate.get("then") or written_as_call):
        if seen.get("value") != "None" or not (seen.get("instance") or variables):
            return None  # a statement whose effect no assertion can see: no test
        lines.append(f"    {call}")
        for parameter in variables:
            lines.append(f"    assert {parameter} == {mutated[parameter]}")
        lines += state_asserts(variable, seen.get("instance"))
    else:
        value = seen.get("value")
        if value is not None and seen.get("type") == "float":
            uses_pytest = True
            lines.append(f"    assert {call} == pytest.approx({value})")
        elif value == "None" and (seen.get("instance") or variables):
            lines.append(f"    {call}")  # what it changed is asserted below
        elif value == "None":
            lines.append(f"    assert {call} is None")
        elif value is not None:
            lines += asserted_equal(call, value)
            names += list(seen.get("value_names") or [])
        else:
            lines.append(f"    result = {call}")
            if seen.get("attributes") is not None:
                lines.append(f"    assert type(result).__name__ == {str(seen.get('type'))!r}")
                lines += state_asserts("result", seen["attributes"])
        for parameter in variables:
            lines.append(f"    assert {parameter} == {mutated[parameter]}")
        if owner:
            lines += state_asserts(variable, seen.get("instance"))
    test = finished(name, lines, owner, method, candidate, names, uses_pytest)
    test["imports"] = sorted({*test["imports"], *(seen.get("value_imports") or [])})
    return test


def finished(
    name: str,
    lines: list[str],
    owner: str,
    method: str,
    candidate: Mapping[str, Any],
    names: list[str],
    uses_pytest: bool,
) -> dict[str, Any]:
    # A method's test names the class that built its instance (a subclass, for an abstract
    # owner): importing the owner too would be an unused import.
    used, imports = built_from(candidate)
    return {
        "name": name,
        "code": "\n".join(lines) + "\n",
        "names": list(dict.fromkeys([*([] if owner else [method]), *used, *names])),
        "imports": sorted(set(imports)),
        "uses_pytest": uses_pytest,
    }


def built_from(candidate: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The module's names (in order: the instance's first) and the standard imports that a
    call's instance, the steps made on it first and on its result, and its arguments are
    written with."""
    steps = [str(text) for _, text in steps_of(candidate)]
    texts = [str(candidate.get("instance") or ""), *steps, str(candidate["arguments"])]
    names = [name for text in texts for name in used_names(text)]
    return names, [line for text in texts for line in standard_imports(text)]


def render_module(
    header_lines: Sequence[str],
    module: str,
    tests_folder: str,
    import_root: str,
    tests: Sequence[Mapping[str, Any]],
) -> str:
    """The whole test file: the docstring lines, imports, the sys.path line that lets the tests
    import the module (from `import_root`) without installing it, and the tests. ValueError
    where the module's dotted name is not one an import can name."""
    if not all(code_name(part) for part in module.split(".")):
        raise ValueError(f"{module!r} cannot be imported by name")
    names: list[str] = []
    for test in tests:
        names += [name for name in test["names"] if name not in names and code_name(name)]
    # Constructed values' imports (only VALUE_IMPORTS' and the standard value types' modules),
    # sorted as isort does: plain ones first.
    standard = {f"import {module}" for module in STANDARD_MODULES}
    imports = {"import pathlib", "import sys", *VALUE_IMPORTS.values(), *standard}
    imports &= {"import pathlib", "import sys", *(i for t in tests for i in t.get("imports", []))}
    lines = [*header_lines, *sorted(imports, key=lambda line: (line.startswith("from"), line)), ""]
    if any(test["uses_pytest"] for test in tests):
        lines += ["import pytest", ""]
    top = module.split(".")[0]
    lines.append(f"# The folder holding `{top}`, so the tests import it without installing it.")
    lines.append(f"sys.path.insert(0, str({root_expression(tests_folder, import_root)}))")
    lines.append("")
    # In isort's order (ruff's I001 on the project's tests): constants, classes, the rest.
    kinds = sorted(
        names, key=lambda n: (0 if n.isupper() and len(n) > 1 else 2 - n[0].isupper(), n)
    )
    lines.append(f"from {module} import {', '.join(kinds)}  # noqa: E402")
    text = "\n".join(lines) + "\n"
    for test in tests:
        text += "\n\n" + test["code"]
    return text
