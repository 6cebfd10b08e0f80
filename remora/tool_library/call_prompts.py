"""The test agent's completion prompts, in one place: `explore_calls` asks the model to continue
them with argument lists, and `remora train test --from-tests` renders the same text for calls
people wrote in their tests, so what the adapter learns is exactly what the agent asks."""

from __future__ import annotations

import ast

from remora.tool_library.candidate import find_definition


def constructor_prompt(source: str, owner: str) -> str:
    """The prompt for `owner`'s constructor arguments: the class's header and `__init__` only,
    one prompt for every method of the class, which the embedded engine answers once (an
    identical request gets the same reply)."""
    shown = focused_source(source, owner, "__init__").rstrip() + "\n\n\n"
    return f"{shown}def test_{owner.lower()}():\n    {_variable(owner)} = {owner}("


def call_prompt(source: str, owner: str, name: str, instance: str | None = None) -> str:
    """The prompt for a call's arguments: the code under test, then a test's first lines up to
    the call's opening parenthesis; for a method, after `instance` (e.g. `Owner(1, 2)`; the
    class's own name for a class or static method, called on the class)."""
    prompt = focused_source(source, owner, name).rstrip() + "\n\n\n"
    if not owner:
        return f"{prompt}def test_{name}():\n    result = {name}("
    if instance == owner:  # a class or static method, called on the class
        return f"{prompt}def test_{name}():\n    result = {owner}.{name}("
    variable = _variable(owner)
    opening = f"{prompt}def test_{name}():\n    {variable} = {instance or owner + '()'}\n"
    return opening + f"    result = {variable}.{name}("


def _variable(owner: str) -> str:
    return owner[0].lower() + owner[1:]


FOCUS_CHARACTERS = 6000
"""The code shown before a completion at most: prompt tokens are the engine's main cost."""


def focused_source(source: str, owner: str, name: str) -> str:
    """What the model needs to propose a call, not the whole module: the module's docstring,
    the imports of the names the target uses (one block, as a file writes them), and the target
    (for a method: its class's first line, `__init__` and the method), in the file's order.
    Every completion of a job evaluates this prompt: a 400-line module costs ten times the
    tokens of the function it tests, and on rich 13.9.4 the module's other imports were a
    quarter of the test agent's prompts."""
    tree = ast.parse(source)
    lines = source.split("\n")
    parts: list[str] = []

    def segment(node: ast.AST) -> str:
        first = min(
            [getattr(node, "lineno", 1), *(d.lineno for d in getattr(node, "decorator_list", []))]
        )
        return "\n".join(lines[first - 1 : getattr(node, "end_lineno", first)])

    docstring = ast.get_docstring(tree, clean=False)
    if docstring is not None and tree.body:
        parts.append(segment(tree.body[0]))
    shown: list[ast.AST] = []
    if owner:
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner)
        members = [
            member
            for member in cls.body
            if isinstance(member, ast.FunctionDef) and member.name in ("__init__", name)
        ]
        shown = [*cls.bases, *members]
        target = "\n\n".join([lines[cls.lineno - 1], *map(segment, members)])
    else:
        definition = find_definition(tree, "", name)
        shown = [definition] if definition is not None else []
        target = segment(definition) if definition is not None else ""
    used = {node.id for part in shown for node in ast.walk(part) if isinstance(node, ast.Name)}
    imports = [
        segment(node)
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom) and bound_names(node) & used
    ]
    parts += ["\n".join(imports)] if imports else []
    parts += [target] if target else []
    text = "\n\n\n".join(parts)
    return text[-FOCUS_CHARACTERS:] if len(text) > FOCUS_CHARACTERS else text


def bound_names(node: ast.Import | ast.ImportFrom) -> set[str]:
    """The names an import statement binds (`import a.b` binds `a`)."""
    return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
