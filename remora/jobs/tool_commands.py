"""`remora tool check` and `remora tool run`: how agent authors check and debug tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from remora.agents.definition import Agent
from remora.agents.host_declarations import declared_stubs
from remora.agents.toolscript import Tool
from remora.config.settings import RemoraSettings
from remora.discovery.discover import discover_nodes
from remora.discovery.nodes import Node
from remora.edits.workspace import Workspace
from remora.errors import UserInputError
from remora.host.context import HostContext, injected_context
from remora.host.library import job_functions
from remora.sandbox.commands import CommandRunner
from remora.sandbox.executor import ToolOutcome, ToolSandbox


async def check_tools(agents: list[Agent]) -> list[str]:
    """Type-check every tool script of `agents`; `path:line:column: message` per problem."""
    problems: list[str] = []
    async with ToolSandbox() as sandbox:
        for agent in agents:
            stubs = declared_stubs(agent.definition.host_functions, agent.host_stubs)
            for tool in agent.tools:
                problems += await sandbox.type_check(tool, stubs)
    return problems


def find_tool(agent: Agent, name: str) -> Tool:
    for tool in agent.tools:
        if tool.name == name:
            return tool
    known = ", ".join(tool.name for tool in agent.tools) or "none"
    raise UserInputError(f"agent {agent.name!r} has no tool {name!r}; its tools: {known}")


def find_node(spec: str, root: Path) -> Node:
    """`FILE::QUALNAME` (or a node id such as `FILE::A.f@2`); `FILE` alone is the file node."""
    file, _, qualname = spec.partition("::")
    found = discover_nodes([Path(file)], root=root)
    if not found.nodes:
        reason = "; ".join(w.message for w in found.warnings) or "no Python nodes"
        raise UserInputError(f"--node {spec}: {reason}")
    wanted = qualname or "<module>"
    for node in found.nodes:
        if wanted in (node.qualified_name, node.id.partition("::")[2]):
            return node
    names = ", ".join(node.qualified_name for node in found.nodes[1:]) or "none"
    raise UserInputError(f"--node {spec}: no node {wanted!r} in {file}; there are: {names}")


def parse_arguments(tool: Tool, raw: str) -> dict[str, Any]:
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UserInputError(f"--args: not valid JSON: {exc}") from exc
    if not isinstance(arguments, dict):
        raise UserInputError("--args: must be a JSON object")
    errors = sorted(error.message for error in tool.validator.iter_errors(arguments))
    if errors:
        raise UserInputError(f"--args: invalid for {tool.name}: " + "; ".join(errors))
    return arguments


async def run_tool(
    agent: Agent,
    tool: Tool,
    node: Node,
    arguments: dict[str, Any],
    *,
    settings: RemoraSettings,
    root: Path,
) -> tuple[ToolOutcome, Workspace]:
    """One call exactly as the runner makes it: same injection, sandbox and limits, a fresh
    workspace. The caller closes the workspace."""
    commands = CommandRunner(settings.sandbox.commands)
    workspace = Workspace(root, copy_project=commands.confinement is None)
    context = injected_context(tool, node, agent.options, workspace)
    host = job_functions(agent, HostContext(workspace, node, commands))
    async with ToolSandbox(max_workers=1) as sandbox:
        outcome = await sandbox.run(
            tool, tool.sandbox_inputs(arguments, context), host, agent.tool_limits
        )
    return outcome, workspace
