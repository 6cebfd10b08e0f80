"""Host functions a tool script may call (declared for authors in host_functions.pyi), each
confined to the job's workspace."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import ValidationError

from remora.agents.toolscript import Tool
from remora.discovery.node_info import node_info as describe_node
from remora.discovery.nodes import Node
from remora.edits.workspace import Workspace, WorkspaceError
from remora.findings.results import ErrorCode, JobError
from remora.protocol.completion import (
    MAX_DRAFTS,
    Completion,
    CompletionRequest,
    DraftsRequest,
)
from remora.sandbox.commands import CommandMissing, CommandRunner, SandboxFailed
from remora.sandbox.docstring_host import docstring_functions
from remora.sandbox.folder import left_file
from remora.sandbox.read_only import shared_key
from remora.tool_library import calls, findings
from remora.tool_library.case_render import render_module
from remora.tool_library.characterize import PROBE_SCRIPT, explore_calls
from remora.tool_library.docstring_check import check_docstring
from remora.tool_library.docstring_context import code_facts
from remora.tool_library.docstring_doctest import doctest_examples, examples_section
from remora.tool_library.docstring_parse import parse_docstring
from remora.tool_library.docstring_prompt import summary_prompt
from remora.tool_library.docstring_rank import rank_drafts
from remora.tool_library.docstring_render import keep_layout, render_docstring
from remora.tool_library.docstring_retrieval import nearest_examples
from remora.tool_library.module_paths import locate_tests, module_of, project_of, python_sources
from remora.tool_library.signatures import describe_schema, signature_schema, validate_json
from remora.tool_library.source_compare import compare_python
from remora.tool_library.test_cases import parse_test_case

PROBE_RESULT_LIMIT = 20 * 1024 * 1024
"""Bytes of the probe's result file read back (40 calls' observations are a few hundred KB)."""
HOST_STUBS = (Path(__file__).parent / "host_functions.pyi").read_text(encoding="utf-8")
UNUSED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:anyio")
"""Plugins a generated test file never uses (it is plain and synchronous) that cost most of a
check's time when installed: hypothesis's imports all of hypothesis at every session's end."""


def injected_context(
    tool: Tool, node: Node, options: dict[str, Any], workspace: Workspace
) -> dict[str, Any]:
    """Inputs the script sees and the model never does: `node`, `options` and the context
    providers the tool's header asks for."""
    context: dict[str, Any] = {"node": node.model_dump(), "options": options}
    if "file_text" in tool.header.context:
        context["file_text"] = workspace.read_text(node.file)
    return context


Complete = Callable[[CompletionRequest], Awaitable[Completion]]
"""The job's model continuing (or scoring) a text (protocol/completion.py)."""
CompleteDrafts = Callable[[DraftsRequest], Awaitable[list[Completion]]]
"""The job's model continuing a text once per temperature (protocol/completion.py)."""


def host_functions(
    workspace: Workspace,
    node: Node,
    commands: CommandRunner,
    faults: list[JobError] | None = None,
    completion: Complete | None = None,
    drafting: CompleteDrafts | None = None,
) -> dict[str, Callable[..., Any]]:
    """Paths are relative to the project root; absolute paths and '..' escapes are refused.

    Failures of the environment (a program missing, a command timing out, an unreadable
    project file, or what a script reports with `environment_error`) are added to `faults`:
    the runner ends the job as an error, whatever the script does with the exception.
    """
    recorded = faults if faults is not None else []

    def fault(code: ErrorCode, message: str) -> None:
        recorded.append(JobError(code=code, message=message))

    def read_file(path: str) -> str:
        try:
            return workspace.read_text(_path(path))
        except (FileNotFoundError, WorkspaceError, TypeError):
            raise  # the script's (or the model's) mistake: it may handle it
        except OSError as exc:
            fault(ErrorCode.TOOL_ENVIRONMENT, f"cannot read {path}: {exc}")
            raise

    def environment_error(message: str) -> None:
        fault(ErrorCode.TOOL_ENVIRONMENT, str(message)[:1000])

    async def complete(
        prompt: str, stop: list[str] | None = None, max_tokens: int = 64, temperature: float = 0.0
    ) -> str:
        if completion is None:
            raise RuntimeError("complete: no model here (remora tool run has none)")
        try:
            request = CompletionRequest(
                prompt=prompt, stop=stop or [], max_tokens=max_tokens, temperature=temperature
            )
        except ValidationError as exc:
            raise ValueError(f"complete: {exc.errors()[0]['msg']}") from None
        return (await completion(request)).text

    async def complete_drafts(
        prompt: str, stop: list[str] | None, max_tokens: int, temperatures: Sequence[float]
    ) -> list[str]:
        if drafting is None:
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
            texts += [draft.text for draft in await drafting(request)]
        return texts

    async def score_text(prompt: str, continuation: str) -> dict[str, Any]:
        if completion is None:
            raise RuntimeError("score_text: no model here (remora tool run has none)")
        try:
            request = CompletionRequest(prompt=prompt, score=continuation, max_tokens=1)
        except ValidationError as exc:
            raise ValueError(f"score_text: {exc.errors()[0]['msg']}") from None
        scored = await completion(request)
        return {"logprob": scored.logprob or 0.0, "tokens": scored.scored_tokens}

    def docstring_examples(source: str, line: int, limit: int = 3) -> dict[str, Any]:
        project = project_of(node.file, file_exists)
        sources = python_sources(project, "", workspace.list_dir, project_text)
        sources.pop(node.file, None)
        return nearest_examples(source, line, sources, limit, path=node.file)

    def read_original(path: str) -> str | None:
        return workspace.original_text(_path(path))

    def write_file(path: str, content: str) -> None:
        if not isinstance(content, str):
            raise TypeError("write_file: content must be a str")
        workspace.write_text(_path(path), content)

    def list_dir(path: str = ".") -> list[str]:
        return workspace.list_dir(_path(path))

    def file_exists(path: str) -> bool:
        return workspace.exists(_path(path))

    def module_name(path: str) -> dict[str, str]:
        module, import_root = module_of(_path(path), file_exists)
        return {"module": module, "import_root": import_root}

    def project_folder(path: str) -> str:
        return project_of(_path(path), file_exists)

    def test_location(path: str, function: str, tests_dir: str = "tests") -> dict[str, str]:
        if not isinstance(function, str) or not isinstance(tests_dir, str):
            raise TypeError("test_location: function and tests_dir must be str")
        return locate_tests(_path(path), function, tests_dir, file_exists)

    def arguments_schema() -> dict[str, Any]:
        module, _ = module_of(node.file, file_exists)
        schema, findings = signature_schema(node_info(), module, node.qualified_name)
        return {"schema": schema, "findings": findings}

    async def propose_calls(
        source: str, temperatures: list[float], max_tokens: int = 48
    ) -> list[str]:
        return await calls.propose_calls(
            source, node.name, temperatures, max_tokens, complete_drafts
        )

    async def explore(
        temperatures: list[float] | None = None, model: str = "always"
    ) -> dict[str, Any]:
        if model not in ("always", "for branches"):
            raise ValueError(f'model must be "always" or "for branches", not {model!r}')
        source = workspace.read_text(node.file)
        module, import_root = module_of(node.file, file_exists)
        project = project_of(node.file, file_exists)
        sources = python_sources(project, node.name, workspace.list_dir, project_text)
        sources.pop(node.file, None)

        return await explore_calls(
            source=source,
            target=node.qualified_name,
            module=module,
            import_root=import_root,
            project_sources=sources,
            probe=probe,
            draft=complete_drafts if drafting is not None else None,
            temperatures=[0.0, 0.7, 1.0] if temperatures is None else temperatures,
            model=cast(Literal["always", "for branches"], model),
        )

    def project_text(path: str) -> str:
        # Call sites are read from the project on disk, not through the workspace: a file the
        # job reads becomes a copy in every command's folder.
        file = (workspace.root / path).resolve()
        if not file.is_relative_to(workspace.root.resolve()) or file.stat().st_size > 500_000:
            raise ValueError(f"{path}: not read for call sites")
        return file.read_text(encoding="utf-8")

    async def probe(request: dict[str, Any]) -> dict[str, Any]:
        files = {
            ".remora_call_probe.py": PROBE_SCRIPT.read_text(encoding="utf-8"),
            ".remora_probe.json": json.dumps(request),
        }
        with workspace.command_directory(extra=files) as directory:
            script = directory / ".remora_call_probe.py"
            args = [".remora_probe.json", ".remora_probe_result.json"]
            try:
                ran = await commands.run_host_script(
                    script, args, directory, project=workspace.root
                )
            except SandboxFailed as exc:
                fault(ErrorCode.SANDBOX_CRASHED, str(exc))
                raise
            answer = directory / ".remora_probe_result.json"
            if ran["timed_out"]:
                fault(
                    ErrorCode.COMMAND_TIMEOUT,
                    "the call probe took longer than "
                    f"sandbox.commands.timeout_s={commands.settings.timeout_s}s",
                )
            readable = answer.is_file() and not answer.is_symlink()
            if ran["timed_out"] or not readable or answer.stat().st_size > PROBE_RESULT_LIMIT:
                tail = " | ".join(str(ran["stderr"]).strip().splitlines()[-3:])
                raise ValueError(f"the calls could not be probed: {tail or 'no result'}")
            result: dict[str, Any] = json.loads(answer.read_text(encoding="utf-8"))
            return result

    async def check_tests(path: str, text: str, args: list[str] | None = None) -> dict[str, Any]:
        """pytest on `text` as the file `path`, in a throwaway copy of the project: which
        tests passed and which failed (with pytest's line), nothing written."""
        key = workspace.key(_path(path))
        # The file is added to the command's copy of the project only: written there as a real
        # file, never through a link into the project (a tests/ folder that exists is a link).
        with workspace.command_directory(extra={key: text}) as directory:
            argv = ["-m", "pytest", "-q", "-rA", "--tb=line", "-p", "no:cacheprovider"]
            for plugins in (UNUSED_PLUGINS, ()):  # the configuration or a fixture needs them
                ran = await reported("python", [*argv, *plugins, *(args or []), key], directory)
                if ran["exit_code"] != 4 and not re.search("^ERROR ", ran["stdout"], re.M):
                    break
        output = str(ran["stdout"])
        passed = re.findall(r"^PASSED \S+::(\w+)", output, re.MULTILINE)
        failed = [
            {"name": name, "message": message or "failed"}
            for name, message in re.findall(
                r"^(?:FAILED|ERROR) \S+::(\w+)(?:\[[^\]\n]*\])?(?: - (.*))?$", output, re.MULTILINE
            )
        ]
        tail = " | ".join([line for line in output.strip().splitlines() if line][-3:])
        return {
            "passed": passed,
            "failed": failed,
            "exit_code": ran["exit_code"],
            "timed_out": ran["timed_out"],
            "output_tail": tail[:600],
        }

    def test_file_text(
        tests: list[dict[str, Any]], title: list[str], tests_folder: str, import_root: str
    ) -> str:
        module, _ = module_of(node.file, file_exists)
        return render_module(title, module, tests_folder, import_root, tests)

    def docstring_finding(check: dict[str, Any]) -> dict[str, Any]:
        return findings.docstring_finding(check, node.qualified_name, node.type.value)

    def docstring_skip_reason(check: dict[str, Any], include_private: bool = False) -> str | None:
        return findings.docstring_skip_reason(check, node.qualified_name, include_private)

    def node_info() -> dict[str, Any]:
        return describe_node(node)

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
        keys = {path: workspace.key(_path(path)) for path in read_back or []}
        argv = [name, *args] if isinstance(args, list) else []
        key = shared_key(commands.settings.read_only, argv, job_file_text, workspace.written())
        if key is None or keys:
            result = await command_in_workspace(name, args, keys)
        else:
            result = await commands.shared.get(key, lambda: command_in_workspace(name, args, {}))
        if result["timed_out"]:
            fault(
                ErrorCode.COMMAND_TIMEOUT,
                f"{name} took longer than sandbox.commands.timeout_s="
                f"{commands.settings.timeout_s}s",
            )
        return result

    async def reported(name: str, args: list[str], directory: Path) -> dict[str, Any]:
        """The command's result; a missing program or a crashed sandbox: the job's error."""
        try:
            return await commands.run(name, args, directory, project=workspace.root)
        except CommandMissing as exc:
            fault(ErrorCode.REQUIREMENT_MISSING, str(exc))
            raise
        except SandboxFailed as exc:
            fault(ErrorCode.SANDBOX_CRASHED, str(exc))
            raise

    async def command_in_workspace(
        name: str, args: list[str], keys: dict[str, str]
    ) -> dict[str, Any]:
        # A fresh directory per command, thrown away after it: what a command writes (pytest
        # running a model's code) is never a change of the job, nor seen by the next command.
        with workspace.command_directory() as directory:
            result = await reported(name, args, directory)
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
        "file_exists": file_exists,
        "node_info": node_info,
        "run_command": run_command,
        "environment_error": environment_error,
        "complete": complete,
        "complete_drafts": complete_drafts,
        "score_text": score_text,
        "docstring_examples": docstring_examples,
        # Pure functions of their arguments: no workspace access, safe to share.
        "check_docstring": check_docstring,
        "parse_docstring": parse_docstring,
        "render_docstring": render_docstring,
        "keep_layout": keep_layout,
        "compare_python": compare_python,
        "validate_json": validate_json,
        "module_name": module_name,
        "project_folder": project_folder,
        "test_location": test_location,
        "arguments_schema": arguments_schema,
        "describe_schema": describe_schema,
        "closing_call": calls.closing_call,
        "propose_calls": propose_calls,
        "explore_calls": explore,
        "check_tests": check_tests,
        "test_file_text": test_file_text,
        "parse_test_case": parse_test_case,
        "ruff_finding": findings.ruff_finding,
        "ruff_fixed_rules": findings.ruff_fixed_rules,
        "docstring_finding": docstring_finding,
        "docstring_skip_reason": docstring_skip_reason,
        "code_facts": code_facts,
        "rank_drafts": rank_drafts,
        "summary_prompt": summary_prompt,
        "doctest_examples": doctest_examples,
        "examples_section": examples_section,
        **docstring_functions(workspace, node, commands, fault, reported),
    }


def _path(path: object) -> str:
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, not {type(path).__name__}")
    return path
