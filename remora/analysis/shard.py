"""`--shard I/N`: split the planned jobs across CI jobs, the same way on every machine."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

from remora.errors import UserInputError

T = TypeVar("T")


def parse_shard(spec: str) -> tuple[int, int]:
    index, sep, total = spec.partition("/")
    try:
        i, n = int(index), int(total)
    except ValueError:
        i = n = 0
    if not sep or n < 1 or not 1 <= i <= n:
        raise UserInputError(f"--shard {spec!r}: expected I/N with 1 <= I <= N, e.g. --shard 2/4")
    return i, n


def in_shard(key: str, index: int, total: int) -> bool:
    """Stable across runs, machines and Python versions (no `hash()`, which is salted)."""
    bucket = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % total
    return bucket == index - 1


def select_shard(items: Sequence[T], keys: Sequence[str], index: int, total: int) -> list[T]:
    return [item for item, key in zip(items, keys, strict=True) if in_shard(key, index, total)]
