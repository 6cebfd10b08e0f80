"""The host functions every agent may declare: the job's node and workspace, allow-listed
programs in the OS sandbox, the job's model, and the project's module layout. Each closes over
one job's `HostContext`; stubs for authors in host_functions.pyi."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from remora.discovery.node_info import node_info as describe_node
from remora.edits.workspace import WorkspaceError
from remora.findings.results import ErrorCode
from remora.host.context import HostContext, checked_path
from remora.protocol.completion import MAX_DRAFTS, CompletionRequest, DraftsRequest
from remora.sandbox.folder import left_file
from remora.sandbox.read_only import shared_key
from remora.tool_library.module_paths import module_of, project_of
from remora.tool_library.signatures import validate_json


def core_functions(host: HostContext) -> dict[str, Callable[..., Any]]:
    workspace, commands = host.workspace, host.commands

    def read_file(path: str) -> str:
        try:
            return workspace.read_text(checked_path(path))
        except (FileNotFoundError, WorkspaceError, TypeError):
            raise  # the script's (or the model's) mistake: it may handle it
        except OSError as exc:
            host.fault(ErrorCode.TOOL_ENVIRONMENT, f"cannot read {path}: {exc}")
            raise

    def read_original(path: str) -> str | None:
        return workspace.original_text(checked_path(path))

    def write_file(path: str, content: str) -> None:
        if not isinstance(content, str):
            raise TypeError("write_file: content must be a str")
        workspace.write_text(checked_path(path), content)

    def list_dir(path: str = ".") -> list[str]:
        return workspace.list_dir(checked_path(path))

    def environment_error(message: str) -> None:
        host.fault(ErrorCode.TOOL_ENVIRONMENT, str(message)[:1000])

    def node_info() -> dict[str, Any]:
        return describe_node(host.node)

    def module_name(path: str) -> dict[str, str]:
        module, import_root = module_of(checked_path(path), host.file_exists)
        return {"module": module, "import_root": import_root}

    def project_folder(path: str) -> str:
        return project_of(checked_path(path), host.file_exists)

    async def run_command(
        name: str, args: list[str], read_back: list[str] | None = None
    ) -> dict[str, Any]:
        # Files named in the arguments become the job's own copies (real files in the command's
        # folder). What the command leaves is thrown away but `read_back`'s texts, as `files`.
        for arg in args if isinstance(args, list) else []:
            if isinstance(arg, str) and not arg.startswith("-"):
                with contextlib.suppress(OSError, ValueError):
                    if workspace.is_file(arg):
                        workspace.read_text(arg)
        keys = {path: workspace.key(checked_path(path)) for path in read_back or []}
        argv = [name, *args] if isinstance(args, list) else []
        key = shared_key(commands.settings.read_only, argv, job_file_text, workspace.written())
        if key is None or keys:
            result = await command_in_workspace(name, args, keys)
        else:
            result = await commands.shared.get(key, lambda: command_in_workspace(name, args, {}))
        if result["timed_out"]:
            host.timed_out(name)
        return result

    async def command_in_workspace(
        name: str, args: list[str], keys: dict[str, str]
    ) -> dict[str, Any]:
        # A fresh directory per command, thrown away after it: what a command writes (pytest
        # running a model's code) is never a change of the job, nor seen by the next command.
        async with workspace.command_directory() as directory:
            # What it leaves comes back only to be read.
            result = await host.reported(name, args, directory, copy_back=bool(keys))
            limit = commands.settings.output_limit_kb * 1024
            if keys:
                result["files"] = {
                    path: left_file(directory, key, limit) for path, key in keys.items()
                }
            return result

    def job_file_text(path: str) -> str | None:
        with contextlib.suppress(OSError, ValueError):
            return workspace.read_text(path) if workspace.is_file(path) else None
        return None

    return {
        "read_file": read_file,
        "read_original": read_original,
        "write_file": write_file,
        "list_dir": list_dir,
        "file_exists": host.file_exists,
        "node_info": node_info,
        "run_command": run_command,
        "environment_error": environment_error,
        "module_name": module_name,
        "project_folder": project_folder,
        **model_functions(host),
        # Pure functions of their arguments: no workspace access.
        "validate_json": validate_json,
    }


def model_functions(host: HostContext) -> dict[str, Callable[..., Any]]:
    """`complete`, `complete_drafts` and `score_text`: the job's own model, as text in and out
    (no model under `remora tool run`: a RuntimeError the script sees)."""

    async def complete(
        prompt: str, stop: list[str] | None = None, max_tokens: int = 64, temperature: float = 0.0
    ) -> str:
        if host.completion is None:
            raise RuntimeError("complete: no model here (remora tool run has none)")
        try:
            request = CompletionRequest(
                prompt=prompt, stop=stop or [], max_tokens=max_tokens, temperature=temperature
            )
        except ValidationError as exc:
            raise ValueError(f"complete: {exc.errors()[0]['msg']}") from None
        return (await host.completion(request)).text

    async def complete_drafts(
        prompt: str, stop: list[str] | None, max_tokens: int, temperatures: Sequence[float]
    ) -> list[str]:
        if host.drafting is None:
            raise RuntimeError("complete_drafts: no model here (remora tool run has none)")
        texts: list[str] = []
        for start in range(0, len(temperatures), MAX_DRAFTS):  # a batch holds MAX_DRAFTS
            try:
                request = DraftsRequest(
                    prompt=prompt,
                    stop=stop or [],
                    max_tokens=max_tokens,
                    temperatures=list(temperatures[start : start + MAX_DRAFTS]),
                )
            except ValidationError as exc:
                raise ValueError(f"complete_drafts: {exc.errors()[0]['msg']}") from None
            texts += [draft.text for draft in await host.drafting(request)]
        return texts

    async def score_text(prompt: str, continuation: str) -> dict[str, Any]:
        if host.completion is None:
            raise RuntimeError("score_text: no model here (remora tool run has none)")
        try:
            request = CompletionRequest(prompt=prompt, score=continuation, max_tokens=1)
        except ValidationError as exc:
            raise ValueError(f"score_text: {exc.errors()[0]['msg']}") from None
        scored = await host.completion(request)
        return {"logprob": scored.logprob or 0.0, "tokens": scored.scored_tokens}

    return {"complete": complete, "complete_drafts": complete_drafts, "score_text": score_text}
