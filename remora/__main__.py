"""Entry point: signals are handled before the heavy imports, so an early Ctrl-C or SIGTERM
exits quietly with 130 or 143."""

from __future__ import annotations

import sys

from remora.signals import exit_code, terminate_as_interrupt


def run() -> int:
    with terminate_as_interrupt():
        try:
            from remora.cli import main
        except KeyboardInterrupt as interrupt:
            return exit_code(interrupt)
        return main()


if __name__ == "__main__":
    sys.exit(run())
