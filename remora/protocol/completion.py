"""Text completion: the job's own model continues a piece of text (a docstring after its
opening quotes, a call after `assert f(`). The chat loop chooses actions; completion writes
prose and values, which the tool verifies before anything counts.

Base models continue code far better than they fill chat arguments (docs/WRITING_AGENTS.md,
"Completion"): on vLLM this is `/v1/completions` with the agent's model or adapter, in the
embedded engine a raw continuation of the prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Protocol, runtime_checkable

import anyio
import anyio.abc
from pydantic import BaseModel, Field

from remora.findings.results import Usage
from remora.protocol.messages import MalformedReply

MAX_COMPLETION_TOKENS = 256
"""What one completion may ask for: prose and values are short; a run-on reply is not."""
MAX_STOPS = 8
MAX_SCORED_CHARS = 20_000
"""A scored continuation is a function's code, not a file."""
MAX_DRAFTS = 4
"""Continuations of one prompt asked for at once (a job drafts a sentence or a call at three
temperatures)."""


class CompletionRequest(BaseModel):
    prompt: str
    stop: list[str] = Field(default_factory=list, max_length=MAX_STOPS)
    """The continuation ends before the first of these (not included)."""
    max_tokens: int = Field(default=64, ge=1, le=MAX_COMPLETION_TOKENS)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    score: str | None = Field(default=None, max_length=MAX_SCORED_CHARS)
    """Score instead of generating: how likely the model finds `score` as the continuation of
    `prompt` (`Completion.logprob`), e.g. a function's code after a candidate docstring. On a
    server: `/v1/completions` with `echo` and `logprobs`; nothing is generated that counts."""


class DraftsRequest(BaseModel):
    """One prompt continued once per temperature: a job's drafts of one sentence or call. An
    engine that can decodes them together (the embedded engine: one batch, the prompt evaluated
    once); any other model is asked once per temperature (`complete_drafts`)."""

    prompt: str
    stop: list[str] = Field(default_factory=list, max_length=MAX_STOPS)
    max_tokens: int = Field(default=64, ge=1, le=MAX_COMPLETION_TOKENS)
    temperatures: list[Annotated[float, Field(ge=0.0, le=2.0)]] = Field(
        min_length=1, max_length=MAX_DRAFTS
    )

    def each(self) -> list[CompletionRequest]:
        """The same drafts as one request per temperature."""
        return [
            CompletionRequest(
                prompt=self.prompt, stop=self.stop, max_tokens=self.max_tokens, temperature=t
            )
            for t in self.temperatures
        ]


class Completion(BaseModel):
    text: str
    finish: str = "stop"
    """"stop" (a stop string or the model's end) or "length" (max_tokens)."""
    usage: Usage = Field(default_factory=Usage)
    logprob: float | None = None
    """For a `score` request: the sum of the continuation's token log-probabilities."""
    scored_tokens: int = 0
    """For a `score` request: how many tokens that sum covers."""


@runtime_checkable
class CompletionModel(Protocol):
    async def complete_text(self, *, model: str, request: CompletionRequest) -> Completion:
        """Continue `request.prompt` with `model` (the agent's model or adapter)."""
        ...


@runtime_checkable
class DraftingModel(Protocol):
    async def complete_drafts(self, *, model: str, request: DraftsRequest) -> list[Completion]:
        """One continuation of `request.prompt` per temperature, in their order."""
        ...


async def complete_drafts(
    model: CompletionModel,
    name: str,
    request: DraftsRequest,
    answered: Callable[[Completion], None] = lambda completion: None,
) -> list[Completion]:
    """The drafts `request` asks for: decoded together where the model can, else asked for
    at once, one request per temperature (a server such as vLLM batches them itself).
    `answered` sees every completion the model made, also when another draft then fails (its
    tokens were spent); the first failure cancels the drafts still asked and is raised."""
    if isinstance(model, DraftingModel):
        drafts = await model.complete_drafts(model=name, request=request)
        for draft in drafts:
            answered(draft)
        return drafts
    requests = request.each()
    answers: list[Completion | None] = [None] * len(requests)
    failures: list[Exception] = []

    async def ask(index: int, group: anyio.abc.TaskGroup) -> None:
        try:
            answer = await model.complete_text(model=name, request=requests[index])
        except Exception as error:  # raised below as itself, not in a task group's group
            failures.append(error)
            group.cancel_scope.cancel()
        else:
            answers[index] = answer
            answered(answer)

    async with anyio.create_task_group() as group:
        for index in range(len(requests)):
            group.start_soon(ask, index, group)
    if failures:
        raise failures[0]
    return [answer for answer in answers if answer is not None]


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """`text` up to the first stop string, and whether one was found."""
    cuts = [at for at in (text.find(stop) for stop in stops if stop) if at != -1]
    return (text[: min(cuts)], True) if cuts else (text, False)


def parse_completion(
    data: object, stops: list[str], scored: tuple[int, int] | None = None
) -> Completion:
    """An OpenAI `/completions` reply as a Completion, or MalformedReply saying what is wrong.
    The stop strings are applied again: a server may include them, or ignore them.
    `scored`: the reply echoes a scored text whose continuation spans these characters
    (`completion_body` of a `score` request): its tokens' log-probabilities are summed."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply("a completion reply needs a non-empty 'choices' list of objects")
    if scored is not None:
        return _scored(choices[0], scored, data)
    text = choices[0].get("text")
    if not isinstance(text, str):
        raise MalformedReply("choices[0].text must be a string")
    text, stopped = cut_at_stop(text, stops)
    usage = data.get("usage") if isinstance(data, dict) else None
    counts = usage if isinstance(usage, dict) else {}
    finish = "stop" if stopped or choices[0].get("finish_reason") != "length" else "length"
    return Completion(
        text=text,
        finish=finish,
        usage=Usage(
            prompt_tokens=_count(counts.get("prompt_tokens")),
            completion_tokens=_count(counts.get("completion_tokens")),
        ),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _scored(choice: dict[str, object], span: tuple[int, int], data: object) -> Completion:
    """The echoed text's token log-probabilities (OpenAI's legacy `logprobs` object: tokens,
    token_logprobs, text_offset) summed over the tokens that start within `span`: the
    continuation, not the prompt before it nor the one token generated after it."""
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        raise MalformedReply("a scoring reply needs choices[0].logprobs (echo with logprobs)")
    values, offsets = logprobs.get("token_logprobs"), logprobs.get("text_offset")
    if not isinstance(values, list) or not isinstance(offsets, list) or len(values) != len(offsets):
        raise MalformedReply("choices[0].logprobs needs token_logprobs and text_offset lists")
    total, count = 0.0, 0
    for value, offset in zip(values, offsets, strict=True):
        if not isinstance(offset, int) or not span[0] <= offset < span[1]:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise MalformedReply(f"token log-probability {value!r} is not a number")
        total += min(float(value), 0.0)
        count += 1
    usage = data.get("usage") if isinstance(data, dict) else None
    counts = usage if isinstance(usage, dict) else {}
    return Completion(
        text="",
        logprob=total,
        scored_tokens=count,
        usage=Usage(prompt_tokens=_count(counts.get("prompt_tokens")), completion_tokens=0),
    )
