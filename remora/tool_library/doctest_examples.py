"""Calls people wrote in the module's docstrings (`>>> ...` examples; without any, the lines that
read as code, `assert p.plural('apple') == 'apples'`), read for the input generator.

A docstring's examples are the author's own calls, so they are the most trusted candidates after
call sites in code. The target's own docstring comes first, then every other docstring of the
module: a class's examples build its instances (`>>> oset = OrderedSet([1, 2, 3])`) and show its
special methods the way code uses them (`oset[1]`, `2 in oset`, `oset == [1, 2]`).
"""

from __future__ import annotations

import ast
import copy
import doctest
from collections.abc import Iterable

from remora.tool_library.call_sites import arguments_text, is_literal, is_value, keyword_values

OPERATOR_METHODS: dict[type[ast.cmpop], str] = {ast.In: "__contains__", ast.NotIn: "__contains__"}
"""Comparisons whose left operand is the argument of the right one's special method."""
BINARY_METHODS: dict[type[ast.operator], str] = {
    ast.BitAnd: "__and__",
    ast.BitOr: "__or__",
    ast.Sub: "__sub__",
    ast.BitXor: "__xor__",
}
"""Operators whose right operand is the argument of the left one's special method."""


Example = tuple[ast.AST, ast.Module]
"""An example parsed, with the module, class or function whose docstring holds it."""


def example_trees(tree: ast.Module) -> list[Example]:
    """Each example of the module's docstrings that parses, the module's own first, then in the
    order `ast.walk` meets the classes and functions. Parsed once per job: both readers below
    take this list."""
    owners: list[ast.Module | ast.ClassDef | ast.FunctionDef] = [tree]
    owners += [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef | ast.FunctionDef)]
    parser = doctest.DocTestParser()
    found: list[Example] = []
    for owner in owners:
        docstring = ast.get_docstring(owner)
        if not docstring:
            continue
        try:
            sources = [
                parsed(example.source) or continued(docstring, example)
                for example in parser.get_examples(docstring)
            ]
        except ValueError:
            continue
        bound: dict[str, ast.expr] = {}
        # Without `>>>`, usage shown as code lines (`assert p.plural('apple') == 'apples'`,
        # under "Usage:" or in a code block): each line that parses alone and calls something.
        for example in sources or [parsed(code) for code in code_lines(docstring.splitlines())]:
            if example is None:
                continue
            example = with_bound(example, bound)  # `>>> argv = [...]`, then `f(doc, argv)`
            if sources or any(isinstance(node, ast.Call) for node in ast.walk(example)):
                found.append((owner, example))
    return found


def parsed(source: str) -> ast.Module | None:
    try:
        return ast.parse(source.strip())
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def continued(docstring: str, example: doctest.Example) -> ast.Module | None:
    """An example that does not parse alone, continued in the docstring's next lines up to
    the next `>>>`: a value written over several lines without `...` (`>>> doc = \'\'\'`,
    the usage text, `\'\'\'`), which doctest reads as expected output, up to a blank line."""
    lines = docstring.splitlines()[example.lineno :]
    text = example.source
    for line in lines[1:MAX_CONTINUED]:
        if line.lstrip().startswith(">>>"):
            return None
        text += line[example.indent :] + "\n"
        found = parsed(text)
        if found is not None:
            return found
    return None


MAX_CONTINUED = 40
"""Lines a statement of an example may continue over."""


def code_lines(lines: list[str]) -> list[str]:
    """The statements among lines of text that are not all code (a usage section, a README
    block with output in it): each line that parses alone, or that opens brackets the next
    lines close (`table.add_rows([[...],` over four lines), with those lines. Linear in the
    lines but for at most MAX_CONTINUED lines looked ahead from an opening bracket."""
    found = []
    index = 0
    while index < len(lines):
        line, index = lines[index].strip(), index + 1
        depth, end = opened(line), index
        while depth > 0 and end < len(lines) and end - index < MAX_CONTINUED:
            depth, end = depth + opened(lines[end]), end + 1
        if depth == 0 and end > index and parsed(text := "\n".join([line, *lines[index:end]])):
            found.append(text)
            index = end
        elif line and parsed(line):
            found.append(line)
    return found


def opened(line: str) -> int:
    """How many more brackets the line opens than it closes (in strings too: a guess that the
    parse which follows confirms)."""
    return sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")


def with_bound(example: ast.Module, bound: dict[str, ast.expr]) -> ast.Module:
    """The example with the names earlier examples bound to literals read as those literals;
    `bound` then holds its own bindings too (a name bound again to anything else is dropped:
    not an instance the next lines change)."""
    example = Bound(bound).visit(example)
    for statement in example.body:
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            name = statement.targets[0].id
            bound.pop(name, None)
            if is_literal(statement.value):
                bound[name] = statement.value
    return example


class Bound(ast.NodeTransformer):
    """A docstring's names bound to literals by its earlier examples, read as those
    values (`docopt(doc, argv)` as the call it makes), so the call's arguments are plain."""

    def __init__(self, values: dict[str, ast.expr]) -> None:
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.expr:
        value = self.values.get(node.id)
        if value is None or not isinstance(node.ctx, ast.Load):
            return node
        return copy.deepcopy(value)


def doctest_calls(
    examples: list[Example], definition: ast.FunctionDef, owner: str, name: str
) -> list[str]:
    """The argument lists of the target's calls in the module's examples (`definition`'s own
    first): `name(...)` for a function; for a method `x.name(...)`, and for `__getitem__`,
    `__contains__`, `__eq__` and the set operators the subscript, comparison or operator that
    calls them (`x[1:3]` gives `slice(1, 3)`)."""
    own = [example for where, example in examples if where is definition]
    others = [example for where, example in examples if where is not definition]
    found: list[str] = []
    for example in [*own, *others]:
        for node in ast.walk(example):
            arguments = call_arguments(node, owner, name)
            if arguments is not None and arguments not in found:
                found.append(arguments)
    return found


def call_arguments(node: ast.AST, owner: str, name: str) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        named = (
            (isinstance(func, ast.Attribute) and func.attr == name)
            if owner
            else (isinstance(func, ast.Name) and func.id == name)
        )
        plain = all(is_value(arg) for arg in [*node.args, *keyword_values(node)])
        return arguments_text(node) if named and plain else None
    if not owner:
        return None
    if name == "__getitem__" and isinstance(node, ast.Subscript):
        index = node.slice
        if isinstance(index, ast.Slice):
            parts = [index.lower, index.upper, index.step]
            if not all(part is None or is_value(part) for part in parts):
                return None
            while len(parts) > 1 and parts[-1] is None:
                parts.pop()
            texts = ["None" if part is None else ast.unparse(part) for part in parts]
            return f"slice({', '.join(texts)})"
        return ast.unparse(index) if is_value(index) else None
    if isinstance(node, ast.BinOp) and BINARY_METHODS.get(type(node.op)) == name:
        # `oset | {10}`: the instance on the left, a value on the right.
        plain = is_value(node.right) and is_instance(node.left, owner)
        return ast.unparse(node.right) if plain else None
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        operator = type(node.ops[0])
        if OPERATOR_METHODS.get(operator) == name and is_value(node.left):
            return ast.unparse(node.left)
        if name == "__eq__" and operator in (ast.Eq, ast.NotEq) and is_instance(node.left, owner):
            argument = node.comparators[0]  # `oset == [1, 2]`
            return ast.unparse(argument) if is_value(argument) else None
    return None


def is_instance(node: ast.expr, owner: str) -> bool:
    """An example's instance: a name (`oset`) or a call of the class (`OrderedSet([1])`)."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id == owner
    return isinstance(node, ast.Name)


def doctest_constructions(examples: list[Example], classes: Iterable[str]) -> dict[str, list[str]]:
    """For each of `classes`, its calls with plain arguments in the module's examples, as
    constructor texts (`OrderedSet([1, 2, 3])`), in the examples' order."""
    found: dict[str, list[str]] = {name: [] for name in classes}
    for _, example in examples:
        for node in ast.walk(example):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in found
                and all(is_value(arg) for arg in [*node.args, *keyword_values(node)])
            ):
                text = f"{node.func.id}({arguments_text(node)})"
                if text not in found[node.func.id]:
                    found[node.func.id].append(text)
    return found
