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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from remora.tool_library.call_forms import source_of
from remora.tool_library.call_sites import call_sites
from remora.tool_library.callable_values import refusal
from remora.tool_library.class_shapes import MAPPING_CONTENTS, collection_contents, overrides
from remora.tool_library.code_literals import case_variants, imported_words, literals, words
from remora.tool_library.doctest_examples import (
    Example,
    doctest_calls,
    doctest_constructions,
    example_trees,
)
from remora.tool_library.method_roles import (
    changing_methods,
    mutators,
    readers,
    result_class,
    returned_function,
    returns_itself,
)
from remora.tool_library.parameter_values import (
    InstanceFactory,
    Parameter,
    Refusal,
    call_arguments,
    combinations,
    fill_pools,
    literal_kind,
    parameters_of,
)
from remora.tool_library.pattern_values import Pattern, module_patterns
from remora.tool_library.standard_values import imported_names
from remora.tool_library.test_cases import class_bound

MAX_CANDIDATES = 48
"""Calls probed per target: each costs a forked child in two probe runs."""


@dataclass(frozen=True)
class Candidate:
    """One call: `arguments` is the text between the call's parentheses; `instance` the
    constructor call a method is called on (None for a function); `setup` the methods called
    on the instance first, each (name, its arguments' text); `then` the method called on what
    the call returned (its name, its arguments' text), of the class `result`, or "__call__"
    where the call returned a function (`result` empty): `parse('abc')` after `string('abc')`,
    `('abc')` after `twice(shout)`."""

    arguments: str
    instance: str | None
    origin: str
    setup: tuple[tuple[str, str], ...] = ()
    then: tuple[str, str] | None = None
    result: str = ""

    def case(self, target: str) -> str:
        """The call as test_cases.parse_test_case reads it."""
        if self.instance is None:
            return f"{target}({self.arguments})"
        return f"{self.instance}.{target.rpartition('.')[2]}({self.arguments})"

    def steps(self) -> list[str]:
        """Each setup call as parse_test_case reads it, as a call on the instance."""
        return [f"{self.instance}.{name}({arguments})" for name, arguments in self.setup]

    def followed(self, target: str) -> list[tuple[str, str]]:
        """The call made on the result as parse_test_case reads it, with the function it reads
        it as: a call on an instance of its class ("Class.method"); for a function the call
        returned (no class), the same arguments as a call of `target`; none without one."""
        if self.then is None:
            return []
        name, arguments = self.then
        if not self.result:
            return [(Candidate(arguments, self.instance, self.origin).case(target), target)]
        return [(f"{self.result}().{name}({arguments})", f"{self.result}.{name}")]

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two candidates the same call."""
        return (self.arguments, self.instance, self.setup, self.then)

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"arguments": self.arguments, "instance": self.instance}
        found["origin"] = self.origin
        found |= {"then": list(self.then)} if self.then else {}
        return found | ({"setup": [list(step) for step in self.setup]} if self.setup else {})


def candidate_calls(
    source: str,
    target: str,
    project_sources: Mapping[str, str] | None = None,
    proposals: Sequence[str] = (),
    constructors: Sequence[str] = (),
    imported: Sequence[str] = (),
) -> list[Candidate]:
    """Up to MAX_CANDIDATES distinct calls of `target` ("f" or "Class.method") of the module
    `source`. `project_sources` (path: text) are searched for call sites; `proposals` are the
    model's completions (what follows `target(` or `.method(`, closed) and `constructors` its
    completions of the class's constructor, for a method; `imported` the texts of the modules
    it imports from its own package (their words are its data too)."""
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
    refused = refusal(definition, classes.get(owner), parameters, tree, name if not owner else "")
    calls = combinations(parameters)
    people = [(c.arguments, c.origin) for c in found if c.origin != "model"][:2]
    sequenced = []
    if owner and instances[0] not in (None, owner):  # on an instance other calls filled
        shared = parameters[0].pool[0] if parameters and parameters[0].pool else None
        found_setups = setups(classes[owner], name, shared, module, factory)
        # Also on the plainest other instance (`Table()`): the first is often built on a
        # boundary (`Table(max_width=3)`) where what was put in cannot be read back.
        plain = [i for i in instances[1:] if i == f"{owner}()"] or instances[1:2]
        for setup in found_setups[:4]:
            sequenced += [Candidate(a, instances[0], "sequence", setup) for a, _ in calls[:3]]
            sequenced += [
                Candidate(a, str(i), "sequence", setup) for i in plain for a, _ in calls[:1]
            ]
        if returns_itself(definition):  # a builder's setter: its effect shows through a reader
            chained = followed_calls(
                classes[owner], people + calls[:1], instances[0], module, factory
            )
            # On what was put in (an empty table draws None), unless this is what puts it in.
            growing = name in changing_methods(classes[owner])[1]
            steps = [s for s in found_setups if len(s) == 1][:2] + [()] * growing or [()]
            sequenced = [replace(c, setup=s) for s in steps for c in chained[:3]] + sequenced
    sequenced = sequenced[:SEQUENCED]
    made, wrapper = result_class(definition, owner, classes), returned_function(definition)
    if made:  # an object of the module's whose behaviour shows when it is used: `.parse(...)`
        # The calls people wrote first (`parser.parse('2 * x')`): valid input, read back.
        followed = followed_calls(
            classes[made], (people + calls)[:3], instances[0], module, factory
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


SEQUENCED = 16
"""Calls of a method on an instance other methods filled first (of MAX_CANDIDATES)."""


def setups(
    node: ast.ClassDef,
    target: str,
    shared: str | None,
    module: ModuleFacts,
    factory: InstanceFactory,
) -> list[tuple[tuple[str, str], ...]]:
    """What to call on a fresh instance before the method, most telling first: the class's
    mutators that take arguments as people call them (call sites, the README, docstrings:
    `setSolarDate(2017, 6, 24)`, `add_rows([['Name', 'Age'], ...])`), the first two, then
    each in order given the method's own first value `shared` (what is put in is what is then
    looked for: `add('abc')` before `search('abc')`) and its own base call, each alone and
    followed by the first mutator that takes none (`finalize()`): a keyword tree searched, a
    cache read, only after something was put in. The caller keeps the first four."""
    written: list[tuple[str, str]] = []  # as people call them: `setSolarDate(2017, 6, 24)`
    steps: list[tuple[str, str]] = []
    finishing: list[tuple[str, str]] = []
    for method in mutators(node):
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
        given = [shared] if shared is not None else []
        steps += [(method.name, a) for a in first_calls(parameters, refused, given, 1)]
    steps = written[:2] + steps
    found: list[tuple[tuple[str, str], ...]] = []
    for step in steps:
        found.append((step,))
        if finishing:
            found.append((step, finishing[0]))
    return found


FOLLOWED = 12
"""Calls followed by a method of the object they returned (of MAX_CANDIDATES)."""


def followed_calls(
    made: ast.ClassDef,
    calls: Sequence[tuple[str, str]],
    instance: str | None,
    module: ModuleFacts,
    factory: InstanceFactory,
) -> list[Candidate]:
    """The calls, each followed by a reader of the class `made` of the object it returns (its
    first two `readers`), given the call's own first argument where the reader takes one and
    that is a literal (`string('abc').parse('abc')`: what was put in is what is then read), the
    next call's (`string('abc').parse('')`: what it turns away) and its own base call: the tests
    of a combinator, a factory, a builder that returns a new object."""
    firsts = []  # each call's first argument, where it is a literal
    for arguments, _ in calls:
        node = ast.parse(f"_({arguments})", mode="eval").body
        first = node.args[0] if isinstance(node, ast.Call) and node.args else None
        text = source_of(arguments, first) if first is not None else ""
        firsts.append(text if literal_kind(text) else "")
    found: list[Candidate] = []
    for reader in readers(made, module.classes)[:2]:
        parameters, refused = pooled(reader, made, module, factory)
        sites = call_sites(reader.name, True, factory.sources)[:1]  # `.evaluate({'x': 7})`
        for index, (arguments, _) in enumerate(calls):
            shared = [firsts[index], firsts[(index + 1) % len(calls)]]
            for read in [*sites, *first_calls(parameters, refused, shared, 1)][:2]:
                then = (reader.name, read)
                found.append(Candidate(arguments, instance, "result", then=then, result=made.name))
    return found


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
    parameters: list[Parameter], refused: Refusal, firsts: Sequence[str], count: int
) -> list[str]:
    """Calls that give the first positional parameter each of `firsts` (what was put in is what
    is then read), then the parameters' own first `count` (`combinations`), each once, but those
    `refused` refuses."""
    calls = []
    if parameters and not parameters[0].keyword_only:
        chosen = [{parameters[0].name: value} for value in firsts if value]
        calls = [", ".join(call_arguments(parameters, values)) for values in chosen]
    calls += [arguments for arguments, _ in combinations(parameters)[:count]]
    return [call for call in dict.fromkeys(calls) if not (refused and refused(call))]


@dataclass(frozen=True)
class ModuleFacts:
    """What candidate_calls reads of the module as a whole, the same for every function of it:
    its syntax tree (read, never changed), its classes, the examples in its docstrings, the
    constructor calls among them, its literals and one-word strings (code_literals), what
    the names it imports stand for (standard_values) and its compiled patterns (pattern_values)."""

    tree: ast.Module
    classes: dict[str, ast.ClassDef]
    examples: list[Example]
    constructions: dict[str, list[str]]
    values: tuple[list[str], list[str]]
    imports: dict[str, str]
    patterns: dict[str, Pattern]


@lru_cache(maxsize=32)
def module_facts(source: str, imported: tuple[str, ...] = ()) -> ModuleFacts:
    """Worked out once per module text: every test and sample_data job of a module's functions
    reads the same (SyntaxError as ast.parse raises it). The words of the modules it imports
    from its own package follow its own: the tables its functions read often live there."""
    tree = ast.parse(source)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    examples = example_trees(tree)
    constructions = doctest_constructions(examples, classes)
    values = (literals(tree), list(dict.fromkeys(words(tree) + imported_words(imported))))
    imports, patterns = imported_names(tree), module_patterns(tree)
    return ModuleFacts(tree, classes, examples, constructions, values, imports, patterns)


def find_definition(tree: ast.Module, owner: str, name: str) -> ast.FunctionDef | None:
    body: Iterable[ast.stmt] = tree.body
    if owner:
        owners = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner]
        body = owners[0].body if owners else []
    # The last definition of the name: the implementation after `@overload` signatures, the
    # one a redefinition left in force.
    found = [node for node in body if isinstance(node, ast.FunctionDef) and node.name == name]
    return found[-1] if found else None


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
