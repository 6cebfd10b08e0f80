"""Planning: which nodes, which agents, which jobs. Discovery, the changed-lines selection,
node x agent jobs and the shard of them this run takes."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from remora.agents.definition import Agent
from remora.analysis.changed import ChangedLines, changed_lines, touches
from remora.analysis.shard import select_shard
from remora.discovery.discover import Discovery, DiscoveryError, discover_nodes
from remora.discovery.nodes import Node
from remora.errors import RunFailed, UserInputError
from remora.events import Events
from remora.jobs.job import Job, job_id
from remora.jobs.orchestrator import plan_jobs


@dataclass(frozen=True)
class Plan:
    found: Discovery
    root: Path
    nodes: list[Node]
    """The nodes this run analyses: all found, or those the changed lines touch."""
    changed: ChangedLines | None
    jobs: list[Job]


def discover(
    paths: list[Path], root: Path, cache: Path | None, warn: Callable[[str], None]
) -> Discovery:
    try:
        found = discover_nodes(paths, root=root, cache_dir=cache)
    except DiscoveryError as exc:
        raise UserInputError(str(exc)) from exc
    for warning in found.warnings:
        warn(f"{warning.file}: {warning.message}")
    return found


def make_plan(
    paths: list[Path],
    agents: list[Agent],
    *,
    root: Path,
    cache: Path | None,
    diff_base: str | None,
    staged: bool,
    shard: tuple[int, int] | None,
    only: frozenset[str] = frozenset(),
    events: Events,
    warn: Callable[[str], None],
) -> Plan:
    started = time.perf_counter()
    found = discover(paths, root, cache, warn)
    events.emit(
        "discovery_done",
        files=len(found.files),
        nodes=len(found.nodes),
        warnings=len(found.warnings),
        duration_s=time.perf_counter() - started,
    )
    if not found.nodes:
        if found.warnings:
            raise RunFailed("discovery failed: no file could be read (see the warnings above)")
        warn("no Python files found; nothing to analyse")
    nodes = found.nodes
    changed = None
    if diff_base or staged:
        changed = changed_lines(root, base=diff_base, staged=staged)
        nodes = [node for node in nodes if touches(node, changed)]
    if only:
        nodes = [node for node in nodes if node.id in only]
    jobs = plan_jobs(agents, nodes)
    if shard is not None:
        jobs = select_shard(jobs, [job_id(agent, node) for agent, node in jobs], *shard)
    if found.nodes and not jobs:
        warn("no nodes matched the enabled agents (or the changed lines); nothing to analyse")
    return Plan(found, root, nodes, changed, jobs)
