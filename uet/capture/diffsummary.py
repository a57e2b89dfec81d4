"""What each side of a diff holds, counted: the first thing ``uet diff`` prints.

Before the packet-by-packet differences, a reader wants to know what happened in each run:
how many packets, PDCs, retransmissions, NACKs (by code), trimmed packets, ECN marks and PFC
frames. Counts are over every tap of the capture: a packet two taps saw counts twice
(``uet diff --iface`` restricts the taps).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from uet.wire.constants import NackCode

if TYPE_CHECKING:
    from uet.capture.diffpacket import Packet

__all__ = ["SideSummary", "summarize", "render_summaries", "TRIMMED_DSCPS"]

#: DSCPs the fabric gives trimmed packets (uet.fabric.qos defaults: trimmed, trimmed at the
#: last hop), as the dissector's ``uet.trimmed_dscp`` preference.
TRIMMED_DSCPS = (12, 14)
_RETX_KINDS = ("req", "cp", "RUDI_REQ")
_NACK_KINDS = ("nack", "NACK")
_REQUEST_KINDS = ("req", "RUDI_REQ", "UUD")


@dataclass(slots=True)
class SideSummary:
    """Counts over one capture's packets."""

    packets: int = 0
    per_iface: dict[str, int] = field(default_factory=dict)
    pdcs: int = 0
    retransmissions: int = 0
    nacks: dict[str, int] = field(default_factory=dict)
    trims: int = 0
    ecn_ce: int = 0
    pfc: int = 0

    @property
    def nack_total(self) -> int:
        return sum(self.nacks.values())

    def to_json(self) -> dict[str, Any]:
        return {"packets": self.packets, "per_iface": dict(self.per_iface),
                "pdcs": self.pdcs, "retransmissions": self.retransmissions,
                "nacks": self.nack_total, "nacks_by_code": dict(self.nacks),
                "trims": self.trims, "ecn_ce": self.ecn_ce, "pfc_frames": self.pfc}


def _code_name(code: Any) -> str:
    try:
        return NackCode(code).name
    except (ValueError, TypeError):
        return f"code {code}"


def summarize(packets: Iterable[Packet]) -> SideSummary:
    """Count one side's packets (see the module docstring)."""
    s = SideSummary()
    pdcs = set()
    for p in packets:
        s.packets += 1
        s.per_iface[p.iface] = s.per_iface.get(p.iface, 0) + 1
        f = p.fields
        if p.group[0] == "PDC":
            pdcs.add(p.group)
        if p.kind in _RETX_KINDS and f.get("uet.pds.flags.retx") is True:
            s.retransmissions += 1
        if p.kind in _NACK_KINDS:
            name = _code_name(f.get("uet.pds.nack.code"))
            s.nacks[name] = s.nacks.get(name, 0) + 1
        dscp = f.get("ip.dsfield.dscp", f.get("ipv6.tclass.dscp"))
        if p.kind in _REQUEST_KINDS and dscp in TRIMMED_DSCPS:
            s.trims += 1
        if f.get("ip.dsfield.ecn", f.get("ipv6.tclass.ecn")) == 3:
            s.ecn_ce += 1
        if p.kind == "PFC":
            s.pfc += 1
    s.pdcs = len(pdcs)
    s.nacks = dict(sorted(s.nacks.items(), key=lambda kv: (-kv[1], kv[0])))
    return s


def render_summaries(a: SideSummary, b: SideSummary) -> list[str]:
    """The two sides as a table: one row per count, A and B side by side."""
    rows: list[tuple[str, int, int]] = [("packets", a.packets, b.packets)]
    for tap in dict.fromkeys([*a.per_iface, *b.per_iface]):
        rows.append((f"  on {tap or '-'}", a.per_iface.get(tap, 0), b.per_iface.get(tap, 0)))
    rows += [("PDCs", a.pdcs, b.pdcs),
             ("retransmissions", a.retransmissions, b.retransmissions),
             ("NACKs", a.nack_total, b.nack_total)]
    for code in dict.fromkeys([*a.nacks, *b.nacks]):
        rows.append((f"  {code}", a.nacks.get(code, 0), b.nacks.get(code, 0)))
    rows += [("trimmed packets", a.trims, b.trims), ("ECN CE marked", a.ecn_ce, b.ecn_ce),
             ("PFC frames", a.pfc, b.pfc)]
    width = max(len(r[0]) for r in rows)
    na = max(len(f"{r[1]:,}") for r in rows + [("", 0, 0)])
    nb = max(len(f"{r[2]:,}") for r in rows + [("", 0, 0)])
    na, nb = max(na, 1), max(nb, 1)
    out = [f"{'':<{width}}  {'A':>{na}}  {'B':>{nb}}"]
    for name, va, vb in rows:
        mark = "" if va == vb else f"  {vb - va:+,}"
        out.append(f"{name:<{width}}  {va:>{na},}  {vb:>{nb},}{mark}")
    return out
