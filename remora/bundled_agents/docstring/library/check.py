"""check_docstring: where a definition's docstring is, what its signature asks a new one to
document (tree-sitter on the host: the sandbox has none), with the docstring to write and where it
goes. Whether an existing docstring agrees with its code is pydoclint's to say
(`docstring_lint`), and how to fix it `docstring_fix`'s. Parsing and rendering the styles are in
`docstring_parse` and `docstring_render`; proof that an edit changed nothing but docstrings is
`source_compare`.

Every function of these modules is pure: it takes source text and returns plain data (dicts,
lists, strings, numbers, None), because results cross into the sandbox. Offsets are character
offsets into the given text, lines and columns are 1-based, so a script can slice the text it
passed in.
"""

from __future__ import annotations

import ast
import inspect
from typing import Any

from tree_sitter import Node as SyntaxNode

from remora.bundled_agents.docstring.library.edit import (
    docstring_template,
    kept_sections,
    splice_docstring,
)
from remora.bundled_agents.docstring.library.parse import STYLES, parse_docstring
from remora.bundled_agents.docstring.library.syntax import (
    DEFINITIONS,
    PARSER,
    PROPERTY_DECORATORS,
    ByteOffsets,
    decorator_name,
    docstring_statement,
    node_text,
    walk,
)

# One definition of what a parameter is, shared with node_info() so both report the same names.
from remora.discovery.node_info import parameter_list as signature_parameters

NO_RESULT_ANNOTATIONS = frozenset(
    {"None", "NoReturn", "Never", "typing.NoReturn", "typing.Never", "typing_extensions.Never",
     "typing_extensions.NoReturn"}
)  # fmt: skip


# --------------------------------------------------------------------------- compare_python


# --------------------------------------------------------------------------- check_docstring


def check_docstring(
    source: str, line: int, style: str = "google", include_types: bool = False
) -> dict[str, Any] | None:
    """What the class or function starting on `line` (its decorators count) documents, what
    its signature asks for, and where a docstring goes; None when no definition starts there.

    `status` is "missing", "present" or "skipped" (`skip_reason`: an @overload stub or a
    property setter, documented elsewhere). Whether a present docstring agrees with the code
    is pydoclint's to say (docstring_lint.py).

    `template` is the docstring to write, in the existing docstring's style when it has one,
    else in `style`: the existing text where it is still right, None where a sentence is
    needed (`needs` lists those), for `render_docstring` once they are filled in. `splice`
    says how to put a rendered literal into `source`:
    `source[:start] + before + literal + after + source[end:]`.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {', '.join(STYLES)}, not {style!r}")
    data = source.encode("utf-8")
    tree = PARSER.parse(data)
    definition = _definition_at(tree.root_node, line)
    if definition is None:
        return None
    offsets = ByteOffsets(source, data)
    kind = "class" if definition.type == "class_definition" else "function"
    decorated = definition.parent if _is_decorated(definition) else None
    decorators = [
        node_text(child)[1:].strip()
        for child in (decorated.children if decorated is not None else [])
        if child.type == "decorator"
    ]
    name_node = definition.child_by_field_name("name")
    body = definition.child_by_field_name("body")
    enclosing = _enclosing_definition(decorated or definition)
    method = kind == "function" and enclosing is not None and enclosing.type == "class_definition"
    statement = docstring_statement(body) if body is not None else None
    docstring = _docstring_value(statement, offsets) if statement is not None else None
    parsed = parse_docstring(docstring["text"]) if docstring is not None else None

    parameters: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    skip_reason: str | None = None
    if kind == "function":
        parameters = _documentable_parameters(definition, method, decorators)
        result, skip_reason = _expected_result(definition, body, decorators)
    if skip_reason is not None:
        status = "skipped"
    elif docstring is None or not docstring["text"].strip():
        status = "missing"
    else:
        status = "present"
    if kind == "class" and parsed is not None:
        template, needs = kept_sections(parsed, style)
    else:
        template, needs = docstring_template(
            parsed, parameters, result, style, include_types, decorators
        )
    splice, indent = splice_docstring(source, definition, body, statement, offsets)
    name_point = (name_node or definition).start_point
    return {
        "kind": kind,
        "name": node_text(name_node) if name_node is not None else "",
        "method": method,
        "nested": enclosing is not None and enclosing.type == "function_definition",
        "line": name_point.row + 1,
        "column": offsets.column(name_point.row, name_point.column) + 1,
        "decorators": decorators,
        "status": status,
        "skip_reason": skip_reason,
        "parameters": parameters,
        "result": result,
        "docstring": None if docstring is None else {**docstring, "parsed": parsed},
        "template": template,
        "needs": needs,
        "indent": indent,
        "splice": splice,
    }


def _definition_at(root: SyntaxNode, line: int) -> SyntaxNode | None:
    for node in walk(root):
        if node.type not in DEFINITIONS:
            continue
        start = node.parent if _is_decorated(node) and node.parent is not None else node
        if line - 1 in (start.start_point.row, node.start_point.row):
            return node
    return None


def _is_decorated(node: SyntaxNode) -> bool:
    return node.parent is not None and node.parent.type == "decorated_definition"


def _enclosing_definition(node: SyntaxNode) -> SyntaxNode | None:
    parent = node.parent
    while parent is not None and parent.type not in DEFINITIONS:
        parent = parent.parent
    return parent


def _docstring_value(statement: SyntaxNode, offsets: ByteOffsets) -> dict[str, Any] | None:
    try:
        value = ast.literal_eval(node_text(statement))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, str):
        return None
    literal = statement.named_children[0]
    return {
        "text": inspect.cleandoc(value),
        "line": literal.start_point.row + 1,
        "end_line": literal.end_point.row + 1,
        "start": offsets.char(literal.start_byte),
        "end": offsets.char(literal.end_byte),
    }


def _documentable_parameters(
    definition: SyntaxNode, method: bool, decorators: list[str]
) -> list[dict[str, Any]]:
    node = definition.child_by_field_name("parameters")
    parameters = signature_parameters(node) if node is not None else []
    # self and cls are bound by Python, not passed by the caller: nobody documents them.
    bound = method and not any(decorator_name(d) == "staticmethod" for d in decorators)
    if (
        bound
        and parameters
        and parameters[0]["kind"] in ("positional_or_keyword", "positional_only")
    ):
        parameters = parameters[1:]
    stars = {"var_positional": "*", "var_keyword": "**"}
    return [{**p, "doc_name": stars.get(p["kind"], "") + p["name"]} for p in parameters]


def _expected_result(
    definition: SyntaxNode, body: SyntaxNode | None, decorators: list[str]
) -> tuple[dict[str, Any] | None, str | None]:
    """The result section a function's docstring needs (None: none), and a reason to skip
    the function altogether."""
    names = [decorator_name(d) for d in decorators]
    if any(name.split(".")[-1] == "overload" for name in names):
        return None, "an @overload stub: the implementation carries the docstring"
    if any(name.endswith((".setter", ".deleter")) for name in names):
        return None, "a property setter or deleter: the getter carries the docstring"
    name = definition.child_by_field_name("name")
    if any(n in PROPERTY_DECORATORS for n in names) or (name and node_text(name) == "__init__"):
        return None, None
    returns = definition.child_by_field_name("return_type")
    annotation = " ".join(node_text(returns).split()) if returns is not None else None
    returns_value, yields = _returns_and_yields(body) if body is not None else (False, False)
    if yields:
        return {"section": "Yields", "annotation": annotation}, None
    if annotation is not None:
        if annotation in NO_RESULT_ANNOTATIONS:
            return None, None
        return {"section": "Returns", "annotation": annotation}, None
    if returns_value:
        return {"section": "Returns", "annotation": None}, None
    return None, None


def _returns_and_yields(body: SyntaxNode) -> tuple[bool, bool]:
    """Whether the function's own body (not nested functions, classes or lambdas) returns a
    value and whether it yields."""
    returns = yields = False
    stack = list(body.children)
    while stack:
        node = stack.pop()
        if node.type in ("function_definition", "class_definition", "lambda"):
            continue
        if node.type == "return_statement" and node.named_child_count:
            returns = True
        elif node.type == "yield":
            yields = True
        stack.extend(node.children)
    return returns, yields


# --------------------------------------------------------------------------- parse_docstring


# --------------------------------------------------------------------------- render_docstring


# --------------------------------------------------------------------------- helpers
