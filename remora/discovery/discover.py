"""Discovery: find the Python files to analyse and split them into nodes."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from remora.discovery.cache import CACHE_SUBDIR, DefinitionCache
from remora.discovery.nodes import MODULE_QUALNAME, Node, NodeType, node_id
from remora.discovery.parallel import default_workers, parse_files
from remora.discovery.parse import build_nodes
from remora.discovery.walk import iter_python_files

__all__ = [
    "CACHE_SUBDIR",
    "MODULE_QUALNAME",
    "Discovery",
    "DiscoveryError",
    "DiscoveryWarning",
    "Node",
    "NodeType",
    "discover_nodes",
    "node_id",
]

# Below this much source, starting worker processes costs more than it saves.
_PARALLEL_MIN_BYTES = 2_000_000


class DiscoveryWarning(BaseModel):
    """A file or directory that discovery skipped, and why."""

    model_config = ConfigDict(frozen=True)

    file: str
    message: str


class DiscoveryError(Exception):
    """A path given to discovery does not exist."""


class Discovery(BaseModel):
    """What discovery found: nodes sorted by file then start byte, and the files analysed."""

    nodes: list[Node]
    files: list[str]
    warnings: list[DiscoveryWarning]
    cached_files: int = 0
    """Files whose definitions came from the parse cache instead of tree-sitter."""


def discover_nodes(
    paths: Sequence[Path],
    root: Path | None = None,
    *,
    workers: int | None = None,
    cache_dir: Path | None = None,
) -> Discovery:
    """Find the Python files under `paths` and split each into nodes.

    Node files are POSIX paths relative to `root` (default: the current directory), or absolute
    for files outside it. `files` lists the files analysed; files that could not be (binary,
    not UTF-8, unreadable) are left out and reported in `warnings`. `workers` caps the worker
    processes; by default they are used only for large inputs.

    With `cache_dir` (e.g. the project's `.remora_cache/`), each file's definitions are kept in
    `cache_dir/discovery/`, keyed by the file's content, and a later run skips parsing the files
    that have not changed. The result is the same with or without the cache. A cache that
    cannot be written gives one warning; a damaged entry is re-parsed and rewritten.
    """
    missing = [str(path) for path in paths if not _exists(path)]
    if missing:
        raise DiscoveryError(
            f"path does not exist: {missing[0]}"
            if len(missing) == 1
            else f"paths do not exist: {', '.join(missing)}"
        )
    base = Path(os.path.abspath(root if root is not None else Path.cwd()))
    warnings: list[DiscoveryWarning] = []

    def skip(path: Path, reason: str) -> None:
        warnings.append(DiscoveryWarning(file=_display(path, base), message=reason))

    found = list(iter_python_files(paths, base, skip))
    cache = DefinitionCache(cache_dir) if cache_dir is not None else None
    cached = parsed = 0
    cache_error: str | None = None
    used_keys: set[str] = set()
    # Nodes are built as results arrive, overlapping with the worker processes still parsing.
    by_file: dict[str, list[Node]] = {}
    with _no_cyclic_gc():
        for path, result in parse_files(found, _worker_count(found, workers), cache):
            if isinstance(result, str):
                skip(path, result)
                continue
            file = _display(path, base)
            by_file[file] = build_nodes(file, result.data, result.definitions)
            cached += result.cached
            parsed += not result.cached
            cache_error = cache_error or result.cache_error
            if result.key is not None:
                used_keys.add(result.key)
    if cache is not None:
        if cache_error is not None:
            skip(cache.root, cache_error)
        elif parsed:  # entries were written: some may be garbage now
            cache.prune(used_keys)
    files = sorted(by_file)
    nodes = [node for file in files for node in by_file[file]]
    warnings.sort(key=lambda warning: warning.file)
    return Discovery(nodes=nodes, files=files, warnings=warnings, cached_files=cached)


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    # Tens of thousands of new nodes set off full collections that rescan them all, for
    # nothing: nodes hold no reference cycles. Reference counting still frees everything.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _exists(path: Path) -> bool:
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True  # there, but unreadable: the walk reports it
    return True


def _display(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _worker_count(files: Sequence[Path], requested: int | None) -> int:
    if requested is not None:
        return max(1, requested)
    total = 0
    for file in files:
        try:
            total += file.stat().st_size
        except OSError:
            continue
        if total >= _PARALLEL_MIN_BYTES:
            return default_workers()
    return 1
