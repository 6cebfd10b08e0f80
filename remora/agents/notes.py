"""The model's own sentence from `submit_result`, kept as a note only when it is its own.

A 270M model copies text from its prompt into arguments ("One sentence on what was fixed and
what remains"); such a note says nothing about the job and is dropped.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from remora.agents.definition import Agent

QUOTES = re.compile("[\"'`\u201c\u201d\u2018\u2019]")
MIN_FRAGMENT = 12
"""Shorter fragments ("Done.") are too common to call a copy."""


def model_note(submitted: dict[str, Any] | None, agent: Agent) -> str | None:
    note = (submitted or {}).get("summary")
    if not isinstance(note, str) or not note.strip():
        return None
    text = _normal(note)
    corpus = _prompt_text(agent)
    copied = len(text) >= MIN_FRAGMENT and text in corpus["whole"]
    if copied or any(fragment in text for fragment in corpus["fragments"]):
        return None
    return note.strip()[:500]


@cache
def _prompt_fragments(texts: tuple[str, ...]) -> dict[str, Any]:
    fragments = set()
    for text in texts:
        for piece in re.split(r"e\.g\.|i\.e\.|[.:;!?\n]", text):
            piece = _normal(piece)
            if len(piece) >= MIN_FRAGMENT:
                fragments.add(piece)
    return {"whole": "\n".join(_normal(text) for text in texts), "fragments": sorted(fragments)}


def _prompt_text(agent: Agent) -> dict[str, Any]:
    texts = [agent.definition.system_prompt, agent.definition.description]
    texts += _descriptions(agent.tool_schemas())
    return _prompt_fragments(tuple(texts))


def _descriptions(value: object) -> list[str]:
    if isinstance(value, dict):
        found = [value["description"]] if isinstance(value.get("description"), str) else []
        return found + [text for item in value.values() for text in _descriptions(item)]
    if isinstance(value, list):
        return [text for item in value for text in _descriptions(item)]
    return []


def _normal(text: str) -> str:
    return " ".join(QUOTES.sub("", text).lower().split()).strip(" ,")
