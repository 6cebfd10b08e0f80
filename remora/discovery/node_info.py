"""What a tool needs to know about a definition, computed on the host with tree-sitter:
signature, parameters, return annotation, docstring, decorators."""

from __future__ import annotations

import ast
import inspect
from typing import Any

import tree_sitter_python
from tree_sitter import Language, Parser
from tree_sitter import Node as SyntaxNode

from remora.discovery.nodes import Node, NodeType

_PARSER = Parser(Language(tree_sitter_python.language()))

PARAMETER_KINDS = {
    "identifier": "positional_or_keyword",
    "typed_parameter": "positional_or_keyword",
    "default_parameter": "positional_or_keyword",
    "typed_default_parameter": "positional_or_keyword",
    "list_splat_pattern": "var_positional",
    "dictionary_splat_pattern": "var_keyword",
}


def node_info(node: Node) -> dict[str, Any]:
    info: dict[str, Any] = {
        "name": node.name,
        "qualified_name": node.qualified_name,
        "type": node.type.value,
        "file": node.file,
        "start_line": node.start_line,
        "end_line": node.end_line,
        "decorators": [],
        "docstring": None,
    }
    tree = _PARSER.parse(node.text.encode("utf-8"))
    root = tree.root_node
    info["children"] = _children(root, node.start_line - 1, is_file=node.type is NodeType.FILE)
    if node.type is NodeType.FILE:
        info["docstring"] = _docstring(root)
        return info
    definition = root.children[0] if root.children else None
    if definition is not None and definition.type == "decorated_definition":
        info["decorators"] = [
            _text(child)[1:].strip() for child in definition.children if child.type == "decorator"
        ]
        definition = definition.child_by_field_name("definition")
    if definition is None or definition.type not in ("function_definition", "class_definition"):
        return info
    body = definition.child_by_field_name("body")
    info["docstring"] = _docstring(body) if body is not None else None
    if definition.type == "class_definition":
        superclasses = definition.child_by_field_name("superclasses")
        info["bases"] = [
            _text(arg) for arg in (superclasses.named_children if superclasses else [])
        ]
        return info
    info["is_async"] = _text(definition).startswith("async")
    parameters = definition.child_by_field_name("parameters")
    returns = definition.child_by_field_name("return_type")
    info["parameters"] = parameter_list(parameters) if parameters is not None else []
    info["return_annotation"] = _text(returns) if returns is not None else None
    colon = next((child for child in definition.children if child.type == ":"), None)
    end = colon.start_byte if colon is not None else definition.end_byte
    header = definition.text[: end - definition.start_byte] if definition.text else b""
    info["signature"] = " ".join(header.decode("utf-8").split())
    return info


def _children(root: SyntaxNode, line_offset: int, *, is_file: bool) -> list[dict[str, Any]]:
    """Definitions directly inside this one (a file's top-level definitions, a class's methods,
    a function's nested functions), with file line numbers: what the node's own lines exclude."""
    found: list[dict[str, Any]] = []
    top = root.children[0] if root.children and not is_file else None
    if top is not None and top.type == "decorated_definition":
        top = top.child_by_field_name("definition")
    if top is not None and top.type in ("function_definition", "class_definition"):
        body = top.child_by_field_name("body")
        statements = body.children if body is not None else []
    else:
        statements = root.children
    stack = list(statements)
    while stack:
        child = stack.pop(0)
        definition = child
        if child.type == "decorated_definition":
            definition = child.child_by_field_name("definition") or child
        if definition.type in ("function_definition", "class_definition"):
            name = definition.child_by_field_name("name")
            found.append(
                {
                    "name": _text(name) if name is not None else "",
                    "type": "class" if definition.type == "class_definition" else "function",
                    "start_line": child.start_point.row + 1 + line_offset,
                    "end_line": child.end_point.row + 1 + line_offset,
                }
            )
        elif child.type in (
            "if_statement",
            "try_statement",
            "with_statement",
            "block",
            "else_clause",
            "elif_clause",
            "except_clause",
            "finally_clause",
            "for_statement",
            "while_statement",
        ):
            stack[:0] = list(child.children)  # definitions nested in compound statements
    return found


def parameter_list(parameters: SyntaxNode) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    keyword_only = False
    for child in parameters.named_children:
        if child.type == "keyword_separator":
            keyword_only = True
            continue
        if child.type == "positional_separator":
            for earlier in result:
                earlier["kind"] = "positional_only"
            continue
        kind = PARAMETER_KINDS.get(child.type)
        if kind is None:
            continue
        name_node = child
        if child.type in ("typed_parameter",):
            name_node = child.named_children[0]
        elif child.type in ("default_parameter", "typed_default_parameter"):
            name_node = child.child_by_field_name("name") or child
        if name_node.type in ("list_splat_pattern", "dictionary_splat_pattern"):
            kind = PARAMETER_KINDS[name_node.type]
        if kind == "var_positional":
            keyword_only = True
        elif kind == "positional_or_keyword" and keyword_only:
            kind = "keyword_only"
        annotation = child.child_by_field_name("type")
        default = child.child_by_field_name("value")
        result.append(
            {
                "name": _text(name_node).lstrip("*"),
                "annotation": _text(annotation) if annotation is not None else None,
                "default": _text(default) if default is not None else None,
                "kind": kind,
            }
        )
    return result


def _docstring(body: SyntaxNode) -> str | None:
    first = next((child for child in body.named_children if child.type != "comment"), None)
    if first is None or first.type != "expression_statement" or not first.named_children:
        return None
    literal = first.named_children[0]
    if literal.type != "string":
        return None
    try:
        value = ast.literal_eval(_text(literal))
    except (ValueError, SyntaxError):
        return None
    return inspect.cleandoc(value) if isinstance(value, str) else None


def _text(node: SyntaxNode) -> str:
    return node.text.decode("utf-8") if node.text is not None else ""
