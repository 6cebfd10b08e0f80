"""Where tools run: the Monty pool (`executor`), the host functions a script may call
(`externals`), allow-listed commands (`commands`) in the bubblewrap OS sandbox (`confinement`,
`seccomp`, `pids`, `program_paths`), read-only commands shared (`read_only`) and the project's
Python (`interpreter`). It imports `agents` (what a tool is), `edits`, `tool_library` and below."""
