"""Where a generation of the embedded engine stops: at a stop sequence, at the end of the turn
(free text), or after a function call that repeats an earlier one of the same reply."""

from __future__ import annotations

from collections.abc import Sequence

from remora.protocol.functiongemma import (
    END_FUNCTION_CALL,
    END_OF_TURN,
    STOP_SEQUENCES,
    parse_output,
)

_STOPS = tuple(marker.encode() for marker in STOP_SEQUENCES)
_END_CALL = END_FUNCTION_CALL.encode()
_END_OF_TURN = END_OF_TURN.encode()


def stop_at(
    out: bytes | bytearray, *, constrained: bool, extra: Sequence[bytes] = ()
) -> tuple[int, str] | None:
    """Where to cut the output and why, or None to go on. Checked after every token."""
    for stop in (*_STOPS, *extra):
        at = out.find(stop)
        if at != -1:
            return at, "stop"
    if not constrained:
        at = out.find(_END_OF_TURN)
        return (at, "stop") if at != -1 else None
    if not out.endswith(_END_CALL):
        return None
    parsed = parse_output(out.decode("utf-8", errors="replace"))
    if len(parsed.calls) >= 2:
        last = parsed.calls[-1]
        key = (last.name, last.arguments_json())
        if any((call.name, call.arguments_json()) == key for call in parsed.calls[:-1]):
            # Offsets are in characters; cut the bytes at the same place.
            return len(out.decode("utf-8", errors="replace")[: last.start].encode()), "repeat"
    return None
