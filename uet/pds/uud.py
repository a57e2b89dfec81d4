"""UUD: unreliable unordered delivery (ref. 3.10): no PDC, no ACK, never retransmitted."""

from __future__ import annotations

from collections import deque
from typing import Any

from uet.cms.api import SenderCongestion
from uet.pds.ack import NEXT_HDR
from uet.pds.context import PdcContext, frame_sdi, tss_marker
from uet.pds.events import RequestDelivered
from uet.wire.constants import DeliveryMode
from uet.wire.records import Frame, PdsUud


class UudSender:
    """The UUD send queue of one end point: each packet goes out once."""

    def __init__(self, ctx: PdcContext, cc: SenderCongestion) -> None:
        self.ctx = ctx
        self.cc = cc
        self.queue: deque[Any] = deque()
        self.in_ring = False

    def submit(self, now: int, req: Any) -> None:
        self.queue.append(req)
        self.ctx.wake(self)

    def has_data_work(self) -> bool:
        return bool(self.queue)

    def poll_data(self, now: int) -> Frame | None:
        if not self.queue:
            return None
        req = self.queue.popleft()
        ep = self.ctx
        cfg = ep.cfg
        ev = self.cc.choose_ev(now)
        nbytes = len(req.payload)
        self.cc.on_send(now, nbytes=nbytes, ev=ev, retx=False)
        ep.counters["uud_tx"] += 1
        ep.counters["tx_bytes"] += nbytes
        return Frame(pds=PdsUud(NEXT_HDR[type(req.ses)]), ses=req.ses, ext=req.ext,
                     payload=req.payload, src_ip=ep.local_ip, dst_ip=req.dst_ip, ev=ev,
                     dscp=cfg.dscp_data, ecn=2 if cfg.ecn_capable else 0,
                     tss=tss_marker(req.sdi))


def rx_uud(ep: PdcContext, now: int, frame: Frame) -> None:
    """Hand a UUD request to the SES (token 0: no response is possible)."""
    cfg = ep.cfg
    if frame.dscp == cfg.dscp_trimmed or frame.dscp == cfg.dscp_trimmed_lasthop:
        ep.counters["dropped.uud_trimmed"] += 1  # no reliability: nothing to ask for
        return
    ep.counters["uud_rx"] += 1
    ep.counters["rx_bytes"] += len(frame.payload)
    ep.emit(RequestDelivered(0, frame.src_ip, 0, DeliveryMode.UUD, 0, frame.ses,
                             frame.ext, frame.payload, frame.ecn == 3, frame_sdi(frame)))
