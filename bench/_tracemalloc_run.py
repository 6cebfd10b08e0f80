"""Run `python -m remora ...` under tracemalloc; write the largest allocation sites at the
traced peak to a file.

    python bench/_tracemalloc_run.py OUT -m remora analyze ...

A thread snapshots the traced allocations each time they grow 15% past the last snapshot, so
the last snapshot is taken within 15% of the peak; when the command returns, its top sites
(by line, and by 10-frame traceback for the largest) go to OUT. The command is run by calling
`remora.cli.main` (`python -m remora` leaves with os._exit, past any atexit hook).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path


def main() -> None:
    out = Path(sys.argv[1])
    if sys.argv[2:4] != ["-m", "remora"]:
        raise SystemExit("usage: _tracemalloc_run.py OUT -m remora ARGS...")
    sys.argv = ["remora", *sys.argv[4:]]
    tracemalloc.start(10)
    best: list[tracemalloc.Snapshot] = []
    peak = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(1.0):
            current, _ = tracemalloc.get_traced_memory()
            if current > peak[0] * 1.15:
                peak[0] = current
                best[:] = [tracemalloc.take_snapshot()]

    def write() -> None:
        stop.set()
        if not best:  # a run shorter than the watch interval: what is left at exit
            peak[0] = tracemalloc.get_traced_memory()[0]
            best[:] = [tracemalloc.take_snapshot()]
        snapshot = best[0].filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        lines = [f"traced memory at the last snapshot: {peak[0] / 2**20:.1f} MiB", ""]
        lines.append("top 30 allocation sites by line:")
        for stat in snapshot.statistics("lineno")[:30]:
            lines.append(f"  {stat.size / 2**20:8.1f} MiB {stat.count:9d} blocks  {stat.traceback}")
        lines += ["", "top 5 by traceback:"]
        for stat in snapshot.statistics("traceback")[:5]:
            lines.append(f"  {stat.size / 2**20:.1f} MiB in {stat.count} blocks")
            lines += [f"      {line}" for line in stat.traceback.format()]
        out.write_text("\n".join(lines) + "\n")

    threading.Thread(target=watch, daemon=True).start()
    started = time.monotonic()
    from remora.cli.main import main as remora_main

    code = remora_main(sys.argv[1:])
    write()
    print(f"traced run took {time.monotonic() - started:.0f} s", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as `python -m remora` does: Monty's threads may still be winding down


if __name__ == "__main__":
    main()
