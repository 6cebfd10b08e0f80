"""An adapter's card (`ADAPTER/card.json`): what it was trained on and how well it did, and
what a run needs to use it. Read at run time, so this module needs no training dependency."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from remora.config.yamlfile import describe_error, format_loc
from remora.errors import UserInputError

CARD = "card.json"
GGUF = "adapter.gguf"
PEFT = "peft"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BaseIdentity(_Strict):
    name: str
    """The base model file's (or folder's) name."""
    sha256: str
    """Of the GGUF file the embedded engine runs (or of a Hugging Face folder's files): an
    adapter is used only on the weights it was trained on."""
    architecture: str


class LoraShape(_Strict):
    """How an adapter is trained (the defaults are `remora train`'s)."""

    rank: int = 16
    alpha: int = 32
    targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """Linear layers that get an adapter (what vLLM and llama.cpp both apply)."""
    learning_rate: float = 2e-4
    epochs: int = 2
    max_tokens: int = 4096
    """Longer examples are left out (counted in the card)."""


class DataCounts(_Strict):
    attempts: int
    """Sampled runs per node (rejection sampling); 0 when the transcripts were given."""
    temperature: float | None
    jobs: int
    verified_jobs: int
    turns: int
    """Accepted chat turns and kept completions of the verified jobs, before duplicates were
    dropped."""
    train_examples: int
    held_out_examples: int
    held_out_files: int
    too_long: int
    """Examples left out for not fitting `max_tokens`."""


class Sources(_Strict):
    """Where the examples came from."""

    kind: Literal["runs", "code", "tests"]
    """"runs": verified transcripts of the agent; "code": documented code (`--from-code`);
    "tests": existing tests (`--from-tests`)."""
    paths: tuple[str, ...]
    left_out: dict[str, int] = {}
    """What people wrote that was not learnt from, by reason (`from_code.py`, `from_tests.py`)."""


class Scores(_Strict):
    held_out_loss_before: float | None
    """Mean loss per reply token on the held-out examples, base model."""
    held_out_loss_after: float | None
    held_out_jobs: int = 0
    """Jobs run on the held-out files to score verified success (greedy); 0: not scored."""
    held_out_success_before: int | None = None
    held_out_success_after: int | None = None


class TrainingRun(_Strict):
    steps: int
    seconds: float
    """Training steps only (not the data collection or conversion)."""
    peak_memory_mb: float
    threads: int
    device: str


class AdapterCard(_Strict):
    format: Literal["remora-adapter/1"] = "remora-adapter/1"
    name: str
    """The name a server serves it under (`--lora-modules NAME=...`), and agents ask for."""
    agent: str
    base: BaseIdentity
    lora: LoraShape
    data: DataCounts
    sources: Sources | None = None
    scores: Scores
    training: TrainingRun
    seed: int
    created: str
    remora_version: str
    gguf_sha256: str
    """Of adapter.gguf: the adapter's identity in the result cache."""


@dataclass(frozen=True)
class Adapter:
    """An adapter folder and its card."""

    folder: Path
    card: AdapterCard

    @property
    def name(self) -> str:
        return self.card.name

    @property
    def gguf(self) -> Path:
        return self.folder / GGUF

    @property
    def peft(self) -> Path:
        return self.folder / PEFT

    @property
    def identity(self) -> str:
        """Tells results of different adapters (and bases) apart in the cache."""
        return f"{self.card.name}:{self.card.gguf_sha256[:16]}:{self.card.base.sha256[:16]}"


def load_adapter(folder: Path, *, where: str) -> Adapter:
    """The adapter in `folder`; errors say `where` it was named and what is wrong."""
    card = folder / CARD
    try:
        text = card.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserInputError(
            f"{where}: {folder} has no {CARD}: not an adapter made by `remora train`"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"{where}: {card}: cannot read the adapter card: {exc}") from exc
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to parse
        detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise UserInputError(f"{where}: {card}: not an adapter card: not JSON ({detail})") from None
    try:
        adapter = Adapter(folder, AdapterCard.model_validate(data))
    except ValidationError as exc:
        raise UserInputError(
            f"{where}: {card}: not an adapter card made by `remora train`: {_problems(exc, data)}"
        ) from None
    if not adapter.gguf.is_file():
        raise UserInputError(f"{where}: {adapter.gguf} is missing")
    return adapter


_SHOWN_PROBLEMS = 8
"""A card of a thousand unknown keys is said in one line, not a thousand."""


def _problems(exc: ValidationError, data: object) -> str:
    """pydantic's errors in a config error's words (remora.config.yamlfile): the missing keys in one
    list, then each other key and what is wrong with it."""
    if not isinstance(data, dict):
        return f"a JSON object is expected, not {type(data).__name__}"
    errors = exc.errors()
    missing = [format_loc(error["loc"]) for error in errors if error["type"] == "missing"]
    problems = [f"missing keys: {', '.join(missing)}"] if missing else []
    problems += [
        f"{format_loc(error['loc'])}: {describe_error(error, AdapterCard)}"
        for error in errors
        if error["type"] != "missing"
    ]
    more = len(problems) - _SHOWN_PROBLEMS
    return "; ".join(problems[:_SHOWN_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")


def write_card(folder: Path, card: AdapterCard) -> None:
    partial = folder / (CARD + ".partial")
    partial.write_text(card.model_dump_json(indent=2) + "\n", encoding="utf-8")
    partial.replace(folder / CARD)
