"""The event stream: what every stage did, as JSON Lines (schema in docs/EVENTS.md).

Every event has the same envelope: `v` (schema version), `ts` (Unix time), `run_id`, `event`;
job events add `job_id`, `node_id` and `agent`. Payloads (prompts, tool arguments and outputs)
are included only when asked for, cut to a size limit.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

SCHEMA_VERSION = 1

Listener = Callable[[dict[str, Any]], None]


class Events:
    def __init__(
        self,
        *,
        sink: TextIO | None = None,
        payloads: bool = False,
        payload_limit: int = 2000,
        run_id: str | None = None,
    ) -> None:
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.sink = sink
        self.payloads = payloads
        self.payload_limit = payload_limit
        self.listeners: list[Listener] = []

    @classmethod
    def to_target(cls, target: str | None, **options: Any) -> Events:
        """`-` is stderr, anything else a file (appended to, so `remora dashboard` can follow
        it while it grows); None: no stream, listeners only."""
        if target is None:
            return cls(**options)
        if target == "-":
            return cls(sink=sys.stderr, **options)
        path = Path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(sink=path.open("a", encoding="utf-8"), **options)

    @property
    def active(self) -> bool:
        return self.sink is not None or bool(self.listeners)

    def emit(self, event: str, **fields: Any) -> None:
        if not self.active:
            return
        record = {"v": SCHEMA_VERSION, "ts": time.time(), "run_id": self.run_id, "event": event}
        record.update(fields)
        self.forward(record)

    def forward(self, record: dict[str, Any]) -> None:
        """Deliver a record built elsewhere (by a worker process, for this run)."""
        if self.sink is not None:
            self.sink.write(json.dumps(record, default=str) + "\n")
            self.sink.flush()
        for listener in self.listeners:
            listener(record)

    def payload(self, value: Any) -> Any:
        """A payload field's value: None unless payloads are on; long text is cut."""
        if not self.payloads:
            return None
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if len(text) > self.payload_limit:
            return text[: self.payload_limit] + f"... [{len(text) - self.payload_limit} more]"
        return text

    def for_job(self, job_id: str, node_id: str, agent: str) -> JobEvents:
        return JobEvents(self, {"job_id": job_id, "node_id": node_id, "agent": agent})

    def close(self) -> None:
        if self.sink is not None and self.sink is not sys.stderr:
            self.sink.close()


class JobEvents:
    """Events of one job: the job's fields are added to each."""

    def __init__(self, events: Events, fields: dict[str, str]) -> None:
        self.events = events
        self.fields = fields

    def emit(self, event: str, **fields: Any) -> None:
        if self.events.active:
            self.events.emit(event, **self.fields, **fields)

    def payload(self, value: Any) -> Any:
        return self.events.payload(value)


NO_EVENTS = Events()
