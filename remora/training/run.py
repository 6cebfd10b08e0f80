"""`remora train AGENT PATH...`: verified runs in, an adapter out (docs/TRAINING.md).

With `from_code` (docstring agent) or `from_tests` (test agent), steps 1 and 2 are replaced by
examples from what people wrote (`from_code.py`, `from_tests.py`), and no agent runs.

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
import resource
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Literal

import anyio
import anyio.from_thread
import anyio.to_thread

from remora import __version__
from remora.agents.adapters import (
    AdapterCard,
    BaseIdentity,
    DataCounts,
    Scores,
    Sources,
    TrainingRun,
    write_card,
)
from remora.agents.registry import select_agents
from remora.config.loading import LoadedSettings
from remora.errors import UserInputError
from remora.jobs.transcripts import read_transcripts
from remora.models.local.model import cpu_count
from remora.models.local.model_files import file_sha256
from remora.models.local.resolve import models_dir
from remora.training.dataset import TrainingSet, training_set
from remora.training.from_code import FILTERS as CODE_FILTERS
from remora.training.from_code import examples_from_code
from remora.training.from_tests import FILTERS as TEST_FILTERS
from remora.training.from_tests import examples_from_tests
from remora.training.request import TrainHooks, TrainRequest
from remora.training.runs import collect, engine_model, engine_of, score_held_out

INSTALL_HINT = "pip install 'remora[train]'"
_NEEDED = ("torch", "transformers", "peft", "gguf", "safetensors")


def missing_dependencies() -> list[str]:
    return [name for name in _NEEDED if importlib.util.find_spec(name) is None]


async def train(request: TrainRequest, loaded: LoadedSettings, hooks: TrainHooks) -> AdapterCard:
    if request.from_code or request.from_tests:
        _check_written(request)
    missing = missing_dependencies()
    if missing:
        raise UserInputError(
            f"remora train needs {', '.join(missing)}: {INSTALL_HINT} (torch's CPU build is "
            "enough: pip install torch --index-url https://download.pytorch.org/whl/cpu first "
            "avoids a GPU build of several GB)"
        )
    select_agents(loaded, [request.agent])  # an unknown agent or a bad definition: now
    base_source = request.base_model or engine_model(loaded)
    request.out.mkdir(parents=True, exist_ok=True)

    if request.from_code or request.from_tests:
        data, sources = await anyio.to_thread.run_sync(_written, request, hooks)
    else:
        if request.transcripts is not None:
            transcripts = read_transcripts(request.transcripts)
        else:
            transcripts = await collect(request, loaded, hooks)
        data = training_set(transcripts, request.agent, share=request.held_out, seed=request.seed)
        if request.max_examples is not None:
            data = dataclasses.replace(data, train=data.train[: request.max_examples])
        sources = Sources(kind="runs", paths=tuple(str(path) for path in request.paths))
        hooks.say(
            f"{data.jobs} jobs of {request.agent} recorded, {data.verified_jobs} verified: "
            f"{len(data.train)} training and {len(data.held_out)} held-out examples "
            f"({len(data.held_out_files)} held-out files)"
        )
    if len(data.train) < request.min_examples:
        raise UserInputError(_too_few(request, data))
    return await _train_and_export(request, loaded, hooks, data, base_source, sources)


WRITTEN_BY_PEOPLE = {"docstring": "--from-code", "test": "--from-tests"}
"""The agents that can learn from what people wrote, and the flag that gives it."""


def _check_written(request: TrainRequest) -> None:
    flag = "--from-code" if request.from_code else "--from-tests"
    if request.from_code and request.from_tests:
        raise UserInputError("give --from-code (docstring) or --from-tests (test), not both")
    if WRITTEN_BY_PEOPLE.get(request.agent) != flag:
        raise UserInputError(
            f"{flag} teaches the "
            + (
                "docstring agent its summaries from documented code"
                if request.from_code
                else "test agent the calls people write, from their tests"
            )
            + f"; {request.agent} learns from its verified runs (leave out {flag})"
        )
    missing = [str(path) for path in request.from_code + request.from_tests if not path.exists()]
    if missing:
        raise UserInputError(f"{flag}: no such file or folder: {', '.join(missing)}")


def _written(request: TrainRequest, hooks: TrainHooks) -> tuple[TrainingSet, Sources]:
    """Examples from what people wrote: the docstring agent's summary prompts for documented
    definitions with the authors' summaries as replies (`from_code.py`), or the test agent's
    call prompts with the arguments of calls in existing tests (`from_tests.py`)."""
    paths = request.from_code or request.from_tests
    what = "documented code" if request.from_code else "tests"
    hooks.say(f"reading {what} in {', '.join(map(str, paths))}")
    said = 0

    def progress(done: int, total: int) -> None:
        nonlocal said
        anyio.from_thread.check_cancelled()  # in a worker thread: stop once the run is cancelled
        if done * 10 // total > said:  # a line every tenth of the files
            said = done * 10 // total
            hooks.say(f"reading: {done} of {total} files")

    reader = examples_from_code if request.from_code else examples_from_tests
    found = reader(
        paths,
        share=request.held_out,
        seed=request.seed,
        max_examples=request.max_examples,
        progress=progress,
    )
    if request.from_code:
        read, filters = f"{found.read} documented definitions", CODE_FILTERS
    else:
        read, filters = f"{found.read} calls of the project's code", TEST_FILTERS
    reasons = ", ".join(f"{count} {filters[key]}" for key, count in found.left_out.most_common())
    capped = found.trainable > len(found.train)  # held-out examples have a cap of their own
    hooks.say(
        f"{found.files} files, {read}, {found.kept} kept"
        + (f" (left out: {reasons})" if reasons else "")
        + f": {len(found.train)} training"
        + (f" (--max-examples {request.max_examples})" if capped else "")
        + f" and {len(found.held_out)} held-out examples "
        f"({len(found.held_out_files)} held-out files)"
    )
    data = TrainingSet(
        train=found.train,
        held_out=found.held_out,
        jobs=found.read,
        verified_jobs=found.kept,
        turns=found.kept,
        held_out_files=found.held_out_files,
    )
    kind: Literal["code", "tests"] = "code" if request.from_code else "tests"
    named = tuple(str(path) for path in paths)
    return data, Sources(kind=kind, paths=named, left_out=dict(found.left_out))


async def _train_and_export(
    request: TrainRequest,
    loaded: LoadedSettings,
    hooks: TrainHooks,
    data: TrainingSet,
    base_source: Path,
    sources: Sources,
) -> AdapterCard:
    # Minutes of torch in a worker thread, checking between steps whether the run was
    # cancelled (Ctrl-C, SIGTERM): on the event loop's thread a cancellation would wait for the
    # last step. A stopped run keeps its checkpoint, and the same command goes on from there.
    card = await anyio.to_thread.run_sync(partial(_fit, request, hooks, data, base_source, sources))
    if (request.from_code or request.from_tests) and data.held_out_files:
        hooks.say(
            "held-out jobs not run: the examples are what people wrote, not the agent's jobs; "
            "the held-out loss is in the card (bench/train_from_code.py measures what the "
            "adapter makes the agent write)"
        )
    elif request.score and data.held_out_files:
        if engine_of(loaded) != "local" or card.base.sha256 != file_sha256(engine_model(loaded)):
            hooks.say(
                "held-out jobs not scored: the embedded engine does not run the adapter's base "
                f"({card.base.name}); its held-out loss is in the card"
            )
        else:
            card = await score_held_out(request, loaded, hooks, data, card)
            write_card(request.out, card)
    return card


def _fit(
    request: TrainRequest,
    hooks: TrainHooks,
    data: TrainingSet,
    base_source: Path,
    sources: Sources,
) -> AdapterCard:
    """Convert the base weights, train, export and write the card (in a worker thread)."""
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
    stop = anyio.from_thread.check_cancelled

    def step(done: int, total: int, loss: float) -> None:
        hooks.steps(done, total, loss)
        stop()

    loss_before = trainer.mean_loss(held_out, between=stop)
    started = time.perf_counter()
    digest = f"{data.digest()}:{base.sha256}"  # resume only on the same data and weights
    trainer.train(train_data, request.out / "checkpoint.pt", digest, step)
    seconds = time.perf_counter() - started
    loss_after = trainer.mean_loss(held_out, between=stop)

    name = f"remora-{request.agent}"
    # Nothing was sampled for this adapter: transcripts given, or what people wrote.
    collected_before = bool(request.transcripts or request.from_code or request.from_tests)
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
            attempts=0 if collected_before else request.attempts,
            temperature=None if collected_before else request.temperature,
            jobs=data.jobs,
            verified_jobs=data.verified_jobs,
            turns=data.turns,
            train_examples=len(train_data),
            held_out_examples=len(held_out),
            held_out_files=len(data.held_out_files),
            too_long=too_long,
        ),
        sources=sources,
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
    return card


def _too_few(request: TrainRequest, data: TrainingSet, *, too_long: int = 0) -> str:
    kept = len(data.train) - too_long
    if request.from_code or request.from_tests:
        read = "documented definitions" if request.from_code else "calls of the project's code"
        return (
            f"too few examples to train {request.agent}: {kept} (need --min-examples "
            f"{request.min_examples}); {data.jobs} {read} read, {data.verified_jobs} kept"
            + (f", {too_long} too long" if too_long else "")
            + f". Give more {'documented code' if request.from_code else 'tests'}, or lower "
            "--min-examples"
        )
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
