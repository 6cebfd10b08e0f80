"""What check_docstring proposes: the docstring's skeleton in the chosen style (what the model
fills in) and the source with it spliced in at the body's indentation."""

from __future__ import annotations

from typing import Any

from tree_sitter import Node as SyntaxNode

from remora.bundled_agents.docstring.library.parse import (
    DEFAULT_PARAMETER_TITLE,
    MAIN_PARAMETER_SECTIONS,
    OTHER_PARAMETER_SECTIONS,
    RESULT_TITLE,
    bare_name,
)
from remora.bundled_agents.docstring.library.syntax import (
    PROPERTY_DECORATORS,
    ByteOffsets,
    decorator_name,
    leading_space,
)


def docstring_template(
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
    by_name = {bare_name(p["name"]): p for p in old_parameters}
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
        if bare_name(p["name"]) not in wanted and p["section"].lower() in OTHER_PARAMETER_SECTIONS
    ]
    returns, yields = old.get("returns"), old.get("yields")
    properties = any(decorator_name(d) in PROPERTY_DECORATORS for d in decorators)
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


def kept_sections(parsed: dict[str, Any], style: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """An existing docstring as it is: nothing in it is checked against a signature."""
    template = {**parsed, "style": parsed["style"] or style, "summary": parsed["summary"] or None}
    needs = {"summary": template["summary"] is None, "parameters": [], "result": None}
    return template, needs


def splice_docstring(
    source: str,
    definition: SyntaxNode,
    body: SyntaxNode | None,
    statement: SyntaxNode | None,
    offsets: ByteOffsets,
) -> tuple[dict[str, Any], str]:
    lines = source.split("\n")
    header_indent = leading_space(lines[definition.start_point.row])
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
    indent = leading_space(lines[first.start_point.row])
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
            and leading_space(lines[child.start_point.row]) == indent
        ),
        None,
    )
    at = offsets.char((leading or first).start_byte)
    # PEP 257: a blank line after a class docstring, before the methods.
    gap = "\n\n" if definition.type == "class_definition" else "\n"
    return {"start": at, "end": at, "before": "", "after": gap + indent}, indent
