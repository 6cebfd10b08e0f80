"""Several sequences decoded in one batch on this CPU (issue "Real code at the machine's limit",
part 2): what a step costs with one row and with two, and whether the numbers stay the same.
Results: bench/results/batched_decode.json.

    python bench/batched_decode.py          # about 1 min on 2 cores
    python bench/batched_decode.py --quick  # fewer steps

With the packaged model (Gemma 3 270M, Q4_K_M) through llama-cpp-python's low-level API, two
prompts (parts of Remora's own source) are evaluated in 64-token chunks, as the engine does, then
greedy steps are decoded: each sequence alone (a batch of one row, the engine today), and both
together (a batch of two rows, one per sequence, in one context with a KV stream per sequence).
Measured: seconds per step, aggregate tokens/s, the largest logit difference between a row
decoded alone and the same row decoded beside another, and between the same row beside two
different partners. The engine's reproducibility promise (docs/LOCAL_ENGINE.md) needs the
second to be 0; replies identical to today's need the first to be 0.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from _common import Report, common_arguments

REPO = Path(__file__).resolve().parent.parent
CHUNK = 64


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser)
    args = parser.parse_args()
    import numpy as np

    from remora.models.local.binding import _llama_cpp, _model_params
    from remora.models.local.resolve import resolve_model

    llama_cpp = _llama_cpp()  # as the engine imports it: OMP_WAIT_POLICY, llama.cpp's log
    steps = 8 if args.quick else 40
    report = Report("batched_decode", args)
    with _model_params(llama_cpp, extra_buffers=False):
        base = llama_cpp.Llama(
            str(resolve_model().path), n_ctx=256, n_threads=2, n_threads_batch=2, verbose=False
        )
    vocab = base.n_vocab()

    def context(sequences: int) -> Any:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = 2048 * sequences, CHUNK, CHUNK
        params.n_threads = params.n_threads_batch = 2
        params.swa_full, params.n_seq_max, params.kv_unified = True, sequences, False
        return llama_cpp.llama_init_from_model(base.model, params)

    def decode(ctx: Any, rows: list[tuple[int, list[int], int]]) -> list[Any]:
        """One llama_decode of (sequence, tokens, first position) rows: the last logits of each."""
        count = sum(len(tokens) for _, tokens, _ in rows)
        batch = llama_cpp.llama_batch_init(count, 0, 2)
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

    def prime(ctx: Any, sequence: int, tokens: list[int]) -> Any:
        for start in range(0, len(tokens), CHUNK):
            logits = decode(ctx, [(sequence, tokens[start : start + CHUNK], start)])[0]
        return logits

    source = (REPO / "remora" / "models" / "local" / "decoder.py").read_text()
    texts = (source[:1500], source[3000:4200], source[6000:7000])
    prompts = [base.tokenize(text.encode(), add_bos=True) for text in texts]

    def alone(prompt: list[int]) -> tuple[list[Any], float]:
        ctx = context(1)
        token, position, seen = int(np.argmax(prime(ctx, 0, prompt))), len(prompt), []
        started = time.perf_counter()
        for _ in range(steps):
            logits = decode(ctx, [(0, [token], position)])[0]
            seen.append(logits)
            token, position = int(np.argmax(logits)), position + 1
        seconds = time.perf_counter() - started
        llama_cpp.llama_free(ctx)
        return seen, seconds

    def together(first: list[int], second: list[int]) -> tuple[list[Any], float]:
        ctx = context(2)
        tokens = [int(np.argmax(prime(ctx, s, p))) for s, p in enumerate((first, second))]
        positions, seen = [len(first), len(second)], []
        started = time.perf_counter()
        for _ in range(steps):
            rows = decode(ctx, [(s, [tokens[s]], positions[s]) for s in (0, 1)])
            seen.append(rows[0])
            tokens = [int(np.argmax(row)) for row in rows]
            positions = [p + 1 for p in positions]
        seconds = time.perf_counter() - started
        llama_cpp.llama_free(ctx)
        return seen, seconds

    single, single_s = alone(prompts[0])
    paired, paired_s = together(prompts[0], prompts[1])
    other, _ = together(prompts[0], prompts[2])
    alone_vs_paired = max(float(np.abs(a - b).max()) for a, b in zip(single, paired, strict=True))
    partner = max(float(np.abs(a - b).max()) for a, b in zip(paired, other, strict=True))
    report.data.update(
        steps=steps,
        one_row_s_per_step=round(single_s / steps, 4),
        two_rows_s_per_step=round(paired_s / steps, 4),
        step_cost_ratio=round(paired_s / single_s, 3),
        aggregate_ratio=round(2 * single_s / paired_s, 3),
        max_logit_difference_alone_vs_paired=alone_vs_paired,
        max_logit_difference_between_partners=partner,
    )
    report.verdict(
        "aggregate generation >= 1.5x one sequence at a time",
        2 * single_s / paired_s >= 1.5,
        f"{2 * steps / paired_s:.1f} tokens/s with two rows vs {steps / single_s:.1f} with one "
        f"({2 * single_s / paired_s:.2f}x); a two-row step costs {paired_s / single_s:.2f}x a "
        "one-row step",
    )
    report.verdict(
        "a row's logits do not depend on the other row (reproducible whatever runs beside it)",
        partner == 0.0,
        f"largest difference {partner:g}",
    )
    report.verdict(
        "a row decoded beside another gives the logits it gets alone (today's replies)",
        alone_vs_paired == 0.0,
        f"largest difference {alone_vs_paired:.3g}",
    )
    report.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
