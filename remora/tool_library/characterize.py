"""The input generator the test and sample_data agents share: propose, check, probe, choose.

`explore_calls` gathers candidate calls of the job's function or method (call_candidates.py, plus
the model's completions: always, or only for a branch the other calls leave), drops every one
the allow-list refuses (test_cases.parse_test_case), runs the rest twice with the probe in the
OS sandbox (call_probe.py, through `probe`, which the host supplies: this layer runs nothing
itself), and lets call_selection.py keep the few calls that cover the most branches. The test
agent renders them as tests (case_render.py); the sample_data agent keeps the arguments of
calls that returned, so a sample is a call the function accepts.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
import types
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from coverage.parser import PythonParser

from remora.tool_library.call_candidates import candidate_calls
from remora.tool_library.call_prompts import call_prompt, constructor_prompt
from remora.tool_library.call_selection import select_calls, stable
from remora.tool_library.calls import Draft, continued_arguments
from remora.tool_library.candidate import Candidate, find_definition
from remora.tool_library.case_checks import writable
from remora.tool_library.case_render import render_tests
from remora.tool_library.class_shapes import attributes_defined
from remora.tool_library.method_roles import private_definitions
from remora.tool_library.parameter_values import parameters_of
from remora.tool_library.standard_values import STANDARD_VALUES
from remora.tool_library.test_cases import class_bound, parse_test_case

PROBE_SCRIPT = Path(__file__).with_name("call_probe.py")
"""Copied into each probe command's throwaway folder and run there."""
PROBE_RUNS = 2
"""Runs in separate processes: only what every run saw is pinned."""

Probe = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Runs call_probe.py on a request in the sandbox; its result document."""


async def explore_calls(
    *,
    source: str,
    target: str,
    module: str,
    import_root: str,
    project_sources: Mapping[str, str],
    imported_sources: Sequence[str] = (),
    probe: Probe,
    draft: Draft | None,
    temperatures: Sequence[float],
    model: Literal["always", "for branches"] = "always",
) -> dict[str, Any]:
    """What the probe saw of the chosen calls of `target` in the module `source`, with the
    model's proposals among the candidates `model` "always" (realistic inputs: the
    sample_data agent's samples) or only "for branches" the other candidates leave (tests:
    the branch cover decides, and the model adds little where it has nothing left to cover):
    {"tests": [...rendered tests], "samples": [argument dicts of calls that returned],
    "dropped": [reasons], "state": [names of state some call changed], "tried": N,
    "refused": N (candidates the allow-list refused), "coverage": bool}."""
    tree = ast.parse(source)
    owner, _, name = target.rpartition(".")
    definition = find_definition(tree, owner, name)
    if definition is None:  # under an `if`/`try` at the top level: a test may not import it
        why = f"{target} is not defined at the top level of the module (inside a block)"
        empty = {"tests": [], "samples": [], "dropped": [why], "state": [], "coverage": False}
        return empty | {"tried": 0, "refused": 0}
    first = definition.decorator_list[0].lineno if definition.decorator_list else definition.lineno
    lines = [first, definition.end_lineno or definition.lineno]
    helpers = private_definitions(tree, definition)
    request: dict[str, Any] = {
        "module": module,
        "import_root": import_root,
        "function": name,
        "method": name if owner else None,
        # The branches a call covers are counted in the target and the module's private code
        # it reaches (method_roles.private_definitions); the model is asked only for the
        # target's own.
        "lines": [lines, *([h.lineno, h.end_lineno or h.lineno] for h in helpers)],
    }
    classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
    observed: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    coverage = True

    async def probed(checked: list[Candidate]) -> list[list[dict[str, Any]]]:
        """What each probe run saw of each call, probing only calls not seen yet (each call
        runs in a child process of its own: what was seen of one stays true)."""
        nonlocal coverage
        new = [c for c in checked if c.key not in observed]
        if new:
            runs = [
                await probe(request | {"calls": [c.as_dict() for c in new]})
                for _ in range(PROBE_RUNS)
            ]
            coverage = coverage and all(bool(run.get("coverage")) for run in runs)
            for index, candidate in enumerate(new):
                # Only what a test can write is selected for: a state entry named by a key
                # the model chose (`self.__dict__.update(fields)`) is no attribute to pin.
                observed[candidate.key] = [writable(run["results"][index]) for run in runs]
        return [[observed[c.key][i] for c in checked] for i in range(PROBE_RUNS)]

    def candidates_of(
        proposals: Sequence[str] = (),
        constructors: Sequence[str] = (),
        around: Sequence[str] = (),
    ) -> list[Candidate]:
        return candidate_calls(
            source, target, project_sources, proposals, constructors, imported_sources, around
        )

    if model == "always":
        proposals, constructors = await model_proposals(
            source, definition, owner, draft, temperatures
        )
        candidates = candidates_of(proposals, constructors)
    else:
        candidates = candidates_of()
    checked = [candidate for candidate in candidates if allowed(candidate, target, source)]
    runs = await probed(checked)
    chosen = select_calls([c.as_dict() for c in checked], runs, classes, module, target)
    # "for branches": the model is asked only for what the calls found without it leave (a
    # branch none of the chosen calls took, or nothing to pin), and its calls join them, with
    # the variations around the calls that went further than the base call (`further`).
    # Not when other arguments cannot help (`arguments_matter`).
    # Without the model too where the chosen calls reached private code and left branches of
    # it (textwrap's `wrap(text, width)` has none of its own; its `TextWrapper._wrap_chunks`
    # wraps a line of several words only when a narrow width meets a text of several words).
    ask = (
        model == "for branches"
        and arguments_matter(chosen, runs[0] if runs else [], tree)
        and (not coverage or branches_left(source, [lines], chosen["chosen"]))
    )
    deeper = (
        model == "for branches"
        and coverage
        and bool(chosen["chosen"])
        and branches_left(source, request["lines"][1:], chosen["chosen"], reached=True)
    )
    if ask or deeper:
        proposals, constructors = [], []
        if ask:
            # On a receiver the tools built, if one was: the model's constructors are for
            # classes the tools could not build (on pygtrie, the fixed corpus and 17 modules
            # drawn from the pool, bench/README.md "What the model adds", its drafts killed
            # no mutant the tools' calls did not, once a tools' fault was mended).
            built = zip(checked, runs[0] if runs else [], strict=False)
            receiver = next(
                (c.instance for c, seen in built if seen.get("outcome") != "setup_failed"), None
            )
            proposals, constructors = await model_proposals(
                source, definition, owner, draft, temperatures, receiver
            )
        known = {c.key for c in candidates}
        offered = candidates_of(proposals, constructors, further(checked, runs[0]))
        # Without the model's, the variations alone, and a few (each is probed twice).
        added = [c for c in offered if c.key not in known][: None if ask else DEEPER_CALLS]
        if added:
            candidates += added
            checked += [candidate for candidate in added if allowed(candidate, target, source)]
            runs = await probed(checked)
            chosen = select_calls([c.as_dict() for c in checked], runs, classes, module, target)
    parameters = [p.name for p in parameters_of(definition, method=bool(owner))]
    if not checked:
        empty = {"tests": [], "samples": [], "dropped": [], "state": [], "coverage": False}
        return empty | {"tried": 0, "refused": len(candidates)}
    base = next((c.as_dict() for c in checked if c.origin == "types"), None)
    # Samples: the chosen calls that returned first, then every other call that returned and
    # changed nothing others see (a fixture wants valid inputs, not only branch-covering ones).
    returned: list[Any] = []
    repeated = [
        seen
        for index, seen in enumerate(runs[0])
        if all(stable(run[index]) == stable(seen) for run in runs[1:])
        and not seen.get("state_changed")
        and not seen.get("files_changed")
    ]
    accepted = [item["seen"] for item in chosen["chosen"]] + repeated
    for seen in accepted:
        sample = seen.get("sample")
        if seen.get("outcome") == "returned" and sample is not None and sample not in returned:
            returned.append(sample)
    return {
        "tests": render_tests(target, chosen["chosen"], parameters, module, base),
        "samples": returned,
        "dropped": chosen["dropped"],
        "state": chosen["state"],
        "tried": chosen["tried"],
        "refused": len(candidates) - len(checked),
        "coverage": coverage,
    }


DEEPER_CALLS = 24
"""Calls added, at most, where only private code a call reached has branches left."""


def allowed(candidate: Candidate, target: str, source: str) -> bool:
    """Whether the allow-list reads the candidate, each method called on its instance first
    and the one called on what it returned, as exactly the plain call it is."""
    owner = target.rpartition(".")[0]
    calls = [(candidate.case(target), target)]
    steps = zip(candidate.steps(), candidate.setup, strict=True)
    calls += [(text, f"{owner}.{name}") for text, (name, _) in steps]
    calls += candidate.followed(target)
    for text, function in calls:
        try:
            case = parse_test_case(text, function, source)
        except ValueError:
            return False
        if case["kind"] != "call" or case["call"] != text:
            return False
    return True


def further(checked: Sequence[Candidate], seen: Sequence[Mapping[str, Any]]) -> list[str]:
    """The argument texts of (at most two) one-at-a-time variations that took branch arcs the
    base call did not, most such arcs first: `colored('abc', force_color=True)` gets past the
    early return that every other variation of termcolor's `colored` stopped at."""
    arcs = [{tuple(arc) for arc in item.get("arcs") or []} for item in seen]
    # The base call is the one of origin "types", or, where its arguments are those of a call
    # people wrote (its pools start from their values: `plural('book')`), that call.
    origins = ("types", "call site", "doctest")
    base = next((i for o in origins for i, c in enumerate(checked) if c.origin == o), None)
    if base is None:
        return []
    new = {
        index: len(arcs[index] - arcs[base])
        for index, candidate in enumerate(checked)
        if candidate.origin in ("values", "boundary")
        and candidate.instance == checked[base].instance
        and not candidate.setup
    }
    ranked = sorted((i for i in new if new[i]), key=lambda i: -new[i])
    return [checked[index].arguments for index in ranked[:2]]


def arguments_matter(
    chosen: Mapping[str, Any], seen: Sequence[Mapping[str, Any]], tree: ast.Module
) -> bool:
    """Whether other arguments could give a test where the tools' calls gave none: not when
    nothing was pinned although a call went through (it returned what a test cannot hold, or
    changed state or files other tests see): then what stands in the way is what the function
    gives back or does, not its inputs, and the model's arguments reach the same. On rich 13.9.4
    the 174 test jobs that ended `not possible` had made 774 of the agent's 1,251 model requests
    (bench/README.md, "whole_library"); on ten of its modules and on draw 3141 of
    bench/test_quality.py the same tests come out without those requests. Nor where every
    call raised an AttributeError for an attribute that no value an argument may be has (the
    allow-list holds the model's calls too): asteval's `on_expr(node)` reads `node.value` of
    an ast node, and its 43 `on_*` jobs made 215 requests for nothing (draw 8191)."""
    if chosen["chosen"]:
        return True
    if any(
        item.get("outcome") == "returned" or item.get("state_changed") or item.get("files_changed")
        for item in seen
    ):
        return False
    # The calls whose instance was built (a receiver that failed says nothing of arguments).
    made = [item for item in seen if item.get("outcome") != "setup_failed"]
    if not made or any(item.get("exception") != "AttributeError" for item in made):
        return True
    missing = {MISSING.search(str(item.get("message"))) for item in made}
    defined = attributes_defined(tree)
    if None in missing or defined is None:
        return True
    return bool({m.group(1) for m in missing if m} & (defined | VALUE_ATTRIBUTES))


MISSING = re.compile(r"has no attribute '(\w+)'")


def split_dotted(dotted: str) -> tuple[str, str]:
    module, _, name = dotted.rpartition(".")
    return module, name


VALUE_ATTRIBUTES = frozenset(
    name
    for kind in [
        *(str, bytes, bytearray, memoryview, int, float, complex, list, tuple, dict, set, slice),
        *(frozenset, types.FunctionType, types.BuiltinFunctionType, type(None)),
        *(getattr(importlib.import_module(m), n) for m, n in map(split_dotted, STANDARD_VALUES)),
    ]
    for name in dir(kind)
)
"""What the values of an allowed argument have (test_cases.check_value): literals, functions
and the standard value types."""


def branches_left(
    source: str,
    ranges: Sequence[Sequence[int]],
    chosen: Sequence[Mapping[str, Any]],
    reached: bool = False,
) -> bool:
    """Whether the chosen calls (probed with coverage.py) leave a branch in the line ranges
    `ranges` untaken, or nothing to pin; `reached`: only in a range some call ran code of (the
    module's private code a call reaches, not all of it)."""
    if not chosen:
        return True
    parsed = branch_points(source)
    if parsed is None:  # a coverage.py that parses otherwise: ask, as without branch data
        return True
    arcs, exits = parsed
    taken = {(a, b) for item in chosen for a, b in item["seen"].get("arcs") or []}
    for first, last in ranges:
        if reached and not any(first <= a <= last for a, _ in taken):
            continue
        inside = {(a, b) for a, b in arcs if first <= a <= last}
        if not {(a, b) for a, b in inside if exits.get(a, 0) > 1}.issubset(taken):
            return True
    return False


@functools.lru_cache(maxsize=4)
def branch_points(source: str) -> tuple[frozenset[tuple[int, int]], Mapping[int, int]] | None:
    """coverage.py's arcs of the module and its exit counts per line (the arcs its tracer
    reports, numbered alike), parsed once per module text, not once per job and check (30 ms
    for bitmath's 1,900 lines, asked twice by each of its 135 jobs); None where its parser
    fails."""
    try:
        parser = PythonParser(text=source)
        parser.parse_source()
        return frozenset(parser.arcs()), types.MappingProxyType(dict(parser.exit_counts()))
    except Exception:
        return None


async def model_proposals(
    source: str,
    definition: ast.FunctionDef,
    owner: str,
    draft: Draft | None,
    temperatures: Sequence[float],
    receiver: str | None = None,
) -> tuple[list[str], list[str]]:
    """The model's argument lists for the target (and, for a method, for its class's
    constructor, unless `receiver` is an instance the tools built and the target takes
    arguments), by continuing a test's first lines after the code it tests: what base models
    have seen after a module most often. One draft per temperature, decoded together; none
    when the model could not be asked, and none for a target that takes no arguments
    (`x.copy()` has one form: on rich 13.9.4 every draft of one was a call that raised
    TypeError)."""
    if draft is None or not temperatures:
        return [], []
    name = definition.name
    arguments = definition.args
    takes_arguments = bool(
        parameters_of(definition, method=bool(owner)) or arguments.vararg or arguments.kwarg
    )
    constructors: list[str] = []
    instance = None
    if f"{owner}.{name}" in class_bound(source):
        instance = owner  # called on the class: no instance to build
    elif owner and receiver is not None and takes_arguments:
        instance = receiver  # (without arguments, the instance is all the model can vary)
    elif owner:
        opening = constructor_prompt(source, owner)
        constructors = await continued_arguments(opening, draft, temperatures[:2])
        instance = f"{owner}({constructors[0]})" if constructors else f"{owner}()"
    if not takes_arguments:
        return [], constructors
    opening = call_prompt(source, owner, name, instance)
    return await continued_arguments(opening, draft, temperatures), constructors
