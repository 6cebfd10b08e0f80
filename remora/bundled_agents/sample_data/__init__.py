"""The sample_data agent: its definition (agent.yaml), tool scripts (tools/) and host library."""
