"""parse_docstring: a docstring's parts (summary, description, parameters, returns, raises, ...) in
Google, NumPy or Sphinx style, and which style it is written in."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

STYLES = ("google", "numpy", "sphinx")


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


def bare_name(name: str) -> str:
    return name.lstrip("*")


GOOGLE_TITLES = (
    "Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments",
    "Other Parameters", "Returns", "Return", "Yields", "Yield", "Raises", "Raise", "Attributes",
    "Example", "Examples", "Note", "Notes", "Warning", "Warnings", "Warns", "See Also", "Todo",
    "References", "Methods"
)  # fmt: skip


GOOGLE_SECTIONS = {title.lower(): title for title in GOOGLE_TITLES}


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
            parts["parameters"] += google_entries(content, title or "")
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
            section: dict[str, Any] = {"title": title or "", "body": content}
            if title and not parts["parameters"] and not parts["returns"] and not parts["yields"]:
                section["before"] = True  # a Note above Args stays above it when rendered
            parts["sections"].append(section)


def google_entries(content: str, section: str) -> list[dict[str, Any]]:
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
            parts["parameters"] += numpy_entries(content, title)
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


def numpy_entries(content: str, section: str) -> list[dict[str, Any]]:
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
    for _, whole in _blocks(lines, lambda i: bool(SPHINX_FIELD.match(lines[i]))):
        match = SPHINX_FIELD.match(whole[0])
        # A field's body is its indented lines: an unindented line after a blank one (a
        # `.. doctest::` after the last field) is text of its own, not part of the field.
        end = len(whole)
        if match:
            outside = (
                i for i in range(2, end) if not whole[i - 1].strip() and whole[i][:1].strip()
            )
            end = next(outside, end)
        block, after = whole[:end], whole[end:]
        if after:
            parts["sections"].append({"title": "", "body": _dedent(after)})
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
        entry["type"] = entry["type"] or types.get(bare_name(entry["name"]))
    for key, field in (("returns", "rtype"), ("yields", "ytype")):
        if field in rtype:
            title = "returns" if key == "returns" else "yields"
            parts[key] = parts[key] or {"title": title, "type": None, "description": ""}
            parts[key]["type"] = rtype[field]
