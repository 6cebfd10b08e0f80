"""One llama.cpp context decoding: prompts evaluated in aligned chunks with prefix reuse, the
model's own token tried before the grammar is applied to the whole vocabulary, seeded sampling,
and the stops a reply ends at."""

from __future__ import annotations

import contextlib
import ctypes
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from remora.models.local.binding import TOKEN_DATA_FIELDS
from remora.models.local.stopping import stop_at
from remora.models.local.usage import EngineStats
from remora.protocol.messages import ModelError

if TYPE_CHECKING:
    import numpy as np
else:  # numpy on first use: it comes with the `local` extra
    from remora.models.local.binding import np

_TOP_CANDIDATES = 256
"""Grammar-checked before the whole vocabulary when the model's first choice is refused."""


_SAMPLING_TOP_K = 40

EVAL_CHUNK = 64
"""Prompts are evaluated in chunks starting at multiples of this (see `Slot._prime`)."""
EVAL_BATCH = 4 * EVAL_CHUNK
"""Whole chunks evaluated in one llama.cpp batch: 465 prompt tokens/s against 351 for one chunk
at a time (2 cores), for 13 MB more of compute buffers over three contexts."""


@dataclass
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish: str
    """"stop" (end of the grammar or a stop sequence), "length" (max_tokens) or "repeat"."""
    stats: EngineStats = field(default_factory=EngineStats)
    logprobs: list[tuple[str, float]] | None = None
    """Each token's text and log-probability before the grammar, when asked for."""


Use = Literal["chat", "text"]


class Slot:
    """One llama.cpp model instance with its context. Used by one thread at a time."""

    def __init__(self, llama: Any, llm: Any) -> None:
        self.llama = llama
        self.llm = llm
        self.vocab = llama.llama_model_get_vocab(llm.model)
        self.n_vocab = int(llm.n_vocab())
        self.n_ctx = int(llm.n_ctx())
        self.eos = int(llm.token_eos())
        self._token_bytes: dict[int, bytes] = {}
        self._all_ids = np.arange(self.n_vocab, dtype=np.int32)
        self._token_data = np.dtype(TOKEN_DATA_FIELDS, align=True)
        self._prompt_positions = 0
        """Cache positions filled by prompt evaluation (reusable), not by generation."""
        self.used = 0
        """When this context was last taken (a count of takes), for least-recently-used."""
        self.use: Use = "chat"
        self.adapter: str | None = None
        """The LoRA adapter applied now, under which the held KV cache was computed."""
        self._adapters: dict[str, Any] = {}
        """Adapters loaded for this instance's model, by name."""
        self._last_prompt: list[int] = []
        self._last_logits: np.ndarray[Any, np.dtype[np.float32]] | None = None
        """The last evaluated prompt and the logits after its last token (a copy: 1 MB)."""
        self._replay: np.ndarray[Any, np.dtype[np.float32]] | None = None
        """Those logits, while they stand for the llama.cpp buffer (the first token)."""

    def close(self) -> None:
        for pointer in self._adapters.values():
            self.llama.llama_adapter_lora_free(pointer)
        self._adapters.clear()
        self.llm.close()

    def load_adapter(self, name: str, path: Path) -> None:
        """Load a GGUF LoRA adapter for this model (applied per request by `generate`)."""
        if name in self._adapters:
            return
        pointer = self.llama.llama_adapter_lora_init(self.llm.model, str(path).encode())
        if not pointer:  # llama.cpp logged why (another base model, a broken file)
            raise ModelError(f"llama.cpp cannot load the adapter {path} on this model")
        self._adapters[name] = pointer

    def apply_adapter(self, adapter: str | None) -> None:
        """Switch adapters; what the context holds was computed under the old one, so none of
        it is reused."""
        if adapter == self.adapter:
            return
        if adapter is None:
            failed = self.llama.llama_set_adapters_lora(self.llm.ctx, None, 0, None)
        else:
            pointers = (self.llama.llama_adapter_lora_p_ctypes * 1)(self._adapters[adapter])
            scales = (ctypes.c_float * 1)(1.0)
            failed = self.llama.llama_set_adapters_lora(self.llm.ctx, pointers, 1, scales)
        if failed:
            raise ModelError(f"llama.cpp could not apply the adapter {adapter}")
        self.adapter = adapter
        self._prompt_positions = 0
        self._last_logits = None

    def tokenize(self, text: str) -> list[int]:
        # The rendered prompt carries its own <bos>; control tokens are parsed, as a server
        # parses the output of its chat template.
        tokens: list[int] = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        return tokens

    def generate(
        self,
        prompt: list[int],
        grammar_text: str | None,
        *,
        max_tokens: int,
        temperature: float,
        seed: int,
        check_cancelled: Callable[[], None],
        stops: Sequence[bytes] = (),
        logprobs: bool = False,
        on_text: Callable[[str], None] | None = None,
        adapter: str | None = None,
    ) -> Generation:
        """`on_text` is called with the reply so far after every token (a streamed reply);
        `adapter` names a loaded LoRA adapter to generate with (None: the base model)."""
        self.apply_adapter(adapter)
        stats = EngineStats(generations=1, prompt_tokens=len(prompt))
        self.start(prompt, check_cancelled, stats)
        rng = np.random.default_rng(seed)
        out = bytearray()
        completion = 0
        finish = "length"
        scored: list[tuple[str, float]] | None = [] if logprobs else None
        started = time.perf_counter()
        with self._grammar(grammar_text) as grammar:
            while completion < max_tokens:
                check_cancelled()
                token = self.choose(grammar, temperature, rng, stats)
                if token is None or self.llama.llama_vocab_is_eog(self.vocab, token):
                    finish = "stop"
                    break
                completion += 1
                if grammar is not None:
                    self.llama.llama_sampler_accept(grammar, token)
                piece = self.piece(token)
                if scored is not None:
                    scored.append((piece.decode("utf-8", "replace"), self._logprob(token)))
                out += piece
                cut = stop_at(out, constrained=grammar is not None, extra=stops)
                if cut is not None:
                    del out[cut[0] :]
                    finish = cut[1]
                    break
                if on_text is not None:
                    on_text(out.decode("utf-8", errors="replace"))
                self._replay = None
                if completion < max_tokens:
                    self.llm.eval([token])
        self._replay = None
        stats.completion_tokens = completion
        stats.completion_seconds = time.perf_counter() - started
        text = out.decode("utf-8", errors="replace")
        return Generation(text, len(prompt), completion, finish, stats, scored)

    def start(
        self, prompt: list[int], check_cancelled: Callable[[], None], stats: EngineStats
    ) -> None:
        """Bring the context to `prompt` (sequence 0), its last logits ready for the first token."""
        started = time.perf_counter()
        if self._holds_whole(prompt):
            # The same prompt as a request before (a sentence's sampled drafts asked after its
            # greedy one): its cache entries and last logits are what evaluating it again
            # would compute.
            memory = self.llama.llama_get_memory(self.llm.ctx)
            self.llama.llama_memory_seq_rm(memory, 0, len(prompt), -1)
            self.llm.n_tokens = len(prompt)
            self._replay = self._last_logits
        else:
            stats.prompt_tokens_evaluated += self._prime(prompt, check_cancelled)
            self._last_prompt, self._last_logits = list(prompt), self.logits().copy()
        stats.prompt_seconds += time.perf_counter() - started

    def keep_prompt(self, length: int, sequences: int) -> None:
        """After drafts decoded in `sequences` sequences: the context holds the prompt's
        `length` tokens in sequence 0 alone, as after a prompt evaluation."""
        memory = self.llama.llama_get_memory(self.llm.ctx)
        for sequence in range(1, sequences):
            self.llama.llama_memory_seq_rm(memory, sequence, -1, -1)
        self.llama.llama_memory_seq_rm(memory, 0, length, -1)
        self.llm.n_tokens = length
        self._replay = None

    def _logprob(self, token: int) -> float:
        """`token`'s log-probability under the model's own distribution (before the grammar):
        what vLLM reports by default, so confidence means the same on both engines."""
        logits = self.logits()  # float32 throughout: 0.6 ms a token (float64: 4 ms)
        peak = float(logits.max())
        total = float(np.exp(logits - peak).sum(dtype=np.float64))
        return min(float(logits[token]) - peak - float(np.log(total)), 0.0)

    def reusable(self, prompt: list[int], adapter: str | None = None) -> int:
        """How many leading prompt tokens this context already holds from an earlier prompt
        (none when that was computed under another adapter)."""
        if adapter != self.adapter:
            return 0
        llm = self.llm
        held = np.asarray(llm.input_ids[: min(llm.n_tokens, self._prompt_positions)])
        size = max(0, min(len(held), len(prompt) - 1))
        differ = np.flatnonzero(held[:size] != np.asarray(prompt[:size], dtype=held.dtype))
        return int(differ[0]) if differ.size else size

    def held(self) -> int:
        """How many tokens of an earlier prompt this context holds (what a new prompt that
        shares none of them would overwrite, under whichever adapter they were computed)."""
        return min(int(self.llm.n_tokens), self._prompt_positions)

    def _prime(self, prompt: list[int], check_cancelled: Callable[[], None] = lambda: None) -> int:
        """Bring the context to `prompt`, reusing what it already holds; return the number of
        prompt tokens evaluated.

        Reuse must not change the numbers, or the same request could get another reply after
        a different one: llama.cpp computes a batch of fewer than 8 tokens along another path
        than a larger one (logits differ by up to 1.0 here), so a prompt whose last token alone
        were evaluated again would see other logits than the same prompt evaluated whole. So
        the prompt is always evaluated in chunks aligned to multiples of `EVAL_CHUNK`, and
        only whole chunks of an earlier prompt (not generated tokens) are reused: every token's
        cache entry is computed by the same batch whatever ran before. At least the chunk with
        the last prompt token is evaluated again: its logits are what the first sample needs.

        Whole chunks before that last one go to llama.cpp up to `EVAL_BATCH` at a time: a batch
        of several whole chunks computes every token exactly as the chunks one by one would
        (measured on the stand-in's Q4_K_M weights on an x86 CPU: largest difference 0, in the
        cache and in the logits after it; a test checks it with the packaged GGUF), where a
        batch that ends elsewhere does not. The last chunk is always a batch of its own.
        """
        llm = self.llm
        keep = self.reusable(prompt, self.adapter) // EVAL_CHUNK * EVAL_CHUNK
        memory = self.llama.llama_get_memory(llm.ctx)
        if keep > 0 and self.llama.llama_memory_seq_rm(memory, 0, keep, -1):
            llm.n_tokens = keep
        else:  # nothing shared, or a cache that cannot drop a suffix: start over
            llm.reset()
            self.llama.llama_memory_clear(memory, True)
            keep = 0
        self._prompt_positions = keep
        last = (len(prompt) - 1) // EVAL_CHUNK * EVAL_CHUNK
        starts = [*range(keep, last, EVAL_BATCH), last]
        for start, end in zip(starts, [*starts[1:], len(prompt)], strict=True):
            check_cancelled()  # a long prompt takes seconds: a cancelled job need not wait
            llm.eval(prompt[start:end])
            self._prompt_positions = end
        return len(prompt) - keep

    @contextlib.contextmanager
    def _grammar(self, grammar_text: str | None) -> Iterator[Any]:
        if grammar_text is None:
            yield None
            return
        sampler = self.llama.llama_sampler_init_grammar(
            self.vocab, grammar_text.encode("utf-8"), b"root"
        )
        if not sampler:  # llama.cpp logged why; a null sampler would crash the process
            raise ModelError("llama.cpp rejected the tool-call grammar (see the debug log)")
        try:
            yield sampler
        finally:
            self.llama.llama_sampler_free(sampler)

    def _holds_whole(self, prompt: list[int]) -> bool:
        """Whether the context holds all of `prompt` as evaluated by the last request that
        evaluated a prompt (same tokens, same adapter, not overwritten since)."""
        if self._last_logits is None or self._last_prompt != prompt or self.held() < len(prompt):
            return False
        held = np.asarray(self.llm.input_ids[: len(prompt)])
        return bool(np.array_equal(held, np.asarray(prompt, dtype=held.dtype)))

    def logits(self) -> np.ndarray[Any, np.dtype[np.float32]]:
        if self._replay is not None:
            return self._replay
        pointer = self.llama.llama_get_logits_ith(self.llm.ctx, -1)
        logits: np.ndarray[Any, np.dtype[np.float32]] = np.ctypeslib.as_array(
            pointer, shape=(self.n_vocab,)
        )
        return logits

    def _allowed(
        self, grammar: Any, ids: np.ndarray[Any, np.dtype[np.int32]]
    ) -> np.ndarray[Any, Any]:
        """Which of `ids` the grammar admits next (a mask)."""
        data = np.zeros(len(ids), dtype=self._token_data)
        data["id"] = ids
        array = self.llama.llama_token_data_array(
            data=data.ctypes.data_as(self.llama.llama_token_data_p),
            size=len(ids),
            selected=-1,
            sorted=False,
        )
        self.llama.llama_sampler_apply(grammar, ctypes.byref(array))
        mask: np.ndarray[Any, Any] = np.isfinite(data["logit"])
        return mask

    def choose(
        self,
        grammar: Any,
        temperature: float,
        rng: np.random.Generator,
        stats: EngineStats,
        logits: np.ndarray[Any, np.dtype[np.float32]] | None = None,
    ) -> int | None:
        """The next token, or None to end the reply.

        The model's own choice comes first: the most likely token at temperature 0, else one
        sampled from the top 40 by the seeded generator. When the grammar refuses it and the
        reply is already complete (the grammar admits the end of text), the reply ends: the model
        wanted to go on with something other than another call, and forcing one makes a small
        model loop until max_tokens. Otherwise the choice is made again among the tokens the
        grammar admits: the top 256 first, the whole vocabulary only when none of them fits.
        Resampling after a refusal gives the same distribution as sampling among the admitted
        tokens in the first place. `logits`: a row's of a batch (default: the last decoded).
        """
        logits = self.logits() if logits is None else logits
        top: np.ndarray[Any, np.dtype[np.int32]] | None = None
        if temperature <= 0:
            preferred = int(np.argmax(logits))
        else:
            top = self._top(logits)
            preferred = self._sample(logits, top[:_SAMPLING_TOP_K], temperature, rng)
        if grammar is None or self._allowed(grammar, np.array([preferred], np.int32))[0]:
            return preferred
        if self._allowed(grammar, np.array([self.eos], np.int32))[0]:
            return None
        top = self._top(logits) if top is None else top
        candidates = top[self._allowed(grammar, top)]
        if not len(candidates):
            stats.grammar_full_checks += 1
            allowed = self._all_ids[self._allowed(grammar, self._all_ids)]
            if not len(allowed):
                return None
            candidates = allowed[np.argsort(-logits[allowed], kind="stable")]
        if temperature <= 0:
            return int(candidates[0])
        return self._sample(logits, candidates[:_SAMPLING_TOP_K], temperature, rng)

    def _top(
        self, logits: np.ndarray[Any, np.dtype[np.float32]]
    ) -> np.ndarray[Any, np.dtype[np.int32]]:
        """The most likely tokens, best first."""
        top = np.argpartition(logits, -_TOP_CANDIDATES)[-_TOP_CANDIDATES:].astype(np.int32)
        ordered: np.ndarray[Any, np.dtype[np.int32]] = top[np.argsort(-logits[top], kind="stable")]
        return ordered

    @staticmethod
    def _sample(
        logits: np.ndarray[Any, np.dtype[np.float32]],
        candidates: np.ndarray[Any, np.dtype[np.int32]],
        temperature: float,
        rng: np.random.Generator,
    ) -> int:
        scaled = logits[candidates].astype(np.float64) / temperature
        weights = np.exp(scaled - scaled.max())
        return int(rng.choice(candidates, p=weights / weights.sum()))

    def piece(self, token: int) -> bytes:
        piece = self._token_bytes.get(token)
        if piece is None:
            # special=True: FunctionGemma's control tokens must come out as their text.
            piece = bytes(self.llm.detokenize([token], special=True))
            self._token_bytes[token] = piece
        return piece
