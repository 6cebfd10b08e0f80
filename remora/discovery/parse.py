"""Split Python source files into file, class, function and method nodes with tree-sitter."""

from __future__ import annotations

import ast
import codecs
import re
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

import tree_sitter_python
from tree_sitter import Language, Parser, Query, QueryCursor
from tree_sitter import Node as SyntaxNode

from remora.discovery.cache import DefinitionCache, content_key
from remora.discovery.nodes import MODULE_QUALNAME, Definition, Node, NodeType, node_id

_BOM = codecs.BOM_UTF8


class SourceError(Exception):
    """A file that cannot be analysed: unreadable, binary or not UTF-8."""


class ParsedFile(NamedTuple):
    data: bytes
    definitions: list[Definition]
    cached: bool = False
    """The definitions came from the parse cache."""
    cache_error: str | None = None
    """Why the definitions could not be stored in the parse cache."""
    key: str | None = None
    """The file's parse cache key, when there is a cache."""


def read_source(path: Path) -> bytes:
    """The file's bytes, checked to be UTF-8 text."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"skipped unreadable file: {exc.strerror or exc}") from exc
    if b"\0" in data:
        raise SourceError("skipped binary file (it contains NUL bytes)")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"skipped file that is not UTF-8 (invalid byte at {exc.start})") from exc
    return data


def find_definitions(data: bytes) -> list[Definition]:
    """Every class and function in `data`, in source order (outer before inner).

    Syntax errors do not stop it: tree-sitter recovers, and the definitions it still recognises
    are returned.
    """
    tree = Parser(_language()).parse(data)
    root = tree.root_node
    if not root.has_error:
        return _definitions_by_walk(root, data)
    # The grammar rejects a little valid Python (e.g. `(a.\n b)` indented less than the line
    # it continues), and error recovery can then lose the nesting of a whole file. When
    # Python's own parser accepts the file, its definitions are exact.
    exact = definitions_by_ast(data)
    if exact is not None:
        return exact
    # Broken code: error recovery can hang definitions anywhere (under ERROR nodes, inside
    # expressions), so the query searches the whole tree.
    return _definitions_by_query(root, data)


_CLASS, _FUNCTION = "class_definition", "function_definition"
_DECORATED = "decorated_definition"
_DEFINITION_KINDS = frozenset({_CLASS, _FUNCTION})

STATEMENT_CONTAINERS = frozenset(
    {
        "module",
        "block",
        _CLASS,
        _FUNCTION,
        _DECORATED,
        "if_statement",
        "elif_clause",
        "else_clause",
        "for_statement",
        "while_statement",
        "try_statement",
        "except_clause",
        "except_group_clause",
        "finally_clause",
        "with_statement",
        "match_statement",
        "case_clause",
    }
)
"""Node kinds whose children may be statements, i.e. everywhere valid Python can put a `def` or
`class`. The walk descends only into these, skipping expressions, which are most of a tree."""


def _definitions_by_walk(root: SyntaxNode, data: bytes) -> list[Definition]:
    """Definitions of an error-free tree, found by walking statement containers only."""
    definitions: list[Definition] = []
    containers = STATEMENT_CONTAINERS
    # (syntax node, enclosing qualified name, directly in a class, decorated_definition around)
    stack: list[tuple[SyntaxNode, str, bool, SyntaxNode | None]] = [(root, "", False, None)]
    pop, push = stack.pop, stack.append
    while stack:
        node, prefix, in_class, decorated = pop()
        kind = node.type
        if kind in _DEFINITION_KINDS:
            name_node = node.child_by_field_name("name")
            raw_name = name_node.text if name_node is not None else None
            if not raw_name:
                continue  # cannot happen in an error-free tree
            name = raw_name.decode("utf-8", "replace")
            qualified_name = f"{prefix}.{name}" if prefix else name
            if kind == _CLASS:
                node_type = NodeType.CLASS
            else:
                node_type = NodeType.METHOD if in_class else NodeType.FUNCTION
            definitions.append(
                _definition(data, node_type, name, qualified_name, decorated or node)
            )
            body = node.child_by_field_name("body")
            if body is not None:
                push((body, qualified_name, kind == _CLASS, None))
        elif kind == _DECORATED:
            inner = node.child_by_field_name("definition")
            if inner is not None:
                push((inner, prefix, in_class, node))
        else:
            # Reversed onto the stack, so that they come off it in source order.
            for child in reversed(node.children):
                if child.type in containers:
                    push((child, prefix, in_class, None))
    return definitions


def _definitions_by_query(root: SyntaxNode, data: bytes) -> list[Definition]:
    """Definitions of a tree with syntax errors: every one the query finds, nested by range."""
    captures = QueryCursor(_query()).captures(root)
    classes = captures.get("definition.class", [])
    functions = captures.get("definition.function", [])
    found = [(node.start_byte, NodeType.CLASS, node) for node in classes]
    found += [(node.start_byte, NodeType.FUNCTION, node) for node in functions]
    found.sort(key=itemgetter(0))
    # Keyed by the start of the inner definition, whose range the decorators widen.
    decorated: dict[int, SyntaxNode] = {}
    for node in captures.get("decorated", []):
        inner = node.child_by_field_name("definition")
        if inner is not None:
            decorated[inner.start_byte] = node

    definitions: list[Definition] = []
    # Definitions enclosing the current position: (end byte, qualified name, type).
    enclosing: list[tuple[int, str, NodeType]] = []
    for node_start, node_type, node in found:
        name_node = node.child_by_field_name("name")
        raw_name = name_node.text if name_node is not None else None
        if not raw_name:
            continue  # a definition that error recovery left without a name
        name = raw_name.decode("utf-8", "replace")
        outer = decorated.get(node_start, node)
        while enclosing and enclosing[-1][0] <= outer.start_byte:
            enclosing.pop()
        if enclosing:
            _, parent_name, parent_type = enclosing[-1]
            qualified_name = f"{parent_name}.{name}"
            if node_type is NodeType.FUNCTION and parent_type is NodeType.CLASS:
                node_type = NodeType.METHOD
        else:
            qualified_name = name
        enclosing.append((outer.end_byte, qualified_name, node_type))
        definitions.append(_definition(data, node_type, name, qualified_name, outer))
    return definitions


def definitions_by_ast(data: bytes) -> list[Definition] | None:
    """Definitions as Python's `ast` sees them, by the same rules; None when it cannot parse
    `data`, or when the file ends lines with a bare carriage return (where its line numbers
    and tree-sitter's differ)."""
    if b"\r" in data.replace(b"\r\n", b""):
        return None
    try:
        module = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    # line_starts[n]: the byte where line n (1-based) starts. Columns are bytes, as in
    # tree-sitter; ast's do not count a byte order mark on line 1.
    line_starts = [0, 0, *(match.end() for match in re.finditer(b"\n", data))]
    bom = len(_BOM) if data.startswith(_BOM) else 0

    def offset(line: int, column: int) -> int:
        return line_starts[line] + column + (bom if line == 1 else 0)

    definitions: list[Definition] = []

    def visit(node: ast.AST, prefix: str, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, prefix, in_class)
                continue
            qualified_name = f"{prefix}.{child.name}" if prefix else child.name
            if isinstance(child, ast.ClassDef):
                node_type = NodeType.CLASS
            else:
                node_type = NodeType.METHOD if in_class else NodeType.FUNCTION
            line, start = child.lineno, offset(child.lineno, child.col_offset)
            if child.decorator_list:
                first = child.decorator_list[0]
                line = first.lineno
                # The range starts at the `@`, before the decorator's expression.
                start = data.rfind(b"@", line_starts[line], offset(line, first.col_offset))
            end_line = child.end_lineno or child.lineno
            end = offset(end_line, child.end_col_offset or 0)
            column = start - line_starts[line] + 1
            definitions.append(
                (node_type, child.name, qualified_name, line, column, end_line, start, end)
            )
            visit(child, qualified_name, node_type is NodeType.CLASS)

    try:
        visit(module, "", False)
    except RecursionError:
        return None
    return definitions


def _definition(
    data: bytes, node_type: NodeType, name: str, qualified_name: str, outer: SyntaxNode
) -> Definition:
    start, end = outer.start_byte, outer.end_byte
    # tree-sitter puts comments that follow the last statement of a body inside the body;
    # a definition is taken to end where its code ends, as `ast` has it. Only a comment on
    # the last line can be such a comment, which spares the tree walk almost always.
    last_line = data.rfind(b"\n", start, end) + 1
    if data.find(b"#", last_line if last_line else start, end) >= 0:
        last = _last_code_token(outer)
        end, end_row = last.end_byte, last.end_point.row
    else:
        end_row = outer.end_point.row
    start_row, start_column = outer.start_point
    return (
        node_type,
        name,
        qualified_name,
        start_row + 1,
        start_column + 1,
        end_row + 1,
        start,
        end,
    )


def _last_code_token(node: SyntaxNode) -> SyntaxNode:
    """The last token of `node` that is not a comment (or other extra)."""
    while node.child_count:
        index = node.child_count - 1
        child = node.child(index)
        while child is not None and child.is_extra and index > 0:
            index -= 1
            child = node.child(index)
        if child is None or child.is_extra:
            break
        node = child
    return node


def build_nodes(file: str, data: bytes, definitions: Sequence[Definition]) -> list[Node]:
    """The file node followed by a node per definition, with ids and source text.

    A UTF-8 byte order mark belongs to no node: the file node starts after it, so that every
    node's text is exactly its byte range decoded.
    """
    start = len(_BOM) if data.startswith(_BOM) else 0
    # Validated as UTF-8 on reading; "replace" only guards against misuse.
    text = data[start:].decode("utf-8", "replace")
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    nodes = [
        Node(
            id=node_id(file, MODULE_QUALNAME, 0),
            type=NodeType.FILE,
            name=file.rpartition("/")[2],
            qualified_name=MODULE_QUALNAME,
            file=file,
            start_line=1,
            start_column=1,
            end_line=max(lines, 1),
            start_byte=start,
            end_byte=len(data),
            text=text,
        )
    ]
    # In pure ASCII byte and character offsets agree, so the decoded text can be sliced.
    ascii_only = data.isascii()
    ordinals: dict[str, int] = {}
    for node_type, name, qualified_name, start_line, column, end_line, first, last in definitions:
        ordinal = ordinals.get(qualified_name, 0)
        ordinals[qualified_name] = ordinal + 1
        snippet = text[first:last] if ascii_only else data[first:last].decode("utf-8", "replace")
        nodes.append(
            Node(
                id=node_id(file, qualified_name, ordinal),
                type=node_type,
                name=name,
                qualified_name=qualified_name,
                file=file,
                start_line=start_line,
                start_column=column,
                end_line=end_line,
                start_byte=first,
                end_byte=last,
                text=snippet,
            )
        )
    return nodes


def parse_file(path: Path, cache: DefinitionCache | None = None) -> ParsedFile | str:
    """The file's bytes and definitions, or why it was skipped."""
    try:
        data = read_source(path)
    except SourceError as exc:
        return str(exc)
    if cache is None:
        return ParsedFile(data, find_definitions(data))
    key = content_key(data)
    definitions = cache.get(key)
    if definitions is not None:
        return ParsedFile(data, definitions, cached=True, key=key)
    definitions = find_definitions(data)
    return ParsedFile(data, definitions, cache_error=cache.put(key, definitions), key=key)


@cache
def _language() -> Language:
    return Language(tree_sitter_python.language())


@cache
def _query() -> Query:
    """The query pack: every `.scm` file shipped under `queries/python`, in name order."""
    directory = files("remora.discovery").joinpath("queries", "python")
    sources = sorted(
        (entry.name, entry.read_text(encoding="utf-8"))
        for entry in directory.iterdir()
        if entry.name.endswith(".scm")
    )
    return Query(_language(), "\n".join(source for _, source in sources))
