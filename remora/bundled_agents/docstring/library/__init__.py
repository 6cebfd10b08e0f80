"""The docstring agent's library: what its host functions (host.py) are made of."""
