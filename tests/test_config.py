"""Configuration: sources, precedence and errors that name the source, key and allowed values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remora.cli.main import main
from remora.config.loading import load_settings
from remora.errors import UserInputError


def test_defaults_without_any_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    loaded = load_settings()
    assert loaded.config_file is None
    assert loaded.settings.concurrency == 64
    assert loaded.settings.server.base_url is None
    assert loaded.settings.runner.model_profile == "auto"


def test_precedence_file_env_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "remora.yaml").write_text(
        "server:\n  base_url: http://file/v1\n  model: file-model\n  timeout: 5\n"
        "runner:\n  max_turns: 4\n"
    )
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)  # found by walking up
    monkeypatch.setenv("REMORA_SERVER__MODEL", "env-model")
    monkeypatch.setenv("REMORA_SERVER__BASE_URL", "http://env/v1")
    loaded = load_settings(cli={"server": {"base_url": "http://cli/v1"}})
    assert loaded.config_file == tmp_path / "remora.yaml"
    server = loaded.settings.server
    assert (server.base_urls, server.model, server.timeout) == (["http://cli/v1"], "env-model", 5.0)
    assert loaded.settings.runner.max_turns == 4


def test_pyproject_tool_remora(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.remora]\nconcurrency = 8\n[tool.remora.agents.lint]\n'
        "enabled = false\n"
    )
    monkeypatch.chdir(tmp_path)
    loaded = load_settings()
    assert loaded.settings.concurrency == 8
    assert loaded.settings.agents["lint"].enabled is False


def test_remora_yaml_wins_over_pyproject_in_the_same_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.remora]\nconcurrency = 8\n")
    (tmp_path / "remora.yaml").write_text("concurrency: 9\n")
    monkeypatch.chdir(tmp_path)
    assert load_settings().settings.concurrency == 9


def test_errors_name_file_line_key_and_allowed_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "remora.yaml"
    config.write_text(
        "server:\n  base_url: http://x\n  timout: 3\nrunner:\n  model_profile: gemma\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REMORA_CONCURRENCY", "many")
    with pytest.raises(UserInputError) as caught:
        load_settings(cli={"runner": {"max_turns": 0}})
    message = str(caught.value)
    assert (
        f"{config}:3: server.timout: unknown key; allowed keys: adaptive_concurrency, api_key, "
        "base_url, max_reply_mb, model, retries, timeout" in message
    )
    assert (
        f"{config}:5: runner.model_profile: Input should be 'auto', 'functiongemma', "
        "'functiongemma-kit' or 'openai' (got 'gemma')" in message
    )
    assert "environment REMORA_CONCURRENCY: concurrency: Input should be a valid integer" in message
    assert "command line: runner.max_turns: Input should be greater than or equal to 1" in message


def test_invalid_yaml_names_the_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "remora.yaml").write_text("server:\n  base_url: [oops\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserInputError, match=r"remora\.yaml:\d+: not valid YAML"):
        load_settings()


def test_dotted_overrides_and_config_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(
        ["config", "--format", "json", "-c", "runner.max_turns=5", "-c", "server.api_key=abc"]
    )
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    assert data["runner"]["max_turns"] == 5
    assert data["server"]["api_key"] == "**********"  # secrets are never printed
    assert data["concurrency"] == 64


def test_config_command_yaml_and_exit_2_on_bad_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["config"]) == 0
    assert "max_repairs: 3" in capsys.readouterr().out
    assert main(["config", "-c", "runner.temperature=hot"]) == 2
    err = capsys.readouterr().err
    assert "runner.temperature" in err and "valid number" in err


def test_explicit_config_file_must_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml: no such file" in capsys.readouterr().err


def test_example_config_is_valid_and_documents_every_key() -> None:
    example = Path(__file__).parent.parent / "remora.yaml.example"
    loaded = load_settings(config_file=example)
    text = example.read_text()
    for section in ("server", "runner", "sandbox"):
        for key in type(getattr(loaded.settings, section)).model_fields:
            assert f"{key}:" in text, f"remora.yaml.example lacks {section}.{key}"
    assert "concurrency:" in text


def test_base_url_takes_one_url_a_comma_list_or_a_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    single = load_settings(cli={"server": {"base_url": "http://a/v1"}}).settings.server
    assert single.base_urls == ["http://a/v1"]
    monkeypatch.setenv("REMORA_SERVER__BASE_URL", "http://a/v1, http://b/v1")
    assert load_settings().settings.server.base_urls == ["http://a/v1", "http://b/v1"]
    # A list from the user's own configuration (a project's may not say where prompts go).
    user = tmp_path / "home-config" / "remora" / "remora.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("server:\n  base_url: [http://c/v1, http://d/v1]\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user.parent.parent))
    monkeypatch.delenv("REMORA_SERVER__BASE_URL")
    assert load_settings().settings.server.base_urls == ["http://c/v1", "http://d/v1"]
