"""Guards on the HTTP replies of a model server: a size cap that also holds for compressed
replies, and a read timeout that counts only time without progress. Both sit under aiohttp,
the HTTP client of `remora.models.http.openai_client`."""

from __future__ import annotations

import functools
import zlib
from collections.abc import Iterator
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

MIB = 1 << 20


ACCEPT_ENCODING = "gzip, deflate"
"""The only encodings asked for, and the only ones read (each decoded here, in bounded pieces)."""


_DECODED_PIECE = 1 << 16
"""Most bytes one step of decompression may produce."""


class ReplyRefused(Exception):
    """A reply body Remora will not read: too large, in an encoding it did not ask for, or with
    corrupt compressed data. Never retried: asking again brings the same body."""


async def read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The reply's body, decoded here (the session does not decompress) and refused past
    `max_bytes` decoded bytes, so a small compressed body cannot unpack to gigabytes."""
    encodings = [
        value.strip().lower()
        for header in response.headers.getall("Content-Encoding", [])
        for value in header.split(",")
    ]
    encodings = [value for value in encodings if value and value != "identity"]
    if len(encodings) > 1 or (encodings and encodings[0] not in _DECODERS):
        raise ReplyRefused(
            f"the reply is in a Content-Encoding Remora did not ask for "
            f"({', '.join(encodings)}; it asks for {ACCEPT_ENCODING})"
        )
    declared = response.headers.get("Content-Length", "")
    if not encodings and declared.isdigit() and int(declared) > max_bytes:
        raise ReplyRefused(_too_large(max_bytes))
    inflater = _Inflater(encodings[0]) if encodings else None
    pieces: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        for piece in inflater.feed(chunk) if inflater else (chunk,):
            size += len(piece)
            if size > max_bytes:
                raise ReplyRefused(_too_large(max_bytes))
            pieces.append(piece)
    if inflater is not None:
        pieces.append(tail := inflater.flush())
        if size + len(tail) > max_bytes:
            raise ReplyRefused(_too_large(max_bytes))
    return b"".join(pieces)


def _too_large(max_bytes: int) -> str:
    return (
        f"the reply body is larger than server.max_reply_mb={max_bytes // MIB} "
        f"({max_bytes // MIB} MiB after decompression)"
    )


_DECODERS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}


class _Inflater:
    """gzip or deflate, decompressed in pieces of at most `_DECODED_PIECE` bytes, so the size
    cap is checked before more than a piece past it is ever held."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._wbits = _DECODERS[encoding]
        self._decompressor = zlib.decompressobj(self._wbits)
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        try:
            piece = self._decompress(data)
        except zlib.error:
            if self._started or self.encoding != "deflate":
                raise ReplyRefused(f"the reply's {self.encoding} data is corrupt") from None
            # "deflate" is meant to be zlib-wrapped, but some servers send raw deflate.
            self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
            piece = self._decompress(data)
        self._started = True
        while piece:
            yield piece
            piece = self._decompress(self._decompressor.unconsumed_tail)

    def flush(self) -> bytes:
        try:
            return self._decompressor.flush()
        except zlib.error:
            raise ReplyRefused(f"the reply's {self.encoding} data is corrupt") from None

    def _decompress(self, data: bytes) -> bytes:
        try:
            return self._decompressor.decompress(data, _DECODED_PIECE)
        except zlib.error:
            if not self._started:
                raise
            raise ReplyRefused(f"the reply's {self.encoding} data is corrupt") from None


def paced_connector(connections: int, stall: float) -> tuple[aiohttp.TCPConnector, bool]:
    """A connection pool of `connections` whose connections time out only without progress:
    after a request is sent, the wait for the reply's first byte is unbounded (the server may
    be queueing it); from then on every byte, of the status line and headers as of the body,
    must come within `stall` seconds (aiohttp's `sock_read`, restarted on every byte received).

    The second value is False where aiohttp builds its connections differently from the
    releases this was written for: the pool is then plain, and the caller's `sock_read` also
    bounds the wait for the first byte."""
    connector = aiohttp.TCPConnector(limit=connections, limit_per_host=0)
    paced = isinstance(getattr(connector, "_factory", None), functools.partial) and callable(
        getattr(ResponseHandler, "start_timeout", None)
    )
    if paced:
        connector._factory = functools.partial(  # type: ignore[assignment]
            _PacedResponseHandler, stall=stall, loop=connector._loop
        )
    return connector, paced


class _PacedResponseHandler(ResponseHandler):
    """aiohttp starts the read timer once the request is written (`start_timeout`); here it
    starts with the first byte of the reply (`data_received` restarts it on every byte)."""

    def __init__(self, *args: Any, stall: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stall = stall

    def start_timeout(self) -> None:
        pass

    def _on_read_timeout(self) -> None:
        error = aiohttp.SocketTimeoutError(
            f"the reply stalled: no byte for {self._stall:g}s (server.timeout)"
        )
        self.set_exception(error)
        if self._payload is not None:
            self._payload.set_exception(error)
