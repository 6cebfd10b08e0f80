"""The scripted model's answer to a scoring request (`CompletionRequest.score`): vLLM's
`/v1/completions` reply with `echo` and `logprobs`."""

from __future__ import annotations

import re
from typing import Any

from remora.models.scripted.replies import DEFAULT_MODEL, Response, json_response


def score_response(body: dict[str, Any], logprob: float, completion_id: str) -> Response:
    """A reply to an `echo` request with `logprobs`, as vLLM gives it: the prompt's tokens
    (here: words with their trailing space) each with `logprob` (the first: None, as it has
    no context), then one generated token."""
    prompt = body["prompt"]
    tokens = re.findall(r"\s*\S+|\s+$", prompt) or [prompt]
    offsets, at = [], 0
    for token in tokens:
        offsets.append(at)
        at += len(token)
    values: list[float | None] = [None] + [min(logprob, 0.0)] * (len(tokens) - 1)
    choice = {
        "index": 0,
        "text": prompt + ".",
        "finish_reason": "length",
        "logprobs": {
            "tokens": [*tokens, "."],
            "token_logprobs": [*values, -1.0],
            "text_offset": [*offsets, len(prompt)],
        },
    }
    payload = {
        "id": completion_id,
        "object": "text_completion",
        "created": 0,
        "model": body.get("model", DEFAULT_MODEL),
        "choices": [choice],
        "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1,
                  "total_tokens": len(tokens) + 1},
    }  # fmt: skip
    return json_response(200, payload)
