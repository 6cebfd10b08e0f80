"""fix_plan: a docstring edited to agree with its code where the code alone decides how, from
pydoclint's findings on it (docstring_lint.py). Each finding's code is `decided` (the edit made
of what the code says: an entry dropped, renamed, moved or typed from the annotation, a section
removed or renamed, a Raises section of the exceptions the body raises, each described by its
message or condition), `drafted` (the edit needs a sentence the model writes: a new parameter,
attribute or result) or `left` with the reason (DOC502, DOC301, ...: nothing in the code says
what to write). The tool script renders the plan, has pydoclint check the new text and keeps the
edit only when the findings it fixes are gone and only docstrings changed.

pydoclint's messages are read for what it wants (the arguments and attributes missing from the
docstring or extra in it, the exceptions the body raises, the annotation's types): they are the
words of the pinned version (pydoclint==0.12.0), and the re-check is the proof either way.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from remora.bundled_agents.docstring.library import fix_sections as docstring_fix_sections
from remora.bundled_agents.docstring.library.check import check_docstring
from remora.bundled_agents.docstring.library.context import code_facts
from remora.bundled_agents.docstring.library.facts import (
    ARGUMENT_CODES,
    ATTRIBUTE_CODES,
    FIXABLE,
    RAISE_CODES,
    RESULT_CODES,
    argument_renames,
    default_parameter_title,
    listed_in_message,
    message_difference,
    named_in_message,
    parse_module,
    signature_arguments,
    signature_function,
    yield_type,
)
from remora.bundled_agents.docstring.library.lint import definition_at
from remora.bundled_agents.docstring.library.parse import (
    MAIN_PARAMETER_SECTIONS,
    RESULT_TITLE,
    bare_name,
)

LEFT_REASONS = {
    "DOC001": "the docstring does not parse in the configured style",
    "DOC002": "the file does not parse",
    "DOC003": "the docstring is written in another style than the configured one",
    "DOC106": "only the signature can gain type hints",
    "DOC107": "only the signature can gain type hints",
    "DOC108": "only the signature can lose its type hints",
    "DOC301": "merging __init__'s docstring into the class docstring is a reviewer's edit",
    "DOC302": "a class docstring's Returns section is left to a reviewer",
    "DOC303": "an __init__ docstring's Returns section is left to a reviewer",
    "DOC304": "moving a class docstring's arguments to __init__ spans two definitions",
    "DOC305": "moving a class docstring's Raises section to __init__ spans two definitions",
    "DOC306": "a class docstring's Yields section is left to a reviewer",
    "DOC307": "an __init__ docstring's Yields section is left to a reviewer",
    "DOC405": "a function that both returns and yields is left to a reviewer",
    "DOC502": "the documented exceptions may come from callees: only a reviewer knows",
    "DOC504": "an AssertionError from an assert is left to a reviewer",
}


def fix_plan(
    source: str, line: int, lint: dict[str, Any], include_types: bool = False
) -> dict[str, Any] | None:
    """The edit of the docstring that `lint`'s findings concern (the host function
    docstring_lint's result for the definition starting on `line`), or None when there is no
    docstring to edit.

    Returns `style`, `indent`, `splice` (as check_docstring's), `original_parts`: the
    docstring as parsed (for keep_layout), `parts`: the docstring with
    every fix, None where the model must write a sentence (`needs`: parameters, attributes,
    result), `decided_parts`: only the fixes the code decides (the new entries left out), and
    per finding code `decided`, `drafted` and `left` ({code: reason}); `changes`: what the
    edit does, in words, for the job's summary.
    """
    options = lint.get("options") or {}
    findings = lint.get("findings") or []
    check = check_docstring(source, line, options.get("style") or "google")
    if check is None or check["docstring"] is None:
        return None
    parsed = check["docstring"]["parsed"]
    style = parsed["style"] or options.get("style") or "google"
    codes = list(dict.fromkeys(f["rule"] for f in findings))
    messages = {f["rule"]: f["message"] for f in findings}
    plan = _Plan(copy.deepcopy(parsed), style, options, include_types)
    plan.parts["style"] = style
    plan.parts["summary"] = plan.parts["summary"] or None
    plan.original_parts = copy.deepcopy(plan.parts)
    tree = parse_module(source)
    subject = definition_at(tree, line)
    signature, method = signature_function(tree, subject)
    if options.get("style") and parsed["style"] not in (None, options["style"]):
        for code in codes:
            plan.left[code] = (
                f"the docstring is in {parsed['style']} style; pydoclint reads it as "
                f"{options['style']}"
            )
        return plan.result(check)
    if signature is not None and ARGUMENT_CODES & set(codes):
        plan.arguments(signature, method, codes, messages)
    if signature is not None and RESULT_CODES & set(codes) and subject is signature:
        plan.results(signature, codes, messages)
    if signature is not None and RAISE_CODES & set(codes) and subject is signature:
        facts = code_facts(source, line) or {"raises": []}
        docstring_fix_sections.raises(plan, signature, codes, messages, facts["raises"])
    if isinstance(subject, ast.ClassDef) and ATTRIBUTE_CODES & set(codes):
        docstring_fix_sections.attributes(plan, subject, codes, messages)
    for code in codes:
        if code not in plan.decided and code not in plan.drafted and code not in plan.left:
            plan.left[code] = LEFT_REASONS.get(code, "not a fix the code decides")
    return plan.result(check)


class _Plan:
    def __init__(
        self, parts: dict[str, Any], style: str, options: dict[str, Any], include_types: bool
    ) -> None:
        self.parts = parts
        self.decided_parts = parts  # the same until a fix needs a drafted sentence
        self.style = style
        self.options = options
        self.include_types = include_types
        self.decided: list[str] = []
        self.drafted: list[str] = []
        self.left: dict[str, str] = {}
        self.changes: list[str] = []
        self.needs: dict[str, Any] = {"parameters": [], "attributes": [], "result": None}
        self.original_parts = parts
        """The docstring as parsed, before any fix: rendered beside the fixed one, what
        changed between the two is carried onto the author's text (keep_layout)."""

    def result(self, check: dict[str, Any]) -> dict[str, Any]:
        return {
            "style": self.style,
            "indent": check["indent"],
            "splice": check["splice"],
            "parts": self.parts,
            "original_parts": self.original_parts,
            "decided_parts": self.decided_parts,
            "needs": {"summary": False, **self.needs},
            "decided": self.decided,
            "drafted": self.drafted,
            "left": self.left,
            "changes": self.changes,
        }

    def _fork(self) -> None:
        """From here on `parts` may hold what the model must write; `decided_parts` not."""
        if self.decided_parts is self.parts:
            self.decided_parts = copy.deepcopy(self.parts)

    def _both(self) -> list[dict[str, Any]]:
        return (
            [self.parts] if self.decided_parts is self.parts else [self.parts, self.decided_parts]
        )

    def _settle(
        self, codes: list[str], group: frozenset[str], drafted: bool, why: str | None
    ) -> None:
        for code in codes:
            if code not in group:
                continue
            if why is not None:
                self.left[code] = why
            elif drafted:
                self.drafted.append(code)
            else:
                self.decided.append(code)

    # ----------------------------------------------------------------------- arguments

    def arguments(
        self,
        function: ast.FunctionDef | ast.AsyncFunctionDef,
        method: bool,
        codes: list[str],
        messages: dict[str, str],
    ) -> None:
        wanted = signature_arguments(function, method, self.options)
        order = [bare_name(w["name"]) for w in wanted]
        entries = [
            p for p in self.parts["parameters"] if p["section"].lower() in MAIN_PARAMETER_SECTIONS
        ]
        documented = [bare_name(p["name"]) for p in entries]
        if "DOC103" in messages:
            missing, extra = message_difference(
                messages["DOC103"], "function signature", "docstring"
            )
        else:
            missing = [w for w in wanted if bare_name(w["name"]) not in documented]
            extra = [{"name": n, "type": ""} for n in documented if n not in order]
        missing_names = [bare_name(m["name"]) for m in missing]
        extra_names = [bare_name(e["name"]) for e in extra]
        if any(name not in order for name in missing_names) or any(
            name not in documented for name in extra_names
        ):
            why = "pydoclint's arguments differ from the signature as Remora reads it"
            self._settle(codes, ARGUMENT_CODES, False, why)
            return
        texts = {bare_name(p["name"]): p["description"] for p in entries}
        renames = argument_renames(documented, order, extra_names, missing_names, texts)
        by_name = {bare_name(p["name"]): p for p in entries}
        title = entries[0]["section"] if entries else default_parameter_title(self.style)
        annotations = {bare_name(w["name"]): w["type"] for w in wanted}
        mismatched = set(named_in_message(messages.get("DOC105", ""), "do not match: "))
        untyped = {"DOC109", "DOC110"} & set(codes)
        final: list[dict[str, Any]] = []
        unresolved: list[str] = []
        to_draft: list[str] = []
        for want in wanted:
            name = bare_name(want["name"])
            old = next((o for o, n in renames.items() if n == name), name)
            entry = by_name.get(old)
            if entry is None and name not in missing_names:
                continue  # not documented, and pydoclint does not ask for it
            if entry is None:
                entry = {"name": want["name"], "type": None, "description": None, "section": title}
                to_draft.append(name)
            else:
                entry = {**entry, "name": entry["name"] if old == name else want["name"]}
            fresh = entry["description"] is None or old != name
            if self.options.get("arg_type_hints_in_docstring"):
                if fresh or name in mismatched or (untyped and not entry.get("type")):
                    if annotations.get(name):
                        entry["type"] = annotations[name]
                    elif not entry.get("type") or name in mismatched:
                        unresolved.append(name)
            elif "DOC111" in codes:
                entry["type"] = None
            elif fresh and self.include_types and annotations.get(name):
                entry["type"] = annotations[name]
            final.append(entry)
        others = [p for p in self.parts["parameters"] if p not in entries]
        for old, new in renames.items():
            self.changes.append(f"parameter {old} renamed {new}")
        dropped = [name for name in extra_names if name not in renames]
        if dropped:
            self.changes.append("dropped " + ", ".join(dropped))
        if unresolved:
            for code in {"DOC105", "DOC109", "DOC110"} & set(codes):
                self.left[code] = "no annotation says the type of " + ", ".join(unresolved)
        if to_draft:
            self._fork()
            self.decided_parts["parameters"] = [
                e for e in final if e["description"] is not None
            ] + others
            self.parts["parameters"] = final + others
            self.needs["parameters"] = [e["name"] for e in final if e["description"] is None]
            self.changes.append("documents " + ", ".join(to_draft))
        else:
            for parts in self._both():
                parts["parameters"] = copy.deepcopy(final) + others
        for code in codes:
            if code in ARGUMENT_CODES and code not in self.left:
                drafted = to_draft and code in ("DOC101", "DOC103", "DOC104")
                (self.drafted if drafted else self.decided).append(code)

    # ----------------------------------------------------------------------- results

    def results(
        self,
        function: ast.FunctionDef | ast.AsyncFunctionDef,
        codes: list[str],
        messages: dict[str, str],
    ) -> None:
        returns, yields = self.parts.get("returns"), self.parts.get("yields")
        annotation = ast.unparse(function.returns) if function.returns is not None else None
        yielded = yield_type(function.returns)
        typed_returns = bool(self.options.get("check_return_types")) or self.style == "numpy"
        typed_yields = bool(self.options.get("check_yield_types")) or self.style == "numpy"
        done: list[str] = []
        if "DOC402" in codes and yields is None and returns is not None and "DOC201" not in codes:
            moved = {**returns, "title": RESULT_TITLE[(self.style, "Yields")]}
            moved["type"] = (
                yielded
                if (typed_yields and yielded)
                else (returns.get("type") if not self.options.get("check_yield_types") else None)
            )
            self._set("yields", moved)
            self._set("returns", None)
            done += ["DOC402", "DOC202", "DOC203", "DOC404"]
            self.changes.append("Returns made Yields (the function yields)")
        elif "DOC403" in codes and yields is not None:
            if "DOC201" in codes and returns is None:
                moved = {**yields, "title": RESULT_TITLE[(self.style, "Returns")]}
                if self.options.get("check_return_types") and annotation:
                    moved["type"] = annotation
                self._set("returns", moved)
                done += ["DOC201", "DOC203"]
                self.changes.append("Yields made Returns (the function returns)")
            else:
                self.changes.append("Yields dropped (the function does not yield)")
            self._set("yields", None)
            done.append("DOC403")
        if "DOC202" in codes and "DOC202" not in done and self.parts.get("returns") is not None:
            self._set("returns", None)
            done.append("DOC202")
            self.changes.append("Returns dropped (the function returns nothing)")
        if "DOC203" in codes and "DOC203" not in done and self.parts.get("returns") is not None:
            wanted = listed_in_message(messages["DOC203"], "Return annotation types")
            if len(wanted) == 1 and wanted[0]:
                self._set("returns", {**self.parts["returns"], "type": wanted[0]})
                done.append("DOC203")
                self.changes.append("return type from the annotation")
            elif annotation:
                self.left["DOC203"] = "the docstring documents several return values"
        if "DOC404" in codes and "DOC404" not in done and self.parts.get("yields") is not None:
            if yielded:
                self._set("yields", {**self.parts["yields"], "type": yielded})
                done.append("DOC404")
                self.changes.append("yield type from the annotation")
            else:
                self.left["DOC404"] = "the annotation names no yielded type"
        for code, key, typed, kind in (
            ("DOC201", "returns", typed_returns, annotation),
            ("DOC402", "yields", typed_yields, yielded),
        ):
            if code not in codes or code in done or self.parts.get(key) is not None:
                continue
            section = "Returns" if key == "returns" else "Yields"
            title = RESULT_TITLE[(self.style, section)]
            if kind and self.style == "numpy":
                # numpydoc's entry is the type; its description is optional.
                self._set(key, {"title": title, "type": kind, "description": ""})
                done.append(code)
                self.changes.append(f"{section} from the annotation")
            elif kind and self.style == "sphinx" and key == "returns":
                self._set(key, {"title": title, "type": kind, "description": ""})
                done.append(code)
                self.changes.append(":rtype: from the annotation")
            else:
                self._fork()
                self.parts[key] = {
                    "title": title,
                    "type": kind if (typed or self.include_types) else None,
                    "description": None,
                }
                self.needs["result"] = title
                self.drafted.append(code)
                what = "return value" if key == "returns" else "yielded values"
                self.changes.append("documents the " + what)
                if code == "DOC201" and "DOC203" in codes and "DOC203" not in done:
                    self.drafted.append("DOC203")
                if code == "DOC402" and "DOC404" in codes and "DOC404" not in done:
                    self.drafted.append("DOC404")
        for code in done:
            if code in codes and code not in self.decided and code not in self.left:
                self.decided.append(code)

    def _set(self, key: str, value: Any) -> None:
        for parts in self._both():
            parts[key] = copy.deepcopy(value)


__all__ = ["FIXABLE", "LEFT_REASONS", "fix_plan"]
