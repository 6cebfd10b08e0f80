"""A cloned repository is untrusted input: its configuration cannot weaken the host's safety
unless the user trusts it (config/trust.py), its symbolic links do not lead Remora's reads
outside it, and its cache folder stays inside it (docs/RELIABILITY.md, "Who may set what")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from remora.cli.main import main
from remora.config import trust
from remora.config.settings import AgentSettings, RemoraSettings
from remora.models.scripted.server import CallEveryTool, ScriptedModelServer
from tests.conftest import FIND_TODOS, REPLACE_TEXT, TWO_TOOL_AGENT, write_files

SECRET = "HOST-SECRET-4f1c"

WEAKENING = [
    ("sandbox:\n  commands:\n    isolation: none\n", 3, "sandbox.commands.isolation"),
    ("sandbox:\n  commands:\n    python: tools/python\n", 3, "sandbox.commands.python"),
    ("server:\n  base_url: http://127.0.0.1:9/v1\n", 2, "server.base_url"),
    ("server:\n  api_key: theirs\n", 2, "server.api_key"),
    ("local:\n  models_dir: /tmp/remora-models\n", 2, "local.models_dir"),
    ("local:\n  hf_repo: someone/model\n", 2, "local.hf_repo"),
    ("local:\n  model_path: ../model.gguf\n", 2, "local.model_path"),
    ("cache_dir: ../other\n", 1, "cache_dir"),
    ("agents:\n  lint:\n    definition: ../agent/agent.yaml\n", 3, "agents.lint.definition"),
    ("agents:\n  lint:\n    adapter: /tmp/adapter\n", 3, "agents.lint.adapter"),
    ("trust_project: true\n", 1, "trust_project"),
    ("trusted_projects: [/]\n", 1, "trusted_projects"),
]


@pytest.fixture
def cloned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A freshly cloned project, the working directory."""
    root = write_files(tmp_path / "clone", {"pkg/mod.py": "def f(x):\n    return x\n"})
    monkeypatch.chdir(root)
    return root


def config_json(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, Any, str]:
    code = main(["config", "--format", "json", *flags])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else None, err


@pytest.mark.parametrize(("yaml", "line", "key"), WEAKENING, ids=[key for *_, key in WEAKENING])
def test_a_project_cannot_weaken_the_host(
    cloned: Path, capsys: pytest.CaptureFixture[str], yaml: str, line: int, key: str
) -> None:
    (cloned / "remora.yaml").write_text(yaml)
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        code = main(["analyze", ".", "--agents", "lint"])
        assert server.requests == []
    err = capsys.readouterr().err
    assert code == 2
    assert f"{cloned / 'remora.yaml'}:{line}: {key}" in err
    assert "nothing was run" in err and "remora trust" in err and "--trust-project" in err
    assert not (cloned.parent / "other").exists()


@pytest.mark.parametrize(("yaml", "line", "key"), WEAKENING, ids=[key for *_, key in WEAKENING])
def test_a_trusted_project_may(
    cloned: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    yaml: str,
    line: int,
    key: str,
) -> None:
    config = cloned / "remora.yaml"
    config.write_text(yaml)
    # For one run: a flag or the environment.
    assert config_json(capsys, "--trust-project")[0] == 0
    monkeypatch.setenv("REMORA_TRUST_PROJECT", "1")
    assert config_json(capsys)[0] == 0
    monkeypatch.delenv("REMORA_TRUST_PROJECT")
    # For good: a record keyed by the configuration's content.
    assert main(["trust"]) == 0
    assert f"{key} (" in capsys.readouterr().err  # says what it allows
    assert config_json(capsys)[0] == 0
    config.write_text(yaml + "# an edit\n")
    code, _, err = config_json(capsys)
    assert code == 2 and f"{config}:{line}: {key}" in err
    assert main(["trust"]) == 0
    assert config_json(capsys)[0] == 0
    assert main(["trust", "--revoke"]) == 0
    assert config_json(capsys)[0] == 2


def test_the_trusted_value_is_the_projects_own(
    cloned: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (cloned / "remora.yaml").write_text("sandbox:\n  commands:\n    isolation: none\n")
    assert main(["trust", str(cloned)]) == 0
    _, data, _ = config_json(capsys)
    assert data["sandbox"]["commands"]["isolation"] == "none"
    assert main(["trust", "--show"]) == 0
    assert "remora.yaml: trusted" in capsys.readouterr().err


def test_the_users_own_configuration_and_folders_are_trusted(
    cloned: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user = trust.user_config_file()
    user.parent.mkdir(parents=True)
    user.write_text("sandbox:\n  commands:\n    isolation: none\nconcurrency: 300\n")
    _, data, _ = config_json(capsys)
    assert data["sandbox"]["commands"]["isolation"] == "none"
    assert data["concurrency"] == 300
    # The project may set what the user set, and lower bounds below the user's.
    (cloned / "remora.yaml").write_text(
        "sandbox:\n  commands:\n    isolation: none\nconcurrency: 200\nserver:\n  base_url: "
        "http://127.0.0.1:9/v1\n"
    )
    code, _, err = config_json(capsys)
    assert code == 2 and "server.base_url" in err and "isolation" not in err
    user.write_text(f"trusted_projects: [{cloned.parent}]\n")
    code, data, _ = config_json(capsys)
    assert code == 0 and data["server"]["base_url"] == ["http://127.0.0.1:9/v1"]


def test_bounds_are_lowered_to_the_users_with_a_warning(
    cloned: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = cloned / "remora.yaml"
    config.write_text(
        "concurrency: 999\n"
        "sandbox:\n  max_memory_mb: 100000\n  commands:\n    memory_mb: 100000\n"
        "    timeout_s: 5\n"
        "agents:\n  test:\n    limits:\n      preset: permissive\n"
        "local:\n  slots: 64\n"
    )
    code, data, err = config_json(capsys)
    assert code == 0
    assert data["concurrency"] == 64
    assert data["sandbox"]["max_memory_mb"] == 256  # the default preset's
    assert data["sandbox"]["commands"]["memory_mb"] == 2048
    assert data["sandbox"]["commands"]["timeout_s"] == 5  # lowering is the project's choice
    assert data["agents"]["test"]["limits"]["preset"] == "default"
    assert data["local"]["slots"] == 1
    for line, key in [(1, "concurrency"), (3, "sandbox.max_memory_mb"), (12, "local.slots")]:
        assert f"{config}:{line}: {key}: " in err
    assert "is above what an untrusted project may set" in err


def test_every_setting_has_a_rule_and_the_docs_table_says_it() -> None:
    def keys(model: type[BaseModel], prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        found = []
        for name, field in model.model_fields.items():
            loc = (*prefix, name)
            annotation = field.annotation
            if name == "agents":
                found += keys(AgentSettings, (*loc, "lint"))
            elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
                found += keys(annotation, loc)
            else:
                found.append(loc)
        return found

    missing = [".".join(loc) for loc in keys(RemoraSettings, ()) if trust.rule_of(loc) is None]
    assert missing == []
    doc = (Path(__file__).parent.parent / "docs" / "RELIABILITY.md").read_text(encoding="utf-8")
    for key, rule in trust.RULES.items():
        assert f"| `{key}` | {rule.value} |" in doc, key


def test_a_configuration_file_linked_out_of_its_folder_is_not_read(
    cloned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "host" / "settings.yaml"
    outside.parent.mkdir()
    outside.write_text("concurrency: 3\n")
    (cloned / "remora.yaml").symlink_to(outside)
    code, data, err = config_json(capsys)
    assert code == 0 and data["concurrency"] == 64
    assert "remora.yaml: not read: a symbolic link to a file outside its folder" in err


# --- the cache folder ----------------------------------------------------------------------


def test_a_cache_outside_the_project_is_neither_written_nor_cleaned(
    cloned: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = cloned.parent / "other"
    (other / "keep").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    (cloned / "remora.yaml").write_text("cache_dir: ../other\ncache_max_mb: 1\n")
    before = sorted(str(path) for path in other.rglob("*"))
    assert main(["analyze", ".", "--agents", "lint"]) == 2
    assert main(["clean"]) == 2
    assert sorted(str(path) for path in other.rglob("*")) == before
    assert "cache_dir: ../other is outside the project" in capsys.readouterr().err


def test_a_cache_folder_linked_out_of_the_project_is_refused(
    cloned: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = cloned.parent / "other"
    other.mkdir()
    (cloned / ".remora_cache").symlink_to(other)
    assert main(["analyze", ".", "--agents", "lint"]) == 2
    assert main(["clean"]) == 2
    assert list(other.iterdir()) == []
    assert "leads outside the project" in capsys.readouterr().err


def test_remora_writes_and_cleans_only_a_folder_it_made(
    cloned: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A folder of the project's own that is not empty is never adopted as a cache.
    (cloned / "remora.yaml").write_text("cache_dir: pkg\n")
    assert main(["analyze", ".", "--agents", "lint"]) == 2
    assert sorted(path.name for path in (cloned / "pkg").iterdir()) == ["mod.py"]
    assert main(["clean"]) == 2
    assert (cloned / "pkg" / "mod.py").exists()
    # A tagged folder with files Remora did not put there is not deleted either.
    (cloned / "remora.yaml").write_text("cache_dir: .cache\n")
    cache = cloned / ".cache"
    assert main(["analyze", ".", "--agents", "lint"]) in (0, 1)
    assert (cache / "CACHEDIR.TAG").is_file()
    (cache / "notes.txt").write_text("mine")
    assert main(["clean"]) == 2
    assert (cache / "notes.txt").exists()
    (cache / "notes.txt").unlink()
    assert main(["clean"]) == 0
    assert not cache.exists()
    assert "holds what Remora did not put there (notes.txt)" in capsys.readouterr().err


# --- symbolic links to the host ------------------------------------------------------------

CONTEXT_AGENT = TWO_TOOL_AGENT.replace(
    "node_context: |\n", "context: [ruff_config]\nnode_context: |\n  {{ context.ruff_config }}\n"
)


def test_links_to_host_files_reach_no_prompt(
    cloned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.toml").write_text(f"# {SECRET}\nline-length = 80\n")
    (host / "secret.py").write_text(f'def leak():\n    return "{SECRET}"\n')
    (cloned / "ruff.toml").symlink_to(host / "secret.toml")
    (cloned / ".ruff.toml").write_text("line-length = 90\n")  # what ruff reads first
    (cloned / "pkg" / "config.py").symlink_to(host / "secret.py")
    (cloned / "pkg" / "sub").mkdir()
    (cloned / "pkg" / "sub" / "ruff.toml").symlink_to(host / "secret.toml")  # alone: skipped
    write_files(
        cloned / "agents" / "probe",
        {
            "agent.yaml": CONTEXT_AGENT,
            "tools/find_todos.pym": FIND_TODOS,
            "tools/replace_text.pym": REPLACE_TEXT,
        },
    )
    (cloned / "pkg" / "sub" / "deep.py").write_text("def g():\n    return 2\n")
    (cloned / "remora.yaml").write_text(
        "agents:\n  probe: {definition: agents/probe/agent.yaml}\n"
        + "".join(f"  {name}: {{enabled: false}}\n" for name in ("lint", "docstring", "test"))
        + "  sample_data: {enabled: false}\n"
    )
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        code = main(["analyze", ".", "--base-url", server.base_url, "--format", "json"])
        sent = json.dumps(server.requests)
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert server.requests, "the probe agent asks the model"
    assert SECRET not in sent and SECRET not in out
    assert "line-length = 90" in sent  # .ruff.toml, in ruff's own order
    assert "a link outside the project, not read" in sent  # pkg/sub/ruff.toml
    report = json.loads(out)
    assert {result["node"]["file"] for result in report["results"]} == {
        "pkg/mod.py",
        "pkg/sub/deep.py",
    }
    assert f"pkg/config.py: skipped: a symbolic link to {os.path.realpath(host)}" in err


def test_the_projects_own_server_gets_nothing(
    cloned: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedModelServer(rule=CallEveryTool()) as server:
        (cloned / "remora.yaml").write_text(f"server:\n  base_url: {server.base_url}\n")
        assert main(["analyze", "."]) == 2
        assert server.requests == []
    assert "server.base_url" in capsys.readouterr().err
