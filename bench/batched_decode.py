"""Several sequences decoded in one batch on this CPU (issue "Real code at the machine's limit",
part 2): what a step of the embedded engine costs with one to four rows, and whether a row's
numbers stay the same beside other rows. Results: bench/results/batched_decode.json.

    python bench/batched_decode.py          # about 1 min on 2 cores
    python bench/batched_decode.py --quick  # fewer steps

Engine: `LocalChatModel.complete_drafts` on one prompt (part of Remora's own source) at one to
four temperatures, no stop string, so every row generates `steps` tokens; seconds per step and
aggregate tokens/s from the engine's own counters (sampling in Python included).

Numbers: llama-cpp-python's low-level API on contexts set up as the engine's are (prompts in
64-token chunks, four sequences in one unified KV cache, flash attention on; the engine now
batches whole chunks up to 256 tokens, which computes the same numbers and does not touch the
decoding steps measured here): greedy steps of a prompt
decoded alone (a batch of one row), beside one other prompt, beside two and beside three. The
largest logit difference between the same row beside different partners must be 0 (the
engine's promise: the same request, the same replies, whatever runs beside it); the difference
between a row alone and in a batch says whether drafts decoded together are the replies the same
temperatures get one at a time (they are not: llama.cpp takes another matrix path for one row
than for several).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from _common import Report, common_arguments

REPO = Path(__file__).resolve().parent.parent
CHUNK = 64
SOURCE = REPO / "remora" / "models" / "local" / "decoder.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    args = parser.parse_args()
    steps = 8 if args.quick else 48
    report = Report("batched_decode", args)
    per_rows = engine_steps(steps)
    single = per_rows[1]
    report.data.update(
        steps=steps,
        seconds_per_step={rows: round(seconds, 4) for rows, seconds in per_rows.items()},
        step_cost_ratio={rows: round(s / single, 3) for rows, s in per_rows.items()},
        aggregate_ratio={rows: round(rows * single / s, 3) for rows, s in per_rows.items()},
    )
    alone_vs_batched, between_partners = row_differences(steps)
    report.data.update(
        max_logit_difference_alone_vs_batched=alone_vs_batched,
        max_logit_difference_between_partners=between_partners,
    )
    for rows in (2, 3):
        report.verdict(
            f"aggregate generation with {rows} drafts >= 1.5x one sequence at a time",
            rows * single / per_rows[rows] >= 1.5,
            f"{rows / per_rows[rows]:.1f} tokens/s with {rows} rows vs {1 / single:.1f} with one "
            f"({rows * single / per_rows[rows]:.2f}x); a {rows}-row step costs "
            f"{per_rows[rows] / single:.2f}x a one-row step",
        )
    report.verdict(
        "a row's logits do not depend on the rows beside it (reproducible whatever runs beside it)",
        between_partners == 0.0,
        f"largest difference {between_partners:g}",
    )
    report.verdict(
        "a row decoded beside others gives the logits it gets alone (the replies of one at a time)",
        alone_vs_batched == 0.0,
        f"largest difference {alone_vs_batched:.3g}",
    )
    report.save()
    return 0


def engine_steps(steps: int) -> dict[int, float]:
    """Seconds per decoding step of the engine with 1 to 4 rows (best of two tries)."""
    import anyio

    from remora.models.local.model import LocalChatModel
    from remora.models.local.resolve import resolve_model
    from remora.protocol.completion import DraftsRequest

    found = resolve_model()
    engine = LocalChatModel(found.path, name=found.name)
    engine.load_sync()
    text = SOURCE.read_text()[:1500]
    per_rows: dict[int, float] = {}

    async def run() -> None:
        for rows in (1, 2, 3, 4):
            tries = []
            for attempt in range(2):
                before = engine.usage()
                request = DraftsRequest(
                    prompt=f"{text}\n# {rows}.{attempt}\n",
                    max_tokens=steps,
                    temperatures=[0.0, 0.7, 1.0, 1.3][:rows],
                )
                await engine.complete_drafts(model="bench", request=request)
                after = engine.usage()
                tokens = (after.completion_tokens - before.completion_tokens) / rows
                tries.append((after.completion_seconds - before.completion_seconds) / tokens)
            per_rows[rows] = min(tries)

    anyio.run(run)
    engine.close()
    return per_rows


def row_differences(steps: int) -> tuple[float, float]:
    """The largest logit difference of one greedy row: alone against beside one other prompt;
    beside one other prompt against beside two or three others (low-level API)."""
    import numpy as np

    from remora.models.local.binding import import_llama_cpp, model_params_set
    from remora.models.local.resolve import resolve_model

    llama_cpp = import_llama_cpp()
    with model_params_set(llama_cpp, extra_buffers=False):
        base = llama_cpp.Llama(
            str(resolve_model().path), n_ctx=256, n_threads=2, n_threads_batch=2, verbose=False
        )
    vocab = base.n_vocab()

    def context() -> Any:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = 2048, CHUNK, CHUNK
        params.n_threads = params.n_threads_batch = 2
        params.swa_full, params.n_seq_max, params.kv_unified = True, 4, True
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        return llama_cpp.llama_init_from_model(base.model, params)

    def decode(ctx: Any, rows: list[tuple[int, list[int], int]]) -> list[Any]:
        """One llama_decode of (sequence, tokens, first position) rows: the last logits of each."""
        count = sum(len(tokens) for _, tokens, _ in rows)
        batch = llama_cpp.llama_batch_init(count, 0, 1)
        index, outputs = 0, []
        for sequence, tokens, start in rows:
            for offset, token in enumerate(tokens):
                batch.token[index], batch.pos[index] = token, start + offset
                batch.n_seq_id[index], batch.seq_id[index][0] = 1, sequence
                batch.logits[index] = offset == len(tokens) - 1
                if batch.logits[index]:
                    outputs.append(index)
                index += 1
        batch.n_tokens = count
        try:
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise SystemExit("llama_decode failed")
            return [
                np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, i), shape=(vocab,)).copy()
                for i in outputs
            ]
        finally:
            llama_cpp.llama_batch_free(batch)

    def greedy(prompts: list[list[int]]) -> list[Any]:
        """The first prompt's logits at each step, all prompts decoded together."""
        ctx = context()
        tokens = []
        for sequence, prompt in enumerate(prompts):
            for start in range(0, len(prompt), CHUNK):
                logits = decode(ctx, [(sequence, prompt[start : start + CHUNK], start)])[0]
            tokens.append(int(np.argmax(logits)))
        positions, seen = [len(prompt) for prompt in prompts], []
        for _ in range(steps):
            rows = decode(ctx, [(s, [tokens[s]], positions[s]) for s in range(len(prompts))])
            seen.append(rows[0])
            tokens = [int(np.argmax(row)) for row in rows]
            positions = [p + 1 for p in positions]
        llama_cpp.llama_free(ctx)
        return seen

    source = SOURCE.read_text()
    texts = (source[:1500], source[3000:4200], source[6000:7000], source[8000:8600])
    prompts = [base.tokenize(text.encode(), add_bos=True) for text in texts]
    alone = greedy(prompts[:1])
    paired = greedy(prompts[:2])
    tripled = greedy([prompts[0], prompts[2], prompts[1]])
    quadrupled = greedy([prompts[0], prompts[3], prompts[2], prompts[1]])
    base.close()

    def largest(a: list[Any], b: list[Any]) -> float:
        return max(float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True))

    return largest(alone, paired), max(largest(paired, tripled), largest(paired, quadrupled))


if __name__ == "__main__":
    sys.exit(main())
