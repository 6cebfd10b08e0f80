"""Reports of a run's results: table, JSON, JSON Lines, SARIF, GitHub annotations, the progress
bar. It reads results and agents' rule descriptions; it imports `findings`, `agents` and
`discovery`, never what runs jobs."""
