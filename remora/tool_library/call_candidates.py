"""Candidate calls of a function or method, for the test and sample_data agents.

Where plausible inputs come from, most trusted first: calls of the target written by people
(call sites in the project, its tests and its README's examples; the module's doctests), the
model's completions, then values built per parameter: literals the body compares the parameter
with and their neighbours (a boundary `percent > 100` gives 100 and 101), the module's other
literals, the parameter's default, values of its annotated type, and instances of the module's
own classes for parameters annotated with them or named after them (`stock` for `Stock`), built
from their constructors' call sites and parameters. Each call is text that test_cases'
allow-list reads; the probe (call_probe.py) runs them, the selection keeps the few that matter.
Everything here is the syntax tree (ast): deterministic, no model, no execution.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence

from remora.tool_library.call_sequences import (
    FOLLOWED,
    SEQUENCED,
    applied_calls,
    echoed,
    followed_calls,
    read_after,
    setups,
)
from remora.tool_library.call_sites import call_sites
from remora.tool_library.callable_values import refusal
from remora.tool_library.candidate import Candidate, find_definition, module_facts
from remora.tool_library.class_shapes import MAPPING_CONTENTS, collection_contents, overrides
from remora.tool_library.code_literals import case_variants, literal_kind
from remora.tool_library.doctest_examples import doctest_calls
from remora.tool_library.method_roles import (
    gives_value,
    mutators,
    removes,
    result_class,
    returned_function,
    returns_itself,
)
from remora.tool_library.parameter_values import (
    InstanceFactory,
    Parameter,
    combinations,
    fill_pools,
    parameters_of,
    variations,
)
from remora.tool_library.test_cases import class_bound

MAX_CANDIDATES = 48
"""Calls probed per target: each costs a forked child in two probe runs."""


def candidate_calls(
    source: str,
    target: str,
    project_sources: Mapping[str, str] | None = None,
    proposals: Sequence[str] = (),
    constructors: Sequence[str] = (),
    imported: Sequence[str] = (),
    around: Sequence[str] = (),
) -> list[Candidate]:
    """Up to MAX_CANDIDATES distinct calls of `target` ("f" or "Class.method") of the module
    `source`. `project_sources` (path: text) are searched for call sites; `proposals` are the
    model's completions (what follows `target(` or `.method(`, closed) and `constructors` its
    completions of the class's constructor, for a method; `imported` the texts of the modules
    it imports from its own package (their words are its data too); `around` the argument
    texts of variations (`combinations`) that reached code the base call did not, whose own
    variations come next."""
    project_sources = project_sources or {}
    module = module_facts(source, tuple(imported))
    tree, classes, examples = module.tree, module.classes, module.examples
    owner, _, name = target.rpartition(".")
    definition = find_definition(tree, owner, name)
    if definition is None:
        raise ValueError(f"{target} is not defined at the top level of the module")
    parameters = parameters_of(definition, method=bool(owner))
    # Constructor calls written in the module itself count too (an enum of configurations,
    # a module constant): they are how its author builds its classes.
    written = {**project_sources, "": source}
    factory = InstanceFactory(classes, written, constructors, module.constructions, module.imports)
    factory.callables = lambda init, cls, found: refusal(init, cls, found, tree)
    factory.patterns = module.patterns
    factory.bound = module.bound
    instances: list[str | None] = [None]
    if owner and target in class_bound(source):
        # Called on the class, as code calls it: an instance (which may not be buildable) adds
        # nothing a class- or static method reads.
        instances = [owner]
    elif owner:
        instances = list(factory.instances(owner)) or [f"{owner}()"]
        # A subclass's instance (the owner is abstract) only where it inherits the method:
        # an override's test would be no test of this code.
        instances = [
            text
            for text in instances
            if not overrides(classes, str(text).split("(", 1)[0], owner, name)
        ] or [f"{owner}()"]
    found: list[Candidate] = []

    def add(arguments: str, origin: str, instance: str | None = None) -> None:
        seen = any(c.arguments == arguments and c.instance == instance for c in found)
        if not seen and len(found) < MAX_CANDIDATES:  # the first (most trusted) origin stays
            found.append(Candidate(arguments, instance, origin))

    for arguments in call_sites(name, bool(owner), project_sources):
        add(arguments, "call site", instances[0])
    for arguments in doctest_calls(examples, definition, owner, name):
        add(arguments, "doctest", instances[0])
    for arguments in [c.arguments for c in found][:1]:  # the word people wrote, cased
        for variant in case_variants(arguments):
            add(variant, "values", instances[0])
    for arguments in proposals:
        add(arguments, "model", instances[0])
    fill_pools(parameters, definition, tree, classes, factory, module.values)
    if owner and parameters and collection_contents(classes[owner], classes) == [MAPPING_CONTENTS]:
        held_keys(name, parameters)
    elif owner and instances[0] not in (None, owner):
        held_words(parameters, str(instances[0]))
    refused = refusal(definition, classes.get(owner), parameters, tree, name if not owner else "")
    chosen = variations(parameters)
    calls = [(text, origin) for text, (origin, _) in chosen.items()]  # `combinations`
    base = next(iter(chosen.values()))[1] if chosen else {}
    by_people = [c.arguments for c in found if c.origin in ("call site", "doctest")][:3]
    for arguments in around:
        if arguments not in chosen:
            continue
        values = chosen[arguments][1]
        for further, origin in combinations(parameters, values):
            add(further, origin, instance=instances[0])
        for variant in case_variants(arguments):  # `'man'` went further: `'Man'`, `'MAN'`
            add(variant, "values", instances[0])
        # What got it further, given to the calls people wrote too (by keyword, as it has a
        # default): `colored('Hello', 'red', 'on_black', force_color=True)`.
        extra = [
            f"{p.name}={values[p.name]}"
            for p in parameters
            if p.name in values
            and values[p.name] != base.get(p.name)
            and p.default is not None
            and not p.positional_only
        ]
        for text in by_people if extra else []:
            if not any(part.split("=", 1)[0] + "=" in text for part in extra):
                add(", ".join([text, *extra] if text else extra), "values", instances[0])
    people = [(c.arguments, c.origin) for c in found if c.origin != "model"][:2]
    sequenced = []
    if owner and instances[0] not in (None, owner):  # on an instance other calls filled
        shared = {p.name: p.pool[0] for p in parameters if p.pool}  # put in, then looked for
        found_setups = setups(classes[owner], name, shared, module, factory)
        # Also on the plainest other instance (`Table()`): the first is often built on a
        # boundary (`Table(max_width=3)`) where what was put in cannot be read back.
        plain = [i for i in instances[1:] if i == f"{owner}()"] or instances[1:2]
        for setup in found_setups[:4]:
            # Looked for with what the setup put in (`insert('duck', (50, 30, 53, 60))`,
            # then `intersect((50, 30, 53, 60))`), then as the method's own calls.
            echo = echoed(setup, classes[owner], classes, parameters)
            own = [a for a, _ in calls if a not in echo][: 3 - len(echo)]
            sequenced += [Candidate(a, instances[0], "sequence", setup) for a in [*echo, *own]]
            sequenced += [
                Candidate(a, str(i), "sequence", setup) for i in plain for a, _ in calls[:1]
            ]
        # A builder's setter, or a mutator or remover that returns nothing: its effect shows
        # through a reader (of what it returned, of the instance).
        changing = definition in mutators(classes[owner], classes) or removes(definition)
        nothing = not gives_value(definition) and changing
        if returns_itself(definition) or nothing:
            sequenced = [
                *read_after(
                    classes[owner],
                    name,
                    found_setups,
                    people + calls[:1],
                    instances[0],
                    module,
                    factory,
                    nothing,
                    [p.name for p in parameters],
                ),
                *sequenced,
            ]
    sequenced = sequenced[:SEQUENCED]
    made, wrapper = result_class(definition, owner, classes), returned_function(definition)
    if made:  # an object of the module's whose behaviour shows when it is used: `.parse(...)`
        # The calls people wrote first (`parser.parse('2 * x')`): valid input, read back.
        followed = followed_calls(
            classes[made],
            (people + calls)[:3],
            instances[0],
            module,
            factory,
            names=[p.name for p in parameters],
        )
        sequenced += followed[:FOLLOWED]
    elif wrapper is not None:  # a decorator's wrapper: applied, then called
        sequenced += applied_calls(wrapper, calls[:3], instances[0], module, factory)[:FOLLOWED]
    for arguments, origin in calls:
        for instance in instances[:3]:
            if len(found) < MAX_CANDIDATES - len(sequenced):
                add(arguments, origin, instance)
    found += dict.fromkeys(sequenced)  # a call site and a combination may be the same call
    # A callable parameter given a number or a string: nothing of that is a test to keep.
    return [c for c in found if refused is None or not refused(c.arguments)]


KEY_METHODS = frozenset(
    {"__getitem__", "__setitem__", "__delitem__", "__contains__", "get", "pop", "setdefault"}
)
KEY_NAMES = frozenset({"key", "k", "name", "item"})


def held_keys(method: str, parameters: list[Parameter]) -> None:
    """A mapping built holding MAPPING_CONTENTS is asked for a key it holds first, and one it
    does not after: `d['a']` reads a value where `d[1]` only raised KeyError."""
    first = parameters[0]
    if method in KEY_METHODS or first.name in KEY_NAMES:
        first.pool = list(dict.fromkeys(["'a'", *first.pool[:2], "'z'"]))


def held_words(parameters: list[Parameter], instance: str) -> None:
    """A method's first text parameter is given the words its instance was built with first
    (at most two): `Fysom(events=[('tic', 'a', 'b')], initial='a')` is asked `can('tic')`,
    not only `can('abc')`: what was put in is what is then looked for."""
    try:  # the allow-list checks the instance's text later; here it need only parse
        built = ast.parse(instance, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    constants = [n for n in ast.walk(built) if isinstance(n, ast.Constant)]
    held = [  # in the order written
        repr(node.value)
        for node in sorted(constants, key=lambda node: node.col_offset)
        if isinstance(node.value, str)
        and 0 < len(node.value) <= 30
        and not any(character.isspace() for character in node.value)
    ]
    for parameter in parameters:
        if any(literal_kind(value) == "str" for value in parameter.pool):
            parameter.pool = list(dict.fromkeys([*held[:2], *parameter.pool]))
            return
