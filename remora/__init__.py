"""Remora: small local language models as code-analysis agents."""

__version__ = "0.1.0"
