"""A job's host functions: exactly those its agent declares, from the shared host library
(core.py, calls.py) and its own package's host library (`host_functions(context)` in the
module `host` of an installed agent package, agents/installed.py).

Nothing here names an agent: a bundled agent's host library is found as a third party's is."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from remora.agents.definition import Agent
from remora.host.calls import call_functions
from remora.host.context import HostContext
from remora.host.core import core_functions

HostFunctions = dict[str, Callable[..., Any]]


def shared_functions(host: HostContext) -> HostFunctions:
    return {**core_functions(host), **call_functions(host)}


def own_functions(host_library: str, host: HostContext) -> HostFunctions:
    """What the agent package's host library gives one job."""
    made = importlib.import_module(host_library).host_functions(host)
    if not isinstance(made, dict):
        raise TypeError(f"{host_library}.host_functions must return a dict of functions")
    return made


def job_functions(agent: Agent, host: HostContext) -> HostFunctions:
    """The functions `agent` declares, made for one job. A declared name its library does not
    make is the package's defect (its stubs promise it): a RuntimeError."""
    available = shared_functions(host)
    if agent.host_library is not None:
        available |= own_functions(agent.host_library, host)
    missing = [name for name in agent.definition.host_functions if name not in available]
    if missing:
        raise RuntimeError(f"agent {agent.name}: its host library makes no {', '.join(missing)}")
    return {name: available[name] for name in agent.definition.host_functions}
