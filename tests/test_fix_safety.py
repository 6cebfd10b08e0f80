"""--fix and -o under hostile or broken conditions, on real files.

A change is untrusted data: it never writes outside the project, through a symlink or into a
folder that leads elsewhere. Every file is checked before any is written, and a refusal is a
conflict (exit 1), never a crash. Unexpected errors exit 2, even with --exit-zero. Line endings,
modes and read-only marks of the user's files are respected; no temporary file outlives a write.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import remora
from remora.cli.main import main
from remora.edits.apply import apply_changes
from remora.edits.atomic import remove_stale_temporaries, write_text_atomic
from remora.edits.workspace import Workspace
from remora.findings.results import Change
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer

MODULE = "def shout(text):\n    return text.upper()\n"
OLD = "x = 1\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def untrusted(file: str, original: bytes | None, new_text: str = "pwned = True\n") -> Change:
    """A change as a tampered cache entry could hold it."""
    return Change(
        file=file,
        diff="",
        new_text=new_text,
        original_sha256=sha(original) if original is not None else None,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    old = os.umask(0o022)
    os.umask(old)

    def set_umask(value: int) -> None:
        os.umask(value)

    yield set_umask
    os.umask(old)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the project, holding a file a hostile change would like to write."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.py").write_text(OLD)
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "root"
    project.mkdir()
    return project


# --- 1. nothing is written outside the project ---------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "ABSOLUTE",
        "../outside/victim.py",
        "pkg/../../outside/victim.py",
        "./../outside/victim.py",
    ],
)
def test_a_change_naming_a_path_outside_the_project_is_refused(
    root: Path, outside: Path, name: str
) -> None:
    victim = outside / "victim.py"
    name = str(victim) if name == "ABSOLUTE" else name
    report = apply_changes([untrusted(name, victim.read_bytes())], root)
    assert report.applied == []
    assert len(report.conflicts) == 1
    assert report.conflicts[0].startswith(f"{name}: outside the project")
    assert report.conflicts[0].endswith("; not written")
    assert victim.read_text() == OLD


@pytest.mark.parametrize("name", ["./m.py", "pkg//m.py", "pkg/./m.py", "pkg\\m.py", "", "m.py/"])
def test_a_change_with_a_path_that_is_not_normalised_is_refused(root: Path, name: str) -> None:
    (root / "m.py").write_text(OLD)
    (root / "pkg").mkdir()
    (root / "pkg" / "m.py").write_text(OLD)
    report = apply_changes([untrusted(name, OLD.encode())], root)
    assert report.applied == []
    assert len(report.conflicts) == 1
    assert (root / "m.py").read_text() == (root / "pkg" / "m.py").read_text() == OLD


@pytest.mark.parametrize("name", [".git/hooks/pre-commit", ".venv/bin/activate", "a/.git/config"])
def test_a_change_inside_version_control_or_an_environment_is_refused(
    root: Path, name: str
) -> None:
    """A tampered cache entry must not plant a git hook that runs at the next commit."""
    report = apply_changes([untrusted(name, None)], root)
    assert report.applied == []
    assert len(report.conflicts) == 1
    assert "which agents never write" in report.conflicts[0]
    assert not (root / name).exists()


def test_a_file_swapped_for_a_symlink_to_an_outside_file_is_not_written_through(
    root: Path, outside: Path
) -> None:
    target = root / "m.py"
    target.write_text(OLD)  # the same bytes as the victim: the hash alone would match
    workspace = Workspace(root)
    workspace.write_text("m.py", "x = 2\n")
    target.unlink()
    target.symlink_to(outside / "victim.py")
    report = apply_changes(workspace.diff(), root)
    assert report.applied == []
    assert report.conflicts == ["m.py: is a symbolic link; not written"]
    assert (outside / "victim.py").read_text() == OLD
    assert target.is_symlink()


def test_a_folder_swapped_for_a_symlink_that_leads_outside_is_refused(
    root: Path, outside: Path
) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "victim.py").write_text(OLD)
    workspace = Workspace(root)
    workspace.write_text("pkg/victim.py", "x = 2\n")
    workspace.write_text("pkg/new.py", "y = 1\n")
    shutil.rmtree(root / "pkg")
    (root / "pkg").symlink_to(outside)
    report = apply_changes(workspace.diff(), root)
    assert report.applied == []
    assert sorted(report.conflicts) == [
        "pkg/new.py: folder pkg is a symbolic link; not written",
        "pkg/victim.py: folder pkg is a symbolic link; not written",
    ]
    assert (outside / "victim.py").read_text() == OLD
    assert sorted(p.name for p in outside.iterdir()) == ["victim.py"]


def test_a_new_file_whose_missing_folder_became_a_symlink_is_refused(
    root: Path, outside: Path
) -> None:
    workspace = Workspace(root)
    workspace.write_text("gen/deep/new.py", "y = 1\n")  # gen/ does not exist yet
    (root / "gen").symlink_to(outside)
    (outside / "deep").mkdir()
    report = apply_changes(workspace.diff(), root)
    assert report.conflicts == ["gen/deep/new.py: folder gen is a symbolic link; not written"]
    assert list((outside / "deep").iterdir()) == []


def test_missing_folders_of_a_new_file_are_made_inside_the_project(root: Path) -> None:
    workspace = Workspace(root)
    workspace.write_text("tests/unit/test_new.py", "def test(): ...\n")
    report = apply_changes(workspace.diff(), root)
    assert (report.applied, report.conflicts) == (["tests/unit/test_new.py"], [])
    assert (root / "tests" / "unit" / "test_new.py").read_text() == "def test(): ...\n"


# --- end to end: a project analysed with the scripted model -----------------------------------


def analyze(*flags: str, before_write: Callable[[str], None] | None = None) -> tuple[int, int]:
    """`remora analyze pkg` with the probe agent, which lowers `upper` in each function's file;
    returns the exit code and the number of model requests."""
    rule = CallEveryTool(
        arguments={
            "find_todos": {"marker": "NO-SUCH-MARKER"},
            "replace_text": {"old": "upper", "new": "lower"},
        }
    )
    with ScriptedModelServer(rule=rule) as server:
        code = main(["analyze", "pkg", "--base-url", server.base_url, *flags])
        return code, len(server.requests)


@pytest.fixture
def sabotage(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, Callable[[], object]], None]:
    """Run `act` on the real files right after the agent's write to `key`: the user (or
    another program) changing the project while the agents work."""

    def install(key: str, act: Callable[[], object]) -> None:
        original_write = Workspace.write_text

        def write_then_act(self: Workspace, path: str, text: str) -> None:
            original_write(self, path, text)
            if self.key(path) == key:
                act()

        monkeypatch.setattr(Workspace, "write_text", write_then_act)

    return install


@pytest.fixture
def two_files(project: Path, probe_config: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (project / "pkg" / "shout.py").write_text(MODULE)
    (project / "pkg" / "aaa").mkdir()
    (project / "pkg" / "aaa" / "first.py").write_text(MODULE)  # checked and written first
    (project.parent / "victim.py").write_text(MODULE)  # outside the project
    monkeypatch.chdir(project)
    return project


def replaced_by_a_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def symlinked_outside(path: Path) -> None:
    """Replaced by a symlink to an outside file with the same content."""
    path.unlink()
    path.symlink_to(path.parents[3] / "victim.py")


def folder_symlinked_outside(path: Path) -> None:
    moved = path.parents[3] / "moved"
    shutil.move(path.parent, moved)
    path.parent.symlink_to(moved)


SABOTAGES: dict[str, tuple[Callable[[Path], object], str]] = {
    "directory": (replaced_by_a_directory, "is a directory now"),
    "not-utf8": (
        lambda path: path.write_bytes(b"\xff\xfe" + MODULE.encode("utf-16-le")),
        "changed since the agent read it",
    ),
    "read-only-file": (lambda path: path.chmod(0o444), "the file is read-only"),
    "read-only-folder": (lambda path: path.parent.chmod(0o555), "folder pkg/aaa is not writable"),
    "symlink": (symlinked_outside, "is a symbolic link"),
    "folder-symlink": (folder_symlinked_outside, "folder pkg/aaa is a symbolic link"),
}


@pytest.mark.parametrize("kind", SABOTAGES)
def test_fix_checks_every_file_and_writes_the_others(
    two_files: Path,
    sabotage: Callable[[str, Callable[[], object]], None],
    capsys: pytest.CaptureFixture[str],
    kind: str,
) -> None:
    act, reason = SABOTAGES[kind]
    first = two_files / "pkg" / "aaa" / "first.py"
    sabotage("pkg/aaa/first.py", lambda: act(first))
    try:
        code, requests = analyze("--fix", "--no-cache")
    finally:
        (two_files / "pkg" / "aaa").chmod(0o755)
    err = capsys.readouterr().err
    assert requests == 6  # both jobs ran: 2 x (find_todos, replace_text, submit_result)
    assert f"conflict: pkg/aaa/first.py: {reason}; not written" in err
    assert "Traceback" not in err and "fixed pkg/aaa/first.py" not in err
    assert code == 1  # a conflict, as a changed file has always been
    assert "fixed pkg/shout.py" in err
    assert (two_files / "pkg" / "shout.py").read_text() == MODULE.replace("upper", "lower")
    assert (two_files.parent / "victim.py").read_text() == MODULE  # outside: untouched
    if first.is_file():  # through the symlinks too
        assert "lower" not in first.read_text(errors="replace")


def test_exit_zero_turns_a_conflict_into_0(
    two_files: Path,
    sabotage: Callable[[str, Callable[[], object]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = two_files / "pkg" / "aaa" / "first.py"
    sabotage("pkg/aaa/first.py", lambda: replaced_by_a_directory(first))
    code, _ = analyze("--fix", "--no-cache", "--exit-zero")
    assert code == 0
    assert "conflict: pkg/aaa/first.py: is a directory now" in capsys.readouterr().err


def test_a_tampered_cache_entry_cannot_write_outside_the_project(
    two_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = two_files.parent / "victim.py"
    code, requests = analyze("--format", "json")
    assert (code, requests) == (0, 6)
    entries = list((two_files / ".remora_cache" / "results").rglob("*.json"))
    tampered = 0
    for entry in entries:
        data = json.loads(entry.read_text())
        for item in data.get("changes", []):
            item["change"]["file"] = "../victim.py"
            item["original_sha256"] = sha(victim.read_bytes())
            tampered += 1
        entry.write_text(json.dumps(data))
    assert tampered == 2
    capsys.readouterr()
    code, requests = analyze("--fix")
    err = capsys.readouterr().err
    # The cache checks what it reads back: the tampered entries are misses, not answers (and
    # --fix would refuse such a path anyway, see the tests above), so the jobs ran again.
    assert requests == 6
    assert "../victim.py" not in err and "conflict" not in err
    assert victim.read_text() == MODULE
    assert (two_files / "pkg" / "shout.py").read_text() == MODULE.replace("upper", "lower")


# --- 2. errors exit 2 with one line; -o is checked before the run ---------------------------


def test_an_internal_error_exits_2_with_one_line_even_with_exit_zero(
    two_files: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_: object, **__: object) -> str:
        raise RuntimeError("renderer broke\nsecond line")

    monkeypatch.delenv("REMORA_DEBUG", raising=False)
    monkeypatch.setattr("remora.cli.analyze.render_report", broken)
    code, _ = analyze("--exit-zero", "--no-cache")
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if "internal error" in line]
    assert line.startswith("remora: error: internal error: RuntimeError: renderer broke second")


@pytest.mark.parametrize(
    ("output", "prepare", "message"),
    [
        ("pkg", None, "pkg: is a directory"),
        ("pkg/shout.py/report.json", None, "is not a folder"),
        ("ro/report.json", "ro-folder", "not writable"),
        ("report.json", "ro-file", "report.json: the file is read-only"),
    ],
)
def test_output_that_cannot_be_written_exits_2_before_the_run(
    two_files: Path,
    capsys: pytest.CaptureFixture[str],
    output: str,
    prepare: str | None,
    message: str,
) -> None:
    if prepare == "ro-folder":
        (two_files / "ro").mkdir(mode=0o555)
    if prepare == "ro-file":
        (two_files / "report.json").write_text("old report\n")
        (two_files / "report.json").chmod(0o444)
    code, requests = analyze("-o", output, "--fix", "--exit-zero")
    err = capsys.readouterr().err
    assert (code, requests) == (2, 0)
    assert f"remora: error: cannot write the report to {output}" in err
    assert message in err
    assert "Traceback" not in err
    assert (two_files / "pkg" / "shout.py").read_text() == MODULE


def test_output_that_becomes_a_folder_during_the_run_exits_2_and_fixes_nothing(
    two_files: Path,
    sabotage: Callable[[str, Callable[[], object]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    sabotage("pkg/shout.py", lambda: (two_files / "report.json").mkdir(exist_ok=True))
    code, _ = analyze("-o", "report.json", "--fix", "--no-cache", "--exit-zero")
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot write the report to report.json: Is a directory; no fixes applied" in err
    assert "Traceback" not in err
    assert (two_files / "pkg" / "shout.py").read_text() == MODULE


def test_a_new_report_file_gets_the_umask_mode(
    two_files: Path, umask: Callable[[int], None], capsys: pytest.CaptureFixture[str]
) -> None:
    umask(0o027)
    code, _ = analyze("-o", "out/report.json", "--format", "json", "--no-cache")
    assert code == 0
    report = two_files / "out" / "report.json"
    assert json.loads(report.read_text())["summary"]["jobs"] == 2
    assert mode(report) == 0o640
    assert mode(report.parent) == 0o750


# --- 3. line endings, modes, read-only files, temporary files ---------------------------------


def test_mixed_line_endings_keep_every_untouched_line_byte_for_byte(root: Path) -> None:
    original = b"a = 1\r\nb = 1\nc = 1\r\nd = 1\ne = 1\r\nf = 1"
    (root / "m.py").write_bytes(original)
    workspace = Workspace(root)
    text = workspace.read_text("m.py")
    workspace.write_text("m.py", text.replace("b = 1\nc = 1", "b = 2\nc = 2\nc2 = 2"))
    report = apply_changes(workspace.diff(), root)
    assert (report.applied, report.conflicts) == (["m.py"], [])
    assert (root / "m.py").read_bytes() == (
        # changed lines keep the ending of the line they replace; the added one the last of them
        b"a = 1\r\nb = 2\nc = 2\r\nc2 = 2\r\nd = 1\ne = 1\r\nf = 1"
    )


def test_an_inserted_line_takes_the_most_common_ending(root: Path) -> None:
    (root / "m.py").write_bytes(b"a = 1\r\nb = 1\r\nc = 1\n")
    workspace = Workspace(root)
    workspace.write_text("m.py", workspace.read_text("m.py").replace("b = 1\n", "b = 1\nnew = 1\n"))
    apply_changes(workspace.diff(), root)
    assert (root / "m.py").read_bytes() == b"a = 1\r\nb = 1\r\nnew = 1\r\nc = 1\n"


def test_a_line_added_after_a_last_line_without_ending(root: Path) -> None:
    (root / "m.py").write_bytes(b"a = 1\nb = 1")
    workspace = Workspace(root)
    workspace.write_text("m.py", "a = 1\nb = 1\nc = 1\n")
    apply_changes(workspace.diff(), root)
    assert (root / "m.py").read_bytes() == b"a = 1\nb = 1\nc = 1\n"


@pytest.mark.parametrize(
    ("mask", "file_mode", "folder_mode"),
    [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700), (0o002, 0o664, 0o775)],
)
def test_new_files_get_the_umask_mode(
    root: Path,
    umask: Callable[[int], None],
    mask: int,
    file_mode: int,
    folder_mode: int,
) -> None:
    workspace = Workspace(root)
    workspace.write_text("fixtures/new.json", "{}\n")
    umask(mask)
    report = apply_changes(workspace.diff(), root)
    assert report.applied == ["fixtures/new.json"]
    assert mode(root / "fixtures" / "new.json") == file_mode
    assert mode(root / "fixtures") == folder_mode


def test_a_replaced_file_keeps_its_mode(root: Path, umask: Callable[[int], None]) -> None:
    target = root / "tool.py"
    target.write_text(OLD)
    target.chmod(0o750)
    umask(0o077)
    write_text_atomic(target, "x = 2\n")
    assert (target.read_text(), mode(target)) == ("x = 2\n", 0o750)


def test_a_read_only_file_is_refused_as_a_conflict(root: Path) -> None:
    target = root / "m.py"
    target.write_text(OLD)
    workspace = Workspace(root)
    workspace.write_text("m.py", "x = 2\n")
    target.chmod(0o444)
    report = apply_changes(workspace.diff(), root)
    assert report.applied == []
    assert report.conflicts == ["m.py: the file is read-only; not written"]
    assert (target.read_text(), mode(target)) == (OLD, 0o444)


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".remora-" in p.name)


KILLED_WRITER = """\
import os, sys, time
from pathlib import Path
from remora.edits.atomic import write_text_atomic

def stall(fd):  # the new content is in the temporary file; hang before the rename
    print("writing", flush=True)
    time.sleep(60)

os.fsync = stall
write_text_atomic(Path(sys.argv[1]), "new content\\n")
"""


def test_a_write_killed_with_sigkill_leaves_no_temporary_behind_the_next_write(
    root: Path,
) -> None:
    target = root / "m.py"
    target.write_text(OLD)
    env = {**os.environ, "PYTHONPATH": str(Path(remora.__file__).parents[1])}
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(target)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert writer.stdout is not None
    assert writer.stdout.readline() == "writing\n"
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    writer.stdout.close()
    (left,) = temporaries(root)
    assert re.fullmatch(rf"\.m\.py\.remora-{writer.pid}-[0-9a-f]{{8}}\.tmp", left)
    assert (root / left).read_text() == "new content\n"
    assert target.read_text() == OLD  # the user's file is whole
    write_text_atomic(root / "other.py", "y = 1\n")  # any later write into the folder
    assert temporaries(root) == []
    assert sorted(p.name for p in root.iterdir()) == ["m.py", "other.py"]


def test_only_stale_temporaries_are_removed(root: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    running = subprocess.Popen(["sleep", "30"])
    try:
        names = {
            "dead": f".a.py.remora-{gone.pid}-0123abcd.tmp",
            "alive": f".a.py.remora-{running.pid}-0123abcd.tmp",
            "alive-but-old": f".b.py.remora-{running.pid}-0123abcd.tmp",
            "ours": f".c.py.remora-{os.getpid()}-0123abcd.tmp",
            "not-ours": ".a.py.x1y2z3.tmp",
            "not-ours-either": "a.py.remora-1-0123abcd.tmp",
        }
        for name in names.values():
            (root / name).write_text("partial")
        old = time.time() - 2 * 3600
        os.utime(root / names["alive-but-old"], (old, old))
        folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            removed = remove_stale_temporaries(folder)
        finally:
            os.close(folder)
    finally:
        running.kill()
        running.wait()
    assert sorted(removed) == sorted([names["dead"], names["alive-but-old"]])
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [names["alive"], names["ours"], names["not-ours"], names["not-ours-either"]]
    )


def test_a_long_file_name_gets_a_temporary_name_that_fits(root: Path) -> None:
    target = root / ("n" * 250 + ".py")
    write_text_atomic(target, "x = 1\n")
    assert target.read_text() == "x = 1\n"
    assert temporaries(root) == []
