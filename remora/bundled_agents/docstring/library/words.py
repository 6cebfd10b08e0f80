"""Words for judging docstrings: identifiers and prose split alike into lower-case words, crude
stems, content words, the similarity of two sentences (content-word F1, ROUGE-L), whether a
summary opens in the third person, and CPython's own docstrings of special methods."""

from __future__ import annotations

import re

WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
STOPWORDS = frozenset(
    """a an the of to in on for from by with and or not no is are be been being it its this that
    these those as at if else when then than so such into onto over under per via any all each
    every some given which who whom whose what where how why will would can could should may
    might must do does did has have had was were i we you he she they them their our your my
    one two use used using also only just both either neither more most less least very much
    many same own""".split()  # noqa: SIM905
)

# CPython's own docstrings of these special methods (Objects/typeobject.c, slotdefs): what they
# do is fixed by the language, so the summary is a fact, not a guess.
SPECIAL_METHODS = {
    "__repr__": "Return repr(self).", "__str__": "Return str(self).",
    "__hash__": "Return hash(self).", "__call__": "Call self as a function.",
    "__iter__": "Implement iter(self).", "__next__": "Implement next(self).",
    "__len__": "Return len(self).", "__getitem__": "Return self[key].",
    "__setitem__": "Set self[key] to value.", "__delitem__": "Delete self[key].",
    "__contains__": "Return bool(key in self).", "__bool__": "True if self else False.",
    "__eq__": "Return self==value.", "__ne__": "Return self!=value.",
    "__lt__": "Return self<value.", "__le__": "Return self<=value.",
    "__gt__": "Return self>value.", "__ge__": "Return self>=value.",
    "__add__": "Return self+value.", "__sub__": "Return self-value.",
    "__mul__": "Return self*value.", "__reduce__": "Helper for pickle.",
}  # fmt: skip


def words(text: str) -> list[str]:
    """The lower-case words of identifiers and prose: `camelCase_name2` -> camel, case, name, 2."""
    return [word.lower() for word in WORD.findall(text)]


def stem(word: str) -> str:
    """A crude stem, enough to match "discounted" with "discount" and "dashes" with "dash"."""
    word = word.lower()
    for suffix in ("ization", "ations", "ation", "izing", "ings", "ized", "izes", "ize",
                   "ing", "ies", "ied", "es", "ed", "ly", "er", "s"):  # fmt: skip
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
    return word


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS and len(w) > 1 and not w.isdigit()]


def f1(candidate: str, reference: str) -> float:
    """Content-word F1 of two sentences (stems compared)."""
    a = [stem(w) for w in content_words(candidate)]
    b = [stem(w) for w in content_words(reference)]
    if not a or not b:
        return 0.0
    common = sum(min(a.count(w), b.count(w)) for w in set(a))
    if not common:
        return 0.0
    precision, recall = common / len(a), common / len(b)
    return 2 * precision * recall / (precision + recall)


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F-measure over lower-case words (the longest common subsequence)."""
    a, b = words(candidate), words(reference)
    if not a or not b:
        return 0.0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    lcs = previous[-1]
    if not lcs:
        return 0.0
    precision, recall = lcs / len(a), lcs / len(b)
    return 2 * precision * recall / (precision + recall)


def third_person(word: str) -> bool:
    """Whether a summary's first word is a verb in the third person ("Returns", "Converts"),
    which PEP 257 (pydocstyle D401) asks to be imperative."""
    word = word.lower()
    if len(word) < 4 or not word.endswith("s") or word.endswith(("ss", "us", "is", "ous")):
        return False
    return word not in NOT_VERBS


NOT_VERBS = frozenset(
    {"this", "these", "those", "its", "has", "was", "does", "always", "perhaps", "whereas",
     "various", "thus", "unless", "yes", "series", "species", "news", "alias", "bytes",
     "settings", "details", "items", "values", "keys", "options", "args", "kwargs",
     "params", "parameters", "results", "utils", "tools", "words", "lines", "files", "names"}
)  # fmt: skip
