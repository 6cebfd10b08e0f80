"""Which model answers the run: the embedded engine or a server. The choice is a value (the
model, the name every agent asks for, the run's effective settings); nothing is assigned to the
loaded settings."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from remora.agents.definition import Agent
from remora.analysis.request import AnalysisHooks
from remora.config.loading import LoadedSettings
from remora.config.settings import ModelProfileName, RemoraSettings
from remora.errors import RunFailed, UserInputError
from remora.findings.results import EngineUsage
from remora.models.local.model import INSTALL_HINT, LocalChatModel
from remora.models.local.model_files import check_gguf, file_sha256
from remora.models.local.resolve import open_local_model, select_engine
from remora.protocol.messages import ChatModel, ModelError

if TYPE_CHECKING:
    from remora.models.http.router import Replica

# The server client (remora.models.http, with aiohttp and its TLS setup) is imported where a
# server answers, not at start: a run on the embedded engine never needs it, and it was a
# fifth of the start of a lint step (0.2 s of 1 s).


@dataclass(frozen=True)
class EngineChoice:
    settings: RemoraSettings
    """The run's settings: the loaded ones, with what the engine decides (profile, concurrency)."""
    local: LocalChatModel | None = None
    """The embedded engine, not loaded yet; None: a server answers."""
    model_name: str | None = None
    """What every agent asks for (the local model's identity, so cached results never mix
    engines); None: each agent's configured model."""
    description: str = ""
    """The local model file and where it came from, said once to the user."""


def choose_engine(loaded: LoadedSettings) -> EngineChoice:
    """The embedded engine gets the profile whose grammar forces a named submit_result, and the
    concurrency it can serve unless the user set one."""
    settings = loaded.settings
    urls = settings.server.base_urls
    if select_engine(settings.engine, base_url=urls[0] if urls else None) != "local":
        return EngineChoice(settings)
    try:
        model, resolved = open_local_model(settings.local, base_dir=loaded.base_dir)
    except ModelError as exc:
        raise RunFailed(exc.message) from exc
    runner = settings.runner
    if runner.model_profile is ModelProfileName.AUTO:
        runner = runner.model_copy(update={"model_profile": ModelProfileName.FUNCTIONGEMMA_KIT})
    user_set = any("concurrency" in layer for layer in loaded.layers.values())
    concurrency = settings.concurrency if user_set else model.recommended_concurrency
    effective = settings.model_copy(update={"runner": runner, "concurrency": concurrency})
    return EngineChoice(effective, model, resolved.identity, resolved.description)


ModelHold = Callable[[], AbstractAsyncContextManager[object]]
"""What a caller holds while the run's model is open (the language server: one run at a time
holds the model); entered before the model opens, left after it closes."""


@asynccontextmanager
async def opened_model(
    choice: EngineChoice,
    agents: Sequence[Agent],
    *,
    say: Callable[[str], None],
    warn: Callable[[str], None],
) -> AsyncIterator[ChatModel]:
    """The model, ready to answer: the embedded engine, or a server that was asked once for
    its models (an unreachable server is one error, not one per job). Closed on exit.

    The embedded engine loads its weights at the first request (said when it does), not here:
    a run whose jobs ask the model nothing (a lint step without unsafe fixes, a run answered
    from the cache but for a few tools' jobs) does not spend seconds of its cores loading it.
    Its file is checked here (a GGUF file there), so the common mistakes still fail at once."""
    settings = choice.settings
    model: LocalChatModel | Replica
    if choice.local is not None:
        model = choice.local
        check_gguf(model.path)
        model.on_load = lambda seconds: say(f"model loaded in {seconds:.1f} s")
        await _use_adapters(model, agents, say)
    elif settings.server.base_url:
        from remora.models.http.engine import server_model

        model = server_model(settings.server, connections=settings.concurrency)
    else:
        from remora.models.http.openai_client import SERVER_DOCS

        raise RunFailed(
            "no model server configured and no embedded engine installed. Either start a "
            f"server (e.g. vLLM serving {settings.server.model}) and pass --base-url "
            "http://127.0.0.1:8000/v1 (or server.base_url, REMORA_SERVER__BASE_URL; see "
            f"{SERVER_DOCS}), or install the embedded CPU engine: {INSTALL_HINT} "
            "(docs/LOCAL_ENGINE.md)"
        )
    try:
        if not isinstance(model, LocalChatModel):  # the embedded engine answers to any name
            await check_served(model, agents, warn)
        yield model
    finally:
        await model.aclose()


async def _use_adapters(
    model: LocalChatModel, agents: Sequence[Agent], say: Callable[[str], None]
) -> None:
    """Load the agents' adapters into the engine, by identity (the name each agent asks for),
    each checked against its card and only on the weights it was trained on (an adapter of the
    same shape loads on other weights too, and means nothing there)."""
    adapters = {agent.adapter.identity: agent.adapter for agent in agents if agent.adapter}
    if not adapters:
        return
    weights = await anyio.to_thread.run_sync(file_sha256, model.path)
    for adapter in adapters.values():
        if await anyio.to_thread.run_sync(file_sha256, adapter.gguf) != adapter.card.gguf_sha256:
            raise RunFailed(
                f"{adapter.gguf} is not the file its card describes (sha256 differs): it "
                "changed after `remora train` wrote it; train the adapter again"
            )
        if adapter.card.base.sha256 != weights:
            raise RunFailed(
                f"the adapter {adapter.folder} was trained on {adapter.card.base.name} "
                f"(sha256 {adapter.card.base.sha256[:16]}), but the embedded engine runs "
                f"{model.path.name} (sha256 {weights[:16]}): train it again on this model, or "
                "set local.model_path to the model it was trained on"
            )
    await anyio.to_thread.run_sync(
        model.use_adapters, {name: adapter.gguf for name, adapter in adapters.items()}
    )
    say("adapters: " + ", ".join(f"{a.name} ({a.folder})" for a in adapters.values()))


class RunModel:
    """The run's model, opened when the first job needs it (`open`, the orchestrator's
    ModelOpener) inside the caller's `hold`; a server's is steered by the adaptive limiter.
    `engine` is what the embedded engine did, once it has closed (None through a server)."""

    def __init__(
        self,
        choice: EngineChoice,
        agents: Sequence[Agent],
        settings: RemoraSettings,
        hooks: AnalysisHooks,
        hold: ModelHold,
        waiting: Callable[[], int],
    ) -> None:
        self.choice, self.agents, self.settings = choice, agents, settings
        self.hooks, self.hold, self.waiting = hooks, hold, waiting
        self.engine: EngineUsage | None = None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[ChatModel]:
        say, warn = self.hooks.say, self.hooks.warn
        async with self.hold(), opened_model(self.choice, self.agents, say=say, warn=warn) as model:
            self.hooks.started(self.waiting())
            if self.choice.local is not None:  # the embedded engine schedules its own requests
                try:
                    yield model
                finally:
                    self.engine = model.usage() if isinstance(model, LocalChatModel) else None
                return
            from remora.models.http.adaptive import adapted

            async with adapted(model, self.settings) as steered:
                yield steered


async def check_served(
    model: Replica, agents: Sequence[Agent], warn: Callable[[str], None]
) -> None:
    from remora.models.http.router import ReplicaRouter

    served = await model.list_models()
    if isinstance(model, ReplicaRouter):
        for replica in model.stats():
            if replica.down or replica.excluded:
                warn(f"replica {replica.base_url} skipped: {replica.last_error}")
    missing = sorted({agent.model for agent in agents} - set(served))
    if served and missing:
        raise UserInputError(
            f"the server at {model.base_url} does not serve {', '.join(missing)}; it serves: "
            f"{', '.join(served)}. Set server.model (--model) or agents.<name>.model to one of "
            "those"
        )
