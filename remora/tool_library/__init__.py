"""Host-side libraries more than one agent's host functions use: the call explorer (the test,
sample_data and docstring agents' `explore_calls`, remora/host/calls.py) with its probe, cases
and their rendering, a signature's JSON schema, and where a module and its tests are."""
