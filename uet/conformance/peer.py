"""The scripted test peer: send crafted packets, expect (or forbid) what comes back.

A :class:`Peer` owns one or two source addresses, a transport to the device under test
(:mod:`uet.conformance.transport`), a capture of everything exchanged, and a seeded random
generator (PDC IDs, Start_PSNs, message IDs). Cases use it like this::

    pdc = peer.pdc()                                   # a PDC the peer initiates
    msg = peer.ses.write("rma", peer.scratch, b"x" * 64)
    psn = pdc.send(msg[0])                             # SYN, AR, psn_offset filled in
    ack = peer.expect(ANY_ACK, timeout_us=1000, fields={"ack_psn": psn, "dpdcid": pdc.spdcid},
                      what="the ACK of the WRITE")
    peer.expect_nothing(PdsNack, within_us=1000)

``expect`` returns the first received packet, not yet claimed by an earlier expectation,
whose kind (a record class of :mod:`uet.wire.records`, or a tuple of them) matches and whose
``fields`` all match (a value, or a predicate from :func:`has_flags` / :func:`one_of` /
any callable) and ``where(rx)`` holds. On timeout it raises :class:`ConformanceFailure`
explaining the rule, what was expected and what arrived instead (field by field).

Time: ``timeout_us`` / ``within_us`` are the bounds the rule states. Under the in-process
target they are exact virtual time. Over UDP, positive expectations wait
``timeout_us + grace_us`` (wall time; they return as soon as the packet arrives) and
``expect_nothing`` waits at least ``quiet_us``, so that scheduling noise neither fails a
correct device nor lets a late answer slip by.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from scapy.packet import Packet

from uet.errors import RemoteError
from uet.wire.codec import decode_uet
from uet.wire.constants import CtlType, NackCode, PdsType, ReturnCode, RspOpcode
from uet.wire.errors import DecodeError
from uet.wire.layers import UET
from uet.wire.records import (
    Frame,
    PdsAck,
    PdsAckCc,
    PdsControl,
    PdsNack,
    PdsRequest,
    PdsRudi,
    PdsUud,
    psn_add,
    psn_diff,
)

from . import packets as P
from .capture import CaseCapture
from .driver import Datagram
from .setup import DutSetup

PS_PER_US = 1_000_000
ANY_ACK = (PdsAck, PdsAckCc)
REQUEST = PdsRequest
ANYTHING = object

_KIND_NAMES = {PdsAck: "ACK", PdsAckCc: "ACK_CC", PdsNack: "NACK", PdsControl: "CP",
               PdsRequest: "request", PdsRudi: "RUDI", PdsUud: "UUD", object: "any packet"}


class ConformanceFailure(RemoteError, AssertionError):
    """A case's expectation was not met; ``str()`` explains the rule and what was seen."""


# ---------------------------------------------------------------------------- predicates


class Pred:
    """A named predicate for ``fields`` values (its name appears in failure messages)."""

    def __init__(self, name: str, fn: Callable[[Any], bool]) -> None:
        self.name = name
        self.fn = fn

    def __call__(self, value: Any) -> bool:
        try:
            return bool(self.fn(value))
        except Exception:
            return False

    def __repr__(self) -> str:
        return self.name


def has_flags(mask: int) -> Pred:
    """Every bit of ``mask`` set."""
    return Pred(f"flags with 0x{mask:02x} set", lambda v: int(v) & mask == mask)


def lacks_flags(mask: int) -> Pred:
    """No bit of ``mask`` set."""
    return Pred(f"flags with 0x{mask:02x} clear", lambda v: not int(v) & mask)


def one_of(*values: Any) -> Pred:
    return Pred("one of " + ", ".join(_fmt(v) for v in values), lambda v: v in values)


def not_(value: Any) -> Pred:
    return Pred(f"not {_fmt(value)}", lambda v: v != value)


def between(lo: int, hi: int) -> Pred:
    """``lo <= v < hi``."""
    return Pred(f"in [{lo}, {hi})", lambda v: lo <= v < hi)


def _fmt(v: Any) -> str:
    if isinstance(v, Pred):
        return v.name
    if hasattr(v, "name") and isinstance(v, int):
        return f"{v.name}"
    if isinstance(v, bytes):
        return f"{len(v)} bytes {v[:12].hex()}{'...' if len(v) > 12 else ''}"
    if isinstance(v, int) and v > 9:
        return f"{v} (0x{v:x})"
    return repr(v)


# ---------------------------------------------------------------------------- received


@dataclass
class Received:
    """One datagram from the device under test, decoded (``frame``) when it decodes."""

    t_ps: int
    src_ip: str
    dst_ip: str
    ev: int
    tos: int
    raw: bytes
    frame: Frame | None
    error: str | None = None

    @property
    def t_us(self) -> float:
        return self.t_ps / PS_PER_US

    @property
    def pds(self) -> Any:
        return self.frame.pds if self.frame is not None else None

    @property
    def ses(self) -> Any:
        return self.frame.ses if self.frame is not None else None

    @property
    def ext(self) -> Any:
        return self.frame.ext if self.frame is not None else None

    @property
    def data(self) -> bytes:
        return self.frame.payload if self.frame is not None else b""

    @property
    def dscp(self) -> int:
        return self.tos >> 2

    @property
    def ecn(self) -> int:
        return self.tos & 3

    @property
    def scapy(self) -> Packet:
        """The datagram dissected by the scapy layers."""
        return UET(self.raw)

    def value(self, name: str) -> Any:
        """A field by name: ``ev``, ``dscp``, ``ecn``, ``data``, ``src_ip``; ``ses.X``,
        ``ext.X``; otherwise a PDS field or property (``ack_psn``, ``sack_base`` ...)."""
        if name in ("ev", "dscp", "ecn", "data", "src_ip", "dst_ip", "tos"):
            return getattr(self, name)
        if name.startswith("ses."):
            return getattr(self.ses, name[4:]) if self.ses is not None else None
        if name.startswith("ext."):
            return getattr(self.ext, name[4:]) if self.ext is not None else None
        return getattr(self.pds, name, None)

    def describe(self) -> str:
        """One line: kind, key fields, SES response."""
        if self.frame is None:
            return f"undecodable datagram ({self.error}) {self.raw[:16].hex()}"
        return describe_frame(self.frame, self.ev)


def describe_frame(f: Frame, ev: int | None = None) -> str:
    p = f.pds
    t = type(p)
    if t in (PdsAck, PdsAckCc):
        s = (f"{'ACK_CC' if t is PdsAckCc else 'ACK'} cack={p.cack_psn} "
             f"ack_psn={psn_add(p.cack_psn, p.ack_psn_offset)} flags=0x{p.flags:02x} "
             f"spdcid={p.spdcid} dpdcid={p.dpdcid}")
        if t is PdsAckCc:
            s += f" sack_base={p.sack_base} sack=0x{p.sack_bitmap:x} mpr={p.mpr}"
    elif t is PdsNack:
        try:
            code = NackCode(p.nack_code).name
        except ValueError:
            code = f"0x{p.nack_code:02x}"
        s = (f"NACK {code} psn={p.nack_psn} flags=0x{p.flags:02x} spdcid={p.spdcid} "
             f"dpdcid={p.dpdcid} payload={p.payload}")
    elif t is PdsControl:
        try:
            ctl = CtlType(p.ctl_type).name
        except ValueError:
            ctl = str(p.ctl_type)
        s = (f"CP {ctl} psn={p.psn} flags=0x{p.flags:02x} spdcid={p.spdcid} "
             f"dpdcid={p.dpdcid} payload={p.payload}")
    elif t is PdsRequest:
        name = PdsType(p.type).name
        s = f"{name} psn={p.psn} flags=0x{p.flags:02x} spdcid={p.spdcid}"
        s += f" psn_offset={p.psn_offset}" if p.flags & 0x04 else f" dpdcid={p.dpdcid}"
    elif t is PdsRudi:
        s = f"{PdsType(p.type).name} pkt_id={p.pkt_id} flags=0x{p.flags:02x}"
    else:
        s = type(p).__name__
    ses = f.ses
    if ses is not None and hasattr(ses, "return_code"):
        try:
            rc = ReturnCode(ses.return_code).name
        except ValueError:
            rc = str(ses.return_code)
        s += f" / {RspOpcode(ses.opcode).name} {rc}"
        if hasattr(ses, "modified_length"):
            s += f" len={ses.modified_length}"
    elif ses is not None:
        s += f" / {type(ses).__name__} opcode={ses.opcode}"
    if f.payload:
        s += f" +{len(f.payload)}B"
    if ev is not None:
        s += f" ev={ev}"
    return s


def _fmt_like(got: Any, want: Any) -> str:
    """``got`` shown like ``want``: an enum's name when ``want`` is an enum member."""
    if isinstance(want, IntEnum) and isinstance(got, int):
        try:
            return type(want)(got).name
        except ValueError:
            pass
    return _fmt(got)


def _unique(items: list[Received]) -> list[Received]:
    out: list[Received] = []
    for rx in items:
        if not any(rx is o for o in out):
            out.append(rx)
    return out


def _kind_name(kind: Any) -> str:
    if isinstance(kind, tuple):
        return " or ".join(_kind_name(k) for k in kind)
    return _KIND_NAMES.get(kind, getattr(kind, "__name__", str(kind)))


# ---------------------------------------------------------------------------- the peer


class Peer:
    """The scripted peer of one case (see the module docstring)."""

    def __init__(self, transport: Any, setup: DutSetup, *, ips: list[str], seed: int = 0,
                 capture: CaseCapture | None = None, rule: str = "", grace_us: float = 0,
                 quiet_us: float = 0, scratch: int = 0, profile: Any = None,
                 tss: Any = None) -> None:
        self.transport = transport
        self.setup = setup
        self.ips = list(ips)
        self.ip = self.ips[0]
        self.rng = random.Random(seed)
        self.capture = capture if capture is not None else CaseCapture("case")
        self.rule = rule
        self.virtual = transport.virtual
        self.grace_us = 0 if self.virtual else grace_us
        self.quiet_us = 0 if self.virtual else quiet_us
        #: offset in the "rma" region this case may scribble on (distinct per case)
        self.scratch = scratch
        #: the DUT's profile (uet.profiles.Profile): what the cases may expect it to allow
        self.profile = profile
        self.initiator_id = self.rng.getrandbits(32)
        self.ses = P.SesBuilder(setup, self.initiator_id, self.rng.randrange(1, 0x8000))
        self.log: list[Received] = []
        self.sent: list[tuple[int, bytes]] = []
        self._unclaimed: deque[Received] = deque()
        self._used_pdcids: set[int] = set()
        #: TSS cases: the peer's :class:`uet.tss.TssSublayer` (the well-known secure
        #: domain): what it sends is sealed (unless ``cleartext=True``), what it receives
        #: is opened
        self.tss = tss
        self.sdi = next(iter(tss.domains)) if tss is not None else None

    # ------------------------------------------------------------------ time
    @property
    def dut_ip(self) -> str:
        return self.transport.dut_ip

    @property
    def alt_ip(self) -> str:
        """A second source address of the peer (cases about source-address checks)."""
        if len(self.ips) < 2:
            raise RuntimeError("this target gave the peer a single address")
        return self.ips[1]

    @property
    def now_ps(self) -> int:
        return self.transport.now_ps

    @property
    def now_us(self) -> float:
        return self.transport.now_ps / PS_PER_US

    def _t_ns(self, t_ps: int) -> int:
        return t_ps // 1000

    # ------------------------------------------------------------------ sending
    def send(self, pkt: Packet | Frame | bytes, *, ev: int | None = None, dscp: int = 0,
             ecn: int = 0, src: str | None = None, cleartext: bool = False) -> int:
        """Send one UET datagram (scapy packet, record frame or raw bytes); returns the
        send time in ps. ``ev`` is the UDP source port (default: a fixed per-peer EV).
        A TSS peer seals it in its secure domain unless ``cleartext``."""
        if isinstance(pkt, Frame):
            from uet.wire.codec import encode_uet

            data = encode_uet(pkt)
        elif isinstance(pkt, (bytes, bytearray)):
            data = bytes(pkt)
        else:
            data = bytes(pkt)
        ev = self.default_ev if ev is None else ev
        src = self.ip if src is None else src
        if self.tss is not None and not cleartext:
            data = self.seal(data, src=src, ev=ev)
        tos = (dscp & 0x3F) << 2 | (ecn & 3)
        t = self.transport.send(data, src, ev, tos)
        self.capture.add(self._t_ns(t), True, src, self.dut_ip, ev, tos, data)
        self.sent.append((t, data))
        return t

    default_ev = 0xC001

    def pick_ev(self) -> int:
        """A fresh EV in the bindable high port range."""
        return self.rng.randrange(0xC100, 0xFF00)

    # ------------------------------------------------------------------ receiving
    def seal(self, plain: bytes, *, src: str | None = None, ev: int | None = None,
             sdi: int | None = None) -> bytes:
        """The UET bytes ``plain`` (PDS header onwards) sealed in the peer's domain (or
        ``sdi`` of it)."""
        dom = self.tss.domains[self.sdi if sdi is None else sdi]
        _hdr, data = dom.seal(self.now_ps, plain, self.ip if src is None else src,
                              self.dut_ip, self.default_ev if ev is None else ev)
        return data

    def _decode(self, dg: Datagram) -> Received:
        err = None
        frame: Frame | None
        if self.tss is not None and dg.payload[:1] and dg.payload[0] >> 3 == 1:
            frame = self.tss.open_uet(dg.t_ps, dg.payload, src_ip=dg.src_ip, dst_ip=dg.dst_ip,
                                      ev=dg.ev, dscp=dg.tos >> 2, ecn=dg.tos & 3)
            if frame is None:
                err = "a TSS frame the peer could not authenticate"
        else:
            try:
                frame = decode_uet(dg.payload, src_ip=dg.src_ip, dst_ip=dg.dst_ip, ev=dg.ev,
                                   dscp=dg.tos >> 2, ecn=dg.tos & 3)
            except DecodeError as exc:
                frame, err = None, str(exc)
        rx = Received(dg.t_ps, dg.src_ip, dg.dst_ip, dg.ev, dg.tos, dg.payload, frame, err)
        self.log.append(rx)
        self.capture.add(self._t_ns(dg.t_ps), False, dg.src_ip, dg.dst_ip, dg.ev, dg.tos,
                         dg.payload)
        return rx

    def _pull(self, deadline_ps: int) -> Received | None:
        dg = self.transport.next(deadline_ps)
        return None if dg is None else self._decode(dg)

    @staticmethod
    def _matches(rx: Received, kind: Any, fields: dict | None,
                 where: Callable[[Received], bool] | None) -> bool:
        if kind is not object and (rx.frame is None or not isinstance(rx.pds, kind)):
            return False
        if fields:
            for name, want in fields.items():
                got = rx.value(name)
                if callable(want) and not isinstance(want, type):
                    if not want(got):
                        return False
                elif got != want:
                    return False
        if where is not None:
            try:
                return bool(where(rx))
            except Exception:
                return False
        return True

    def _bound(self, us: float, positive: bool, exact: bool = False) -> int:
        if not exact:
            us = us + self.grace_us if positive else max(us, self.quiet_us)
        return self.now_ps + int(us * PS_PER_US)

    def expect(self, kind: Any = object, *, timeout_us: float, fields: dict | None = None,
               where: Callable[[Received], bool] | None = None, what: str = "",
               strict: bool = False) -> Received:
        """The first unclaimed matching packet within ``timeout_us`` (see module doc).
        ``strict``: no wall-clock grace over UDP (the bound itself is the rule)."""
        for rx in self._unclaimed:
            if self._matches(rx, kind, fields, where):
                self._unclaimed.remove(rx)
                return rx
        start = self.now_ps
        deadline = self._bound(timeout_us, True, strict)
        seen: list[Received] = []
        while True:
            rx = self._pull(deadline)
            if rx is None:
                break
            if self._matches(rx, kind, fields, where):
                return rx
            self._unclaimed.append(rx)
            seen.append(rx)
        raise ConformanceFailure(self._explain(kind, fields, where, what, timeout_us, start,
                                               seen, strict))

    def expect_nothing(self, kind: Any = object, *, within_us: float,
                       fields: dict | None = None,
                       where: Callable[[Received], bool] | None = None,
                       what: str = "", exact: bool = False) -> None:
        """Fail if a matching packet (unclaimed, or arriving within ``within_us``) comes.
        ``exact``: over UDP too, wait exactly ``within_us`` (a rule about "not before")."""
        for rx in self._unclaimed:
            if self._matches(rx, kind, fields, where):
                raise ConformanceFailure(self._forbidden(rx, kind, what, within_us))
        deadline = self._bound(within_us, False, exact)
        while True:
            rx = self._pull(deadline)
            if rx is None:
                return
            if self._matches(rx, kind, fields, where):
                raise ConformanceFailure(self._forbidden(rx, kind, what, within_us))
            self._unclaimed.append(rx)

    def collect(self, kind: Any = object, *, within_us: float, fields: dict | None = None,
                where: Callable[[Received], bool] | None = None) -> list[Received]:
        """Every matching packet (unclaimed or arriving) within ``within_us``; claims them.
        Over UDP the window is at least ``quiet_us``."""
        out = [rx for rx in self._unclaimed if self._matches(rx, kind, fields, where)]
        for rx in out:
            self._unclaimed.remove(rx)
        deadline = self._bound(within_us, False)
        while True:
            rx = self._pull(deadline)
            if rx is None:
                return out
            if self._matches(rx, kind, fields, where):
                out.append(rx)
            else:
                self._unclaimed.append(rx)

    def elapsed_us(self, rx: Received, since_ps: int) -> float:
        """Microseconds from ``since_ps`` to the arrival of ``rx``."""
        return (rx.t_ps - since_ps) / PS_PER_US

    def wait(self, us: float) -> None:
        """Let ``us`` pass (virtual or wall), keeping what arrives as unclaimed."""
        deadline = self.now_ps + int(us * PS_PER_US)
        while True:
            rx = self._pull(deadline)
            if rx is None:
                return
            self._unclaimed.append(rx)

    def flush(self) -> list[Received]:
        """Drop (and return) every unclaimed packet."""
        out = list(self._unclaimed)
        self._unclaimed.clear()
        return out

    @property
    def unclaimed(self) -> list[Received]:
        return list(self._unclaimed)

    # ------------------------------------------------------------------ explanations
    def _explain(self, kind: Any, fields: dict | None, where: Any, what: str,
                 timeout_us: float, start: int, seen: list[Received],
                 strict: bool = False) -> str:
        want = what or f"{_kind_name(kind)}"
        conds = ", ".join(f"{k}={_fmt(v)}" for k, v in (fields or {}).items())
        head = f"expected {want}"
        if conds:
            head += f" ({conds})"
        head += f" within {timeout_us:g} us"
        if not self.virtual and not strict:
            head += f" (+{self.grace_us / 1000:g} ms wall-clock grace)"
        lines = [head + ": nothing matching arrived"]
        pool = _unique([*seen, *self._unclaimed])
        candidates = [rx for rx in pool
                      if kind is object or (rx.frame is not None and isinstance(rx.pds, kind))]
        for rx in candidates[:4]:
            bad = []
            for name, want_v in (fields or {}).items():
                got = rx.value(name)
                ok = want_v(got) if callable(want_v) and not isinstance(want_v, type) \
                    else got == want_v
                if not ok:
                    bad.append(f"{name}={_fmt_like(got, want_v)} (expected {_fmt(want_v)})")
            if not bad and where is not None:
                bad.append("the case's condition on it does not hold")
            lines.append(f"  got {rx.describe()}, but " + "; ".join(bad))
        others = [rx for rx in seen if rx not in candidates]
        if others:
            lines.append(f"  other packets in the window ({len(others)}): "
                         + "; ".join(rx.describe() for rx in others[:4]))
        elif not candidates:
            lines.append("  the device sent nothing at all in the window")
        return "\n".join(lines)

    def _forbidden(self, rx: Received, kind: Any, what: str, within_us: float) -> str:
        want = what or _kind_name(kind)
        return f"expected no {want} within {within_us:g} us, but got: {rx.describe()}"

    # ------------------------------------------------------------------ PDCs
    def new_pdcid(self) -> int:
        while True:
            v = self.rng.randrange(1, 0x10000)
            if v not in self._used_pdcids:
                self._used_pdcids.add(v)
                return v

    def new_start_psn(self) -> int:
        return self.rng.randrange(1 << 16, 1 << 31)

    def pdc(self, *, rod: bool = False, start_psn: int | None = None,
            spdcid: int | None = None, src: str | None = None) -> PeerPdc:
        """A PDC this peer initiates towards the device (RUD, or ROD with ``rod``)."""
        return PeerPdc(self, rod=rod, start_psn=self.new_start_psn() if start_psn is None
                       else start_psn, spdcid=self.new_pdcid() if spdcid is None else spdcid,
                       src=src)

    def fail(self, message: str) -> None:
        raise ConformanceFailure(message)


class PeerPdc:
    """The peer's side of one PDC it initiates: PSNs, SYN until established, clear PSN."""

    def __init__(self, peer: Peer, *, rod: bool, start_psn: int, spdcid: int,
                 src: str | None) -> None:
        self.peer = peer
        self.rod = rod
        self.start_psn = start_psn
        self.spdcid = spdcid
        self.src = src
        self.next_psn = start_psn
        self.dpdcid: int | None = None
        self.clear_psn = psn_add(start_psn, -1)
        self.ev = peer.default_ev
        #: advance the clear PSN as ACKs arrive (off: stored responses stay uncleared)
        self.auto_clear = True
        self._acked: set[int] = set()

    @property
    def established(self) -> bool:
        return self.dpdcid is not None

    def psn(self, i: int) -> int:
        """Start_PSN + i."""
        return psn_add(self.start_psn, i)

    def header(self, psn: int | None = None, *, syn: bool | None = None, ar: bool = True,
               retx: bool = False, clear_psn: int | None = None, **kw: Any) -> Packet:
        """The request header for ``psn`` (default: the next PSN, which is then taken)."""
        if psn is None:
            psn = self.next_psn
            self.next_psn = psn_add(psn, 1)
        elif psn_diff(psn, self.next_psn) >= 0:
            self.next_psn = psn_add(psn, 1)
        if syn is None:
            syn = not self.established
        return P.request(psn, self.spdcid, dpdcid=self.dpdcid, start_psn=self.start_psn,
                         syn=syn, ar=ar, retx=retx, rod=self.rod,
                         clear_psn=self.clear_psn if clear_psn is None else clear_psn, **kw)

    def send(self, ses: Packet | None, *, psn: int | None = None, ev: int | None = None,
             dscp: int = 0, ecn: int = 0, src: str | None = None, **kw: Any) -> int:
        """Send one request carrying ``ses`` (an SES layer stack); returns its PSN."""
        hdr = self.header(psn, **kw)
        psn = int(hdr.psn)
        self.peer.send(hdr / ses if ses is not None else hdr, ev=self.ev if ev is None else ev,
                       dscp=dscp, ecn=ecn, src=src or self.src)
        return psn

    def send_msg(self, msg: P.Msg, *, ar_all: bool = False, **kw: Any) -> list[int]:
        """Send every packet of a message on consecutive PSNs (AR on the last, like an
        initiator; on all with ``ar_all``)."""
        psns = []
        for i, pkt in enumerate(msg.packets):
            psns.append(self.send(pkt, ar=ar_all or i == len(msg.packets) - 1, **kw))
        return psns

    def learn(self, rx: Received) -> None:
        """Take the target's PDC ID from its ACK (the PDC is then established)."""
        self.dpdcid = rx.pds.spdcid

    def ack_of(self, psn: int, *, fields: dict | None = None,
               timeout_us: float | None = None, what: str = "") -> Received:
        """Expect the ACK naming ``psn`` on this PDC (and learn the DPDCID from it)."""
        f = {"ack_psn": psn, "dpdcid": self.spdcid, "flags": lacks_flags(0x08)}
        f.update(fields or {})
        rx = self.peer.expect(ANY_ACK, timeout_us=self.peer.ack_bound_us
                              if timeout_us is None else timeout_us, fields=f,
                              what=what or f"the ACK of PSN {psn}")
        self.note_ack(rx)
        return rx

    def note_ack(self, rx: Received) -> None:
        """Record an ACK of this PDC: learn the DPDCID, and (``auto_clear``) advance the
        clear PSN over every PSN acknowledged so far, as an initiator does."""
        if self.dpdcid is None:
            self.learn(rx)
        p = rx.pds
        self._acked.add(p.ack_psn)
        if not self.auto_clear:
            return
        c = self.clear_psn
        while True:
            n = psn_add(c, 1)
            if psn_diff(n, self.next_psn) >= 0:
                break
            if n in self._acked or psn_diff(n, p.cack_psn) <= 0:
                c = n
            else:
                break
        self.clear_psn = c

    def establish(self, msg: P.Msg | None = None) -> Received:
        """Open the PDC with a first request (default: a NO_OP) and learn the DPDCID."""
        if msg is None:
            msg = self.peer.ses.no_op()
        psns = self.send_msg(msg)
        return self.ack_of(psns[-1], what="the ACK opening the PDC")

    def release(self, upto: int) -> None:
        """Advance the clear PSN: the peer holds every ACK up to ``upto``."""
        self.clear_psn = upto

    def control(self, ctl_type: int, psn: int | None = None, **kw: Any) -> int:
        """Send a CP on this PDC; returns the PSN it carries (default: a fresh one for
        CLOSE, else the last PSN sent)."""
        if psn is None:
            if ctl_type == CtlType.CLOSE:
                psn = self.next_psn
                self.next_psn = psn_add(psn, 1)
            else:
                psn = psn_add(self.next_psn, -1)
        syn = kw.pop("syn", not self.established)
        ev = kw.pop("ev", None)
        pkt = P.control(ctl_type, psn, self.spdcid, dpdcid=self.dpdcid,
                        start_psn=self.start_psn, syn=syn, rod=kw.pop("rod", self.rod), **kw)
        self.peer.send(pkt, ev=self.ev if ev is None else ev, src=self.src)
        return psn


#: how long a response that should come at once may take, by default (µs)
Peer.ack_bound_us = 1000.0
