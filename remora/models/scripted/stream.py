"""The scripted model's chat replies as vLLM sends them: whole, or streamed as server-sent events
(`"stream": true`), with log-probabilities when asked (`"logprobs": true`).

Remora reads a reply's pace from its stream and a call's confidence from the log-probabilities of
the tokens that spell the tool's name in the model's native text (FunctionGemma's
`<start_function_call>call:NAME{ARGS}<end_function_call>`). The scripted model has no tokenizer,
so it cuts that text into pseudo tokens about a token long, with a real one's boundaries around
the name: each marker, `call`, `:`, the name's pieces at underscores (`find`, `_todos`), `{`.
Every token is streamed in exactly one chunk, in order, so what a client folds from the chunks
is what the whole reply says.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio

from remora.models.scripted.replies import (
    DelayedReply,
    HttpErrorReply,
    PacedReply,
    RawReply,
    Reply,
    Response,
    TextReply,
    ToolCallsReply,
    error_response,
    json_response,
)

START_CALL = "<start_function_call>"
END_CALL = "<end_function_call>"
CONFIDENT = -0.001
"""Each pseudo token's log-probability unless a call's `confidence` says otherwise: a model
sure of what it writes."""
MAX_TOP_LOGPROBS = 20
"""vLLM's default `max_logprobs`: it refuses to list more alternatives per token."""
_IMPOSSIBLE = -9999.0  # vLLM's stand-in for log(0), which JSON cannot carry
# Words and runs of punctuation, each with the spaces before it: any text, cut about as a
# tokenizer would, and a huge run (a fault) stays one token rather than a flood of events.
_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]+|\s+")
_NAME_PIECE = re.compile(r"_*[^_]+|_+")
_FILLERS = ("\n", " ", ",", ".", ":", '"', "<end_of_turn>")
_SSE_HEADERS = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]


def request_problem(body: dict[str, Any]) -> str | None:
    """Why vLLM would refuse the request's stream, log-probability or seed fields (a 400,
    before anything is generated), or None."""
    top = body.get("top_logprobs")
    if top is not None and (not _is_int(top) or not 0 <= top <= MAX_TOP_LOGPROBS):
        return f"top_logprobs must be an integer from 0 to {MAX_TOP_LOGPROBS}, got {top!r}"
    if top and not body.get("logprobs"):
        return "when using top_logprobs, logprobs must be set to true"
    if body.get("stream_options") is not None and not body.get("stream"):
        return "stream_options can only be set when stream is true"
    if body.get("seed") is not None and not _is_int(body["seed"]):
        return f"seed must be an integer, got {body['seed']!r}"
    return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class _Token:
    """A pseudo token; `rivals` are what the model weighed in its place (the first pieces of
    the other offered tools' names, for a name's first piece)."""

    text: str
    logprob: float = CONFIDENT
    rivals: tuple[str, ...] = ()

    def entry(self, top: int) -> dict[str, Any]:
        """Its `logprobs.content[]` entry with `top` alternatives: itself, then made-up ones
        sharing the probability it leaves, each half the one before."""
        chosen = _logprob(self.text, self.logprob)
        left = 1.0 - math.exp(self.logprob)
        others = [t for t in dict.fromkeys((*self.rivals, *_FILLERS)) if t != self.text]
        others += [f"<unused{n}>" for n in range(max(0, top - len(others)))]
        alternatives = [
            _logprob(other, math.log(p) if (p := left / 2 ** (n + 1)) > 0 else _IMPOSSIBLE)
            for n, other in enumerate(others[: max(0, top - 1)])
        ]
        return {**chosen, "top_logprobs": [chosen, *alternatives][:top]}


def _logprob(token: str, logprob: float) -> dict[str, Any]:
    return {
        "token": token,
        "logprob": max(logprob, _IMPOSSIBLE),
        "bytes": list(token.encode("utf-8", "surrogatepass")),
    }


@dataclass(frozen=True, slots=True)
class _Delta:
    """One streamed chunk's delta and the pseudo tokens whose text it streams."""

    delta: dict[str, Any]
    tokens: list[_Token]


def _deltas(
    reply: TextReply | ToolCallsReply, call_ids: list[str], offered: list[str]
) -> list[_Delta]:
    """The reply as vLLM streams it: its text a token at a time, then each call's name, then
    its arguments (verbatim, valid or not) a token at a time."""
    deltas = [_Delta({"content": t}, [_Token(t)]) for t in _TOKEN.findall(reply.content or "")]
    if isinstance(reply, TextReply):
        return deltas
    for index, (call, call_id) in enumerate(zip(reply.calls, call_ids, strict=True)):
        # The name's tokens: with a `confidence` p, the first has ln(p) and the rest 0, so
        # their joint probability is p whatever the model would have said after the choice.
        pieces, p = _NAME_PIECE.findall(call.name), call.confidence
        first, rest = (CONFIDENT, CONFIDENT) if p is None else (math.log(p), 0.0)
        firsts = [_NAME_PIECE.findall(name)[:1] for name in offered]
        rivals = tuple(dict.fromkeys(f[0] for f in firsts if f and f != pieces[:1]))
        name = [_Token(piece, first, rivals) for piece in pieces[:1]]
        name += [_Token(piece, rest) for piece in pieces[1:]]
        function = {"name": call.name, "arguments": ""}
        head = {"index": index, "id": call_id, "type": "function", "function": function}
        # Held back by the server kit's parser until `call:NAME{` is whole, each of these steps
        # is an empty delta carrying its token's log-probability, as vLLM sends it.
        opening = [_Token(START_CALL), _Token("call"), _Token(":"), *name]
        deltas += [_Delta({}, [token]) for token in opening]
        deltas.append(_Delta({"tool_calls": [head]}, [_Token("{")]))
        for piece in _TOKEN.findall(call.arguments):
            arguments = {"index": index, "function": {"arguments": piece}}
            deltas.append(_Delta({"tool_calls": [arguments]}, [_Token(piece)]))
        deltas[-1].tokens.extend([_Token("}"), _Token(END_CALL)])
    return deltas


async def chat_response(
    body: dict[str, Any],
    reply: Reply,
    *,
    call_ids: Iterator[int],
    completion_ids: Iterator[int],
    model: str,
) -> Response:
    """The answer to a chat request `body` (`model` unless it names one): errors and raw bytes
    as given, a reply whole or, when `body` asks, as the events of a stream."""
    if isinstance(reply, DelayedReply):
        await anyio.sleep(reply.seconds)
        reply = reply.reply
    if isinstance(reply, RawReply):
        return Response(reply.status, reply.body, list(reply.headers))
    if isinstance(reply, HttpErrorReply):
        return error_response(reply.status, reply.message, reply.headers)
    pace, reply = (reply, reply.reply) if isinstance(reply, PacedReply) else (None, reply)

    calls = reply.calls if isinstance(reply, ToolCallsReply) else ()
    ids = [f"call_{next(call_ids)}" for _ in calls]
    finish_reason = reply.finish_reason if isinstance(reply, TextReply) else "tool_calls"
    deltas = _deltas(reply, ids, _offered(body))
    tokens = [token for delta in deltas for token in delta.tokens]
    # Stand-in token counts: about four characters a prompt token; the pseudo tokens and the
    # end of the turn for the completion (vLLM counts the stop token).
    counts = (max(1, len(json.dumps(body, sort_keys=True)) // 4), len(tokens) + 1)
    head = {
        "id": f"chatcmpl-scripted-{next(completion_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"] if isinstance(body.get("model"), str) else model,
    }
    if body.get("stream"):
        events = _stream(body, head, deltas, finish_reason, counts)
        waits = _waits(pace, len(events))
        response = Response(200, b"".join(events), list(_SSE_HEADERS))
        response.events = list(zip(waits, events, strict=True))
        return response
    if pace is not None:  # the waits of the stream it would have been
        await anyio.sleep(sum(_waits(pace, len(deltas) + 3)))
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if isinstance(reply, ToolCallsReply):
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for call_id, c in zip(ids, calls, strict=True)
        ]
    top = body.get("top_logprobs") or 0
    logprobs = {"content": [t.entry(top) for t in tokens]} if body.get("logprobs") else None
    choice = {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish_reason}
    return json_response(200, {**head, "choices": [choice], "usage": _usage(*counts)})


def _offered(body: dict[str, Any]) -> list[str]:
    """The names of the tools the request offers."""
    tools = body.get("tools")
    functions = (
        [t.get("function") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    )
    return [f["name"] for f in functions if isinstance(f, dict) and isinstance(f.get("name"), str)]


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _stream(
    body: dict[str, Any],
    head: dict[str, Any],
    deltas: list[_Delta],
    finish_reason: str,
    counts: tuple[int, int],
) -> list[bytes]:
    """The events of the streamed reply: the role, each delta, the finish, the usage if asked
    (`stream_options.include_usage`; in every chunk too with `continuous_usage_stats`), and
    `[DONE]`."""
    options = body.get("stream_options")
    options = options if isinstance(options, dict) else {}
    with_usage = bool(options.get("include_usage"))
    continuous = with_usage and bool(options.get("continuous_usage_stats"))
    asked, top = bool(body.get("logprobs")), body.get("top_logprobs") or 0
    prompt_tokens, completion_tokens = counts
    head = {**head, "object": "chat.completion.chunk"}

    steps: list[tuple[dict[str, Any], list[_Token] | None, str | None, int]] = [
        ({"role": "assistant", "content": ""}, None, None, 0)
    ]
    streamed = 0
    for delta in deltas:
        streamed += len(delta.tokens)
        steps.append((delta.delta, delta.tokens, None, streamed))
    steps.append(({}, [], finish_reason, completion_tokens))

    events = []
    for delta_of, tokens, finish, so_far in steps:
        logprobs = (
            {"content": [t.entry(top) for t in tokens]} if asked and tokens is not None else None
        )
        choice = {"index": 0, "delta": delta_of, "logprobs": logprobs, "finish_reason": finish}
        chunk: dict[str, Any] = {**head, "choices": [choice]}
        if continuous:
            chunk["usage"] = _usage(prompt_tokens, so_far)
        events.append(_event(chunk))
    if with_usage:
        events.append(_event({**head, "choices": [], "usage": _usage(*counts)}))
    return [*events, b"data: [DONE]\n\n"]


def _event(chunk: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _waits(pace: PacedReply | None, events: int) -> list[float]:
    """The wait before each of a stream's `events` at `pace`."""
    waits = [0.0] + [pace.every if pace else 0.0] * (events - 1)
    if pace is not None and pace.stall_after is not None and pace.stall_after < events:
        waits[pace.stall_after] += pace.stall
    return waits
