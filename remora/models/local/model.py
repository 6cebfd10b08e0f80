"""The embedded engine: a GGUF model run in-process on the CPU with llama-cpp-python.

`LocalChatModel` answers the same calls as `OpenAIChatModel` (`complete`, `list_models`,
`aclose`), so the runner cannot tell it from a server (docs/LOCAL_ENGINE.md has the details):

* **Prompt.** Rendered by `remora.protocol.functiongemma.render_prompt` (the bytes the server
  kit's chat template produces) and tokenized with control tokens parsed.
* **Constrained decoding.** Every reply is generated under the protocol module's GBNF grammar,
  so it is a well-formed call to an offered tool: `"auto"` and `"required"` both mean "one or
  more calls", a named tool choice exactly one call to that tool. The model's own token is
  tried first; the grammar is applied to the whole vocabulary only when it refuses that token
  (for greedy decoding, exactly the token a grammar-first sampler picks).
* **Output.** Parsed with `parse_output`: a call cut off by `max_tokens` after complete ones is
  dropped; a call that repeats an earlier one of the reply ends it there.
* **Prompts longer than the context** are not evaluated: `PromptTooLong` (a `ModelError`), which
  the runner turns into a refusal of that request, not a failed job.
* **Reproducible.** Temperature 0 is greedy; above it, sampling is seeded from `seed`: the same
  request gives the same reply, whatever ran before. A drafts request (`complete_drafts`) is
  decoded as one batch of a row per temperature (`drafts.py`), reproducible the same way.
* **Concurrency.** Generations run in worker threads under a `CapacityLimiter` of `slots`, each
  slot a model instance (weights memory-mapped, so shared); waiting requests are served the
  conversation furthest along first (`TurnOrder`). A cancelled job stops at the next token.
* **Prefix reuse.** A context keeps the KV cache of its last prompt; a request evaluates only
  what it does not share with it. A slot has a chat context and two text contexts
  (`Contexts`), and a request takes the one where it costs least (`scheduler.cost`); a
  completion identical to a recent one gets that one's reply (`ReplayedReplies`).

llama-cpp-python is an optional dependency (`pip install 'remora[local]'`); this module imports
it only when a model is loaded, so Remora works without it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from remora.config.settings import DEFAULT_N_CTX
from remora.findings.results import EngineUsage
from remora.models.local.binding import (
    INSTALL_HINT,
    check_token_data_layout,
    cpu_count,
    import_llama_cpp,
    llama_cpp_available,
    model_params_set,
)
from remora.models.local.decoder import EVAL_BATCH, Generation, Slot, Use
from remora.models.local.drafts import MAX_ROWS, decode_drafts
from remora.models.local.model_files import file_identity
from remora.models.local.reply import (
    DecodingProgress,
    calls_so_far,
    generation_reply,
    reply_grammar,
    text_completion,
)
from remora.models.local.scheduler import Contexts, TurnOrder
from remora.models.local.scoring import score_text
from remora.models.local.usage import EngineStats, ReplayedReplies
from remora.protocol.completion import Completion, CompletionRequest, DraftsRequest
from remora.protocol.functiongemma import render_prompt
from remora.protocol.messages import ChatRequest, ModelError, ModelReply, PromptTooLong

__all__ = ["INSTALL_HINT", "EngineStats", "LocalChatModel", "cpu_count", "llama_cpp_available"]

log = logging.getLogger(__name__)


_TEXT_CONTEXTS_PER_SLOT = 2
"""As many as jobs in flight (`recommended_concurrency`): two jobs whose completions take turns
each find their own code still in a context. A chat context per slot is enough: after the
observations most jobs make one chat request, which reuses the agent's shared prefix."""
TEXT_N_CTX = 2048
"""Tokens of context for text completions (code and a few sentences); a longer prompt is
continued in a chat context. A context costs about 200 MB at 8192 tokens, 90 MB at 2048."""


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
        self.identity = identity or f"{self.name}:{file_identity(self.path)}"
        self.n_ctx = n_ctx
        self.slots = slots
        self.n_threads = n_threads or max(1, cpu_count() // slots)
        self.seed = seed
        self.extra_buffers = extra_buffers
        self.load_seconds: float | None = None
        """Seconds the last load took (all slots), None before loading."""
        self.on_load: Callable[[float], None] | None = None
        """Called with those seconds when a load ends (in the loading thread)."""
        self.stats = EngineStats()
        self._contexts = Contexts()
        self._limiter = anyio.CapacityLimiter(slots)
        """Bounds the worker threads: one per slot."""
        self._order = TurnOrder(slots)
        """Decides which waiting request gets a slot next."""
        self._load_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._adapters: dict[str, Path] = {}
        """GGUF LoRA adapters by the name requests ask for them with (`request.model`)."""
        self._replies = ReplayedReplies()

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
            llama = import_llama_cpp()
            check_token_data_layout(llama)
            started = time.perf_counter()
            try:
                for _ in range(self.slots):
                    self._contexts.add("chat", Slot(llama, self._new_llama(llama, self.n_ctx)))
                    for _ in range(_TEXT_CONTEXTS_PER_SLOT):
                        text = self._new_llama(llama, min(self.n_ctx, TEXT_N_CTX))
                        self._contexts.add("text", Slot(llama, text))
                self._load_adapters(self._adapters)
            except BaseException:
                self._close_slots()
                raise
            self.load_seconds = time.perf_counter() - started
            log.info("loaded %s in %.2fs (%d slots)", self.path, self.load_seconds, self.slots)
            if self.on_load is not None:
                self.on_load(self.load_seconds)
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
            # Prompts are evaluated in batches of whole chunks (Slot._prime); a larger batch
            # would only reserve logits for tokens never asked for (address space: 1 MB a token).
            "n_batch": EVAL_BATCH,
            "n_ubatch": EVAL_BATCH,
            "n_threads": self.n_threads,
            "n_threads_batch": self.n_threads,
            "seed": self.seed or 1,  # 0 means "random" to llama.cpp; sampling is ours anyway
            # A full-size sliding-window cache can drop any suffix, which prefix reuse needs.
            "swa_full": True,
            # Without it a row's logits depend on where its cache cells lie among other rows'.
            "flash_attn": True,
            "verbose": False,
        }
        try:
            with model_params_set(llama, extra_buffers=self.extra_buffers, sequences=MAX_ROWS):
                return llama.Llama(str(self.path), **kwargs)
        except ValueError as exc:  # llama-cpp-python's "Failed to load model from file"
            raise ModelError(f"cannot load {self.path}: {exc}") from exc

    def use_adapters(self, adapters: Mapping[str, Path]) -> None:
        """Make these adapters available to requests that name them (`request.model`), loaded
        with the model (or now, if it is loaded: every context is taken while they load, so no
        request sees an adapter some contexts lack). A request naming anything else gets the
        base model. Blocking."""
        with self._load_lock:
            self._replies.clear()  # an adapter's name may now mean other weights
            if self.load_seconds is None:
                self._adapters.update(adapters)
                return
            self._load_adapters(adapters)
            self._adapters.update(adapters)

    def _load_adapters(self, adapters: Mapping[str, Path]) -> None:
        """Into every context, all of them taken meanwhile (at load time none is in use)."""
        slots = self._contexts.take_all()
        try:
            for slot in slots:
                for name, path in adapters.items():
                    slot.load_adapter(name, path)
        finally:
            for slot in slots:
                self._contexts.add(slot.use, slot)

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
        """`request.model` names an adapter (`use_adapters`), else it is ignored (there is one
        model). So is `request.grammar`: the engine
        always decodes under its own grammar (`reply_grammar`), which also honours a named tool
        choice and `request.parallel_calls`."""
        messages = request.messages
        constraint = reply_grammar(
            request.tools, request.tool_choice, parallel=request.parallel_calls
        )
        prompt = render_prompt(messages, request.tools)
        await self.load()
        depth = sum(1 for message in messages if message.get("role") == "assistant")
        on_text = None
        if request.stream and request.on_progress is not None:
            on_text = DecodingProgress(request.on_progress).update
        async with self._order.turn(depth):
            (generation,) = await anyio.to_thread.run_sync(
                partial(
                    self._generate_in_thread,
                    "chat",
                    prompt,
                    constraint,
                    max_tokens=request.max_tokens,
                    temperatures=(request.temperature,),
                    seed=request.seed,
                    logprobs=request.logprobs,
                    on_text=on_text,
                    adapter=self._adapter(request.model),
                ),
                limiter=self._limiter,
            )
        return generation_reply(generation, first_id=calls_so_far(messages))

    async def complete_text(self, *, model: str, request: CompletionRequest) -> Completion:
        """A raw continuation of `request.prompt` (no chat template, no grammar), with the
        adapter `model` names, if any. A `score` request generates nothing: it measures the
        continuation's log-probability (`scoring.py`)."""
        if request.score is not None:
            await self.load()
            scored, stats = await score_text(
                self._order, self._contexts, self._limiter, self._adapter(model), request
            )
            self.record(stats)
            return scored
        one = DraftsRequest(
            prompt=request.prompt,
            stop=request.stop,
            max_tokens=request.max_tokens,
            temperatures=[request.temperature],
        )
        return (await self.complete_drafts(model=model, request=one))[0]

    async def complete_drafts(self, *, model: str, request: DraftsRequest) -> list[Completion]:
        """One raw continuation of `request.prompt` per temperature, decoded together in one
        batch (`drafts.decode_drafts`); a single temperature is decoded alone."""
        adapter = self._adapter(model)
        stops = tuple(request.stop)
        temperatures = tuple(request.temperatures)
        key = (adapter, request.prompt, stops, request.max_tokens, temperatures)
        replayed = self._replies.get(key)
        if replayed is not None:  # the same request gives the same reply (docs/LOCAL_ENGINE.md)
            prompt_tokens = sum(completion.usage.prompt_tokens for completion in replayed)
            self.record(EngineStats(replayed=len(replayed), prompt_tokens=prompt_tokens))
            return list(replayed)
        await self.load()
        async with self._order.turn(0):
            generations = await anyio.to_thread.run_sync(
                partial(
                    self._generate_in_thread,
                    "text",
                    "<bos>" + request.prompt,
                    None,
                    max_tokens=request.max_tokens,
                    temperatures=temperatures,
                    stops=[stop.encode("utf-8") for stop in request.stop if stop],
                    adapter=adapter,
                ),
                limiter=self._limiter,
            )
        completions = tuple(map(text_completion, generations))
        self._replies.put(key, completions)
        return list(completions)

    def _adapter(self, model: str) -> str | None:
        return model if model in self._adapters else None

    def _generate_in_thread(
        self,
        use: Use,
        prompt_text: str,
        grammar: str | None,
        *,
        max_tokens: int,
        temperatures: Sequence[float],
        stops: Sequence[bytes] = (),
        seed: int | None = None,
        logprobs: bool = False,
        on_text: Callable[[str], None] | None = None,
        adapter: str | None = None,
    ) -> list[Generation]:
        """One generation per temperature: alone for one (under `grammar`, with `logprobs` and
        `on_text` as asked), else free text decoded together (`drafts.decode_drafts`)."""
        rows = len(temperatures)
        # The limiter lets in no more threads than there are slots, so a context is idle unless
        # the model was closed while this request waited.
        slot, prompt = self._contexts.take(use, prompt_text, rows * max_tokens, adapter)
        try:
            room = slot.n_ctx - len(prompt)
            if room < rows:
                raise PromptTooLong(
                    len(prompt), slot.n_ctx, "raise local.n_ctx, up to the model's training context"
                )
            seed = self.seed if seed is None else seed
            if rows > 1:  # the rows' tokens share the cache after the prompt
                generations = decode_drafts(
                    slot,
                    prompt,
                    temperatures,
                    max_tokens=min(max_tokens, room // rows),
                    seed=seed,
                    check_cancelled=anyio.from_thread.check_cancelled,
                    stops=stops,
                    adapter=adapter,
                )
            else:
                generations = [
                    slot.generate(
                        prompt,
                        grammar,
                        max_tokens=min(max_tokens, room),
                        temperature=temperatures[0],
                        seed=seed,
                        check_cancelled=anyio.from_thread.check_cancelled,
                        stops=stops,
                        logprobs=logprobs,
                        on_text=on_text,
                        adapter=adapter,
                    )
                ]
        finally:
            self._contexts.give_back(slot)
        for generation in generations:
            self.record(generation.stats)
        return generations

    def usage(self) -> EngineUsage:
        """The totals so far, as the run's report states them."""
        with self._stats_lock:
            return self.stats.usage()

    def record(self, stats: EngineStats) -> None:
        """Add one request's counts to the engine's totals (any thread)."""
        with self._stats_lock:
            self.stats.add(stats)
