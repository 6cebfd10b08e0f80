"""`remora train AGENT PATH...`: verified runs in, an adapter out (docs/TRAINING.md).

1. **Collect** (unless transcripts are given): the agent runs on every node of PATH
   `attempts` times, sampling at `temperature` with a different seed each time, every transcript
   recorded (`OUT/transcripts/attempt-K/`); an attempt already finished is not run again.
2. **Select**: turns of verified jobs only, accepted calls only, each once; about `held_out` of
   the files kept apart for scoring. Too few examples: refused, with the counts.
3. **Train** a LoRA adapter on the base weights (the embedded engine's GGUF converted once, or
   a Hugging Face folder), after an estimate of the time it will take; checkpointed, resumable.
4. **Export** `OUT/peft/` (vLLM), `OUT/adapter.gguf` (llama.cpp) and `OUT/card.json`.
5. **Score**: loss on the held-out examples before and after; with the embedded engine, the
   agent's verified successes on the held-out files, greedy, without and with the adapter.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import resource
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from remora import __version__
from remora.agents.adapters import (
    AdapterCard,
    BaseIdentity,
    DataCounts,
    LoraShape,
    Scores,
    TrainingRun,
    write_card,
)
from remora.agents.registry import select_agents
from remora.analysis.plan import project_root
from remora.analysis.request import AnalysisHooks, AnalyzeRequest
from remora.analysis.run import analyze
from remora.config.loading import LoadedSettings
from remora.config.settings import AgentSettings
from remora.errors import RunFailed, UserInputError
from remora.findings.results import JobResult, JobStatus
from remora.jobs.transcripts import Transcript, read_transcripts
from remora.models.local.model import cpu_count
from remora.models.local.model_files import file_sha256
from remora.models.local.resolve import models_dir, resolve_model, select_engine
from remora.protocol.messages import ModelError
from remora.training.dataset import TrainingSet, training_set

INSTALL_HINT = "pip install 'remora[train]'"
_NEEDED = ("torch", "transformers", "peft", "gguf", "safetensors")


@dataclass(frozen=True, kw_only=True)
class TrainRequest:
    agent: str
    paths: tuple[Path, ...]
    out: Path
    transcripts: Path | None = None
    """Train on these recorded transcripts (`analyze --record`) instead of collecting."""
    attempts: int = 4
    temperature: float = 0.8
    held_out: float = 0.2
    seed: int = 0
    min_examples: int = 20
    base_model: Path | None = None
    """A GGUF file or Hugging Face folder; default: the embedded engine's model file."""
    score: bool = True
    """Run the agent on the held-out files with and without the adapter (embedded engine)."""
    lora: LoraShape = field(default_factory=LoraShape)


@dataclass
class TrainHooks:
    say: Callable[[str], None]
    jobs: Callable[[str, int], Callable[[JobResult], None]] = field(
        default=lambda what, total: lambda result: None
    )
    """(what, jobs) -> called with each job's result: progress of collection and scoring."""
    steps: Callable[[int, int, float], None] = lambda done, total, loss: None


def missing_dependencies() -> list[str]:
    return [name for name in _NEEDED if importlib.util.find_spec(name) is None]


async def train(request: TrainRequest, loaded: LoadedSettings, hooks: TrainHooks) -> AdapterCard:
    missing = missing_dependencies()
    if missing:
        raise UserInputError(
            f"remora train needs {', '.join(missing)}: {INSTALL_HINT} (torch's CPU build is "
            "enough: pip install torch --index-url https://download.pytorch.org/whl/cpu first "
            "avoids a GPU build of several GB)"
        )
    select_agents(loaded, [request.agent])  # an unknown agent or a bad definition: now
    base_source = request.base_model or _engine_model(loaded)
    request.out.mkdir(parents=True, exist_ok=True)

    if request.transcripts is not None:
        transcripts = read_transcripts(request.transcripts)
    else:
        transcripts = await _collect(request, loaded, hooks)
    data = training_set(transcripts, request.agent, share=request.held_out, seed=request.seed)
    hooks.say(
        f"{data.jobs} jobs of {request.agent} recorded, {data.verified_jobs} verified: "
        f"{len(data.train)} training and {len(data.held_out)} held-out examples "
        f"({len(data.held_out_files)} held-out files)"
    )
    if len(data.train) < request.min_examples:
        raise UserInputError(_too_few(request, data))
    return await _train_and_export(request, loaded, hooks, data, base_source)


async def _train_and_export(
    request: TrainRequest,
    loaded: LoadedSettings,
    hooks: TrainHooks,
    data: TrainingSet,
    base_source: Path,
) -> AdapterCard:
    from remora.agents.adapters import GGUF, PEFT
    from remora.training.base_model import base_weights
    from remora.training.export import write_gguf_adapter
    from remora.training.lora import LoraTrainer

    lora = request.lora
    base = base_weights(base_source, models_dir(None) / "training", say=hooks.say)
    threads = cpu_count()
    trainer = LoraTrainer(base.folder, lora, seed=request.seed, threads=threads)
    encoded = [trainer.encode(example) for example in data.train]
    train_data = [item for item in encoded if trainer.fits(item)]
    held_out = [trainer.encode(example) for example in data.held_out]
    held_out = [item for item in held_out if trainer.fits(item)]
    too_long = len(encoded) - len(train_data)
    if len(train_data) < request.min_examples:
        raise UserInputError(_too_few(request, data, too_long=too_long))
    tokens = sum(int(item.ids.numel()) for item in train_data) * lora.epochs
    estimate = trainer.estimate_seconds(train_data)
    left_out = f"; {too_long} longer than {lora.max_tokens} tokens left out" if too_long else ""
    hooks.say(
        f"training {len(train_data)} examples x {lora.epochs} epochs ({tokens} tokens) on "
        f"{threads} threads: about {_duration(estimate)}{left_out}"
    )
    loss_before = trainer.mean_loss(held_out)
    started = time.perf_counter()
    digest = f"{data.digest()}:{base.sha256}"  # resume only on the same data and weights
    trainer.train(train_data, request.out / "checkpoint.pt", digest, hooks.steps)
    seconds = time.perf_counter() - started
    loss_after = trainer.mean_loss(held_out)

    name = f"remora-{request.agent}"
    trainer.model.save_pretrained(str(request.out / PEFT))
    write_gguf_adapter(
        request.out / GGUF,
        trainer.lora_weights(),
        architecture=base.architecture,
        alpha=lora.alpha,
        name=name,
    )
    card = AdapterCard(
        name=name,
        agent=request.agent,
        base=BaseIdentity(
            name=base.source.name, sha256=base.sha256, architecture=base.architecture
        ),
        lora=lora,
        data=DataCounts(
            attempts=0 if request.transcripts else request.attempts,
            temperature=None if request.transcripts else request.temperature,
            jobs=data.jobs,
            verified_jobs=data.verified_jobs,
            turns=data.turns,
            train_examples=len(train_data),
            held_out_examples=len(held_out),
            held_out_files=len(data.held_out_files),
            too_long=too_long,
        ),
        scores=Scores(held_out_loss_before=loss_before, held_out_loss_after=loss_after),
        training=TrainingRun(
            steps=trainer.steps_done,
            seconds=round(seconds, 1),
            peak_memory_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            threads=threads,
            device="cpu",
        ),
        seed=request.seed,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        remora_version=__version__,
        gguf_sha256=file_sha256(request.out / GGUF),
    )
    write_card(request.out, card)
    (request.out / "checkpoint.pt").unlink(missing_ok=True)
    if request.score and data.held_out_files:
        if _engine(loaded) != "local" or base.sha256 != file_sha256(_engine_model(loaded)):
            hooks.say(
                "held-out jobs not scored: the embedded engine does not run the adapter's base "
                f"({base.source.name}); its held-out loss is in the card"
            )
        else:
            card = await _score(request, loaded, hooks, data, card)
            write_card(request.out, card)
    return card


async def _collect(
    request: TrainRequest, loaded: LoadedSettings, hooks: TrainHooks
) -> list[Transcript]:
    """Sampled runs of the agent, each attempt recorded in its own folder; finished attempts
    (marked `.done`) are kept, so a stopped collection goes on where it was. The agent runs on
    the base model: an adapter the configuration names may be the one this run replaces."""
    loaded = _with_adapter(loaded, request.agent, False)
    folder = request.out / "transcripts"
    settings = {
        "agent": request.agent,
        "paths": sorted(str(path.resolve()) for path in request.paths),
        "temperature": request.temperature,
        "model": _model_identity(loaded, request.agent),
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
        await _run_agent(
            request,
            _sampling(loaded, request.temperature, request.seed + attempt),
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


async def _score(
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
    greedy = _sampling(loaded, 0.0, request.seed)
    base = _with_adapter(greedy, request.agent, False)
    before = await _run_agent(request, base, hooks, "scoring without the adapter", paths=paths)
    adapted = _with_adapter(greedy, request.agent, request.out.resolve())
    after = await _run_agent(request, adapted, hooks, "scoring with the adapter", paths=paths)
    scores = card.scores.model_copy(
        update={
            "held_out_jobs": len(before),
            "held_out_success_before": _successes(before),
            "held_out_success_after": _successes(after),
        }
    )
    hooks.say(
        f"held-out files: {_successes(before)} of {len(before)} jobs verified without the "
        f"adapter, {_successes(after)} of {len(after)} with it"
    )
    return card.model_copy(update={"scores": scores})


async def _run_agent(
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


def _sampling(loaded: LoadedSettings, temperature: float, seed: int) -> LoadedSettings:
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


def _with_adapter(
    loaded: LoadedSettings, agent: str, adapter: Path | Literal[False]
) -> LoadedSettings:
    settings = loaded.settings
    agents = dict(settings.agents)
    own = agents.get(agent) or AgentSettings()
    agents[agent] = own.model_copy(update={"adapter": adapter})
    return dataclasses.replace(loaded, settings=settings.model_copy(update={"agents": agents}))


def _model_identity(loaded: LoadedSettings, agent: str) -> dict[str, object]:
    """What an attempt was sampled from: the engine's file by content, or the server's model
    (the name the agent asks for, chosen the way `analyze` chooses it)."""
    if _engine(loaded) == "local":
        model = _engine_model(loaded)
        return {"gguf": model.name, "sha256": file_sha256(model)}
    (selected,) = select_agents(loaded, [agent])
    return {"base_urls": list(loaded.settings.server.base_urls), "model": selected.model}


def _engine(loaded: LoadedSettings) -> str:
    urls = loaded.settings.server.base_urls
    return select_engine(loaded.settings.engine, base_url=urls[0] if urls else None)


def _engine_model(loaded: LoadedSettings) -> Path:
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


def _successes(results: Sequence[JobResult]) -> int:
    return sum(1 for result in results if result.status is JobStatus.SUCCESS)


def _too_few(request: TrainRequest, data: TrainingSet, *, too_long: int = 0) -> str:
    kept = len(data.train) - too_long
    return (
        f"too few verified examples to train {request.agent}: {kept} (need "
        f"--min-examples {request.min_examples}); {data.jobs} jobs recorded, "
        f"{data.verified_jobs} verified, {data.turns} accepted turns"
        + (f", {too_long} too long" if too_long else "")
        + ". Run more --attempts, give more code, or lower --min-examples"
    )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"
