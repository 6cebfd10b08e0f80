"""Recorded transcripts: every turn of a job as the model saw and wrote it, with the outcome a
tool verified. `remora analyze --record DIR` writes them; `remora train` learns from the ones
that ended in a verified outcome (docs/TRAINING.md has the format).

One JSON object per line, one file per agent (`DIR/AGENT.jsonl`), appended to by every run.
The format is versioned by `format`; a reader refuses versions it does not know.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from remora.errors import UserInputError
from remora.findings.results import Change, JobResult, JobStatus, TranscriptTurn
from remora.protocol.functiongemma import render_prompt, render_reply
from remora.protocol.messages import Message, ModelReply

FORMAT: Final = "remora-transcript/1"


class Transcript(BaseModel):
    """One job's record, one line of `AGENT.jsonl`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["remora-transcript/1"] = FORMAT
    agent: str
    model: str
    """The served model or adapter name the job asked for."""
    file: str
    """The node's file, relative to the project root (held-out splits are by file)."""
    node: str
    status: JobStatus
    outcome: str | None
    """The verified outcome (one of the agent's `done_when`), when the job succeeded."""
    temperature: float
    turns: tuple[TranscriptTurn, ...]

    @property
    def verified(self) -> bool:
        return self.status is JobStatus.SUCCESS and self.outcome is not None


KEPT_MIN_CHARACTERS = 8
"""A shorter first line (`1)`) could be found in an added line by chance."""


class TranscriptRecorder:
    """One job's turns, in the order the model saw them: each chat turn, then the completions
    its tools asked for."""

    def __init__(self) -> None:
        self._turns: list[TranscriptTurn] = []
        self._prompt = ""
        self._at = 0

    def asking(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> None:
        """Before a chat request: its prompt, rendered before the reply joins the messages."""
        self._prompt, self._at = render_prompt(messages, tools), len(self._turns)

    def answered(self, reply: ModelReply, problems: Sequence[str]) -> None:
        """The reply (after its calls ran, which may have asked for completions)."""
        turn = TranscriptTurn(
            kind="chat",
            prompt=self._prompt,
            reply=render_reply(reply.as_message()),
            problems=tuple(problems),
        )
        self._turns.insert(self._at, turn)

    def completion(self, prompt: str, text: str) -> None:
        self._turns.append(TranscriptTurn(kind="completion", prompt=prompt, reply=text))

    def transcript(self, changes: Sequence[Change]) -> list[TranscriptTurn] | None:
        """The turns, each completion marked with whether a tool kept its first line: it is in
        a line the job's verified `changes` added (not just anywhere in the file, which holds
        the code a refused draft copied)."""
        added = [line[1:] for c in changes for line in c.diff.splitlines() if line[:1] == "+"]
        return [_kept(turn, added) if changes else turn for turn in self._turns]


class _NoRecording(TranscriptRecorder):
    """What the runner records with when nobody asked (`--record` not given): nothing."""

    def asking(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> None:
        return None

    def answered(self, reply: ModelReply, problems: Sequence[str]) -> None:
        return None

    def completion(self, prompt: str, text: str) -> None:
        return None

    def transcript(self, changes: Sequence[Change]) -> list[TranscriptTurn] | None:
        return None


NO_RECORDING = _NoRecording()


def _kept(turn: TranscriptTurn, added: list[str]) -> TranscriptTurn:
    if turn.kind != "completion":
        return turn
    line = turn.kept_part().strip()
    kept = len(line) >= KEPT_MIN_CHARACTERS and any(line in other for other in added)
    return turn.model_copy(update={"kept": kept})


class TranscriptWriter:
    """Appends each recorded job to `folder/AGENT.jsonl` as its result arrives."""

    def __init__(self, folder: Path) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserInputError(f"--record {folder}: cannot create the folder ({exc})") from exc
        self.folder = folder
        self.written = 0

    def write(self, result: JobResult, *, model: str, temperature: float) -> None:
        if result.transcript is None:
            return  # answered before any turn (skipped, cancelled)
        record = Transcript(
            agent=result.agent,
            model=model,
            file=result.node.file,
            node=result.node.id,
            status=result.status,
            outcome=result.outcome,
            temperature=temperature,
            turns=tuple(result.transcript),
        )
        # One write per line, appended: a run stopped midway leaves whole lines only.
        with (self.folder / f"{result.agent}.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(record.model_dump_json() + "\n")
        self.written += 1


def read_transcripts(path: Path) -> list[Transcript]:
    """Every transcript in `path` (a JSONL file, or a folder of them). A bad line is an error
    naming its file and line: training on a silently shortened set would mislead."""
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files or not all(file.is_file() for file in files):
        raise UserInputError(f"{path}: no transcripts (*.jsonl) there")
    out = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserInputError(f"{file}: cannot read transcripts: {exc}") from exc
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data: Any = json.loads(line)
                if isinstance(data, dict) and data.get("format") != FORMAT:
                    raise ValueError(f"format {data.get('format')!r} is not {FORMAT!r}")
                out.append(Transcript.model_validate(data))
            except (ValueError, ValidationError) as exc:
                raise UserInputError(f"{file}:{number}: not a transcript: {exc}") from exc
            except RecursionError:  # json.loads on `[[[[...` nested past Python's stack
                raise UserInputError(
                    f"{file}:{number}: not a transcript: values nested too deeply to read"
                ) from None
    return out
