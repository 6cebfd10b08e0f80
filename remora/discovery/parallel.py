"""Parsing many files: in worker processes when there is enough source to repay starting them."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from multiprocessing.context import BaseContext
from pathlib import Path

from remora.discovery.cache import DefinitionCache
from remora.discovery.parse import ParsedFile, parse_file


def parse_files(
    paths: Sequence[Path], workers: int, cache: DefinitionCache | None = None
) -> Iterator[tuple[Path, ParsedFile | str]]:
    """`parse_file` over `paths`, in up to `workers` processes; results come in any order."""
    parse = partial(parse_file, cache=cache)
    if workers <= 1 or len(paths) <= 1:
        return ((path, parse(path)) for path in paths)
    try:
        pool = ProcessPoolExecutor(min(workers, len(paths)), mp_context=_process_context())
    except (OSError, NotImplementedError, ImportError):
        # Platforms without working process semaphores: stay in this process.
        return ((path, parse(path)) for path in paths)
    return _parse_in_pool(pool, paths, workers, parse)


def _parse_in_pool(
    pool: ProcessPoolExecutor,
    paths: Sequence[Path],
    workers: int,
    parse: Callable[[Path], ParsedFile | str],
) -> Iterator[tuple[Path, ParsedFile | str]]:
    # Largest first, in small batches, so that no process is left with a big file at the end.
    ordered = sorted(paths, key=_size, reverse=True)
    batch = max(1, min(16, len(ordered) // (workers * 8)))
    done = 0
    with pool:
        try:
            for result in pool.map(parse, ordered, chunksize=batch):
                yield ordered[done], result
                done += 1
        except BrokenProcessPool:
            # A worker died (killed, out of memory): finish here rather than lose the run.
            yield from ((path, parse(path)) for path in ordered[done:])
        finally:
            pool.shutdown(cancel_futures=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _process_context() -> BaseContext:
    methods = multiprocessing.get_all_start_methods()
    # fork starts workers without importing anything again, but is only safe with one thread.
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def default_workers() -> int:
    """Processes worth starting here: the CPUs this process may use, within any cgroup quota."""
    affinity = getattr(os, "sched_getaffinity", None)  # not on macOS or Windows
    cpus = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    return max(1, min(cpus, _cgroup_cpu_quota() or cpus))


def _cgroup_cpu_quota() -> int | None:
    # Containers limited with a CPU quota (docker --cpus) still see every CPU of the host.
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        return None if quota == "max" else max(1, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        return None
