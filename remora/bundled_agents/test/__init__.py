"""The test agent: its definition (agent.yaml), tool scripts (tools/) and host library."""
