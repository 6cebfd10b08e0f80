"""Python source checks that tool scripts call as host functions (the sandbox has no
tree-sitter): where a definition's docstring is and whether it agrees with the signature, the
docstring's sections in Google, NumPy or Sphinx style, rendering one, and proof that an edit
changed nothing but docstrings.

Every function is pure: it takes source text and returns plain data (dicts, lists, strings,
numbers, None), because results cross into the sandbox. Offsets are character offsets into the
given text, lines and columns are 1-based, so a script can slice the text it passed in.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import tree_sitter_python
from tree_sitter import Language, Parser, Tree
from tree_sitter import Node as SyntaxNode

# One definition of what a parameter is, shared with node_info() so both report the same names.
from remora.discovery.node_info import _parameters as signature_parameters

_PARSER = Parser(Language(tree_sitter_python.language()))

STYLES = ("google", "numpy", "sphinx")
DEFINITIONS = ("function_definition", "class_definition")

GOOGLE_TITLES = (
    "Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments",
    "Other Parameters", "Returns", "Return", "Yields", "Yield", "Raises", "Raise", "Attributes",
    "Example", "Examples", "Note", "Notes", "Warning", "Warnings", "Warns", "See Also", "Todo",
    "References", "Methods"
)  # fmt: skip
GOOGLE_SECTIONS = {title.lower(): title for title in GOOGLE_TITLES}
# Sections whose entries document parameters. Only the main ones must match the signature:
# "Keyword Args" and "Other Parameters" also document **kwargs keys, which are no parameters.
MAIN_PARAMETER_SECTIONS = frozenset(
    {"args", "arguments", "parameters", "params", "param", "parameter", "arg", "argument"}
)
OTHER_PARAMETER_SECTIONS = frozenset(
    {"keyword args", "keyword arguments", "other parameters", "key", "keyword"}
)
RETURN_SECTIONS = {"returns", "return"}
YIELD_SECTIONS = {"yields", "yield"}
DEFAULT_PARAMETER_TITLE = {"google": "Args", "numpy": "Parameters", "sphinx": "param"}
RESULT_TITLE = {
    ("google", "Returns"): "Returns",
    ("google", "Yields"): "Yields",
    ("numpy", "Returns"): "Returns",
    ("numpy", "Yields"): "Yields",
    ("sphinx", "Returns"): "returns",
    ("sphinx", "Yields"): "yields",
}

SPHINX_FIELD = re.compile(r"^:(?P<head>[^:\s][^:]*):(?:\s+(?P<rest>.*))?$")
SPHINX_STYLE = re.compile(
    r"^:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|except|"
    r"exception|yields?|ytype|var|ivar|cvar)\b[^:]*:"
)
NUMPY_UNDERLINE = re.compile(r"^-{3,}\s*$")
GOOGLE_HEADER = re.compile(r"^(?P<title>[A-Za-z][A-Za-z ]*?)\s*:\s*$")
GOOGLE_ENTRY = re.compile(r"^(?P<name>\*{0,2}[A-Za-z_]\w*)\s*(?:\((?P<type>[^)]*)\))?\s*:(?:\s+|$)")
NUMPY_ENTRY = re.compile(
    r"^(?P<names>\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)"
    r"\s*(?::\s*(?P<type>.*))?$"
)
TYPE_LIKE = re.compile(r"^[A-Za-z_][\w.]*(\[.*\])?(\s*\|\s*[A-Za-z_][\w.]*(\[.*\])?)*$")

NO_RESULT_ANNOTATIONS = frozenset(
    {"None", "NoReturn", "Never", "typing.NoReturn", "typing.Never", "typing_extensions.Never",
     "typing_extensions.NoReturn"}
)  # fmt: skip
PROPERTY_DECORATORS = frozenset(
    {"property", "cached_property", "functools.cached_property", "abc.abstractproperty",
     "abstractproperty"}
)  # fmt: skip


# --------------------------------------------------------------------------- compare_python


def compare_python(before: str, after: str) -> dict[str, Any]:
    """Whether `after` is `before` with only docstrings changed, and laid out properly.

    Both texts must parse (tree-sitter, and Python's own parser when it accepts `before`);
    their syntax trees, docstrings removed, must be equal token for token, comments included;
    and every docstring that is new or changed must start its own line at the indentation of
    the body it documents, with no line of it indented less.
    """
    problems: list[str] = []
    before_tree, after_tree = _parse(before), _parse(after)
    before_errors, after_errors = _syntax_errors(before_tree), _syntax_errors(after_tree)
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
            pairs = zip(_docstrings(before_tree), _docstrings(after_tree), strict=True)
            for (_, old), (owner, new) in pairs:
                if new is None or (old is not None and _text(old) == _text(new)):
                    continue
                changed.append(new.start_point.row + 1)
                problems += _indentation_problems(new, owner, lines)
    return {
        "ok": not problems,
        "problems": problems,
        "parses": not after_errors and not python_error,
        "same_code": same_code,
        "changed_docstrings": changed,
    }


def _parse(text: str) -> Tree:
    return _PARSER.parse(text.encode("utf-8"))


def _syntax_errors(tree: Tree) -> list[str]:
    if not tree.root_node.has_error:
        return []
    errors = []
    for node in _walk(tree.root_node):
        if node.type == "ERROR" or node.is_missing:
            where = f"line {node.start_point.row + 1}, column {node.start_point.column + 1}"
            what = f"missing {node.type}" if node.is_missing else f"unexpected {_snippet(node)}"
            errors.append(f"{where}: {what}")
    return errors or ["a syntax error"]


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
        (_text(node), node.start_point.row)
        for node in _walk(tree.root_node)
        if node.type == "comment"
    ]


Token = tuple[tuple[str, str], tuple[int, int]]


def _code_tokens(tree: Tree) -> list[Token]:
    """The tree in preorder as (type, text or child count), docstrings and comments left out.

    The child counts make the sequence encode the tree's shape, so two equal sequences are two
    equal trees; leaves carry their text, so identifiers and literals count too.
    """
    skip = {_key(statement) for _, statement in _docstrings(tree) if statement is not None}
    tokens: list[Token] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        children = [
            child for child in node.children if child.type != "comment" and _key(child) not in skip
        ]
        label = _text(node) if node.child_count == 0 else str(len(children))
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


def _docstrings(tree: Tree) -> list[tuple[SyntaxNode, SyntaxNode | None]]:
    """(owner, docstring statement or None) for the module and every class and function, in
    source order: the same owners in the same order for two trees with the same code."""
    found: list[tuple[SyntaxNode, SyntaxNode | None]] = [
        (tree.root_node, _docstring_statement(tree.root_node))
    ]
    for node in _walk(tree.root_node):
        if node.type in DEFINITIONS:
            body = node.child_by_field_name("body")
            found.append((node, _docstring_statement(body) if body is not None else None))
    return found


def _docstring_statement(body: SyntaxNode) -> SyntaxNode | None:
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
    prefix = _text(node)[:3].split('"')[0].split("'")[0].lower()
    return "b" not in prefix and "f" not in prefix and "t" not in prefix


def _indentation_problems(statement: SyntaxNode, owner: SyntaxNode, lines: list[str]) -> list[str]:
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
        body_indent = _leading_space(lines[sibling.start_point.row])
        if body_indent != prefix:
            problems.append(
                f"{where}: the docstring is indented with {_spaces(prefix)}, the body with "
                f"{_spaces(body_indent)}"
            )
    elif owner.type in DEFINITIONS:
        header_indent = _leading_space(lines[owner.start_point.row])
        if not prefix.startswith(header_indent) or len(prefix) <= len(header_indent):
            problems.append(f"{where}: the docstring is not indented under its definition")
    closing = _text(statement)[-3:] if _text(statement).endswith(('"""', "'''")) else None
    for number in range(row + 1, statement.end_point.row + 1):
        text = lines[number]
        if not text.strip():
            continue
        lead = _leading_space(text)
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


# --------------------------------------------------------------------------- check_docstring


def check_docstring(
    source: str, line: int, style: str = "google", include_types: bool = False
) -> dict[str, Any] | None:
    """What the class or function starting on `line` (its decorators count) documents, what
    its signature asks for, and where a docstring goes; None when no definition starts there.

    `status` is "missing", "outdated" (see `problems`), "ok" or "skipped" (`skip_reason`: an
    @overload stub or a property setter, documented elsewhere). A docstring without sections
    (a summary, maybe paragraphs) is "ok": only sections are checked against the signature.

    `template` is the docstring to write, in the existing docstring's style when it has one,
    else in `style`: the existing text where it is still right, None where a sentence is
    needed (`needs` lists those), for `render_docstring` once they are filled in. `splice`
    says how to put a rendered literal into `source`:
    `source[:start] + before + literal + after + source[end:]`.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {', '.join(STYLES)}, not {style!r}")
    data = source.encode("utf-8")
    tree = _PARSER.parse(data)
    definition = _definition_at(tree.root_node, line)
    if definition is None:
        return None
    offsets = _Offsets(source, data)
    kind = "class" if definition.type == "class_definition" else "function"
    decorated = definition.parent if _is_decorated(definition) else None
    decorators = [
        _text(child)[1:].strip()
        for child in (decorated.children if decorated is not None else [])
        if child.type == "decorator"
    ]
    name_node = definition.child_by_field_name("name")
    body = definition.child_by_field_name("body")
    enclosing = _enclosing_definition(decorated or definition)
    method = kind == "function" and enclosing is not None and enclosing.type == "class_definition"
    statement = _docstring_statement(body) if body is not None else None
    docstring = _docstring_value(statement, offsets) if statement is not None else None
    parsed = parse_docstring(docstring["text"]) if docstring is not None else None

    parameters: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    skip_reason: str | None = None
    if kind == "function":
        parameters = _documentable_parameters(definition, method, decorators)
        result, skip_reason = _expected_result(definition, body, decorators)
    # A class docstring may document __init__'s arguments (NumPy does): not checked here,
    # __init__ is a method of its own.
    problems = (
        _disagreements(parsed, parameters, result, decorators)
        if parsed and kind == "function"
        else []
    )
    if skip_reason is not None:
        status = "skipped"
    elif docstring is None or not docstring["text"].strip():
        status = "missing"
    else:
        status = "outdated" if problems else "ok"
    if kind == "class" and parsed is not None:
        template, needs = _kept(parsed, style)
    else:
        template, needs = _template(parsed, parameters, result, style, include_types, decorators)
    splice, indent = _splice(source, definition, body, statement, offsets)
    name_point = (name_node or definition).start_point
    return {
        "kind": kind,
        "name": _text(name_node) if name_node is not None else "",
        "method": method,
        "nested": enclosing is not None and enclosing.type == "function_definition",
        "line": name_point.row + 1,
        "column": offsets.column(name_point.row, name_point.column) + 1,
        "decorators": decorators,
        "status": status,
        "skip_reason": skip_reason,
        "problems": problems,
        "parameters": parameters,
        "result": result,
        "docstring": None if docstring is None else {**docstring, "parsed": parsed},
        "template": template,
        "needs": needs,
        "indent": indent,
        "splice": splice,
    }


class _Offsets:
    """Character offsets and columns from tree-sitter's byte positions."""

    def __init__(self, source: str, data: bytes) -> None:
        self.data = data
        self.lines = source.split("\n")

    def char(self, byte: int) -> int:
        return len(self.data[:byte].decode("utf-8", errors="replace"))

    def column(self, row: int, byte_column: int) -> int:
        return len(_columns(self.lines[row], byte_column))


def _definition_at(root: SyntaxNode, line: int) -> SyntaxNode | None:
    for node in _walk(root):
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


def _docstring_value(statement: SyntaxNode, offsets: _Offsets) -> dict[str, Any] | None:
    try:
        value = ast.literal_eval(_text(statement))
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
    bound = method and not any(_decorator_name(d) == "staticmethod" for d in decorators)
    if (
        bound
        and parameters
        and parameters[0]["kind"] in ("positional_or_keyword", "positional_only")
    ):
        parameters = parameters[1:]
    stars = {"var_positional": "*", "var_keyword": "**"}
    return [{**p, "doc_name": stars.get(p["kind"], "") + p["name"]} for p in parameters]


def _decorator_name(decorator: str) -> str:
    return decorator.split("(")[0].strip()


def _expected_result(
    definition: SyntaxNode, body: SyntaxNode | None, decorators: list[str]
) -> tuple[dict[str, Any] | None, str | None]:
    """The result section a function's docstring needs (None: none), and a reason to skip
    the function altogether."""
    names = [_decorator_name(d) for d in decorators]
    if any(name.split(".")[-1] == "overload" for name in names):
        return None, "an @overload stub: the implementation carries the docstring"
    if any(name.endswith((".setter", ".deleter")) for name in names):
        return None, "a property setter or deleter: the getter carries the docstring"
    name = definition.child_by_field_name("name")
    if any(n in PROPERTY_DECORATORS for n in names) or (name and _text(name) == "__init__"):
        return None, None
    returns = definition.child_by_field_name("return_type")
    annotation = " ".join(_text(returns).split()) if returns is not None else None
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


def _disagreements(
    parsed: dict[str, Any],
    parameters: list[dict[str, Any]],
    result: dict[str, Any] | None,
    decorators: list[str],
) -> list[str]:
    if parsed["style"] is None:
        return []
    problems = []
    wanted = [p["name"] for p in parameters]
    documented = {_bare(p["name"]) for p in parsed["parameters"]}
    main = [
        p["name"] for p in parsed["parameters"] if p["section"].lower() in MAIN_PARAMETER_SECTIONS
    ]
    missing = [p["doc_name"] for p in parameters if p["name"] not in documented]
    if missing:
        problems.append(f"does not document {_plural('parameter', missing)}")
    extra = [name for name in main if _bare(name) not in wanted]
    if extra:
        problems.append(f"documents {_plural('parameter', extra)} not in the signature")
    has_result = parsed["returns"] is not None or parsed["yields"] is not None
    properties = any(_decorator_name(d) in PROPERTY_DECORATORS for d in decorators)
    if result is not None and not has_result:
        problems.append(f"does not document the {_result_noun(result)}")
    elif result is None and has_result and not properties:
        problems.append("documents a return value, but the function returns none")
    return problems


def _result_noun(result: dict[str, Any]) -> str:
    return "values it yields" if result["section"] == "Yields" else "return value"


def _bare(name: str) -> str:
    return name.lstrip("*")


def _plural(noun: str, names: list[str]) -> str:
    quoted = ", ".join(f"`{name}`" for name in names)
    return f"{noun}{'s' if len(names) != 1 else ''} {quoted}"


def _template(
    parsed: dict[str, Any] | None,
    parameters: list[dict[str, Any]],
    result: dict[str, Any] | None,
    style: str,
    include_types: bool,
    decorators: list[str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The docstring to write: what the existing one says that is still right, None where a
    sentence is needed."""
    if parsed is not None and parsed["style"] is not None:
        style = parsed["style"]
    old = parsed or {}
    old_parameters = old.get("parameters", [])
    by_name = {_bare(p["name"]): p for p in old_parameters}
    main_title = next(
        (p["section"] for p in old_parameters if p["section"].lower() in MAIN_PARAMETER_SECTIONS),
        DEFAULT_PARAMETER_TITLE[style],
    )
    wanted = {p["name"] for p in parameters}
    entries = []
    for parameter in parameters:
        entry = by_name.get(parameter["name"])
        if entry is None:
            annotation = parameter["annotation"] if include_types else None
            entry = {
                "name": parameter["doc_name"],
                "type": " ".join(annotation.split()) if annotation else None,
                "description": None,
                "section": main_title,
            }
        entries.append(entry)
    # Keyword sections may also describe **kwargs keys: kept even when not in the signature.
    entries += [
        p
        for p in old_parameters
        if _bare(p["name"]) not in wanted and p["section"].lower() in OTHER_PARAMETER_SECTIONS
    ]
    returns, yields = old.get("returns"), old.get("yields")
    properties = any(_decorator_name(d) in PROPERTY_DECORATORS for d in decorators)
    if result is None and not properties:
        returns = yields = None
    elif result is not None and returns is None and yields is None:
        annotation = result["annotation"]
        # NumPy's entry line is the type, so it is written whenever it is known.
        typed = annotation if (include_types or style == "numpy") else None
        fresh = {
            "title": RESULT_TITLE[(style, result["section"])],
            "type": " ".join(typed.split()) if typed else None,
            "description": None,
        }
        if result["section"] == "Yields":
            yields = fresh
        else:
            returns = fresh
    template = {
        "style": style,
        "summary": old.get("summary") or None,
        "description": old.get("description", ""),
        "parameters": entries,
        "returns": returns,
        "yields": yields,
        "sections": old.get("sections", []),
    }
    needs = {
        "summary": template["summary"] is None,
        "parameters": [e["name"] for e in entries if e["description"] is None],
        "result": next(
            (item["title"] for item in (returns, yields) if item and item["description"] is None),
            None,
        ),
    }
    return template, needs


def _kept(parsed: dict[str, Any], style: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """An existing docstring as it is: nothing in it is checked against a signature."""
    template = {**parsed, "style": parsed["style"] or style, "summary": parsed["summary"] or None}
    needs = {"summary": template["summary"] is None, "parameters": [], "result": None}
    return template, needs


def _splice(
    source: str,
    definition: SyntaxNode,
    body: SyntaxNode | None,
    statement: SyntaxNode | None,
    offsets: _Offsets,
) -> tuple[dict[str, Any], str]:
    lines = source.split("\n")
    header_indent = _leading_space(lines[definition.start_point.row])
    colon = next((child for child in definition.children if child.type == ":"), None)
    first = body.named_children[0] if body is not None and body.named_children else None
    inline = first is None or colon is None or first.start_point.row == colon.end_point.row
    if inline:
        # `def f(): return 1`: the body moves to its own lines under the docstring, one level
        # deeper than the header, indented the way the header is (tabs or spaces).
        unit = "\t" if header_indent.startswith("\t") else "    "
        indent = header_indent + unit
        start = offsets.char(colon.end_byte) if colon is not None else len(source)
        if statement is not None:
            end, after = offsets.char(statement.named_children[0].end_byte), ""
        else:
            end = offsets.char(first.start_byte) if first is not None else start
            after = "\n" + indent if first is not None else ""
        return {"start": start, "end": end, "before": "\n" + indent, "after": after}, indent
    assert first is not None
    indent = _leading_space(lines[first.start_point.row])
    if statement is not None:
        literal = statement.named_children[0]
        span = (offsets.char(literal.start_byte), offsets.char(literal.end_byte))
        return {"start": span[0], "end": span[1], "before": "", "after": ""}, indent
    # Comments above the first statement (e.g. `# TODO`) stay under the new docstring.
    leading = next(
        (
            child
            for child in definition.children
            if child.type == "comment"
            and colon is not None
            and child.start_point.row > colon.end_point.row
            and _leading_space(lines[child.start_point.row]) == indent
        ),
        None,
    )
    at = offsets.char((leading or first).start_byte)
    # PEP 257: a blank line after a class docstring, before the methods.
    gap = "\n\n" if definition.type == "class_definition" else "\n"
    return {"start": at, "end": at, "before": "", "after": gap + indent}, indent


# --------------------------------------------------------------------------- parse_docstring


def parse_docstring(docstring: str) -> dict[str, Any]:
    """A docstring's parts, in whichever of Google, NumPy or Sphinx style it is written.

    Returns `style` (None when it has no recognised section), `summary` (the first
    paragraph), `description` (the text up to the first section), `parameters` (each `name`
    as written, e.g. `*args`, `type` or None, `description`, and `section`: the title it
    appeared under), `returns` and `yields` (`title`, `type`, `description`, or None) and
    `sections`: every other section as `title` and `body`, in the docstring's own style.
    Texts keep their line breaks, dedented.
    """
    lines = inspect.cleandoc(docstring).split("\n")
    style = _detect_style(lines)
    parts: dict[str, Any] = {
        "style": style,
        "summary": "",
        "description": "",
        "parameters": [],
        "returns": None,
        "yields": None,
        "sections": [],
    }
    if style == "sphinx":
        start = next(i for i, text in enumerate(lines) if SPHINX_FIELD.match(text))
    elif style == "numpy":
        start = next(i for i in range(len(lines)) if _numpy_header(lines, i))
    elif style == "google":
        start = next(i for i, text in enumerate(lines) if _google_header(text))
    else:
        start = len(lines)
    summary, description = _split_summary(lines[:start])
    parts["summary"], parts["description"] = summary, description
    if style == "sphinx":
        _parse_sphinx(lines[start:], parts)
    elif style == "numpy":
        _parse_numpy(lines[start:], parts)
    elif style == "google":
        _parse_google(lines[start:], parts)
    return parts


def _detect_style(lines: list[str]) -> str | None:
    if any(SPHINX_STYLE.match(text) for text in lines):
        return "sphinx"
    if any(_numpy_header(lines, i) for i in range(len(lines))):
        return "numpy"
    if any(_google_header(text) for text in lines):
        return "google"
    return None


def _numpy_header(lines: list[str], index: int) -> bool:
    return (
        index + 1 < len(lines)
        and bool(lines[index].strip())
        and not lines[index][0].isspace()
        and bool(NUMPY_UNDERLINE.match(lines[index + 1]))
    )


def _google_header(text: str) -> str | None:
    match = GOOGLE_HEADER.match(text)
    return GOOGLE_SECTIONS.get(match["title"].lower()) if match else None


def _split_summary(lines: list[str]) -> tuple[str, str]:
    text = "\n".join(lines).strip("\n")
    summary, _, rest = text.partition("\n\n")
    return summary.strip(), _dedent(rest.strip("\n").split("\n"))


def _dedent(lines: list[str]) -> str:
    widths = [len(text) - len(text.lstrip()) for text in lines if text.strip()]
    cut = min(widths, default=0)
    return "\n".join(text[cut:].rstrip() for text in lines).strip("\n")


def _blocks(lines: list[str], is_start: Callable[[int], bool]) -> Iterator[tuple[int, list[str]]]:
    """Split at each line where `is_start(index)` holds; yields (start, lines)."""
    starts = [i for i in range(len(lines)) if is_start(i)] or [0]
    if starts[0] != 0:
        starts.insert(0, 0)
    for begin, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        yield begin, lines[begin:end]


def _parse_google(lines: list[str], parts: dict[str, Any]) -> None:
    def is_start(i: int) -> bool:
        text = lines[i]
        return bool(_google_header(text)) or (
            bool(text.strip()) and not text[0].isspace() and i > 0 and not lines[i - 1].strip()
        )

    for _, block in _blocks(lines, is_start):
        title = _google_header(block[0])
        content = _dedent(block[1:]) if title else _dedent(block)
        if not content and not title:
            continue
        key = (title or "").lower()
        if key in MAIN_PARAMETER_SECTIONS or key in OTHER_PARAMETER_SECTIONS:
            parts["parameters"] += _google_entries(content, title or "")
        elif key in RETURN_SECTIONS or key in YIELD_SECTIONS:
            first, _, rest = content.partition("\n")
            kind, colon, text = first.partition(":")
            typed = bool(colon) and bool(TYPE_LIKE.match(kind.strip()))
            parts["returns" if key in RETURN_SECTIONS else "yields"] = {
                "title": title,
                "type": kind.strip() if typed else None,
                "description": ((text.strip() if typed else first) + "\n" + rest).strip("\n"),
            }
        else:
            parts["sections"].append({"title": title or "", "body": content})


def _google_entries(content: str, section: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for text in content.split("\n"):
        match = GOOGLE_ENTRY.match(text)
        if match and not text[0].isspace():
            entries.append(
                {
                    "name": match["name"],
                    "type": match["type"].strip() if match["type"] else None,
                    "description": text[match.end() :].strip(),
                    "section": section,
                }
            )
        elif entries:
            entries[-1]["description"] += "\n" + text
    for entry in entries:
        head, _, rest = entry["description"].partition("\n")
        entry["description"] = (head + ("\n" + _dedent(rest.split("\n")) if rest else "")).strip()
    return entries


def _parse_numpy(lines: list[str], parts: dict[str, Any]) -> None:
    for begin, block in _blocks(lines, lambda i: _numpy_header(lines, i)):
        if not _numpy_header(lines, begin):
            if _dedent(block):
                parts["sections"].append({"title": "", "body": _dedent(block)})
            continue
        title = block[0].strip()
        content = "\n".join(text.rstrip() for text in block[2:]).strip("\n")
        key = title.lower()
        if key in MAIN_PARAMETER_SECTIONS or key in OTHER_PARAMETER_SECTIONS:
            parts["parameters"] += _numpy_entries(content, title)
        elif key in RETURN_SECTIONS or key in YIELD_SECTIONS:
            items = [text for text in content.split("\n") if text.strip() and not text[0].isspace()]
            item: dict[str, Any]
            if len(items) == 1 and content.startswith(items[0]):
                typed, _, rest = content.partition("\n")
                item = {
                    "title": title,
                    "type": typed.strip(),
                    "description": _dedent(rest.split("\n")),
                }
            else:
                item = {"title": title, "type": None, "description": content}
            parts["returns" if key in RETURN_SECTIONS else "yields"] = item
        else:
            parts["sections"].append({"title": title, "body": content})


def _numpy_entries(content: str, section: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    group: list[dict[str, Any]] = []
    for text in content.split("\n"):
        match = NUMPY_ENTRY.match(text) if text and not text[0].isspace() else None
        if match:
            names = [name.strip() for name in match["names"].split(",")]
            kind = match["type"].strip() if match["type"] else None
            group = [
                {"name": name, "type": kind, "description": "", "section": section}
                for name in names
            ]
            entries += group
        else:
            for entry in group:
                entry["description"] += "\n" + text
    for entry in entries:
        entry["description"] = _dedent(entry["description"].split("\n"))
    return entries


def _parse_sphinx(lines: list[str], parts: dict[str, Any]) -> None:
    types: dict[str, str] = {}
    rtype: dict[str, str] = {}
    for _, block in _blocks(lines, lambda i: bool(SPHINX_FIELD.match(lines[i]))):
        match = SPHINX_FIELD.match(block[0])
        if match is None:
            if _dedent(block):
                parts["sections"].append({"title": "", "body": _dedent(block)})
            continue
        words = match["head"].split()
        kind = words[0].lower()
        text = ((match["rest"] or "") + "\n" + _dedent(block[1:])).strip()
        if kind in MAIN_PARAMETER_SECTIONS | {"key", "keyword"} and len(words) > 1:
            parts["parameters"].append(
                {
                    "name": words[-1],
                    "type": " ".join(words[1:-1]) or None,
                    "description": text,
                    "section": words[0],
                }
            )
        elif kind == "type" and len(words) == 2:
            types[words[1]] = text
        elif kind in ("rtype", "ytype"):
            rtype[kind] = text
        elif kind in RETURN_SECTIONS or kind in YIELD_SECTIONS:
            key = "returns" if kind in RETURN_SECTIONS else "yields"
            parts[key] = {"title": words[0], "type": None, "description": text}
        else:
            parts["sections"].append({"title": match["head"], "body": text})
    for entry in parts["parameters"]:
        entry["type"] = entry["type"] or types.get(_bare(entry["name"]))
    for key, field in (("returns", "rtype"), ("yields", "ytype")):
        if field in rtype:
            title = "returns" if key == "returns" else "yields"
            parts[key] = parts[key] or {"title": title, "type": None, "description": ""}
            parts[key]["type"] = rtype[field]


# --------------------------------------------------------------------------- render_docstring


def render_docstring(
    parts: dict[str, Any], style: str = "google", indent: str = "    ", width: int = 88
) -> str:
    """The docstring literal for `parts` (shaped like `parse_docstring`'s result), in
    `style`, for a body indented with `indent`: the first line without it (the literal goes
    where the old one started), every other line with it.

    Summary, parameter and result descriptions longer than `width` columns are wrapped; other
    text is kept as it is. Text is not escaped: a triple quote in it ends the literal early,
    which `compare_python` then reports. A backslash makes it a raw docstring.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {', '.join(STYLES)}, not {style!r}")
    column = len(indent.expandtabs(4))
    summary = " ".join(str(parts.get("summary") or "").split())
    paragraphs = ["\n".join(_wrap(summary, width - column - 3, "", ""))]
    if parts.get("description"):
        paragraphs.append(str(parts["description"]))
    renderer = {"google": _render_google, "numpy": _render_numpy, "sphinx": _render_sphinx}
    paragraphs += renderer[style](parts, max(width - column, 20))
    body = "\n\n".join(paragraph for paragraph in paragraphs if paragraph)
    lines = body.split("\n")
    prefix = "r" if "\\" in body else ""
    if len(lines) == 1:
        return f'{prefix}"""{lines[0]}"""'
    indented = [lines[0]] + [indent + text if text.strip() else "" for text in lines[1:]]
    return prefix + '"""' + "\n".join(indented) + "\n" + indent + '"""'


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """Word-wrap each line of `text` that does not fit; keep lines that do."""
    out: list[str] = []
    for number, original in enumerate(text.split("\n")):
        lead = first if number == 0 else rest
        line = lead + original
        if len(line) <= width or not original.strip():
            out.append(line.rstrip())
            continue
        current = lead
        for word in original.split():
            if len(current) + len(word) > width and current.strip():
                out.append(current.rstrip())
                current = rest
            current += word + " "
        out.append(current.rstrip())
    return out


def _groups(parts: dict[str, Any], default_title: str) -> list[tuple[str, list[dict[str, Any]]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in parts.get("parameters") or []:
        groups.setdefault(entry.get("section") or default_title, []).append(entry)
    return list(groups.items())


def _text_of(value: Any) -> str:
    return str(value or "").strip()


def _render_google(parts: dict[str, Any], width: int) -> list[str]:
    paragraphs = []
    for title, entries in _groups(parts, "Args"):
        lines = [f"{title}:"]
        for entry in entries:
            kind = f" ({entry['type']})" if entry.get("type") else ""
            lines += _wrap(
                _text_of(entry.get("description")), width, f"    {entry['name']}{kind}: ", " " * 8
            )
        paragraphs.append("\n".join(lines))
    for key, default in (("returns", "Returns"), ("yields", "Yields")):
        item = parts.get(key)
        if item:
            kind = f"{item['type']}: " if item.get("type") else ""
            text = _text_of(item.get("description"))
            lines = _wrap(text, width, "    " + kind, "    ")
            paragraphs.append("\n".join([f"{item.get('title') or default}:", *lines]))
    for section in parts.get("sections") or []:
        body = _indented(section["body"], "    " if section["title"] else "")
        paragraphs.append(f"{section['title']}:\n{body}" if section["title"] else body)
    return paragraphs


def _render_numpy(parts: dict[str, Any], width: int) -> list[str]:
    paragraphs = []
    for title, entries in _groups(parts, "Parameters"):
        lines = [title, "-" * len(title)]
        for entry in entries:
            lines.append(
                f"{entry['name']} : {entry['type']}" if entry.get("type") else entry["name"]
            )
            lines += _wrap(_text_of(entry.get("description")), width, "    ", "    ")
        paragraphs.append("\n".join(lines))
    for key, default in (("returns", "Returns"), ("yields", "Yields")):
        item = parts.get(key)
        if item:
            title = item.get("title") or default
            lines = [title, "-" * len(title)]
            text = _text_of(item.get("description"))
            if item.get("type"):
                lines += [item["type"], *_wrap(text, width, "    ", "    ")]
            else:
                lines += _wrap(text, width, "", "")
            paragraphs.append("\n".join(lines))
    for section in parts.get("sections") or []:
        title = section["title"]
        heading = f"{title}\n{'-' * len(title)}\n" if title else ""
        paragraphs.append(heading + section["body"])
    return paragraphs


def _render_sphinx(parts: dict[str, Any], width: int) -> list[str]:
    lines = []
    for entry in parts.get("parameters") or []:
        field = entry.get("section") or "param"
        name = _bare(entry["name"]) if field in ("param", "parameter") else entry["name"]
        lines += _wrap(_text_of(entry.get("description")), width, f":{field} {name}: ", "    ")
        if entry.get("type"):
            lines.append(f":type {name}: {entry['type']}")
    for key, field in (("returns", "rtype"), ("yields", "ytype")):
        item = parts.get(key)
        if item:
            text = _text_of(item.get("description"))
            if text:
                lines += _wrap(text, width, f":{item.get('title') or key}: ", "    ")
            if item.get("type"):
                lines.append(f":{field}: {item['type']}")
    for section in parts.get("sections") or []:
        if section["title"]:
            head, _, rest = section["body"].partition("\n")
            lines.append(f":{section['title']}: {head}".rstrip())
            if rest:
                lines.append(_indented(rest, "    "))
        else:
            lines.append(section["body"])
    return ["\n".join(lines)] if lines else []


def _indented(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line.strip() else "" for line in text.split("\n"))


# --------------------------------------------------------------------------- helpers


def _walk(root: SyntaxNode) -> Iterator[SyntaxNode]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def _text(node: SyntaxNode) -> str:
    return node.text.decode("utf-8") if node.text is not None else ""


def _snippet(node: SyntaxNode) -> str:
    text = " ".join(_text(node).split())
    return f"`{text[:30]}`" if text else "text"


def _leading_space(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _columns(line: str, byte_column: int) -> str:
    """The part of `line` before a tree-sitter (byte) column."""
    return line.encode("utf-8")[:byte_column].decode("utf-8", errors="replace")
