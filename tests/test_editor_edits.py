"""The language server's pure parts: a change as the smallest line edit, findings as
diagnostics with UTF-16 columns and help links, and when a change is stale."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from lsprotocol import types

from remora.agents.definition import RuleSpec
from remora.discovery.nodes import Node, NodeType
from remora.discovery.walk import iter_python_files, walked
from remora.editor.diagnostics import diagnostics
from remora.editor.edits import Stale, line_edit, text_to_change
from remora.findings.results import Change, Finding, JobResult, JobStatus


def apply(old: str, edit: types.TextEdit) -> str:
    """What an editor does with the edit: positions are (line, UTF-16 column)."""
    lines = old.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        before = "".join(lines[: position.line])
        line = lines[position.line] if position.line < len(lines) else ""
        units = line.encode("utf-16-le")[: 2 * position.character].decode("utf-16-le")
        return len(before) + len(units)

    return old[: offset(edit.range.start)] + edit.new_text + old[offset(edit.range.end) :]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a\nb\nc\n", "a\nB\nc\n"),  # one line in the middle
        ("a\nb\nc\n", "a\nb\nc\nd\n"),  # appended
        ("a\nb\nc", "a\nb\nC"),  # the last line has no line end
        ("a\nb", "a\nb\n"),  # a line end added at the end
        ("x = 'é𝄞'\nb\n", "x = 'é𝄞'\nb\nc"),
        ("a\r\nb\r\n", "a\r\nB\r\n"),
        ("", "new\n"),
        ("same\n", "same\n"),
    ],
)
def test_a_line_edit_turns_the_old_text_into_the_new(old: str, new: str) -> None:
    edit = line_edit(old, new)
    assert apply(old, edit) == new
    assert edit.range.start.character == 0


def test_only_the_lines_that_differ_are_replaced() -> None:
    edit = line_edit("a\nb\nc\nd\n", "a\nb\nX\nd\n")
    assert (edit.range.start.line, edit.range.end.line, edit.new_text) == (2, 3, "X\n")


def node(text: str) -> Node:
    return Node(
        id="m.py::f", type=NodeType.FUNCTION, name="f", qualified_name="f", file="m.py",
        start_line=1, start_column=1, end_line=2, start_byte=0, end_byte=len(text.encode()),
        text=text,
    )  # fmt: skip


def test_diagnostics_count_utf16_and_link_the_rule() -> None:
    text = "def f():\n    s = '𝄞'; import os\n"
    found = Finding(
        rule="F401", message="`os` imported but unused", file="m.py", line=2, column=14,
        help_uri="https://docs.astral.sh/ruff/rules/unused-import",
    )  # fmt: skip
    declared = Finding(rule="X1", message="", file="m.py", line=1, column=1, severity="info")
    result = JobResult(
        node=node(text), agent="lint", status=JobStatus.SUCCESS, summary="1 problem",
        findings=[found, declared],
    )  # fmt: skip
    failed = result.model_copy(update={"status": JobStatus.FAILED, "agent": "other"})
    rules = {"lint": {"X1": RuleSpec(short="Rule one", help_uri="https://example.org/x1")}}
    first, second = diagnostics([result, failed], text, rules)  # the failed job shows nothing
    # "𝄞" is two UTF-16 units: 13 characters in is UTF-16 column 14; the line is 23 units.
    assert first.range == types.Range(types.Position(1, 14), types.Position(1, 23))
    assert first.code == "lint/F401" and first.severity == types.DiagnosticSeverity.Warning
    assert first.code_description is not None
    assert first.code_description.href == found.help_uri
    assert first.message == "`os` imported but unused\nlint: 1 problem"
    assert first.data == {"node": "m.py::f", "agent": "lint"}
    assert second.message == "Rule one\nlint: 1 problem"
    assert second.code_description is not None
    assert second.code_description.href == "https://example.org/x1"
    assert second.severity == types.DiagnosticSeverity.Information


def stale_reason(change: Change, path: Path, buffer: str | None) -> str | None:
    try:
        text_to_change(change, path, buffer)
    except Stale as stale:
        return str(stale)
    return None


def test_a_change_is_stale_once_the_file_or_the_buffer_moved_on(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    read = hashlib.sha256(b"x = 1\n").hexdigest()
    change = Change(file="m.py", diff="", new_text="x = 2\n", original_sha256=read)
    assert stale_reason(change, path, buffer=None) is None
    assert text_to_change(change, path, buffer="x = 1\n") == "x = 1\n"
    assert "unsaved changes" in (stale_reason(change, path, buffer="x = 10\n") or "")
    path.write_text("x = 3\n")
    assert "changed since the agent read it" in (stale_reason(change, path, buffer=None) or "")
    path.unlink()
    assert "cannot be read" in (stale_reason(change, path, buffer=None) or "")
    created = Change(file="t.py", diff="", new_text="t\n", original_sha256=None)
    assert stale_reason(created, tmp_path / "t.py", buffer=None) is None
    (tmp_path / "t.py").write_text("mine\n")
    assert "exists now" in (stale_reason(created, tmp_path / "t.py", buffer=None) or "")


def test_the_editor_analyses_what_walking_the_workspace_reaches(tmp_path: Path) -> None:
    root = tmp_path / "project"
    files = ["pkg/a.py", ".venv/lib/site.py", "build/gen.py", "pkg/gen/x.py", "pkg/skip.py"]
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x = 1\n")
    (root / ".gitignore").write_text("build/\n")
    (root / "pkg" / ".gitignore").write_text("gen/\nskip.py\n")
    (tmp_path / "library.py").write_text("y = 2\n")
    reached = {name for name in files if walked(root / name, root)}
    assert reached == {"pkg/a.py"}
    assert reached == {
        path.relative_to(root).as_posix() for path in iter_python_files([root], root)
    }
    assert not walked(tmp_path / "library.py", root)
