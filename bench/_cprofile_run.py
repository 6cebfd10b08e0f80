"""Run `python -m remora ...` under cProfile and write the profile to a file.

    python bench/_cprofile_run.py OUT.prof -m remora analyze ...

The command is run by calling `remora.cli.main`: `python -m cProfile -m remora` would write
nothing, since `python -m remora` leaves with os._exit, before cProfile writes its output.
"""

from __future__ import annotations

import cProfile
import os
import sys


def main() -> None:
    out = sys.argv[1]
    if sys.argv[2:4] != ["-m", "remora"]:
        raise SystemExit("usage: _cprofile_run.py OUT.prof -m remora ARGS...")
    sys.argv = ["remora", *sys.argv[4:]]
    profiler = cProfile.Profile()
    profiler.enable()
    from remora.cli.main import main as remora_main

    code = remora_main(sys.argv[1:])
    profiler.disable()
    profiler.dump_stats(out)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as `python -m remora` does: Monty's threads may still be winding down


if __name__ == "__main__":
    main()
