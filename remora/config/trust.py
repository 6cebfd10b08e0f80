"""Who may set what. The configuration a project ships (its `remora.yaml` or `[tool.remora]`)
is untrusted input, like the project's code: CI runs Remora on pull requests from strangers.
It may choose what to analyse and how, and make its sandbox stricter; it may not make the
host less safe (turn the sandbox off, name a program or a server, reach files outside the
project, raise a resource limit) unless the user trusts the project. Trust comes only from
the user: their user-level configuration, the environment, a flag, or a `remora trust` record
keyed by the configuration's content, so that a changed configuration is not trusted by
accident (direnv's `allow`; VS Code's restricted settings; git's `safe.directory`, which a
repository's own config cannot set). docs/RELIABILITY.md has the table and the reasons.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from remora.config.settings import LimitsPreset, RemoraSettings, SandboxLimits, resolved_limits
from remora.errors import UserInputError

STORE_VERSION = 1
TRUST_HINT = (
    "to allow them, trust this project: `remora trust` (records this configuration; any change "
    "to it needs trusting again), --trust-project for one run, or set them in your user "
    "configuration ({user})"
)


class Rule(StrEnum):
    """What a project's own configuration may do with a setting."""

    ANY = "any value"
    """Choices about the analysis itself, inside the sandbox's bounds."""
    LOWER = "lower only"
    """A bound on the host's resources: the project may lower it, not raise it above the
    user's value (or the default); a higher value is used at the user's, with a warning."""
    INSIDE = "inside the project"
    """A path: it must stay inside the project's folder (symlinks resolved), else the run
    stops."""
    USER = "user only"
    """Where programs, prompts or files come from: only the user sets it (or a trusted
    project); a project value that differs from the user's stops the run."""


RULES: dict[str, Rule] = {
    "server.base_url": Rule.USER,
    "server.api_key": Rule.USER,
    "server.model": Rule.ANY,
    "server.timeout": Rule.ANY,
    "server.retries": Rule.ANY,
    "server.max_reply_mb": Rule.LOWER,
    "server.adaptive_concurrency": Rule.ANY,
    "runner": Rule.ANY,
    "sandbox.preset": Rule.LOWER,
    "sandbox.timeout_s": Rule.LOWER,
    "sandbox.max_memory_mb": Rule.LOWER,
    "sandbox.max_host_calls": Rule.LOWER,
    "sandbox.commands.allowed": Rule.ANY,
    "sandbox.commands.python_modules": Rule.ANY,
    "sandbox.commands.read_only": Rule.ANY,
    "sandbox.commands.timeout_s": Rule.LOWER,
    "sandbox.commands.output_limit_kb": Rule.LOWER,
    "sandbox.commands.max_parallel": Rule.LOWER,
    "sandbox.commands.python": Rule.USER,
    "sandbox.commands.python_trusted": Rule.USER,
    "sandbox.commands.isolation": Rule.USER,
    "sandbox.commands.memory_mb": Rule.LOWER,
    "sandbox.commands.max_processes": Rule.LOWER,
    "sandbox.commands.cpu_time_s": Rule.LOWER,
    "sandbox.commands.tmp_mb": Rule.LOWER,
    "sandbox.commands.folder_mb": Rule.LOWER,
    "sandbox.commands.config_files": Rule.ANY,
    "agents.*.enabled": Rule.ANY,
    "agents.*.definition": Rule.INSIDE,
    "agents.*.model": Rule.ANY,
    "agents.*.adapter": Rule.INSIDE,
    "agents.*.max_turns": Rule.ANY,
    "agents.*.options": Rule.ANY,
    "agents.*.limits.preset": Rule.LOWER,
    "agents.*.limits.timeout_s": Rule.LOWER,
    "agents.*.limits.max_memory_mb": Rule.LOWER,
    "agents.*.limits.max_host_calls": Rule.LOWER,
    "agents.*.confidence": Rule.ANY,
    "concurrency": Rule.LOWER,
    "workers": Rule.LOWER,
    "engine": Rule.ANY,
    "local.model_path": Rule.INSIDE,
    "local.models_dir": Rule.USER,
    "local.n_ctx": Rule.LOWER,
    "local.threads": Rule.LOWER,
    "local.slots": Rule.LOWER,
    "local.seed": Rule.ANY,
    "local.extra_buffers": Rule.ANY,
    "local.hf_repo": Rule.USER,
    "local.hf_file": Rule.USER,
    "cache_dir": Rule.INSIDE,
    "cache_max_mb": Rule.LOWER,
    "trust_project": Rule.USER,
    "trusted_projects": Rule.USER,
}
"""Every setting, by its dotted key (`*`: any agent's name); a key not listed is covered by
the nearest listed one above it (`runner` covers `runner.max_turns`)."""

PRESET_ORDER = (LimitsPreset.STRICT, LimitsPreset.DEFAULT, LimitsPreset.PERMISSIVE)


def rule_of(loc: tuple[str, ...]) -> Rule | None:
    for length in range(len(loc), 0, -1):
        for key in (".".join(loc[:length]), _wildcard(loc[:length])):
            if key in RULES:
                return RULES[key]
    return None


def _wildcard(loc: tuple[str, ...]) -> str:
    return ".".join(
        "*" if index == 1 and loc[0] == "agents" else part for index, part in enumerate(loc)
    )


# --- the user's own files ----------------------------------------------------------------


def user_config_file(environ: Mapping[str, str] = os.environ) -> Path:
    """The user-level configuration: $XDG_CONFIG_HOME/remora/remora.yaml (~/.config/...)."""
    home = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(home) / "remora" / "remora.yaml"


def trust_store_file(environ: Mapping[str, str] = os.environ) -> Path:
    """The `remora trust` records: $XDG_STATE_HOME/remora/trusted.json (~/.local/state/...)."""
    home = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(home) / "remora" / "trusted.json"


# --- what a trust record is keyed by ------------------------------------------------------


@dataclass(frozen=True)
class ProjectConfiguration:
    """The configuration a project ships, as trust sees it: where, and what it says."""

    folder: Path
    """The project: the configuration file's folder (without one, the analysed root)."""
    file: Path | None
    digest: str
    """sha256 of the Remora part: the whole YAML file, or the [tool.remora] table of a
    pyproject.toml (so a dependency bump elsewhere in it keeps the trust)."""

    @classmethod
    def of(cls, file: Path | None, folder: Path) -> ProjectConfiguration:
        if file is None:
            return cls(folder.resolve(), None, hashlib.sha256(b"").hexdigest())
        if file.name == "pyproject.toml":
            try:
                table = tomllib.loads(file.read_text(encoding="utf-8")).get("tool", {})
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise UserInputError(f"{file}: cannot read: {exc}") from exc
            content = json.dumps(table.get("remora", {}), sort_keys=True).encode()
        else:
            try:
                content = file.read_bytes()
            except OSError as exc:
                raise UserInputError(f"{file}: cannot read: {exc}") from exc
        return cls(file.parent.resolve(), file.resolve(), hashlib.sha256(content).hexdigest())

    @property
    def key(self) -> str:
        return str(self.file or self.folder)


def _read_store(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise UserInputError(f"{path}: cannot read the trust records: {exc}") from exc
    records = data.get("projects") if isinstance(data, dict) else None
    return records if isinstance(records, dict) else {}


def recorded(project: ProjectConfiguration, store: Path) -> bool:
    """Whether `remora trust` recorded exactly this configuration."""
    record = _read_store(store).get(project.key)
    return isinstance(record, dict) and record.get("sha256") == project.digest


def record(project: ProjectConfiguration, store: Path, *, trusted: bool) -> None:
    """Add (or, `trusted` false, remove) the record of this configuration, atomically."""
    records = _read_store(store)
    if trusted:
        records[project.key] = {
            "sha256": project.digest,
            "trusted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    else:
        records.pop(project.key, None)
    store.parent.mkdir(parents=True, exist_ok=True)
    temporary = store.with_name(f".{store.name}.{os.getpid()}.tmp")
    payload = json.dumps({"version": STORE_VERSION, "projects": records}, indent=2) + "\n"
    temporary.write_text(payload, encoding="utf-8")
    os.replace(temporary, store)


# --- checking a project's layer -----------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    data: dict[str, Any]
    """The project's layer with every value above its bound lowered to the bound."""
    refused: list[str]
    """Settings that stop the run (exit 2), each with where and why."""
    lowered: list[str]
    """Warnings: values used at the user's bound instead."""


def check_project_layer(
    project: Mapping[str, Any],
    *,
    merged: RemoraSettings,
    trusted: RemoraSettings,
    overridden: Callable[[tuple[str, ...]], bool],
    folder: Path,
    where: Callable[[tuple[str, ...]], str],
) -> Verdict:
    """Hold each value the project's layer sets (and the user's layers do not override) to its
    rule. `merged` is every layer together, `trusted` the user's layers alone; `folder` is the
    project, which INSIDE paths must stay in."""
    data = json.loads(json.dumps(project, default=str))  # a private copy to lower values in
    refused: list[str] = []
    lowered: list[str] = []
    for loc in leaves(project):
        if overridden(loc):
            continue
        rule = rule_of(loc)
        value, allowed = _value(merged, loc), _value(trusted, loc)
        place = f"{where(loc)}: {'.'.join(loc)}"
        if rule is Rule.USER and value != allowed:
            refused.append(f"{place}: {_shown(value)}: only you may set this, not the project")
        elif rule is Rule.INSIDE and value is not None and not _inside(Path(value), folder):
            refused.append(
                f"{place}: {value} is outside the project ({folder}); the project may name "
                "only paths inside it"
            )
        elif rule is Rule.LOWER:
            bound = _bound(loc, trusted)
            if value is not None and bound is not None and _above(value, bound):
                _set(data, loc, bound.value if isinstance(bound, LimitsPreset) else bound)
                lowered.append(
                    f"{place}: {_shown(value)} is above what an untrusted project may set; "
                    f"using {_shown(bound)} (trust the project to allow more: `remora trust`)"
                )
    return Verdict(data=data, refused=refused, lowered=lowered)


def leaves(data: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The keys a layer sets, down to the level the rules name (an agent's `options` and the
    runner's section are one leaf each: any value is fine there)."""
    found: list[tuple[str, ...]] = []
    for key, value in data.items():
        loc = (*prefix, str(key))
        if isinstance(value, Mapping) and _names_children(loc):
            found += leaves(value, loc)
        else:
            found.append(loc)
    return found


def _names_children(loc: tuple[str, ...]) -> bool:
    """Whether some rule is about a key below `loc` (then `loc` is walked into)."""
    dotted, wildcard = ".".join(loc) + ".", _wildcard(loc) + "."
    return any(key.startswith((dotted, wildcard)) for key in RULES)


def _value(settings: BaseModel, loc: tuple[str, ...]) -> Any:
    node: Any = settings
    for part in loc:
        if isinstance(node, BaseModel):
            node = getattr(node, part, None)
        elif isinstance(node, Mapping):
            node = node.get(part)
        else:
            return None
        if node is None:
            return None
    return node.get_secret_value() if hasattr(node, "get_secret_value") else node


def _bound(loc: tuple[str, ...], trusted: RemoraSettings) -> Any:
    """The highest value the project may set: the user's value, or what applies without one
    (the limit preset's value, the CPU count for automatic sizes)."""
    if loc[0] == "agents" and len(loc) == 4 and loc[2] == "limits":
        agent = trusted.agents.get(loc[1])
        return _limit(loc[3], [trusted.sandbox, *([agent.limits] if agent else [])])
    if loc[0] == "sandbox" and len(loc) == 2:
        return _limit(loc[1], [trusted.sandbox])
    value = _value(trusted, loc)
    if loc in (("workers",), ("local", "threads")) and not value:
        return os.cpu_count() or 1
    return value


def _limit(name: str, layers: list[SandboxLimits]) -> Any:
    preset, values = resolved_limits(*layers)
    return preset if name == "preset" else values[name]


def _above(value: Any, bound: Any) -> bool:
    if isinstance(bound, LimitsPreset):
        return PRESET_ORDER.index(LimitsPreset(value)) > PRESET_ORDER.index(bound)
    return bool(value > bound)


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_shown(item) for item in value)
    return str(value.value if isinstance(value, StrEnum) else value)


def _set(data: dict[str, Any], loc: tuple[str, ...], value: Any) -> None:
    node = data
    for part in loc[:-1]:
        node = node[part]
    node[loc[-1]] = value


def _inside(path: Path, folder: Path) -> bool:
    """Whether `path` (relative to `folder`, `~` not expanded: a project has no home) lies in
    `folder` once symlinks are resolved."""
    if str(path).startswith("~"):
        return False
    return (folder / path).resolve().is_relative_to(folder.resolve())
