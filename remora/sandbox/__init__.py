"""Where tools run: the Monty pool (`executor`), allow-listed commands (`commands`) in the
bubblewrap OS sandbox (`confinement`, `seccomp`, `cgroups`, `program_paths`), read-only commands
shared (`read_only`) and the project's Python (`interpreter`). It knows no agent: a script gets
the host functions its caller passes in (remora/host/). It imports `agents` (what a tool is),
`edits` and below, and no agent's code."""
