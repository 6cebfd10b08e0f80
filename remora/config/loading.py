"""Loading the configuration: remora.yaml (or [tool.remora] in pyproject.toml), REMORA_*
environment variables and flags, in rising precedence, into validated settings; errors name the
source, the key and what is allowed."""

from __future__ import annotations

import itertools
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

from remora.config import trust
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
    trusted: str | None = None
    """Why the project's own configuration is trusted (None: it is held to the rules of
    config/trust.py)."""
    project_trusted: str | None = None
    """Why the user trusts the project itself, its `.venv/` included (None: they do not)."""
    warnings: list[str] = field(default_factory=list)
    """What the user should know about how the configuration was read (said once)."""

    @property
    def base_dir(self) -> Path:
        return self.config_file.parent if self.config_file else Path.cwd()

    def set_by_user(self, loc: Sequence[str]) -> bool:
        """Whether the value at `loc` is the user's choice: from their configuration, the
        environment, a flag, a file they named with --config, or a trusted project."""
        if self.trusted is not None:
            return True
        return any(_has_path(self.layers.get(name, {}), loc) for name in ("user", "env", "cli"))

    def agent_definition_path(self, name: str) -> Path | None:
        agent = self.settings.agents.get(name)
        if agent is None or agent.definition is None:
            return None
        return (self.base_dir / agent.definition).resolve()


def find_config_file(start: Path, skipped: list[str] | None = None) -> Path | None:
    """The nearest configuration file from `start` up. A file that is a symbolic link leading
    out of its folder is not read (a cloned repository could point it at any file of the
    host): it is skipped, and `skipped` is told why."""
    for folder in (start, *start.parents):
        for name in (*CONFIG_FILE_NAMES, "pyproject.toml"):
            candidate = folder / name
            if not candidate.is_file():
                continue
            if not candidate.resolve().is_relative_to(folder.resolve()):
                if skipped is not None:
                    skipped.append(
                        f"{candidate}: not read: a symbolic link to a file outside its folder "
                        f"({candidate.resolve()})"
                    )
                continue
            if name != "pyproject.toml" or "remora" in _read_pyproject(candidate).get("tool", {}):
                return candidate
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


def read_config_layer(path: Path) -> dict[str, Any]:
    """The settings a configuration file holds, unvalidated."""
    return _read_config_file(path)[0]


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
        if isinstance(part, int) and isinstance(node, list):
            return True  # an item of a list this layer set
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

    Layers, lowest first: the user's configuration ($XDG_CONFIG_HOME/remora/remora.yaml), the
    project's (the nearest remora.yaml, .remora.yaml or pyproject.toml with [tool.remora] from
    `cwd`, the first analysed path, upwards, like ruff), REMORA_* variables, flags. The
    project's layer is untrusted: held to config/trust.py's rules unless the user trusts it.
    `--config FILE` names a file the user chose: trusted, in the project's place. `isolated`
    ignores configuration files altogether.
    """
    if config_file is not None and not config_file.is_file():
        raise UserInputError(f"--config {config_file}: no such file")
    start = (cwd or Path.cwd()).resolve()
    if start.is_file():
        start = start.parent
    warnings: list[str] = []
    user_path = None if isolated else trust.user_config_file()
    user_data, user_document = (
        _read_config_file(user_path) if user_path and user_path.is_file() else ({}, None)
    )
    path = config_file or (None if isolated else find_config_file(start, warnings))
    file_data, document = _read_config_file(path) if path else ({}, None)
    chosen = config_file is not None
    env_data = _read_env()
    cli_data = dict(cli or {})
    layers = [user_data, file_data, env_data, cli_data]
    user_layers = [user_data, file_data if chosen else {}, env_data, cli_data]

    def where(loc: Sequence[str | int]) -> str:
        if _has_path(cli_data, loc):
            return "command line"
        if _has_path(env_data, loc):
            named = [str(part) for part in itertools.takewhile(lambda p: isinstance(p, str), loc)]
            return "environment " + ENV_PREFIX + "__".join(named).upper()
        if _has_path(file_data, loc) or not _has_path(user_data, loc):
            if document is not None:
                return document.where(loc)
            if path is not None:
                return f"{path} [tool.remora]"
        if user_document is not None:
            return user_document.where(loc)
        return "configuration"

    settings = _validated(layers, where)
    trusted_settings = _validated(user_layers, where)
    project = trust.ProjectConfiguration.of(
        None if chosen else path, path.parent if path else start
    )
    project_trusted = _trusted_because(project, trusted_settings)
    trusted = "--config" if chosen else project_trusted
    if file_data and trusted is None:
        verdict = trust.check_project_layer(
            file_data,
            merged=settings,
            trusted=trusted_settings,
            overridden=lambda loc: _has_path(env_data, loc) or _has_path(cli_data, loc),
            folder=project.folder,
            where=where,
        )
        if verdict.refused:
            hint = trust.TRUST_HINT.format(user=trust.user_config_file())
            raise UserInputError(
                "the project's configuration asks for what only you may allow; nothing was "
                "run:\n  " + "\n  ".join(verdict.refused) + f"\n{hint}"
            )
        if verdict.lowered:
            warnings += verdict.lowered
            settings = _validated([user_data, verdict.data, env_data, cli_data], where)
    layered = {"user": user_data, "file": file_data, "env": env_data, "cli": cli_data}
    return LoadedSettings(
        settings=settings,
        config_file=path,
        layers=layered,
        trusted=trusted,
        project_trusted=project_trusted,
        warnings=warnings,
    )


def _validated(layers: Sequence[Mapping[str, Any]], where: Any) -> RemoraSettings:
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = deep_merge(merged, layer)
    try:
        return RemoraSettings(**merged)
    except ValidationError as exc:
        lines = validation_messages(exc, where, RemoraSettings)
        raise UserInputError("invalid configuration:\n  " + "\n  ".join(lines)) from exc


def _trusted_because(project: trust.ProjectConfiguration, settings: RemoraSettings) -> str | None:
    """Why the user trusts this project's configuration, or None."""
    if settings.trust_project:
        return "trust_project (--trust-project, REMORA_TRUST_PROJECT or your configuration)"
    for folder in settings.trusted_projects:
        if project.folder.is_relative_to(folder.expanduser().resolve()):
            return f"trusted_projects: {folder}"
    if project.file is not None and trust.recorded(project, trust.trust_store_file()):
        return f"remora trust (recorded in {trust.trust_store_file()})"
    return None


def _read_env() -> dict[str, Any]:
    data: dict[str, Any] = EnvSettingsSource(RemoraSettings)()
    return data


def render_settings(settings: RemoraSettings, output_format: str) -> str:
    data = settings.model_dump(mode="json")
    if output_format == "json":
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    return yaml.safe_dump(data, sort_keys=False)
