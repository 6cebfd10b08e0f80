"""The parts of fix_plan (docstring_fix.py) that rewrite a named section: Raises made of the
exceptions the body raises, and Attributes made of the class body's names. Each takes the
plan being built (typed loosely: this module sits below docstring_fix) and records which
codes it fixed (`decided`), needs the model for (`drafted`) or leaves, with why (`left`)."""

from __future__ import annotations

import ast
import re
from typing import Any

from remora.bundled_agents.docstring.library.facts import (
    ATTRIBUTE_CODES,
    RAISE_CODES,
    argument_renames,
    class_attributes,
    exception_like,
    listed_in_message,
    message_difference,
    raised_exceptions,
)
from remora.bundled_agents.docstring.library.parse import google_entries, numpy_entries
from remora.bundled_agents.docstring.library.render import render_entries


def raises(
    plan: Any,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    codes: list[str],
    messages: dict[str, str],
    facts: list[dict[str, str]],
) -> None:
    body = listed_in_message(messages.get("DOC503", ""), "Raised exceptions in the body")
    if not body and "DOC503" not in messages:
        body = raised_exceptions(function)
    undecided = [name for name in body if not exception_like(name)]
    if not body or undecided:
        why = (
            "the body raises "
            + (", ".join(undecided) if undecided else "nothing Remora can name")
            + ": not an exception class"
        )
        plan._settle(codes, RAISE_CODES, False, why)
        return
    known = {item["name"]: item["description"] for item in facts}
    at, documented = _raises_entries(plan)
    unread = _unread(plan, at, documented)
    if unread:  # rewriting the section would lose what it says
        why = f"Raises is written in a form Remora does not read ({unread!r}): left as written"
        plan._settle(codes, RAISE_CODES, False, why)
        return
    old = {entry["name"]: entry["description"] for entry in documented}
    # A documented exception no raise statement raises may still come from a call or an
    # operation (humanize's `OverflowError` from `timedelta(seconds=value)`): Remora cannot
    # tell a stale entry from that, so it neither drops it nor gives its sentence to another.
    kept = [name for name in old if name not in body]
    if kept:
        why = (
            "Raises documents " + ", ".join(kept) + ", which no raise statement of the body "
            "raises: it may come from a call, so the section is left as written"
        )
        plan._settle(codes, RAISE_CODES, False, why)
        return
    added = [name for name in body if name not in old]
    wrapped = [d for d in decorators(function) if d not in TRANSPARENT]
    if added and wrapped:
        why = (
            f"decorated with @{wrapped[0]}, which may catch or change what the body raises: "
            "Raises left to a reviewer"
        )
        plan._settle(codes, RAISE_CODES, False, why)
        return
    entries = []
    missing = []
    for name in [n for n in old if n in body] + added:
        text = old.get(name) or known.get(name) or known.get(name.split(".")[-1], "")
        if not text:
            missing.append(name)
        entries.append({"name": name, "type": None, "description": text})
    if missing:
        why = "nothing in the code describes " + ", ".join(missing)
        plan._settle(codes, RAISE_CODES, False, why)
        return
    for parts in plan._both():
        _write_raises(plan, parts, at, entries)
    if added:
        plan.changes.append("Raises: " + ", ".join(added) + " from the raise statements")
    plan._settle(codes, RAISE_CODES, False, None)


def _raises_entries(plan: Any) -> tuple[int | None, list[dict[str, Any]]]:
    sections = plan.parts["sections"]
    if plan.style == "sphinx":
        found = [
            {"name": s["title"].split()[-1], "description": s["body"]}
            for s in sections
            if s["title"].split()[:1] in (["raises"], ["raise"], ["except"], ["exception"])
            and len(s["title"].split()) == 2
        ]
        first = next(
            (
                i
                for i, s in enumerate(sections)
                if s["title"].split()[:1] in (["raises"], ["raise"], ["except"], ["exception"])
            ),
            None,
        )
        return first, found
    for index, section in enumerate(sections):
        if section["title"].lower() in ("raises", "raise"):
            parse = numpy_entries if plan.style == "numpy" else google_entries
            return index, [
                {"name": e["name"], "description": e["description"]}
                for e in parse(section["body"], section["title"])
            ]
    return None, []


TRANSPARENT = frozenset(
    {
        "staticmethod", "classmethod", "property", "setter", "getter", "deleter",
        "abstractmethod", "overload", "override", "final", "cache", "lru_cache",
        "cached_property", "wraps",
    }
)  # fmt: skip
"""Decorators (by their last name) that pass the body's exceptions through unchanged."""


def decorators(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The last names of a function's decorators: `@functools.lru_cache(maxsize=8)` is
    `lru_cache`."""
    found = []
    for decorator in function.decorator_list:
        called = decorator.func if isinstance(decorator, ast.Call) else decorator
        found.append(ast.unparse(called).rsplit(".", 1)[-1])
    return found


def _unread(plan: Any, at: int | None, documented: list[dict[str, Any]]) -> str:
    """The first line of a Google or NumPy Raises section that opens no entry Remora read
    (validators writes `(ValueError): If ...`, which it does not), or "": the section would be
    rewritten from the entries alone, and that line and its sentence lost."""
    if at is None or plan.style == "sphinx":
        return ""
    names = {entry["name"] for entry in documented}
    for line in str(plan.parts["sections"][at]["body"]).splitlines():
        opens = line.strip() and not line[0].isspace()
        if opens and re.split(r"[\s:(]", line.strip(), maxsplit=1)[0] not in names:
            return line.strip()
    return ""


def _write_raises(
    plan: Any, parts: dict[str, Any], at: int | None, entries: list[dict[str, Any]]
) -> None:
    sections = parts["sections"]
    if plan.style == "sphinx":
        sections[:] = [
            s
            for s in sections
            if s["title"].split()[:1] not in (["raises"], ["raise"], ["except"], ["exception"])
        ]
        fields = [{"title": "raises " + e["name"], "body": e["description"]} for e in entries]
        position = min(at, len(sections)) if at is not None else 0
        sections[position:position] = fields
        return
    body = render_entries(entries, plan.style)
    if at is not None:
        sections[at] = {**sections[at], "body": body, "entries": entries}
    else:
        sections.insert(0, {"title": "Raises", "body": body, "entries": entries})


def attributes(plan: Any, cls: ast.ClassDef, codes: list[str], messages: dict[str, str]) -> None:
    if plan.style == "sphinx":
        plan._settle(
            codes, ATTRIBUTE_CODES, False, "Sphinx attribute fields are left to a reviewer"
        )
        return
    message = messages.get("DOC603", "")
    missing, extra = message_difference(message, "class definition", "docstring")
    order = class_attributes(cls, plan.options)
    at = next(
        (i for i, s in enumerate(plan.parts["sections"]) if s["title"].lower() == "attributes"),
        None,
    )
    parse = numpy_entries if plan.style == "numpy" else google_entries
    documented = parse(plan.parts["sections"][at]["body"], "Attributes") if at is not None else []
    names = [d["name"] for d in documented]
    if "DOC603" not in messages:
        missing = [{"name": a["name"], "type": a["type"]} for a in order if a["name"] not in names]
        extra = [{"name": n, "type": ""} for n in names if n not in {a["name"] for a in order}]
    known = [a["name"] for a in order]
    if any(m["name"] not in known for m in missing):
        plan._settle(
            codes,
            ATTRIBUTE_CODES,
            False,
            "pydoclint's attributes differ from the class body as Remora reads it",
        )
        return
    missing_names = [m["name"] for m in missing]
    extra_names = [e["name"] for e in extra]
    if any(name not in names for name in extra_names):
        why = "pydoclint's attributes differ from the docstring as Remora reads it"
        plan._settle(codes, ATTRIBUTE_CODES, False, why)
        return
    texts = {d["name"]: d["description"] for d in documented}
    renames = argument_renames(names, known, extra_names, missing_names, texts)
    by_name = {d["name"]: d for d in documented}
    types_wanted = bool(plan.options.get("arg_type_hints_in_docstring"))
    entries = []
    to_draft = []
    for attribute in order:
        name = attribute["name"]
        source = next((old for old, new in renames.items() if new == name), name)
        entry = by_name.get(source)
        if entry is None and name not in missing_names:
            continue
        if entry is None:
            entry = {"name": name, "type": None, "description": None}
            to_draft.append(name)
        else:
            entry = {**entry, "name": name}
        if (
            types_wanted
            and attribute["type"]
            and (plan.options.get("arg_type_hints_in_signature") or not entry.get("type"))
        ):
            entry["type"] = attribute["type"]
        elif not types_wanted and "DOC605" in codes:
            entry["type"] = None
        entries.append(entry)
    for old, new in renames.items():
        plan.changes.append(f"attribute {old} renamed {new}")
    dropped = [n for n in extra_names if n not in renames]
    if dropped:
        plan.changes.append("attributes dropped: " + ", ".join(dropped))
    decided_entries = [e for e in entries if e["description"] is not None]
    if to_draft:
        plan._fork()
        plan.needs["attributes"] = to_draft
        plan.changes.append("documents attributes " + ", ".join(to_draft))
    for parts, chosen in ((plan.parts, entries), (plan.decided_parts, decided_entries)):
        sections = parts["sections"]
        index = next(
            (i for i, s in enumerate(sections) if s["title"].lower() == "attributes"), None
        )
        if index is None:
            index = len(sections)
            sections.insert(index, {"title": "Attributes", "body": ""})
        if chosen:
            sections[index] = {**sections[index], "entries": chosen}
        else:
            del sections[index]
        if parts is plan.decided_parts and plan.decided_parts is plan.parts:
            break
    for code in codes:
        if code not in ATTRIBUTE_CODES or code in plan.left:
            continue
        (plan.drafted if to_draft and code in ("DOC601", "DOC603") else plan.decided).append(code)
