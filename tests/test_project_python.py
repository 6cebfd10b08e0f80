"""Tests run in the project's interpreter, not Remora's: Remora in one virtual environment, the
project's dependency only in the project's own `.venv` (real venvs, real pytest in the OS
sandbox; only the model is scripted)."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from remora.cli.main import main
from remora.models.scripted.server import ScriptedModelServer
from remora.sandbox.interpreter import project_python
from tests.test_agent_test import calls_write_tests, completions

APP = "import shoutlib\n\n\ndef shout(text: str) -> str:\n    return shoutlib.loud(text)\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`app.py` needs `shoutlib`, installed only in the project's .venv (pytest comes from
    Remora's environment through a .pth file, as if it were installed there too)."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\n')
    (root / "app.py").write_text(APP)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    site = next((root / ".venv" / "lib").glob("python3*/site-packages"))
    (site / "shoutlib.py").write_text("def loud(text):\n    return text.upper() + '!'\n")
    (site / "remoras_pytest.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    monkeypatch.chdir(root)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    return root


def analyze(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, dict, str]:
    return analyze_paths(capsys, "app.py", *flags)


def analyze_paths(
    capsys: pytest.CaptureFixture[str], target: str, *flags: str
) -> tuple[int, dict, str]:
    calls = {"shout": ['"hi")'], "whisper": ['"hi")']}
    with ScriptedModelServer(rule=calls_write_tests, completion=completions(calls)) as server:
        code = main(
            [
                *("analyze", target, "--agents", "test", "--format", "json", "--no-cache"),
                *("--base-url", server.base_url, *flags),
            ]
        )
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_the_test_agent_runs_pytest_in_the_projects_venv(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__("shoutlib")  # not in Remora's environment
    _, report, err = analyze(capsys, "--fix")
    venv_python = project / ".venv" / "bin" / "python"
    said = " ".join(err.split())
    assert f"project Python: {venv_python} (.venv/ at the project root, asked only in the" in said
    (result,) = report["results"]
    assert result["status"] == "success", result["error"]
    text = (project / "tests" / "test_app_shout.py").read_text()
    # A row of the parametrized test: what shoutlib, found only in the project's .venv, did.
    assert "        ('Hello world', 'HELLO WORLD!'),\n" in text
    done = subprocess.run(
        [str(venv_python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout


def test_a_project_that_does_not_import_is_said_once_and_its_jobs_skipped(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "other.py").write_text(APP.replace("def shout", "def whisper"))
    python = f"sandbox.commands.python={sys.executable}"
    code, report, err = analyze_paths(capsys, ".", "-c", python)
    said = " ".join(err.split())
    assert f"project Python: {sys.executable} (sandbox.commands.python)" in said
    for module in ("app", "other"):
        assert said.count(f"{module} does not import in the project's Python") == 1
    assert (
        "ModuleNotFoundError: No module named 'shoutlib'; its one job that needs it is skipped"
        in said
    )
    assert [(r["status"], r["error"]["code"]) for r in report["results"]] == [
        ("skipped", "project_not_importable"),
        ("skipped", "project_not_importable"),
    ]
    assert report["summary"]["agents"]["test"]["skipped"] == 2
    assert code == 0  # nothing was analysed, nothing found: the warning says why
    assert not (project / "tests").exists()


def test_which_python_is_chosen(tmp_path: Path) -> None:
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    venv = tmp_path / "venv" / "bin" / "python"
    venv.symlink_to(sys.executable)
    found = project_python(None, tmp_path, {})
    assert (found.why, found.trusted) == (
        "venv/ at the project root, asked only in the sandbox",
        False,
    )
    trusted = project_python(None, tmp_path, {}, trusted_project=True)
    assert (trusted.why, trusted.trusted) == ("venv/ at the project root", True)
    active = project_python(None, tmp_path, {"VIRTUAL_ENV": sys.prefix})
    assert active.why == "the active virtual environment ($VIRTUAL_ENV)"
    assert project_python(None, tmp_path / "nothing", {}).path == Path(sys.executable)
    chosen = project_python(Path("venv/bin/python"), tmp_path, {"VIRTUAL_ENV": sys.prefix})
    assert chosen == project_python(venv, tmp_path, {})
    assert (chosen.why, chosen.trusted) == ("sandbox.commands.python", True)
    assert active.trusted


def test_a_committed_venv_python_never_runs_on_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cloned repository's `.venv/bin/python` is any program git kept executable: Remora
    asks it its modules, versions and import folders only in the OS sandbox, where it cannot
    write to the host (nor read the marker's folder)."""
    root = tmp_path / "clone"
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / "app.py").write_text("def shout(text):\n    return text.upper()\n")
    marker = tmp_path / "ran-on-the-host"
    python = root / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\ntouch {marker} 2>/dev/null\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    monkeypatch.chdir(root)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    for flags in ((), ("--isolated",)):
        with ScriptedModelServer(rule=calls_write_tests) as server:
            code = main(
                ["analyze", "app.py", "--agents", "test", "--base-url", server.base_url, *flags]
            )
            assert server.requests == []
        # Asked in the sandbox, where it sees no pytest (nor Remora's Python): a requirement
        # unmet, said before any job.
        said = " ".join(capsys.readouterr().err.split())
        assert code == 2
        assert f"python module pytest is not installed in the project's Python {python}" in said
        assert not marker.exists()
    assert main(["list-agents"]) == 0
    assert not marker.exists()
    # A project the user trusts: its environment is theirs, asked on the host.
    with ScriptedModelServer(rule=calls_write_tests) as server:
        main(
            [
                "analyze",
                "app.py",
                "--agents",
                "test",
                "--base-url",
                server.base_url,
                "--trust-project",
            ]
        )
    assert marker.exists()
    marker.unlink()
    # The same script asked by the user's own choice of isolation (only theirs to make) runs.
    monkeypatch.setenv("REMORA_SANDBOX__COMMANDS__ISOLATION", "none")
    with ScriptedModelServer(rule=calls_write_tests) as server:
        main(["analyze", "app.py", "--agents", "test", "--base-url", server.base_url])
    assert marker.exists()


def test_every_module_of_a_package_whose_init_fails_is_said_not_to_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """humanize's `__init__` imports its modules, then asks `importlib.metadata` for its own
    version, which fails where the package is not installed. The first module checked failed;
    the next "imported" (its module was left in sys.modules by the failed `__init__`), and its
    jobs failed one by one on the probe's import. Each module of the package is now said not to
    import, and every job that needs one is skipped."""
    root = tmp_path / "project"
    (root / "src" / "lib").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "lib"\nversion = "0"\n')
    (root / "src" / "lib" / "__init__.py").write_text(
        "import importlib.metadata\n\nfrom lib.sizes import size\nfrom lib.words import word\n\n"
        '__version__ = importlib.metadata.version("lib-never-installed")\n'
    )
    (root / "src" / "lib" / "sizes.py").write_text("def size(n: int) -> str:\n    return 'B'\n")
    (root / "src" / "lib" / "words.py").write_text("def word(n: int) -> str:\n    return str(n)\n")
    monkeypatch.chdir(root)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    python = f"sandbox.commands.python={sys.executable}"
    code, report, err = analyze_paths(capsys, "src", "-c", python)
    said = " ".join(err.split())
    for module in ("lib.sizes", "lib.words"):
        assert f"{module} does not import in the project's Python" in said, said
    assert "PackageNotFoundError" in said
    assert {(r["node"]["qualified_name"], r["status"]) for r in report["results"]} == {
        ("size", "skipped"),
        ("word", "skipped"),
    }
    assert code == 0
