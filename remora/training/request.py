"""What `remora train` is asked to do, and how it reports progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from remora.agents.adapters import LoraShape
from remora.findings.results import JobResult


@dataclass(frozen=True, kw_only=True)
class TrainRequest:
    agent: str
    paths: tuple[Path, ...]
    out: Path
    transcripts: Path | None = None
    """Train on these recorded transcripts (`analyze --record`) instead of collecting."""
    from_code: tuple[Path, ...] = ()
    """Learn the docstring agent's summaries from this documented code instead of from runs."""
    from_tests: tuple[Path, ...] = ()
    """Learn the test agent's calls from the tests in these projects instead of from runs."""
    max_examples: int | None = None
    """At most this many training examples (a seeded choice)."""
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
