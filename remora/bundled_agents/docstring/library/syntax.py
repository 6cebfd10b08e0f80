"""Python source as tree-sitter sees it, for the host libraries: parsing, syntax errors, walking,
node text, and columns."""

from __future__ import annotations

from collections.abc import Iterator

import tree_sitter_python
from tree_sitter import Language, Parser, Tree
from tree_sitter import Node as SyntaxNode

Token = tuple[tuple[str, str], tuple[int, int]]

PARSER = Parser(Language(tree_sitter_python.language()))


DEFINITIONS = ("function_definition", "class_definition")


def parse_tree(text: str) -> Tree:
    return PARSER.parse(text.encode("utf-8"))


def syntax_errors(tree: Tree) -> list[str]:
    if not tree.root_node.has_error:
        return []
    errors = []
    for node in walk(tree.root_node):
        if node.type == "ERROR" or node.is_missing:
            where = f"line {node.start_point.row + 1}, column {node.start_point.column + 1}"
            what = f"missing {node.type}" if node.is_missing else f"unexpected {_snippet(node)}"
            errors.append(f"{where}: {what}")
    return errors or ["a syntax error"]


class ByteOffsets:
    """Character offsets and columns from tree-sitter's byte positions."""

    def __init__(self, source: str, data: bytes) -> None:
        self.data = data
        self.lines = source.split("\n")

    def char(self, byte: int) -> int:
        return len(self.data[:byte].decode("utf-8", errors="replace"))

    def column(self, row: int, byte_column: int) -> int:
        return len(_columns(self.lines[row], byte_column))


def walk(root: SyntaxNode) -> Iterator[SyntaxNode]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def node_text(node: SyntaxNode) -> str:
    return node.text.decode("utf-8") if node.text is not None else ""


def _snippet(node: SyntaxNode) -> str:
    text = " ".join(node_text(node).split())
    return f"`{text[:30]}`" if text else "text"


def leading_space(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _columns(line: str, byte_column: int) -> str:
    """The part of `line` before a tree-sitter (byte) column."""
    return line.encode("utf-8")[:byte_column].decode("utf-8", errors="replace")


def docstring_nodes(tree: Tree) -> list[tuple[SyntaxNode, SyntaxNode | None]]:
    """(owner, docstring statement or None) for the module and every class and function, in
    source order: the same owners in the same order for two trees with the same code."""
    found: list[tuple[SyntaxNode, SyntaxNode | None]] = [
        (tree.root_node, docstring_statement(tree.root_node))
    ]
    for node in walk(tree.root_node):
        if node.type in DEFINITIONS:
            body = node.child_by_field_name("body")
            found.append((node, docstring_statement(body) if body is not None else None))
    return found


def docstring_statement(body: SyntaxNode) -> SyntaxNode | None:
    """The body's docstring: its first statement, when that is a plain string expression
    (no f-string or bytes, which Python does not take as a docstring)."""
    first = next((child for child in body.named_children if child.type != "comment"), None)
    if first is None or first.type != "expression_statement" or first.named_child_count != 1:
        return None
    value = first.named_children[0]
    parts = value.named_children if value.type == "concatenated_string" else [value]
    if value.type not in ("string", "concatenated_string") or not all(
        _plain_string(part) for part in parts
    ):
        return None
    return first


def _plain_string(node: SyntaxNode) -> bool:
    if node.type != "string":
        return False
    prefix = node_text(node)[:3].split('"')[0].split("'")[0].lower()
    return "b" not in prefix and "f" not in prefix and "t" not in prefix


def indentation_problems(statement: SyntaxNode, owner: SyntaxNode, lines: list[str]) -> list[str]:
    row = statement.start_point.row
    line = lines[row]
    prefix = _columns(line, statement.start_point.column)
    where = f"line {row + 1}"
    if prefix.strip():
        return [f"{where}: the docstring does not start its own line"]
    problems = []
    block = statement.parent
    sibling = next(
        (
            child
            for child in (block.named_children if block is not None else [])
            if child.type != "comment" and child.start_point.row > statement.end_point.row
        ),
        None,
    )
    if sibling is not None:
        body_indent = leading_space(lines[sibling.start_point.row])
        if body_indent != prefix:
            problems.append(
                f"{where}: the docstring is indented with {_spaces(prefix)}, the body with "
                f"{_spaces(body_indent)}"
            )
    elif owner.type in DEFINITIONS:
        header_indent = leading_space(lines[owner.start_point.row])
        if not prefix.startswith(header_indent) or len(prefix) <= len(header_indent):
            problems.append(f"{where}: the docstring is not indented under its definition")
    closing = node_text(statement)[-3:] if node_text(statement).endswith(('"""', "'''")) else None
    for number in range(row + 1, statement.end_point.row + 1):
        text = lines[number]
        if not text.strip():
            continue
        lead = leading_space(text)
        last = number == statement.end_point.row
        if last and closing is not None and text.strip() == closing:
            if lead != prefix:
                problems.append(
                    f"line {number + 1}: the closing quotes are indented with {_spaces(lead)}, "
                    f"not {_spaces(prefix)} like the opening ones"
                )
        elif not lead.startswith(prefix):
            problems.append(
                f"line {number + 1}: a docstring line is indented with {_spaces(lead)}, less "
                f"than the docstring's {_spaces(prefix)}"
            )
    return problems


def _spaces(indent: str) -> str:
    if not indent:
        return "no indentation"
    if set(indent) == {" "}:
        return f"{len(indent)} space{'s' if len(indent) != 1 else ''}"
    return repr(indent)


PROPERTY_DECORATORS = frozenset(
    {"property", "cached_property", "functools.cached_property", "abc.abstractproperty",
     "abstractproperty"}
)  # fmt: skip


def decorator_name(decorator: str) -> str:
    return decorator.split("(")[0].strip()
