"""A cached change made again on a file that changed elsewhere.

A change is a whole-file edit, so by itself it is only valid on the file the job read. But when
it is confined to the node (a docstring written into a function), and the node's text is what
the cache key says it is, the same edit applies to the file as it is now: the node's text
replaced by what the job made of it. This lets an edit elsewhere in a file (a save in the
editor, a run of `watch`) leave the other nodes' changes answered from the cache. Files with
`\\r` line ends are left alone (their text is normalised in changes), as is any change that
reaches outside the node."""

from __future__ import annotations

import hashlib
from pathlib import Path

from remora.discovery.nodes import Node
from remora.edits.workspace import file_diff
from remora.findings.results import Change


def node_text_after(change: Change, node: Node, root: Path) -> str | None:
    """The node's text after `change`, when the change is to the node's own file, stays inside
    the node, and the file on disk is still the one the job read; else None."""
    if change.file != node.file or change.original_sha256 is None or change.newline != "\n":
        return None
    found = _node_in_file(node, root)
    if found is None or found[0] != change.original_sha256:
        return None
    _, text, start, end = found
    prefix, suffix, new = text[:start], text[end:], change.new_text
    if len(new) < len(prefix) + len(suffix) or not (
        new.startswith(prefix) and new.endswith(suffix)
    ):
        return None
    return new[len(prefix) : len(new) - len(suffix)]


def rebased(
    changes: list[Change], after: list[str | None], node: Node, root: Path
) -> list[Change] | None:
    """`changes`, valid on the node's file as it is now (read once): a new file elsewhere as it
    was, while that file still does not exist; a change of the node's file with the node's text
    replaced by its `after`. None when one of them holds neither way (it reached outside the
    node, or the file changed again meanwhile)."""
    found = _node_in_file(node, root)
    out = []
    for change, text_after in zip(changes, after, strict=True):
        if change.original_sha256 is None and change.file != node.file:
            if (root / change.file).exists():
                return None
            out.append(change)
            continue
        if found is None or text_after is None:
            return None
        sha256, text, start, end = found
        new_text = text[:start] + text_after + text[end:]
        update = {
            "new_text": new_text,
            "original_sha256": sha256,
            "diff": file_diff(change.file, text, new_text),
        }
        out.append(change.model_copy(update=update))
    return out


def _node_in_file(node: Node, root: Path) -> tuple[str, str, int, int] | None:
    """(hash of the file's bytes, its text, where the node starts and ends in the text)."""
    try:
        data = (root / node.file).read_bytes()
        text = data.decode("utf-8")
        start = len(data[: node.start_byte].decode("utf-8"))
        end = len(data[: node.end_byte].decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    if b"\r" in data or text[start:end] != node.text:
        return None
    return hashlib.sha256(data).hexdigest(), text, start, end
