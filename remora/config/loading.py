"""Loading the configuration: remora.yaml (or [tool.remora] in pyproject.toml), REMORA_*
environment variables and flags, in rising precedence, into validated settings; errors name the
source, the key and what is allowed."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_settings import (
    EnvSettingsSource,
)

from remora.config.settings import ENV_PREFIX, RemoraSettings
from remora.config.yamlfile import YamlFile, validation_messages
from remora.errors import UserInputError

CONFIG_FILE_NAMES = ("remora.yaml", ".remora.yaml")


@dataclass
class LoadedSettings:
    settings: RemoraSettings
    config_file: Path | None
    """The file the settings came from; relative paths in it are relative to its folder."""
    layers: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return self.config_file.parent if self.config_file else Path.cwd()

    def agent_definition_path(self, name: str) -> Path | None:
        agent = self.settings.agents.get(name)
        if agent is None or agent.definition is None:
            return None
        return (self.base_dir / agent.definition).resolve()


def find_config_file(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        for name in CONFIG_FILE_NAMES:
            if (folder / name).is_file():
                return folder / name
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and "remora" in _read_pyproject(pyproject).get("tool", {}):
            return pyproject
    return None


def _read_pyproject(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserInputError(f"{path}: cannot read: {exc}") from exc


def _read_config_file(path: Path) -> tuple[dict[str, Any], YamlFile | None]:
    if path.name == "pyproject.toml":
        table = _read_pyproject(path).get("tool", {}).get("remora", {})
        return table, None
    document = YamlFile.load(path)
    if document.data is None:
        return {}, document
    if not isinstance(document.data, dict):
        raise UserInputError(f"{path}:1: the config file must be a mapping of sections")
    odd = [key for key in document.data if not isinstance(key, str)]
    if odd:
        raise UserInputError(f"{document.where([])}: keys must be names, not {odd[0]!r}")
    return document.data, document


def parse_override(item: str) -> dict[str, Any]:
    """`runner.max_turns=5` -> {"runner": {"max_turns": 5}}; values are YAML scalars."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise UserInputError(f"-c {item!r}: expected KEY=VALUE, e.g. -c runner.max_turns=5")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    tree: dict[str, Any] = {}
    node = tree
    *parents, leaf = key.strip().split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return tree


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _has_path(data: Mapping[str, Any], loc: Sequence[str | int]) -> bool:
    node: Any = data
    for part in loc:
        if not isinstance(node, Mapping) or str(part) not in node:
            return False
        node = node[str(part)]
    return True


def load_settings(
    config_file: Path | None = None,
    cli: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
    *,
    isolated: bool = False,
) -> LoadedSettings:
    """Merge every source; raise UserInputError naming the source, the key and what is allowed.

    The config file is searched from `cwd` (the first analysed path, like ruff) upwards;
    `isolated` ignores config files altogether.
    """
    if config_file is not None and not config_file.is_file():
        raise UserInputError(f"--config {config_file}: no such file")
    start = (cwd or Path.cwd()).resolve()
    if start.is_file():
        start = start.parent
    path = config_file or (None if isolated else find_config_file(start))
    file_data, document = _read_config_file(path) if path else ({}, None)
    env_data = _read_env()
    cli_data = dict(cli or {})
    merged = deep_merge(deep_merge(file_data, env_data), cli_data)

    def where(loc: Sequence[str | int]) -> str:
        if _has_path(cli_data, loc):
            return "command line"
        if _has_path(env_data, loc):
            return "environment " + ENV_PREFIX + "__".join(str(p) for p in loc).upper()
        if document is not None:
            return document.where(loc)
        if path is not None:
            return f"{path} [tool.remora]"
        return "configuration"

    try:
        settings = RemoraSettings(**merged)
    except ValidationError as exc:
        lines = validation_messages(exc, where, RemoraSettings)
        raise UserInputError("invalid configuration:\n  " + "\n  ".join(lines)) from exc
    layers = {"file": file_data, "env": env_data, "cli": cli_data}
    return LoadedSettings(settings=settings, config_file=path, layers=layers)


def _read_env() -> dict[str, Any]:
    data: dict[str, Any] = EnvSettingsSource(RemoraSettings)()
    return data


def render_settings(settings: RemoraSettings, output_format: str) -> str:
    data = settings.model_dump(mode="json")
    if output_format == "json":
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    return yaml.safe_dump(data, sort_keys=False)
