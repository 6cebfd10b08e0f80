"""Model files Remora keeps: a sha256 note next to a verified file (so later runs skip hashing it
until it changes), and temporary files that become the real one atomically."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from remora.protocol.messages import ModelError

CHUNK = 1 << 20


def check_gguf(path: Path) -> None:
    """What can be known of a model file without loading it: a GGUF file is there (ModelError
    otherwise). The engine loads its weights at its first request: the common mistakes still
    fail before any job."""
    try:
        with path.open("rb") as file:
            magic = file.read(4)
    except OSError as exc:
        raise ModelError(f"cannot read the model file {path}: {exc}") from exc
    if magic != b"GGUF":
        raise ModelError(f"{path} is not a GGUF model file")


def _note_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def verified_sha(path: Path) -> str | None:
    """The checksum recorded for `path`, if the file is unchanged since it was verified."""
    try:
        note = json.loads(_note_path(path).read_text(encoding="utf-8"))
        stat = path.stat()
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict):
        return None
    if note.get("size") != stat.st_size or note.get("mtime_ns") != stat.st_mtime_ns:
        return None
    sha = note.get("sha256")
    return sha if isinstance(sha, str) else None


def verify_sha(path: Path, expected: str) -> bool:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    if digest.hexdigest() != expected:
        return False
    write_note(path, expected)
    return True


def write_note(path: Path, sha: str) -> None:
    stat = path.stat()
    note = {"sha256": sha, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    # A read-only folder: no note, the file is verified again next time.
    with (
        contextlib.suppress(OSError),
        temporary_file(path.parent, _note_path(path).name) as (handle, temporary),
    ):
        handle.write(json.dumps(note).encode())
        handle.close()
        os.replace(temporary, _note_path(path))


@contextlib.contextmanager
def temporary_file(folder: Path, name: str) -> Iterator[tuple[IO[bytes], Path]]:
    """A temporary file next to its final place (same file system: `os.replace` is atomic),
    removed unless the caller moved it."""
    fd, raw = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
    temporary = Path(raw)
    os.fchmod(fd, 0o644)  # mkstemp's 0600 would keep a shared model folder to its first user
    handle = os.fdopen(fd, "wb")
    try:
        yield handle, temporary
    finally:
        handle.close()
        temporary.unlink(missing_ok=True)


def file_sha256(path: Path) -> str:
    """The file's sha256, read once per content: a model file is hashed by training, by
    scoring and by every run that loads an adapter (`remora watch` runs again on each save),
    and a 250 MB file takes half a second."""
    stat = path.stat()
    return _sha256_of(path.resolve(), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256_of(path: Path, size: int, mtime_ns: int) -> str:
    """Keyed by size and modification time too: a file rewritten in place is read again."""
    del size, mtime_ns
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            hasher.update(chunk)
    return hasher.hexdigest()


def file_identity(path: Path) -> str:
    """A model file's size and modification time: what tells two files at one path apart."""
    try:
        stat = path.stat()
    except OSError:
        return "missing"
    return f"{stat.st_size}-{stat.st_mtime_ns}"
