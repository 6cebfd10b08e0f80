"""The project's own voice: the documented definitions most like the one to document, from the
same module, then its package, then the project (tree-sitter, `docstring_context.definitions`),
chosen by name words, the same class, shared callees and parameter names; the bundled examples
(`examples/`, permissively licensed, licence kept beside them) when the project has
none. A base model continues in the style of what precedes the cut, so these go into the prompt
("Convert strings to CamelCase." instead of "This function is used to...").

The same index answers for parameters: a parameter with the same name documented elsewhere in
the project is the first candidate for its sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from remora.bundled_agents.docstring.library.context import definitions, summary_of
from remora.bundled_agents.docstring.library.parse import parse_docstring
from remora.bundled_agents.docstring.library.words import third_person, words

BUNDLED = Path(__file__).with_name("examples") / "toolz.py.txt"
"""Functions of toolz 1.2.0 (BSD-3-Clause, LICENSE.txt beside it), verbatim."""
PLACES = ("module", "package", "project", "bundled")
NEARNESS = {"module": 0.3, "package": 0.15, "project": 0.0, "bundled": 0.0}
BODY_LINES = 3
"""Lines of an example's body shown under its docstring (then `...`): what it does shows in
its first lines, and every line is prompt the engine evaluates for every job (six lines and
three examples cost 13 % more time on bench/docstring_quality.py for no better drafts)."""
EXAMPLES = 2
"""Examples shown by default (the docstring agent's `examples` option says it again)."""
GENERIC = frozenset({"get", "set", "is", "to", "from", "the", "a", "of", "in", "and", "init"})


def similarity(target: Mapping[str, Any], other: Mapping[str, Any], place: str) -> float:
    """How alike two definitions are: shared name words (most), the same class, shared
    callees and parameter names, and how near the other one is (same module first)."""
    mine = _name_words(str(target["name"]))
    theirs = _name_words(str(other["name"]))
    score = 3.0 * _jaccard(mine, theirs)
    if target.get("owner") and target.get("owner") == other.get("owner"):
        score += 1.0
    score += 1.5 * _jaccard(set(target.get("callees", [])), set(other.get("callees", [])))
    names = {p["name"] for p in target.get("parameters", []) if p["name"] not in ("self", "cls")}
    others = {p["name"] for p in other.get("parameters", []) if p["name"] not in ("self", "cls")}
    score += 1.0 * _jaccard(names, others)
    score += NEARNESS[place]
    return score


@lru_cache(maxsize=4096)
def _name_words(name: str) -> frozenset[str]:
    return frozenset(words(name)) - GENERIC


@lru_cache(maxsize=4096)
def _summary_words(docstring: str) -> tuple[str, ...]:
    return tuple(words(summary_of(docstring)))


@lru_cache(maxsize=4096)
def _described_parameters(docstring: str) -> tuple[tuple[str, str], ...]:
    """(name, description) of the parameters a docstring describes in two words or more."""
    found = []
    for entry in parse_docstring(docstring)["parameters"]:
        text = " ".join(str(entry["description"] or "").split())
        if len(words(text)) >= 2:
            found.append((entry["name"].lstrip("*"), text))
    return tuple(found)


def _jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def nearest_examples(
    source: str,
    line: int,
    others: Mapping[str, str],
    limit: int = EXAMPLES,
    *,
    path: str = "",
) -> dict[str, Any]:
    """The documented definitions nearest the one starting on `line` of `source`.

    `others` maps project paths to their text (the module's own file excluded); a path in
    the module's folder counts as its package. Returns examples (best last, the one nearest
    the cut: {name, qualified_name, place, summary, text} where `text` is the header, the
    docstring's summary as a one-line docstring and the first lines of the body), parameters
    ({name: [{text, place, where}]}: how the project documents parameters of the same
    names), voice (summaries in the project: "imperative", "third_person" or None) and
    bundled (whether the examples are the bundled fallback)."""
    own = definitions(source)
    target = next((d for d in own if line in (d["start_line"], d["line"])), None)
    if target is None:
        raise ValueError(f"no class or function starts on line {line}")
    folder = path.rsplit("/", 1)[0] if "/" in path else ""
    pool: list[tuple[str, str, dict[str, Any]]] = [
        ("module", path, d) for d in own if d is not target and d["docstring"]
    ]
    for other_path, text in sorted(others.items()):
        other_folder = other_path.rsplit("/", 1)[0] if "/" in other_path else ""
        place = "package" if other_folder == folder else "project"
        try:
            found = _documented(text)
        except (ValueError, UnicodeError):
            continue
        pool += [(place, other_path, d) for d in found]
    same_kind = [entry for entry in pool if entry[2]["kind"] == target["kind"]]
    parameters = _parameter_index(target, pool)
    voice = _voice([entry[2] for entry in pool if entry[2]["kind"] == "function"])
    bundled = False
    if not any(summary_of(d["docstring"]) for _, _, d in same_kind):
        same_kind = [("bundled", "", d) for d in _bundled()] if target["kind"] == "function" else []
        bundled = True
    ranked = sorted(
        (entry for entry in same_kind if len(_summary_words(entry[2]["docstring"])) >= 2),
        key=lambda entry: similarity(target, entry[2], entry[0]),
        reverse=True,
    )[:limit]
    examples = [
        {
            "name": d["name"],
            "qualified_name": d["qualified_name"],
            "place": place,
            "path": where,
            "summary": summary_of(d["docstring"]),
            "text": example_text(d),
        }
        for place, where, d in reversed(ranked)
    ]
    return {"examples": examples, "parameters": parameters, "voice": voice, "bundled": bundled}


def example_text(definition: Mapping[str, Any]) -> str:
    """The definition as the prompt shows it: header, its summary as a one-line docstring,
    and the first BODY_LINES lines of its body, dedented to column 0 for a method."""
    header = str(definition["header"])
    indent = header[: len(header) - len(header.lstrip())]
    body = [text for text in str(definition["body"]).split("\n") if text.strip()]
    inner = body[0][: len(body[0]) - len(body[0].lstrip())] if body else indent + "    "
    shown = body[:BODY_LINES] + ([inner + "..."] if len(body) > BODY_LINES else [])
    summary = summary_of(definition["docstring"]).replace('"""', "'''")
    lines = [*header.split("\n"), inner + '"""' + summary + '"""', *shown]
    return "\n".join(text[len(indent) :] if text.startswith(indent) else text for text in lines)


def _parameter_index(
    target: Mapping[str, Any], pool: list[tuple[str, str, dict[str, Any]]]
) -> dict[str, list[dict[str, str]]]:
    wanted = {p["name"] for p in target.get("parameters", [])} - {"self", "cls"}
    found: dict[str, list[dict[str, str]]] = {}
    for place, where, definition in pool:
        if not wanted or definition["kind"] != "function":
            continue
        for name, text in _described_parameters(definition["docstring"]):
            if name in wanted:
                item = {
                    "text": text,
                    "place": place,
                    "where": f"{where}::{definition['qualified_name']}",
                }
                if all(known["text"] != text for known in found.get(name, [])):
                    found.setdefault(name, []).append(item)
    for items in found.values():
        items.sort(key=lambda item: PLACES.index(item["place"]))
    return found


def _voice(documented: list[dict[str, Any]]) -> str | None:
    """How the project's function summaries open: "imperative" ("Convert ..."),
    "third_person" ("Converts ...") or None (too few to tell)."""
    firsts = [_summary_words(d["docstring"])[:1] for d in documented]
    openings = [first[0] for first in firsts if first]
    if len(openings) < 3:
        return None
    third = sum(1 for word in openings if third_person(word))
    return "third_person" if third > len(openings) / 2 else "imperative"


@lru_cache(maxsize=512)
def _documented(source: str) -> tuple[dict[str, Any], ...]:
    """The documented definitions of another file of the project, parsed once per text: every
    docstring job of a run (and every example `remora train --from-code` renders) looks at
    the same files."""
    return tuple(d for d in definitions(source) if d["docstring"])


@lru_cache(maxsize=1)
def _bundled() -> tuple[dict[str, Any], ...]:
    return _documented(BUNDLED.read_text(encoding="utf-8"))
