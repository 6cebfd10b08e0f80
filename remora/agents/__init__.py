"""Agents: the YAML an author writes, validated (`definition`), its tool scripts (`toolscript`),
where its jobs may write (`write_scope`), its templates rendered within bounds (`templates`),
tool-call limits (`limits`), adapters' cards (`adapters`), the bundled and configured agents
(`registry`). It imports `protocol`, `edits`, `findings`, `tool_library`, `discovery` and
`config`: never the sandbox that runs its tools."""
