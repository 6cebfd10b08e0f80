"""Tool-call limits: a preset, then overrides from the agent, the config and the agent's config."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_monty import ResourceLimits

from remora.config.settings import PRESET_LIMITS, SandboxLimits, resolved_limits


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
    preset: Limits(
        timeout_s=values["timeout_s"],
        max_memory_mb=int(values["max_memory_mb"]),
        max_host_calls=int(values["max_host_calls"]),
    )
    for preset, values in PRESET_LIMITS.items()
}


def resolve_limits(*layers: SandboxLimits) -> Limits:
    """Layers lowest first; the last layer naming a preset picks it, later values override."""
    _, values = resolved_limits(*layers)
    return Limits(
        timeout_s=values["timeout_s"],
        max_memory_mb=int(values["max_memory_mb"]),
        max_host_calls=int(values["max_host_calls"]),
    )
