"""Candidates, ranked: which of the model's drafts of a docstring sentence a reviewer would keep.

A draft is refused outright when it opens with boilerplate ("This function...", "is used to"),
only restates the name ("Stock class.", "Return the result of the __reduce__ method."), copies
one of the examples shown to the model, copies code, or (for a parameter or the result)
contradicts the code: the annotation, the default or how the body uses the value (a dict is not
"a list"; a string passed to `str.join` is not a number). The others are scored:

- grounding: the share of the draft's content words found in the code (the function's name,
  parameters, body, callees, raised exceptions, the module's docstring), stems compared;
- agreement: how much the other drafts (sampled independently) say the same;
- the reviewer: how much the draft makes the model expect the function's code, when the tool
  measured it (`reviewer` gains, in nats per code token, from `score_text`);
- PEP 257's imperative mood for summaries (pydocstyle D401) unless the project's own voice is
  the third person ("Converts ..."), and length.

The best score is the docstring's confidence; the agent withholds a docstring below its
threshold. Pure functions of plain data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from remora.bundled_agents.docstring.library.words import (
    content_words,
    f1,
    rouge_l,
    stem,
    third_person,
    words,
)

GENERIC_WORDS = frozenset(
    """return returns get gets set sets function method class object value values result
    results instance helper utility func init initialize initializes create creates make
    makes call calls called""".split()  # noqa: SIM905
)
BOILERPLATE = [
    (re.compile(r"^(this|the|a|an)\s+(\w+\s+)?(function|method|class|module|helper|routine)\b",
                re.I), "opens with boilerplate (\"This function...\")"),
    (re.compile(r"\b(is|are)\s+used\s+(to|for)\b", re.I), "says \"is used to\""),
    (re.compile(r"^(function|method|helper|returns?\s+the\s+result\s+of)\b", re.I),
     "opens with boilerplate"),
    (re.compile(r"\b(todo|fixme|lorem ipsum|docstring)\b", re.I), "is a placeholder"),
]  # fmt: skip
KIND_WORDS = [
    ("sequence", re.compile(r"\b(lists?|tuples?|arrays?|sequences?)\b", re.I)),
    ("mapping", re.compile(r"\b(dict|dicts|dictionary|dictionaries|mapping|mappings)\b", re.I)),
    ("number", re.compile(r"\b(integer|integers|float|floats|number of)\b", re.I)),
    ("boolean", re.compile(r"\b(boolean|true|false|whether)\b", re.I)),
    ("callable", re.compile(r"\b(function|callable|callback)\b", re.I)),
]  # fmt: skip
ANNOTATION_KINDS = {
    "dict": "mapping", "Dict": "mapping", "Mapping": "mapping", "MutableMapping": "mapping",
    "OrderedDict": "mapping", "defaultdict": "mapping", "Counter": "mapping",
    "list": "sequence", "List": "sequence", "Sequence": "sequence", "tuple": "sequence",
    "Tuple": "sequence", "set": "sequence", "Set": "sequence", "frozenset": "sequence",
    "Iterable": "sequence", "Iterator": "sequence", "Collection": "sequence",
    "MutableSequence": "sequence", "Generator": "sequence",
    "str": "string", "bytes": "string", "int": "number", "float": "number",
    "complex": "number", "Decimal": "number", "Fraction": "number", "bool": "boolean",
    "Callable": "callable",
}  # fmt: skip
COMPATIBLE = {
    "sequence": {"sequence", "iterable"},
    "mapping": {"mapping", "iterable"},
    "number": {"number", "boolean"},
    "boolean": {"boolean", "number"},
    "callable": {"callable"},
}
UNKNOWN_KINDS = {"Any", "object", "T", "None", "Optional", "Union"}
MAX_SUMMARY_WORDS = 16
TYPE_WORDS = ("string", "str", "text", "list", "dict", "dictionary", "number", "integer",
              "int", "float", "boolean", "bool", "tuple", "object", "given", "input", "output",
              "none")  # fmt: skip


# --------------------------------------------------------------------------- words


def is_grounded(word: str, vocabulary: set[str]) -> bool:
    root = stem(word)
    if root in vocabulary or word in vocabulary:
        return True
    # "camel" in camelize, "ordinal" in ordinalize: a prefix of four letters or more.
    return len(root) >= 4 and any(
        len(known) >= 4 and (known.startswith(root) or root.startswith(known))
        for known in vocabulary
    )


def vocabulary(grounding: Sequence[str]) -> set[str]:
    return {stem(word) for word in grounding} | set(grounding)


NEUTRAL_WORDS = frozenset(
    """number amount size name key index path file text string value values data object""".split()  # noqa: SIM905
)
"""Words that name a role, not a claim: not counted for or against grounding."""


def grounding_share(text: str, known: set[str]) -> float:
    content = [w for w in content_words(text) if w not in GENERIC_WORDS]
    content = [w for w in content if w not in NEUTRAL_WORDS] or content
    if not content:
        return 0.0
    return sum(1 for w in content if is_grounded(w, known)) / len(content)


# --------------------------------------------------------------------------- checks


def boilerplate(text: str) -> str | None:
    """Why a sentence is boilerplate, or None."""
    for pattern, why in BOILERPLATE:
        if pattern.search(text):
            return why
    return None


def restates_name(text: str, name_words: Sequence[str], extra: Sequence[str] = ()) -> bool:
    """Whether the sentence says nothing but the name ("Stock class.", "Get the price.")."""
    named = {stem(w) for w in [*name_words, *extra]}
    content = [stem(w) for w in content_words(text) if w not in GENERIC_WORDS]
    return all(
        w in named or any(n.startswith(w) or w.startswith(n) for n in named if len(n) >= 4)
        for w in content
    )


def imperative(text: str, voice: str | None = None) -> str:
    """The summary with a mechanical fix of its opening, meaning kept: "This function returns
    X" -> "Return X", "Returns X" -> "Return X", "This function is used to convert X" ->
    "Convert X". In a project whose summaries are in the third person ("Converts X") the
    subject goes and the verb stays in the third person."""
    text = text.strip()
    third = voice == "third_person"
    used = re.match(
        r"^(?:this|the)\s+(?:\w+\s+)?(?:function|method)\s+(?:is\s+used\s+to|will|can|should|"
        r"is\s+meant\s+to|is\s+designed\s+to)\s+(\w+)(.*)$",
        text,
        re.I | re.S,
    )
    if used is not None:
        verb = used[1].lower()
        return _capital(_third_person_form(verb) if third else verb) + used[2]
    subject = re.match(
        r"^(?:this|the)\s+(?:\w+\s+)?(?:function|method)\s+(\w+s)\b(.*)$", text, re.I | re.S
    )
    if subject is not None:
        verb = subject[1].lower() if third else base_form(subject[1])
        return _capital(verb) + subject[2] if verb else text
    first, _, rest = text.partition(" ")
    if not third and third_person(first):
        verb = base_form(first)
        if verb:
            return _capital(verb) + (" " + rest if rest else "")
    return text


def _capital(word: str) -> str:
    return word[:1].upper() + word[1:]


def _third_person_form(verb: str) -> str:
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def base_form(verb: str) -> str:
    verb = verb.lower()
    special = {"does": "do", "goes": "go", "has": "have", "is": "be"}
    if verb in special:
        return special[verb]
    if verb.endswith(("sses", "shes", "ches", "xes", "zes")):
        return verb[:-2]
    if verb.endswith("ies"):
        return verb[:-3] + "y"
    if verb.endswith("s") and not verb.endswith("ss"):
        return verb[:-1]
    return ""


def mood_problem(text: str, voice: str | None) -> str | None:
    """pydocstyle D401 ("First line should be in imperative mood") unless the project's own
    summaries are in the third person."""
    first = words(text)[:1]
    if first and third_person(first[0]) and voice != "third_person":
        return f"not in the imperative mood ({first[0]!r}, D401)"
    return None


def copies_example(text: str, examples: Sequence[str], name_words: Sequence[str] = ()) -> bool:
    """Whether the draft is one of the examples' summaries, or one with words changed that are
    not this definition's name ("Raise the patch part of the version" adapts bump_minor's "Raise
    the minor part of the version" to bump_patch: that is the project's voice, not a copy)."""
    own = {stem(word) for word in name_words}
    for example in examples:
        if not example or rouge_l(text, example) < 0.7:
            continue
        added = {stem(w) for w in content_words(text)} - {stem(w) for w in content_words(example)}
        if not added or not added & own:
            return True
    return False


def kinds_of(annotation: str | None, default: str | None, uses: Sequence[str]) -> set[str]:
    """What the code says a value is: its annotation's kinds (a union gives several), else its
    default's, else what its use in the body shows. Empty: unknown (no contradiction)."""
    if annotation:
        names = re.findall(r"[A-Za-z_][\w]*", annotation.split("[")[0] if "|" not in annotation
                           and "Optional" not in annotation and "Union" not in annotation
                           else annotation)  # fmt: skip
        found = set()
        for name in names:
            if name in UNKNOWN_KINDS and name not in ("None", "Optional", "Union"):
                return set()
            kind = ANNOTATION_KINDS.get(name.split(".")[-1])
            if kind is not None:
                found.add(kind)
            elif name not in ("None", "Optional", "Union", "typing"):
                return set()  # a class of the project: anything may describe it
        return found
    if default and default != "None":
        if default[:1] in "\"'" or default[:2].lower() in ('f"', "f'", 'r"', "r'", 'b"', "b'"):
            return {"string"}
        if default in ("True", "False"):
            return {"boolean"}
        if re.fullmatch(r"-?\d[\d_]*(\.\d*)?([eE][-+]?\d+)?", default):
            return {"number"}
        if default.startswith("{") or default.startswith("dict("):
            return {"mapping"}
        if default.startswith(("[", "(")) or default in ("list()", "tuple()", "set()"):
            return {"sequence"}
        return set()
    strong = {"mapping", "sequence", "string", "number", "callable"} & set(uses)
    return strong if len(strong) == 1 else set()


def contradiction(text: str, kinds: set[str], uses: Sequence[str] = ()) -> str | None:
    """How a parameter or result sentence contradicts the code, or None: its opening calls the
    value a kind of thing (a list, a dict, a number, a flag, a function) the code says it is
    not, or it calls a separator a character of the text."""
    if "separator" in uses and re.search(r"\b(first|last) (character|letter|word)\b", text, re.I):
        return "describes a separator as a character of the text"
    if not kinds:
        return None
    opening = " ".join(text.split()[:6])
    allowed = set().union(*(COMPATIBLE.get(kind, {kind}) for kind in kinds))
    for claimed, pattern in KIND_WORDS:
        if pattern.search(opening) and claimed not in allowed:
            return f"calls it a {claimed}, but the code says {' or '.join(sorted(kinds))}"
    return None


# --------------------------------------------------------------------------- ranking


def agreement(index: int, drafts: Sequence[str]) -> float:
    """How much the other drafts say the same as drafts[index] (mean content-word F1)."""
    others = [d for i, d in enumerate(drafts) if i != index]
    if not others:
        return 0.0
    return sum(f1(drafts[index], other) for other in others) / len(others)


def rank_drafts(
    drafts: Sequence[str],
    facts: Mapping[str, Any],
    what: str = "summary",
    examples: Sequence[str] = (),
    voice: str | None = None,
    reviewer: Sequence[float | None] = (),
    project: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Every distinct draft with its verdict, best first: {text, score, refused (why, or
    None), grounding, agreement, reviewer, notes}.

    `what` is "summary", "parameter NAME" or "returns"/"yields"; `facts` is `code_facts`'
    result; `examples` the summaries shown to the model (a copy of one is refused);
    `reviewer` the reviewer gain of each draft (None: not measured); `project` sentences the
    project itself wrote for this parameter name (taken first when they contradict nothing).
    """
    known = vocabulary(facts.get("grounding", []))
    # A method's summary that says only its class's name ("Stock class.") restates it too.
    name_words = [*facts.get("name_words", []), *words(str(facts.get("owner") or ""))]
    kinds: set[str] = set()
    uses: list[str] = []
    extra: list[str] = []
    if what.startswith("parameter "):
        name = what.split(" ", 1)[1]
        parameter = facts.get("parameters", {}).get(name, {})
        uses = list(parameter.get("uses", []))
        kinds = kinds_of(parameter.get("annotation"), parameter.get("default"), uses)
        extra = words(name)
    elif what in ("returns", "yields"):
        kinds = kinds_of(facts.get("return_annotation"), None, ()) if what == "returns" else set()
    verdicts: dict[str, dict[str, Any]] = {}
    for source, texts in (("project", project), ("model", drafts)):
        for index, raw in enumerate(texts):
            text = imperative(raw, voice) if what == "summary" else raw.strip()
            if not text or text.lower() in verdicts:
                continue
            verdict = _judge(text, what, known, name_words, extra, kinds, uses, examples, voice)
            if source == "project":
                grounded = 0.5 + 0.5 * float(verdict["grounding"])
                verdict["score"] = grounded if verdict["refused"] is None else 0.0
                verdict["notes"].append("the project's own sentence for this name")
            else:
                gain = reviewer[index] if index < len(reviewer) else None
                verdict["agreement"] = round(agreement(index, drafts), 3)
                verdict["reviewer"] = gain
                verdict["score"] = _score(verdict, gain)
            verdicts[text.lower()] = verdict
    return sorted(verdicts.values(), key=lambda v: (v["refused"] is None, v["score"]), reverse=True)


def _judge(
    text: str,
    what: str,
    known: set[str],
    name_words: Sequence[str],
    extra: Sequence[str],
    kinds: set[str],
    uses: Sequence[str],
    examples: Sequence[str],
    voice: str | None,
) -> dict[str, Any]:
    notes: list[str] = []
    refused = boilerplate(text) if what == "summary" else None
    if refused is None and what == "summary" and restates_name(text, name_words):
        refused = "only restates the name"
    if refused is None and what != "summary":
        refused = contradiction(text, kinds, uses)
    if refused is None and what != "summary" and restates_name(text, TYPE_WORDS):
        refused = "says no more than the type"
    if refused is None and what != "summary" and grounding_share(text, known) == 0:
        refused = "is not grounded in the code (none of its words are there)"
    if refused is None and what != "summary" and restates_name(text, [*extra, *TYPE_WORDS]):
        notes.append("only restates the name")
    if refused is None and copies_example(text, examples, name_words):
        refused = "copies an example"
    if refused is None and _repeats_itself(text):
        refused = "repeats itself"
    mood = mood_problem(text, voice) if what == "summary" else None
    if mood:
        notes.append(mood)
    if what == "summary" and len(words(text)) > MAX_SUMMARY_WORDS:
        notes.append("long")
    return {
        "text": text,
        "score": 0.0,
        "refused": refused,
        "grounding": round(grounding_share(text, known), 3),
        "agreement": 0.0,
        "reviewer": None,
        "notes": notes,
    }


def _repeats_itself(text: str) -> bool:
    content = content_words(text)
    return len(content) >= 4 and len(set(content)) <= len(content) / 2


def _score(verdict: Mapping[str, Any], gain: float | None) -> float:
    if verdict["refused"] is not None:
        return 0.0
    parts = [(0.5, float(verdict["grounding"])), (0.3, min(1.0, 1.5 * float(verdict["agreement"])))]
    if gain is not None:
        parts.append((0.2, max(0.0, min(1.0, gain / 0.3))))
    score = sum(w * v for w, v in parts) / sum(w for w, _ in parts)
    score -= 0.15 * sum(1 for note in verdict["notes"] if "D401" in note)
    score -= 0.1 * sum(1 for note in verdict["notes"] if note == "long")
    score -= 0.2 * sum(1 for note in verdict["notes"] if note == "only restates the name")
    return round(max(0.0, score), 3)
