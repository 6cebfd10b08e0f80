"""The model's confidence in the tool it chose, from the log-probabilities of its reply.

A call's confidence is the probability the model gave to the tokens that spell the tool's name
after `call:` in its native output (FunctionGemma writes `call:NAME{...}`): the product of
their probabilities, each under the model's own distribution before any grammar (vLLM's
default `raw_logprobs`; the embedded engine computes the same). A token shared with the
text around the name (`:find`, `_todos{`) counts: it carries the choice too. Low confidence
means the model was torn between tools, or preferred something a grammar did not allow.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Sequence

from remora.protocol.messages import TokenLogprob, ToolCall


def call_confidence(logprobs: Sequence[TokenLogprob], calls: Sequence[ToolCall]) -> float | None:
    """The lowest confidence among `calls` (each found in turn in the tokens' text), or None
    when a call's name cannot be found there (a server that rewrote the output)."""
    text = "".join(token for token, _ in logprobs)
    ends = list(itertools.accumulate(len(token) for token, _ in logprobs))
    lowest: float | None = None
    searched_from = 0
    for call in calls:
        found = re.compile(rf"call:({re.escape(call.name)})\{{").search(text, searched_from)
        if found is None:
            return None
        start, end = found.span(1)
        searched_from = found.end()
        # Only the tokens that overlap the name, found by bisection: a walk over every token
        # for every call is calls x tokens, which a long reply of many calls makes quadratic.
        first = bisect.bisect_right(ends, start)
        last = bisect.bisect_left(ends, end)
        total = sum(logprob for _, logprob in logprobs[first : last + 1])
        confidence = math.exp(total)
        lowest = confidence if lowest is None else min(lowest, confidence)
    return lowest
