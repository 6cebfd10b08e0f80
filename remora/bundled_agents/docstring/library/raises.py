"""What a function's own code says about what it raises (`code_facts`' raises): the exception
classes its raise statements name, each described by its message (a string literal, or one kept
in a variable or continued with `+`, up to where a value is cut in) or else by the `if`
condition above it."""

from __future__ import annotations

import re

from tree_sitter import Node as SyntaxNode

from remora.bundled_agents.docstring.library.words import words


def raise_sites(own: list[SyntaxNode]) -> list[dict[str, str]]:
    found: dict[str, str] = {}
    for node in sorted(own, key=lambda n: n.start_byte):
        if node.type != "raise_statement" or not node.named_children:
            continue
        raised = node.named_children[0]
        callee = raised.child_by_field_name("function") if raised.type == "call" else raised
        if callee is None or callee.type not in ("identifier", "attribute"):
            continue
        name = _text(callee)
        if not re.fullmatch(r"[A-Za-z_][\w.]*", name) or (
            not name[0].isupper() and "." not in name
        ):
            continue
        description = _raise_message(raised, own) or _raise_condition(node)
        if name not in found or (description and not found[name]):
            found[name] = description
    return [{"name": name, "description": text} for name, text in found.items()]


def _message_node(raised: SyntaxNode, own: list[SyntaxNode]) -> SyntaxNode | None:
    """The string the message starts with: the first argument, the left end of a `+` chain
    (`msg + ", got ..."`), or the string last assigned before the raise to the variable there
    (`msg = "..."` in the same body, assigned once)."""
    arguments = raised.child_by_field_name("arguments") if raised.type == "call" else None
    first = (
        arguments.named_children[0] if arguments is not None and arguments.named_children else None
    )
    while first is not None and first.type == "binary_operator":
        operator = first.child_by_field_name("operator")
        if operator is None or operator.type != "+":
            break
        first = first.child_by_field_name("left")
    if first is not None and first.type == "identifier":
        assigned = [
            node.child_by_field_name("right")
            for node in own
            if node.type == "assignment"
            and (left := node.child_by_field_name("left")) is not None
            and _text(left) == _text(first)
        ]
        first = assigned[0] if len(assigned) == 1 else None
    return first


def _raise_message(raised: SyntaxNode, own: list[SyntaxNode]) -> str:
    """The exception's message up to its first placeholder, as a sentence ("" if none); a
    leading `name: ` (the function's own name, as some messages start) left out."""
    first = _message_node(raised, own)
    if first is None or first.type not in ("string", "concatenated_string"):
        return ""
    parts = first.named_children if first.type == "concatenated_string" else [first]
    text = ""
    for part in parts:
        for child in part.named_children:
            if child.type == "string_content":
                text += _text(child)
            elif child.type == "interpolation":
                text += "\0"
            elif child.type == "escape_sequence":
                text += " "
    if "%" in text or "{" in text:  # old-style or str.format placeholders
        text = re.split(r"%[sdrif]|\{[^}]*\}", text)[0] + "\0"
    head = text.split("\0")[0] if "\0" in text else text
    # Words that lead into the cut-off value ("must not be {x}", "got {x}") go with it.
    tail = r"[\s,:;(\[-]*(\b(not|got|but|was|were|is|are|be|for|of|to|as|than|from|with)\b)?"
    head = re.sub(rf"({tail}[\s,:;(\['\"]*)+$", "", head)
    head = re.sub(r"^[A-Za-z_][\w.]*: ", "", " ".join(head.split()))
    for quote in "'\"":  # a closing quote the tail's cut took from its pair (`enum 'ns'`)
        if head.count(quote) % 2 and head + quote in " ".join(text.split()):
            head += quote
    if len(words(head)) < 3:
        return ""
    return head[0].upper() + head[1:] + ("" if head.endswith((".", "!", "?")) else ".")


def _raise_condition(raise_node: SyntaxNode) -> str:
    parent = raise_node.parent
    if parent is not None and parent.type == "block":
        parent = parent.parent
    if parent is None or parent.type not in ("if_statement", "elif_clause"):
        return ""
    condition = parent.child_by_field_name("condition")
    if condition is None:
        return ""
    code = " ".join(_text(condition).split())
    return f"If ``{code}``." if len(code) <= 60 else ""


def _text(node: SyntaxNode) -> str:
    return node.text.decode("utf-8") if node.text is not None else ""
