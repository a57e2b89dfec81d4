"""Scripted single-side driving of a PdsEndpoint: build the frames a peer would send, feed
them, and collect exactly what comes back (conformance-style tests)."""

from __future__ import annotations

import random

from pds_harness import A_IP, B_IP, ses_std

from uet.pds import (
    MessageFailed,
    PacketAcked,
    PdcClosed,
    PdcOpened,
    PdsConfig,
    PdsEndpoint,
    RequestDelivered,
    ResponseReceived,
)
from uet.wire.constants import NextHeader, PdsType, ReqFlag
from uet.wire.records import (
    Frame,
    PdsAck,
    PdsAckCc,
    PdsControl,
    PdsNack,
    PdsRequest,
    psn_add,
    psn_diff,
)

S = 100_000  # Start_PSN used by scripted initiators
INI_ID = 0x0111  # SPDCID of the scripted initiator


class Side:
    """One PdsEndpoint plus everything it emitted (frames by class, events)."""

    def __init__(self, ip: str = B_IP, responder=None, seed: int = 5, **cfg) -> None:
        cfg.setdefault("fixed_start_psn", S)
        self.ep = PdsEndpoint(PdsConfig(**cfg), ip, random.Random(seed))
        self.responder = responder
        self.events: list = []
        self.now = 0

    def drain(self) -> None:
        while (ev := self.ep.next_event()) is not None:
            self.events.append(ev)
            if type(ev) is RequestDelivered and self.responder is not None and ev.token:
                answer = self.responder(ev)
                if answer is not None:
                    self.ep.respond(self.now, ev.token, *answer)

    def feed(self, *frames: Frame, now: int | None = None) -> list[Frame]:
        """Deliver frames, drain events, return every control frame it then sends."""
        if now is not None:
            self.now = now
        for f in frames:
            self.ep.receive(self.now, f)
            self.drain()
        return self.control()

    def control(self) -> list[Frame]:
        out = []
        while (f := self.ep.poll_transmit(self.now, True)) is not None:
            out.append(f)
        return out

    def data(self, limit: int = 10_000) -> list[Frame]:
        out = []
        for _ in range(limit):
            f = self.ep.poll_transmit(self.now, False)
            if f is None:
                break
            out.append(f)
        return out

    def advance(self, t: int) -> list[Frame]:
        """Run timers up to ``t`` (inclusive); return control frames sent meanwhile."""
        out = []
        while True:
            d = self.ep.next_deadline()
            if d is None or d > t:
                break
            self.now = d
            self.ep.handle_timer(d)
            self.drain()
            out += self.control()
        self.now = max(self.now, t)
        self.drain()
        return out + self.control()

    def of(self, cls) -> list:
        return [e for e in self.events if type(e) is cls]

    @property
    def delivered(self) -> list[RequestDelivered]:
        return self.of(RequestDelivered)

    @property
    def acked(self) -> list[PacketAcked]:
        return self.of(PacketAcked)

    @property
    def failed(self) -> list[MessageFailed]:
        return self.of(MessageFailed)

    @property
    def responses(self) -> list[ResponseReceived]:
        return self.of(ResponseReceived)

    @property
    def opened(self) -> list[PdcOpened]:
        return self.of(PdcOpened)

    @property
    def closed(self) -> list[PdcClosed]:
        return self.of(PdcClosed)


def req(psn: int, *, syn: bool = False, start: int = S, spdcid: int = INI_ID, dpdcid: int = 0,
        ptype: int = PdsType.RUD_REQ, ar: bool = False, retx: bool = False,
        payload: bytes = b"p" * 64, ecn: int = 0, ev: int = 0x1234, clear: int | None = None,
        next_hdr: int = NextHeader.REQ_STD, src: str = A_IP, dst: str = B_IP,
        eom: bool = True, msg_id: int = 1) -> Frame:
    """A RUD/ROD request as the scripted initiator sends it."""
    flags = (ReqFlag.SYN if syn else 0) | (ReqFlag.AR if ar else 0) | (ReqFlag.RETX if retx else 0)
    if clear is None:
        clear = psn_add(start, -1)
    pds = PdsRequest(type=ptype, next_hdr=next_hdr, flags=int(flags),
                     clear_psn_offset=psn_diff(clear, psn), psn=psn, spdcid=spdcid)
    if syn:
        pds.psn_offset = psn_diff(psn, start) & 0xFFF
    else:
        pds.dpdcid = dpdcid
    return Frame(pds=pds, ses=ses_std(msg_id=msg_id, eom=eom), payload=payload, src_ip=src,
                 dst_ip=dst, ev=ev, ecn=ecn)


def cp(ctl: int, psn: int, *, spdcid: int = INI_ID, dpdcid: int = 0, payload: int = 0,
       syn: bool = False, start: int = S, probe_opaque: int = 0, flags: int = 0,
       src: str = A_IP, dst: str = B_IP, ev: int = 0x4242) -> Frame:
    c = PdsControl(ctl_type=ctl, flags=flags | (0x04 if syn else 0), probe_opaque=probe_opaque,
                   psn=psn, spdcid=spdcid, dpdcid=dpdcid, payload=payload)
    if syn:
        c.psn_offset = psn_diff(psn, start) & 0xFFF
    return Frame(pds=c, src_ip=src, dst_ip=dst, ev=ev)


def ack(cack: int, ack_psn: int, *, spdcid: int, dpdcid: int, flags: int = 0, cc: bool = True,
        sack_base: int | None = None, bitmap: int = 0, mpr: int = 1, ses=None,
        payload: bytes = b"", src: str = B_IP, dst: str = A_IP, ev: int = 0x77) -> Frame:
    """An ACK / ACK_CC as a scripted target sends it."""
    off = psn_diff(ack_psn, cack)
    nh = 0
    if ses is not None:
        from uet.pds.ack import NEXT_HDR
        nh = NEXT_HDR[type(ses)]
    if cc:
        base = psn_add(cack, 1) if sack_base is None else sack_base
        pds = PdsAckCc(type=PdsType.ACK_CC, next_hdr=nh, flags=flags, ack_psn_offset=off,
                       cack_psn=cack, spdcid=spdcid, dpdcid=dpdcid, mpr=mpr,
                       sack_psn_offset=psn_diff(base, cack), sack_bitmap=bitmap)
    else:
        pds = PdsAck(next_hdr=nh, flags=flags, ack_psn_offset=off, cack_psn=cack,
                     spdcid=spdcid, dpdcid=dpdcid)
    return Frame(pds=pds, ses=ses, payload=payload, src_ip=src, dst_ip=dst, ev=ev)


def nack(code: int, psn: int, *, spdcid: int, dpdcid: int, payload: int = 0, flags: int = 0,
         src: str = B_IP, dst: str = A_IP) -> Frame:
    return Frame(pds=PdsNack(flags=flags, nack_code=code, nack_psn=psn, spdcid=spdcid,
                             dpdcid=dpdcid, payload=payload), src_ip=src, dst_ip=dst, ev=0x99)


def only(frames: list[Frame], cls=None) -> Frame:
    assert len(frames) == 1, frames
    if cls is not None:
        assert isinstance(frames[0].pds, cls), frames[0]
    return frames[0]


def nack_codes(frames: list[Frame]) -> list[int]:
    return [f.pds.nack_code for f in frames if isinstance(f.pds, PdsNack)]


def acks(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if isinstance(f.pds, (PdsAck, PdsAckCc))]


def cps(frames: list[Frame], ctl: int | None = None) -> list[Frame]:
    return [f for f in frames if isinstance(f.pds, PdsControl)
            and (ctl is None or f.pds.ctl_type == ctl)]


def established_target(**cfg) -> tuple[Side, int]:
    """A target that accepted the SYN packet S (with AR); returns it and its PDC ID."""
    t = Side(**cfg)
    out = t.feed(req(S, syn=True, ar=True))
    a = only(acks(out))
    return t, a.pds.spdcid

