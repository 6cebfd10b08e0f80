"""The result cache: a job whose inputs did not change is answered from disk, not the model.

The key covers everything that can change the answer: the node (text, type, qualified name,
file), the agent (definition file, tool scripts, options, limits, turn limit), the model and its
sampling settings, and Remora's version. Only successful results are stored. Findings are stored
relative to the node's first line so a hit still points at the right lines after the code moved.
A result with changes carries whole-file edits, so it is reused only while the file is unchanged.

Entries are one JSON file each, written atomically (temporary file + rename), so two Remora
processes can share a cache; a damaged entry is ignored. Reading an entry touches its mtime;
`evict()` removes the least recently used entries beyond the size limit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

from pydantic import BaseModel, ValidationError

from remora import __version__
from remora.agents.definition import Agent
from remora.atomic import write_text_atomic
from remora.config import RemoraSettings
from remora.discovery.nodes import Node
from remora.results import Change, Finding, JobResult, JobStatus

CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by Remora.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
RESULTS = "results"


class CachedChange(BaseModel):
    change: Change
    new_text: str
    original_sha256: str | None
    newline: str


class CachedResult(BaseModel):
    result: JobResult
    """With findings' lines relative to the node's first line (1 = the node's first line)."""
    changes: list[CachedChange]
    file_sha256: str | None
    """Hash of the node's file when the result had changes; a hit needs the same file."""


def agent_fingerprint(agent: Agent) -> str:
    parts = {
        "definition": agent.source.read_text(encoding="utf-8"),
        "tools": [[tool.name, tool.source] for tool in agent.tools],
        "options": agent.options,
        "limits": [
            agent.tool_limits.timeout_s,
            agent.tool_limits.max_memory_mb,
            agent.tool_limits.max_host_calls,
        ],
        "max_turns": agent.max_turns,
        "model": agent.model,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class ResultCache:
    def __init__(self, directory: Path, settings: RemoraSettings, max_mb: int) -> None:
        self.directory = directory
        self.max_bytes = max_mb * 1024 * 1024
        self._sampling = settings.runner.model_dump(mode="json", exclude={"job_timeout"})
        self._agents: dict[str, str] = {}
        self.hits = 0
        self.stores = 0

    def prepare(self) -> None:
        """Create the directory, marked as a cache so backup tools and git skip it."""
        (self.directory / RESULTS).mkdir(parents=True, exist_ok=True)
        tag = self.directory / "CACHEDIR.TAG"
        if not tag.exists():
            write_text_atomic(tag, CACHEDIR_TAG)
        ignore = self.directory / ".gitignore"
        if not ignore.exists():
            write_text_atomic(ignore, "# Created by Remora.\n*\n")

    def key(self, agent: Agent, node: Node) -> str:
        if agent.name not in self._agents:
            self._agents[agent.name] = agent_fingerprint(agent)
        parts = [
            __version__,
            self._agents[agent.name],
            self._sampling,
            node.file,
            node.type.value,
            node.qualified_name,
            node.text,
        ]
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / RESULTS / key[:2] / f"{key}.json"

    def get(self, agent: Agent, node: Node, root: Path) -> JobResult | None:
        path = self._path(self.key(agent, node))
        try:
            cached = CachedResult.model_validate_json(path.read_bytes())
        except (OSError, ValidationError, ValueError):
            return None  # missing or damaged: a miss
        if cached.changes and cached.file_sha256 != _file_hash(root / node.file):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used
        result = cached.result.model_copy(deep=True)
        result.node = node
        result.cached = True
        offset = node.start_line - 1
        result.findings = [
            finding.model_copy(update={"line": finding.line + offset})
            for finding in result.findings
        ]
        result.changes = [
            item.change.model_copy(
                update={
                    "new_text": item.new_text,
                    "original_sha256": item.original_sha256,
                    "newline": item.newline,
                }
            )
            for item in cached.changes
        ]
        self.hits += 1
        return result

    def put(self, agent: Agent, result: JobResult, root: Path) -> None:
        if result.status is not JobStatus.SUCCESS or result.cached:
            return
        offset = result.node.start_line - 1
        stored = result.model_copy(
            update={
                "findings": [
                    Finding.model_validate(
                        {**finding.model_dump(), "line": max(finding.line - offset, 1)}
                    )
                    for finding in result.findings
                    if finding.file == result.node.file and finding.line > offset
                ],
                "changes": [],
                "duration_s": 0.0,
                "workspace": None,
            }
        )
        if len(stored.findings) != len(result.findings):
            return  # findings elsewhere cannot be moved with the node: do not cache
        cached = CachedResult(
            result=stored,
            changes=[
                CachedChange(
                    change=change,
                    new_text=change.new_text,
                    original_sha256=change.original_sha256,
                    newline=change.newline,
                )
                for change in result.changes
            ],
            file_sha256=_file_hash(root / result.node.file) if result.changes else None,
        )
        path = self._path(self.key(agent, result.node))
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, cached.model_dump_json(), durable=False)
        self.stores += 1

    def evict(self) -> int:
        """Remove least recently used entries until the cache fits its limit; returns how many."""
        entries = []
        for path in (self.directory / RESULTS).glob("*/*.json"):
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            removed += 1
        return removed


def clean(directory: Path) -> bool:
    """Delete a Remora cache directory; refuses a folder that is not tagged as one."""
    if not directory.exists():
        return False
    if not (directory / "CACHEDIR.TAG").is_file():
        raise ValueError(
            f"{directory} has no CACHEDIR.TAG; not deleting a folder Remora did not make"
        )
    shutil.rmtree(directory)
    return True


def _file_hash(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
