"""Event lines from a file another process appends to (tail -f) or from a pipe."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

import anyio

from remora.dashboard.state import REFRESH_S, DashboardState


class _Lines:
    """Splits bytes into lines; the last piece, until its newline comes, is still being
    written and is held back."""

    def __init__(self) -> None:
        self._pending = b""

    def _split(self, data: bytes) -> list[bytes]:
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        return lines

    def finish(self) -> list[bytes]:
        """At the end of the stream: a last line without its newline, if any."""
        tail, self._pending = self._pending, b""
        return [tail] if tail.strip() else []


class EventFileFollower(_Lines):
    """The lines appended to a file since the last call (tail -f).

    A file that does not exist yet is waited for; one that is truncated or replaced (same
    name, another file) is read again from its start.
    """

    ended = False  # a file can always grow

    def __init__(self, path: Path, *, chunk: int = 4 << 20) -> None:
        super().__init__()
        self.path = path
        self.chunk = chunk
        self.behind = False
        """The last read stopped at `chunk` bytes: more is waiting."""
        self._file: IO[bytes] | None = None

    def read(self) -> list[bytes]:
        # In chunks, so a long file already there is folded in a piece at a time, with the
        # view redrawn in between, instead of all of it held in memory at once.
        self.behind = False
        if not self._reopen_if_needed():
            return []
        assert self._file is not None
        data = self._file.read(self.chunk)
        self.behind = len(data) == self.chunk
        return self._split(data)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _reopen_if_needed(self) -> bool:
        try:
            on_disk = os.stat(self.path)
        except OSError:
            return self._file is not None  # gone for now: finish what is open
        if self._file is not None:
            held = os.fstat(self._file.fileno())
            if held.st_ino == on_disk.st_ino and on_disk.st_size >= self._file.tell():
                return True
            self.close()
        try:
            self._file = self.path.open("rb")
        except OSError:
            return False
        self._pending = b""
        return True


class StreamFollower(_Lines):
    """A pipe (standard input), read without blocking so one event loop can both read and
    redraw; end of file ends the stream."""

    behind = False  # each read takes all there is

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.ended = False
        self._was_blocking = os.get_blocking(fd)
        os.set_blocking(fd, False)

    def read(self) -> list[bytes]:
        chunks: list[bytes] = []
        while not self.ended:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                self.ended = True
            chunks.append(chunk)
        lines = self._split(b"".join(chunks))
        return lines + self.finish() if self.ended else lines

    def close(self) -> None:
        os.set_blocking(self.fd, self._was_blocking)


Follower = EventFileFollower | StreamFollower


async def follow(
    follower: Follower,
    state: DashboardState,
    *,
    on_poll: Callable[[], None] | None = None,
    interval: float = REFRESH_S,
    stop: anyio.Event | None = None,
) -> None:
    """Feed `state` from a growing file or a pipe until cancelled or `stop` is set; after a
    pipe ends, keep calling `on_poll` so the view stays up (and its rates fall)."""
    while stop is None or not stop.is_set():
        if not follower.ended:
            state.feed_lines(follower.read())
        if on_poll is not None:
            on_poll()
        await anyio.sleep(0 if follower.behind else interval)


def read_to_end(follower: Follower, state: DashboardState) -> None:
    if isinstance(follower, StreamFollower):
        os.set_blocking(follower.fd, True)  # nothing else to do meanwhile: block
    state.feed_lines(follower.read())
    while follower.behind:
        state.feed_lines(follower.read())
    state.feed_lines(follower.finish())
