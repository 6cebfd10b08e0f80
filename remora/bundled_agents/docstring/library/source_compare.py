"""compare_python: whether two versions of a file differ only in docstrings (and the whitespace
around them), so a tool can prove its edit changed nothing else."""

from __future__ import annotations

import ast
from typing import Any

from tree_sitter import Node as SyntaxNode
from tree_sitter import Tree

from remora.bundled_agents.docstring.library.syntax import (
    Token,
    docstring_nodes,
    indentation_problems,
    node_text,
    parse_tree,
    syntax_errors,
    walk,
)


def compare_python(before: str, after: str) -> dict[str, Any]:
    """Whether `after` is `before` with only docstrings changed, and laid out properly.

    Both texts must parse (tree-sitter, and Python's own parser when it accepts `before`);
    their syntax trees, docstrings removed, must be equal token for token, comments included;
    and every docstring that is new or changed must start its own line at the indentation of
    the body it documents, with no line of it indented less.
    """
    problems: list[str] = []
    before_tree, after_tree = parse_tree(before), parse_tree(after)
    before_errors, after_errors = syntax_errors(before_tree), syntax_errors(after_tree)
    if before_errors:
        problems.append(f"the original does not parse ({before_errors[0]}), so no edit is proven")
    if after_errors:
        problems.append(f"the new text does not parse: {after_errors[0]}")
    python_error = _python_syntax_error(before, after)
    if python_error and not after_errors:
        problems.append(f"the new text does not parse: {python_error}")
    same_code = False
    changed: list[int] = []
    if not problems:
        difference = _first_difference(before_tree, after_tree)
        same_code = difference is None
        if difference is not None:
            problems.append(difference)
        else:
            lines = after.split("\n")
            pairs = zip(docstring_nodes(before_tree), docstring_nodes(after_tree), strict=True)
            for (_, old), (owner, new) in pairs:
                if new is None or (old is not None and node_text(old) == node_text(new)):
                    continue
                changed.append(new.start_point.row + 1)
                problems += indentation_problems(new, owner, lines)
    return {
        "ok": not problems,
        "problems": problems,
        "parses": not after_errors and not python_error,
        "same_code": same_code,
        "changed_docstrings": changed,
    }


def _python_syntax_error(before: str, after: str) -> str | None:
    """Python's own verdict, where it can judge: tree-sitter accepts a little invalid Python,
    and the host's Python may be older than the code (then `before` fails too and it is
    skipped)."""
    try:
        ast.parse(before)
    except (SyntaxError, ValueError):
        return None
    try:
        ast.parse(after)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        return f"line {line}: {exc.msg}" if isinstance(exc, SyntaxError) else str(exc)
    return None


def _first_difference(before: Tree, after: Tree) -> str | None:
    old = _code_tokens(before)
    new = _code_tokens(after)
    for (old_key, _), (new_key, (row, _column)) in zip(old, new, strict=False):
        if old_key != new_key:
            return (
                f"line {row + 1}: the code differs from the original beyond docstrings "
                f"({_describe(old_key)} became {_describe(new_key)})"
            )
    if len(old) != len(new):
        row = new[len(old)][1][0] if len(new) > len(old) else after.root_node.end_point.row
        return f"line {row + 1}: the code differs from the original beyond docstrings"
    old_comments, new_comments = _comments(before), _comments(after)
    for (old_text, _), (new_text, row) in zip(old_comments, new_comments, strict=False):
        if old_text != new_text:
            return f"line {row + 1}: a comment changed (`{old_text[:40]}` became `{new_text[:40]}`)"
    if len(old_comments) != len(new_comments):
        return "a comment was added or removed"
    return None


def _comments(tree: Tree) -> list[tuple[str, int]]:
    """Every comment in source order, with its line.

    Compared apart from the code because tree-sitter hangs a comment on whichever node is
    open around it: one above a body's first statement belongs to the definition, but to the
    body once a docstring comes before it, which moves no comment."""
    return [
        (node_text(node), node.start_point.row)
        for node in walk(tree.root_node)
        if node.type == "comment"
    ]


def _code_tokens(tree: Tree) -> list[Token]:
    """The tree in preorder as (type, text or child count), docstrings and comments left out.

    The child counts make the sequence encode the tree's shape, so two equal sequences are two
    equal trees; leaves carry their text, so identifiers and literals count too.
    """
    skip = {_key(statement) for _, statement in docstring_nodes(tree) if statement is not None}
    tokens: list[Token] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        children = [
            child for child in node.children if child.type != "comment" and _key(child) not in skip
        ]
        label = node_text(node) if node.child_count == 0 else str(len(children))
        tokens.append(((node.type, label), (node.start_point.row, node.start_point.column)))
        stack.extend(reversed(children))
    return tokens


def _key(node: SyntaxNode) -> tuple[str, int, int]:
    return (node.type, node.start_byte, node.end_byte)


def _describe(key: tuple[str, str]) -> str:
    kind, label = key
    if label.isdigit() and kind not in ("integer", "float"):
        return f"a {kind}"
    return f"`{label[:40]}`"
