"""The agent's runs that training needs: sampled, recorded attempts to learn from (collect), and
greedy runs on the held-out files without and with the new adapter (score_held_out)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from remora.agents.adapters import AdapterCard
from remora.agents.registry import select_agents
from remora.analysis.request import AnalysisHooks, AnalyzeRequest, project_root
from remora.analysis.run import analyze
from remora.config.loading import LoadedSettings
from remora.config.settings import AgentSettings
from remora.errors import RunFailed
from remora.findings.results import JobResult, JobStatus
from remora.jobs.transcripts import Transcript, read_transcripts
from remora.models.local.model_files import file_sha256
from remora.models.local.resolve import resolve_model, select_engine
from remora.protocol.messages import ModelError
from remora.training.dataset import TrainingSet
from remora.training.request import TrainHooks, TrainRequest


async def collect(
    request: TrainRequest, loaded: LoadedSettings, hooks: TrainHooks
) -> list[Transcript]:
    """Sampled runs of the agent, each attempt recorded in its own folder; finished attempts
    (marked `.done`) are kept, so a stopped collection goes on where it was. The agent runs on
    the base model: an adapter the configuration names may be the one this run replaces."""
    loaded = with_adapter(loaded, request.agent, False)
    folder = request.out / "transcripts"
    settings = {
        "agent": request.agent,
        "paths": sorted(str(path.resolve()) for path in request.paths),
        "temperature": request.temperature,
        "model": model_identity(loaded, request.agent),
    }
    targets = [folder / f"attempt-{attempt}" for attempt in range(1, request.attempts + 1)]
    for attempt, target in enumerate(targets, start=1):
        done = json.dumps({**settings, "seed": request.seed + attempt}, sort_keys=True)
        if (target / ".done").is_file() and (target / ".done").read_text() == done:
            continue  # the same attempt, finished before
        shutil.rmtree(target, ignore_errors=True)  # an attempt stopped midway starts over
        hooks.say(
            f"collecting: attempt {attempt} of {request.attempts} (temperature "
            f"{request.temperature}, seed {request.seed + attempt})"
        )
        await run_agent(
            request,
            sampling(loaded, request.temperature, request.seed + attempt),
            hooks,
            f"attempt {attempt}",
            paths=request.paths,
            record=target,
        )
        (target / ".done").write_text(done)
    # Only this request's attempts: folders left by an earlier run with more attempts are stale.
    return [
        transcript
        for target in targets
        if any(target.glob("*.jsonl"))
        for transcript in read_transcripts(target)
    ]


async def score_held_out(
    request: TrainRequest,
    loaded: LoadedSettings,
    hooks: TrainHooks,
    data: TrainingSet,
    card: AdapterCard,
) -> AdapterCard:
    """Verified successes on the held-out files, greedy, on the base model and with the new
    adapter (not with one the configuration names: it may be this one, already replaced)."""
    root = project_root(list(request.paths))
    paths = tuple(root / file for file in sorted(data.held_out_files) if (root / file).is_file())
    greedy = sampling(loaded, 0.0, request.seed)
    base = with_adapter(greedy, request.agent, False)
    before = await run_agent(request, base, hooks, "scoring without the adapter", paths=paths)
    adapted = with_adapter(greedy, request.agent, request.out.resolve())
    after = await run_agent(request, adapted, hooks, "scoring with the adapter", paths=paths)
    scores = card.scores.model_copy(
        update={
            "held_out_jobs": len(before),
            "held_out_success_before": successes(before),
            "held_out_success_after": successes(after),
        }
    )
    hooks.say(
        f"held-out files: {successes(before)} of {len(before)} jobs verified without the "
        f"adapter, {successes(after)} of {len(after)} with it"
    )
    return card.model_copy(update={"scores": scores})


async def run_agent(
    request: TrainRequest,
    loaded: LoadedSettings,
    hooks: TrainHooks,
    what: str,
    *,
    paths: Sequence[Path],
    record: Path | None = None,
) -> list[JobResult]:
    progress: list[Callable[[JobResult], None]] = []

    def started(total: int) -> None:
        progress.append(hooks.jobs(what, total))

    def result(job: JobResult) -> None:
        if progress:
            progress[0](job)

    outcome = await analyze(
        AnalyzeRequest(paths=tuple(paths), agents=(request.agent,), use_cache=False, record=record),
        loaded,
        hooks=AnalysisHooks(result=result, started=started, warn=hooks.say),
    )
    return outcome.results


def sampling(loaded: LoadedSettings, temperature: float, seed: int) -> LoadedSettings:
    settings = loaded.settings
    return dataclasses.replace(
        loaded,
        settings=settings.model_copy(
            update={
                "runner": settings.runner.model_copy(update={"temperature": temperature}),
                "local": settings.local.model_copy(update={"seed": seed}),
            }
        ),
    )


def with_adapter(
    loaded: LoadedSettings, agent: str, adapter: Path | Literal[False]
) -> LoadedSettings:
    settings = loaded.settings
    agents = dict(settings.agents)
    own = agents.get(agent) or AgentSettings()
    agents[agent] = own.model_copy(update={"adapter": adapter})
    return dataclasses.replace(loaded, settings=settings.model_copy(update={"agents": agents}))


def model_identity(loaded: LoadedSettings, agent: str) -> dict[str, object]:
    """What an attempt was sampled from: the engine's file by content, or the server's model
    (the name the agent asks for, chosen the way `analyze` chooses it)."""
    if engine_of(loaded) == "local":
        model = engine_model(loaded)
        return {"gguf": model.name, "sha256": file_sha256(model)}
    (selected,) = select_agents(loaded, [agent])
    return {"base_urls": list(loaded.settings.server.base_urls), "model": selected.model}


def engine_of(loaded: LoadedSettings) -> str:
    urls = loaded.settings.server.base_urls
    return select_engine(loaded.settings.engine, base_url=urls[0] if urls else None)


def engine_model(loaded: LoadedSettings) -> Path:
    """The GGUF file the embedded engine runs, found the way `analyze` finds it."""
    local = loaded.settings.local

    def absolute(path: Path | None) -> Path | None:
        return None if path is None else loaded.base_dir / path.expanduser()

    try:
        return resolve_model(
            absolute(local.model_path),
            models_folder=absolute(local.models_dir),
            repo=local.hf_repo,
            filename=local.hf_file,
        ).path
    except ModelError as exc:
        raise RunFailed(f"{exc.message} (or name the weights with --base-model)") from exc


def successes(results: Sequence[JobResult]) -> int:
    return sum(1 for result in results if result.status is JobStatus.SUCCESS)
