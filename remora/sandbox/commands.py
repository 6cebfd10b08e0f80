"""run_command(): allow-listed programs in the job's workspace directory, inside the OS sandbox
(sandbox/confinement.py), with a timeout, an output cap, a scrubbed environment and stdin closed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import ByteReceiveStream

from remora.config.settings import CommandSettings
from remora.sandbox.confinement import Confinement, confinement
from remora.sandbox.folder import CommandFolder
from remora.sandbox.program_paths import find_program
from remora.sandbox.read_only import SharedResults

# Only these variables reach a command: no tokens, API keys or REMORA_* settings.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT")
FIXED_ENV = {
    "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ in the user's folders
    "PYTEST_ADDOPTS": "-p no:cacheprovider",
    "RUFF_NO_CACHE": "true",
    "NO_COLOR": "1",
}


class CommandRefused(PermissionError):
    """The command is not allowed; the message tells the script (and the model) why."""


class CommandMissing(CommandRefused):
    """An allowed program is not installed: the environment's fault, not the model's."""


class SandboxFailed(RuntimeError):
    """bubblewrap itself failed: it could not build the sandbox (a bind that failed, a seccomp
    filter the kernel refused, a cgroup it could not join, a folder it could not fill) or
    could not start the program in it. The environment's fault, never the command's result."""


class CommandRunner:
    """Raises SandboxUnavailable (a user error) when isolation is `bwrap` and the host cannot
    provide it: agents that run commands must not run them unconfined by accident."""

    def __init__(self, settings: CommandSettings) -> None:
        self.settings = settings
        self._slots = anyio.CapacityLimiter(settings.max_parallel)
        self.shared = SharedResults()
        """Results of read-only commands, for every job of the run (sandbox/read_only.py)."""
        self.confinement: Confinement | None = (
            confinement(settings) if settings.isolation == "bwrap" else None
        )

    def resolve(self, name: str, args: list[str]) -> list[str]:
        """The argv to run, or CommandRefused."""
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise CommandRefused("run_command: args must be a list of strings")
        for arg in args:
            _check_argument(arg)
        if name == "python":
            if len(args) < 2 or args[0] != "-m" or args[1] not in self.settings.python_modules:
                allowed = ", ".join(self.settings.python_modules) or "none"
                raise CommandRefused(
                    f"run_command: python is allowed only as python -m MODULE with MODULE in "
                    f"sandbox.commands.python_modules ({allowed})"
                )
            return [str(self.settings.python or sys.executable), *args]
        if name not in self.settings.allowed:
            allowed = ", ".join([*self.settings.allowed, "python -m ..."])
            raise CommandRefused(
                f"run_command: {name!r} is not allowed (sandbox.commands.allowed: {allowed})"
            )
        executable = find_program(name)
        if executable is None:
            raise CommandMissing(f"run_command: {name!r} is allowed but not installed")
        return [executable, *args]

    async def run(
        self,
        name: str,
        args: list[str],
        cwd: Path,
        *,
        project: Path | None = None,
        copy_back: bool = True,
    ) -> dict[str, Any]:
        """Run in `cwd`, the job's workspace directory: the only place the command may write.
        `project` (the tree the workspace links into) is visible read-only. What the command
        leaves there is in `cwd` afterwards, unless `copy_back` is false (its output is all the
        caller reads). SandboxFailed when the OS sandbox could not run the command at all."""
        argv = self.resolve(name, args)
        async with self._slots:
            if self.confinement is None:
                return await self._run(name, args, argv, cwd)
            return await self._run_confined(name, args, argv, cwd, project, copy_back)

    async def run_host_script(
        self, script: Path, args: list[str], cwd: Path, *, project: Path | None = None
    ) -> dict[str, Any]:
        """Run Remora's own `script` (one of its files, copied into `cwd`) with the project's
        Python, confined like any command. For host functions only: a tool script may run
        `python -m MODULE` of the allow-list and nothing else."""
        argv = [str(self.settings.python or sys.executable), str(script), *args]
        async with self._slots:
            if self.confinement is None:
                return await self._run("python", [script.name, *args], argv, cwd)
            return await self._run_confined(
                "python", [script.name, *args], argv, cwd, project, copy_back=True
            )

    async def _run_confined(
        self,
        name: str,
        args: list[str],
        argv: list[str],
        cwd: Path,
        project: Path | None,
        copy_back: bool,
    ) -> dict[str, Any]:
        assert self.confinement is not None
        env = {key: os.environ[key] for key in PASSED_ENV if key in os.environ} | FIXED_ENV
        # bwrap writes {"exit-code": N} here only once the program has run and ended; an
        # exit status and stderr alone cannot tell its own failures from the program's, which
        # may exit 1 and print "bwrap: ..." too.
        status_read, status_write = os.pipe()
        folder = CommandFolder(cwd, self.settings.folder_mb, project, copy_back=copy_back)
        # Reads the copy-back channel while the command runs (a full pipe would stop it) and
        # mirrors what comes back into cwd, which nothing else touches until it is joined.
        collector = threading.Thread(target=folder.collect, name="remora-folder", daemon=True)
        try:
            os.set_blocking(status_read, False)
            wrapped = self.confinement.wrap(
                argv,
                workspace=cwd,
                readable=[project] if project else [],
                env=env,
                folder=folder,
                status_fd=status_write,
            )
            collector.start()
            try:
                result = await self._run(
                    name, args, wrapped, cwd, pass_fds=(status_write,), stdin=folder.writer
                )
            finally:
                folder.close_writer()  # the channel now ends when the sandbox has
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(collector.join)
            status = _read_all(status_read)
        finally:
            os.close(status_read)
            os.close(status_write)
            folder.close()
            self.confinement.sweep()
        if not result["timed_out"] and not (_program_ran(status) and folder.started):
            raise SandboxFailed(_failure(name, result))
        if folder.note is not None:  # said where the command's own messages are read
            lines = [*str(result["stderr"]).splitlines(), folder.note]
            result["stderr"] = "\n".join(lines) + "\n"
        return result

    async def _run(
        self,
        name: str,
        args: list[str],
        argv: list[str],
        cwd: Path,
        *,
        pass_fds: tuple[int, ...] = (),
        stdin: int = subprocess.DEVNULL,
    ) -> dict[str, Any]:
        limit = self.settings.output_limit_kb * 1024
        env = {key: os.environ[key] for key in PASSED_ENV if key in os.environ}
        env.update(FIXED_ENV, HOME=str(cwd))
        process = await anyio.open_process(
            argv,
            cwd=cwd,
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # so a timeout can kill the whole process group
            pass_fds=pass_fds,
        )
        outputs: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        truncated = False

        async def drain(stream: ByteReceiveStream | None, key: str) -> None:
            nonlocal truncated
            if stream is None:
                return
            async for chunk in stream:
                room = limit - len(outputs[key])
                if len(chunk) > room:
                    truncated = True
                outputs[key] += chunk[: max(room, 0)]

        timed_out = False
        try:
            with anyio.move_on_after(self.settings.timeout_s) as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(drain, process.stdout, "stdout")
                    group.start_soon(drain, process.stderr, "stderr")
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            if process.returncode is None:
                _kill_group(process.pid)
                with anyio.CancelScope(shield=True):
                    await process.wait()
            await process.aclose()
        return {
            "command": [name, *args],
            "exit_code": process.returncode if not timed_out else None,
            "timed_out": timed_out,
            "stdout": outputs["stdout"].decode("utf-8", "replace"),
            "stderr": outputs["stderr"].decode("utf-8", "replace"),
            "truncated": truncated,
        }


def _check_argument(arg: str) -> None:
    """Refuse paths that leave the workspace: absolute, `~` or `..`, also as `--opt=value` and
    attached to short options (`-o/abs`, `-qc~/x`). The OS sandbox is the boundary; this makes
    the refusal a message the model can read instead of a failed write."""
    if "\x00" in arg:
        raise CommandRefused("run_command: NUL byte in an argument")
    parts = [arg, *arg.split("=")[1:]]
    if arg.startswith("-") and not arg.startswith("--"):
        parts += [arg[index:] for index in range(1, len(arg))]
    for part in parts:
        path = PurePosixPath(part.replace("\\", "/"))
        if path.is_absolute() or part.startswith("~") or ".." in path.parts:
            raise CommandRefused(
                f"run_command: {arg!r} points outside the workspace; use paths relative to it"
            )


def _read_all(fd: int) -> str:
    """What a non-blocking pipe holds now (its writer may still be open: ours is)."""
    chunks = []
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _program_ran(status: str) -> bool:
    for line in status.splitlines():
        with contextlib.suppress(ValueError):
            if isinstance(found := json.loads(line), dict) and "exit-code" in found:
                return True
    return False


def _failure(name: str, result: dict[str, Any]) -> str:
    """bwrap's own words (its lines start with "bwrap:"; the launcher's with
    "remora-sandbox:"), else the end of stderr."""
    lines = str(result["stderr"]).strip().splitlines()
    own = [line for line in lines if line.startswith(("bwrap:", "remora-sandbox:"))]
    said = "; ".join(own or lines[-3:]) or "no message"
    return (
        f"the OS sandbox (bubblewrap) could not run {name} "
        f"(exit status {result['exit_code']}): {said}"
    )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
