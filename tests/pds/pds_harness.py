"""Test harness for the PDS: an SES stub per end point and an in-memory lossy channel with
virtual time (integer picoseconds). Deterministic: everything random comes from seeded rngs.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable

from uet.pds import (
    MessageFailed,
    PacketAcked,
    PdcClosed,
    PdcOpened,
    PdsConfig,
    PdsEndpoint,
    RequestDelivered,
    ResponseReceived,
    SendRequest,
)
from uet.wire.codec import decode_frame, encode_frame
from uet.wire.constants import DeliveryMode, PdsType, SesFlag, SesOpcode
from uet.wire.records import Frame, SesStandard

US = 1_000_000
MS = 1_000_000_000
A_IP = "10.0.0.1"
B_IP = "10.0.0.2"


def ses_std(msg_id: int = 1, job: int = 7, som: bool = True, eom: bool = True,
            opcode: int = SesOpcode.SEND, length: int = 0, offset: int = 0,
            payload_length: int = 0) -> SesStandard:
    flags = (SesFlag.SOM if som else 0) | (SesFlag.EOM if eom else 0)
    h = SesStandard(opcode=opcode, flags=int(flags), message_id=msg_id & 0xFFFF, job_id=job,
                    request_length=length)
    if not som:
        h.message_offset = offset
        h.payload_length = payload_length
    return h


def request(dst: str = B_IP, mode: DeliveryMode = DeliveryMode.RUD, payload: bytes = b"x" * 64,
            msg_ref: object = 1, eom: bool = True, job: int = 7, tc: int = 0,
            ses: SesStandard | None = None) -> SendRequest:
    return SendRequest(dst_ip=dst, mode=mode, job_id=job, tc=tc,
                       ses=ses if ses is not None else ses_std(job=job, eom=eom),
                       payload=payload, msg_ref=msg_ref, eom=eom)


class Host:
    """SES stub: collects events; answers requests with ``responder(event)``."""

    def __init__(self, ep: PdsEndpoint,
                 responder: Callable[[RequestDelivered], tuple | None] | None = None) -> None:
        self.ep = ep
        self.responder = responder
        self.delivered: list[RequestDelivered] = []
        self.rejected: list[RequestDelivered] = []  # refused with ep.reject (not delivered)
        self.responses: list[ResponseReceived] = []
        self.acked: list[PacketAcked] = []
        self.failed: list[MessageFailed] = []
        self.opened: list[PdcOpened] = []
        self.closed: list[PdcClosed] = []
        self.now = 0  # time of the latest drain (what respond / reject are told)

    def drain(self, now: int | None = None) -> None:
        if now is not None:
            self.now = now
        ep = self.ep
        while (ev := ep.next_event()) is not None:
            t = type(ev)
            if t is RequestDelivered:
                self.delivered.append(ev)
                if self.responder is not None and ev.token:
                    answer = self.responder(ev)
                    if answer is not None and answer[0] == "reject":
                        ep.reject(self.now, ev.token, answer[1])
                        self.delivered.pop()
                        self.rejected.append(ev)
                    elif answer is not None:
                        ep.respond(self.now, ev.token, *answer)
            elif t is PacketAcked:
                self.acked.append(ev)
            elif t is ResponseReceived:
                self.responses.append(ev)
            elif t is MessageFailed:
                self.failed.append(ev)
            elif t is PdcOpened:
                self.opened.append(ev)
            elif t is PdcClosed:
                self.closed.append(ev)


def pair(cfg_a: PdsConfig | None = None, cfg_b: PdsConfig | None = None, seed: int = 1,
         responder=None, **kw) -> tuple[Host, Host]:
    a = PdsEndpoint(cfg_a or PdsConfig(), A_IP, random.Random(seed), **kw)
    b = PdsEndpoint(cfg_b or PdsConfig(), B_IP, random.Random(seed + 1000), **kw)
    return Host(a), Host(b, responder)


class Net:
    """Connects hosts through a channel that can lose, duplicate and reorder frames."""

    def __init__(self, hosts: list[Host], seed: int = 0, loss: float = 0.0, dup: float = 0.0,
                 delay: int = 1 * US, jitter: int = 0, codec: bool = False,
                 drop: Callable[[Frame], bool] | None = None, ps_per_byte: int = 0) -> None:
        self.hosts = {h.ep.local_ip: h for h in hosts}
        self.rng = random.Random(seed)
        self.loss = loss
        self.dup = dup
        self.delay = delay
        self.jitter = jitter
        self.codec = codec
        self.drop = drop
        self.ps_per_byte = ps_per_byte
        self.now = 0
        self._q: list = []
        self._seq = itertools.count()
        self._free_at = {ip: 0 for ip in self.hosts}
        self.sent: list[tuple[int, Frame]] = []  # every frame put on the wire
        self.data_sent = 0
        self.record = True

    def _put(self, frame: Frame) -> None:
        if self.record:
            self.sent.append((self.now, frame))
        if self.drop is not None and self.drop(frame):
            return
        rng = self.rng
        if self.loss and rng.random() < self.loss:
            return
        copies = 2 if self.dup and rng.random() < self.dup else 1
        if self.codec:
            data = encode_frame(frame)
            frame = decode_frame(data)
        for _ in range(copies):
            t = self.now + self.delay + (rng.randrange(self.jitter) if self.jitter else 0)
            heapq.heappush(self._q, (t, next(self._seq), frame))

    def pump(self) -> None:
        """Drain events and send everything the end points want to send now."""
        for h in self.hosts.values():
            h.drain(self.now)
        for ip, h in self.hosts.items():
            ep = h.ep
            while (f := ep.poll_transmit(self.now, True)) is not None:
                self._put(f)
            while self._free_at[ip] <= self.now:
                f = ep.poll_transmit(self.now, False)
                if f is None:
                    break
                self.data_sent += 1
                self._put(f)
                if self.ps_per_byte:
                    self._free_at[ip] = self.now + (len(f.payload) + 64) * self.ps_per_byte
            h.drain(self.now)

    def step(self) -> bool:
        """Advance to the next event; False when nothing is left."""
        self.pump()
        cands = []
        if self._q:
            cands.append(self._q[0][0])
        for ip, h in self.hosts.items():
            d = h.ep.next_deadline()
            if d is not None:
                cands.append(d)
            if self._free_at[ip] > self.now and h.ep.ring:
                cands.append(self._free_at[ip])
        if not cands:
            return False
        self.now = max(self.now, min(cands))
        while self._q and self._q[0][0] <= self.now:
            _, _, frame = heapq.heappop(self._q)
            dst = self.hosts.get(frame.dst_ip)
            if dst is not None:
                dst.ep.receive(self.now, frame)
                dst.drain(self.now)
        for h in self.hosts.values():
            h.ep.handle_timer(self.now)
        return True

    def run(self, until: int | None = None, max_steps: int = 2_000_000) -> None:
        for _ in range(max_steps):
            if until is not None:
                nxt = self._next_time()
                if nxt is None or nxt > until:
                    self.pump()
                    self.now = max(self.now, until)
                    return
            if not self.step():
                return
        raise AssertionError("simulation did not finish")

    def _next_time(self) -> int | None:
        self.pump()
        cands = [self._q[0][0]] if self._q else []
        for ip, h in self.hosts.items():
            d = h.ep.next_deadline()
            if d is not None:
                cands.append(d)
            if self._free_at[ip] > self.now and h.ep.ring:
                cands.append(self._free_at[ip])
        return min(cands) if cands else None

    def frames(self, kind: type | None = None, src: str | None = None,
               pds_type: int | None = None) -> list[Frame]:
        out = []
        for _, f in self.sent:
            if src is not None and f.src_ip != src:
                continue
            if kind is not None and not isinstance(f.pds, kind):
                continue
            if pds_type is not None and f.pds.type != pds_type:
                continue
            out.append(f)
        return out


def is_request(f: Frame) -> bool:
    return f.pds.type in (PdsType.RUD_REQ, PdsType.ROD_REQ, PdsType.RUD_CC_REQ,
                          PdsType.ROD_CC_REQ)
