"""Everything that writes files: a job's copy-on-write `workspace` and the throwaway folder each
command runs in, `--fix` (`apply`) and the atomic writes that refuse a file changed since it was
read (`atomic`). It imports `findings` (a `Change`) and `discovery`, nothing above."""
