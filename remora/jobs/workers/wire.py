"""Messages between the parent and a worker over a socket pair: a 4-byte length, then the
pickled message. Both ends run the same installed Remora and the socket is theirs alone, so
pickle carries settings, agents, nodes and results as they are."""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

import anyio
from anyio.abc import ByteSendStream, UNIXSocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

_LENGTH = struct.Struct(">I")


async def open_stream(sock: socket.socket) -> tuple[UNIXSocketStream, BufferedByteReceiveStream]:
    stream = await UNIXSocketStream.from_socket(sock)
    return stream, BufferedByteReceiveStream(stream)


def frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


async def send(stream: ByteSendStream, message: Any) -> None:
    await stream.send(frame(message))


async def receive(stream: BufferedByteReceiveStream) -> Any:
    """The next message; EOFError when the other end is gone."""
    try:
        (length,) = _LENGTH.unpack(await stream.receive_exactly(_LENGTH.size))
        return pickle.loads(await stream.receive_exactly(length))
    except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
        raise EOFError("the other end of the worker socket is gone") from exc
