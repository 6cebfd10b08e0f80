"""The command line, one module per command (in the shape of ruff's `commands/`): each adds its
parser and names the function that runs it; `main.main` parses, dispatches and turns what
escapes into an exit code."""
