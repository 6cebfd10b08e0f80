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
* **Prompts longer than the context** are not evaluated: `PromptTooLong` (a `ModelError`) says
  both numbers, and the runner refuses that request instead of failing the job.
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

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from remora.config.settings import DEFAULT_N_CTX
from remora.findings.results import EngineUsage, Usage
from remora.models.local.binding import (
    INSTALL_HINT,
    _check_token_data_layout,
    _llama_cpp,
    _model_params,
    cpu_count,
    llama_cpp_available,
)
from remora.models.local.decoder import _EVAL_CHUNK, EngineStats, _Generation, _Slot, _Use
from remora.models.local.reply import DecodingProgress, calls_so_far, generation_reply
from remora.models.local.scheduler import _Contexts, _TurnOrder
from remora.models.local.scoring import score_text
from remora.protocol.completion import Completion, CompletionRequest
from remora.protocol.functiongemma import (
    gbnf_grammar,
    render_prompt,
)
from remora.protocol.messages import (
    ChatRequest,
    ModelError,
    ModelReply,
    PromptTooLong,
    ToolChoice,
)

__all__ = [
    "INSTALL_HINT",
    "EngineStats",
    "LocalChatModel",
    "cpu_count",
    "llama_cpp_available",
]

log = logging.getLogger(__name__)


"""ggml's `ggml_log_level` (NONE, DEBUG, INFO, WARN, ERROR, CONT = 0..5). llama-cpp-python's own
callback still uses an older numbering and prints warnings as errors, on stderr."""


_TEXT_CONTEXTS_PER_SLOT = 2
"""As many as jobs in flight (`recommended_concurrency`): two jobs whose completions take turns
each find their own code still in a context. A chat context per slot is enough: after the
observations most jobs make one chat request, which reuses the agent's shared prefix."""
REPLAYED_REPLIES = 256
"""Completions kept for identical requests (a few KB each)."""
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
        self._adapters: dict[str, Path] = {}
        """GGUF LoRA adapters by the name requests ask for them with (`request.model`)."""
        self._replies: OrderedDict[tuple[object, ...], Completion] = OrderedDict()
        """Recent completions by request: jobs of one class or module often send the same
        prompt (the constructor a test starts with), and decoding is deterministic."""

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
                self._load_adapters(self._adapters)
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
        always decodes under its own grammar (`grammar_for`), which also honours a named tool
        choice and `request.parallel_calls`."""
        messages = request.messages
        constraint = self.grammar_for(
            request.tools, request.tool_choice, parallel=request.parallel_calls
        )
        prompt = render_prompt(messages, request.tools)
        await self.load()
        depth = sum(1 for message in messages if message.get("role") == "assistant")
        on_text = None
        if request.stream and request.on_progress is not None:
            on_text = DecodingProgress(request.on_progress).update
        async with self._order.turn(depth):
            generation = await anyio.to_thread.run_sync(
                partial(
                    self._generate_in_thread,
                    "chat",
                    prompt,
                    constraint,
                    max_tokens=request.max_tokens,
                    temperature=request.temperature,
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
            return await score_text(self, model, request)
        adapter = self._adapter(model)
        stops = tuple(request.stop)
        key = (adapter, request.prompt, stops, request.max_tokens, request.temperature)
        replayed = self._replies.get(key)
        if replayed is not None:  # the same request gives the same reply (docs/LOCAL_ENGINE.md)
            self._replies.move_to_end(key)
            self.record(EngineStats(replayed=1, prompt_tokens=replayed.usage.prompt_tokens))
            return replayed
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
                    adapter=adapter,
                ),
                limiter=self._limiter,
            )
        completion = Completion(
            text=generation.text,
            finish="length" if generation.finish == "length" else "stop",
            usage=Usage(
                prompt_tokens=generation.prompt_tokens,
                completion_tokens=generation.completion_tokens,
            ),
        )
        self._replies[key] = completion
        if len(self._replies) > REPLAYED_REPLIES:
            self._replies.popitem(last=False)
        return completion

    def _adapter(self, model: str) -> str | None:
        return model if model in self._adapters else None

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
            return gbnf_grammar(chosen, tool_choice="forced", marker_free_strings=True)
        # "auto" is decoded as "required": the runner needs a call every turn.
        return gbnf_grammar(
            tools, tool_choice="required", parallel=parallel, marker_free_strings=True
        )

    def _generate_in_thread(
        self,
        use: _Use,
        prompt_text: str,
        grammar: str | None,
        *,
        max_tokens: int,
        temperature: float,
        stops: Sequence[bytes] = (),
        seed: int | None = None,
        logprobs: bool = False,
        on_text: Callable[[str], None] | None = None,
        adapter: str | None = None,
    ) -> _Generation:
        # The limiter lets in no more threads than there are slots, so a context is idle unless
        # the model was closed while this request waited.
        slot, prompt = self._contexts.take(use, prompt_text, max_tokens, adapter)
        try:
            room = slot.n_ctx - len(prompt)
            if room < 1:
                raise PromptTooLong(
                    len(prompt), slot.n_ctx, "raise local.n_ctx, up to the model's training context"
                )
            generation = slot.generate(
                prompt,
                grammar,
                max_tokens=min(max_tokens, room),
                temperature=temperature,
                seed=self.seed if seed is None else seed,
                check_cancelled=anyio.from_thread.check_cancelled,
                stops=stops,
                logprobs=logprobs,
                on_text=on_text,
                adapter=adapter,
            )
        finally:
            self._contexts.give_back(slot)
        self.record(generation.stats)
        return generation

    def usage(self) -> EngineUsage:
        """The totals so far, as the run's report states them."""
        with self._stats_lock:
            stats = self.stats
            return EngineUsage(
                requests=stats.generations + stats.scored + stats.replayed,
                replayed=stats.replayed,
                prompt_tokens=stats.prompt_tokens,
                prompt_tokens_evaluated=stats.prompt_tokens_evaluated,
                prompt_tokens_reused=stats.prompt_tokens - stats.prompt_tokens_evaluated,
                completion_tokens=stats.completion_tokens,
                prompt_seconds=round(stats.prompt_seconds, 3),
                completion_seconds=round(stats.completion_seconds, 3),
            )

    def record(self, stats: EngineStats) -> None:
        """Add one request's counts to the engine's totals (any thread)."""
        with self._stats_lock:
            self.stats.add(stats)


def _tool_name(tool: Mapping[str, Any]) -> object:
    function = tool.get("function")
    return function.get("name") if isinstance(function, Mapping) else tool.get("name")


def _file_identity(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return "missing"
    return f"{stat.st_size}-{stat.st_mtime_ns}"
