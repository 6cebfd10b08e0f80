"""Tool-call limits: a preset, then overrides from the agent, the config and the agent's config."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic_monty import ResourceLimits

from remora.config.settings import LimitsPreset, SandboxLimits


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    max_memory_mb: int
    max_host_calls: int

    def monty(self) -> ResourceLimits:
        return {
            "max_feed_duration_secs": self.timeout_s,
            "max_memory": self.max_memory_mb * 1024 * 1024,
            "max_suspensions": self.max_host_calls,
        }


PRESETS = {
    LimitsPreset.STRICT: Limits(timeout_s=2.0, max_memory_mb=64, max_host_calls=100),
    LimitsPreset.DEFAULT: Limits(timeout_s=10.0, max_memory_mb=256, max_host_calls=1000),
    LimitsPreset.PERMISSIVE: Limits(timeout_s=60.0, max_memory_mb=1024, max_host_calls=10000),
}


def resolve_limits(*layers: SandboxLimits) -> Limits:
    """Layers lowest first; the last layer naming a preset picks it, later values override."""
    preset = next((layer.preset for layer in reversed(layers) if layer.preset), None)
    limits = PRESETS[preset or LimitsPreset.DEFAULT]
    for layer in layers:
        overrides = {
            key: value
            for key, value in layer.model_dump(exclude={"preset"}).items()
            if key in {"timeout_s", "max_memory_mb", "max_host_calls"} and value is not None
        }
        limits = replace(limits, **overrides)
    return limits
