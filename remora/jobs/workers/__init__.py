"""Worker processes: jobs run in N processes, each with its own event loop, model client and
sandbox pool, under one concurrency budget; the parent alone owns the cache, the report, the
event stream and `--fix` (docs/SCALING.md, "Worker processes")."""
