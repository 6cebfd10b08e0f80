"""render_docstring: a docstring's parts written out in Google, NumPy or Sphinx style, wrapped at
the line length; keep_layout: an edit of a docstring carried onto the author's own text."""

from __future__ import annotations

import difflib
from typing import Any

from remora.bundled_agents.docstring.library.parse import STYLES, bare_name


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
    """Word-wrap each line of `text` that does not fit; keep lines that do. Prose whose lines
    do not fit is re-flowed as one paragraph (wrapping its lines one by one would leave a word
    alone on a line); text with lines of its own (a list, an example, a directive) is not."""
    lines = text.split("\n")
    long = any(len((first if n == 0 else rest) + line) > width for n, line in enumerate(lines))
    if len(lines) > 1 and long and all(_prose(line) for line in lines):
        lines = [" ".join(text.split())]
    out: list[str] = []
    for number, original in enumerate(lines):
        lead = first if number == 0 else rest
        line = lead + original
        if len(line) <= width or not original.strip():
            out.append(line.rstrip())
            continue
        out += wrap_words(original, width, lead, rest).split("\n")
    return out


def _prose(line: str) -> bool:
    """Whether a line is running text: not blank, not a list item, an example or markup."""
    words = line.split()
    if not words:
        return False
    head = words[0]
    return not (
        head in ("-", "*", "+", ">>>", "...", "..")
        or head.rstrip(".)").isdigit()
        or head.startswith((":", "|"))
        or line[:1].isspace()
    )


def wrap_words(text: str, width: int, first: str, rest: str) -> str:
    """`text` word-wrapped at `width` columns, the first line after `first`, the others after
    `rest`; a word longer than the room after `first` stays on the first line."""
    lines, current = [], first
    for word in text.split():
        if len(current) + len(word) > width and current.strip() and current != first:
            lines.append(current.rstrip())
            current = rest
        current += word + " "
    lines.append(current.rstrip())
    return "\n".join(lines)


def _groups(parts: dict[str, Any], default_title: str) -> list[tuple[str, list[dict[str, Any]]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in parts.get("parameters") or []:
        groups.setdefault(entry.get("section") or default_title, []).append(entry)
    return list(groups.items())


def _text_of(value: Any) -> str:
    return str(value or "").strip()


def _render_google(parts: dict[str, Any], width: int) -> list[str]:
    paragraphs = []
    # Sections the author put above the arguments (a Note) stay there.
    early = [section for section in parts.get("sections") or [] if section.get("before")]
    for section in early:
        body = _indented(_section_body(section, "google", width - 4), "    ")
        paragraphs.append(f"{section['title']}:\n{body}")
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
        if section.get("before"):
            continue
        text = _section_body(section, "google", width - 4)
        body = _indented(text, "    " if section["title"] else "")
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
                lines += [item["type"], *(_wrap(text, width, "    ", "    ") if text else [])]
            else:
                lines += _wrap(text, width, "", "")
            paragraphs.append("\n".join(lines))
    for section in parts.get("sections") or []:
        title = section["title"]
        heading = f"{title}\n{'-' * len(title)}\n" if title else ""
        paragraphs.append(heading + _section_body(section, "numpy", width))
    return paragraphs


def _render_sphinx(parts: dict[str, Any], width: int) -> list[str]:
    lines = []
    for entry in parts.get("parameters") or []:
        field = entry.get("section") or "param"
        name = bare_name(entry["name"]) if field in ("param", "parameter") else entry["name"]
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
    paragraphs = []
    for section in parts.get("sections") or []:
        if section["title"]:
            head, _, rest = section["body"].partition("\n")
            lines.append(f":{section['title']}: {head}".rstrip())
            if rest:
                lines.append(_indented(rest, "    "))
        else:  # text after the fields (a `.. doctest::`): a paragraph of its own, as written
            paragraphs.append(section["body"])
    return (["\n".join(lines)] if lines else []) + paragraphs


def _section_body(section: dict[str, Any], style: str, width: int) -> str:
    """A section's text: its `body`, or its named `entries` (Raises, Attributes) written out."""
    if section.get("entries") is None:
        return str(section["body"])
    return render_entries(section["entries"], style, width)


def render_entries(entries: list[dict[str, Any]], style: str, width: int = 84) -> str:
    """The body of a Google or NumPy section of named entries (`name`, `type`, `description`),
    unindented: `name (type): text` or `name : type` over its indented text."""
    lines: list[str] = []
    for entry in entries:
        text = _text_of(entry.get("description"))
        if style == "numpy":
            lines.append(
                f"{entry['name']} : {entry['type']}" if entry.get("type") else entry["name"]
            )
            lines += _wrap(text, width, "    ", "    ") if text else []
        else:
            kind = f" ({entry['type']})" if entry.get("type") else ""
            lines += _wrap(text, width, f"{entry['name']}{kind}: ", "    ")
    return "\n".join(lines)


def _indented(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line.strip() else "" for line in text.split("\n"))


def keep_layout(original: str, before: str, after: str) -> str:
    """`original` (a docstring literal as its author wrote it) with what changed from `before`
    to `after` (the same docstring rendered by Remora, unedited and edited), line for line: a
    fix adds, drops or rewrites its entries' lines and leaves the author's layout (where the
    summary starts, continuation indents, wrapping, blank lines) as it was. `after` whole when
    a changed line has no counterpart in `original` (the author laid it out otherwise); the
    caller's checks (pydoclint, compare_python) judge the text either way."""
    old, base, new = original.split("\n"), before.split("\n"), after.split("\n")
    at: dict[int, int] = {}  # a line of `before` -> the same line of `original`
    for block in difflib.SequenceMatcher(None, base, old, autojunk=False).get_matching_blocks():
        for offset in range(block.size):
            at[block.a + offset] = block.b + offset
    edits: list[tuple[int, int, list[str]]] = []
    matcher = difflib.SequenceMatcher(None, base, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i1 < i2:  # lines replaced or dropped: each must stand in `original`, together
            first = at.get(i1)
            if first is None or any(at.get(i) != first + i - i1 for i in range(i1, i2)):
                return after
            edits.append((first, first + i2 - i1, new[j1:j2]))
        elif i1 in at:  # lines added before a line that stands in `original`
            edits.append((at[i1], at[i1], new[j1:j2]))
        elif i1 - 1 in at:  # ... or after one
            edits.append((at[i1 - 1] + 1, at[i1 - 1] + 1, new[j1:j2]))
        else:
            return after
    for start, end, lines in sorted(edits, reverse=True):
        old[start:end] = lines
    return "\n".join(old)
