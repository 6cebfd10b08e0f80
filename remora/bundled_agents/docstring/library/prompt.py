"""The docstring agent's summary prompt, in one place: the write_docstring tool sends it to the
model, and `remora train docstring --from-code` renders the same text for a definition whose
author wrote the docstring, so what the adapter learns is exactly what the agent asks.

The prompt is the project's nearest documented definitions (`docstring_retrieval`), then the
definition's code once, then its header again up to an opening triple quote: a base model
continues that with a summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

QUOTES = '"""'
LONG_CODE_LINES = 30
"""A longer definition (a class) is shown by its first lines: they say what it is. Thirty, not
sixty: on rich 13.9.4 the lines past the thirtieth were 15 % of the docstring agent's prompts,
which the engine evaluates for every job; bench/docstring_quality.py wrote 26 of 73 (18
acceptable) with thirty, 25 (17) with sixty."""
SCORED_LINES = 12
"""Lines of the body the reviewer scores after a summary."""


def summary_prompt(
    source: str,
    check: Mapping[str, Any],
    examples: Sequence[Mapping[str, Any]],
    code: str,
    end_line: int,
) -> dict[str, str]:
    """The parts of the summary prompt for the definition `check` describes
    (`check_docstring(source, line)`, a definition without a docstring): `code` is the
    definition's text from its first column (a node's text), `end_line` its last line.

    Returns `head` (what the model continues: examples, code, header and the opening quotes),
    `examples` (the examples' texts, each followed by two blank lines), `header` (the
    definition's lines up to where its docstring goes) and `body` (the lines after that place,
    which the reviewer scores)."""
    start = _line_start(source, int(check["line"]))
    rest = source[start:]
    indent = rest[: len(rest) - len(rest.lstrip(" \t"))]
    splice = check["splice"]
    header = source[start : splice["start"]] + splice["before"]
    shown = "\n\n\n".join(str(example["text"]) for example in examples)
    shown = shown + "\n\n\n" if shown else ""
    lines = code.split("\n")
    if len(lines) > LONG_CODE_LINES:
        code = "\n".join(lines[:LONG_CODE_LINES]) + "\n" + str(check["indent"]) + "..."
    head = shown + indent + code + "\n\n" + header + QUOTES
    after = source[splice["end"] :].split("\n")
    ends = end_line - int(check["line"])
    body = splice["after"] + "\n".join(after[: min(SCORED_LINES, ends + 1)])
    return {"head": head, "examples": shown, "header": header, "body": body}


def _line_start(text: str, line: int) -> int:
    """Offset of the start of 1-based `line` in `text`."""
    offset = 0
    for _ in range(line - 1):
        offset = text.index("\n", offset) + 1
    return offset
