"""One candidate call of the function or method under test (`Candidate`), and what the
candidate generator reads of a module once for all its functions (`ModuleFacts`): its syntax
tree, classes, docstring examples, literals, words, imported names and patterns."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from remora.tool_library.code_literals import bound_words, literals, taking_turns, words
from remora.tool_library.doctest_examples import (
    Example,
    doctest_calls,
    doctest_constructions,
    example_trees,
)
from remora.tool_library.method_roles import factory_functions
from remora.tool_library.pattern_values import Pattern, module_patterns, table_texts
from remora.tool_library.standard_values import imported_names


@dataclass(frozen=True)
class Candidate:
    """One call: `arguments` is the text between the call's parentheses; `instance` the
    constructor call a method is called on (None for a function); `setup` the methods called
    on the instance first, each (name, its arguments' text); `then` the method called on what
    the call returned (its name, its arguments' text), of the class `result`, or "__call__"
    where the call returned a function (`result` empty): `parse('abc')` after `string('abc')`,
    `('abc')` after `twice(shout)`; with `on_instance`, called on the instance after the call
    instead (a mutator that returns nothing: `plural('abc')` after `add_irregular_rule('abc',
    'abcz')`)."""

    arguments: str
    instance: str | None
    origin: str
    setup: tuple[tuple[str, str], ...] = ()
    then: tuple[str, str] | None = None
    result: str = ""
    on_instance: bool = False

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
        return (self.arguments, self.instance, self.setup, self.then, self.on_instance)

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"arguments": self.arguments, "instance": self.instance}
        found["origin"] = self.origin
        found |= {"then": list(self.then)} if self.then else {}
        found |= {"then_on": "instance"} if self.on_instance else {}
        return found | ({"setup": [list(step) for step in self.setup]} if self.setup else {})


@dataclass(frozen=True)
class ModuleFacts:
    """What candidate_calls reads of the module as a whole, the same for every function of it:
    its syntax tree (read, never changed), its classes, the examples in its docstrings, the
    constructor calls among them, its literals and one-word strings (code_literals), what
    the names it imports stand for (standard_values), its compiled patterns (pattern_values)
    and the one-word strings of its tables and its own package's, by name (`bound`)."""

    tree: ast.Module
    classes: dict[str, ast.ClassDef]
    examples: list[Example]
    constructions: dict[str, list[str]]
    values: tuple[list[str], list[str]]
    imports: dict[str, str]
    patterns: dict[str, Pattern]
    bound: dict[str, list[str]]


@lru_cache(maxsize=32)
def module_facts(source: str, imported: tuple[str, ...] = ()) -> ModuleFacts:
    """Worked out once per module text: every test and sample_data job of a module's functions
    reads the same (SyntaxError as ast.parse raises it). The words of the modules it imports
    from its own package follow its own: the tables its functions read often live there."""
    tree = ast.parse(source)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    examples = example_trees(tree)
    constructions = doctest_constructions(examples, classes)
    for made, texts in factory_calls(tree, classes, examples).items():
        constructions[made] += [text for text in texts if text not in constructions[made]]
    # Its words and those of its tables' patterns take turns (code_literals, pattern_values).
    trees = [tree, *(parsed for parsed in map(_parsed, imported) if parsed is not None)]
    texts = table_texts(trees)
    known = taking_turns([[word for parsed in trees for word in words(parsed)], texts])
    values = (literals(tree), list(dict.fromkeys(known)))
    imports, patterns = imported_names(tree), module_patterns(tree)
    bound = bound_words(trees)
    return ModuleFacts(tree, classes, examples, constructions, values, imports, patterns, bound)


def _parsed(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def find_definition(tree: ast.Module, owner: str, name: str) -> ast.FunctionDef | None:
    body: Iterable[ast.stmt] = tree.body
    if owner:
        owners = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner]
        body = owners[0].body if owners else []
    # The last definition of the name: the implementation after `@overload` signatures, the
    # one a redefinition left in force.
    found = [node for node in body if isinstance(node, ast.FunctionDef) and node.name == name]
    return found[-1] if found else None


FACTORY_CALLS = 2
"""Calls of a module function that builds a class, kept per class: the longest first."""


def factory_calls(
    tree: ast.Module, classes: dict[str, ast.ClassDef], examples: list[Example]
) -> dict[str, list[str]]:
    """Calls in the module's examples of its public functions that build one of its classes
    (every `return` constructs it, or the return annotation names it): `create([(2, 2), (2,
    1), (2, 3)])` for kdtree's KDNode, whose constructor alone builds only an empty node (a
    tree's methods were tested on `KDNode()`, every one raising). The longest first: the one
    holding the most."""
    found: dict[str, list[str]] = {}
    for made, functions in factory_functions(tree, classes).items():
        for function in functions:
            calls = doctest_calls(examples, function, "", function.name)
            texts = sorted((f"{function.name}({c})" for c in calls), key=len, reverse=True)
            found.setdefault(made, []).extend(texts[:FACTORY_CALLS])
    return found
