"""In-memory loop between SES end points, standing in for the PDS.

Every packet an end point queues (``poll_transmit``) gets a PSN per (src, dst) pair and goes
into one "network" list; each step takes a packet at random (reordering) and may put a copy
back (duplication). A delivered request goes to the destination's ``target.handle`` and its
reply comes back, also through the network, to the initiator's ``on_response`` (a default
response when the target gave none), like a PDS ACK. Every header crosses the real wire
codec (``encode_uet``/``decode_uet``), so what the SES builds must be valid on the wire.

``pds_dedup=True`` models the PDS receive side: a duplicate PSN is not handed to the SES
again (the stored reply is re-sent). ``pds_dedup=False`` lets duplicates of standard-header
packets reach the SES (which must then recognise them by message ID and offset); packets
with an optimized header carry no message ID, so only the PDS can filter those and the loop
still does.
A reply with ``nack`` makes the packet come back later (the PDS's NACK + retransmit).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from uet.ses import SesEndpoint
from uet.ses.messages import OutPacket, TargetReply
from uet.wire.codec import decode_uet, encode_uet
from uet.wire.constants import DeliveryMode, NextHeader, PdsType, RspOpcode
from uet.wire.records import (
    Frame,
    PdsAck,
    PdsRequest,
    PdsRudi,
    PdsUud,
    SesMedium,
    SesResponse,
    SesResponseData,
    SesResponseDataSmall,
    SesSmall,
    SesStandard,
)

_NH = {SesStandard: NextHeader.REQ_STD, SesMedium: NextHeader.REQ_MEDIUM,
       SesSmall: NextHeader.REQ_SMALL, SesResponse: NextHeader.RSP,
       SesResponseData: NextHeader.RSP_DATA, SesResponseDataSmall: NextHeader.RSP_DATA_SMALL}
DEFAULT_RSP = SesResponse(opcode=RspOpcode.DEFAULT_RESPONSE)


def wire_request(pkt: OutPacket) -> tuple[Any, Any, bytes]:
    """Encode a request packet the way the PDS would carry it and decode it again."""
    nh = _NH[type(pkt.ses)]
    if pkt.mode == DeliveryMode.RUDI:
        pds = PdsRudi(type=PdsType.RUDI_REQ, next_hdr=nh)
    elif pkt.mode == DeliveryMode.UUD:
        pds = PdsUud(next_hdr=nh)
    else:
        pds = PdsRequest(type=PdsType(int(pkt.mode)), next_hdr=nh)
    frame = decode_uet(encode_uet(Frame(pds, pkt.ses, pkt.ext, pkt.payload)))
    return frame.ses, frame.ext, frame.payload


def wire_response(mode: int, rsp: Any, data: bytes) -> tuple[Any, bytes]:
    nh = _NH[type(rsp)]
    pds = PdsRudi(type=PdsType.RUDI_RESP, next_hdr=nh) if mode == DeliveryMode.RUDI \
        else PdsAck(next_hdr=nh)
    frame = decode_uet(encode_uet(Frame(pds, rsp, None, data)))
    return frame.ses, frame.payload


@dataclass
class _Req:
    src: str
    dst: str
    psn: int
    pkt: OutPacket
    delay: int = 0


@dataclass
class _Rsp:
    dst: str
    ref: Any
    mode: int
    ses: Any
    data: bytes


class Loop:
    """Moves packets between end points until nothing is left to do."""

    def __init__(self, *eps: SesEndpoint, seed: int = 0, reorder: bool = True,
                 dup: float = 0.0, pds_dedup: bool = True) -> None:
        self.eps = {ep.address: ep for ep in eps}
        self.rng = random.Random(seed)
        self.reorder = reorder
        self.dup = dup
        self.pds_dedup = pds_dedup
        self.net: list[_Req | _Rsp] = []
        self._psn: dict[tuple[str, str], int] = {}
        self._seen: dict[tuple[str, str, int], TargetReply] = {}
        self.delivered: list[tuple[str, Any]] = []  # (dst, ses header) of every request
        self.nacks = 0
        self.steps = 0

    def pump(self) -> None:
        for ep in self.eps.values():
            while (pkt := ep.poll_transmit()) is not None:
                pair = (ep.address, pkt.dst)
                psn = self._psn.get(pair, 0)
                self._psn[pair] = psn + 1
                self.net.append(_Req(ep.address, pkt.dst, psn, pkt))

    def step(self) -> bool:
        self.pump()
        if not self.net:
            return False
        self.steps += 1
        i = self.rng.randrange(len(self.net)) if self.reorder else 0
        item = self.net.pop(i)
        if isinstance(item, _Req) and item.delay > 0:
            item.delay -= 1
            self.net.append(item)
            return True
        if self.dup and self.rng.random() < self.dup:
            self.net.append(item)
        if isinstance(item, _Req):
            self._deliver_request(item)
        else:
            ses, data = wire_response(item.mode, item.ses, item.data)
            self.eps[item.dst].initiator.on_response(item.ref, ses, data)
        return True

    def run(self, max_steps: int = 1_000_000) -> int:
        n = 0
        while self.step():
            n += 1
            if n >= max_steps:
                raise AssertionError("loop did not quiesce")
        return n

    def _deliver_request(self, item: _Req) -> None:
        pkt = item.pkt
        key = (item.src, item.dst, item.psn)
        filtered = self.pds_dedup or not isinstance(pkt.ses, SesStandard)
        if filtered and key in self._seen:
            reply = self._seen[key]
        else:
            ses, ext, payload = wire_request(pkt)
            self.delivered.append((item.dst, ses))
            reply = self.eps[item.dst].target.handle(item.src, ses, ext, payload,
                                                     mode=pkt.mode, psn=item.psn)
            if reply.nack is not None:
                self.nacks += 1
                self.net.append(_Req(item.src, item.dst, item.psn, pkt, delay=20))
                return
            self._seen[key] = reply
        if pkt.mode == DeliveryMode.UUD or pkt.msg_ref is None:
            return
        rsp = reply.response if reply.response is not None else DEFAULT_RSP
        self.net.append(_Rsp(item.src, pkt.msg_ref, pkt.mode, rsp, reply.data))


def pair(profile: str = "hpc", profile_b: str | None = None, *, known_caps: bool = True,
         **loop_kw: Any) -> tuple[SesEndpoint, SesEndpoint, Loop]:
    """Two end points A (10.0.0.1) and B (10.0.0.2) and a loop between them."""
    a = SesEndpoint(profile, address="10.0.0.1", initiator_id=0xA, pid_on_fep=1)
    b = SesEndpoint(profile_b or profile, address="10.0.0.2", initiator_id=0xB, pid_on_fep=2)
    if known_caps:
        a.initiator.set_peer_cap(b.address, b.fep_cap)
        b.initiator.set_peer_cap(a.address, a.fep_cap)
    return a, b, Loop(a, b, **loop_kw)


JOB, PID, RI, KEY = 0x1234, 2, 5, 0xC0FFEE


def region(ep: SesEndpoint, size: int = 65536, *, key: int = KEY, fill: int = 0,
           perms: Any = None, **kw: Any) -> bytearray:
    """Register a ``size``-byte region filled with ``fill`` on JOB/PID/RI of ``ep``."""
    from uet.ses.memory import Perm

    mem = bytearray([fill]) * size
    ep.resources.add_region(JOB, PID, RI, key, mem, Perm.ALL if perms is None else perms, **kw)
    return mem


def addr(ep: SesEndpoint, **kw: Any) -> Any:
    from uet.ses import TargetAddr

    fields = {"job_id": JOB, "pid_on_fep": PID, "resource_index": RI, "ri_generation": 0}
    fields.update(kw)
    return TargetAddr(ep.address, **fields)


def payload(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)
