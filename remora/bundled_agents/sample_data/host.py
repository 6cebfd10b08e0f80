"""The sample_data agent's host library: a JSON schema of the node's arguments from its
signature (`arguments_schema`) and that schema in words for the model (`describe_schema`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from remora.discovery.node_info import node_info
from remora.host.context import HostContext
from remora.tool_library.module_paths import module_of
from remora.tool_library.signatures import describe_schema, signature_schema


def host_functions(host: HostContext) -> dict[str, Callable[..., Any]]:
    def arguments_schema() -> dict[str, Any]:
        module, _ = module_of(host.node.file, host.file_exists)
        schema, findings = signature_schema(node_info(host.node), module, host.node.qualified_name)
        return {"schema": schema, "findings": findings}

    return {"arguments_schema": arguments_schema, "describe_schema": describe_schema}
