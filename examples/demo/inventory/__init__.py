"""A tiny inventory package with a few real defects for Remora to find."""
