"""`remora server`: the language server that shows agents' findings in an editor (no code)."""
