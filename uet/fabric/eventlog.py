"""Structured event log: one JSON object per line (``t_ps``, ``event``, fields).

The fabric logs pause on/off, trims, drops and link down/up; end points log through the
``log`` callable of their :class:`uet.fabric.endpoint.HostContext`. Experiments report from
this log and the counters, never from print().
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


class EventLog:
    """Collects events; writes them as JSON lines to ``sink`` (path or text file) if given.

    ``keep=True`` also keeps them in ``records`` (tests, reports). ``kinds`` restricts which
    events are recorded (None = all).
    """

    def __init__(self, sink: str | Path | IO[str] | None = None, *, keep: bool = False,
                 kinds: set[str] | None = None) -> None:
        self._own = False
        self._fh: IO[str] | None
        if isinstance(sink, str | Path):
            self._fh = open(sink, "w", encoding="utf-8")  # noqa: SIM115
            self._own = True
        else:
            self._fh = sink
        self.keep = keep
        self.kinds = kinds
        self.records: list[dict[str, Any]] = []
        self._subscribers: list[Callable[[dict[str, Any]], None]] = []

    @property
    def enabled(self) -> bool:
        return self._fh is not None or self.keep or bool(self._subscribers)

    def subscribe(self, fn: Callable[[dict[str, Any]], None]) -> None:
        """Call ``fn(record)`` for every event."""
        self._subscribers.append(fn)

    def emit(self, t_ps: int, event: str, **fields: Any) -> None:
        """Record one event at virtual time ``t_ps``."""
        if self.kinds is not None and event not in self.kinds:
            return
        if not self.enabled:
            return
        rec = {"t_ps": t_ps, "event": event, **fields}
        if self._fh is not None:
            self._fh.write(json.dumps(rec, sort_keys=False, default=str) + "\n")
        if self.keep:
            self.records.append(rec)
        for fn in self._subscribers:
            fn(rec)

    def of(self, event: str) -> list[dict[str, Any]]:
        """Kept records of one kind."""
        return [r for r in self.records if r["event"] == event]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            if self._own:
                self._fh.close()
            self._fh = None
