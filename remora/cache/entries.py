"""A result-cache entry: its shape on disk, and when one read back is believed. An entry is data
anyone who can write the cache folder could have written: anything but the shape `put` writes
for this agent and node is a miss."""

from __future__ import annotations

import re
from pathlib import PurePosixPath, PureWindowsPath

from pydantic import BaseModel

from remora.agents.definition import Agent
from remora.discovery.nodes import Node
from remora.discovery.walk import DEFAULT_EXCLUDES
from remora.findings.results import Change, ErrorCode, JobResult, JobStatus

_NEWLINES = ("\n", "\r\n", "\r")
FINISHED_NOT_DONE = frozenset(
    {
        ErrorCode.NOT_DONE,
        ErrorCode.TURN_LIMIT,
        ErrorCode.INVALID_MODEL_OUTPUT,
        ErrorCode.LOW_CONFIDENCE,
    }
)
"""Ways a job ends without a verified outcome that are the model's answer, not the machine's:
stored like a success (`time_limit` is the machine's speed, and is not)."""


class CachedChange(BaseModel):
    change: Change
    new_text: str
    original_sha256: str | None
    newline: str
    node_text_after: str | None = None
    """The node's text after the change, when the change stays inside the node: the change can
    then be made again on the file after edits elsewhere in it (cache_rebase)."""


class CachedResult(BaseModel):
    result: JobResult
    """With findings' lines relative to the node's first line (1 = the node's first line)."""
    changes: list[CachedChange]
    file_sha256: str | None
    """Hash of the node's file when the result had changes; a hit needs the same file."""


def trusted(cached: CachedResult, agent: Agent, node: Node) -> bool:
    """Whether an entry has the shape `put` writes for this agent and node. Anything else was
    damaged or edited by hand, and is not believed."""
    result = cached.result
    if not finished(result) or result.changes or result.refused_changes:
        return False
    if result.status is JobStatus.SUCCESS and result.outcome not in agent.definition.done_when:
        return False  # success is a verified outcome of this agent, nothing else
    if result.status is not JobStatus.SUCCESS and cached.changes:
        return False
    if result.agent != agent.name or result.workspace is not None:
        return False
    stored = result.node
    wanted = (node.file, node.type, node.qualified_name)
    if (stored.file, stored.type, stored.qualified_name) != wanted:
        return False
    if any(finding.file != node.file for finding in result.findings):
        return False
    if cached.changes and not _is_sha256(cached.file_sha256):
        return False
    for item in cached.changes:
        if not safe_relative_path(item.change.file) or item.newline not in _NEWLINES:
            return False
        if item.original_sha256 is not None and not _is_sha256(item.original_sha256):
            return False
    return True


def finished(result: JobResult) -> bool:
    """A job that ran to its end: a success, a suggestion or a job not possible (no error; only
    a success carries changes), or not done for a reason the same model and seeds would give
    again (FINISHED_NOT_DONE)."""
    if result.status in (JobStatus.SUCCESS, JobStatus.SUGGESTED, JobStatus.NOT_POSSIBLE):
        return result.error is None and (result.status is JobStatus.SUCCESS or not result.changes)
    return (
        result.status is JobStatus.FAILED
        and result.error is not None
        and result.error.code in FINISHED_NOT_DONE
        and result.outcome is None
    )


def safe_relative_path(file: str) -> bool:
    """A plain relative POSIX path inside the project, outside the folders agents never write
    (the rule `--fix` enforces again when it writes)."""
    if not file or "\x00" in file or "\\" in file or PureWindowsPath(file).drive:
        return False
    path = PurePosixPath(file)
    if path.is_absolute() or path.as_posix() != file or ".." in path.parts:
        return False
    if path.name in ("", "."):
        return False
    return not any(part in DEFAULT_EXCLUDES for part in path.parts[:-1])


def _is_sha256(value: str | None) -> bool:
    return re.fullmatch("[0-9a-f]{64}", value or "") is not None
