"""A tiny deterministic packet-level loop for CMS self-checks (no fabric, no PDS).

N senders with their own line-rate NICs share one bottleneck FIFO (the receiver's link)
of rate C: RED-style ECN marking between ``kmin`` and ``kmax`` bytes of queue, trimming
above ``qmax`` (the trimmed header reaches the receiver, which NACKs it). One ACK per
packet (ACK_CC with the receiver's state), CREDIT control packets from one shared
:class:`CreditScheduler` under RCCC. Everything is driven through the public CMS API
exactly as the PDS will drive it. Times in ps, sizes in bytes.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from uet.cms import AckFeedback, CmsConfig, NackFeedback
from uet.cms.factory import make_credit_scheduler, make_receiver, make_sender
from uet.wire.constants import NackCode
from uet.wire.records import PdsAckCc

PS_PER_S = 1_000_000_000_000


@dataclass
class Flow:
    fid: int
    cc: object
    rx: object
    size: int | None  # payload bytes to send; None = unlimited
    start: int = 0
    next_psn: int = 0
    queued: int = 0  # new bytes not yet sent
    rtx: list = field(default_factory=list)  # (psn, nbytes)
    outstanding: dict = field(default_factory=dict)  # psn -> (send time, nbytes, ev)
    in_flight: int = 0
    acked: int = 0
    nic_free: int = 0
    send_pending: bool = False
    finish: int | None = None
    acked_log: list = field(default_factory=list)  # (time, cumulative acked bytes)
    cwnd_log: list = field(default_factory=list)  # (time, cwnd)


class MiniNet:
    def __init__(
        self,
        config: CmsConfig,
        n_flows: int,
        *,
        seed: int = 1,
        size: int | None = None,
        prop_ps: int | None = None,
        kmin: int | None = None,
        kmax: int | None = None,
        qmax: int | None = None,
        start_gap: int = 0,
        sender_speedup: int = 1,
    ) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self.rate = config.link_rate_bps
        self.speedup = sender_speedup  # sender NICs this many times faster than the bottleneck
        self.overhead = config.pkt_overhead_bytes
        self.mtu = config.mtu_payload
        wire_bdp = config.link_rate_bps * config.base_rtt_ps // (8 * PS_PER_S)
        self.kmin = int(0.2 * wire_bdp) if kmin is None else kmin
        self.kmax = int(0.8 * wire_bdp) if kmax is None else kmax
        self.qmax = wire_bdp if qmax is None else qmax
        ser = self.ser(self.mtu)
        self.prop = (config.base_rtt_ps - 2 * ser) // 2 if prop_ps is None else prop_ps
        self.sched = make_credit_scheduler(config)
        self.events: list = []
        self.seq = 0
        self.busy_until = 0  # bottleneck FIFO
        self.max_queue = 0
        self.queue_log: list = []
        self.trims = 0
        self.trim_times: list = []
        self.marks = 0
        self.delivered = 0
        self.sched_timer: int | None = None
        self.flows = []
        for i in range(n_flows):
            cc = make_sender(config, random.Random(seed * 1000 + i))
            rx = make_receiver(config, self.sched, key=i)
            f = Flow(i, cc, rx, size, start=i * start_gap)
            f.queued = size if size is not None else 1 << 60
            self.flows.append(f)
            self.push(f.start, "try", i)

    # ---------------------------------------------------------------- basics

    def ser(self, payload: int) -> int:
        return (payload + self.overhead) * 8 * PS_PER_S // self.rate

    def push(self, t: int, kind: str, *args) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, args))

    def queue_bytes(self, t: int) -> int:
        return max(self.busy_until - t, 0) * self.rate // (8 * PS_PER_S)

    # ---------------------------------------------------------------- sender

    def backlog(self, f: Flow) -> int:
        return f.queued + sum(n for _, n in f.rtx)

    def try_send(self, t: int, f: Flow) -> None:
        f.send_pending = False
        if t < f.start or f.finish is not None:
            return
        if t < f.nic_free:
            f.send_pending = True
            self.push(f.nic_free, "try", f.fid)
            return
        f.cc.on_backlog(t, backlog_bytes=self.backlog(f))
        if f.rtx:
            psn, n = f.rtx[0]
            retx = True
        elif f.queued > 0:
            psn, n, retx = f.next_psn, min(self.mtu, f.queued), False
        else:
            return
        if not f.cc.can_send(t, nbytes=n, in_flight=f.in_flight, retx=retx):
            self.credit_request(t, f)
            return
        if retx:
            f.rtx.pop(0)
        else:
            f.next_psn += 1
            f.queued -= n
        ev = f.cc.choose_ev(t)
        target = f.cc.credit_target() if f.cc.credit_based else 0
        f.cc.on_send(t, nbytes=n, ev=ev, retx=retx)
        f.in_flight += n
        f.outstanding[psn] = (t, n, ev)
        f.nic_free = t + self.ser(n) // self.speedup
        self.push(f.nic_free, "bottleneck", f.fid, psn, n, ev, target, t)
        f.send_pending = True
        self.push(f.nic_free, "try", f.fid)

    def credit_request(self, t: int, f: Flow) -> None:
        if not f.cc.credit_based:
            return
        payload = f.cc.poll_credit_request(t)
        if payload is not None:
            self.push(t + self.prop, "credit_req", f.fid, payload)
        due = f.cc.next_deadline()
        if due is not None and due > t:
            self.push(due, "cc_timer", f.fid)

    # ---------------------------------------------------------------- network

    def bottleneck(
        self, t: int, fid: int, psn: int, n: int, ev: int, target: int, sent: int
    ) -> None:
        q = self.queue_bytes(t)
        self.max_queue = max(self.max_queue, q)
        if self.config.trimming and q + n + self.overhead > self.qmax:
            self.trims += 1
            self.trim_times.append(t)
            self.push(t + self.prop, "trimmed", fid, psn, n, ev, target, sent)
            return
        ecn = False
        if q > self.kmax:
            ecn = True
        elif q > self.kmin:
            ecn = self.rng.random() < (q - self.kmin) / (self.kmax - self.kmin)
        self.marks += ecn
        start = max(t, self.busy_until)
        self.busy_until = start + self.ser(n)
        self.push(self.busy_until + self.prop, "deliver", fid, psn, n, ev, target, sent, ecn)

    # ---------------------------------------------------------------- receiver

    def deliver(
        self, t: int, fid: int, psn: int, n: int, ev: int, target: int, sent: int, ecn: bool
    ) -> None:
        f = self.flows[fid]
        self.delivered += n
        f.rx.on_data(t, nbytes=n, ecn_ce=ecn, credit_target=target, in_order=True)
        ack = PdsAckCc()
        f.rx.fill_ack_cc(t, ack=ack)
        self.push(t + self.prop, "ack", fid, psn, ev, ecn, ack)
        self.receiver_timer(t)

    def trimmed(self, t: int, fid: int, psn: int, n: int, ev: int, target: int, sent: int) -> None:
        f = self.flows[fid]
        if f.rx.rccc is not None:
            f.rx.rccc.on_credit_request(t, credit_target=target)
        self.push(t + self.prop, "nack", fid, psn, ev)
        self.receiver_timer(t)

    def credit_req(self, t: int, fid: int, payload: int) -> None:
        rx = self.flows[fid].rx
        if rx.rccc is not None:
            rx.rccc.on_credit_request(t, credit_target=payload)
        self.receiver_timer(t)

    def receiver_timer(self, t: int) -> None:
        for key, payload in self.sched.poll_grants(t):
            self.push(t + self.prop, "credit", key, payload)
        due = self.sched.next_deadline()
        if due is not None and (
            self.sched_timer is None or due < self.sched_timer or self.sched_timer < t
        ):
            self.sched_timer = max(due, t + 1)
            self.push(self.sched_timer, "sched")

    # ---------------------------------------------------------------- feedback

    def ack(self, t: int, fid: int, psn: int, ev: int, ecn: bool, ack: PdsAckCc) -> None:
        f = self.flows[fid]
        rec = f.outstanding.pop(psn, None)
        if rec is None:
            return
        sent, n, _ = rec
        f.in_flight -= n
        f.acked += n
        f.acked_log.append((t, f.acked))
        fb = AckFeedback(
            ev=ev,
            ecn_echo=ecn,
            newly_acked_bytes=n,
            newly_acked_packets=1,
            rtt_sample=t - sent,
            in_flight_bytes=f.in_flight,
            ack_cc=ack,
        )
        f.cc.on_ack(t, fb=fb)
        f.cwnd_log.append((t, f.cc.cwnd))
        if f.size is not None and f.acked >= f.size:
            f.finish = t
            f.rx.close()
            return
        if not f.send_pending:
            self.try_send(t, f)

    def nack(self, t: int, fid: int, psn: int, ev: int) -> None:
        f = self.flows[fid]
        rec = f.outstanding.pop(psn, None)
        if rec is None:
            return
        sent, n, _ = rec
        fb = NackFeedback(
            ev=ev, code=NackCode.TRIMMED, nbytes=n, rtt_sample=t - sent, in_flight_bytes=f.in_flight
        )
        f.in_flight -= n
        f.cc.on_nack(t, fb=fb)
        f.rtx.append((psn, n))
        if not f.send_pending:
            self.try_send(t, f)

    def credit(self, t: int, fid: int, payload: int) -> None:
        f = self.flows[fid]
        f.cc.on_credit(t, credit=payload)
        if not f.send_pending:
            self.try_send(t, f)

    # ---------------------------------------------------------------- loop

    def run(self, until: int) -> MiniNet:
        while self.events and self.events[0][0] <= until:
            t, _, kind, args = heapq.heappop(self.events)
            if kind == "try":
                f = self.flows[args[0]]
                self.try_send(t, f)
            elif kind == "cc_timer":
                f = self.flows[args[0]]
                f.cc.handle_timer(t)
                if not f.send_pending:
                    self.try_send(t, f)
            elif kind == "sched":
                if self.sched_timer == t:
                    self.sched_timer = None
                self.receiver_timer(t)
            else:
                getattr(self, kind)(t, *args)
            if kind == "bottleneck" and len(self.queue_log) < 1_000_000:
                self.queue_log.append((t, self.queue_bytes(t)))
        return self

    def throughput(self, fid: int, t0: int, t1: int) -> float:
        """Acked bytes of one flow in [t0, t1) as a fraction of the link's payload rate."""
        log = self.flows[fid].acked_log

        def at(t: int) -> int:
            last = 0
            for when, total in log:
                if when > t:
                    break
                last = total
            return last

        payload_rate = self.rate / 8 / PS_PER_S * self.mtu / (self.mtu + self.overhead)
        return (at(t1) - at(t0)) / ((t1 - t0) * payload_rate)
