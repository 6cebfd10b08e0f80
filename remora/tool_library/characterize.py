"""The input generator the test and sample_data agents share: propose, check, probe, choose.

`explore_calls` gathers candidate calls of the job's function or method (call_candidates.py, plus
the model's completions), drops every one the allow-list refuses (test_cases.parse_test_case),
runs the rest twice with the probe in the OS sandbox (call_probe.py, through `probe`, which the
host supplies: this layer runs nothing itself), and lets call_selection.py keep the few calls
that cover the most branches. The test agent renders them as tests (case_render.py); the
sample_data agent keeps the arguments of calls that returned, so a sample is a call the function
accepts.
"""

from __future__ import annotations

import ast
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from remora.tool_library.call_candidates import Candidate, candidate_calls, find_definition
from remora.tool_library.call_prompts import call_prompt, constructor_prompt
from remora.tool_library.call_selection import select_calls, stable
from remora.tool_library.calls import Draft, continued_arguments
from remora.tool_library.case_render import render_tests
from remora.tool_library.parameter_values import parameters_of
from remora.tool_library.test_cases import parse_test_case

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
    probe: Probe,
    draft: Draft | None,
    temperatures: Sequence[float],
) -> dict[str, Any]:
    """What the probe saw of the chosen calls of `target` in the module `source`:
    {"tests": [...rendered tests], "samples": [argument dicts of calls that returned],
    "dropped": [reasons], "state": [names of state some call changed], "tried": N,
    "refused": N (candidates the allow-list refused), "coverage": bool}."""
    tree = ast.parse(source)
    owner, _, name = target.rpartition(".")
    definition = find_definition(tree, owner, name)
    if definition is None:
        raise ValueError(f"{target} is not defined at the top level of the module")
    proposals, constructors = await model_proposals(source, owner, name, draft, temperatures)
    candidates = candidate_calls(source, target, project_sources, proposals, constructors)
    checked: list[Candidate] = []
    for candidate in candidates:
        try:
            case = parse_test_case(candidate.case(target), target, source)
        except ValueError:
            continue
        if case["kind"] == "call" and case["call"] == candidate.case(target):
            checked.append(candidate)
    parameters = [p.name for p in parameters_of(definition, method=bool(owner))]
    empty = {"tests": [], "samples": [], "dropped": [], "state": [], "coverage": False}
    if not checked:
        return empty | {"tried": 0, "refused": len(candidates)}
    first = definition.decorator_list[0].lineno if definition.decorator_list else definition.lineno
    request = {
        "module": module,
        "import_root": import_root,
        "function": name,
        "method": name if owner else None,
        "lines": [first, definition.end_lineno or definition.lineno],
        "calls": [candidate.as_dict() for candidate in checked],
    }
    runs = [await probe(request) for _ in range(PROBE_RUNS)]
    classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
    chosen = select_calls(
        [c.as_dict() for c in checked], [run["results"] for run in runs], classes, module, target
    )
    base = next((c.as_dict() for c in checked if c.origin == "types"), None)
    # Samples: the chosen calls that returned first, then every other call that returned and
    # changed nothing others see (a fixture wants valid inputs, not only branch-covering ones).
    returned: list[Any] = []
    repeated = [
        seen
        for index, seen in enumerate(runs[0]["results"])
        if all(stable(run["results"][index]) == stable(seen) for run in runs[1:])
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
        "coverage": all(bool(run.get("coverage")) for run in runs),
    }


async def model_proposals(
    source: str,
    owner: str,
    name: str,
    draft: Draft | None,
    temperatures: Sequence[float],
) -> tuple[list[str], list[str]]:
    """The model's argument lists for the target (and, for a method, for its class's
    constructor), by continuing a test's first lines after the code it tests: what base models
    have seen after a module most often. Greedy and sampled drafts, decoded together; none when
    the model could not be asked."""
    if draft is None or not temperatures:
        return [], []
    constructors: list[str] = []
    instance = None
    if owner:
        opening = constructor_prompt(source, owner)
        constructors = await continued_arguments(opening, draft, temperatures[:2])
        instance = f"{owner}({constructors[0]})" if constructors else f"{owner}()"
    opening = call_prompt(source, owner, name, instance)
    return await continued_arguments(opening, draft, temperatures), constructors
