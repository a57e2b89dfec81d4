"""One frame of a capture as ``uet diff`` sees it (``Packet``), shared by the diff and its
per-side summary (:mod:`uet.capture.diffsummary`), which both sit above it."""

from __future__ import annotations

from dataclasses import dataclass

from uet.capture.dissect import Value

__all__ = ["Packet"]


@dataclass(slots=True)
class Packet:
    """One frame of a capture, named by its key."""

    frame: int  # 1-based frame number in its capture
    iface: str
    group: tuple  # what the report groups by (a PDC, a RUDI pair, ...)
    kind: str  # req, ack, probe-ack, nack, cp, RUDI_REQ, RUDI_RESP, NACK, UUD, PFC, other
    key: tuple  # what names the packet (group and kind included), occurrences aside
    what: str  # short description
    fields: dict[str, Value]
    ev: int | None = None  # the EV (UDP source port or entropy header), kept when normalized
