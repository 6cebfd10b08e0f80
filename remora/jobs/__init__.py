"""Running jobs: one agent on one node in its own workspace (`job`), the turn loop (`runner`,
`turn_reply`, the model `profiles`), the one `orchestrator` of a run, worker processes
(`workers/`), recorded transcripts and `tool check`/`tool run` (`tool_commands`). It may import
models, sandbox, agents, cache and everything below them; analysis, editor and cli use it."""
