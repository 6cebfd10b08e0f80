"""Host-side libraries that tool scripts call as host functions (see
`remora/sandbox/externals.py`): one module per job, so scripts share code instead of copying it."""
