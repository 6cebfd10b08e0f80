"""Entry point: signals are handled before the heavy imports, so an early Ctrl-C or SIGTERM
exits quietly with 130 or 143."""

from __future__ import annotations

import contextlib
import os
import sys

from remora.errors import ExitCode
from remora.signals import exit_code, terminate_as_interrupt, terminated


def run() -> int:
    with terminate_as_interrupt():
        try:
            from remora.cli.main import main
        except KeyboardInterrupt as interrupt:
            return exit_code(interrupt)
        except Exception as exc:  # a broken installation: exit 2 (error), not 1 (findings)
            if interrupted_within(exc):
                return exit_code(KeyboardInterrupt())
            sys.stderr.write(f"remora: error: cannot start: {type(exc).__name__}: {exc}\n")
            return ExitCode.ERROR
        return main()


def interrupted_within(exc: BaseException) -> bool:
    """Whether the import failed because Ctrl-C or SIGTERM landed in it: pydantic builds its
    validators while Remora's modules are imported and reports what stopped it as a
    SchemaError naming the KeyboardInterrupt, not as the interrupt itself."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return terminated(KeyboardInterrupt()) or "KeyboardInterrupt" in str(exc)


def exit_now(code: int) -> None:
    """Leave without interpreter finalisation. Monty's native worker-pool threads can still be
    winding down when Python tears the interpreter down, which aborts the process now and then
    (seen in about 1 run in 30 of `remora tool check`); by now every file Remora writes is closed
    and the output only needs flushing."""
    try:
        sys.stdout.flush()
    except OSError:  # the report did not reach its reader (a closed pipe, a full disk)
        code = max(code, 2)
    except ValueError:  # closed by its owner: `remora server` closes stdout on `exit`
        pass
    with contextlib.suppress(OSError):
        sys.stderr.flush()
    os._exit(code)


def main() -> None:
    """The `remora` console script."""
    exit_now(run())


if __name__ == "__main__":
    main()
