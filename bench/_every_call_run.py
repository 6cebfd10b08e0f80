"""Run `python -m remora ...` with the test agent keeping every call it could pin, the model's
proposals always among them: the most its candidates can kill (bench/test_quality.py
--every-call).

    python bench/_every_call_run.py -m remora analyze ...

Two host functions are replaced in this process (the embedded engine runs jobs here): the
selection keeps every usable call instead of the branch cover's few, and `explore_calls` asks
the model for every function, not only where a branch is left. What Remora ships is unchanged.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any


def main() -> None:
    if sys.argv[1:3] != ["-m", "remora"]:
        raise SystemExit("usage: _every_call_run.py -m remora ARGS...")
    sys.path[0] = os.getcwd()  # as `python -m` has it: the project, not bench/, comes first
    from remora.host import calls
    from remora.tool_library import call_selection

    def keep_all(
        usable: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
    ) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
        return list(usable)

    asked = calls.explore_calls

    async def model_always(**arguments: Any) -> dict[str, Any]:
        return await asked(**(arguments | {"model": "always"}))

    call_selection.cover = keep_all
    calls.explore_calls = model_always  # type: ignore[assignment]
    from remora.cli.main import main as remora_main

    code = remora_main(sys.argv[3:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as `python -m remora` does: Monty's threads may still be winding down


if __name__ == "__main__":
    main()
