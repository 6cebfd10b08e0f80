"""Which agents exist: the installed ones (Remora's bundled agents and third parties' packages,
agents/installed.py) plus those the configuration names by path."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from remora.agents.adapters import Adapter, load_adapter
from remora.agents.definition import (
    Agent,
    AgentDefinition,
    load_agent,
    load_definition,
    load_tools,
)
from remora.agents.installed import installed_agents
from remora.config.loading import LoadedSettings
from remora.errors import UserInputError


class AgentEntry(BaseModel):
    name: str
    path: Path
    bundled: bool
    enabled: bool
    origin: str
    """Where it came from: the distribution that installed it (`remora` for the bundled
    agents), or `configuration` for an agent the configuration names by path."""


def agent_entries(loaded: LoadedSettings) -> list[AgentEntry]:
    """Every known agent, installed first (Remora's own before third parties'), then those
    only the configuration names."""
    configured = loaded.settings.agents
    entries: dict[str, AgentEntry] = {}
    for name, installed in installed_agents().items():
        settings = configured.get(name)
        entries[name] = AgentEntry(
            name=name,
            path=installed.definition,
            bundled=installed.distribution == "remora",
            enabled=settings.enabled if settings else True,
            origin=installed.distribution,
        )
    for name, settings in configured.items():
        custom = loaded.agent_definition_path(name)
        if custom is None and name not in entries:
            raise UserInputError(
                f"agents.{name}: no installed agent is called {name!r}; "
                f"set agents.{name}.definition to its YAML file "
                f"(installed: {', '.join(entries) or 'none'})"
            )
        if custom is not None:
            entries[name] = AgentEntry(
                name=name,
                path=custom,
                bundled=False,
                enabled=settings.enabled,
                origin="configuration",
            )
    return list(entries.values())


def select_agents(
    loaded: LoadedSettings,
    names: list[str] | None = None,
    *,
    model: str | None = None,
    options: dict[str, Any] | None = None,
) -> list[Agent]:
    """Load the agents to run: `names` if given (enabled or not), else every enabled agent.
    `model` replaces every agent's model (the embedded engine's identity); `options` go over
    every agent's options (e.g. unsafe_fixes from --unsafe-fixes)."""
    entries = {entry.name: entry for entry in agent_entries(loaded)}
    if names:
        unknown = [name for name in names if name not in entries]
        if unknown:
            raise UserInputError(
                f"--agents: unknown agent(s) {', '.join(unknown)}; "
                f"known: {', '.join(entries) or 'none'}"
            )
        chosen = [entries[name] for name in names]
    else:
        chosen = [entry for entry in entries.values() if entry.enabled]
    settings = loaded.settings
    agents = []
    for entry in chosen:
        own = settings.agents.get(entry.name)
        adapter: Adapter | Literal[False] | None = None
        if own and own.adapter is False:
            adapter = False
        elif own and own.adapter:
            where = f"agents.{entry.name}.adapter"
            adapter = load_adapter((loaded.base_dir / own.adapter).resolve(), where=where)
        agent = load_agent(
            entry.path,
            model=model or (own.model if own and own.model else settings.server.model),
            max_turns=(own.max_turns if own and own.max_turns else settings.runner.max_turns),
            options={**(own.options if own else {}), **(options or {})},
            limits=[settings.sandbox, *([own.limits] if own else [])],
            confidence=own.confidence if own else None,
            adapter=adapter,
        )
        if agent.adapter is not None:
            # A server serves the adapter under its name (a name the configuration gives the
            # agent wins); the embedded engine knows it by its identity, which a card cannot
            # choose to collide with another adapter's.
            adapter = agent.adapter
            if model is not None:
                served = adapter.identity
            else:
                served = own.model if own and own.model else adapter.name
            agent = agent.model_copy(update={"model": served})
        if agent.name != entry.name:
            raise UserInputError(
                f"{entry.path}: name: the agent is configured as {entry.name!r} "
                f"but its definition says {agent.name!r}"
            )
        agents.append(agent)
    return agents


def describe_definition(path: Path) -> tuple[AgentDefinition, list[str]]:
    definition, document = load_definition(path)
    return definition, [tool.name for tool in load_tools(definition, document)]
