"""Structured event log: one JSON object per line (``t_ps``, ``event``, fields).

The fabric logs pause on/off, trims, drops and link down/up; end points log through the
``log`` callable of their :class:`uet.fabric.endpoint.HostContext`. Experiments report from
this log and the counters, never from print(). :func:`level_filter` is the terminal view
(``uet run --log-level``, ``uet serve --log-level``): each kind has a level
(:data:`EVENT_LEVELS`: error, warning, info, else debug), and a level shows its own events
and the more severe ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

#: levels of the terminal view of the log (``--log-level``), least to most verbose
LOG_LEVELS = ("off", "error", "warning", "info", "debug")
#: the level of each event kind; a kind not listed is ``debug``
EVENT_LEVELS: dict[str, str] = {
    # the traffic failed or the fabric broke
    "flow_failed": "error", "link_down": "error",
    # trouble the transport handles: losses, trims, NACKs, retransmissions, pauses
    "drop": "warning", "trim": "warning", "nack_tx": "warning", "nack_rx": "warning",
    "retransmit": "warning", "close_req": "warning", "new_start_psn": "warning",
    "pause_on": "warning", "pause_off": "warning", "pfc_xoff": "warning",
    "pfc_xon": "warning", "link_up": "warning", "link_rate": "warning", "reroute": "warning",
    # life cycle: flows and PDCs
    "flow_start": "info", "flow_done": "info", "pdc_open": "info",
    "pdc_established": "info", "pdc_closing": "info", "pdc_close": "info",
}


def event_level(rec: dict[str, Any]) -> str:
    """The level of one record: its kind's, except a PDC closed in error (``error``)."""
    if rec.get("event") == "pdc_close" and rec.get("error"):
        return "error"
    return EVENT_LEVELS.get(rec.get("event", ""), "debug")


def format_event(rec: dict[str, Any]) -> str:
    """One line for a terminal: time in µs, level, kind, the other fields as key=value."""
    fields = " ".join(f"{k}={v}" for k, v in rec.items() if k not in ("t_ps", "event"))
    return f"{rec['t_ps'] / 1e6:12.3f} µs {event_level(rec):7s} {rec['event']} {fields}"


def level_filter(level: str, write: Callable[[str], None]) -> Callable[[dict[str, Any]], None]:
    """A subscriber that writes (with :func:`format_event`) the records at ``level`` or
    more severe; ValueError naming the allowed levels for an unknown one."""
    if level not in LOG_LEVELS:
        raise ValueError(f"log level {level!r}: allowed {', '.join(LOG_LEVELS)}")
    rank = LOG_LEVELS.index(level)

    def show(rec: dict[str, Any]) -> None:
        if 0 < LOG_LEVELS.index(event_level(rec)) <= rank:
            write(format_event(rec))

    return show


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
