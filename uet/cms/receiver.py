"""Receiver side of NSCC: the cc_type 0 state of outgoing ACK_CC packets (sans-IO)."""

from __future__ import annotations

from uet.wire.constants import CcType
from uet.wire.records import PdsAckCc


class NsccReceiver:
    """Per-PDC NSCC receiver state: ``rcvd_bytes`` (24-bit running count), ``ooo_count``,
    and the receiver window penalty.

    ``rcv_cwnd_pend`` (7 bits) is 0 = no penalty up to 127 = the sender shrinks its window
    by every newly received byte; ``restore_cwnd`` tells the sender to return to its
    window from before the penalties. htsim never changes its penalty (255 = none on its
    8-bit scale); here a host model (e.g. a slow consumer) may call :meth:`set_penalty`.
    """

    # slots: the target core (uet/native/target_core.c) does on_data on them
    __slots__ = ("rcvd_bytes", "ooo_count", "penalty", "restore", "ccx")

    cc_type = CcType.NSCC
    rccc = None  # no credit (uet.cms.api.ReceiverCongestion)

    def __init__(self) -> None:
        self.ccx = None  # the CCX state source, set by the factory with cms.ccx (uet.cms.ccx)
        self.rcvd_bytes = 0
        self.ooo_count = 0
        self.penalty = 0
        self.restore = False

    def set_penalty(self, penalty: int, restore: bool = False) -> None:
        """Set the penalty (0..127) and, once, the restore flag."""
        if not 0 <= penalty <= 127:
            raise ValueError(f"rcv_cwnd_pend must be in [0, 127], got {penalty!r}")
        self.penalty = penalty
        self.restore = self.restore or restore

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
        self.rcvd_bytes = (self.rcvd_bytes + nbytes) & 0xFFFFFF
        if ooo_count is not None:
            self.ooo_count = min(ooo_count, 0xFFFF)
        elif not in_order:
            self.ooo_count = (self.ooo_count + 1) & 0xFFFF

    def fill_ack_cc(self, now: int, *, ack: PdsAckCc) -> None:
        ack.cc_type = self.cc_type
        ack.rcvd_bytes = self.rcvd_bytes
        ack.ooo_count = self.ooo_count
        ack.rcv_cwnd_pend = self.penalty
        ack.restore_cwnd = self.restore
        ack.service_time = 0
        self.restore = False

    def close(self) -> None:
        pass
