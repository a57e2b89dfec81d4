"""The requester side of an RC queue pair: the send queue, PSNs, ACK/NAK handling,
go-back-N (or IRN-style selective repeat), the retransmission timer and RNR waits.

Sans-IO: the QP's NIC asks :meth:`Requester.next_packet` for the next packet to put on the
wire and feeds ACKs, NAKs and timer expiries back in; what completes comes back as a list
of work requests. PSNs are 24-bit; every comparison is serial (:func:`psn_diff`).

Go-back-N (IBTA 9.7.5): a NAK "PSN sequence error" with PSN ``e`` acknowledges every PSN
before ``e`` and makes the requester resend everything from ``e``; a retransmission timeout
resends everything from the oldest unacknowledged PSN, at most ``retry_cnt`` times without
progress. An RNR NAK stops the QP for the responder's RNR timer, then resends from its PSN,
at most ``rnr_retry`` times (7: forever). Other NAKs are fatal: the work request fails and
the QP enters the error state, flushing the rest.

IRN (Mittal et al., "Revisiting Network Support for RDMA", SIGCOMM 2018), as a knob: the
responder keeps out-of-order packets and NAKs each hole; the requester resends only the
NAKed PSN, caps the packets in flight (BDP-FC, ``max_inflight_packets``) and uses the short
``irn_rto_low`` timeout while few packets are in flight.
"""

from __future__ import annotations

from collections import Counter, deque
from enum import Enum, IntEnum
from typing import Any

from uet.errors import LocalError
from uet.roce.config import RoceConfig
from uet.roce.constants import PSN_MASK, RNR_TIMER_US, local_ack_timeout_ps
from uet.roce.records import psn_diff
from uet.roce.states import transition

PS_PER_US = 1_000_000


class WcStatus(IntEnum):
    """Work completion status (the ``ibv_wc_status`` values of the same names)."""

    SUCCESS = 0
    REM_INV_REQ_ERR = 9
    REM_ACCESS_ERR = 10
    REM_OP_ERR = 11
    RETRY_EXC_ERR = 12
    RNR_RETRY_EXC_ERR = 13
    WR_FLUSH_ERR = 5


class WrKind(Enum):
    WRITE = "write"
    SEND = "send"


class ReqState(Enum):
    """Requester states: nothing to do, sending/awaiting ACKs, held by an RNR NAK, error."""

    IDLE = "idle"
    ACTIVE = "active"
    RNR_WAIT = "rnr_wait"
    ERROR = "error"


REQ_TRANSITIONS: dict[ReqState, frozenset[ReqState]] = {
    ReqState.IDLE: frozenset({ReqState.ACTIVE, ReqState.ERROR}),
    ReqState.ACTIVE: frozenset({ReqState.IDLE, ReqState.RNR_WAIT, ReqState.ERROR}),
    ReqState.RNR_WAIT: frozenset({ReqState.ACTIVE, ReqState.ERROR}),
    ReqState.ERROR: frozenset(),
}


class SendWqe:
    """One work request on the send queue: an RDMA WRITE (to ``remote_va`` under ``rkey``)
    or a SEND of ``length`` bytes (``data`` None: zeros). PSNs ``first_psn`` ..
    ``first_psn + npkts - 1``. ``status`` is None until it completes."""

    __slots__ = ("wr_id", "kind", "length", "data", "remote_va", "rkey", "imm", "first_psn",
                 "npkts", "status", "posted_at", "done_at", "next", "user")

    def __init__(self, wr_id: int, kind: WrKind, length: int, *, data: Any = None,
                 remote_va: int = 0, rkey: int = 0, imm: int | None = None,
                 user: Any = None) -> None:
        if length < 0:
            raise ValueError(f"work request length {length} < 0")
        if data is not None and len(data) != length:
            raise ValueError(f"work request data of {len(data)} bytes, length {length}")
        self.wr_id = wr_id
        self.kind = kind
        self.length = length
        self.data = data
        self.remote_va = remote_va
        self.rkey = rkey
        self.imm = imm
        self.first_psn = 0
        self.npkts = 0
        self.status: WcStatus | None = None
        self.posted_at = 0
        self.done_at: int | None = None
        self.next: SendWqe | None = None
        self.user = user

    @property
    def last_psn(self) -> int:
        return (self.first_psn + self.npkts - 1) & PSN_MASK

    def __repr__(self) -> str:
        return (f"SendWqe({self.wr_id}, {self.kind.value}, {self.length} B, psn "
                f"{self.first_psn}+{self.npkts}, {self.status})")


class QueueFull(LocalError):
    """The send queue holds ``max_wqes`` uncompleted work requests."""


class Requester:
    """See the module docstring. ``stats`` is the end point's counter (shared)."""

    __slots__ = ("cfg", "mtu", "wqes", "next_psn", "una", "nxt", "max_sent", "cur", "seg",
                 "rto_at", "retries", "rnr_left", "rnr_until", "state", "rtx", "rtx_set",
                 "rto_ps", "stats", "last_posted", "cap", "cause")

    def __init__(self, cfg: RoceConfig, start_psn: int, stats: Counter[str]) -> None:
        self.cfg = cfg
        self.mtu = cfg.mtu
        self.wqes: deque[SendWqe] = deque()
        self.next_psn = start_psn  # PSN of the next work request posted
        self.una = start_psn  # oldest PSN not acknowledged
        self.nxt = start_psn  # next PSN to transmit
        self.max_sent = (start_psn - 1) & PSN_MASK  # highest PSN transmitted
        self.cur: SendWqe | None = None  # work request holding nxt
        self.seg = 0  # nxt's index in cur
        self.rto_at: int | None = None
        self.retries = cfg.retry_cnt
        self.rnr_left = cfg.rnr_retry
        self.rnr_until: int | None = None
        self.state = ReqState.IDLE
        self.rtx: deque[int] = deque()
        self.rtx_set: dict[int, str] = {}  # IRN: PSN queued for retransmission -> cause
        self.cause = "nak"  # why go-back-N last rewound (counted as retx.<cause>)
        self.rto_ps = local_ack_timeout_ps(cfg.timeout)
        self.stats = stats
        self.last_posted: SendWqe | None = None
        self.cap = cfg.max_inflight_packets

    # ------------------------------------------------------------------ state

    def _go(self, state: ReqState) -> None:
        self.state = transition(REQ_TRANSITIONS, self.state, state, "requester")

    @property
    def inflight(self) -> int:
        """Packets sent and not acknowledged (from ``una`` to the highest sent)."""
        return psn_diff(self.max_sent, self.una) + 1

    def has_work(self) -> bool:
        """Anything to transmit now (ignoring pacing)?"""
        if self.state is not ReqState.ACTIVE:
            return False
        if self.rtx:
            return True
        if psn_diff(self.next_psn, self.nxt) <= 0:
            return False
        return not self.cap or psn_diff(self.nxt, self.una) < self.cap

    def idle(self) -> bool:
        return not self.wqes

    # ------------------------------------------------------------------ posting

    def post(self, now: int, wqe: SendWqe) -> list[SendWqe]:
        """Queue ``wqe``; returns it at once (flushed) if the QP is in error."""
        if self.state is ReqState.ERROR:
            wqe.status = WcStatus.WR_FLUSH_ERR
            wqe.done_at = now
            return [wqe]
        if len(self.wqes) >= self.cfg.max_wqes:
            raise QueueFull(f"send queue full ({self.cfg.max_wqes} work requests)")
        wqe.first_psn = self.next_psn
        wqe.npkts = max(1, -(-wqe.length // self.mtu))
        wqe.posted_at = now
        self.next_psn = (self.next_psn + wqe.npkts) & PSN_MASK
        if self.last_posted is not None and self.last_posted.status is None:
            self.last_posted.next = wqe
        self.last_posted = wqe
        self.wqes.append(wqe)
        if self.cur is None:
            self.cur, self.seg = wqe, psn_diff(self.nxt, wqe.first_psn)
        if self.state is ReqState.IDLE:
            self._go(ReqState.ACTIVE)
        return []

    # ------------------------------------------------------------------ transmit

    def _locate(self, psn: int) -> tuple[SendWqe, int] | None:
        for w in self.wqes:
            d = psn_diff(psn, w.first_psn)
            if 0 <= d < w.npkts:
                return w, d
        return None

    def next_packet(self, now: int) -> tuple[SendWqe, int, int, bool] | None:
        """The next packet to send: ``(wqe, segment, psn, retransmission)``, or None."""
        if self.state is not ReqState.ACTIVE:
            return None
        while self.rtx:  # IRN: NAKed or timed-out PSNs first
            psn = self.rtx.popleft()
            cause = self.rtx_set.pop(psn, "nak")
            if psn_diff(psn, self.una) < 0:
                continue  # acknowledged meanwhile
            loc = self._locate(psn)
            if loc is None:
                continue
            self._armed(now)
            self.stats["retx." + cause] += 1
            return loc[0], loc[1], psn, True
        if psn_diff(self.next_psn, self.nxt) <= 0:
            return None
        if self.cap and psn_diff(self.nxt, self.una) >= self.cap:
            return None
        w, seg = self.cur, self.seg
        if w is None:
            loc = self._locate(self.nxt)
            if loc is None:  # pragma: no cover - nxt always lies in a queued request
                return None
            w, seg = loc
        psn = self.nxt
        retx = psn_diff(psn, self.max_sent) <= 0
        if retx:
            self.stats["retx." + self.cause] += 1
        else:
            self.max_sent = psn
        self.nxt = (psn + 1) & PSN_MASK
        if seg + 1 < w.npkts:
            self.cur, self.seg = w, seg + 1
        else:
            self.cur, self.seg = w.next, 0
        self._armed(now)
        return w, seg, psn, retx

    def _armed(self, now: int) -> None:
        if self.rto_at is None:
            t = self._rto()
            if t is not None:
                self.rto_at = now + t

    def _rto(self) -> int | None:
        if self.cfg.irn:
            low = self.inflight <= self.cfg.irn_low_threshold
            us = self.cfg.irn_rto_low_us if low else self.cfg.irn_rto_high_us
            return round(us * PS_PER_US)
        return self.rto_ps

    def _rewind(self, psn: int, cause: str | None = None) -> None:
        """Go back to ``psn`` (the next packet sent is ``psn``), for ``cause``."""
        if cause is not None:
            self.cause = cause
        self.nxt = psn
        loc = self._locate(psn)
        self.cur, self.seg = loc if loc is not None else (None, 0)

    # ------------------------------------------------------------------ receive

    def _acked_through(self, now: int, psn: int) -> list[SendWqe]:
        """Every PSN up to ``psn`` is acknowledged: complete what that finishes."""
        self.una = (psn + 1) & PSN_MASK
        done = []
        wqes = self.wqes
        while wqes and psn_diff(wqes[0].last_psn, psn) <= 0:
            w = wqes.popleft()
            w.status = WcStatus.SUCCESS
            w.done_at = now
            done.append(w)
        if psn_diff(self.nxt, self.una) < 0:
            self._rewind(self.una)
        return done

    def _progress(self, now: int) -> None:
        self.retries = self.cfg.retry_cnt
        self.rnr_left = self.cfg.rnr_retry
        if self.inflight > 0 and self.wqes:
            t = self._rto()
            self.rto_at = now + t if t is not None else None
        else:
            self.rto_at = None
        if not self.wqes and self.state is ReqState.ACTIVE:
            self._go(ReqState.IDLE)

    def _valid(self, psn: int) -> bool:
        """``psn`` lies in [una - 1, highest sent]: not stale, not beyond what was sent."""
        return psn_diff(psn, self.una) >= -1 and psn_diff(psn, self.max_sent) <= 0

    def on_ack(self, now: int, psn: int) -> list[SendWqe]:
        """An ACK through ``psn``: the work requests it completes."""
        st = self.stats
        if self.state is ReqState.ERROR or not self._valid(psn):
            st["ack_ignored"] += 1
            return []
        if psn_diff(psn, self.una) < 0:
            st["ack_duplicate"] += 1
            return []
        done = self._acked_through(now, psn)
        self._progress(now)
        return done

    def on_nak_sequence(self, now: int, psn: int) -> list[SendWqe]:
        """NAK PSN sequence error at ``psn``: everything before it arrived; resend from it
        (go-back-N) or only it (IRN)."""
        st = self.stats
        if self.state is ReqState.ERROR or not (
                psn_diff(psn, self.una) >= 0 and psn_diff(psn, self.max_sent) <= 0):
            st["nak_ignored"] += 1
            return []
        done = self._acked_through(now, (psn - 1) & PSN_MASK) if psn != self.una else []
        if self.cfg.irn:
            if psn not in self.rtx_set:
                self.rtx.append(psn)
                self.rtx_set[psn] = "nak"
        else:
            self._rewind(psn, "nak")
        self._progress(now)
        if self.state is ReqState.IDLE:  # pragma: no cover - a NAKed PSN is outstanding
            self._go(ReqState.ACTIVE)
        return done

    def on_rnr_nak(self, now: int, psn: int, timer_code: int) -> list[SendWqe]:
        """RNR NAK at ``psn``: wait the responder's RNR timer, then resend from it."""
        if self.state is ReqState.ERROR or not (
                psn_diff(psn, self.una) >= 0 and psn_diff(psn, self.max_sent) <= 0):
            self.stats["nak_ignored"] += 1
            return []
        done = self._acked_through(now, (psn - 1) & PSN_MASK) if psn != self.una else []
        if self.cfg.rnr_retry != 7:
            if self.rnr_left == 0:
                return done + self.fail(now, WcStatus.RNR_RETRY_EXC_ERR)
            self.rnr_left -= 1
        self.retries = self.cfg.retry_cnt
        self._rewind(psn, "rnr")
        self.rtx.clear()
        self.rtx_set.clear()
        self.rto_at = None
        self.rnr_until = now + round(RNR_TIMER_US[timer_code & 31] * PS_PER_US)
        self._go(ReqState.RNR_WAIT)
        return done

    def on_nak_fatal(self, now: int, psn: int, status: WcStatus) -> list[SendWqe]:
        """A NAK the requester cannot recover from: fail, then flush."""
        if self.state is ReqState.ERROR or not self._valid(psn):
            self.stats["nak_ignored"] += 1
            return []
        done = self._acked_through(now, (psn - 1) & PSN_MASK) if psn != self.una else []
        return done + self.fail(now, status)

    def fail(self, now: int, status: WcStatus) -> list[SendWqe]:
        """Enter the error state: the head request fails with ``status``, the rest flush."""
        out = []
        first = True
        while self.wqes:
            w = self.wqes.popleft()
            w.status = status if first else WcStatus.WR_FLUSH_ERR
            w.done_at = now
            first = False
            out.append(w)
        self.rto_at = None
        self.rnr_until = None
        self.rtx.clear()
        self.rtx_set.clear()
        self.cur = None
        self._go(ReqState.ERROR)
        return out

    # ------------------------------------------------------------------ timers

    def next_deadline(self) -> int | None:
        if self.state is ReqState.RNR_WAIT:
            return self.rnr_until
        return self.rto_at

    def handle_timer(self, now: int) -> list[SendWqe]:
        """RNR wait over, or the retransmission timer expired."""
        if self.state is ReqState.RNR_WAIT:
            if self.rnr_until is not None and now >= self.rnr_until:
                self.rnr_until = None
                self._go(ReqState.ACTIVE)
            return []
        if self.rto_at is None or now < self.rto_at:
            return []
        self.rto_at = None
        if self.state is not ReqState.ACTIVE or self.inflight <= 0:
            return []
        st = self.stats
        st["rto"] += 1
        if self.retries == 0:
            return self.fail(now, WcStatus.RETRY_EXC_ERR)
        self.retries -= 1
        if self.cfg.irn:
            if self.una not in self.rtx_set:
                self.rtx.appendleft(self.una)
                self.rtx_set[self.una] = "rto"
        else:
            self._rewind(self.una, "rto")
        t = self._rto()
        self.rto_at = now + t if t is not None else None
        return []
