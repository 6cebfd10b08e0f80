"""The parse cache: each file's definitions, keyed by a hash of its bytes, so that a run over
files that have not changed since the last one skips tree-sitter.

Layout under the cache directory given to `discover_nodes` (the CLI's `.remora_cache/`):

    CACHEDIR.TAG, .gitignore            created if missing: backup tools and git skip it all
    discovery/<version>/<ab>/<cdef...>.json

An entry is named by the BLAKE2b hash of the file's bytes: definitions depend on nothing else,
so an entry is never stale, and a file is never re-parsed because only its mtime changed
(the bytes are read anyway, for the nodes' text). `<version>` covers Remora's version, this
format, tree-sitter and its Python grammar, and the extraction code itself, so that an upgrade
(or, in a development checkout, an edit of the parser) never reads what another version wrote;
the first run of a new version removes the other versions' directories.

Writes go to a temporary file in the entry's directory, renamed over the entry: a reader sees a
whole entry or none, and two processes writing one entry write the same bytes. An entry read
back is untrusted data: one that does not decode (truncated, garbage, wrong shape, a field of the
wrong type or out of range) or is not a regular file (a symlink, a FIFO) is a miss, and is
rewritten. A cache that cannot be written gives one warning, never a failed run. Deleting the
directory is always safe.

Entries of files that changed are garbage. After a run that wrote entries, when the cache holds
more than `max(PRUNE_FLOOR, 2 x the files of the run)` entries, those the run did not use are
deleted (with temporary files left by killed writers), so the cache stays a few times the size
of the project's current definitions.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
import stat
import time
from functools import cache
from importlib import metadata
from importlib.resources import files
from pathlib import Path

from remora.discovery.nodes import Definition, NodeType

CACHE_SUBDIR = "discovery"
FORMAT = 1
"""Bump when the entry format or the meaning of a definition changes."""
PRUNE_FLOOR = 10_000
"""Entries always kept room for (a few KiB each), whatever the size of a run."""
STALE_TEMPORARY_S = 3600
"""Temporary files older than this are left by writers that were killed."""

CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by Remora.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
GITIGNORE = "# Created by Remora: everything here is a cache.\n*\n"

_TYPES = {node_type.value: node_type for node_type in NodeType if node_type is not NodeType.FILE}
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""Larger entries are not read (a file's definitions take a few KiB)."""


def content_key(data: bytes) -> str:
    """The entry name of a file with these bytes."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@cache
def version_key() -> str:
    """Changes whenever a cached definition could differ: a new Remora, tree-sitter or grammar,
    or a changed extraction code or query."""
    parts = [f"format={FORMAT}"]
    for package in ("remora", "tree-sitter", "tree-sitter-python"):
        try:
            parts.append(f"{package}={metadata.version(package)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{package}=?")
    code = hashlib.blake2b(digest_size=8)
    here = files("remora.discovery")
    sources = [here.joinpath("parse.py"), here.joinpath("cache.py")]
    queries = here.joinpath("queries", "python")
    try:
        sources += sorted(
            (entry for entry in queries.iterdir() if entry.name.endswith(".scm")),
            key=lambda entry: entry.name,
        )
        for source in sources:
            code.update(source.read_bytes())
    except OSError:  # installed without sources (a zip, frozen): the versions still count
        code.update(b"no sources")
    parts.append(f"code={code.hexdigest()}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()


class DefinitionCache:
    """Definitions by content hash, in `<cache_dir>/discovery/<version>/`. Picklable, for the
    worker processes; each process writes its own entries."""

    def __init__(self, cache_dir: Path) -> None:
        self.root = Path(os.path.abspath(cache_dir))
        self.directory = self.root / CACHE_SUBDIR / version_key()
        self._prefix = f"{self.directory}{os.sep}"  # entries are looked up by the thousand
        self._ready = False
        self._broken: str | None = None

    def get(self, key: str) -> list[Definition] | None:
        """The definitions stored for `key`, or None: missing, unreadable or damaged."""
        try:
            fd = os.open(self._entry(key), _READ_FLAGS)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
                return None
            raw = _read_all(fd, info.st_size)
        except OSError:
            return None
        finally:
            os.close(fd)
        return decode_entry(raw, key)

    def put(self, key: str, definitions: list[Definition]) -> str | None:
        """Store an entry; returns why it could not be written, if it could not.

        After one failure this process stops trying: a read-only or full disk would fail the
        same way for every file.
        """
        if self._broken is not None:
            return self._broken
        entry = self._entry(key)
        data = encode_entry(key, definitions)
        try:
            if not self._ready:
                self._prepare()
            try:
                _write_atomic(entry, data)
            except FileNotFoundError:  # the first entry in its fan-out directory
                os.makedirs(os.path.dirname(entry), exist_ok=True)
                _write_atomic(entry, data)
        except OSError as exc:
            self._broken = f"parse cache not written to {self.root}: {exc.strerror or exc}"
            return self._broken
        return None

    def prune(self, used: set[str]) -> int:
        """Delete the entries not in `used` if there are more than the limit; returns how
        many were deleted. Best effort: another process may be reading or writing them."""
        try:
            fanout = [entry.path for entry in os.scandir(self.directory) if entry.is_dir()]
            names = {directory: os.listdir(directory) for directory in fanout}
        except OSError:
            return 0
        entries = sum(len(listed) for listed in names.values())
        if entries <= max(PRUNE_FLOOR, 2 * len(used)):
            return 0
        deleted = 0
        stale_before = time.time() - STALE_TEMPORARY_S
        for directory, listed in names.items():
            head = os.path.basename(directory)
            for name in listed:
                path = os.path.join(directory, name)
                with contextlib.suppress(OSError):
                    if name.endswith(".json"):
                        if head + name[: -len(".json")] in used:
                            continue
                    elif os.stat(path).st_mtime >= stale_before:
                        continue  # a temporary file another process may be writing
                    os.unlink(path)
                    deleted += 1
        return deleted

    def _entry(self, key: str) -> str:
        return f"{self._prefix}{key[:2]}{os.sep}{key[2:]}.json"

    def _prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for name, content in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", GITIGNORE)):
            if not (self.root / name).exists():
                _write_atomic(str(self.root / name), content.encode())
        try:
            self.directory.mkdir(parents=True)
        except FileExistsError:
            pass
        else:
            # A new version: what the others wrote can never be read again.
            for other in self.directory.parent.iterdir():
                if other.name != self.directory.name and other.is_dir():
                    shutil.rmtree(other, ignore_errors=True)
        self._ready = True


def encode_entry(key: str, definitions: list[Definition]) -> bytes:
    """A checksum line, then the definitions as JSON."""
    rows = [[node_type.value, *rest] for node_type, *rest in definitions]
    body = json.dumps({"key": key, "definitions": rows}, separators=(",", ":")).encode()
    return _checksum(body) + b"\n" + body


def decode_entry(raw: bytes, key: str) -> list[Definition] | None:
    """The entry's definitions, or None when it is not a whole entry for `key`.

    The checksum catches an entry cut short or overwritten with anything else. It is no
    signature (anyone can recompute it), so every field is checked too: a hand-made entry with
    a string for a line, or lines out of order, is a miss rather than a crash or a bogus node.
    """
    checksum, _, body = raw.partition(b"\n")
    if checksum != _checksum(body):
        return None
    try:
        entry = json.loads(body)
        if entry["key"] != key:
            return None
        types = _TYPES
        definitions: list[Definition] = []
        for kind, name, qualified_name, start_line, column, end_line, start, end in entry[
            "definitions"
        ]:
            if not (
                type(name) is str
                and type(qualified_name) is str
                and type(start_line) is int
                and type(column) is int
                and type(end_line) is int
                and type(start) is int
                and type(end) is int
                and 1 <= start_line <= end_line
                and column >= 1
                and 0 <= start <= end
            ):
                return None
            definitions.append(
                (types[kind], name, qualified_name, start_line, column, end_line, start, end)
            )
    except (ValueError, KeyError, TypeError):  # not JSON, or not the shape written
        return None
    return definitions


def layout_problem(cache_dir: Path, hint: str) -> str | None:
    """Why the parse cache cannot live under `cache_dir` (a file where its folders go), or
    None. Checked before a run, so that the run does not start to fail on its first write."""
    for folder in (cache_dir / CACHE_SUBDIR, cache_dir / CACHE_SUBDIR / version_key()):
        if os.path.lexists(folder) and not folder.is_dir():
            return f"{folder} (the parse cache) is not a folder: {hint}"
    return None


def _read_all(fd: int, size: int) -> bytes:
    """Up to EOF (one read, and one that finds the end, unless the file grew meanwhile)."""
    chunks, total = [], 0
    while total <= MAX_ENTRY_BYTES and (chunk := os.read(fd, max(size - total, 0) + 65536)):
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _checksum(body: bytes) -> bytes:
    return hashlib.blake2b(body, digest_size=16).hexdigest().encode()


_temporary_names = itertools.count()


def _write_atomic(path: str, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename it over `path`.

    The temporary name is unique to this process (and call), so concurrent writers never share
    one. No fsync: an entry lost or cut short by a crash is a miss, not an error.
    """
    tmp = f"{path}.{os.getpid()}-{next(_temporary_names)}.part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
