"""What can stop a command, and the exit codes every command ends with (ruff's contract).

Stdlib only: the entry point imports it before anything heavy.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FINDINGS = 1
    """Something to look at: findings, jobs that did not finish, conflicts."""
    ERROR = 2
    """Bad input, a job that could not be analysed, or Remora itself failed."""
    INTERRUPTED = 130
    TERMINATED = 143


class UserInputError(Exception):
    """Bad input from the user (a config file, an agent definition, a flag): exit code 2.

    The message is complete and meant to be printed as it is.
    """


class RunFailed(Exception):
    """The run cannot go on (no model to ask, a server that fails every request, a report that
    cannot be written): exit code 2. The message is complete, as for `UserInputError`."""
