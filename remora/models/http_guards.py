"""Guards on the HTTP replies of a model server: a size cap that also holds for compressed
replies, and a read timeout that counts only time without progress."""

from __future__ import annotations

import importlib
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import anyio
import openai

if TYPE_CHECKING:
    import httpcore2 as httpcore
    import httpx2 as httpx
else:  # the HTTP library this openai release is built on: httpx2 (openai 3), else httpx
    httpx = importlib.import_module(type(openai.DEFAULT_CONNECTION_LIMITS).__module__.split(".")[0])
    httpcore = importlib.import_module("httpcore2" if httpx.__name__ == "httpx2" else "httpcore")

MIB = 1 << 20


ACCEPT_ENCODING = "gzip, deflate"
"""The only encodings asked for, and the only ones read (each decoded here, in bounded pieces)."""


_DECODED_PIECE = 1 << 16
"""Most bytes one step of decompression may produce."""


class ReplyRefused(Exception):
    """A reply body Remora will not read: too large, in an encoding it did not ask for, or with
    corrupt compressed data. Raised while the body is read, so the OpenAI client neither retries
    nor wraps it."""


class _ReplyGuard:
    """An httpx response hook (the headers have arrived): the body is then read through
    `_CappedBody`, which decodes it and refuses it past the cap."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes

    async def __call__(self, response: httpx.Response) -> None:
        encodings = [
            value.strip().lower()
            for value in response.headers.get_list("content-encoding", split_commas=True)
        ]
        encodings = [value for value in encodings if value and value != "identity"]
        if len(encodings) > 1 or (encodings and encodings[0] not in _DECODERS):
            raise ReplyRefused(
                f"the reply is in a Content-Encoding Remora did not ask for "
                f"({', '.join(encodings)}; it asks for {ACCEPT_ENCODING})"
            )
        declared = response.headers.get("content-length", "")
        if not encodings and declared.isdigit() and int(declared) > self.max_bytes:
            raise ReplyRefused(_too_large(self.max_bytes))
        inflater = _Inflater(encodings[0]) if encodings else None
        if inflater is not None:  # decoded here: httpx must not decode it again
            del response.headers["content-encoding"]
            response.headers.pop("content-length", None)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        response.stream = _CappedBody(stream, self.max_bytes, inflater)


class _CappedBody(httpx.AsyncByteStream):
    def __init__(self, raw: httpx.AsyncByteStream, max_bytes: int, inflater: _Inflater | None):
        self._raw, self._max_bytes, self._inflater = raw, max_bytes, inflater
        self._size = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._raw:
            for piece in self._inflater.feed(chunk) if self._inflater else (chunk,):
                yield self._count(piece)
        if self._inflater is not None:
            yield self._count(self._inflater.flush())

    def _count(self, piece: bytes) -> bytes:
        self._size += len(piece)
        if self._size > self._max_bytes:
            raise ReplyRefused(_too_large(self._max_bytes))
        return piece

    async def aclose(self) -> None:
        await self._raw.aclose()


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


def _pace(client: httpx.AsyncClient, stall: float) -> bool:
    """Put `_PacedStream` under every connection pool of `client` (its own and those for
    proxies from the environment). False where httpx keeps its pools differently from the
    releases this was written for (then the caller keeps httpx's plain read timeout)."""
    mounts: dict[Any, Any] = getattr(client, "_mounts", {})
    transports = [getattr(client, "_transport", None), *mounts.values()]
    pools: list[Any] = [getattr(transport, "_pool", None) for transport in transports if transport]
    if not pools or not all(hasattr(pool, "_network_backend") for pool in pools):
        return False
    for pool in pools:
        pool._network_backend = _PacedBackend(pool._network_backend, stall)
    return True


class _PacedBackend:
    """httpcore's network backend, every connection it opens wrapped in a `_PacedStream`."""

    def __init__(self, backend: Any, stall: float) -> None:
        self._backend, self._stall = backend, stall

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> _PacedStream:
        return _PacedStream(await self._backend.connect_tcp(*args, **kwargs), self._stall)

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> _PacedStream:
        return _PacedStream(await self._backend.connect_unix_socket(*args, **kwargs), self._stall)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _PacedStream:
    """One connection. After a request is written, the wait for the reply's first byte is
    unbounded (the server may be queueing it); every later read must bring a byte within
    `stall` seconds, else httpcore's `ReadTimeout`, which the OpenAI client retries."""

    def __init__(self, stream: Any, stall: float) -> None:
        self._stream, self._stall = stream, stall
        self._awaiting_reply = False

    # httpcore's stream interface, `timeout` parameters included.
    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        self._awaiting_reply = True
        await self._stream.write(buffer, timeout=timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if self._awaiting_reply:
            data: bytes = await self._stream.read(max_bytes, timeout=None)
            self._awaiting_reply = False
            return data
        with anyio.move_on_after(self._stall):
            data = await self._stream.read(max_bytes, timeout=None)
            return data
        raise httpcore.ReadTimeout(
            f"the reply stalled: no byte for {self._stall:g}s (server.timeout)"
        )

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(self, *args: Any, **kwargs: Any) -> _PacedStream:
        return _PacedStream(await self._stream.start_tls(*args, **kwargs), self._stall)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)
