"""RCCC: receiver credit-based congestion control (sans-IO).

A model of htsim's receiver-driven mode (``uec.cpp``: ``UecSrc::computePullTarget``,
``handlePull``, ``stopSpeculating``, ``spendCredit``, ``UecSink::handlePullTarget``,
``UecSink::pull``, ``UecPullPacer::doNextEvent``). The receiving end point owns one
:class:`CreditScheduler` shared by all PDCs that target it, so an N:1 incast shares the
receiver's link: the scheduler grants credit round robin in pulls of 4 MTU, paced at
``credit_rate`` x the link rate. Senders start with speculative credit (the max window),
drop what is left of it at the first feedback, and then send only while credit > 0.

Wire encoding (both ends are this module, the PDS only copies values): credit is counted
in units of ``credit_unit_bytes`` (256 B, htsim ``UEC_PULL_QUANTUM``) as a cumulative
24-bit counter per PDC, starting at 0 on both sides. ``credit_target`` (RUD/ROD_CC
requests, CREDIT_REQ payload) = units granted so far as the sender knows + units still
wanted; the CREDIT payload and the ACK_CC ``credit`` field = units granted so far.
Cumulative values make lost, duplicated or reordered credit packets harmless.
"""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

from uet.cms.api import CmsConfig
from uet.cms.nscc import PS_PER_S, max_window_bytes
from uet.wire.constants import CcType
from uet.wire.records import PdsAckCc

MASK24 = 0xFFFFFF
HALF24 = 0x800000


def serial_diff24(a: int, b: int) -> int:
    """Signed difference ``a - b`` of two 24-bit serial counters."""
    d = (a - b) & MASK24
    return d - 0x1000000 if d & HALF24 else d


class CreditGrant(NamedTuple):
    """One CREDIT control packet to emit: the PDC's key and the CP payload."""

    key: Any
    payload: int


class SenderCredit:
    """The sender's credit account for one PDC (htsim ``UecSrc`` credit state)."""

    def __init__(self, config: CmsConfig) -> None:
        self.unit = config.credit_unit_bytes
        self.mtu = config.mtu_payload
        self.max_credit = max_window_bytes(config)
        self.credit = self.max_credit  # speculative credit
        self.speculating = True
        self.pull = 0  # cumulative units granted (as last heard)
        self.backlog: int | None = None
        self.advertised = 0  # last credit_target handed to the PDS
        self.advertised_at: int | None = None
        self.last_credit_at: int | None = None

    def stop_speculating(self) -> None:
        """First feedback from the receiver: unused speculative credit is dropped."""
        if self.speculating:
            self.speculating = False
            self.credit = min(self.credit, 0)

    def on_grant(self, now: int, payload: int) -> bool:
        """A cumulative grant (CREDIT payload or ACK_CC credit); True if it added credit."""
        d = serial_diff24(payload & MASK24, self.pull)
        if d <= 0:
            return False
        self.credit = min(self.credit + d * self.unit, self.max_credit)
        self.pull = payload & MASK24
        self.last_credit_at = now
        return True

    def spend(self, nbytes: int) -> None:
        self.credit -= nbytes

    def target(self, cwnd: int | None = None) -> int:
        """htsim ``computePullTarget``: min(backlog, cwnd + MTU, max window) - credit,
        at least one MTU while speculating with a backlog, rounded up to units."""
        want = self.max_credit if self.backlog is None else self.backlog
        if cwnd is not None:
            want = min(want, cwnd + self.mtu)
        want = min(want, self.max_credit) - self.credit
        if self.speculating and want < self.mtu and (self.backlog or 0) > 0:
            want = self.mtu
        units = -(-max(want, 0) // self.unit)
        return (self.pull + units) & MASK24


class CreditScheduler:
    """One receiving end point's credit pacer, shared by all its RCCC PDCs.

    Round robin over PDCs with unmet demand (``credit_target`` above what was granted):
    each pull grants up to ``credit_per_pull`` bytes, then waits the time the link needs
    for that many bytes (with the per-packet overhead) / ``credit_rate``; a pull that
    grants nothing still takes 1 KiB of time (htsim). With no demand left, PDCs that had
    demand get "idle" credit one pull at a time up to the max window (htsim slow pull),
    so their next message can start at once.

    The PDS/FEP calls :meth:`poll_grants` (or each PDC's ``credit_grant``) at
    :meth:`next_deadline` and after delivering data, and emits one CREDIT control packet
    per returned :class:`CreditGrant`.
    """

    def __init__(self, config: CmsConfig) -> None:
        self.unit = config.credit_unit_bytes
        per_pull = config.credit_per_pull_bytes or 4 * config.mtu_payload
        self.per_pull_units = max(per_pull // self.unit, 1)
        self.idle_step_units = max(1024 // self.unit, 1)
        self.max_units = max_window_bytes(config) // self.unit
        self.idle_credit = config.idle_credit
        wire_per_payload = (config.mtu_payload + config.pkt_overhead_bytes) / config.mtu_payload
        self.ps_per_unit = (
            self.unit
            * 8
            * PS_PER_S
            * wire_per_payload
            / (config.link_rate_bps * config.credit_rate)
        )
        self.active: deque[RcccReceiver] = deque()
        self.idle: deque[RcccReceiver] = deque()
        self.running = False
        self.next_time = 0.0
        self.pending: dict[RcccReceiver, int] = {}
        self.pending_since: int | None = None
        self.granted_units = 0  # statistics
        self.pulls = 0

    # ------------------------------------------------------------------ demand

    def request(self, now: int, rx: RcccReceiver) -> None:
        """``rx`` has (or may have) demand: queue it for pulls and start the pacer."""
        if rx.closed or rx.in_pull:
            return
        self._advance(now - 1)  # earlier pulls first; a pull due now sees this demand
        rx.in_pull = True
        self.active.append(rx)
        if not self.running:
            self.running = True
            self.next_time = float(now)

    def remove(self, rx: RcccReceiver) -> None:
        rx.closed = True
        rx.in_pull = rx.in_idle = False
        self.pending.pop(rx, None)
        if not self.pending:
            self.pending_since = None
        if rx in self.active:
            self.active.remove(rx)
        if rx in self.idle:
            self.idle.remove(rx)

    def mark_pending(self, rx: RcccReceiver, when: int) -> None:
        """Remember that a CREDIT carrying ``rx``'s latest grant is due since ``when``."""
        self.pending[rx] = rx.latest
        if self.pending_since is None:
            self.pending_since = when

    # ------------------------------------------------------------------ pacing

    def next_deadline(self) -> int | None:
        """When the pacer wants to run next (then call :meth:`poll_grants`), or None."""
        if self.pending and self.pending_since is not None:
            return self.pending_since
        if not self.running:
            return None
        return int(-(-self.next_time // 1))

    def handle_timer(self, now: int) -> None:
        self._advance(now)

    def poll_grants(self, now: int) -> list[CreditGrant]:
        """Run the pacer up to ``now`` and return (and forget) every pending grant."""
        self._advance(now)
        out = [CreditGrant(rx.key, value) for rx, value in self.pending.items()]
        self.pending.clear()
        self.pending_since = None
        return out

    def take(self, now: int, rx: RcccReceiver) -> int:
        """The pending grant payload of one PDC (0 if none), removing it."""
        self._advance(now)
        value = self.pending.pop(rx, 0)
        if not self.pending:
            self.pending_since = None
        return value

    def _advance(self, now: int) -> None:
        while self.running and self.next_time <= now:
            units = self._pull_event(int(self.next_time))
            if units is None:
                self.running = False
                break
            self.next_time += self.ps_per_unit * (units or self.idle_step_units)

    def _pull_event(self, when: int) -> int | None:
        """One pacer event (htsim ``UecPullPacer::doNextEvent``); units granted or None
        when there is nothing to do."""
        if self.active:
            rx = self.active.popleft()
            rx.in_pull = False
            granted = rx.pull(self.per_pull_units, extra=False)
            if rx.backlog_units() > 0:
                rx.in_pull = True
                self.active.append(rx)
            elif self.idle_credit and not rx.in_idle:
                rx.in_idle = True
                self.idle.append(rx)
        elif self.idle:
            rx = self.idle.popleft()
            rx.in_idle = False
            granted = rx.pull(self.per_pull_units, extra=True)
            if rx.backlog_units() == 0 and rx.slow_units() < self.max_units:
                rx.in_idle = True
                self.idle.append(rx)
        else:
            return None
        self.pulls += 1
        if granted:
            self.granted_units += granted
            self.mark_pending(rx, when)
        return granted


class RcccReceiver:
    """Receiver side of one RCCC PDC: tracks the sender's target, writes cc_type 1
    ACK_CC state (cumulative credit) and hands CREDIT grants to the shared scheduler."""

    cc_type = CcType.CREDIT
    ccx = None  # the CCX state source, set by the factory with cms.ccx (uet.cms.ccx)

    def __init__(self, config: CmsConfig, scheduler: CreditScheduler, key: Any = None) -> None:
        #: the credit interface (uet.cms.api.CreditReceiver): this object
        self.rccc: RcccReceiver = self
        self.scheduler = scheduler
        self.key = self if key is None else key
        self.highest_target = 0
        self.latest = 0  # cumulative units granted
        self.in_pull = False
        self.in_idle = False
        self.closed = False
        self.rcvd_bytes = 0
        self.ooo_count = 0

    def backlog_units(self) -> int:
        return max(serial_diff24(self.highest_target, self.latest), 0)

    def slow_units(self) -> int:
        return max(serial_diff24(self.latest, self.highest_target), 0)

    def pull(self, per_pull: int, *, extra: bool) -> int:
        """Grant one pull: up to the target (active) or ``per_pull`` beyond it (idle)."""
        prev = self.latest
        if extra:
            self.latest = (self.latest + per_pull) & MASK24
        else:
            nxt = (prev + per_pull) & MASK24
            if serial_diff24(nxt, self.highest_target) > 0:
                nxt = self.highest_target if serial_diff24(self.highest_target, prev) > 0 else prev
            self.latest = nxt
        return serial_diff24(self.latest, prev)

    def _target(self, now: int, target: int) -> None:
        target &= MASK24
        if serial_diff24(target, self.highest_target) > 0:
            self.highest_target = target
            if self.backlog_units() > 0:
                self.scheduler.request(now, self)

    # ------------------------------------------------------------ ReceiverCongestion

    def on_data(
        self,
        now: int,
        *,
        nbytes: int,
        ecn_ce: bool,
        credit_target: int,
        in_order: bool,
        ooo_count: int | None = None,
    ) -> None:
        self.rcvd_bytes = (self.rcvd_bytes + nbytes) & MASK24
        if ooo_count is not None:
            self.ooo_count = min(ooo_count, 0xFFFF)
        elif not in_order:
            self.ooo_count = (self.ooo_count + 1) & 0xFFFF
        self._target(now, credit_target)

    def on_credit_request(self, now: int, *, credit_target: int) -> None:
        """CREDIT_REQ or trimmed request: take the target, re-advertise what was
        granted (in case a CREDIT was lost) and make sure the PDC is scheduled."""
        self._target(now, credit_target)
        if self.latest:
            self.scheduler.mark_pending(self, now)
        self.scheduler.request(now, self)

    def fill_ack_cc(self, now: int, *, ack: PdsAckCc) -> None:
        self.scheduler.handle_timer(now)
        ack.cc_type = CcType.CREDIT
        ack.credit = self.latest
        ack.ooo_count = self.ooo_count
        self.scheduler.take(now, self)  # the ACK carries the latest grant

    def credit_grant(self, now: int) -> int:
        return self.scheduler.take(now, self)

    def close(self) -> None:
        self.scheduler.remove(self)
