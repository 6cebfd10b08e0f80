"""Model profiles: how to ask each model family for tool calls and force the final one.

FunctionGemma behind a stock vLLM must not get `tool_choice="required"` or a named choice: vLLM
then forces plain JSON instead of the model's native call syntax and the model degrades. So
there every turn uses "auto", and the last turn offers only `submit_result`. Remora's server kit
(server/) constrains forced calls in FunctionGemma's own syntax, so there, as with models that
handle JSON-constrained calls well, every turn is "required" and the last names submit_result.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel

from remora.agents.definition import Agent
from remora.agents.toolscript import SUBMIT_RESULT
from remora.config.settings import ModelProfileName
from remora.protocol.functiongemma import gbnf_grammar
from remora.protocol.messages import ToolChoice


class ModelProfile(BaseModel):
    name: ModelProfileName
    tool_choice: Literal["auto", "required"]
    final_turn: Literal["only_submit_tool", "named_choice"]
    grammar: bool = False
    """Send a native-call grammar with each request when runner.grammar is auto."""
    parallel_calls: bool = False
    """Several calls in one reply. Off for FunctionGemma (and the embedded engine): a 270M
    model asked for several repeats its write and submit_result until max_tokens; with one
    call the reply ends where its call ends."""

    def uses_grammar(self, setting: str) -> bool:
        return setting == "on" or (setting == "auto" and self.grammar)

    def request_tools(
        self, agent: Agent, *, last_turn: bool
    ) -> tuple[list[dict[str, Any]], ToolChoice]:
        if not last_turn:
            return agent.tool_schemas(), self.tool_choice
        if self.final_turn == "only_submit_tool":
            return [agent.submit_schema()], self.tool_choice
        return agent.tool_schemas(), {"type": "function", "function": {"name": SUBMIT_RESULT}}


PROFILES = {
    ModelProfileName.FUNCTIONGEMMA: ModelProfile(
        name=ModelProfileName.FUNCTIONGEMMA,
        tool_choice="auto",
        final_turn="only_submit_tool",
        grammar=True,
    ),
    ModelProfileName.FUNCTIONGEMMA_KIT: ModelProfile(
        name=ModelProfileName.FUNCTIONGEMMA_KIT, tool_choice="required", final_turn="named_choice"
    ),
    ModelProfileName.OPENAI: ModelProfile(
        name=ModelProfileName.OPENAI,
        tool_choice="required",
        final_turn="named_choice",
        parallel_calls=True,
    ),
}


@lru_cache(maxsize=256)
def _grammar(tools_json: str, parallel: bool) -> str:
    return gbnf_grammar(json.loads(tools_json), tool_choice="required", parallel=parallel)


def call_grammar(tools: list[dict[str, Any]], *, parallel: bool) -> str:
    """A grammar admitting well-formed native calls to `tools`, exactly one unless `parallel`
    (built once per tool set: every job of an agent offers the same ones)."""
    return _grammar(json.dumps(tools, sort_keys=True), parallel)


def resolve_profile(name: ModelProfileName, *model_names: str) -> ModelProfile:
    """`auto` picks FunctionGemma's profile when any of the model names mentions gemma."""
    if name is ModelProfileName.AUTO:
        is_gemma = any("gemma" in model.lower() for model in model_names)
        name = ModelProfileName.FUNCTIONGEMMA if is_gemma else ModelProfileName.OPENAI
    return PROFILES[name]
