"""Configuration: the settings models (`settings`), the layers they are loaded from (`loading`:
remora.yaml, [tool.remora], REMORA_*, flags) and YAML with line numbers for error messages
(`yamlfile`). The bottom floor: it imports nothing of Remora but `errors`."""
