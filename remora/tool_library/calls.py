"""Calls a model proposes by continuing code, and where the parenthesis that closes one is."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

Draft = Callable[[str, list[str], int, Sequence[float]], Awaitable[list[str]]]
"""The job's model continuing a prompt once per temperature, decoded together where the engine
can: (prompt, stop, max_tokens, temperatures) -> one text per temperature."""


def closing_call(text: str) -> str | None:
    """`text` (what follows `name(`) cut at the parenthesis that closes the call, or None when
    it never closes. Brackets inside string literals do not count."""
    depth = 1
    quote = ""
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif text.startswith(quote, index):
                index += len(quote) - 1
                quote = ""
        elif text.startswith(('"""', "'''"), index):
            quote = text[index : index + 3]
            index += 2
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return text[:index]
        index += 1
    return None


async def propose_calls(
    source: str,
    name: str,
    temperatures: Sequence[float],
    max_tokens: int,
    draft: Draft,
) -> list[str]:
    """Distinct calls of `name` the job's model proposes by continuing a test's first line,
    `result = name(`, after the module's own source (what base models have seen after a module
    most often), once per temperature; none when the model could not be asked."""
    prompt = source.rstrip() + "\n\n\ndef test_" + name + "():\n    result = " + name + "("
    found = await continued_arguments(prompt, draft, temperatures, max_tokens)
    return [name + "(" + arguments + ")" for arguments in found]


async def continued_arguments(
    prompt: str,
    draft: Draft,
    temperatures: Sequence[float],
    max_tokens: int = 48,
) -> list[str]:
    """The distinct argument lists the model writes continuing `prompt` (which ends inside a
    call's opening parenthesis), once per temperature (the drafts of one request), each cut
    where the call closes; none when the model could not be asked."""
    if not temperatures:
        return []
    try:
        texts = await draft(prompt, ["\n"], max_tokens, temperatures)
    except Exception:  # the model could not be asked: the calls found elsewhere stand
        return []
    found: list[str] = []
    for text in texts:
        arguments = closing_call(text)
        if arguments is not None and arguments.strip() not in found:
            found.append(arguments.strip())
    return found
