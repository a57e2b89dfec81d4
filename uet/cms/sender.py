"""The per-PDC sender the factory builds: an EV selector plus NSCC and/or RCCC (sans-IO).

It implements :class:`uet.cms.api.SenderCongestion` and, under RCCC, the
:class:`uet.cms.api.CreditSender` it reaches through ``rccc``. Feedback mapping (``docs/cms.md``):

* ACK: EV feedback GOOD or ECN; RCCC leaves speculation and takes ACK_CC credit; NSCC
  reacts to ECN / delay / receiver state.
* NACK TRIMMED / TRIMMED_ACK: EV penalty (NACK) and the NSCC trim reaction.
  TRIMMED_LASTHOP: no EV penalty (the path was fine; ECN echo still counts) and the
  NSCC reaction without the window cut under RCCC. PKT_NOT_RCVD / RCVR_INFER_LOSS: the
  NSCC loss reaction, no EV penalty (the echoed EV is not the lost packet's), unless the
  sender inferred the loss itself (RACK, ``own_ev``): then the lost packet's EV gets the
  NACK penalty, so spraying moves off a path that drops silently. Other codes
  (resources, protocol errors, closing) are not congestion: no reaction.
* Timeout: EV penalty (TIMEOUT; REPS may freeze), NSCC window cut by the packet.
* ACK_CCX / NACK_CCX (``cms.ccx = "telemetry"``): the CCX window (:mod:`uet.cms.ccx`)
  caps every other window.
"""

from __future__ import annotations

from uet.cms.api import AckFeedback, CmsConfig, CreditSender, NackFeedback
from uet.cms.ccx import TelemetrySender
from uet.cms.ev_selection import EvSelector, PathFeedback
from uet.cms.nscc import Nscc
from uet.cms.rccc import SenderCredit, serial_diff24
from uet.wire.constants import CcType, NackCode, PdsType

TRIM_CODES = frozenset({NackCode.TRIMMED, NackCode.TRIMMED_ACK})
LOSS_CODES = frozenset({NackCode.PKT_NOT_RCVD, NackCode.RCVR_INFER_LOSS})
RESYNC_RTTS = 8  # blocked without credit this long: ask again (a CREDIT may be lost)
# per-ACK names for enum members (an Enum class attribute lookup costs ~70 ns)
_GOOD = PathFeedback.GOOD
_ECN = PathFeedback.ECN
_CREDIT = CcType.CREDIT
_ACK_CCX = PdsType.ACK_CCX


class CmsSender:
    """EV selection + optional NSCC window + optional RCCC credit for one PDC."""

    # slots: the C forms of the per-packet methods (REFERENCE) read them in place
    __slots__ = ("config", "selector", "nscc", "credit", "credit_based", "rccc",
                 "window_bytes", "ccx", "base_rtt", "last_request_at", "refused_for_credit",
                 "credit_wait_since", "now")

    def __init__(
        self,
        config: CmsConfig,
        selector: EvSelector,
        *,
        nscc: Nscc | None = None,
        credit: SenderCredit | None = None,
        window_bytes: int = 1 << 30,
        ccx: TelemetrySender | None = None,
    ) -> None:
        self.config = config
        self.selector = selector
        self.nscc = nscc
        self.credit = credit
        self.credit_based = credit is not None
        #: the credit interface (this object) under RCCC, else None (uet.cms.api)
        self.rccc: CreditSender | None = self if credit is not None else None
        self.window_bytes = window_bytes  # fixed window when neither NSCC nor RCCC
        #: the CCX window from the receiver's ACK_CCX / NACK_CCX reports (cms.ccx), or None
        self.ccx = ccx
        self.base_rtt = config.base_rtt_ps
        self.last_request_at: int | None = None
        self.refused_for_credit = False
        self.credit_wait_since: int | None = None  # see waiting_for_credit()
        self.now = 0

    # ------------------------------------------------------------------ sending

    def choose_ev(self, now: int) -> int:
        self.now = now
        return self.selector.next_ev(now)

    def can_send(self, now: int, *, nbytes: int, in_flight: int, retx: bool = False) -> bool:
        self.now = now
        if self.credit is not None and self.credit.credit <= 0:
            self.refused_for_credit = True
            if self.credit_wait_since is None:
                self.credit_wait_since = now
            return False
        self.refused_for_credit = False
        self.credit_wait_since = None
        ccx = self.ccx
        if ccx is not None and in_flight and in_flight + nbytes > ccx.cwnd:
            return False
        if self.nscc is not None:
            return self.nscc.can_send(nbytes, in_flight)
        if self.credit is None:
            return in_flight + nbytes <= self.window_bytes or in_flight == 0
        return True

    def window_full(self, *, nbytes: int, in_flight: int) -> bool:
        """htsim's AR rule: after this packet (counted in ``in_flight``) the credit is
        spent (RCCC) or ``in_flight + packet >= cwnd`` (NSCC, or the fixed window)."""
        if self.credit is not None and self.credit.credit - nbytes <= 0:
            return True
        if self.ccx is not None and in_flight + nbytes >= self.ccx.cwnd:
            return True
        if self.nscc is not None:
            return in_flight + nbytes >= self.nscc.cwnd
        if self.credit is None:
            return in_flight + nbytes >= self.window_bytes
        return False

    def on_send(self, now: int, *, nbytes: int, ev: int, retx: bool) -> None:
        self.now = now
        if self.credit is not None:
            self.credit.spend(nbytes)
        if self.nscc is not None:
            self.nscc.on_send(nbytes)

    # ------------------------------------------------------------------ feedback

    def on_ack(self, now: int, *, fb: AckFeedback) -> None:
        self.now = now
        self.selector.feedback(now, fb.ev, _ECN if fb.ecn_echo else _GOOD)
        if self.credit is not None:
            self.credit.stop_speculating()
            if fb.ack_cc is not None and fb.ack_cc.cc_type == _CREDIT:
                self.credit.on_grant(now, fb.ack_cc.credit)
        if self.nscc is not None:
            self.nscc.on_ack(
                now, fb.newly_acked_bytes, fb.ecn_echo, fb.rtt_sample, fb.in_flight_bytes, fb.ack_cc
            )
        ack = fb.ack_cc
        if self.ccx is not None and ack is not None and ack.type == _ACK_CCX:
            self.ccx.on_ack_state(now, ack.ccx_state)

    def on_nack(self, now: int, *, fb: NackFeedback) -> None:
        self.now = now
        code = fb.code
        if self.ccx is not None and fb.nack is not None:
            self.ccx.on_nack_state(now, fb.nack)
        last_hop = code == NackCode.TRIMMED_LASTHOP
        if code in TRIM_CODES:
            self.selector.feedback(now, fb.ev, PathFeedback.NACK)
        elif last_hop:
            self.selector.feedback(
                now, fb.ev, PathFeedback.ECN if fb.ecn_echo else PathFeedback.GOOD
            )
        elif code not in LOSS_CODES:
            return
        elif fb.own_ev:  # lost on this EV (RACK): penalise the path it took
            self.selector.feedback(now, fb.ev, PathFeedback.NACK)
        if self.credit is not None:
            self.credit.stop_speculating()
        if self.nscc is not None:
            self.nscc.on_nack(
                now,
                fb.nbytes,
                last_hop=last_hop,
                rtt_sample=fb.rtt_sample,
                in_flight=fb.in_flight_bytes,
            )

    def on_timeout(self, now: int, *, ev: int, nbytes: int) -> None:
        self.now = now
        self.selector.feedback(now, ev, PathFeedback.TIMEOUT)
        if self.credit is not None:
            self.credit.stop_speculating()
        if self.nscc is not None:
            self.nscc.on_timeout(now, nbytes)

    # ------------------------------------------------------------------ credit

    def on_credit(self, now: int, *, credit: int) -> None:
        """CREDIT control packet payload (cumulative units, see :mod:`uet.cms.rccc`)."""
        self.now = now
        if self.credit is not None:
            self.credit.stop_speculating()
            self.credit.on_grant(now, credit)
            self.credit_wait_since = None  # the scheduler is alive: a new wait starts

    def _target(self) -> int:
        assert self.credit is not None
        return self.credit.target(self.nscc.cwnd if self.nscc is not None else None)

    def credit_target(self) -> int:
        if self.credit is None:
            return 0
        value = self._target()
        self.credit.advertised = value
        self.credit.advertised_at = self.now
        return value

    def on_backlog(self, now: int, *, backlog_bytes: int) -> None:
        self.now = now
        if self.credit is not None:
            self.credit.backlog = max(backlog_bytes, 0)

    def _blocked(self) -> bool:
        c = self.credit
        if c is None or c.credit > 0:
            return False
        return c.backlog > 0 if c.backlog is not None else self.refused_for_credit

    def _request_due(self) -> int | None:
        """When a CREDIT_REQ may go: at once (rate-limited to one per base RTT) when the
        target grew past the last advertised one, or after RESYNC_RTTS without credit."""
        if not self._blocked():
            return None
        c = self.credit
        assert c is not None
        earliest = 0 if self.last_request_at is None else self.last_request_at + self.base_rtt
        if serial_diff24(self._target(), c.advertised) > 0 or c.advertised_at is None:
            return earliest
        heard = max(c.advertised_at, c.last_credit_at or 0)
        return max(earliest, heard + RESYNC_RTTS * self.base_rtt)

    def waiting_for_credit(self) -> int | None:
        return self.credit_wait_since

    def poll_credit_request(self, now: int) -> int | None:
        self.now = now
        due = self._request_due()
        if due is None or due > now:
            return None
        self.last_request_at = now
        return self.credit_target()

    # ------------------------------------------------------------------ timers

    def next_deadline(self) -> int | None:
        return self._request_due()

    def handle_timer(self, now: int) -> None:
        self.now = now

    @property
    def max_window(self) -> int:
        """The largest window the CC may reach (NSCC maxwnd, RCCC max credit)."""
        if self.nscc is not None:
            return self.nscc.max_wnd
        if self.credit is not None:
            return self.credit.max_credit
        return self.window_bytes

    @property
    def cwnd(self) -> int:
        if self.nscc is not None:
            w = self.nscc.cwnd
        elif self.credit is not None:
            w = self.credit.max_credit
        else:
            w = self.window_bytes
        return w if self.ccx is None else min(w, self.ccx.cwnd)


#: the Python forms of the methods the C core replaces (``uet.native._cms_core``): the
#: reference its tests hold it to, and what it calls for every case it does not take
REFERENCE = {"on_ack": CmsSender.on_ack, "can_send": CmsSender.can_send,
             "window_full": CmsSender.window_full, "on_send": CmsSender.on_send,
             "choose_ev": CmsSender.choose_ev}
#: the same for Nscc (its on_ack, which CmsSender.on_ack's C form also runs directly)
NSCC_REFERENCE = {"on_ack": Nscc.on_ack}


def _use_c_core() -> str:
    """Put the C forms of CmsSender's per-packet methods and of ``Nscc.on_ack`` in their
    classes (not under ``UET_PURE_PYTHON=1``, nor when the extension was not built);
    returns ``"native"`` or ``"python"``."""
    from uet.native._common import load_core

    core = load_core("_cms_core")
    if core is None:
        return "python"
    from uet.cms.ev_selection import BitmapEv, MixedEv
    from uet.cms.nscc import NsccParams
    from uet.wire.records import PdsAckCc

    core.configure(Nscc, NsccParams, CmsSender, AckFeedback, PdsAckCc,
                   (NSCC_REFERENCE["on_ack"], REFERENCE["on_ack"], REFERENCE["can_send"],
                    REFERENCE["window_full"], REFERENCE["on_send"]),
                   {"nscc": int(CcType.NSCC), "good": _GOOD, "ecn": _ECN, "mixed": MixedEv,
                    "bitmap": BitmapEv,
                    "choose_ev": REFERENCE["choose_ev"]})
    Nscc.on_ack = core.nscc_on_ack_method  # type: ignore[method-assign]
    CmsSender.on_ack = core.on_ack_method  # type: ignore[method-assign]
    CmsSender.can_send = core.can_send_method  # type: ignore[method-assign]
    CmsSender.window_full = core.window_full_method  # type: ignore[method-assign]
    CmsSender.on_send = core.on_send_method  # type: ignore[method-assign]
    CmsSender.choose_ev = core.choose_ev_method  # type: ignore[method-assign]
    return "native"


#: which form the sender's per-packet congestion control runs in: "native" (C) or "python"
IMPLEMENTATION = _use_c_core()
