"""Which probed calls become test cases: the few that cover the most of the target's branches.

The probe (call_probe.py) ran every candidate twice, in two processes. A call is kept only if
both runs saw the same thing, it changed no module- or class-level state (other tests would see
it), and what it did can be asserted: a literal return value, the public state of a returned
object of the module's classes, an argument it mutated, the instance's state after a method
call, or an exception worth pinning. `TypeError`, `AttributeError` and their like are pinned
only where the module raises them itself (`raise TypeError(...)`): raised from inside an
expression they say the argument contradicts its use, which is the candidate's fault, not the
function's behaviour. So does a `KeyError` of a number (a mapping read by position). Environment
errors (`OSError` and its subclasses) likewise.

Among the kept calls a greedy cover picks, while a call adds branch arcs no earlier pick
covered: calls that return before calls that raise, at most one per raise site, calls people
wrote (call sites, doctests) and the model proposed before values built from types.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

MAX_CASES = 12
"""Cases per target: enough for its branches; more is noise a reviewer deletes (calls that only
return a value become rows of one parametrized test)."""
CONTRADICTION_ERRORS = frozenset(
    {"TypeError", "AttributeError", "NameError", "UnboundLocalError", "RecursionError"}
)
"""Raised by an expression (not a `raise` of the module), these say the arguments contradict
the parameters' use: never pinned."""
ENVIRONMENT_ERRORS = frozenset({"OSError", "MemoryError", "SystemError"})
"""Bases of exceptions that depend on the machine (files, memory), not only on the call."""
ORIGIN_RANK = {"call site": 0, "doctest": 0, "model": 1, "boundary": 2, "types": 2, "values": 3,
               "sequence": 3}  # fmt: skip
OTHER_VALUES = 8
"""Returns of further values (same branches, other results) kept at most."""
PER_PARAMETER = 5
"""Of those, varying one parameter at most."""
READ_BACK = 2
"""Of those, calls on an instance other calls filled first (`flags.add('abc')`, then
`len(flags) == 1`), whatever their arguments: the empty instance's `0` alone pins little."""
EMPTY = frozenset({"[]", "{}", "()", "''", "set()", "b''"})
"""Return values that pin little: a call that returns something else is preferred."""
BOUNDARY_CASES = 3
"""Calls on a compared literal or beside it that return, added after the branch cover: the
same branches, but they tell `<` from `<=` and 100 from 101."""


def select_calls(
    candidates: Sequence[Mapping[str, Any]],
    runs: Sequence[Sequence[Mapping[str, Any]]],
    module_classes: Sequence[str],
    module_name: str,
    target: str = "",
) -> dict[str, Any]:
    """{"chosen": [{"candidate", "seen"}...], "dropped": [reason...], "state": [names], "tried"}
    for `candidates` and the probe's observations of them in each of `runs` (same order)."""
    usable: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    drawn: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    dropped: list[str] = []
    state: list[str] = []
    for index, candidate in enumerate(candidates):
        seen = [run[index] for run in runs]
        first = seen[0]
        if any(other.get("varies") for other in seen):
            why = "returns what random numbers or the clock give"
            dropped.append(f"{call_text(candidate, target)}: {why}")
            kind = kind_only(first)
            if kind and all(kind_only(other) == kind for other in seen):
                drawn.append((candidate, {**first, "value": None, "kind_only": True}))
            continue
        if any(stable(other) != stable(first) for other in seen[1:]):
            dropped.append(f"{call_text(candidate, target)}: behaves differently from run to run")
            continue
        if first.get("files_changed"):
            changed = [str(name) for name in first["files_changed"]][:3]
            dropped.append(f"{call_text(candidate, target)}: writes files ({', '.join(changed)})")
            continue
        if first.get("state_changed"):
            changed = [str(name) for name in first["state_changed"]]
            state += [name for name in changed if name not in state]
            names = ", ".join(changed)
            dropped.append(
                f"{call_text(candidate, target)}: changes state other tests see ({names})"
            )
            continue
        if assertable(first, module_classes, module_name):
            usable.append((candidate, first))
    # Of a call that only ever returns None (a mutator), the calls that changed nothing pin
    # nothing beside those that did: addict's `d['a'] = 3` on a Dict holding `'a': 3` took
    # every branch, so the cover chose it alone and no test was written.
    returns = [seen for _, seen in usable if seen.get("outcome") == "returned"]
    if all(seen.get("value") == "None" for seen in returns):
        usable = [item for item in usable if not unseen(item[1])] or usable
    # Where nothing else can be pinned, what a call that draws at random returns every time:
    # its kind (petname's `name()`, a word of its list: `return None` is then caught).
    chosen = cover(on_the_plainest(usable)) or drawn[:1]
    # `assert color.set_hue(3) is None` when every call returned None: a test of nothing.
    returned = [seen for seen in runs[0] if seen.get("outcome") == "returned"] if runs else []
    if chosen and all(unseen(seen) for _, seen in chosen) and all(map(unseen, returned)):
        why = "every call returned None and changed nothing a test can see"
        dropped.append(f"{call_text(chosen[0][0], target)}: {why}")
        chosen = []
    return {
        "chosen": [{"candidate": dict(c), "seen": dict(s)} for c, s in chosen],
        "dropped": dropped,
        "state": state,
        "tried": len(candidates),
    }


def on_the_plainest(
    usable: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """The calls but those on an instance built with arguments where the same call on the
    bare one (`Retrying()`) saw the same, branch arcs and all: its arguments pin nothing, and
    a reviewer deletes them (retrying's `fixed_sleep(3, 10) == 1000` was kept on a `Retrying`
    given a module function for each of its seven hooks)."""

    def call(candidate: Mapping[str, Any]) -> str:
        instance = str(candidate.get("instance") or "")
        parts = ("arguments", "setup", "then")
        return repr((instance.split("(", 1)[0], *(candidate.get(part) for part in parts)))

    bare = {
        call(candidate): stable(seen)
        for candidate, seen in usable
        if str(candidate.get("instance") or "").endswith("()")
    }
    return [
        (candidate, seen)
        for candidate, seen in usable
        if str(candidate.get("instance") or "()").endswith("()")
        or bare.get(call(candidate)) != stable(seen)
    ]


DRAWN_KINDS = frozenset({"str", "int", "float", "bytes", "bool", "list", "tuple", "dict", "set"})
"""Builtin kinds a call's result is pinned by where it varies from call to call."""


def kind_only(seen: Mapping[str, Any]) -> str:
    """The builtin kind of what a call returned that changed nothing else, or ""."""
    quiet = not (seen.get("state_changed") or seen.get("files_changed") or seen.get("mutated"))
    returned = seen.get("outcome") == "returned" and not seen.get("generator")
    kind = str(seen.get("type"))
    return kind if quiet and returned and kind in DRAWN_KINDS else ""


def unseen(seen: Mapping[str, Any]) -> bool:
    """A call that returned None and left nothing else to assert."""
    quiet = not (seen.get("attributes") or seen.get("mutated") or seen.get("instance"))
    return seen.get("outcome") == "returned" and seen.get("value") == "None" and quiet


def stable(seen: Mapping[str, Any]) -> tuple[Any, ...]:
    """What must repeat for a call to be pinned."""
    keys = ("outcome", "value", "exception", "message", "site", "arcs", "mutated", "instance")
    return (*(repr(seen.get(key)) for key in keys), repr(seen.get("attributes")))


def assertable(seen: Mapping[str, Any], module_classes: Sequence[str], module_name: str) -> bool:
    if seen.get("outcome") == "returned":
        return bool(
            seen.get("value") is not None
            or seen.get("attributes")
            or seen.get("mutated")
            or seen.get("instance")
        )
    if seen.get("outcome") != "raised":
        return False  # a timeout, a crash, a constructor that failed
    name = str(seen.get("exception"))
    bases = set(seen.get("exception_bases") or [])
    explicit = bool(seen.get("site_is_raise"))
    if (name in CONTRADICTION_ERRORS or bases & ENVIRONMENT_ERRORS) and not explicit:
        return False
    if name == "KeyError" and str(seen.get("message")).lstrip("-").isdigit() and not explicit:
        return False  # `point[0]` of a dict given where a sequence is read: the call's fault
    if name == "ValueError" and seen.get("site_unpacks_name") and not explicit:
        return False  # `char, xlate = item` of a word given where pairs are read: the same
    return bool(bases) or (seen.get("exception_module") == module_name and name in module_classes)


def cover(
    usable: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """The greedy branch cover (or, without coverage data, one call per distinct outcome)."""
    with_arcs = all(seen.get("arcs") is not None for _, seen in usable)
    chosen: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    covered: set[tuple[int, int]] = set()
    outcomes: set[str] = set()
    sites: set[str] = set()
    left = list(usable)
    while left and len(chosen) < MAX_CASES:
        best = max(left, key=lambda item: gain(item, covered, outcomes, with_arcs))
        left.remove(best)
        if gain(best, covered, outcomes, with_arcs)[0] == 0:
            break
        seen = best[1]
        site = f"{seen.get('exception')}@{seen.get('site')}"
        if seen.get("outcome") == "raised":
            if site in sites:
                continue
            sites.add(site)
        chosen.append(best)
        covered |= {(a, b) for a, b in seen.get("arcs") or []}
        outcomes.add(outcome_key(seen))
    # Then what the branch cover cannot tell apart: another raise site on a covered line (a
    # conversion that fails), returns on a boundary, and returns of other values (the same
    # branches computing something else: what tells `+` from `-`).
    for item in usable:
        site = f"{item[1].get('exception')}@{item[1].get('site')}"
        if item[1].get("outcome") == "raised" and site not in sites and len(chosen) < MAX_CASES:
            sites.add(site)
            chosen.append(item)
    edges = [
        item
        for item in usable
        if item not in chosen
        and item[0].get("origin") == "boundary"
        and item[1].get("outcome") == "returned"
    ]
    chosen += edges[: max(0, min(BOUNDARY_CASES, MAX_CASES - len(chosen)))]
    return chosen + other_values(usable, chosen)


def other_values(
    usable: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    chosen: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Returns of other values, one parameter varied from the first chosen call, or on an
    instance other calls filled first: first those that rewrite their text argument in a way
    no chosen call does (`'person'` -> `'people'` beside `'abc'` -> `'abcs'`: another rule of
    the function's tables), then any other value."""
    values = {str(seen.get("value")) for _, seen in chosen}
    rewrites = {rewrite(candidate, seen) for candidate, seen in chosen}
    reference = next((split_arguments(str(c.get("arguments"))) for c, _ in chosen), [])
    varied: dict[int, int] = {}
    read_back = 0
    added: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    for only_new_rewrites in (True, False):
        for item in usable:
            if len(chosen) + len(added) >= MAX_CASES or len(added) >= OTHER_VALUES:
                return added
            value = str(item[1].get("value"))
            parts = split_arguments(str(item[0].get("arguments")))
            differing = {
                i for i, part in enumerate(parts) if i >= len(reference) or part != reference[i]
            }
            # A new rewrite is worth a row whichever parameter it varies.
            often = any(varied.get(index, 0) >= PER_PARAMETER for index in differing)
            fresh = value != "None" and value not in values
            change = rewrite(*item)
            if only_new_rewrites and (change is None or change in rewrites):
                continue
            if often and not only_new_rewrites:
                continue
            filled = item[0].get("origin") == "sequence" and read_back < READ_BACK
            if item[1].get("outcome") == "returned" and fresh and (len(differing) == 1 or filled):
                read_back += filled
                values.add(value)
                rewrites.add(change)
                for index in differing:
                    varied[index] = varied.get(index, 0) + 1
                added.append(item)
    return added


def rewrite(candidate: Mapping[str, Any], seen: Mapping[str, Any]) -> tuple[str, str] | None:
    """How a call that takes one text and returns one changed it: what differs after their
    common beginning (`'person'` -> `'people'` is `('rson', 'ople')`), or None for other calls.
    Case counts: a word in capitals that stays in capitals is a rule of its own."""
    parts = split_arguments(str(candidate.get("arguments")))
    try:
        texts = [ast.literal_eval(part) for part in parts]
        result = ast.literal_eval(str(seen.get("value")))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    given = [text for text in texts if isinstance(text, str)]
    if len(given) != 1 or not isinstance(result, str):
        return None
    common = next(
        (i for i, (a, b) in enumerate(zip(given[0], result, strict=False)) if a != b),
        min(len(given[0]), len(result)),
    )
    return given[0][common:], result[common:]  # 'APPLE' -> 'APPLES' keeps case: another rule


def gain(
    item: tuple[Mapping[str, Any], Mapping[str, Any]],
    covered: set[tuple[int, int]],
    outcomes: set[str],
    with_arcs: bool,
) -> tuple[int, ...]:
    """How much a call adds, then the tie-breakers: returning before raising, written by people
    or the model before built from types, more distinct arguments, shorter."""
    candidate, seen = item
    arcs = {(a, b) for a, b in seen.get("arcs") or []}
    new = len(arcs - covered) if with_arcs else int(outcome_key(seen) not in outcomes)
    returned = int(seen.get("outcome") == "returned")
    rank = ORIGIN_RANK.get(str(candidate.get("origin")), 2)
    # Distinct argument values (not `f(1, 1, 1)`), and an instance built with arguments (not
    # on a constructor's defaults).
    spread = len(set(split_arguments(str(candidate.get("arguments", "")))))
    spread += int(not str(candidate.get("instance") or "").endswith("()"))
    # Then a result with something in it (an empty one pins little, None with nothing else
    # to assert nothing: a mutator's effect read back after it is what to keep), then the
    # shorter call.
    attributes = seen.get("attributes") or {}
    hollow = bool(attributes) and all(str(text) in EMPTY for text in attributes.values())
    full = int(str(seen.get("value")) not in EMPTY and not hollow and not unseen(seen))
    return (new, returned, -rank, spread, full, -len(call_text(candidate)))


def outcome_key(seen: Mapping[str, Any]) -> str:
    if seen.get("outcome") == "raised":
        return f"raised {seen.get('exception')} at {seen.get('site')}"
    return f"returned {seen.get('type')} {seen.get('value') if seen.get('type') == 'bool' else ''}"


def call_text(candidate: Mapping[str, Any], target: str = "") -> str:
    """The call as a test would write it: `f(1, 2)`, `Stock({}).add('a', 1)`."""
    instance = candidate.get("instance")
    name = target.rpartition(".")[2]
    prefix = f"{instance}.{name}" if instance else name
    return f"{prefix}({candidate.get('arguments', '')})"


def split_arguments(text: str) -> list[str]:
    """The top-level comma-separated parts of an argument list (for telling `f(1, 1, 1)` from
    `f(1, 2, 3)`; quotes and brackets respected)."""
    parts: list[str] = []
    depth = 0
    quote = ""
    current = ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += char
    if current.strip():
        parts.append(current.strip())
    return parts
