"""The embedded engine: a GGUF model run in-process on the CPU with llama-cpp-python.

`LocalChatModel` answers the same calls as `OpenAIChatModel` (`complete`, `list_models`,
`aclose`), so the runner cannot tell it from a server:

* **Prompt.** The conversation is rendered with `remora.protocol.functiongemma.render_prompt`, the
  same bytes the server kit's chat template produces, and tokenized with control tokens parsed
  (`<bos>`, `<start_of_turn>`; FunctionGemma's `<start_function_call>` family too when the
  GGUF has them as tokens, else they are plain text, which is the case for the Gemma 3 base
  model).
* **Constrained decoding.** Every reply is generated under the protocol module's GBNF grammar
  (`gbnf_grammar`), so it is a well-formed call to one of the offered tools, with arguments of
  the declared types: `"auto"` and `"required"` both mean "one or more calls" (the runner needs
  a call every turn; a reply without one only costs a repair round), a named tool choice means
  exactly one call to that tool, and when only `submit_result` is offered only it can come out.
  The grammar is checked lazily: the model's own choice is tried first and the grammar is
  applied to the whole vocabulary (262k tokens for Gemma, about 0.1 s a token on two cores)
  only when that choice is refused. For greedy decoding this picks exactly the token a
  grammar-first sampler would.
* **Output.** Parsed with `parse_output`. A call cut off by `max_tokens` after complete calls is
  dropped (the reply keeps the complete ones); a call that repeats an earlier call of the same
  reply ends the reply there (small models loop; the runner would refuse the repeat anyway).
* **Reproducible.** Temperature 0 is greedy; above it, sampling uses a generator seeded from
  `seed`, so the same request gives the same reply.
* **Concurrency.** llama.cpp calls block and a context is not thread-safe: generations run in
  worker threads (`anyio.to_thread.run_sync`) under a `CapacityLimiter` of `slots`, each slot a
  model instance of its own (weights are memory-mapped, so the pages are shared). The
  orchestrator's 64 jobs queue there instead of thrashing the CPU, the conversation furthest
  along first (`_TurnOrder`), so started jobs finish. A cancelled job (Ctrl-C,
  `runner.job_timeout`) stops its generation at the next token.
* **Prefix reuse.** A context keeps the KV cache of its last prompt: a request that shares a
  prefix with it (the agent's system prompt, tool declarations and examples, the earlier turns
  of a job, the code a tool asks to continue) evaluates only the rest. Each slot has a chat
  context and two smaller text contexts (`_Contexts`), so completions do not evict the agent's
  chat prefix, and a request takes the idle context that holds most of its prompt.

llama-cpp-python is an optional dependency (`pip install 'remora[local]'`); this module imports
it only when a model is loaded, so Remora works without it.
"""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import importlib
import importlib.util
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.from_thread
import anyio.to_thread

from remora.config import DEFAULT_N_CTX
from remora.protocol.completion import Completion, CompletionRequest
from remora.protocol.functiongemma import (
    END_FUNCTION_CALL,
    END_OF_TURN,
    STOP_SEQUENCES,
    ParsedOutput,
    gbnf_grammar,
    parse_output,
    render_prompt,
)
from remora.protocol.messages import ChatRequest, ModelError, ModelReply, ToolCall, ToolChoice
from remora.results import Usage

if TYPE_CHECKING:
    import numpy as np
else:

    class _Lazy:
        """numpy on first use: it comes with llama-cpp-python (the `local` extra), and Remora
        imports this module without it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(importlib.import_module("numpy"), name)

    np = _Lazy()

__all__ = [
    "INSTALL_HINT",
    "EngineStats",
    "LocalChatModel",
    "cpu_count",
    "llama_cpp_available",
]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'remora[local]'"
_TOP_CANDIDATES = 256
"""Grammar-checked before the whole vocabulary when the model's first choice is refused."""
_SAMPLING_TOP_K = 40
_EVAL_CHUNK = 64
"""Prompts are evaluated in chunks starting at multiples of this (see `_Slot._prime`)."""
_STOPS = tuple(marker.encode() for marker in STOP_SEQUENCES)
_END_CALL = END_FUNCTION_CALL.encode()
_END_OF_TURN = END_OF_TURN.encode()
_TOKEN_DATA_FIELDS = [("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]
"""The layout of llama.cpp's `llama_token_data` (checked against ctypes when loading)."""


def cpu_count() -> int:
    """CPUs this process may run on (container and `taskset` limits included)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def llama_cpp_available() -> bool:
    """Whether the optional dependency is installed, without importing it (importing it starts
    the OpenMP runtime, which must see the settings `_llama_cpp` makes first)."""
    return importlib.util.find_spec("llama_cpp") is not None


_import_lock = threading.Lock()
_log_callback: Any = None


def _llama_cpp() -> Any:
    """The `llama_cpp` module (untyped: it ships no stubs), imported once, quietly.

    Before the import, OpenMP is told to put idle threads to sleep instead of spinning
    (`OMP_WAIT_POLICY=PASSIVE`, unless the user set it): during a run, ruff, the sandbox workers
    and other jobs compete for the same cores, and spinning threads then starve each other. On
    two busy cores, generation measured 2 tokens/s with spinning threads and 12-15 with sleeping
    ones. llama.cpp's own log lines go to the `remora.models.local` logger instead of stderr.
    """
    global _log_callback
    with _import_lock:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            # Imported by name: the package has no type stubs, and through import_module it
            # is one `Any` at this boundary instead of ignores wherever it is used.
            llama_cpp: Any = importlib.import_module("llama_cpp")
        except ImportError as exc:
            raise ModelError(
                f"the embedded engine needs llama-cpp-python: {INSTALL_HINT} ({exc})"
            ) from exc
        if _log_callback is None:
            # Keep a reference: the C side holds only the function pointer.
            _log_callback = llama_cpp.llama_log_callback(_forward_log)
            llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
        return llama_cpp


_GGML_LOG_WARN, _GGML_LOG_ERROR = 3, 4
"""ggml's `ggml_log_level` (NONE, DEBUG, INFO, WARN, ERROR, CONT = 0..5). llama-cpp-python's own
callback still uses an older numbering and prints warnings as errors, on stderr."""


def _forward_log(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    """llama.cpp's log lines to Python logging, never straight to stdout or stderr: warnings
    become INFO (they are notes like "using full-size SWA cache", not the user's concern)."""
    message = text.decode("utf-8", errors="replace").rstrip()
    if message:
        if level == _GGML_LOG_ERROR:
            log.error("%s", message)
        else:
            log.log(logging.INFO if level == _GGML_LOG_WARN else logging.DEBUG, "%s", message)


@dataclass
class EngineStats:
    """Totals over every generation, for benchmarks and `--events`-style reporting."""

    generations: int = 0
    prompt_tokens: int = 0
    """Tokens of all prompts, reused or not."""
    prompt_tokens_evaluated: int = 0
    """Prompt tokens actually run through the model (the rest came from a slot's KV cache)."""
    prompt_seconds: float = 0.0
    completion_tokens: int = 0
    completion_seconds: float = 0.0
    grammar_full_checks: int = 0
    """Tokens for which the grammar had to be applied to the whole vocabulary."""

    def add(self, other: EngineStats) -> None:
        for name, value in vars(other).items():
            setattr(self, name, getattr(self, name) + value)


@dataclass
class _Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish: str
    """"stop" (end of the grammar or a stop sequence), "length" (max_tokens) or "repeat"."""
    stats: EngineStats = field(default_factory=EngineStats)


_Use = Literal["chat", "text"]
_USES: tuple[_Use, ...] = ("chat", "text")
_TEXT_CONTEXTS_PER_SLOT = 2
"""As many as jobs in flight (`recommended_concurrency`): two jobs whose completions take turns
each find their own code still in a context. A chat context per slot is enough: after the
observations most jobs make one chat request, which reuses the agent's shared prefix."""
TEXT_N_CTX = 2048
"""Tokens of context for text completions (code and a few sentences); a longer prompt is
continued in a chat context. A context costs about 200 MB at 8192 tokens, 90 MB at 2048."""


class _Slot:
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
        self._token_data = np.dtype(_TOKEN_DATA_FIELDS, align=True)
        self._prompt_positions = 0
        """Cache positions filled by prompt evaluation (reusable), not by generation."""
        self.used = 0
        """When this context was last taken (a count of takes), for least-recently-used."""
        self.use: _Use = "chat"

    def close(self) -> None:
        self.llm.close()

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
    ) -> _Generation:
        stats = EngineStats(generations=1, prompt_tokens=len(prompt))
        started = time.perf_counter()
        stats.prompt_tokens_evaluated = self._prime(prompt, check_cancelled)
        stats.prompt_seconds = time.perf_counter() - started
        rng = np.random.default_rng(seed)
        out = bytearray()
        completion = 0
        finish = "length"
        started = time.perf_counter()
        with self._grammar(grammar_text) as grammar:
            while completion < max_tokens:
                check_cancelled()
                token = self._choose(grammar, temperature, rng, stats)
                if token is None or self.llama.llama_vocab_is_eog(self.vocab, token):
                    finish = "stop"
                    break
                completion += 1
                if grammar is not None:
                    self.llama.llama_sampler_accept(grammar, token)
                out += self._piece(token)
                cut = _stop_at(out, constrained=grammar is not None, extra=stops)
                if cut is not None:
                    del out[cut[0] :]
                    finish = cut[1]
                    break
                if completion < max_tokens:
                    self.llm.eval([token])
        stats.completion_tokens = completion
        stats.completion_seconds = time.perf_counter() - started
        text = out.decode("utf-8", errors="replace")
        return _Generation(text, len(prompt), completion, finish, stats)

    def reusable(self, prompt: list[int]) -> int:
        """How many leading prompt tokens this context already holds from an earlier prompt."""
        llm = self.llm
        held = np.asarray(llm.input_ids[: min(llm.n_tokens, self._prompt_positions)])
        size = max(0, min(len(held), len(prompt) - 1))
        differ = np.flatnonzero(held[:size] != np.asarray(prompt[:size], dtype=held.dtype))
        return int(differ[0]) if differ.size else size

    def _prime(self, prompt: list[int], check_cancelled: Callable[[], None] = lambda: None) -> int:
        """Bring the context to `prompt`, reusing what it already holds; return the number of
        prompt tokens evaluated.

        Reuse must not change the numbers, or the same request could get another reply after
        a different one: llama.cpp computes a batch of fewer than 8 tokens along another path
        than a larger one (logits differ by up to 1.0 here), so a prompt whose last token alone
        were evaluated again would see other logits than the same prompt evaluated whole. So
        the prompt is always evaluated in chunks aligned to multiples of `_EVAL_CHUNK`, and
        only whole chunks of an earlier prompt (not generated tokens) are reused: every token's
        cache entry is computed by the same batch whatever ran before. At least the chunk with
        the last prompt token is evaluated again: its logits are what the first sample needs.
        """
        llm = self.llm
        keep = self.reusable(prompt) // _EVAL_CHUNK * _EVAL_CHUNK
        memory = self.llama.llama_get_memory(llm.ctx)
        if keep > 0 and self.llama.llama_memory_seq_rm(memory, 0, keep, -1):
            llm.n_tokens = keep
        else:  # nothing shared, or a cache that cannot drop a suffix: start over
            llm.reset()
            self.llama.llama_memory_clear(memory, True)
            keep = 0
        self._prompt_positions = keep
        for start in range(keep, len(prompt), _EVAL_CHUNK):
            check_cancelled()  # a long prompt takes seconds: a cancelled job need not wait
            llm.eval(prompt[start : start + _EVAL_CHUNK])
            self._prompt_positions = min(start + _EVAL_CHUNK, len(prompt))
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

    def _logits(self) -> np.ndarray[Any, np.dtype[np.float32]]:
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

    def _choose(
        self,
        grammar: Any,
        temperature: float,
        rng: np.random.Generator,
        stats: EngineStats,
    ) -> int | None:
        """The next token, or None to end the reply.

        The model's own choice comes first: the most likely token at temperature 0, else one
        sampled from the top 40 by the seeded generator. When the grammar refuses it and the
        reply is already complete (the grammar admits the end of text), the reply ends: the model
        wanted to go on with something other than another call, and forcing one makes a small
        model loop until max_tokens. Otherwise the choice is made again among the tokens the
        grammar admits: the top 256 first, the whole vocabulary only when none of them fits.
        Resampling after a refusal gives the same distribution as sampling among the admitted
        tokens in the first place.
        """
        logits = self._logits()
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

    def _piece(self, token: int) -> bytes:
        piece = self._token_bytes.get(token)
        if piece is None:
            # special=True: FunctionGemma's control tokens must come out as their text.
            piece = bytes(self.llm.detokenize([token], special=True))
            self._token_bytes[token] = piece
        return piece


def _stop_at(
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


class _Contexts:
    """The idle contexts, by use. Chat prompts and text completions keep separate KV caches, so
    a job's completions do not evict the agent's shared chat prefix (system prompt, tool
    declarations, examples), and a request gets the idle context holding the longest prefix
    of its prompt: jobs taking turns do not evict each other's conversation or code."""

    def __init__(self) -> None:
        self._idle: dict[_Use, list[_Slot]] = {use: [] for use in _USES}
        self._count = 0
        self._uses = 0
        self._changed = threading.Condition()

    def add(self, use: _Use, slot: _Slot) -> None:
        slot.use = use
        with self._changed:
            self._idle[use].append(slot)
            self._count += 1

    def take(self, use: _Use, prompt_text: str, max_tokens: int) -> tuple[_Slot, list[int]]:
        with self._changed:
            idle = self._idle[use]
            if not idle:
                raise ModelError("the local model was closed")
            prompt = idle[0].tokenize(prompt_text)
            if use == "text" and len(prompt) + max_tokens > idle[0].n_ctx:
                idle = self._idle["chat"]  # one per slot, so one is idle as well
            # The most whole chunks reused; without any, the context used least recently (so
            # another job's conversation stays).
            best = max(idle, key=lambda slot: (slot.reusable(prompt) // _EVAL_CHUNK, -slot.used))
            idle.remove(best)
            self._uses += 1
            best.used = self._uses
            return best, prompt

    def give_back(self, slot: _Slot) -> None:
        with self._changed:
            self._idle[slot.use].append(slot)
            self._changed.notify_all()

    def take_all(self) -> list[_Slot]:
        """Every context, once the generations in flight have given theirs back."""
        with self._changed:
            self._changed.wait_for(lambda: sum(map(len, self._idle.values())) == self._count)
            slots = [slot for idle in self._idle.values() for slot in idle]
            for idle in self._idle.values():
                idle.clear()
            self._count = 0
            return slots


@dataclass(order=True)
class _Waiting:
    rank: tuple[int, int]
    """(-turns already taken, arrival): the sort order."""
    granted: anyio.Event = field(compare=False, default_factory=anyio.Event)
    cancelled: bool = field(compare=False, default=False)


class _TurnOrder:
    """Hands the slots to waiting requests, the conversation furthest along first (ties: first
    come, first served).

    With plain FIFO order, the orchestrator's 64 jobs would advance in lockstep: every job's
    first turn, then every job's second turn... so each job would take as long as the whole
    run (64 jobs x 4 turns x 2.5 s: more than the default `runner.job_timeout` of 300 s), and
    all of them would finish at the end. Serving later turns first finishes started jobs while
    new ones fill the gaps their tool calls leave. Used from the event loop thread only.
    """

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._waiting: list[_Waiting] = []
        self._arrivals = 0

    @contextlib.asynccontextmanager
    async def turn(self, depth: int) -> AsyncIterator[None]:
        self._arrivals += 1
        if self._free and not self._waiting:
            self._free -= 1
        else:
            waiting = _Waiting(rank=(-depth, self._arrivals))
            heapq.heappush(self._waiting, waiting)
            try:
                await waiting.granted.wait()
            except BaseException:  # cancelled while waiting, or just after being granted
                if waiting.granted.is_set():
                    self._release()
                else:
                    waiting.cancelled = True
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiting:
            waiting = heapq.heappop(self._waiting)
            if not waiting.cancelled:
                waiting.granted.set()
                return
        self._free += 1


class LocalChatModel:
    """A GGUF model in this process, behind the `ChatModel` interface.

    `model_path` is loaded on first use (`load()`, `list_models()` or `complete()`), once per
    slot. `name` is what `list_models()` reports; `complete()` ignores its `model` argument
    (there is one model). `identity` tells cached results of different weights apart.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        name: str | None = None,
        identity: str | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        slots: int = 1,
        seed: int = 0,
        extra_buffers: bool = False,
    ) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        if n_ctx < 256:
            raise ValueError("n_ctx must be at least 256")
        self.path = Path(model_path)
        self.name = name or self.path.stem
        self.identity = identity or f"{self.name}:{_file_identity(self.path)}"
        self.n_ctx = n_ctx
        self.slots = slots
        self.n_threads = n_threads or max(1, cpu_count() // slots)
        self.seed = seed
        self.extra_buffers = extra_buffers
        self.load_seconds: float | None = None
        """Seconds the last load took (all slots), None before loading."""
        self.stats = EngineStats()
        self._contexts = _Contexts()
        self._limiter = anyio.CapacityLimiter(slots)
        """Bounds the worker threads: one per slot."""
        self._order = _TurnOrder(slots)
        """Decides which waiting request gets a slot next."""
        self._load_lock = threading.Lock()
        self._stats_lock = threading.Lock()

    @property
    def recommended_concurrency(self) -> int:
        """Jobs worth running at once against this engine: two per slot, one generating while
        the other runs its tools. Measured on examples/demo, 2 and 64 jobs in flight keep the
        engine equally busy, but with 64 every job waits for the others' turns: a job then
        takes about as long as the whole run, and `runner.job_timeout` starts counting while
        the job waits."""
        return 2 * self.slots

    # -- lifecycle ----------------------------------------------------------------------------

    def load_sync(self) -> float:
        """Load the model into every slot (blocking; idempotent); return the seconds it took."""
        with self._load_lock:
            if self.load_seconds is not None:
                return self.load_seconds
            llama = _llama_cpp()
            _check_token_data_layout(llama)
            started = time.perf_counter()
            try:
                for _ in range(self.slots):
                    self._contexts.add("chat", _Slot(llama, self._new_llama(llama, self.n_ctx)))
                    for _ in range(_TEXT_CONTEXTS_PER_SLOT):
                        text = self._new_llama(llama, min(self.n_ctx, TEXT_N_CTX))
                        self._contexts.add("text", _Slot(llama, text))
            except BaseException:
                self._close_slots()
                raise
            self.load_seconds = time.perf_counter() - started
            log.info("loaded %s in %.2fs (%d slots)", self.path, self.load_seconds, self.slots)
            return self.load_seconds

    async def load(self) -> float:
        """`load_sync` in a worker thread."""
        if self.load_seconds is not None:
            return self.load_seconds
        return await anyio.to_thread.run_sync(self.load_sync)

    def _new_llama(self, llama: Any, n_ctx: int) -> Any:
        if not self.path.is_file():
            raise ModelError(f"model file not found: {self.path}")
        kwargs = {
            "n_ctx": n_ctx,
            # Prompts are evaluated in chunks of _EVAL_CHUNK: a larger batch would only reserve
            # logits for tokens never asked for (512 x 262k vocab x 4 B = 512 MB of address space).
            "n_batch": _EVAL_CHUNK,
            "n_ubatch": _EVAL_CHUNK,
            "n_threads": self.n_threads,
            "n_threads_batch": self.n_threads,
            "seed": self.seed or 1,  # 0 means "random" to llama.cpp; sampling is ours anyway
            # A full-size sliding-window cache can drop any suffix, which prefix reuse needs.
            "swa_full": True,
            "verbose": False,
        }
        try:
            with _model_params(llama, extra_buffers=self.extra_buffers):
                return llama.Llama(str(self.path), **kwargs)
        except ValueError as exc:  # llama-cpp-python's "Failed to load model from file"
            raise ModelError(f"cannot load {self.path}: {exc}") from exc

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self.close)

    def close(self) -> None:
        """Free the model (blocking: generations in flight finish first). A later request loads
        it again."""
        with self._load_lock:
            self._close_slots()
            self.load_seconds = None

    def _close_slots(self) -> None:
        for slot in self._contexts.take_all():
            slot.close()

    # -- ChatModel ----------------------------------------------------------------------------

    async def list_models(self) -> list[str]:
        """Loads the model (so a bad file fails here, before any job) and names it."""
        await self.load()
        return [self.name]

    async def complete(self, request: ChatRequest) -> ModelReply:
        """`request.model` is ignored (there is one model). So is `request.grammar`: the engine
        always decodes under its own grammar (`grammar_for`), which also honours a named tool
        choice and `request.parallel_calls`."""
        messages = request.messages
        constraint = self.grammar_for(
            request.tools, request.tool_choice, parallel=request.parallel_calls
        )
        prompt = render_prompt(messages, request.tools)
        await self.load()
        depth = sum(1 for message in messages if message.get("role") == "assistant")
        async with self._order.turn(depth):
            generation = await anyio.to_thread.run_sync(
                partial(
                    self._generate_in_thread,
                    "chat",
                    prompt,
                    constraint,
                    max_tokens=request.max_tokens,
                    temperature=request.temperature,
                ),
                limiter=self._limiter,
            )
        return _reply(generation, first_id=_calls_so_far(messages))

    async def complete_text(self, *, model: str, request: CompletionRequest) -> Completion:
        """A raw continuation of `request.prompt` (no chat template, no grammar). `model` is
        ignored, as in `complete`."""
        del model
        await self.load()
        async with self._order.turn(0):
            generation = await anyio.to_thread.run_sync(
                partial(
                    self._generate_in_thread,
                    "text",
                    "<bos>" + request.prompt,
                    None,
                    max_tokens=request.max_tokens,
                    temperature=request.temperature,
                    stops=[stop.encode("utf-8") for stop in request.stop if stop],
                ),
                limiter=self._limiter,
            )
        return Completion(
            text=generation.text,
            finish="length" if generation.finish == "length" else "stop",
            usage=Usage(
                prompt_tokens=generation.prompt_tokens,
                completion_tokens=generation.completion_tokens,
            ),
        )

    def grammar_for(
        self, tools: Sequence[Mapping[str, Any]], tool_choice: ToolChoice, *, parallel: bool
    ) -> str | None:
        """The GBNF grammar a request is decoded under (None: no tools, free text)."""
        if not tools:
            return None
        if isinstance(tool_choice, Mapping):
            function = tool_choice.get("function")
            wanted = function.get("name") if isinstance(function, Mapping) else None
            chosen = [tool for tool in tools if _tool_name(tool) == wanted]
            if not chosen:
                offered = ", ".join(str(_tool_name(tool)) for tool in tools)
                raise ModelError(f"tool_choice names {wanted!r}, which is not offered ({offered})")
            return gbnf_grammar(chosen, tool_choice="forced")
        # "auto" is decoded as "required": the runner needs a call every turn.
        return gbnf_grammar(tools, tool_choice="required", parallel=parallel)

    def _generate_in_thread(
        self,
        use: _Use,
        prompt_text: str,
        grammar: str | None,
        *,
        max_tokens: int,
        temperature: float,
        stops: Sequence[bytes] = (),
    ) -> _Generation:
        # The limiter lets in no more threads than there are slots, so a context is idle unless
        # the model was closed while this request waited.
        slot, prompt = self._contexts.take(use, prompt_text, max_tokens)
        try:
            room = slot.n_ctx - len(prompt)
            if room < 1:
                raise ModelError(
                    f"the prompt has {len(prompt)} tokens, more than the context of "
                    f"{slot.n_ctx} (raise local.n_ctx, up to the model's training context)"
                )
            generation = slot.generate(
                prompt,
                grammar,
                max_tokens=min(max_tokens, room),
                temperature=temperature,
                seed=self.seed,
                check_cancelled=anyio.from_thread.check_cancelled,
                stops=stops,
            )
        finally:
            self._contexts.give_back(slot)
        with self._stats_lock:
            self.stats.add(generation.stats)
        return generation


def _reply(generation: _Generation, first_id: int) -> ModelReply:
    parsed: ParsedOutput = parse_output(generation.text)
    calls = [
        ToolCall(id=f"call_{first_id + index}", name=call.name, arguments=call.arguments_json())
        for index, call in enumerate(parsed.calls)
    ]
    content = parsed.content
    if calls and parsed.errors:
        # A call cut off by max_tokens after complete ones: the cut is ours, not the model's,
        # and its text would only confuse the next turn.
        content = generation.text[: parsed.calls[0].start]
    content = content.strip()
    return ModelReply(
        content=content or None,
        tool_calls=calls,
        usage=Usage(
            prompt_tokens=generation.prompt_tokens,
            completion_tokens=generation.completion_tokens,
        ),
    )


def _calls_so_far(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tool calls already in the conversation: new ids continue from there, so ids are unique
    within a conversation and the same for the same conversation (no global counter)."""
    return sum(
        len(message.get("tool_calls") or ())
        for message in messages
        if message.get("role") == "assistant"
    )


def _tool_name(tool: Mapping[str, Any]) -> object:
    function = tool.get("function")
    return function.get("name") if isinstance(function, Mapping) else tool.get("name")


def _file_identity(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return "missing"
    return f"{stat.st_size}-{stat.st_mtime_ns}"


def _check_token_data_layout(llama: Any) -> None:
    if ctypes.sizeof(llama.llama_token_data) != np.dtype(_TOKEN_DATA_FIELDS, align=True).itemsize:
        raise ModelError(
            "this llama-cpp-python has a llama_token_data layout Remora does not know; "
            "install llama-cpp-python>=0.3.36"
        )


@contextlib.contextmanager
def _model_params(llama: Any, *, extra_buffers: bool) -> Iterator[None]:
    """Load with llama.cpp's extra CPU buffer types (AMX, weight repacking) on or off.

    `Llama()` does not expose `use_extra_bufts`, and with it on (llama.cpp's default) the first
    decode crashed the process (SIGSEGV) on the Sapphire Rapids VM we test on. Off costs
    nothing measurable for a 270M model. The defaults function is swapped only while loading,
    under the import lock, so no other load sees the change.
    """
    low_level = llama.llama_cpp
    original = low_level.llama_model_default_params

    def params() -> Any:
        value = original()
        value.use_extra_bufts = extra_buffers
        return value

    with _import_lock:
        low_level.llama_model_default_params = params
        try:
            yield
        finally:
            low_level.llama_model_default_params = original
