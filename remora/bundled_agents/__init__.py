"""The agents Remora ships, each a package found through the `remora.agents` entry point group
as a third party's is (agents/installed.py): its YAML, tool scripts and host library."""
