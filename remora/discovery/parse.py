"""Split Python source files into file, class, function and method nodes with tree-sitter."""

from __future__ import annotations

import codecs
import multiprocessing
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import cache
from importlib.resources import files
from multiprocessing.context import BaseContext
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

import tree_sitter_python
from tree_sitter import Language, Parser, Query, QueryCursor
from tree_sitter import Node as SyntaxNode

from remora.discovery.nodes import MODULE_QUALNAME, Node, NodeType, node_id

_BOM = codecs.BOM_UTF8


class SourceError(Exception):
    """A file that cannot be analysed: unreadable, binary or not UTF-8."""


# A class or function: (type, name, qualified name, start line, start column, end line,
# start byte, end byte).
# Lines are 1-based and inclusive; bytes index the file's bytes. A plain tuple because worker
# processes send thousands of them back, and tuples pickle cheaply.
Definition = tuple[NodeType, str, str, int, int, int, int, int]


class ParsedFile(NamedTuple):
    data: bytes
    definitions: list[Definition]


def read_source(path: Path) -> bytes:
    """The file's bytes, checked to be UTF-8 text."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"skipped unreadable file: {exc.strerror or exc}") from exc
    if b"\0" in data:
        raise SourceError("skipped binary file (it contains NUL bytes)")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"skipped file that is not UTF-8 (invalid byte at {exc.start})") from exc
    return data


def find_definitions(data: bytes) -> list[Definition]:
    """Every class and function in `data`, in source order (outer before inner).

    Syntax errors do not stop it: tree-sitter recovers, and the definitions it still recognises
    are returned.
    """
    tree = Parser(_language()).parse(data)
    captures = QueryCursor(_query()).captures(tree.root_node)
    classes = captures.get("definition.class", [])
    functions = captures.get("definition.function", [])
    found = [(node.start_byte, NodeType.CLASS, node) for node in classes]
    found += [(node.start_byte, NodeType.FUNCTION, node) for node in functions]
    found.sort(key=itemgetter(0))
    # Keyed by the start of the inner definition, whose range the decorators widen.
    decorated: dict[int, SyntaxNode] = {}
    for node in captures.get("decorated", []):
        inner = node.child_by_field_name("definition")
        if inner is not None:
            decorated[inner.start_byte] = node

    definitions: list[Definition] = []
    # Definitions enclosing the current position: (end byte, qualified name, type).
    enclosing: list[tuple[int, str, NodeType]] = []
    for node_start, node_type, node in found:
        name_node = node.child_by_field_name("name")
        raw_name = name_node.text if name_node is not None else None
        if not raw_name:
            continue  # a definition that error recovery left without a name
        name = raw_name.decode("utf-8", "replace")
        outer = decorated.get(node_start, node)
        start = outer.start_byte
        end = outer.end_byte
        while enclosing and enclosing[-1][0] <= start:
            enclosing.pop()
        if enclosing:
            _, parent_name, parent_type = enclosing[-1]
            qualified_name = f"{parent_name}.{name}"
            if node_type is NodeType.FUNCTION and parent_type is NodeType.CLASS:
                node_type = NodeType.METHOD
        else:
            qualified_name = name
        enclosing.append((end, qualified_name, node_type))
        # tree-sitter puts comments that follow the last statement of a body inside the body;
        # a definition is taken to end where its code ends, as `ast` has it. Only a comment on
        # the last line can be such a comment, which spares the tree walk almost always.
        last_line = data.rfind(b"\n", start, end) + 1
        if data.find(b"#", last_line if last_line else start, end) >= 0:
            last = _last_code_token(outer)
            end, end_row = last.end_byte, last.end_point.row
        else:
            end_row = outer.end_point.row
        definitions.append(
            (
                node_type,
                name,
                qualified_name,
                outer.start_point.row + 1,
                outer.start_point.column + 1,
                end_row + 1,
                start,
                end,
            )
        )
    return definitions


def _last_code_token(node: SyntaxNode) -> SyntaxNode:
    """The last token of `node` that is not a comment (or other extra)."""
    while node.child_count:
        index = node.child_count - 1
        child = node.child(index)
        while child is not None and child.is_extra and index > 0:
            index -= 1
            child = node.child(index)
        if child is None or child.is_extra:
            break
        node = child
    return node


def build_nodes(file: str, data: bytes, definitions: Sequence[Definition]) -> list[Node]:
    """The file node followed by a node per definition, with ids and source text.

    A UTF-8 byte order mark belongs to no node: the file node starts after it, so that every
    node's text is exactly its byte range decoded.
    """
    start = len(_BOM) if data.startswith(_BOM) else 0
    # Validated as UTF-8 on reading; "replace" only guards against misuse.
    text = data[start:].decode("utf-8", "replace")
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    nodes = [
        Node(
            id=node_id(file, MODULE_QUALNAME, 0),
            type=NodeType.FILE,
            name=file.rpartition("/")[2],
            qualified_name=MODULE_QUALNAME,
            file=file,
            start_line=1,
            start_column=1,
            end_line=max(lines, 1),
            start_byte=start,
            end_byte=len(data),
            text=text,
        )
    ]
    # In pure ASCII byte and character offsets agree, so the decoded text can be sliced.
    ascii_only = data.isascii()
    ordinals: dict[str, int] = {}
    for node_type, name, qualified_name, start_line, column, end_line, first, last in definitions:
        ordinal = ordinals.get(qualified_name, 0)
        ordinals[qualified_name] = ordinal + 1
        snippet = text[first:last] if ascii_only else data[first:last].decode("utf-8", "replace")
        nodes.append(
            Node(
                id=node_id(file, qualified_name, ordinal),
                type=node_type,
                name=name,
                qualified_name=qualified_name,
                file=file,
                start_line=start_line,
                start_column=column,
                end_line=end_line,
                start_byte=first,
                end_byte=last,
                text=snippet,
            )
        )
    return nodes


def parse_file(path: Path) -> ParsedFile | str:
    """The file's bytes and definitions, or why it was skipped."""
    try:
        data = read_source(path)
    except SourceError as exc:
        return str(exc)
    return ParsedFile(data, find_definitions(data))


def parse_files(paths: Sequence[Path], workers: int) -> Iterator[tuple[Path, ParsedFile | str]]:
    """`parse_file` over `paths`, in up to `workers` processes; results come in any order."""
    if workers <= 1 or len(paths) <= 1:
        return ((path, parse_file(path)) for path in paths)
    try:
        pool = ProcessPoolExecutor(min(workers, len(paths)), mp_context=_process_context())
    except (OSError, NotImplementedError, ImportError):
        # Platforms without working process semaphores: stay in this process.
        return ((path, parse_file(path)) for path in paths)
    return _parse_in_pool(pool, paths, workers)


def _parse_in_pool(
    pool: ProcessPoolExecutor, paths: Sequence[Path], workers: int
) -> Iterator[tuple[Path, ParsedFile | str]]:
    # Largest first, in small batches, so that no process is left with a big file at the end.
    ordered = sorted(paths, key=_size, reverse=True)
    batch = max(1, min(16, len(ordered) // (workers * 8)))
    done = 0
    with pool:
        try:
            for result in pool.map(parse_file, ordered, chunksize=batch):
                yield ordered[done], result
                done += 1
        except BrokenProcessPool:
            # A worker died (killed, out of memory): finish here rather than lose the run.
            yield from ((path, parse_file(path)) for path in ordered[done:])
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


@cache
def _language() -> Language:
    return Language(tree_sitter_python.language())


@cache
def _query() -> Query:
    """The query pack: every `.scm` file shipped under `queries/python`, in name order."""
    directory = files("remora.discovery").joinpath("queries", "python")
    sources = sorted(
        (entry.name, entry.read_text(encoding="utf-8"))
        for entry in directory.iterdir()
        if entry.name.endswith(".scm")
    )
    return Query(_language(), "\n".join(source for _, source in sources))
