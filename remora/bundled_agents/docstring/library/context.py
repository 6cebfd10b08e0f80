"""What the docstring agent reads from the code itself (tree-sitter on the host): every class and
function of a module with its identifiers, callees and docstring (`definitions`, for choosing the
project's own examples), and the facts about one definition that a docstring may state without
asking the model (`code_facts`): raise sites, whether it yields, the words its name, parameters,
body, callees, raised exceptions and module docstring use (what a sentence is grounded in), and
how each parameter is used in the body (a dict is not "a list"; a string passed to `str.join`
is a separator).

Pure functions of the source text: results are plain data, because they cross into the sandbox.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from tree_sitter import Node as SyntaxNode

from remora.bundled_agents.docstring.library.parse import parse_docstring
from remora.bundled_agents.docstring.library.raises import raise_sites
from remora.bundled_agents.docstring.library.syntax import (
    DEFINITIONS,
    PARSER,
    decorator_name,
    docstring_statement,
    node_text,
    walk,
)
from remora.bundled_agents.docstring.library.words import SPECIAL_METHODS, words
from remora.discovery.node_info import parameter_list as signature_parameters

NESTED = ("function_definition", "class_definition", "lambda")

# What a parameter's use says about its kind: the method called on it, or the call it goes to.
MAPPING_METHODS = frozenset({"items", "keys", "values", "get", "setdefault", "popitem"})
SEQUENCE_METHODS = frozenset({"append", "extend", "insert", "sort", "index", "count"})
STRING_METHODS = frozenset(
    {"upper", "lower", "strip", "lstrip", "rstrip", "startswith", "endswith", "split",
     "partition", "rpartition", "replace", "encode", "format", "casefold", "title",
     "capitalize", "isdigit", "isalpha", "splitlines", "zfill", "ljust", "rjust", "center"}
)  # fmt: skip


def definitions(source: str) -> list[dict[str, Any]]:
    """Every class and function of `source` in order: name, qualified_name, kind ("class" or
    "function"), owner (the enclosing class's name, or ""), line (of `def`/`class`), start_line
    (decorators included), header (from the first decorator to the colon's line), body (the
    source after the docstring), docstring (cleaned text, or None), summary (its first line),
    parameters ({name, annotation, default, kind}), callees (names called) and identifiers
    (the words of every name in it)."""
    tree = PARSER.parse(source.encode("utf-8"))
    lines = source.split("\n")
    found: list[dict[str, Any]] = []
    for node in walk(tree.root_node):
        if node.type in DEFINITIONS:
            found.append(_definition(node, lines))
    return found


def _definition(node: SyntaxNode, lines: list[str]) -> dict[str, Any]:
    name_node = node.child_by_field_name("name")
    name = node_text(name_node) if name_node is not None else ""
    outer = [_name(parent) for parent in _enclosing(node)]
    owner = next((_name(p) for p in _enclosing(node) if p.type == "class_definition"), "")
    start = (
        node.parent
        if node.parent is not None and node.parent.type == "decorated_definition"
        else node
    )
    body = node.child_by_field_name("body")
    statement = docstring_statement(body) if body is not None else None
    docstring = _docstring_text(statement)
    first_row = body.start_point.row if body is not None else node.end_point.row
    colon_row = next((c.end_point.row for c in node.children if c.type == ":"), first_row)
    header = "\n".join(lines[start.start_point.row : colon_row + 1])
    after = statement.end_point.row + 1 if statement is not None else colon_row + 1
    rest = "\n".join(lines[after : node.end_point.row + 1])
    if body is not None and body.start_point.row == colon_row and statement is None:
        rest = lines[colon_row][body.start_point.column :]  # `def f(): return 1`
    parameters_node = node.child_by_field_name("parameters")
    parameters = signature_parameters(parameters_node) if parameters_node is not None else []
    decorators = [
        node_text(child)[1:].strip() for child in start.children if child.type == "decorator"
    ] if start is not node else []  # fmt: skip
    return {
        "name": name,
        "qualified_name": ".".join([*reversed(outer), name]),
        "kind": "class" if node.type == "class_definition" else "function",
        "owner": owner,
        "line": node.start_point.row + 1,
        "start_line": start.start_point.row + 1,
        "decorators": decorators,
        "header": header,
        "body": rest,
        "docstring": docstring,
        "summary": (docstring or "").strip().split("\n")[0].strip(),
        "parameters": parameters,
        "callees": sorted(_callees(body)) if body is not None else [],
        "identifiers": sorted(_identifier_words(body)) if body is not None else [],
    }


def _name(node: SyntaxNode) -> str:
    name = node.child_by_field_name("name")
    return node_text(name) if name is not None else ""


def _enclosing(node: SyntaxNode) -> list[SyntaxNode]:
    found = []
    parent = node.parent
    while parent is not None:
        if parent.type in DEFINITIONS:
            found.append(parent)
        parent = parent.parent
    return found


def _docstring_text(statement: SyntaxNode | None) -> str | None:
    if statement is None:
        return None
    try:
        value = ast.literal_eval(node_text(statement))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return inspect.cleandoc(value) if isinstance(value, str) and value.strip() else None


def _own_nodes(body: SyntaxNode) -> list[SyntaxNode]:
    """The body's nodes, not those of nested functions, classes or lambdas."""
    found = []
    stack = list(body.children)
    while stack:
        node = stack.pop()
        if node.type in NESTED:
            continue
        found.append(node)
        stack.extend(node.children)
    return found


def _callees(body: SyntaxNode) -> set[str]:
    names = set()
    for node in _own_nodes(body):
        if node.type == "call":
            function = node.child_by_field_name("function")
            if function is not None:
                names.add(node_text(function).split(".")[-1])
    return names


def _identifier_words(body: SyntaxNode) -> set[str]:
    found: set[str] = set()
    for node in _own_nodes(body):
        if node.type == "identifier":
            found.update(words(node_text(node)))
    return found


def code_facts(source: str, line: int) -> dict[str, Any] | None:
    """Facts about the class or function starting on `line` (decorators count), or None:
    name, kind, owner, raises ([{name, description}] from its own `raise` statements: the
    message when it is a string literal, else the `if` condition above it as code, else ""),
    yields (bool), grounding (the words a sentence about it may use: name, parameters,
    annotations, body, string literals, callees, raised exceptions, the module's and the
    class's docstrings), name_words, and parameters: {name: {annotation, default, kind,
    uses}} where `uses` are the kinds its use shows ("mapping", "sequence", "string",
    "number", "callable", "iterable", "separator", "boolean")."""
    tree = PARSER.parse(source.encode("utf-8"))
    target = None
    for node in walk(tree.root_node):
        if node.type not in DEFINITIONS:
            continue
        start = (
            node.parent
            if node.parent is not None and node.parent.type == "decorated_definition"
            else node
        )
        if line - 1 in (start.start_point.row, node.start_point.row):
            target = node
            break
    if target is None:
        return None
    lines = source.split("\n")
    info = _definition(target, lines)
    body = target.child_by_field_name("body")
    own = _own_nodes(body) if body is not None else []
    grounding = set(words(info["name"]))
    for parameter in info["parameters"]:
        grounding.update(words(parameter["name"]))
        grounding.update(words(parameter["annotation"] or ""))
    returns = target.child_by_field_name("return_type")
    grounding.update(words(node_text(returns)) if returns is not None else [])
    grounding.update(info["identifiers"])
    for callee in info["callees"]:
        grounding.update(words(callee))
    # The author's own words: strings and comments (one above the first statement belongs to
    # the definition in tree-sitter's tree, not to its body).
    leading = [child for child in target.children if child.type == "comment"]
    for node in own + leading:
        if node.type in ("string_content", "comment"):
            grounding.update(words(node_text(node)))
    raises = raise_sites(own)
    for item in raises:
        grounding.update(words(item["name"]))
    module_doc = _docstring_text(docstring_statement(tree.root_node))
    grounding.update(words(module_doc or ""))
    for outer in _enclosing(target):
        if outer.type == "class_definition":
            grounding.update(words(_name(outer)))
            outer_body = outer.child_by_field_name("body")
            statement = docstring_statement(outer_body) if outer_body is not None else None
            grounding.update(words(_docstring_text(statement) or ""))
            break
    names = {p["name"] for p in info["parameters"]}
    uses = _parameter_uses(own, names)
    return {
        "name": info["name"],
        "kind": info["kind"],
        "owner": info["owner"],
        "decorators": info["decorators"],
        "raises": raises,
        "yields": any(node.type == "yield" for node in own),
        "grounding": sorted(grounding),
        "name_words": words(info["name"]),
        "callees": info["callees"],
        "parameters": {
            p["name"]: {
                "annotation": p["annotation"],
                "default": p["default"],
                "kind": p["kind"],
                "uses": sorted(uses.get(p["name"], set())),
            }
            for p in info["parameters"]
        },
        "return_annotation": node_text(returns) if returns is not None else None,
        "special": SPECIAL_METHODS.get(info["name"]) if info["owner"] else None,
    }


def _parameter_uses(own: list[SyntaxNode], names: set[str]) -> dict[str, set[str]]:
    uses: dict[str, set[str]] = {}

    def add(name: str, kind: str) -> None:
        if name in names:
            uses.setdefault(name, set()).add(kind)

    for node in own:
        if node.type == "call":
            function = node.child_by_field_name("function")
            arguments = node.child_by_field_name("arguments")
            if function is not None and function.type == "attribute":
                receiver = function.child_by_field_name("object")
                method = function.child_by_field_name("attribute")
                if receiver is not None and receiver.type == "identifier" and method is not None:
                    who, what = node_text(receiver), node_text(method)
                    if what == "join":
                        add(who, "separator")
                        add(who, "string")
                    elif what in MAPPING_METHODS:
                        add(who, "mapping")
                    elif what in SEQUENCE_METHODS:
                        add(who, "sequence")
                    elif what in STRING_METHODS:
                        add(who, "string")
                if method is not None and node_text(method) in ("split", "replace", "rsplit"):
                    for argument in (arguments.named_children if arguments else [])[:2]:
                        if argument.type == "identifier" and node_text(method) != "replace":
                            add(node_text(argument), "separator")
            elif function is not None and function.type == "identifier":
                who = node_text(function)
                add(who, "callable")
                for argument in arguments.named_children if arguments else []:
                    if argument.type != "identifier":
                        continue
                    if who in ("len", "sorted", "list", "tuple", "set", "enumerate", "zip"):
                        add(node_text(argument), "iterable")
                    elif who in ("int", "float", "abs", "round"):
                        add(node_text(argument), "number")
        elif node.type == "for_statement":
            right = node.child_by_field_name("right")
            if right is not None and right.type == "identifier":
                add(node_text(right), "iterable")
        elif node.type == "subscript":
            value = node.child_by_field_name("value")
            index = node.child_by_field_name("subscript")
            if value is not None and value.type == "identifier" and index is not None:
                if index.type == "string":
                    add(node_text(value), "mapping")
                elif index.type == "slice":
                    add(node_text(value), "sequence")
        elif node.type == "binary_operator":
            operator = node.child_by_field_name("operator")
            if operator is not None and node_text(operator) in ("-", "*", "/", "//", "**"):
                for side in ("left", "right"):
                    operand = node.child_by_field_name(side)
                    if operand is not None and operand.type == "identifier":
                        add(node_text(operand), "number")
        elif node.type in ("if_statement", "while_statement", "conditional_expression"):
            condition = node.child_by_field_name("condition")
            if condition is None and node.type == "conditional_expression":
                condition = node.named_children[1] if len(node.named_children) > 1 else None
            if condition is not None and condition.type == "identifier":
                add(node_text(condition), "boolean")
    return uses


def is_property(decorators: list[str]) -> bool:
    return any(
        decorator_name(d).split(".")[-1] in ("property", "cached_property") for d in decorators
    )


def summary_of(docstring: str | None) -> str:
    """A docstring's first sentence as one line (summaries may wrap)."""
    if not docstring:
        return ""
    summary = parse_docstring(docstring)["summary"] or ""
    text = " ".join(summary.split())
    for end in (". ", "! ", "? "):
        at = text.find(end)
        if at != -1:
            text = text[: at + 1]
    return text
