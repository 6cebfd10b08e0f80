"""What agents need on the machine, checked once before any job and any model request."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from remora.agents.definition import Agent, Requirements
from remora.config.settings import CommandSettings
from remora.errors import UserInputError
from remora.sandbox.confinement import SandboxUnavailable, confinement
from remora.sandbox.interpreter import missing_modules
from remora.sandbox.program_paths import find_program


def unmet(requires: Requirements, commands: CommandSettings) -> list[str]:
    """What is missing, each as `what (how to get it)`; [] when everything is there."""
    install = f"{shlex.quote(sys.executable)} -m pip install"
    missing = []
    for program in requires.programs:
        if program not in commands.allowed:
            missing.append(f"program {program} is not allowed (add it to sandbox.commands.allowed)")
        elif not _program_found(program):
            missing.append(f"program {program} is not installed (install it: {install} {program})")
    python = commands.python or Path(sys.executable)
    absent = missing_modules(
        python, [m for m in requires.python_modules if m in commands.python_modules], commands
    )
    for module in requires.python_modules:
        if module not in commands.python_modules:
            missing.append(
                f"python module {module} is not allowed (add it to sandbox.commands.python_modules)"
            )
        elif module in absent:
            where = "" if commands.python is None else f" in the project's Python {python}"
            how = f"{shlex.quote(str(python))} -m pip install {module}"
            missing.append(f"python module {module} is not installed{where} ({how})")
    if (requires.programs or requires.python_modules) and commands.isolation == "bwrap":
        try:
            confinement(commands)
        except SandboxUnavailable as exc:
            missing.append(str(exc))
    return missing


def check_requirements(agents: Sequence[Agent], commands: CommandSettings) -> None:
    """UserInputError (exit 2) naming each agent and what it lacks."""
    problems = [
        f"agent {agent.name}: {problem}"
        for agent in agents
        for problem in unmet(agent.definition.requires, commands)
    ]
    if problems:
        raise UserInputError(
            "missing requirements, nothing was analysed:\n  " + "\n  ".join(problems)
        )


def _program_found(name: str) -> bool:
    """As run_command looks it up."""
    return find_program(name) is not None
