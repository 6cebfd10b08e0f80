"""Agents' edits reach the user's files only with --fix, atomically, never over newer content."""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from remora.cli.main import main
from remora.edits.apply import apply_changes
from remora.edits.workspace import Workspace
from remora.models.scripted.server import Reply, ScriptedModelServer, tool_call


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if ".remora_cache" in path.parts:
            continue  # Remora's own cache, not the user's files
        digest.update(path.relative_to(root).as_posix().encode())
        if path.is_file():
            digest.update(path.read_bytes())
            digest.update(str(stat.S_IMODE(path.stat().st_mode)).encode())
    return digest.hexdigest()


def editing_script() -> list[Reply]:
    """Edit, then check (a marker that is not there: no findings), then submit."""
    return [
        tool_call("replace_text", {"old": "upper", "new": "lower"}),
        tool_call("find_todos", {"marker": "NO-SUCH-MARKER"}),
        tool_call("submit_result", {"summary": "lowered", "todo_count": 0}),
    ]


def analyze(project: Path, *flags: str) -> tuple[int, str, int]:
    with ScriptedModelServer(script=editing_script()) as server:
        code = main(["analyze", "pkg", "--base-url", server.base_url, *flags])
        return code, server.base_url, len(server.requests)


def test_without_fix_the_project_is_untouched(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    before = tree_hash(project)
    code, _, requests = analyze(project, "--format", "json")
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert requests == 3
    assert "edits to 1 file not applied: --diff shows them, --fix applies them" in err
    assert report["results"][0]["changes"][0]["file"] == "pkg/shout.py"
    assert code == 0  # no findings: the agent only edited
    assert tree_hash(project) == before


def test_diff_prints_the_patch_and_writes_nothing(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    before = tree_hash(project)
    analyze(project, "--diff")
    out, err = capsys.readouterr()
    assert "not applied" not in err
    assert out.startswith("--- a/pkg/shout.py\n+++ b/pkg/shout.py\n")
    assert "-    return text.upper()\n+    return text.lower()\n" in out
    assert tree_hash(project) == before


def test_fix_applies_and_keeps_mode_and_line_endings(
    project: Path,
    probe_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = project / "pkg" / "shout.py"
    target.write_bytes(target.read_bytes().replace(b"\n", b"\r\n"))
    target.chmod(0o754)
    monkeypatch.chdir(project)
    analyze(project, "--fix")
    err = capsys.readouterr().err
    assert "fixed pkg/shout.py" in err and "not applied" not in err
    data = target.read_bytes()
    assert b"return text.lower()\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert stat.S_IMODE(target.stat().st_mode) == 0o754
    assert not list(project.rglob(".shout.py.*"))  # no temporary files left


def test_fix_refuses_a_file_that_changed_after_the_agent_read_it(tmp_path: Path) -> None:
    target = tmp_path / "m.py"
    target.write_text("a = 1\n")
    workspace = Workspace(tmp_path)
    workspace.write_text("m.py", workspace.read_text("m.py").replace("1", "2"))
    target.write_text("a = 1  # edited by the user meanwhile\n")
    report = apply_changes(workspace.diff(), tmp_path)
    assert report.applied == []
    assert report.conflicts == ["m.py: changed since the agent read it; not written"]
    assert target.read_text() == "a = 1  # edited by the user meanwhile\n"


def test_overlapping_changes_to_one_file_apply_once(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("a = 1\nb = 1\n")
    first, second = Workspace(tmp_path), Workspace(tmp_path)
    first.write_text("m.py", "a = 2\nb = 1\n")
    second.write_text("m.py", "a = 1\nb = 2\n")
    report = apply_changes([*first.diff(), *second.diff()], tmp_path)
    assert report.applied == ["m.py"]
    assert report.conflicts == ["m.py: overlaps another change to this file; not written"]
    assert (tmp_path / "m.py").read_text() == "a = 2\nb = 1\n"


def test_separate_changes_to_one_file_are_merged(tmp_path: Path) -> None:
    original = "def a():\n    return 1\n\n\ndef b():\n    return 1\n"
    (tmp_path / "m.py").write_bytes(original.replace("\n", "\r\n").encode())
    first, second = Workspace(tmp_path), Workspace(tmp_path)
    first.write_text("m.py", original.replace("def a():\n", 'def a():\n    """A."""\n'))
    second.write_text("m.py", original[: original.index("def b")] + "def b():\n    return 2\n")
    report = apply_changes([*first.diff(), *second.diff()], tmp_path)
    assert (report.applied, report.conflicts) == (["m.py"], [])
    assert (tmp_path / "m.py").read_bytes().decode() == (
        'def a():\r\n    """A."""\r\n    return 1\r\n\r\n\r\ndef b():\r\n    return 2\r\n'
    )


def test_fix_with_a_conflict_exits_1(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The file changes on disk right after the tool's write: a concurrent user edit.
    monkeypatch.chdir(project)
    target = project / "pkg" / "shout.py"

    original_write = Workspace.write_text

    def write_and_race(self: Workspace, path: str, text: str) -> None:
        original_write(self, path, text)
        target.write_text(target.read_text() + "# user edit\n")

    monkeypatch.setattr(Workspace, "write_text", write_and_race)
    code, _, _ = analyze(project, "--fix")
    err = capsys.readouterr().err
    assert code == 1
    assert "conflict: pkg/shout.py: changed since the agent read it; not written" in err
    assert target.read_text().endswith("# user edit\n")
    assert "lower" not in target.read_text()


def test_keep_workspaces_leaves_the_directory_for_inspection(
    project: Path,
    probe_config: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = probe_agent.parent / "tools" / "replace_text.pym"
    script.write_text(
        script.read_text().replace(
            '"replaced"', "r = await run_command('ruff', ['--version'])\n'replaced'"
        )
    )
    monkeypatch.chdir(project)
    analyze(project, "--format", "json", "--keep-workspaces")
    (result,) = json.loads(capsys.readouterr().out)["results"]
    kept = Path(result["workspace"])
    try:
        assert (kept / "pkg" / "shout.py").read_text().count("lower") == 1
    finally:
        shutil.rmtree(kept)


def test_diff_of_a_file_without_a_final_newline_is_a_valid_patch(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("a = 1\nb = 1")
    workspace = Workspace(tmp_path)
    workspace.write_text("m.py", "a = 1\nb = 2")
    (change,) = workspace.diff()
    patch = tmp_path / "change.patch"
    patch.write_text(change.diff)
    done = subprocess.run(
        ["git", "apply", "--check", "--verbose", str(patch)], cwd=tmp_path, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    subprocess.run(["git", "apply", str(patch)], cwd=tmp_path, check=True)
    assert (tmp_path / "m.py").read_text() == "a = 1\nb = 2"
