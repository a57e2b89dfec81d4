"""RUDI: reliable unordered delivery for idempotent operations, without a PDC (ref. 3.10).

Each request carries a ``pkt_id`` (per end point, sequential from a random start) instead of a
PSN. The target answers every request with exactly one RUDI_RESP carrying the SES response
(a DEFAULT_RESPONSE if the SES gave none); duplicates are answered from a bounded response
cache (LRU). When an entry was evicted the duplicate is delivered to the SES again, which is
safe because RUDI is only for idempotent operations. The initiator keeps its own RTO and
retry count per request and reports ``MessageFailed`` when they run out.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from uet.cms.api import SenderCongestion
from uet.pds.ack import NEXT_HDR, default_response
from uet.pds.context import PdcContext, frame_sdi, tss_marker
from uet.pds.events import MessageFailed, PacketAcked, RequestDelivered, ResponseReceived
from uet.pds.retransmit import RESOURCE_NACKS, RtoEstimator, nack_name
from uet.pds.target import Pending
from uet.wire.constants import (
    DeliveryMode,
    NackAction,
    NackCode,
    PdsType,
    RudiFlag,
    nack_action,
)
from uet.wire.records import Frame, PdsRudi

TX_OVERHEAD = 64
CACHE_OVERHEAD = 32
RUDI_RETX = int(RudiFlag.RETX)
RUDI_M = int(RudiFlag.M)


class RudiTx:
    """One RUDI request waiting for its RUDI_RESP."""

    __slots__ = ("pkt_id", "req", "cost", "send_time", "retries", "ev", "retx_queued", "done")

    def __init__(self, pkt_id: int, req: Any, cost: int) -> None:
        self.pkt_id = pkt_id
        self.req = req
        self.cost = cost
        self.send_time = 0
        self.retries = 0
        self.ev = 0
        self.retx_queued = False
        self.done = False


class RudiInitiator:
    """All RUDI requests of one end point (there is no PDC)."""

    def __init__(self, ctx: PdcContext, cc: SenderCongestion) -> None:
        self.ctx = ctx
        self.cfg = ctx.cfg
        self.cc = cc
        self.next_id = ctx.rng.getrandbits(32)
        self.queue: deque[Any] = deque()
        self.outstanding: dict[int, RudiTx] = {}
        self.retx: deque[RudiTx] = deque()
        self.rto = RtoEstimator(ctx.cfg)
        self.rto_at: int | None = None
        self.in_ring = False
        self._armed: int | None = None
        self.freed = False
        self.last_progress = 0  # last request answered or failed (liveness check)

    def submit(self, now: int, req: Any) -> None:
        self.queue.append(req)
        self.ctx.wake(self)

    def has_data_work(self) -> bool:
        return bool(self.retx) or (bool(self.queue)
                                   and len(self.outstanding) < self.cfg.rudi_max_outstanding)

    def poll_data(self, now: int) -> Frame | None:
        while self.retx:
            tx = self.retx.popleft()
            if tx.retx_queued and not tx.done:
                tx.retx_queued = False
                return self._send(now, tx, True)
        if not self.queue or len(self.outstanding) >= self.cfg.rudi_max_outstanding:
            return None
        req = self.queue[0]
        mem = self.ctx.tx_memory
        cost = len(req.payload) + TX_OVERHEAD
        if not mem.fits(cost):
            self.ctx.counters["blocked.memory"] += 1
            mem.wait(self)
            return None
        self.queue.popleft()
        pkt_id = self.next_id
        self.next_id = (pkt_id + 1) & 0xFFFFFFFF
        tx = RudiTx(pkt_id, req, cost)
        self.outstanding[pkt_id] = tx
        mem.used += cost
        return self._send(now, tx, False)

    def _send(self, now: int, tx: RudiTx, retx: bool) -> Frame:
        cfg = self.cfg
        req = tx.req
        ev = self.cc.choose_ev(now)
        tx.ev = ev
        tx.send_time = now
        nbytes = len(req.payload)
        self.cc.on_send(now, nbytes=nbytes, ev=ev, retx=retx)
        d = now + self.rto.rto_for(tx.retries)
        if self.rto_at is None or d < self.rto_at:
            self.rto_at = d
            self.ctx.arm(self, d)
        counters = self.ctx.counters
        counters["rudi_tx"] += 1
        counters["tx_bytes"] += nbytes
        pds = PdsRudi(PdsType.RUDI_REQ, NEXT_HDR[type(req.ses)], RUDI_RETX if retx else 0,
                      tx.pkt_id)
        return Frame(pds=pds, ses=req.ses, ext=req.ext, payload=req.payload,
                     src_ip=self.ctx.local_ip, dst_ip=req.dst_ip, ev=ev, dscp=cfg.dscp_data,
                     ecn=2 if cfg.ecn_capable else 0, tss=tss_marker(req.sdi))

    def _finish(self, now: int, tx: RudiTx) -> None:
        tx.done = True
        del self.outstanding[tx.pkt_id]
        self.last_progress = now
        ctx = self.ctx
        ctx.tx_memory.release(tx.cost)
        if self.queue:
            ctx.wake(self)
        elif not self.outstanding:
            self.rto_at = None
            self._armed = None  # nothing left to time: no stale wake-up

    def rx_resp(self, now: int, frame: Frame, pds: PdsRudi) -> None:
        ctx = self.ctx
        tx = self.outstanding.get(pds.pkt_id)
        if tx is None or tx.req.dst_ip != frame.src_ip:
            ctx.counters["rudi_resp_duplicate"] += 1
            return
        if tx.req.sdi != frame_sdi(frame):
            ctx.counters["dropped.domain_mismatch"] += 1
            return
        cfg = self.cfg
        if frame.dscp == cfg.dscp_trimmed or frame.dscp == cfg.dscp_trimmed_lasthop:
            # a switch trimmed the response (its read data): ask for it again (NT NACK)
            ctx.counters["trimmed_ack_rx"] += 1
            ctx.nack_to(now, frame.src_ip, frame.ev, frame.pds.flags & RUDI_RETX,
                        NackCode.TRIMMED_ACK, pds.pkt_id, 0, 0,
                        why="a RUDI response carrying read data was trimmed", nt=True,
                        sdi=frame_sdi(frame))
            return
        ctx.counters["rudi_resp_rx"] += 1
        if tx.retries == 0:
            self.rto.sample(now - tx.send_time)
        ses = frame.ses
        if ses is None:
            ses = default_response(tx.req.ses)
        ctx.emit(ResponseReceived(tx.req.msg_ref, ses, frame.payload, tx.pkt_id))
        if ctx.report_acked:
            ctx.emit(PacketAcked(tx.req.msg_ref, tx.pkt_id))
        self._finish(now, tx)

    def rx_nack(self, now: int, frame: Frame, nack: Any) -> None:
        ctx = self.ctx
        tx = self.outstanding.get(nack.nack_psn)
        if tx is None or tx.req.dst_ip != frame.src_ip:
            ctx.counters["nack_rx_stale"] += 1
            return
        if tx.req.sdi != frame_sdi(frame):
            ctx.counters["dropped.domain_mismatch"] += 1
            return
        action = nack_action(nack.nack_code)
        if action == NackAction.RETRANSMIT:
            if nack.nack_code in RESOURCE_NACKS:
                return  # resent when its RTO expires
            self._queue_retx(now, tx, "nack." + nack_name(nack.nack_code))
        elif action in (NackAction.CLOSE_PDC, NackAction.NEW_START_PSN):
            ctx.emit(MessageFailed(tx.req.msg_ref, f"RUDI NACK {nack_name(nack.nack_code)}"))
            self._finish(now, tx)

    def _queue_retx(self, now: int, tx: RudiTx, cause: str) -> None:
        if tx.retx_queued:
            return
        tx.retx_queued = True
        self.retx.append(tx)
        ctx = self.ctx
        ctx.counters["retx." + cause] += 1
        ctx.log(now, "retransmit", pdc_id=0, psn=tx.pkt_id, cause=cause)
        ctx.wake(self)

    def on_timer(self, now: int) -> int | None:
        if self.rto_at is None or now < self.rto_at:
            return self.rto_at
        nxt = None
        cfg = self.cfg
        for tx in list(self.outstanding.values()):
            if tx.retx_queued:
                continue
            d = tx.send_time + self.rto.rto_for(tx.retries)
            if d <= now:
                tx.retries += 1
                if tx.retries > cfg.max_retries:
                    self.ctx.emit(MessageFailed(
                        tx.req.msg_ref, f"RUDI retry limit ({cfg.max_retries}) reached"))
                    self._finish(now, tx)
                    continue
                self.cc.on_timeout(now, ev=tx.ev, nbytes=len(tx.req.payload))
                self._queue_retx(now, tx, "rto")
                continue
            if nxt is None or d < nxt:
                nxt = d
        self.rto_at = nxt
        return nxt


class RudiTarget:
    """Answers RUDI requests: one RUDI_RESP each, duplicates from a bounded cache."""

    def __init__(self, ctx: PdcContext) -> None:
        self.ctx = ctx
        self.cfg = ctx.cfg
        self.cache: OrderedDict[tuple, tuple] = OrderedDict()  # (src, pkt_id) -> resp
        self.pending: dict[tuple, int] = {}  # (src, pkt_id) -> token

    def rx_req(self, now: int, frame: Frame, pds: PdsRudi) -> None:
        ep = self.ctx
        sdi = frame_sdi(frame)
        key = (frame.src_ip, pds.pkt_id, sdi)  # a request of another domain is another one
        cached = self.cache.get(key)
        m = RUDI_M if frame.ecn == 3 else 0
        if cached is not None:
            self.cache.move_to_end(key)
            self.cache[key] = (*cached[:3], now)
            ep.counters["duplicates"] += 1
            self._send(frame, pds.pkt_id, cached[0], cached[1], m | RUDI_RETX)
            return
        if key in self.pending:
            ep.counters["duplicates"] += 1
            return
        cfg = self.cfg
        if frame.dscp == cfg.dscp_trimmed or frame.dscp == cfg.dscp_trimmed_lasthop:
            ep.counters["trimmed_rx"] += 1
            code = (NackCode.TRIMMED_LASTHOP if frame.dscp == cfg.dscp_trimmed_lasthop
                    else NackCode.TRIMMED)
            ep.nack(now, frame, code, pds.pkt_id, 0, 0, nt=True, why="trimmed by a switch")
            return
        if ep.rx_memory.full():
            ep.nack(now, frame, NackCode.NO_RESOURCE, pds.pkt_id, 0, 0, nt=True,
                    why="receive memory limit reached")
            return
        entry = Pending(self, pds.pkt_id, frame.ev, m, frame.ses, frame.src_ip, sdi)
        token = ep.new_token(entry)
        self.pending[key] = token
        payload = frame.payload
        ep.counters["rudi_rx"] += 1
        ep.counters["rx_bytes"] += len(payload)
        ep.emit(RequestDelivered(token, frame.src_ip, 0, DeliveryMode.RUDI, pds.pkt_id,
                                 frame.ses, frame.ext, payload, frame.ecn == 3, sdi))

    def on_respond(self, now: int, entry: Pending, response: Any, data: bytes) -> bool:
        if self.pending.pop((entry.src_ip, entry.psn, entry.sdi), None) is None:
            return False
        if response is None:
            response = default_response(entry.ses)
        if len(data) > self.cfg.mtu_payload:
            raise ValueError(f"RUDI response data of {len(data)} bytes exceeds mtu_payload "
                             f"({self.cfg.mtu_payload})")
        cost = len(data) + CACHE_OVERHEAD
        cache = self.cache
        mem = self.ctx.rx_memory
        cache[(entry.src_ip, entry.psn, entry.sdi)] = (response, data, cost, now)
        mem.used += cost
        counters = self.ctx.counters
        while len(cache) > self.cfg.rudi_cache_entries:
            _, old = cache.popitem(last=False)
            mem.used -= old[2]
            counters["rudi_cache_evicted"] += 1
        # entries older than rudi_cache_ps go too (oldest first: the LRU order is also
        # the order of their last use, refreshed when a duplicate is answered)
        limit = now - self.cfg.rudi_cache_ps
        while cache:
            key, old = next(iter(cache.items()))
            if old[3] > limit:
                break
            del cache[key]
            mem.used -= old[2]
            counters["rudi_cache_expired"] += 1
        self._send_to(entry.src_ip, entry.ev, entry.psn, response, data, entry.flags,
                      entry.sdi)
        return True

    def on_early(self, now: int, entry: Pending, response: Any) -> bool:
        """NO_RESPONSE: RUDI has one response per request, so nothing goes now; the real
        response follows (a retransmission meanwhile is a duplicate, ignored)."""
        if (entry.src_ip, entry.psn, entry.sdi) not in self.pending:
            return False
        entry.deferred = True
        return True

    def rx_trimmed_ack(self, now: int, frame: Frame, nack: Any) -> None:
        """NACK TRIMMED_ACK with NT: our RUDI response to ``nack_pkt_id`` lost its read
        data to a switch; send it again from the response cache (if it is still there,
        else the initiator's retransmission is answered afresh)."""
        key = (frame.src_ip, nack.nack_psn, frame_sdi(frame))
        cached = self.cache.get(key)
        ctx = self.ctx
        if cached is None:
            ctx.counters["nack_rx_stale"] += 1
            return
        self.cache.move_to_end(key)
        ctx.counters["retx.trimmed_ack"] += 1
        ctx.log(now, "retransmit", pdc_id=0, psn=nack.nack_psn, cause="trimmed_ack")
        self._send(frame, nack.nack_psn, cached[0], cached[1], RUDI_RETX)

    def on_reject(self, now: int, entry: Pending, code: int) -> bool:
        """The SES refused the request: NACK it (NT); a retransmission is delivered again."""
        if self.pending.pop((entry.src_ip, entry.psn, entry.sdi), None) is None:
            return False
        self.ctx.nack_to(now, entry.src_ip, entry.ev, entry.flags, code,
                         entry.psn, 0, 0, why="refused by the SES", nt=True,
                         sdi=entry.sdi)
        return True

    def finalize(self, now: int, entry: Pending) -> None:
        self.on_respond(now, entry, None, b"")

    def _send(self, frame: Frame, pkt_id: int, ses: Any, data: bytes, flags: int) -> None:
        self._send_to(frame.src_ip, frame.ev, pkt_id, ses, data, flags, frame_sdi(frame))

    def _send_to(self, dst: str, ev: int, pkt_id: int, ses: Any, data: bytes,
                 flags: int, sdi: int | None = None) -> None:
        ctx = self.ctx
        cfg = self.cfg
        pds = PdsRudi(PdsType.RUDI_RESP, NEXT_HDR[type(ses)], flags, pkt_id)
        # read data is bulk payload: the data class (trimmable), as ACKs with data
        dscp = cfg.dscp_data if data and cfg.ack_data_class == "data" else cfg.dscp_control
        ctx.send_frame(Frame(pds=pds, ses=ses, payload=data, src_ip=ctx.local_ip, dst_ip=dst,
                             ev=ev, dscp=dscp, tss=tss_marker(sdi)))
        ctx.counters["rudi_resp_tx"] += 1

