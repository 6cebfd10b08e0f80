"""vLLM tool-parser plugin: FunctionGemma's native call format, every value type, streaming,
and native-format forcing for ``tool_choice="required"`` and named tool choice.

Built and checked against vLLM 0.32.0 (the ``ToolParser`` / ``ToolParserManager`` interface in
``vllm/tool_parsers/abstract_tool_parser.py`` and ``register_vllm_structural_tag`` in
``vllm/tool_parsers/structural_tag_registry.py``). Load it with::

    vllm serve google/functiongemma-270m-it \\
        --enable-auto-tool-choice \\
        --tool-parser-plugin server/remora_functiongemma_parser.py \\
        --tool-call-parser remora_functiongemma \\
        --chat-template server/functiongemma_chat_template.jinja \\
        --chat-template-content-format string

This file only adapts vLLM's types. Rendering, parsing, streaming and the grammars live in
``remora/protocol/functiongemma.py`` (standard library only), which this plugin loads from
``functiongemma.py`` beside it (the server image copies it there), else from the checkout it sits
in, else from an installed ``remora``. One source, so the server and Remora cannot disagree.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

PARSER_NAME = "remora_functiongemma"
"""The ``--tool-call-parser`` name, also the structural-tag model key."""
VLLM_VERSION = "0.32.0"
"""The vLLM release this plugin targets (see server/Dockerfile)."""


def load_protocol() -> ModuleType:
    """Remora's FunctionGemma protocol module, without importing the rest of Remora."""
    here = Path(__file__).resolve().parent
    for path in (
        here / "functiongemma.py",
        here.parent / "remora" / "protocol" / "functiongemma.py",
    ):
        if path.is_file():
            name = "_remora_functiongemma_protocol"
            loaded = sys.modules.get(name)
            if loaded is not None and getattr(loaded, "__file__", None) == str(path):
                return loaded
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # dataclasses look their module up while the file runs
            spec.loader.exec_module(module)
            return module
    from remora.protocol import functiongemma

    return functiongemma


fg = load_protocol()

# vLLM's side: only names that exist in vLLM 0.32.0.
from vllm.entrypoints.generate.base.protocol import (  # noqa: E402
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.logger import init_logger  # noqa: E402
from vllm.renderers.chat_utils import make_tool_call_id  # noqa: E402
from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager  # noqa: E402
from vllm.tool_parsers.structural_tag_registry import register_vllm_structural_tag  # noqa: E402
from xgrammar import StructuralTag  # noqa: E402

logger = init_logger(__name__)


@register_vllm_structural_tag(PARSER_NAME)
def functiongemma_structural_tag(
    tools: list[Any],
    builtin_tools: list[Any],
    tool_choice: str,
    reasoning: bool,
    token_suffix: str = "",
) -> StructuralTag:
    """Calls constrained in FunctionGemma's own syntax. vLLM has already filtered ``tools`` to
    the named tool for a forced choice and set each tool's ``strict`` from
    ``--tool-strict-level`` and the request."""
    del builtin_tools, reasoning, token_suffix
    dumped = [tool.model_dump() for tool in tools]
    return StructuralTag.model_validate(fg.structural_tag(dumped, tool_choice))


@ToolParserManager.register_module(PARSER_NAME)
class RemoraFunctionGemmaToolParser(ToolParser):
    """FunctionGemma calls to OpenAI tool calls, typed values intact."""

    structural_tag_model = PARSER_NAME
    # Never let vLLM force "required"/named choice into plain JSON: this parser extracts those
    # calls from the native syntax, constrained by the structural tag above.
    supports_required_and_named = False

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._stream = fg.StreamingParser()

    def adjust_request(self, request: Any) -> Any:
        request = super().adjust_request(request)
        if request.tools and request.tool_choice != "none":
            # The call markers are special tokens: keep them in the text we parse.
            request.skip_special_tokens = False
            # After its calls the model would go on to write the tool's result itself.
            if hasattr(request, "stop"):
                stop = request.stop
                stops = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
                wanted = list(fg.STOP_SEQUENCES)
                if getattr(request, "parallel_tool_calls", True) is False:
                    # One call per reply: end where the first call ends. The marker stays in
                    # the text (the parser needs it); so does the other stop, which it reads
                    # as the end of the calls.
                    wanted.append(fg.END_FUNCTION_CALL)
                    request.include_stop_str_in_output = True
                for sequence in wanted:
                    if sequence not in stops:
                        stops.append(sequence)
                request.stop = stops
        return request

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        parsed = fg.parse_output(model_output)
        for error in parsed.errors:
            logger.warning("FunctionGemma output has a broken call: %s", error)
        if not parsed.calls:
            content = parsed.content if parsed.content.strip() else None
            return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=content)
        calls = [
            ToolCall(
                type="function",
                function=FunctionCall(name=call.name, arguments=call.arguments_json()),
            )
            for call in parsed.calls
        ]
        content = parsed.content.strip() or None
        return ExtractedToolCallInformation(tools_called=True, tool_calls=calls, content=content)

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> DeltaMessage | None:
        update = self._stream.update(current_text)
        if not update:
            # An empty delta, not None: vLLM skips a step whose delta is None, and that step's
            # log-probabilities with it. Held back are `<start_function_call>call:NAME`, the
            # very tokens Remora reads the model's confidence in its tool choice from.
            return DeltaMessage()
        return DeltaMessage(
            content=update.content or None,
            tool_calls=[
                DeltaToolCall(
                    index=delta.index,
                    id=make_tool_call_id() if delta.name is not None else None,
                    type="function" if delta.name is not None else None,
                    function=DeltaFunctionCall(name=delta.name, arguments=delta.arguments),
                )
                for delta in update.tool_calls
            ],
        )

    def get_remaining_unstreamed_args(self) -> str:
        """vLLM appends this to the last call when the stream ends."""
        return self._stream.remaining_arguments()
