"""Training examples from recorded transcripts: only turns of jobs a tool verified, only calls
the runner accepted, each once; held-out parts chosen by file, so no file's code is both learnt
and scored."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from remora.jobs.transcripts import Transcript


@dataclass(frozen=True)
class Example:
    """One model turn to learn: the prompt it saw and the reply to write."""

    prompt: str
    reply: str
    file: str

    @property
    def key(self) -> str:
        return hashlib.sha256(f"{self.prompt}\x00{self.reply}".encode()).hexdigest()


@dataclass(frozen=True)
class TrainingSet:
    train: list[Example]
    held_out: list[Example]
    jobs: int
    """Transcripts of the agent read."""
    verified_jobs: int
    """Of them, jobs whose outcome a tool verified."""
    turns: int
    """Accepted chat turns and kept completions of the verified jobs, before duplicates were
    dropped."""
    held_out_files: frozenset[str]

    def digest(self) -> str:
        """Identifies the data a checkpoint was trained on (resuming needs the same)."""
        hasher = hashlib.sha256()
        for example in self.train:
            hasher.update(example.key.encode())
        return hasher.hexdigest()[:16]


def held_out(files: Iterable[str], share: float, seed: int) -> frozenset[str]:
    """About `share` of the files, chosen by a hash of the seed and the path: the same files for
    the same seed, whatever else changes; at least one when there are two files or more."""
    ranked = sorted(
        set(files), key=lambda file: hashlib.sha256(f"{seed}:{file}".encode()).hexdigest()
    )
    count = round(len(ranked) * share)
    if share > 0 and count == 0 and len(ranked) > 1:
        count = 1
    return frozenset(ranked[:count])


def training_set(
    transcripts: Iterable[Transcript], agent: str, *, share: float, seed: int
) -> TrainingSet:
    """The agent's examples: each accepted chat turn and each kept completion (its kept line)
    of each verified job, deduplicated; those of the held-out files kept apart for scoring."""
    mine = [transcript for transcript in transcripts if transcript.agent == agent]
    verified = [transcript for transcript in mine if transcript.verified]
    outside = held_out((transcript.file for transcript in mine), share, seed)
    seen: set[str] = set()
    train: list[Example] = []
    scored: list[Example] = []
    turns = 0
    for transcript in verified:
        for turn in transcript.turns:
            # Refused calls are mistakes; drafts a tool threw away are not lessons either.
            if turn.problems or (turn.kind == "completion" and not turn.kept):
                continue
            turns += 1
            reply = turn.kept_part() if turn.kind == "completion" else turn.reply
            example = Example(turn.prompt, reply, transcript.file)
            if example.key in seen:
                continue
            seen.add(example.key)
            (scored if transcript.file in outside else train).append(example)
    return TrainingSet(
        train=train,
        held_out=scored,
        jobs=len(mine),
        verified_jobs=len(verified),
        turns=turns,
        held_out_files=outside,
    )


HELD_OUT_SCORED = 200
"""Held-out examples whose loss is measured before and after training (each is a forward pass
on 2 cores); more say little more."""


@dataclass
class WrittenExamples:
    """Examples from what people wrote (`from_code.py`, `from_tests.py`): what was read, what
    was kept, and the split into `train` and `held_out` (whole files held out)."""

    files: int = 0
    read: int = 0
    """Documented definitions, or calls of the project's code in tests."""
    left_out: Counter[str] = field(default_factory=Counter)
    """By the reader's FILTERS key."""
    by_file: dict[str, list[Example]] = field(default_factory=dict)
    train: list[Example] = field(default_factory=list)
    held_out: list[Example] = field(default_factory=list)
    held_out_files: frozenset[str] = frozenset()
    trainable: int = 0
    """Examples of the files not held out, before `max_examples` chose among them."""

    @property
    def kept(self) -> int:
        return sum(map(len, self.by_file.values()))

    def split(self, share: float, seed: int, max_examples: int | None) -> WrittenExamples:
        """About `share` of the files held out (by a hash of `seed` and the path); at most
        `max_examples` for training and `HELD_OUT_SCORED` held out, seeded choices."""
        self.held_out_files = held_out(self.by_file, share, seed)
        train = [e for name, found in self.by_file.items() if name not in self.held_out_files
                 for e in found]  # fmt: skip
        held = [e for name in sorted(self.held_out_files) for e in self.by_file[name]]
        self.trainable = len(train)
        self.train = _chosen(train, max_examples, seed) if max_examples is not None else train
        self.held_out = _chosen(held, HELD_OUT_SCORED, seed)
        return self


def _chosen(examples: list[Example], count: int, seed: int) -> list[Example]:
    """At most `count` of `examples`, a choice by a hash of the seed and the example."""
    if len(examples) <= count:
        return examples
    return sorted(examples, key=lambda e: hashlib.sha256(f"{seed}:{e.key}".encode()).hexdigest())[
        :count
    ]
