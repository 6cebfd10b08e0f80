"""The result cache: a job whose inputs did not change is answered from disk (`store`), its
entries written by one background thread (`writer`), a cached change made again after edits
elsewhere in its file (`rebase`), the folder and its tags (`folder`), and what identifies the
programs tools run (`program_versions`). It may import agents, sandbox, edits, findings,
discovery and config; the jobs and the analysis use it."""
