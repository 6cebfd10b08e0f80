"""CI habits: cache, changed-only runs, suppressions, baseline, sharding, exit codes, JSONL.

Every test drives `remora analyze` against the scripted model server; git is the real git.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from remora.analysis.shard import in_shard
from remora.cli.main import main
from remora.config.loading import load_settings
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer

MODULE = '''\
"""Module."""


def shout(text):
    # TODO: handle None
    return text.upper()


def whisper(text):
    # TODO: handle empty strings
    return text.lower()
'''


@pytest.fixture
def repo(project: Path, probe_config: Path) -> Path:
    """The sample project as a git repository with one commit."""
    (project / "pkg" / "shout.py").write_text(MODULE)
    (project / ".gitignore").write_text(".remora_cache/\n")
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "initial")
    return project


def git(root: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(["git", *env_args, *args], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def analyze(
    root: Path, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, dict[str, Any], int, str]:
    """Run analyze with JSON output; returns exit code, report, model requests, stderr."""
    rule = CallEveryTool(arguments={"replace_text": {"old": "zzz", "new": "zzz"}})
    with ScriptedModelServer(rule=rule) as server:
        code = main(["analyze", "pkg", "--format", "json", "--base-url", server.base_url, *flags])
        requests = len(server.requests)
    captured = capsys.readouterr()
    report = json.loads(captured.out) if captured.out.strip() else {}
    return code, report, requests, captured.err


def findings(report: dict[str, Any]) -> list[tuple[str, int]]:
    return sorted((r["node"]["name"], f["line"]) for r in report["results"] for f in r["findings"])


# --- cache ---------------------------------------------------------------------------------


def test_second_run_on_an_unchanged_tree_makes_no_model_request(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    code, first, requests, _ = analyze(repo, capsys)
    assert (code, requests) == (1, 6)  # 2 functions x 3 turns
    cache = repo / ".remora_cache"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f")
    assert (cache / ".gitignore").read_text().endswith("*\n")

    code, second, requests, err = analyze(repo, capsys)
    assert (code, requests) == (1, 0)
    assert "2 of 2 jobs answered from the cache" in err
    assert findings(second) == findings(first)
    assert all(result["cached"] for result in second["results"])


def test_cache_follows_moved_code_and_reruns_changed_nodes(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    analyze(repo, capsys)
    source = repo / "pkg" / "shout.py"
    # Ten lines pushed in above both functions, and whisper's body changed.
    moved = MODULE.replace('"""Module."""\n', '"""Module."""\n' + "X = 1\n" * 10)
    source.write_text(moved.replace("text.lower()", "text.casefold()"))
    code, report, requests, err = analyze(repo, capsys)
    assert code == 1
    assert requests == 3  # only whisper asked the model again
    assert "1 of 2 jobs answered from the cache" in err
    assert findings(report) == [("shout", 15), ("whisper", 20)]  # both moved by 10 lines


def test_no_cache_and_cache_dir_and_clean(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    analyze(repo, capsys, "--no-cache")
    assert not (repo / ".remora_cache").exists()
    monkeypatch.setenv("REMORA_CACHE_DIR", str(repo / "elsewhere"))
    analyze(repo, capsys)
    assert (repo / "elsewhere" / "CACHEDIR.TAG").exists()
    assert analyze(repo, capsys)[2] == 0
    assert main(["clean"]) == 0
    assert not (repo / "elsewhere").exists()
    (repo / "elsewhere").mkdir()
    (repo / "elsewhere" / "precious.txt").write_text("x")
    assert main(["clean"]) == 2  # not a tagged cache folder: left alone
    assert (repo / "elsewhere" / "precious.txt").exists()


def test_a_changed_agent_invalidates_the_cache(
    repo: Path,
    probe_agent: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(repo)
    analyze(repo, capsys)
    script = probe_agent.parent / "tools" / "find_todos.pym"
    script.write_text(script.read_text() + "\n# a comment changes the tool\n")
    assert analyze(repo, capsys)[2] == 6
    assert analyze(repo, capsys, "-c", "runner.temperature=0.5")[2] == 6


# --- changed-only --------------------------------------------------------------------------


def test_diff_base_analyses_only_changed_nodes(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    source = repo / "pkg" / "shout.py"
    source.write_text(source.read_text().replace("text.lower()", "text.lower().strip()"))
    (repo / "pkg" / "fresh.py").write_text("def new():\n    # TODO: write it\n    pass\n")
    code, report, requests, _ = analyze(repo, capsys, "--diff-base", "HEAD", "--no-cache")
    assert code == 1
    names = sorted(r["node"]["name"] for r in report["results"])
    assert names == ["new", "whisper"]  # untracked files count as changed
    assert requests == 6
    assert findings(report) == [("new", 2), ("whisper", 10)]


def test_staged_analyses_only_staged_changes(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    source = repo / "pkg" / "shout.py"
    source.write_text(source.read_text().replace("text.upper()", "text.upper().strip()"))
    git(repo, "add", "pkg/shout.py")
    source.write_text(source.read_text().replace("text.lower()", "text.lower().strip()"))
    _, report, _, _ = analyze(repo, capsys, "--staged", "--no-cache")
    assert [r["node"]["name"] for r in report["results"]] == ["shout"]


def test_diff_base_with_a_bad_revision_exits_2(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    code, _, _, err = analyze(repo, capsys, "--diff-base", "no-such-rev")
    assert code == 2
    assert "git rev-parse" in err


# --- suppressions and baseline -------------------------------------------------------------


def test_suppression_comments_on_a_line_and_on_a_definition(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    source = repo / "pkg" / "shout.py"
    text = source.read_text()
    text = text.replace("# TODO: handle None", "# TODO: handle None  # remora: ignore[probe/TD001]")
    text = text.replace("def whisper(text):", "def whisper(text):  # remora: ignore[other/TD001]")
    source.write_text(text)
    _, report, _, _ = analyze(repo, capsys, "--no-cache")
    assert findings(report) == [("whisper", 10)]  # another agent's suppression does not apply
    source.write_text(text.replace("ignore[other/TD001]", "ignore[probe/*]"))
    code, report, _, _ = analyze(repo, capsys, "--no-cache")
    assert findings(report) == []
    assert code == 0


def test_baseline_records_then_reports_only_new_findings(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    baseline = repo / "remora-baseline.json"
    code, report, _, err = analyze(repo, capsys, "--baseline", str(baseline))
    assert code == 0 and findings(report) == []
    assert "recorded 2 findings in the baseline" in err
    assert len(json.loads(baseline.read_text())["fingerprints"]) == 2

    source = repo / "pkg" / "shout.py"
    moved = "X = 1\n" * 20 + source.read_text()
    source.write_text(moved + "\n\ndef later():\n    # TODO: new debt\n    return 1\n")
    code, report, _, err = analyze(repo, capsys, "--baseline", str(baseline))
    assert code == 1
    assert findings(report) == [("later", 35)]  # the moved old findings stay baselined
    assert "2 findings hidden by the baseline" in err


# --- sharding, exit codes, formats, config discovery ----------------------------------------


def test_shards_cover_every_job_exactly_once(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(12):
        (repo / "pkg" / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    monkeypatch.chdir(repo)
    seen: list[str] = []
    for index in (1, 2, 3):
        _, report, _, _ = analyze(repo, capsys, "--shard", f"{index}/3", "--no-cache")
        seen += [r["node"]["id"] for r in report["results"]]
    _, everything, _, _ = analyze(repo, capsys, "--no-cache")
    assert sorted(seen) == sorted(r["node"]["id"] for r in everything["results"])
    assert len(seen) == len(set(seen)) == 14
    # Deterministic: the same key lands in the same shard on every run and machine.
    assert [in_shard("probe::pkg/m1.py::f1", i, 3) for i in (1, 2, 3)].count(True) == 1


@pytest.mark.parametrize("spec", ["0/3", "4/3", "x", "1/0"])
def test_bad_shard_spec_exits_2(
    spec: str, repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    assert analyze(repo, capsys, "--shard", spec)[0] == 2


def test_exit_zero_and_exit_non_zero_on_fix(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    assert analyze(repo, capsys, "--exit-zero")[0] == 0
    (repo / "pkg" / "shout.py").write_text("def clean():\n    return 1\n")
    rule = CallEveryTool(arguments={"replace_text": {"old": "1", "new": "2"}})
    with ScriptedModelServer(rule=rule) as server:
        base = ["analyze", "pkg", "--base-url", server.base_url, "--no-cache", "--fix"]
        assert main([*base, "--exit-non-zero-on-fix"]) == 1
        assert (repo / "pkg" / "shout.py").read_text() == "def clean():\n    return 2\n"
        assert main(base) == 0  # "1" is gone; nothing to replace, nothing to report


def test_zero_nodes_exit_0_but_failed_discovery_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "readme.txt").write_text("not python")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "blob.py").write_bytes(b"\x00\x01")
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", "docs", "--base-url", "http://127.0.0.1:9/v1"]) == 0
    assert "nothing to analyse" in capsys.readouterr().err
    assert main(["analyze", "bad", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "discovery failed" in capsys.readouterr().err


def test_jsonl_streams_one_object_per_job_then_a_summary(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        code = main(["analyze", "pkg", "--output-format", "jsonl", "--base-url", server.base_url])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert [line["type"] for line in lines] == ["result", "result", "summary"]
    assert lines[-1]["jobs"] == 2 and lines[-1]["findings"] == 2
    assert {line["node"]["name"] for line in lines[:2]} == {"shout", "whisper"}


def test_config_is_found_from_the_first_path_and_isolated_ignores_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "remora.yaml").write_text("concurrency: 7\n")
    monkeypatch.chdir(tmp_path)
    assert main(["config", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["concurrency"] == 64  # nothing above tmp_path
    assert load_settings(cwd=project / "src").settings.concurrency == 7
    assert load_settings(cwd=project / "src", isolated=True).settings.concurrency == 64
