"""Semantic diff of two captures: packets matched by what they are, compared field by field.

Two runs of an experiment give captures whose frames may shift in time, interleave
differently or differ in number (a loss here, a retransmission there); a byte diff of the
files says little. :func:`diff_captures` instead gives every packet a *key* that names it
within its run, pairs the packets of the two captures that carry the same key, and compares
the pairs field by field with the ``uet.*`` names of :mod:`uet.wire.fields` (those of
``uet decode --json`` and of the Wireshark dissector).

Keys (the capture interface is always part of the key: a packet seen on two taps is two
observations):

* A packet of a PDC (RUD/ROD requests, ACKs, NACKs, control packets) belongs to the PDC
  {initiator IP, target IP, initiator PDC ID}; a SYN with a new Start_PSN under a known key
  starts a new PDC (IDs are reused). Within the PDC: a request by its direction and PSN, an
  ACK by the PSN it acknowledges (ACK_PSN; a probe answer by its echoed opaque value), a NACK
  by its NACK PSN, a control packet by its type and PSN (CLEAR: its clear PSN).
* RUDI packets by {requester IP, responder IP, kind, packet ID}; UUD packets by
  {source IP, destination IP}; PFC frames by source MAC; other frames by ethertype.
* Equal keys (retransmissions, duplicates, coalesced ACKs naming the same PSN) are matched
  occurrence by occurrence, in capture order: the second retransmission in A with the second
  in B.

Two match modes:

* **exact** (default): keys and fields as on the wire. Two runs with the same seed and
  configuration give identical captures, so any difference is a real one.
* **normalized**: for runs with different seeds, where PDC IDs, Start_PSNs, RUDI packet IDs
  and EVs are drawn at random. A PDC is named by {initiator IP, target IP, its rank among
  the PDCs of that pair in order of first appearance}; PSNs become offsets from the PDC's
  Start_PSN in their direction (from the SYN, else the first PSN seen), RUDI packet IDs
  offsets from the first ID of the pair. The same rewriting applies to the compared fields
  (``uet.pds.psn``, ``uet.pds.cack_psn``, ``uet.pds.sack_base`` ...); PDC IDs
  (``uet.pds.spdcid``/``dpdcid``) and EVs (``udp.srcport``, ``uet.pds.entropy``) are not
  compared.

Sprayed packets that took another path: after that matching, a packet left without a
partner on one tap is **moved** instead of missing or added when the other capture has the
same packet (same key, tap aside) and both captures saw that packet's key the same number of
times on their busiest tap (no extra transmission explains it): either the other capture
saw it, unmatched, on another tap (moved from tap X to tap Y), or this capture saw the same
transmission (same EV) on another tap, matched there to a copy with a different EV (moved to
a path no tap watches). The EVs of both are reported.

Timestamps are not compared unless asked (``frame.time_relative_ns``, nanoseconds since the
first frame of the capture). Payload bytes are compared through ``payload.crc32`` (frames cut
by a snap length compare headers only: ``uet.wire.codec.decode_headers``; a frame whose
headers are cut is not decoded as UET).
"""

from __future__ import annotations

import fnmatch
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from uet.capture.diffpacket import Packet
from uet.capture.diffsummary import SideSummary, render_summaries, summarize
from uet.capture.dissect import Value, dissect, mac
from uet.capture.pcapng import (
    LINKTYPE_ETHERNET,
    CapturedFrame,
    CaptureError,
    CaptureTruncated,
    read_capture,
)
from uet.wire.constants import (
    UET_DEFAULT_IP_PROTO,
    UET_UDP_PORT,
    CtlType,
    NackCode,
    PdsType,
)
from uet.wire.records import (
    Frame,
    PdsAck,
    PdsAckCc,
    PdsControl,
    PdsNack,
    PdsRequest,
    PdsRudi,
    PdsUud,
    psn_diff,
)

__all__ = ["Difference", "DiffResult", "GroupResult", "Packet", "diff_captures",
           "index_capture", "field_counts", "move_text", "MODES", "COUNT_NAMES", "Value"]


#: Match modes (see the module docstring).
MODES = ("exact", "normalized")

#: Fields never compared in normalized mode: random per seed.
_RANDOM_FIELDS = frozenset({"uet.pds.spdcid", "uet.pds.dpdcid", "udp.srcport",
                            "uet.pds.entropy"})
#: Timestamp field (compared only when asked).
TIME_FIELD = "frame.time_relative_ns"

_RSP_DATA_NH = (5, 6)  # read-response data in a request: sent by the target
_TARGET_CPS = (CtlType.CLEAR_REQ, CtlType.CLOSE_REQ, CtlType.CREDIT)
_CP_NO_PSN = (CtlType.NOOP, CtlType.CLEAR, CtlType.NEGOTIATION)
_CP_PSN_PAYLOAD = (CtlType.CLEAR, CtlType.CLEAR_REQ, CtlType.PROBE)


@dataclass(slots=True)
class Difference:
    """A packet present in one capture only, a matched pair whose fields differ, or a packet
    that took another path.

    ``kind``: ``"changed"``; ``"missing"`` (in A, not in B); ``"added"`` (in B, not in A);
    ``"moved"``: seen on one tap in A and on another in B (``a`` and ``b`` both set), or seen
    on a tap in one capture only while the other capture's copy of it (``seen``, on another
    tap) carries another EV (one of ``a`` and ``b`` set). ``ev`` holds the EVs (A, B) of a
    move.
    """

    kind: str
    key: tuple
    occurrence: int  # 1 = first packet with this key (on its tap)
    a: Packet | None
    b: Packet | None
    fields: dict[str, tuple[Value, Value]] = field(default_factory=dict)
    ev: tuple[int | None, int | None] | None = None
    seen: Packet | None = None  # moved off the taps: the other capture's copy elsewhere

    @property
    def what(self) -> str:
        return (self.a or self.b).what  # type: ignore[union-attr]

    def to_json(self) -> dict[str, Any]:
        out = {"kind": self.kind, "key": _jsonable(self.key), "occurrence": self.occurrence,
               "a_frame": self.a.frame if self.a else None,
               "b_frame": self.b.frame if self.b else None, "what": self.what,
               "fields": {k: [a, b] for k, (a, b) in self.fields.items()}}
        if self.kind == "moved":
            one = self.a or self.b
            out["ifaces"] = [self.a.iface if self.a else None,
                             self.b.iface if self.b else None]
            out["ev"] = list(self.ev) if self.ev else [None, None]
            if self.seen is not None:
                out["seen"] = {"side": "B" if self.a else "A", "frame": self.seen.frame,
                               "iface": self.seen.iface}
            assert one is not None
        return out


@dataclass(slots=True)
class GroupResult:
    """Counts and differences of one group (a PDC, a RUDI or UUD pair, PFC, other)."""

    label: str
    matched: int = 0
    identical: int = 0
    changed: int = 0
    missing: int = 0
    added: int = 0
    moved: int = 0
    differences: list[Difference] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"matched": self.matched, "identical": self.identical, "changed": self.changed,
                "missing": self.missing, "added": self.added, "moved": self.moved}

    @property
    def differs(self) -> bool:
        return bool(self.changed or self.missing or self.added or self.moved)


#: Counts of :meth:`DiffResult.totals`, in order.
COUNT_NAMES = ("matched", "identical", "changed", "missing", "added", "moved")


@dataclass
class DiffResult:
    """The outcome of :func:`diff_captures`."""

    a_path: str
    b_path: str
    mode: str
    timestamps: bool
    ignored: list[str]
    a_frames: int
    b_frames: int
    groups: list[GroupResult]
    a_ifaces: list[str]
    b_ifaces: list[str]
    a_summary: SideSummary = field(default_factory=SideSummary)
    b_summary: SideSummary = field(default_factory=SideSummary)
    warnings: list[str] = field(default_factory=list)
    #: missing / added UET packets that only one tap saw, in either capture
    single_tap: tuple[int, int] = (0, 0)
    #: the interfaces compared (None: all)
    ifaces_compared: list[str] | None = None

    @property
    def same(self) -> bool:
        return not any(g.differs for g in self.groups)

    def totals(self) -> dict[str, int]:
        out = dict.fromkeys(COUNT_NAMES, 0)
        for g in self.groups:
            for k, v in g.counts().items():
                out[k] += v
        return out

    def differences(self) -> list[Difference]:
        return [d for g in self.groups for d in g.differences]

    def field_counts(self) -> list[tuple[str, int]]:
        """Field names by the number of changed (or moved) packet pairs they differ in, most
        first (ties by name)."""
        return field_counts(self.differences())

    def to_json(self, limit: int | None = None) -> dict[str, Any]:
        """A JSON-ready dict; ``limit`` caps the differences listed (all by default)."""
        left = limit
        groups = []
        for g in self.groups:
            diffs = g.differences if left is None else g.differences[:max(left, 0)]
            if left is not None:
                left -= len(diffs)
            groups.append({"group": g.label, "counts": g.counts(),
                           "differences": [d.to_json() for d in diffs]})
        listed = sum(len(g["differences"]) for g in groups)
        return {"same": self.same, "mode": self.mode, "timestamps": self.timestamps,
                "ignored": self.ignored, "warnings": self.warnings,
                "a": {"path": self.a_path, "frames": self.a_frames, "ifaces": self.a_ifaces,
                      "summary": self.a_summary.to_json()},
                "b": {"path": self.b_path, "frames": self.b_frames, "ifaces": self.b_ifaces,
                      "summary": self.b_summary.to_json()},
                "counts": self.totals(),
                "single_tap": {"missing": self.single_tap[0], "added": self.single_tap[1]},
                "fields": dict(self.field_counts()),
                "groups": groups,
                "differences_listed": listed,
                "differences_total": len(self.differences())}

    def render(self, limit: int = 20, top_fields: int = 10) -> str:
        """The readable report: totals, the summary of each side and the fields that differ
        most, then each group with differences, its counts and its differences, at most
        ``limit`` in all (0: no limit)."""
        t = self.totals()
        lines = [f"A {self.a_path}: {self.a_frames} frames; B {self.b_path}: "
                 f"{self.b_frames} frames; {self.mode} keys, timestamps "
                 f"{'compared' if self.timestamps else 'ignored'}"
                 + (f", ignoring {', '.join(self.ignored)}" if self.ignored else ""),
                 f"{t['matched']} packets matched ({t['identical']} identical, "
                 f"{t['changed']} changed), {t['missing']} only in A (missing), "
                 f"{t['added']} only in B (added)"
                 + (f", {t['moved']} moved to another path" if t["moved"] else "")]
        lines += [f"warning: {w}" for w in self.warnings]
        if any(self.single_tap):
            lines.append(f"of these, {self.single_tap[0]} only in A and {self.single_tap[1]} "
                         "only in B were seen by one tap alone (no other tap saw them in "
                         "either capture): there a sprayed packet that took an untapped path "
                         "looks like a lost one; tap their end points to tell the two apart")
        only_a = sorted(set(self.a_ifaces) - set(self.b_ifaces))
        only_b = sorted(set(self.b_ifaces) - set(self.a_ifaces))
        if only_a or only_b:
            lines.append(f"interfaces only in A: {', '.join(only_a) or '-'}; only in B: "
                         f"{', '.join(only_b) or '-'}")
        if (self.mode == "exact" and t["matched"] == 0 and self.a_frames and self.b_frames):
            lines.append("no packet matched: runs with different seeds? try --normalize")
        if self.a_frames or self.b_frames:
            lines.append("")
            lines += render_summaries(self.a_summary, self.b_summary)
        counted = self.field_counts()
        if counted:
            pairs = sum(1 for d in self.differences() if d.fields)
            lines.append("")
            lines.append(f"fields that differ most (packets, of {pairs} changed or moved):")
            width = max(len(n) for n, _ in counted[:top_fields])
            lines += [f"  {n:<{width}}  {c}" for n, c in counted[:top_fields]]
            if len(counted) > top_fields:
                lines.append(f"  ... {len(counted) - top_fields} more field(s)")
        shown = 0
        hidden = 0
        same_groups = 0
        for g in self.groups:
            if not g.differs:
                same_groups += 1
                continue
            lines.append("")
            lines.append(f"{g.label}: {g.matched} matched, {g.changed} changed, "
                         f"{g.missing} missing, {g.added} added"
                         + (f", {g.moved} moved" if g.moved else ""))
            for d in g.differences:
                if limit and shown >= limit:
                    hidden += 1
                    continue
                shown += 1
                lines.append("  " + _render_difference(d))
        if hidden:
            lines.append(f"... {hidden} more difference(s) (--limit 0 shows all)")
        if same_groups:
            lines.append(f"{same_groups} group(s) identical")
        lines.append("same" if self.same else "differ")
        return "\n".join(lines)


def field_counts(diffs: Iterable[Difference]) -> list[tuple[str, int]]:
    """Field names by the number of differences listing them, most first."""
    counts: dict[str, int] = {}
    for d in diffs:
        for name in d.fields:
            counts[name] = counts.get(name, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _render_difference(d: Difference) -> str:
    occ = f" (occurrence {d.occurrence})" if d.occurrence > 1 else ""
    changes = "".join(f"\n      {k}: {_fmt(k, a)} -> {_fmt(k, b)}"
                      for k, (a, b) in d.fields.items())
    if d.kind == "changed":
        return f"changed A#{d.a.frame} B#{d.b.frame} {d.what}{occ}{changes}"  # type: ignore[union-attr]
    if d.kind == "missing":
        return f"missing A#{d.a.frame} {d.what}{occ} (not in B)"  # type: ignore[union-attr]
    if d.kind == "added":
        return f"added   B#{d.b.frame} {d.what}{occ} (not in A)"  # type: ignore[union-attr]
    return f"moved   {move_text(d)} {d.what}{occ}{changes}"


def move_text(d: Difference) -> str:
    """Where a moved packet was seen: ``A#7 on core0.p0 -> B#9 on core1.p0 (EV 812 -> 3301)``
    or, moved off the taps, ``A#7 on core0.p0 -> B: no tap (EV 812 -> 3301, B#4 on h0)``."""
    ev_a, ev_b = d.ev or (None, None)
    evs = f"EV {_fmt('', ev_a)} -> {_fmt('', ev_b)}"
    a = f"A#{d.a.frame} on {d.a.iface or '-'}" if d.a else "A: no tap"
    b = f"B#{d.b.frame} on {d.b.iface or '-'}" if d.b else "B: no tap"
    seen = ""
    if d.seen is not None:
        seen = f", {'B' if d.a else 'A'}#{d.seen.frame} on {d.seen.iface or '-'}"
    return f"{a} -> {b} ({evs}{seen})"


def _fmt(name: str, v: Value) -> str:
    if v is None:
        return "(absent)"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int) and ("flags" in name or "bitmap" in name):
        return hex(v)
    return str(v)


def _jsonable(key: tuple) -> list:
    return [_jsonable(k) if isinstance(k, tuple) else k for k in key]


# --------------------------------------------------------------------------- indexing


@dataclass(slots=True)
class _Pdc:
    ini_ip: str
    tgt_ip: str
    ini_id: int
    tgt_id: int | None
    generation: int  # instances under the same (ini_ip, tgt_ip, ini_id) so far
    rank: int  # instances between (ini_ip, tgt_ip) so far
    syn_start: int | None = None
    base: list = field(default_factory=lambda: [None, None])  # PSN base per direction


class _Indexer:
    """Gives every frame of one capture its key, group and (normalized) fields."""

    def __init__(self, normalize: bool, timestamps: bool, udp_port: int, ip_proto: int
                 ) -> None:
        self.normalize = normalize
        self.timestamps = timestamps
        self.udp_port = udp_port
        self.ip_proto = ip_proto
        self.by_ini: dict[tuple, _Pdc] = {}
        self.generations: dict[tuple, int] = {}
        self.ranks: dict[tuple, int] = {}
        self.rudi_base: dict[tuple, int] = {}
        self.t0: int | None = None

    def packet(self, cf: CapturedFrame) -> Packet:
        if self.t0 is None:
            self.t0 = cf.ts_ns
        pkt = self._classify(cf)
        if self.timestamps:
            pkt.fields[TIME_FIELD] = cf.ts_ns - self.t0
        return pkt

    # ---------------------------------------------------------------- classification

    def _classify(self, cf: CapturedFrame) -> Packet:
        iface = cf.if_name
        data = cf.data
        if cf.linktype != LINKTYPE_ETHERNET:
            return Packet(cf.index, iface, ("other",), "other", ("other", iface, cf.linktype),
                          f"link type {cf.linktype} frame",
                          {"frame.len": cf.orig_len, "frame.bytes": data.hex()})
        d = dissect(cf, udp_port=self.udp_port, ip_proto=self.ip_proto)
        if d.kind in ("pfc", "pause"):
            fields = {"eth.dst": d.fields["eth.dst"], "eth.src": d.fields["eth.src"],
                      "eth.type": d.fields["eth.type"], "frame.len": cf.orig_len}
            fields.update((k, v) for k, v in d.fields.items() if k.startswith("macc."))
            return Packet(cf.index, iface, ("PFC",), "PFC", ("PFC", iface, fields["eth.src"]),
                          d.summary, fields)
        if d.headers is None:
            etype = d.fields.get("eth.type", -1)
            other: dict[str, Value] = {"eth.dst": mac(data[0:6]), "eth.src": mac(data[6:12]),
                                       "eth.type": etype, "frame.len": cf.orig_len,
                                       "frame.bytes": data.hex(), "error": d.error}
            return Packet(cf.index, iface, ("other",), "other", ("other", iface, etype),
                          f"not decoded as UET ({d.error})", other)
        got = d.headers
        frame = got.frame
        fields = d.fields
        if got.truncated:
            fields["frame.cap_len"] = len(data)
        else:
            fields["payload.crc32"] = zlib.crc32(frame.payload)
        ev = fields.get("udp.srcport", fields.get("uet.pds.entropy"))
        pds = frame.pds
        cls = pds.__class__
        if cls is PdsRudi or (cls is PdsNack and pds.flags & 0x08):
            pkt = self._rudi(cf, frame, fields)
        elif cls is PdsUud:
            group = ("UUD", frame.src_ip, frame.dst_ip)
            if self.normalize:
                _drop_random(fields)
            pkt = Packet(cf.index, iface, group, "UUD", (*group, iface), "UUD_REQ", fields)
        else:
            pkt = self._pdc_packet(cf, frame, fields)
        pkt.ev = ev  # type: ignore[assignment]
        return pkt

    def _rudi(self, cf: CapturedFrame, frame: Frame, fields: dict[str, Value]) -> Packet:
        pds = frame.pds
        if pds.__class__ is PdsRudi and pds.type == PdsType.RUDI_REQ:
            req_ip, rsp_ip, kind, pid = frame.src_ip, frame.dst_ip, "RUDI_REQ", pds.pkt_id
        elif pds.__class__ is PdsRudi:
            req_ip, rsp_ip, kind, pid = frame.dst_ip, frame.src_ip, "RUDI_RESP", pds.pkt_id
        else:
            req_ip, rsp_ip, kind, pid = frame.dst_ip, frame.src_ip, "NACK", pds.nack_psn
        group = ("RUDI", req_ip, rsp_ip)
        shown = pid
        if self.normalize:
            base = self.rudi_base.setdefault((req_ip, rsp_ip), pid)
            shown = psn_diff(pid, base)
            name = "uet.pds.rudi.pkt_id" if kind != "NACK" else "uet.pds.nack.psn"
            fields[name] = shown
            _drop_random(fields)
        what = f"{kind} pkt_id={_num(shown, self.normalize)}"
        if kind == "NACK":
            what = f"NACK {_code(pds.nack_code)} pkt_id={_num(shown, self.normalize)}"
        elif pds.flags & 0x10:
            what += " RETX"
        return Packet(cf.index, cf.if_name, group, kind, (*group, cf.if_name, kind, shown), what,
                      fields)

    # ---------------------------------------------------------------- PDCs

    def _pdc_packet(self, cf: CapturedFrame, frame: Frame, fields: dict[str, Value]
                    ) -> Packet:
        pds = frame.pds
        cls = pds.__class__
        pdc, direction = self._locate(frame)
        if self.normalize:
            group: tuple = ("PDC", pdc.ini_ip, pdc.tgt_ip, pdc.rank)
        else:
            group = ("PDC", pdc.ini_ip, pdc.tgt_ip, pdc.ini_id, pdc.generation)
        n = self.normalize
        if cls is PdsRequest:
            space = direction
            self._base(pdc, space, pds.psn)
            psn = self._rel(pdc, space, pds.psn)
            sub: tuple = ("req", direction, psn)
            what = f"{PdsType(pds.type).name} psn={_num(psn, n)}{_flags(pds.flags, _REQ)}"
            if n:
                for name in ("uet.pds.psn", "uet.pds.clear_psn", "uet.pds.start_psn"):
                    self._rewrite(fields, name, pdc, space)
        elif cls is PdsAck or cls is PdsAckCc:
            space = 1 - direction
            self._base(pdc, space, (pds.cack_psn + 1) & 0xFFFFFFFF)
            if pds.flags & 0x08:  # probe answer: bytes 2-3 are the probe's opaque value
                sub = ("probe-ack", direction, pds.ack_psn_offset & 0xFFFF)
                what = f"{PdsType(pds.type).name} probe opaque={pds.ack_psn_offset & 0xFFFF}"
            else:
                ack = self._rel(pdc, space, pds.ack_psn)
                sub = ("ack", direction, ack)
                what = (f"{PdsType(pds.type).name} ack_psn={_num(ack, n)} "
                        f"cack={_num(self._rel(pdc, space, pds.cack_psn), n)}"
                        f"{_flags(pds.flags, _ACK)}")
            if n:
                for name in ("uet.pds.ack_psn", "uet.pds.cack_psn", "uet.pds.sack_base",
                             "uet.pds.ack.epsn"):
                    self._rewrite(fields, name, pdc, space)
        elif cls is PdsNack:
            space = 1 - direction
            self._base(pdc, space, pds.nack_psn)
            psn = self._rel(pdc, space, pds.nack_psn)
            sub = ("nack", direction, psn)
            what = f"{PdsType(pds.type).name} {_code(pds.nack_code)} psn={_num(psn, n)}"
            if n:
                self._rewrite(fields, "uet.pds.nack.psn", pdc, space)
                if pds.nack_code == NackCode.NEW_START_PSN:
                    self._rewrite(fields, "uet.pds.nack.max_recv_psn_plus_1", pdc, space)
        else:  # PdsControl
            space = 0  # CP PSNs and PSN payloads name the initiator's request PSNs
            ctl = pds.ctl_type
            if ctl not in _CP_NO_PSN:
                self._base(pdc, space, pds.psn)
            if ctl in _CP_PSN_PAYLOAD:
                self._base(pdc, space, pds.payload)
            ref = pds.payload if ctl == CtlType.CLEAR else pds.psn
            ref = self._rel(pdc, space, ref) if ctl not in (CtlType.NOOP,
                                                            CtlType.NEGOTIATION) else ref
            sub = ("cp", _ctl(ctl), ref)
            what = (f"CP {_ctl(ctl)} {'clear_psn' if ctl == CtlType.CLEAR else 'psn'}="
                    f"{_num(ref, n and ctl not in (CtlType.NOOP, CtlType.NEGOTIATION))}"
                    f"{_flags(pds.flags, _CP)}")
            if n:
                if ctl not in _CP_NO_PSN:
                    self._rewrite(fields, "uet.pds.psn", pdc, space)
                if ctl in _CP_PSN_PAYLOAD:
                    self._rewrite(fields, "uet.pds.ctrl_payload", pdc, space)
                self._rewrite(fields, "uet.pds.start_psn", pdc, space)
        if frame.dscp in (12, 14) and cls is PdsRequest:
            what += " [trimmed]"
        if n:
            _drop_random(fields)
        return Packet(cf.index, cf.if_name, group, sub[0], (*group, cf.if_name, *sub), what,
                      fields)

    def _locate(self, frame: Frame) -> tuple[_Pdc, int]:
        """The PDC of a PDC packet and its direction (0: sent by the initiator)."""
        pds = frame.pds
        s, d = frame.src_ip, frame.dst_ip
        cls = pds.__class__
        syn = cls in (PdsRequest, PdsControl) and bool(pds.flags & 0x04)
        if syn:
            start = (pds.psn - pds.psn_offset) & 0xFFFFFFFF
            key = (s, d, pds.spdcid)
            pdc = self.by_ini.get(key)
            if pdc is None or (pdc.syn_start is not None and pdc.syn_start != start):
                pdc = self._new(s, d, pds.spdcid, None)
            if pdc.syn_start is None:
                pdc.syn_start = start
                if pdc.base[0] is None:
                    pdc.base[0] = start
            return pdc, 0
        dpdcid = getattr(pds, "dpdcid", 0)
        pdc = self.by_ini.get((s, d, pds.spdcid))
        if pdc is not None and (pdc.tgt_id is None or pdc.tgt_id == dpdcid):
            pdc.tgt_id = dpdcid
            return pdc, 0
        pdc = self.by_ini.get((d, s, dpdcid))
        if pdc is not None and (pdc.tgt_id is None or pdc.tgt_id == pds.spdcid):
            pdc.tgt_id = pds.spdcid
            return pdc, 1
        # a PDC seen for the first time without its SYN: the sender's role by packet kind
        if _from_initiator(pds):
            return self._new(s, d, pds.spdcid, dpdcid), 0
        return self._new(d, s, dpdcid, pds.spdcid), 1

    def _new(self, ini: str, tgt: str, ini_id: int, tgt_id: int | None) -> _Pdc:
        gkey = (ini, tgt, ini_id)
        gen = self.generations[gkey] = self.generations.get(gkey, 0) + 1
        rank = self.ranks[(ini, tgt)] = self.ranks.get((ini, tgt), 0) + 1
        pdc = _Pdc(ini, tgt, ini_id, tgt_id, gen, rank)
        self.by_ini[gkey] = pdc
        return pdc

    @staticmethod
    def _base(pdc: _Pdc, space: int, psn: int) -> None:
        if pdc.base[space] is None:
            pdc.base[space] = psn

    def _rel(self, pdc: _Pdc, space: int, psn: int) -> int:
        if not self.normalize:
            return psn
        return psn_diff(psn, pdc.base[space])

    def _rewrite(self, fields: dict[str, Value], name: str, pdc: _Pdc, space: int) -> None:
        v = fields.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and pdc.base[space] is not None:
            fields[name] = psn_diff(v, pdc.base[space])


def _from_initiator(pds: Any) -> bool:
    cls = pds.__class__
    if cls is PdsRequest:
        return pds.next_hdr not in _RSP_DATA_NH
    if cls is PdsControl:
        return pds.ctl_type not in _TARGET_CPS
    return False  # ACKs and NACKs: from the target


def _drop_random(fields: dict[str, Value]) -> None:
    for name in _RANDOM_FIELDS:
        fields.pop(name, None)


def _num(v: int, relative: bool) -> str:
    return f"{v:+d}" if relative else str(v)


def _code(code: int) -> str:
    try:
        return NackCode(code).name
    except ValueError:
        return f"code {code:#x}"


def _ctl(ctl: int) -> str:
    try:
        return CtlType(ctl).name
    except ValueError:
        return str(ctl)


_REQ = {0x10: "RETX", 0x08: "AR", 0x04: "SYN"}
_ACK = {0x20: "M", 0x10: "RETX"}
_CP = {0x10: "RETX", 0x08: "AR", 0x04: "SYN"}


def _flags(flags: int, names: dict[int, str]) -> str:
    on = [n for bit, n in names.items() if flags & bit]
    return " " + "|".join(on) if on else ""


def index_capture(path: str | os.PathLike[str], *, normalize: bool = False,
                  timestamps: bool = False, udp_port: int = UET_UDP_PORT,
                  ip_proto: int = UET_DEFAULT_IP_PROTO,
                  ifaces: Iterable[str] | None = None,
                  warnings: list[str] | None = None) -> tuple[list[Packet], int, list[str]]:
    """Every packet of ``path`` with its key; also the number of frames and the interface
    names seen. ``ifaces`` keeps only frames of those interfaces.

    Raises :class:`uet.capture.pcapng.CaptureError` for a corrupt file. A file cut short
    raises :class:`~uet.capture.pcapng.CaptureTruncated` too, unless ``warnings`` is a
    list: then the packets before the cut are returned and the reason is appended there.
    """
    keep = set(ifaces) if ifaces else None
    ix = _Indexer(normalize, timestamps, udp_port, ip_proto)
    packets = []
    frames = 0
    seen: dict[str, None] = {}
    try:
        for cf in read_capture(path):
            frames += 1
            seen.setdefault(cf.if_name)
            if keep is not None and cf.if_name not in keep:
                continue
            packets.append(ix.packet(cf))
    except CaptureTruncated as exc:
        if warnings is None:
            raise CaptureTruncated(f"{os.fspath(path)}: {exc}", offset=exc.offset,
                                   size=exc.size, packets=exc.packets) from exc
        warnings.append(f"{os.fspath(path)}: {exc}; comparing the {frames} frame(s) before "
                        "the cut")
    except CaptureError as exc:
        raise CaptureError(f"{os.fspath(path)}: {exc}") from exc
    return packets, frames, list(seen)


# --------------------------------------------------------------------------- matching


def _group_label(group: tuple, normalize: bool) -> str:
    kind = group[0]
    if kind == "PDC":
        if normalize:
            return f"PDC {group[1]} > {group[2]} #{group[3]}"
        gen = f" (instance {group[4]})" if group[4] > 1 else ""
        return f"PDC {group[1]} > {group[2]} initiator PDC {group[3]}{gen}"
    if kind in ("RUDI", "UUD"):
        return f"{kind} {group[1]} > {group[2]}"
    if kind == "PFC":
        return "PFC pause frames"
    return "other frames"


def diff_captures(a: str | os.PathLike[str], b: str | os.PathLike[str], *,
                  mode: str = "exact", timestamps: bool = False,
                  ignore: Iterable[str] = (), udp_port: int = UET_UDP_PORT,
                  ip_proto: int = UET_DEFAULT_IP_PROTO,
                  ifaces: Iterable[str] | None = None) -> DiffResult:
    """Compare capture ``b`` with capture ``a``.

    ``mode``: ``"exact"`` or ``"normalized"`` (module docstring). ``timestamps``: also
    compare ``frame.time_relative_ns``. ``ignore``: field names or shell patterns
    (``uet.ses.*``) left out of the comparison. ``ifaces``: only these capture interfaces.
    A capture cut short is compared up to the cut, with a warning in the result.
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: allowed {', '.join(MODES)}")
    normalize = mode == "normalized"
    ignored = list(ignore)
    ifaces = list(ifaces) if ifaces else None
    warnings: list[str] = []
    pa, na, ia = index_capture(a, normalize=normalize, timestamps=timestamps,
                               udp_port=udp_port, ip_proto=ip_proto, ifaces=ifaces,
                               warnings=warnings)
    pb, nb, ib = index_capture(b, normalize=normalize, timestamps=timestamps,
                               udp_port=udp_port, ip_proto=ip_proto, ifaces=ifaces,
                               warnings=warnings)
    m = _Matching(pa, pb)
    moves = _find_moves(m)
    groups: dict[tuple, GroupResult] = {}
    order: list[tuple[float, tuple, Difference]] = []

    def group(g: tuple) -> GroupResult:
        res = groups.get(g)
        if res is None:
            res = groups[g] = GroupResult(_group_label(g, normalize))
        return res

    for i, p in enumerate(pa):
        g = group(p.group)
        j = m.a_to_b[i]
        if j is not None:
            q = pb[j]
            g.matched += 1
            changes = _compare(p.fields, q.fields, ignored)
            if changes:
                g.changed += 1
                order.append((p.frame, p.group, Difference("changed", p.key, m.occ_a[i], p, q,
                                                           changes)))
            else:
                g.identical += 1
        elif i in moves.a:
            mv = moves.a[i]
            g.moved += 1
            q = pb[mv.b] if mv.b is not None else None
            fields = _compare(p.fields, q.fields, ignored + _MOVE_IGNORED) if q else {}
            seen = pb[mv.seen] if mv.seen is not None else None
            order.append((p.frame, p.group, Difference("moved", p.key, m.occ_a[i], p, q,
                                                       fields, mv.ev, seen)))
        else:
            g.missing += 1
            order.append((p.frame, p.group, Difference("missing", p.key, m.occ_a[i], p,
                                                       None)))
    # packets of B beyond the occurrences A has: placed after the A packet matched last
    # before them in B's order
    last_anchor = 0.0
    for j, q in enumerate(pb):
        i = m.b_to_a[j]
        if i is not None:
            last_anchor = pa[i].frame
            continue
        mv = moves.b.get(j)
        if mv is not None and mv.a is not None:
            continue  # listed with its A packet
        g = group(q.group)
        if mv is not None:
            g.moved += 1
            seen = pa[mv.seen] if mv.seen is not None else None
            order.append((last_anchor + 0.5, q.group,
                          Difference("moved", q.key, m.occ_b[j], None, q, {}, mv.ev, seen)))
        else:
            g.added += 1
            order.append((last_anchor + 0.5, q.group,
                          Difference("added", q.key, m.occ_b[j], None, q)))
    order.sort(key=lambda t: t[0])
    for _pos, g, d in order:
        groups[g].differences.append(d)
    return DiffResult(os.fspath(a), os.fspath(b), mode, timestamps, ignored, na, nb,
                      list(groups.values()), ia, ib, summarize(pa), summarize(pb), warnings,
                      _single_tap(pa, pb, order), ifaces)


def _single_tap(pa: list[Packet], pb: list[Packet],
                order: list[tuple[float, tuple, Difference]]) -> tuple[int, int]:
    """Missing and added packets that no other tap saw in either capture: on such a tap a
    sprayed packet that took an untapped path cannot be told from a lost one (counted when
    the captures have several taps; with one there is nothing to tell)."""
    if len({p.iface for p in (*pa, *pb)}) < 2:
        return 0, 0
    taps: dict[tuple, set[str]] = {}
    for p in (*pa, *pb):
        taps.setdefault(_ident(p), set()).add(p.iface)
    missing = added = 0
    for _pos, _g, d in order:
        if d.kind in ("missing", "added"):
            p = d.a or d.b
            if p is not None and p.ev is not None and len(taps[_ident(p)]) == 1:
                if d.kind == "missing":
                    missing += 1
                else:
                    added += 1
    return missing, added


#: Fields not compared between the two copies of a moved packet: they name or depend on the
#: path (the EV is reported apart; taps at different hops see different TTLs).
_MOVE_IGNORED = ["udp.srcport", "uet.pds.entropy", "ip.ttl", "ipv6.hlim"]


def _ident(p: Packet) -> tuple:
    """A packet's key without its tap."""
    n = len(p.group)
    return p.key[:n] + p.key[n + 1:]


class _Matching:
    """Packets of A and B paired by key, occurrence by occurrence, tap by tap."""

    def __init__(self, pa: list[Packet], pb: list[Packet]) -> None:
        self.pa, self.pb = pa, pb
        self.a_to_b: list[int | None] = [None] * len(pa)
        self.b_to_a: list[int | None] = [None] * len(pb)
        self.occ_a = _occurrences(pa)
        self.occ_b = _occurrences(pb)
        by_key_b: dict[tuple, list[int]] = {}
        for j, q in enumerate(pb):
            by_key_b.setdefault(q.key, []).append(j)
        for i, p in enumerate(pa):
            cands = by_key_b.get(p.key, ())
            if self.occ_a[i] <= len(cands):
                j = cands[self.occ_a[i] - 1]
                self.a_to_b[i] = j
                self.b_to_a[j] = i


def _occurrences(packets: list[Packet]) -> list[int]:
    seen: dict[tuple, int] = {}
    out = []
    for p in packets:
        seen[p.key] = seen.get(p.key, 0) + 1
        out.append(seen[p.key])
    return out


@dataclass(slots=True)
class _Move:
    a: int | None  # index in A (None: moved off the taps in A)
    b: int | None
    ev: tuple[int | None, int | None]
    seen: int | None = None  # the other side's copy elsewhere (off-tap moves)


@dataclass(slots=True)
class _Moves:
    a: dict[int, _Move] = field(default_factory=dict)
    b: dict[int, _Move] = field(default_factory=dict)


def _find_moves(m: _Matching) -> _Moves:
    """Unmatched packets that the other capture has on another tap (module docstring)."""
    out = _Moves()
    pa, pb = m.pa, m.pb
    lone_a = [i for i, j in enumerate(m.a_to_b) if j is None and pa[i].ev is not None]
    lone_b = [j for j, i in enumerate(m.b_to_a) if i is None and pb[j].ev is not None]
    if not lone_a and not lone_b:
        return out
    busiest_a = _busiest(pa)
    busiest_b = _busiest(pb)

    def balanced(ident: tuple) -> bool:
        return busiest_a.get(ident, 0) == busiest_b.get(ident, 0)

    # moved between taps: unmatched on one tap in A, unmatched on another tap in B
    waiting: dict[tuple, list[int]] = {}
    for j in lone_b:
        waiting.setdefault(_ident(pb[j]), []).append(j)
    for i in lone_a:
        p = pa[i]
        ident = _ident(p)
        cands = waiting.get(ident)
        if not cands or not balanced(ident):
            continue
        for n, j in enumerate(cands):
            if pb[j].iface != p.iface:
                del cands[n]
                out.a[i] = out.b[j] = _Move(i, j, (p.ev, pb[j].ev))
                break
    # moved off the taps: the same transmission (key and EV) seen on another tap of this
    # capture, matched there with a copy of another EV
    copies_a = _copies(pa)
    copies_b = _copies(pb)
    for lone, packets, copies, to_other, side in (
            (lone_a, pa, copies_a, m.a_to_b, "a"), (lone_b, pb, copies_b, m.b_to_a, "b")):
        others = pb if side == "a" else pa
        moved = out.a if side == "a" else out.b
        for k in lone:
            if k in moved:
                continue
            p = packets[k]
            ident = _ident(p)
            if not balanced(ident):
                continue
            for c in copies.get((ident, p.ev), ()):
                o = to_other[c]
                if c == k or packets[c].iface == p.iface or o is None:
                    continue
                if others[o].ev != p.ev:
                    if side == "a":
                        out.a[k] = _Move(k, None, (p.ev, others[o].ev), o)
                    else:
                        out.b[k] = _Move(None, k, (others[o].ev, p.ev), o)
                    break
    return out


def _busiest(packets: list[Packet]) -> dict[tuple, int]:
    """Per key (tap aside): the most times one tap saw it."""
    per_tap: dict[tuple, int] = {}
    for p in packets:
        k = (_ident(p), p.iface)
        per_tap[k] = per_tap.get(k, 0) + 1
    out: dict[tuple, int] = {}
    for (ident, _tap), n in per_tap.items():
        if n > out.get(ident, 0):
            out[ident] = n
    return out


def _copies(packets: list[Packet]) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = {}
    for i, p in enumerate(packets):
        if p.ev is not None:
            out.setdefault((_ident(p), p.ev), []).append(i)
    return out


def _compare(fa: dict[str, Value], fb: dict[str, Value], ignore: list[str]
             ) -> dict[str, tuple[Value, Value]]:
    out: dict[str, tuple[Value, Value]] = {}
    for name in list(fa) + [k for k in fb if k not in fa]:
        va, vb = fa.get(name), fb.get(name)
        if va == vb and type(va) is type(vb):
            continue
        if ignore and any(fnmatch.fnmatchcase(name, pat) for pat in ignore):
            continue
        out[name] = (va, vb)
    return out
