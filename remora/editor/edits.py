"""An agent's verified change as a code action: a workspace edit the editor applies, or, when the
file is no longer what the agent read, the same action disabled with the reason.

The check is made twice: here against the file on disk and the editor's buffer, and by the
editor itself, which refuses the edit if the buffer's version moved on since the action was
offered (the edit names the version)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from lsprotocol import types

from remora.findings.results import Change, JobResult


class Stale(Exception):
    """The change can no longer be applied; the message says why."""


def text_to_change(change: Change, path: Path, buffer: str | None) -> str:
    """The text the change applies to ("" for a file it creates), read once, so the edit is
    made from the very bytes that were checked. Raises Stale. `buffer` is the editor's text of
    an open file."""
    name = path.name
    if change.original_sha256 is None:
        if path.exists():
            raise Stale(f"{name} exists now; the agent wrote it as a new file")
        return ""
    try:
        data = path.read_bytes()
    except OSError:
        raise Stale(f"{name} cannot be read any more") from None
    if hashlib.sha256(data).hexdigest() != change.original_sha256:
        raise Stale(f"{name} changed since the agent read it; save it and the agents run again")
    text = data.decode("utf-8", errors="replace")
    if buffer is not None and buffer != text:
        raise Stale(f"{name} has unsaved changes; save it and the agents run again")
    return text


def change_action(
    result: JobResult,
    change: Change,
    path: Path,
    *,
    buffer: str | None,
    version: int | None,
    diagnostics: list[types.Diagnostic],
) -> types.CodeAction:
    """The code action for one change of a successful job, disabled when stale."""
    title = f"Remora {result.agent}: {result.summary.strip() or 'apply the change'}"
    action = types.CodeAction(
        title=title, kind=types.CodeActionKind.QuickFix, diagnostics=diagnostics or None
    )
    try:
        old_text = text_to_change(change, path, buffer)
    except Stale as stale:
        action.disabled = types.CodeActionDisabled(reason=str(stale))
        return action
    uri = path.as_uri()
    new_text = change.new_text.replace("\n", change.newline)
    if change.original_sha256 is None:
        insert = types.TextEdit(range=_at(0, 0, 0, 0), new_text=new_text)
        action.edit = types.WorkspaceEdit(
            document_changes=[
                types.CreateFile(uri=uri, options=types.CreateFileOptions(overwrite=False)),
                types.TextDocumentEdit(text_document=_document(uri, None), edits=[insert]),
            ]
        )
        return action
    action.edit = types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=_document(uri, version), edits=[line_edit(old_text, new_text)]
            )
        ]
    )
    return action


def line_edit(old: str, new: str) -> types.TextEdit:
    """One edit that replaces only the lines that differ (the cursor and folds elsewhere stay)."""
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    head = 0
    while head < min(len(old_lines), len(new_lines)) and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(old_lines), len(new_lines)) - head
        and old_lines[-1 - tail] == new_lines[-1 - tail]
    ):
        tail += 1
    end_row = len(old_lines) - tail
    replacement = "".join(new_lines[head : len(new_lines) - tail])
    if end_row == len(old_lines) and old_lines and not old_lines[-1].endswith(("\n", "\r")):
        # The last line has no line end: the range ends at its end, not on a line after it.
        last = old_lines[-1]
        end = types.Position(len(old_lines) - 1, len(last.encode("utf-16-le")) // 2)
    else:
        end = types.Position(end_row, 0)
    return types.TextEdit(range=types.Range(types.Position(head, 0), end), new_text=replacement)


def _document(uri: str, version: int | None) -> types.OptionalVersionedTextDocumentIdentifier:
    """With a version, the editor refuses the edit if its buffer moved on since."""
    return types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)


def _at(row: int, column: int, end_row: int, end_column: int) -> types.Range:
    return types.Range(types.Position(row, column), types.Position(end_row, end_column))
