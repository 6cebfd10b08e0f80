"""`explore_calls`, the host function three bundled agents share (test, sample_data and
docstring): candidate calls of the node's function, checked and run twice with the call probe
in the OS sandbox, and the ones worth keeping (tool_library/characterize.py)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any, Literal, cast

from remora.findings.results import ErrorCode
from remora.host.context import HostContext
from remora.host.core import model_functions
from remora.sandbox.commands import SandboxFailed
from remora.tool_library.characterize import PROBE_SCRIPT, explore_calls
from remora.tool_library.documented_calls import documented_sources
from remora.tool_library.module_paths import module_of, own_imports, project_of, python_sources

PROBE_RESULT_LIMIT = 20 * 1024 * 1024
"""Bytes of the probe's result file read back (40 calls' observations are a few hundred KB)."""


def call_functions(host: HostContext) -> dict[str, Callable[..., Any]]:
    workspace, node = host.workspace, host.node
    complete_drafts = model_functions(host)["complete_drafts"]

    async def explore(
        temperatures: list[float] | None = None, model: str = "always"
    ) -> dict[str, Any]:
        if model not in ("always", "for branches"):
            raise ValueError(f'model must be "always" or "for branches", not {model!r}')
        module, import_root = module_of(node.file, host.file_exists)
        project = project_of(node.file, host.file_exists)
        sources = python_sources(project, node.name, workspace.list_dir, host.project_text)
        sources.pop(node.file, None)
        # The README's and docs' examples: how the author says it is called, with valid input.
        sources |= documented_sources(project, node.name, workspace.list_dir, host.project_text)
        source = workspace.read_text(node.file)
        imported = []  # its own package's modules it imports: the tables it reads
        for path in own_imports(node.file, source, host.file_exists):
            with contextlib.suppress(OSError, ValueError, UnicodeDecodeError):
                imported.append(host.project_text(path))
        return await explore_calls(
            source=source,
            target=node.qualified_name,
            module=module,
            import_root=import_root,
            project_sources=sources,
            imported_sources=imported,
            probe=probe,
            draft=complete_drafts if host.drafting is not None else None,
            temperatures=[0.0, 0.7, 1.0] if temperatures is None else temperatures,
            model=cast(Literal["always", "for branches"], model),
        )

    async def probe(request: dict[str, Any]) -> dict[str, Any]:
        files = {
            ".remora_call_probe.py": PROBE_SCRIPT.read_text(encoding="utf-8"),
            ".remora_probe.json": json.dumps(request),
        }
        async with workspace.command_directory(extra=files) as directory:
            script = directory / ".remora_call_probe.py"
            args = [".remora_probe.json", ".remora_probe_result.json"]
            try:
                ran = await host.commands.run_host_script(
                    script, args, directory, project=workspace.root
                )
            except SandboxFailed as exc:
                host.fault(ErrorCode.SANDBOX_CRASHED, str(exc))
                raise
            answer = directory / ".remora_probe_result.json"
            if ran["timed_out"]:
                host.timed_out("the call probe")
            readable = answer.is_file() and not answer.is_symlink()
            if ran["timed_out"] or not readable or answer.stat().st_size > PROBE_RESULT_LIMIT:
                tail = " | ".join(str(ran["stderr"]).strip().splitlines()[-3:])
                raise ValueError(f"the calls could not be probed: {tail or 'no result'}")
            result: dict[str, Any] = json.loads(answer.read_text(encoding="utf-8"))
            return result

    return {"explore_calls": explore}
