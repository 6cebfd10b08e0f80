"""The result cache: a job whose inputs did not change is answered from disk, not the model.

The key covers everything that can change the answer: the node (text, type, qualified name,
file), the files the job may write besides the node's (its `writes:` that name one file: the
test agent's test file), the files its agent's `reads:` names (read_files.py: the project's test
modules, for the test agent), the agent (definition file, tool scripts, options, limits, turn
limit), the model and its sampling settings, Remora's version, and what the tools' programs
read besides the node: the versions of the allowed programs (`sandbox.commands.allowed` and
`python_modules`, asked once per run) and the content of their configuration files
(`sandbox.commands.config_files`) in the node's folder and every folder above it up to the
project root. Every finished job is stored: a
success, and a job that ran to its end without one (`not_done`, the turn limit, bad replies, low
confidence), which the same model with the same seeds would answer again the same way, and a
job whose test file the suite check dropped (stored after the check, as dropped);
`retry_not_done` asks those again. Never stored: environment and model errors, a job that ran
out of time (the machine's speed, not the answer), skipped jobs. Findings are stored relative to
the node's first line so a hit still points at the right lines after the code moved. A result
with changes carries whole-file edits, so it is reused while the file is unchanged, or, after
edits elsewhere in it, when every change either stays inside the node or creates a file that
still does not exist (`rebase`).

Entries are one JSON file each, written atomically (temporary file + rename, never through a
symlink), so two Remora processes can share a cache. An entry read back is untrusted data: one
that is damaged, hand-edited into another shape (`entries`: wrong types, a status or an error
code `put` never stores, findings on another file, a change whose path is absolute, contains
`..` or enters `.git/`), not a regular file, or larger than the cache is a miss. Reading an
entry touches its mtime; `evict()` removes the least recently used entries beyond the size
limit.

The cache never stops a run: a folder that cannot be written (read-only, full, replaced by a
file) gives one warning and the rest of the run's results are simply not stored.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from remora import __version__
from remora.agents.definition import Agent
from remora.agents.write_scope import in_scope, text_on_disk, write_scope
from remora.cache.entries import CachedChange, CachedResult, finished, trusted
from remora.cache.folder import GITIGNORE, RESULTS
from remora.cache.program_versions import program_versions
from remora.cache.read_files import ReadFiles, file_digest
from remora.cache.rebase import node_text_after, rebased
from remora.cache.writer import EntryWriter, write_entry
from remora.config.settings import RemoraSettings
from remora.discovery.cache import CACHEDIR_TAG
from remora.discovery.nodes import Node
from remora.findings.results import Finding, JobResult, JobStatus

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@functools.cache
def remora_code() -> str:
    """A hash of every file of Remora's own package (its modules, the host functions tools
    call, the bundled agents): an editable install or a checkout changes what a tool computes
    without changing `__version__`, and a result the changed code did not compute is not one
    to reuse (6 ms for 1.7 MB, once per process)."""
    return folder_hash(Path(__file__).resolve().parents[1])


def folder_hash(folder: Path) -> str:
    """A hash of the names and bytes of the files under `folder`, bytecode caches left out."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


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
        "confidence": agent.confidence.model_dump(),
        "adapter": agent.adapter.identity if agent.adapter else None,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def warn_on_stderr(message: str) -> None:
    print(f"remora: warning: {message}", file=sys.stderr)


class ResultCache:
    def __init__(
        self,
        directory: Path,
        settings: RemoraSettings,
        max_mb: int,
        *,
        warn: Callable[[str], None] = warn_on_stderr,
        retry_not_done: bool = False,
    ) -> None:
        self.directory = directory
        self.retry_not_done = retry_not_done
        """A stored job that finished without a verified outcome is a miss: asked again."""
        self.max_bytes = max_mb * 1024 * 1024
        self._sampling = settings.runner.model_dump(mode="json", exclude={"job_timeout", "stream"})
        self._commands = settings.sandbox.commands
        self._agents: dict[str, str] = {}
        self._programs: dict[str, str] | None = None
        self._folders: dict[tuple[str, str], list[list[str]]] = {}
        """Per (folder, root): [file, content hash] of the configuration files in the folder
        and above it; read once per run, so that a job's lookup and its store agree."""
        self._reads = ReadFiles()
        """The files the agents' `reads:` name, read once per run (read_files.py)."""
        self._warn = warn
        self._broken = False
        self.hits = 0
        self._writer = EntryWriter()

    def prepare(self) -> None:
        """Create the directory, marked as a cache so backup tools and git skip it."""
        try:
            (self.directory / RESULTS).mkdir(parents=True, exist_ok=True)
            for name, content in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", GITIGNORE)):
                if not os.path.lexists(self.directory / name):
                    write_entry(self.directory / name, content.encode())
        except OSError as exc:
            self._give_up(exc)

    def programs(self) -> dict[str, str]:
        """The versions of the programs tools may run; asked once per cache (once per run)."""
        if self._programs is None:
            self._programs = program_versions(self._commands)
        return self._programs

    def key(self, agent: Agent, node: Node, root: Path) -> str:
        if agent.name not in self._agents:
            self._agents[agent.name] = agent_fingerprint(agent)
        parts = [
            __version__,
            remora_code(),
            self._agents[agent.name],
            self._sampling,
            node.file,
            node.type.value,
            node.qualified_name,
            node.text,
            self.programs(),
            self._configuration(root, node.file),
            self._writable(agent, node, root),
            self._reads.of(agent.definition.reads, node, root),
        ]
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def _writable(self, agent: Agent, node: Node, root: Path) -> list[list[str | None]]:
        """[path, content hash or None] of the files the job may write besides its node's
        file: what is there decides its answer (a test file written by hand, or deleted since,
        is not the one a stored "tests exist" was about)."""
        top = os.path.abspath(root)
        scope = write_scope(agent.definition.writes, node, agent.options, root)
        return [
            [path, file_digest(os.path.join(top, path), top)]
            for path in scope.exact
            if path != node.file
        ]

    def _path(self, key: str) -> Path:
        return self.directory / RESULTS / key[:2] / f"{key}.json"

    def get(self, agent: Agent, node: Node, root: Path) -> JobResult | None:
        self.flush()  # an entry stored this run is answered as one from an earlier run
        path = self._path(self.key(agent, node, root))
        raw = _read_entry(path, self.max_bytes)
        if raw is None:
            return None  # missing, or not a regular file
        try:
            cached = CachedResult.model_validate_json(raw, strict=True)
        except (ValidationError, ValueError):
            return None  # damaged: a miss
        if not trusted(cached, agent, node):
            return None
        if self.retry_not_done and cached.result.status is not JobStatus.SUCCESS:
            return None
        changes = [
            item.change.model_copy(
                update={
                    "new_text": item.new_text,
                    "original_sha256": item.original_sha256,
                    "newline": item.newline,
                }
            )
            for item in cached.changes
        ]
        if changes and cached.file_sha256 != _file_hash(root / node.file):
            after = [item.node_text_after for item in cached.changes]
            moved = rebased(changes, after, node, root)
            if moved is None:
                return None
            changes = moved
        if changes:  # the scope's placeholders are filled from disk: only when there is a change
            scope = write_scope(agent.definition.writes, node, agent.options, root)
            if in_scope(scope, changes, lambda file: text_on_disk(root / file))[1]:
                return None  # a change outside the agent's writes (one retargeted elsewhere)
        with contextlib.suppress(OSError):
            os.utime(path, follow_symlinks=False)  # recently used
        result = cached.result.model_copy(deep=True)
        result.node = node
        result.cached = True
        offset = node.start_line - 1
        result.findings = [
            finding.model_copy(update={"line": finding.line + offset})
            for finding in result.findings
        ]
        result.changes = changes
        if result.suggestions and cached.file_sha256 != _file_hash(root / node.file):
            result.suggestions = []  # made on another text of the file: their lines are stale
        self.hits += 1
        return result

    def put(self, agent: Agent, result: JobResult, root: Path) -> None:
        """Store a finished job's result; never raises for the disk (a failure warns once)."""
        if not finished(result) or result.cached or self._broken:
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
                    node_text_after=node_text_after(change, result.node, root),
                )
                for change in result.changes
            ],
            file_sha256=(
                _file_hash(root / result.node.file)
                if result.changes or result.suggestions
                else None
            ),
        )
        if not trusted(cached, agent, result.node):
            return  # it would never be answered from the cache
        self._writer.put(
            self._path(self.key(agent, result.node, root)), cached.model_dump_json().encode()
        )

    @property
    def stores(self) -> int:
        """Entries written this run (once those stored so far are on disk)."""
        self._writer.flush()
        return self._writer.written

    def flush(self) -> None:
        """Wait for the entries stored so far to be on disk; warn once if they cannot be."""
        self._writer.flush()
        if self._writer.error is not None:
            self._give_up(self._writer.error)

    def evict(self) -> int:
        """Remove least recently used entries until the cache fits its limit; returns how many."""
        self.flush()
        entries = []
        try:
            for path in (self.directory / RESULTS).glob("*/*.json"):
                with contextlib.suppress(OSError):
                    info = path.stat(follow_symlinks=False)
                    entries.append((info.st_mtime, info.st_size, path))
        except OSError:
            return 0
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
                removed += 1
            total -= size
        return removed

    def _give_up(self, exc: OSError) -> None:
        """One warning, then no more writes this run: a folder that cannot be written now
        (read-only, full, replaced by a file) would fail the same way for every job."""
        if not self._broken:
            self._broken = True
            self._warn(
                f"result cache not written to {self.directory}: {exc.strerror or exc}; "
                "the run goes on, its results are not cached"
            )

    def _configuration(self, root: Path, file: str) -> list[list[str]]:
        """[path, content hash] of every configuration file in the file's folder and above it,
        up to `root` (to the filesystem root for a file outside the project)."""
        top = os.path.abspath(root)
        return self._folder(os.path.dirname(os.path.join(top, file)), top)

    def _folder(self, folder: str, top: str) -> list[list[str]]:
        known = self._folders.get((folder, top))
        if known is not None:
            return known
        found = [
            [_shown(os.path.join(folder, name), top), digest]
            for name in self._commands.config_files
            if (digest := file_digest(os.path.join(folder, name), top)) is not None
        ]
        parent = os.path.dirname(folder)
        if folder != top and parent != folder:
            found += self._folder(parent, top)
        self._folders[folder, top] = found
        return found


def _read_entry(path: Path, limit: int) -> bytes | None:
    """The entry's bytes, or None: missing, a symlink, not a regular file, over `limit`."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def _shown(path: str, top: str) -> str:
    """A configuration file as the key records it: relative to the project root, so that a
    cache restored on another machine (CI) still answers."""
    relative = os.path.relpath(path, top)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return path
    return Path(relative).as_posix()


def _file_hash(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
