"""Scoring in the embedded engine: the log-probability the model gives a continuation of a prompt
(`CompletionRequest.score`), for reviewer-style reranking (the docstring agent asks how likely a
function's code is after each candidate docstring).

The prompt and continuation are evaluated like any prompt (aligned chunks, whole chunks of an
earlier prompt reused, so every candidate after a shared prefix pays only for its own tokens),
with logits asked for only at the positions that predict a continuation token: the vocabulary
head (262k words for Gemma) is the expensive part, so a continuation of n tokens costs n rows of
it, not one per prompt token.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread

from remora.findings.results import Usage
from remora.models.local.decoder import EVAL_CHUNK, Slot
from remora.models.local.scheduler import Contexts, TurnOrder
from remora.models.local.usage import EngineStats
from remora.protocol.completion import Completion, CompletionRequest
from remora.protocol.messages import ModelError

if TYPE_CHECKING:
    import numpy as np
else:
    from remora.models.local.binding import np


async def score_text(
    order: TurnOrder,
    contexts: Contexts,
    limiter: anyio.CapacityLimiter,
    adapter: str | None,
    request: CompletionRequest,
) -> tuple[Completion, EngineStats]:
    """`request.score`'s log-probability after `request.prompt` (both after `<bos>`), on one
    of the loaded engine's `contexts` in its turn, and what that cost."""
    assert request.score is not None
    context = "<bos>" + request.prompt
    async with order.turn(0):
        started = time.perf_counter()
        total, count, prompt_tokens, evaluated = await anyio.to_thread.run_sync(
            partial(_score_in_thread, contexts, context, request.score, adapter),
            limiter=limiter,
        )
        seconds = time.perf_counter() - started
    stats = EngineStats(
        scored=1,
        prompt_tokens=prompt_tokens,
        prompt_tokens_evaluated=evaluated,
        prompt_seconds=seconds,
    )
    completion = Completion(
        text="",
        logprob=total,
        scored_tokens=count,
        usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=0),
    )
    return completion, stats


def _score_in_thread(
    contexts: Contexts, context: str, continuation: str, adapter: str | None
) -> tuple[float, int, int, int]:
    slot, whole = contexts.take("text", context + continuation, 1, adapter)
    try:
        if len(whole) > slot.n_ctx:
            raise ModelError(
                f"the text to score has {len(whole)} tokens, more than the context of {slot.n_ctx}"
            )
        head = slot.tokenize(context)
        # Where the continuation's tokens start: where the two tokenizations part.
        start = next(
            (i for i, (a, b) in enumerate(zip(head, whole, strict=False)) if a != b), len(head)
        )
        start = max(1, min(start, len(whole)))
        reused = min(slot.reusable(whole, adapter), start - 1) // EVAL_CHUNK * EVAL_CHUNK
        total, count = score_tokens(slot, whole, start, anyio.from_thread.check_cancelled, adapter)
    finally:
        contexts.give_back(slot)
    return total, count, len(whole), len(whole) - reused


def score_tokens(
    slot: Slot,
    tokens: list[int],
    start: int,
    check_cancelled: Callable[[], None] = lambda: None,
    adapter: str | None = None,
) -> tuple[float, int]:
    """The sum of log P(tokens[i] | tokens[:i]) for i >= start, and how many were scored."""
    slot.apply_adapter(adapter)
    llm, llama = slot.llm, slot.llama
    keep = slot.reusable(tokens, adapter) // EVAL_CHUNK * EVAL_CHUNK
    keep = min(keep, (start - 1) // EVAL_CHUNK * EVAL_CHUNK)
    memory = llama.llama_get_memory(llm.ctx)
    if keep > 0 and llama.llama_memory_seq_rm(memory, 0, keep, -1):
        llm.n_tokens = keep
    else:
        llm.reset()
        llama.llama_memory_clear(memory, True)
        keep = 0
    slot._prompt_positions = keep
    total, count = 0.0, 0
    for first in range(keep, len(tokens), EVAL_CHUNK):
        check_cancelled()
        chunk = tokens[first : first + EVAL_CHUNK]
        wanted = [j for j in range(len(chunk)) if start - 1 <= first + j < len(tokens) - 1]
        batch = llm._batch
        batch.set_batch(batch=chunk, n_past=llm.n_tokens, logits_all=False)
        for j in range(len(chunk)):
            batch.batch.logits[j] = j in wanted or j == len(chunk) - 1
        llm._ctx.decode(batch)
        llm.input_ids[first : first + len(chunk)] = chunk
        llm.n_tokens += len(chunk)
        slot._prompt_positions = first + len(chunk)
        if wanted:
            rows = np.stack([_row(slot, j) for j in wanted])
            peak = rows.max(axis=1, keepdims=True)
            norm = np.log(np.exp(rows - peak).sum(axis=1, dtype=np.float64)) + peak[:, 0]
            targets = np.array([tokens[first + j + 1] for j in wanted])
            total += float((rows[np.arange(len(wanted)), targets] - norm).sum())
            count += len(wanted)
    return min(total, 0.0), count


def _row(slot: Slot, index: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    pointer = slot.llama.llama_get_logits_ith(slot.llm.ctx, index)
    row: np.ndarray[Any, np.dtype[np.float32]] = np.ctypeslib.as_array(
        pointer, shape=(slot.n_vocab,)
    )
    return row
