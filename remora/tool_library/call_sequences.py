"""The calls made around the call under test: on its instance first (`setups`: what its class's
mutators put in, as people call them), and on what it returned after (a reader of the object a
call built, `followed_calls`; a builder's setter read through its reader, `read_after`; the
function a decorator returned, called, `applied_calls`)."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace

from remora.tool_library.call_forms import source_of
from remora.tool_library.call_sites import call_sites
from remora.tool_library.callable_values import refusal
from remora.tool_library.candidate import Candidate, ModuleFacts
from remora.tool_library.class_shapes import methods_of
from remora.tool_library.code_literals import literal_kind
from remora.tool_library.doctest_examples import doctest_calls
from remora.tool_library.method_roles import changing_methods, mutators, readers
from remora.tool_library.parameter_values import (
    InstanceFactory,
    Parameter,
    Refusal,
    call_arguments,
    combinations,
    fill_pools,
    parameters_of,
)

SEQUENCED = 16
"""Calls of a method on an instance other methods filled first (of MAX_CANDIDATES)."""


def setups(
    node: ast.ClassDef,
    target: str,
    shared: Mapping[str, str],
    module: ModuleFacts,
    factory: InstanceFactory,
) -> list[tuple[tuple[str, str], ...]]:
    """What to call on a fresh instance before the method, most telling first: the class's
    mutators that take arguments as people call them (call sites, the README, docstrings:
    `setSolarDate(2017, 6, 24)`, `add_rows([['Name', 'Age'], ...])`), the first two, then
    each in order given the method's own first values `shared`, by name (what is put in is
    what is then looked for: `insert(3, bbox)` before `intersect(bbox)`; where no name is
    shared, the first value first: `add('abc')` before `search('abc')`) and its own base
    call, each alone and followed by the first mutator that takes none (`finalize()`): a
    keyword tree searched, a cache read, only after something was put in. The caller keeps
    the first four."""
    written: list[tuple[str, str]] = []  # as people call them: `setSolarDate(2017, 6, 24)`
    steps: list[tuple[str, str]] = []
    finishing: list[tuple[str, str]] = []
    for method in mutators(node, module.classes):
        if method.name == target:
            continue
        parameters = parameters_of(method, method=True)
        if not parameters:
            finishing.append((method.name, ""))
            continue
        people = call_sites(method.name, True, factory.sources)
        people += doctest_calls(module.examples, method, node.name, method.name)
        written += [(method.name, arguments) for arguments in people[:1]]
        if len(steps) >= 4:
            continue
        parameters, refused = pooled(method, node, module, factory)
        steps += [(method.name, a) for a in first_calls(parameters, refused, [shared], 1)]
    steps = written[:2] + steps
    found: list[tuple[tuple[str, str], ...]] = []
    for step in steps:
        found.append((step,))
        if finishing:
            found.append((step, finishing[0]))
    return found


def echoed(
    setup: tuple[tuple[str, str], ...],
    node: ast.ClassDef,
    classes: Mapping[str, ast.ClassDef],
    parameters: Sequence[Parameter],
) -> list[str]:
    """The method's call given what the setup's first step put in (`shared_values`: the
    values of its parameters of the same name, else its first for the method's first), as a
    list of one, or none where it put in no literal."""
    if not setup:
        return []
    method, arguments = setup[0]
    definition = methods_of(node, classes).get(method)
    if definition is None:
        return []
    names = [p.name for p in parameters_of(definition, method=True)]
    values = shared_values(parameters, literal_arguments(arguments, names))
    return [", ".join(call_arguments(parameters, values))] if values else []


def read_after(
    node: ast.ClassDef,
    name: str,
    found_setups: Sequence[tuple[tuple[str, str], ...]],
    calls: Sequence[tuple[str, str]],
    instance: str | None,
    module: ModuleFacts,
    factory: InstanceFactory,
    on_instance: bool = False,
    names: Sequence[str] = (),
) -> list[Candidate]:
    """The first calls of a method that returns its instance (`table.set_cols_align([...])`),
    each followed by a reader (`.draw()`), on an instance the first two one-step setups filled
    (an empty table draws None whatever was set), and on a fresh one only where the method is
    itself what fills it (`add_row`). `on_instance`: the method returns nothing, and the reader
    is called on the instance after it (`add_irregular_rule('abc', 'abcz')`, then
    `plural('abc')`: rules kept where no literal shows them). `names`: the method's
    parameters, in order (followed_calls)."""
    chained = followed_calls(node, calls, instance, module, factory, on_instance, names)
    growing = name in changing_methods(node, module.classes)[1]
    steps = [s for s in found_setups if len(s) == 1][:2] + [()] * growing or [()]
    if on_instance:  # what it put in, read back from a fresh instance first
        steps = [(), *(step for step in steps if step)]
    return [replace(c, setup=step) for step in steps for c in chained[:3]]


FOLLOWED = 12
"""Calls followed by a method of the object they returned (of MAX_CANDIDATES)."""


def followed_calls(
    made: ast.ClassDef,
    calls: Sequence[tuple[str, str]],
    instance: str | None,
    module: ModuleFacts,
    factory: InstanceFactory,
    on_instance: bool = False,
    names: Sequence[str] = (),
) -> list[Candidate]:
    """The calls, each followed by a reader of the class `made` of the object it returns (or
    of the instance it was called on, `on_instance`; its first two `readers`), given the
    call's own literal arguments (`names`: the called function's parameters, in order) for its
    parameters of the same name, else its first for the reader's first
    (`string('abc').parse('abc')`, `index.insert(3, (1, 2, 5, 6))` then
    `index.intersect((1, 2, 5, 6))`: what was put in is what is then read), the next call's
    (`string('abc').parse('')`: what it turns away) and its own base call: the tests of a
    combinator, a factory, a builder that returns a new object."""
    given = [literal_arguments(arguments, names) for arguments, _ in calls]
    by_reader: list[list[Candidate]] = []
    for reader in readers(made, module.classes)[:2]:
        parameters, refused = pooled(reader, made, module, factory)
        sites = call_sites(reader.name, True, factory.sources)[:1]  # `.evaluate({'x': 7})`
        by_reader.append([])
        for index, (arguments, _) in enumerate(calls):
            shared = [given[index], given[(index + 1) % len(calls)]]
            for read in [*sites, *first_calls(parameters, refused, shared, 1)][:2]:
                then = (reader.name, read)
                by_reader[-1].append(
                    Candidate(arguments, instance, "result", (), then, made.name, on_instance)
                )
    # Each reader in turn: the first few are what a caller keeps (pyqtree's `insert` read back
    # by `remove` only, never by `intersect`).
    return [c for turn in itertools.zip_longest(*by_reader) for c in turn if c is not None]


def applied_calls(
    wrapper: ast.FunctionDef,
    calls: Sequence[tuple[str, str]],
    instance: str | None,
    module: ModuleFacts,
    factory: InstanceFactory,
) -> list[Candidate]:
    """The calls of a function that returns a function it defines (a decorator's `wrapper`),
    each followed by a call of what it returned: with the wrapper's own parameters' first two
    calls, or, where it takes only `*args, **kwargs`, with those of the module's function the
    call passed it (`twice(shout)('abc')`)."""
    functions = {n.name: n for n in module.tree.body if isinstance(n, ast.FunctionDef)}
    found: list[Candidate] = []
    for arguments, _ in calls:
        own = wrapper
        if not parameters_of(wrapper, method=False):
            node = ast.parse(f"_({arguments})", mode="eval").body
            passed = [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in functions]
            if not passed:
                continue
            own = functions[passed[0]]
        parameters, refused = pooled(own, None, module, factory)
        for read in first_calls(parameters, refused, [], 2):
            found.append(Candidate(arguments, instance, "result", then=("__call__", read)))
    return found


def pooled(
    definition: ast.FunctionDef,
    owner: ast.ClassDef | None,
    module: ModuleFacts,
    factory: InstanceFactory,
) -> tuple[list[Parameter], Refusal]:
    """The parameters of a function (of `owner`'s method) with their pools filled, and what
    refuses a call that gives one it calls a literal (callable_values.refusal)."""
    parameters = parameters_of(definition, method=owner is not None)
    fill_pools(parameters, definition, module.tree, module.classes, factory, module.values)
    return parameters, refusal(definition, owner, parameters, module.tree)


def first_calls(
    parameters: list[Parameter],
    refused: Refusal,
    shared: Sequence[Mapping[str, str]],
    count: int,
) -> list[str]:
    """Calls given each of `shared` (another call's values by parameter name, `shared_values`:
    what was put in is what is then read), then the parameters' own first `count`
    (`combinations`), each once, but those `refused` refuses."""
    chosen = [shared_values(parameters, values) for values in shared]
    calls = [", ".join(call_arguments(parameters, values)) for values in chosen if values]
    calls += [arguments for arguments, _ in combinations(parameters)[:count]]
    return [call for call in dict.fromkeys(calls) if not (refused and refused(call))]


def shared_values(parameters: Sequence[Parameter], values: Mapping[str, str]) -> dict[str, str]:
    """What a call gives of another's `values` (by parameter name, the first parameter's
    first; "": not a literal): the parameters of the same name (`bbox` of `insert(item, bbox)`
    for `intersect(bbox)`), else the first value for the first positional parameter."""
    named = {p.name: values[p.name] for p in parameters if values.get(p.name)}
    first = next(iter(values.values()), "")
    if named or not first or not parameters or parameters[0].keyword_only:
        return named
    return {parameters[0].name: first}


def literal_arguments(arguments: str, names: Sequence[str]) -> dict[str, str]:
    """A call's arguments by the parameter they go to (positional ones in `names`' order, the
    first first even unnamed), each as written where it is a literal, else ""."""
    node = ast.parse(f"_({arguments})", mode="eval").body
    found: dict[str, str] = {}
    if not isinstance(node, ast.Call):
        return found
    for position, argument in enumerate(node.args):
        if isinstance(argument, ast.Starred):
            break
        text = source_of(arguments, argument)
        name = names[position] if position < len(names) else f"*{position}"
        found[name] = text if literal_kind(text) else ""
    for keyword in node.keywords:
        text = source_of(arguments, keyword.value)
        if keyword.arg is not None:
            found[keyword.arg] = text if literal_kind(text) else ""
    return found
