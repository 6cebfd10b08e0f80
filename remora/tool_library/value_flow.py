"""Where a function's inputs go: the locals made of one input alone.

A parameter is read through what is made of it (`for word in text.split()`, then
`MAC_MC.match(word)`), and an attribute the same way (`secret = self.secret`, then
`b32decode(secret)`): what reads the local reads the input.
"""

from __future__ import annotations

import ast


def origins(definition: ast.FunctionDef, attributes: bool = False) -> dict[str, str]:
    """The definition's locals made of one parameter alone, by assignment or loop, each with
    that parameter: `for line in text.splitlines()`, `words = line.split()`, `for word in
    words` give `word` -> `text`. A local made of two parameters has no one origin. With
    `attributes`, `self.secret` is an input too (named so), and `self` alone is none."""
    arguments = definition.args
    found = {a.arg: a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    if attributes:
        found.pop("self", None)
    steps: list[tuple[ast.expr, list[ast.expr]]] = []
    for node in ast.walk(definition):
        if isinstance(node, ast.Assign):
            steps.append((node.value, node.targets))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            steps.append((node.value, [node.target]))
        elif isinstance(node, ast.For | ast.comprehension):
            steps.append((node.iter, [node.target]))
    changed = True
    while changed:
        changed = False
        for value, targets in steps:
            roots = inputs(value, found, attributes)
            if len(roots) != 1:
                continue
            root = roots.pop()
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id not in found:
                        found[name.id] = root
                        changed = True
    return found


def inputs(value: ast.expr, found: dict[str, str], attributes: bool = False) -> set[str]:
    """The inputs an expression is made of: of the names in `found`, and with `attributes`
    the attributes of `self` it reads (`self.secret`)."""
    roots = {found[n.id] for n in ast.walk(value) if isinstance(n, ast.Name) and n.id in found}
    if attributes:
        roots |= {
            f"self.{n.attr}"
            for n in ast.walk(value)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        }
    return roots


def stored_attributes(definition: ast.FunctionDef) -> dict[str, str]:
    """The attributes of `self` the definition sets to a name alone, with that name: `self.uri
    = uri` and `self.uri: str = uri` give {"uri": "uri"} (what a constructor keeps of its
    parameters, which its class's other methods then read)."""
    return {
        target.attr: node.value.id
        for node in ast.walk(definition)
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Name)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }
