"""A job's drafts of one prompt decoded together: the prompt evaluated once and shared by a
sequence per draft, one token of every draft per batch (the rows share each weight read)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from remora.models.local.decoder import Generation, Slot
from remora.models.local.stopping import stop_at
from remora.models.local.usage import EngineStats
from remora.protocol.completion import MAX_DRAFTS
from remora.protocol.messages import ModelError

if TYPE_CHECKING:
    import numpy as np
else:  # numpy on first use: it comes with the `local` extra
    from remora.models.local.binding import np

MAX_ROWS = MAX_DRAFTS
"""Sequences a context decodes together: a job's drafts of one sentence or call."""


def decode_drafts(
    slot: Slot,
    prompt: list[int],
    temperatures: Sequence[float],
    *,
    max_tokens: int,
    seed: int,
    check_cancelled: Callable[[], None],
    stops: Sequence[bytes] = (),
    adapter: str | None = None,
) -> list[Generation]:
    """One free-text continuation of `prompt` per temperature, decoded together: the prompt
    is evaluated once and shared by a sequence per row (`llama_memory_seq_cp`), and each
    step decodes one token of every row in one batch, so the rows share each weight read.

    llama.cpp computes a batch of one row along another path than a batch of several, but
    a row's numbers are the same beside any partners, one to three of them (measured with
    flash attention on: bench/batched_decode.py). So a row that has finished stays in the batch as a
    placeholder while only one other row is left: the same request always gets the same
    replies, whatever runs beside it (not the replies the same temperatures get asked one
    at a time)."""
    count = len(temperatures)
    if not 2 <= count <= MAX_ROWS:
        raise ValueError(f"decode_drafts decodes 2 to {MAX_ROWS} rows, not {count}")
    slot.apply_adapter(adapter)
    stats = EngineStats(generations=count, prompt_tokens=count * len(prompt))
    slot.start(prompt, check_cancelled, stats)
    # A temperature's first row samples as a request of its own would; a repeated one gets
    # its own stream, or two rows at 0.7 would be the same draft.
    rngs = [
        np.random.default_rng([seed, repeat] if repeat else seed)
        for repeat in (temperatures[:row].count(t) for row, t in enumerate(temperatures))
    ]
    outs = [bytearray() for _ in temperatures]
    produced = [0] * count
    finish: list[str | None] = [None] * count
    last = [slot.eos] * count
    batched = list(range(count))
    """The rows the next step decodes: those still going, and a finished one as a
    placeholder while only one is left (the shape never drops to one row)."""
    first = slot.logits()  # every row starts from the prompt's last logits
    logits = dict.fromkeys(range(count), first)
    batch = slot.llama.llama_batch_init(count, 0, 1)
    started = time.perf_counter()
    try:
        memory = slot.llama.llama_get_memory(slot.llm.ctx)
        for row in range(1, count):
            slot.llama.llama_memory_seq_rm(memory, row, -1, -1)  # nothing left from before
            slot.llama.llama_memory_seq_cp(memory, 0, row, -1, -1)
        for step in range(max_tokens):
            check_cancelled()
            for row in range(count):
                if finish[row] is None:
                    finish[row] = _next_piece(
                        slot, logits[row], temperatures[row], rngs[row], outs[row], last, row, stops
                    )
                    produced[row] += last[row] != slot.eos
            if all(finish) or step == max_tokens - 1:
                break
            going = [row for row in batched if finish[row] is None]
            if len(going) < 2:
                going = (going + [row for row in batched if finish[row]])[:2]
            batched = going
            logits = _decode_rows(slot, batch, batched, last, len(prompt) + step)
    finally:
        slot.llama.llama_batch_free(batch)
        slot.keep_prompt(len(prompt), count)
    stats.completion_tokens = sum(produced)
    stats.completion_seconds = time.perf_counter() - started
    generations = [
        Generation(out.decode("utf-8", errors="replace"), len(prompt), made, why or "length")
        for out, made, why in zip(outs, produced, finish, strict=True)
    ]
    generations[0].stats = stats  # the request's counts, once
    return generations


def _next_piece(
    slot: Slot,
    logits: np.ndarray[Any, np.dtype[np.float32]],
    temperature: float,
    rng: np.random.Generator,
    out: bytearray,
    last: list[int],
    row: int,
    stops: Sequence[bytes],
) -> str | None:
    """Choose a row's next token into `last[row]` and its text onto `out`: why the row ends
    ("stop"), or None to go on."""
    token = slot.choose(None, temperature, rng, EngineStats(), logits)
    if token is None or slot.llama.llama_vocab_is_eog(slot.vocab, token):
        last[row] = slot.eos
        return "stop"
    last[row] = token
    out += slot.piece(token)
    cut = stop_at(out, constrained=False, extra=stops)
    if cut is None:
        return None
    del out[cut[0] :]
    return cut[1]


def _decode_rows(
    slot: Slot, batch: Any, rows: list[int], tokens: list[int], position: int
) -> dict[int, np.ndarray[Any, np.dtype[np.float32]]]:
    """Decode one token for each of `rows` (row r is sequence r, at `position`) in one
    batch: the logits by row."""
    for index, row in enumerate(rows):
        batch.token[index], batch.pos[index] = tokens[row], position
        batch.n_seq_id[index], batch.seq_id[index][0] = 1, row
        batch.logits[index] = True
    batch.n_tokens = len(rows)
    if slot.llama.llama_decode(slot.llm.ctx, batch) != 0:
        raise ModelError("llama.cpp could not decode the drafts' batch")
    return {
        row: np.ctypeslib.as_array(
            slot.llama.llama_get_logits_ith(slot.llm.ctx, index), shape=(slot.n_vocab,)
        )
        for index, row in enumerate(rows)
    }
