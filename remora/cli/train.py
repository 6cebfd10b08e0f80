"""`remora train AGENT PATH...`: a LoRA adapter for one agent, learnt from its verified runs."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from remora.agents.adapters import LoraShape
from remora.cli.console import say
from remora.cli.flags import config_flags, engine_flags, load, server_flags
from remora.errors import UserInputError
from remora.findings.results import JobResult
from remora.report.progress import JobProgress
from remora.training.request import TrainHooks, TrainRequest
from remora.training.run import train


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "train",
        parents=[config_flags(), server_flags(), engine_flags()],
        help="fine-tune a LoRA adapter for an agent from its verified runs",
        description="Run AGENT on PATH several times with sampling, keep the transcripts whose "
        "outcome a tool verified, and fine-tune a LoRA adapter on them (PEFT for vLLM, GGUF for "
        "the embedded engine, a card with held-out scores). With --from-code (docstring agent) "
        "or --from-tests (test agent), learn instead from the summaries and the calls people "
        "wrote. Needs the train extra: pip install 'remora[train]'. See docs/TRAINING.md.",
    )
    parser.set_defaults(run=run)
    parser.add_argument("agent", metavar="AGENT", help="the agent to train (e.g. docstring)")
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="code to run the agent on and learn from its verified runs",
    )
    parser.add_argument(
        "--from-code",
        nargs="+",
        type=Path,
        default=[],
        metavar="PATH",
        help="docstring agent only: learn the summaries the authors of this documented code "
        "wrote (your project, a library, the standard library), each behind the prompt the "
        "agent would send for its definition; no agent runs",
    )
    parser.add_argument(
        "--from-tests",
        nargs="+",
        type=Path,
        default=[],
        metavar="PATH",
        help="test agent only: learn the calls people wrote in the tests of these projects "
        "(test_*.py calling the project's functions, classes and methods), each behind the "
        "prompt the agent sends to ask for a call's arguments; no agent runs",
    )
    parser.add_argument(
        "--max-examples",
        type=int,
        metavar="N",
        help="train on at most N examples (a seeded choice; default all)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="where the adapter goes (default adapters/AGENT); a stopped run given the same "
        "DIR goes on where it was",
    )
    parser.add_argument(
        "--transcripts",
        type=Path,
        metavar="DIR",
        help="learn from transcripts recorded with `remora analyze --record DIR` instead of "
        "collecting new ones",
    )
    parser.add_argument(
        "--attempts", type=int, default=4, metavar="N", help="sampled runs per node (default 4)"
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.8,
        metavar="T",
        help="sampling temperature of the collecting runs (default 0.8)",
    )
    parser.add_argument(
        "--held-out",
        type=float,
        default=0.2,
        metavar="SHARE",
        help="share of the files kept out of training to score the adapter (default 0.2)",
    )
    parser.add_argument(
        "--min-examples",
        type=int,
        default=20,
        metavar="N",
        help="refuse to train on fewer verified examples (default 20)",
    )
    parser.add_argument("--epochs", type=int, default=2, metavar="N", help="default 2")
    parser.add_argument("--rank", type=int, default=16, metavar="R", help="LoRA rank (default 16)")
    parser.add_argument(
        "--learning-rate", type=float, default=2e-4, metavar="LR", help="default 0.0002"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="0 or more: attempt K samples with seed N+K; N also picks the held-out files "
        "and the training order (default 0)",
    )
    parser.add_argument(
        "--base-model",
        type=Path,
        metavar="PATH",
        help="the weights to train on: a GGUF file (converted once) or a Hugging Face folder; "
        "default: the embedded engine's model file",
    )
    parser.add_argument(
        "--no-score",
        action="store_true",
        help="skip running the agent on the held-out files with and without the adapter",
    )


def run(args: argparse.Namespace) -> int:
    for name, value, low in (
        ("--attempts", args.attempts, 1),
        ("--min-examples", args.min_examples, 1),
        ("--epochs", args.epochs, 1),
        ("--rank", args.rank, 1),
        ("--seed", args.seed, 0),
        ("--max-examples", 1 if args.max_examples is None else args.max_examples, 1),
    ):
        if value < low:
            raise UserInputError(f"{name} must be at least {low} (got {value})")
    if not 0 <= args.held_out < 1:
        raise UserInputError(f"--held-out must be at least 0 and below 1 (got {args.held_out})")
    if not 0 < args.temperature <= 2:
        raise UserInputError(
            f"--temperature must be above 0 (sampling is what finds other verified runs) and at "
            f"most 2 (got {args.temperature})"
        )
    written = args.from_code or args.from_tests
    if not args.paths and not written:
        raise UserInputError(
            "remora train needs code: PATH... to run the agent on, --from-code PATH... "
            "(docstring agent) to learn from documented code, or --from-tests PATH... (test "
            "agent) to learn from existing tests"
        )
    if args.paths and written:
        raise UserInputError(
            "give either PATH... (learn from the agent's verified runs) or --from-code / "
            "--from-tests PATH... (learn from what people wrote), not both"
        )
    loaded = load(args)
    request = TrainRequest(
        agent=args.agent,
        paths=tuple(args.paths),
        from_code=tuple(args.from_code),
        from_tests=tuple(args.from_tests),
        max_examples=args.max_examples,
        out=args.out or Path("adapters") / args.agent,
        transcripts=args.transcripts,
        attempts=args.attempts,
        temperature=args.temperature,
        held_out=args.held_out,
        seed=args.seed,
        min_examples=args.min_examples,
        base_model=args.base_model,
        score=not args.no_score,
        lora=LoraShape(
            rank=args.rank,
            alpha=2 * args.rank,
            epochs=args.epochs,
            learning_rate=args.learning_rate,
        ),
    )
    with StepProgress() as steps:
        hooks = TrainHooks(say=say, jobs=_job_progress, steps=steps.update)
        card = anyio.run(train, request, loaded, hooks)
    scores = card.scores
    loss = (
        f"held-out loss {scores.held_out_loss_before:.3f} -> {scores.held_out_loss_after:.3f}"
        if scores.held_out_loss_before is not None and scores.held_out_loss_after is not None
        else "no held-out examples"
    )
    say(
        f"adapter {card.name} written to {request.out} ({card.data.train_examples} examples, "
        f"{card.training.steps} steps, {card.training.seconds:.0f} s; {loss})"
    )
    # The setting is relative to the configuration file's folder, not to where this ran.
    config = loaded.config_file or loaded.base_dir / "remora.yaml"
    shown = os.path.relpath(request.out.resolve(), config.parent)
    say(f"use it: agents.{card.agent}.adapter: {shown} in {config}")
    return 0


def _job_progress(what: str, total: int) -> Callable[[JobResult], None]:
    say(f"{what}: {total} jobs")
    progress = JobProgress(total, enabled=sys.stderr.isatty()).__enter__()
    done = 0

    def advance(result: JobResult) -> None:
        nonlocal done
        done += 1
        progress.advance(result)
        if done == total:
            progress.__exit__(None, None, None)

    return advance


class StepProgress:
    """Training steps on stderr: a bar on a terminal, else a line every tenth of the way."""

    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task: Any = None
        self._said = 0

    def __enter__(self) -> StepProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, done: int, total: int, loss: float) -> None:
        if not sys.stderr.isatty():
            if done * 10 // total > self._said or done == total:
                self._said = done * 10 // total
                say(f"training: step {done} of {total}, loss {loss:.3f}")
            return
        if self._bar is None:
            self._bar = Progress(
                TextColumn("training"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("loss {task.fields[loss]:.3f}"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task("steps", total=total, completed=done - 1, loss=loss)
            self._bar.start()
        self._bar.update(self._task, completed=done, loss=loss)
