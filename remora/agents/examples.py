"""Worked examples in an agent definition, checked at load time: each shows a call the model
could make, with arguments its schema accepts and a result for every call but submit_result."""

from __future__ import annotations

from typing import Any

import jsonschema
from pydantic import Field

from remora.agents.toolscript import SUBMIT_RESULT, InputSpec, Strict, Tool, inputs_schema
from remora.config.yamlfile import YamlFile
from remora.errors import UserInputError


class ExampleTurn(Strict):
    call: str
    """A tool of the agent, or submit_result."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    """What the tool answered (a string, or JSON); not given for submit_result."""


class Example(Strict):
    """A worked example shown to the model before the real job, in its native format."""

    context: str
    """The example job's first user message, as node_context would render it."""
    turns: list[ExampleTurn] = Field(min_length=1, max_length=8)


def check_examples(
    examples: list[Example],
    submit_inputs: dict[str, InputSpec],
    document: YamlFile,
    tools: dict[str, Tool],
) -> None:
    """Examples show calls the model could make: a tool of the agent or submit_result, with
    arguments its schema accepts, and a result for every call but submit_result."""
    submit = jsonschema.Draft202012Validator(
        {**inputs_schema(submit_inputs), "additionalProperties": False}
    )
    for number, example in enumerate(examples):
        for index, turn in enumerate(example.turns):
            where = document.where(["examples", number, "turns", index])
            name = f"examples.{number}.turns.{index}"
            if turn.call == SUBMIT_RESULT:
                validator, needs_result = submit, False
            elif turn.call in tools:
                validator, needs_result = tools[turn.call].validator, True
            else:
                known = ", ".join([*tools, SUBMIT_RESULT])
                raise UserInputError(
                    f"{where}: {name}.call: no tool {turn.call!r}; the tools: {known}"
                )
            error = jsonschema.exceptions.best_match(validator.iter_errors(turn.arguments))
            if error is not None:
                raise UserInputError(f"{where}: {name}.arguments: {error.message}")
            if needs_result and turn.result is None:
                raise UserInputError(
                    f"{where}: {name}.result: what {turn.call} answered is missing"
                )
            if not needs_result and turn.result is not None:
                raise UserInputError(
                    f"{where}: {name}.result: submit_result has no result; remove it"
                )
