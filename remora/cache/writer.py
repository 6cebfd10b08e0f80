"""The result cache's writes, made by one background thread: creating a file costs about half a
millisecond of system time here, which on the event loop was a fifth of the client's CPU per
model turn (bench/README.md, "Client overhead"). A lost entry (Ctrl-C, a crash) is only a
cache miss; a half-written one is a temporary file, never an entry (`remora.edits.atomic`)."""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path

from remora.edits.atomic import write_bytes_at


class EntryWriter:
    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Path, bytes]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._folders: set[Path] = set()
        self.error: OSError | None = None
        """The first write that failed; every later write is dropped."""
        self.written = 0

    def put(self, path: Path, data: bytes) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cache-writer", daemon=True)
            self._thread.start()
        self._queue.put((path, data))

    def flush(self) -> None:
        """Wait until every entry put so far is written (or dropped after an error)."""
        if self._thread is not None:
            self._queue.join()

    def _run(self) -> None:
        while True:
            path, data = self._queue.get()
            try:
                if self.error is None:
                    if path.parent not in self._folders:
                        path.parent.mkdir(parents=True, exist_ok=True)
                        self._folders.add(path.parent)
                    write_entry(path, data)
                    self.written += 1
            except OSError as exc:
                self.error = exc
            finally:
                self._queue.task_done()


def write_entry(path: Path, data: bytes) -> None:
    """Replace the entry (a symlink in its place is replaced, never followed)."""
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        write_bytes_at(folder, path.name, data, durable=False)
    finally:
        os.close(folder)
