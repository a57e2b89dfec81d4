"""The contract between the PDS and congestion management (sans-IO).

The PDS owns reliability; it asks a per-PDC :class:`SenderCongestion` which EV to put on
each packet and whether the window allows another packet, and it reports every send, ACK,
NACK and timeout back to it. On the receive side a per-PDC :class:`ReceiverCongestion`
fills the congestion state of ACK_CC packets.

Credit (RCCC) is its own pair of interfaces, reached through the ``rccc`` attribute of
either side: :class:`CreditSender` (credit target, CREDIT packets, backlog, CREDIT_REQ) and
:class:`CreditReceiver` (grants, credit requests). ``rccc`` is None when the algorithm
uses no credit, so the PDS tests one attribute instead of probing for methods.

Every method takes ``now`` (integer picoseconds) first and everything else by keyword, so
an implementation cannot take one byte count for another. Sizes are payload bytes.

``NullSenderCongestion`` / ``NullReceiverCongestion`` are the "no congestion control"
implementations: one fixed EV, a fixed window. The real selectors (fixed, oblivious,
bitmap, REPS) and algorithms (NSCC, RCCC) live in sibling modules and are built by
``uet.cms.factory.make_sender`` / ``make_receiver`` from a :class:`CmsConfig`; a bad
setting raises :class:`CmsConfigError` naming ``cms.<key>``. ``docs/cms.md`` says how the
PDS drives them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from uet.errors import ConfigError
from uet.wire.records import PdsAckCc


class CmsConfigError(ConfigError):
    """A bad :class:`CmsConfig` value; the message names ``cms.<key>`` and what is allowed."""


@dataclass(slots=True)
class AckFeedback:
    """What one ACK / ACK_CC told the sender, digested by the PDS."""

    ev: int  # EV echoed in the ACK (the EV of the packet that triggered it)
    ecn_echo: bool  # ACK's M flag
    newly_acked_bytes: int  # payload bytes of PSNs acknowledged for the first time
    newly_acked_packets: int
    rtt_sample: int | None  # ps; None when the triggering packet was retransmitted
    in_flight_bytes: int  # after this ACK was applied
    ack_cc: PdsAckCc | None = None  # the raw ACK_CC (for NSCC state / credit), else None
    retx: bool = False  # the ACK answers a retransmitted packet


@dataclass(slots=True)
class NackFeedback:
    """What one NACK told the sender (the PDS retransmits; the CC only reacts)."""

    ev: int  # EV echoed in the NACK (the EV of the NACKed packet)
    code: int  # NackCode
    nbytes: int  # payload bytes of the NACKed packet
    ecn_echo: bool = False
    rtt_sample: int | None = None  # ps from the NACKed packet's send time, if known
    in_flight_bytes: int | None = None  # before the NACKed packet leaves the flight
    retx: bool = False  # the NACK answers a retransmitted packet
    #: ``ev`` is the lost packet's own EV: a loss the sender inferred itself (RACK), not a
    #: NACK echoing another packet's EV; the path gets the NACK penalty
    own_ev: bool = False
    #: the raw NACK_CCX (its receiver's CCX state, uet.cms.ccx), else None
    nack: Any = None


class CreditSender(Protocol):
    """Sender side of credit (RCCC): what a credit-based sender adds to the window."""

    def credit_target(self) -> int:
        """The 24-bit ``credit_target`` for the next RUD/ROD_CC request or CREDIT_REQ:
        a cumulative count of 256-byte credit units (see docs/cms.md)."""
        ...

    def on_credit(self, now: int, *, credit: int) -> None:
        """A CREDIT control packet arrived (its payload: cumulative units)."""

    def on_backlog(self, now: int, *, backlog_bytes: int) -> None:
        """The PDC now has ``backlog_bytes`` of payload queued (new + to retransmit)."""

    def poll_credit_request(self, now: int) -> int | None:
        """Payload of a CREDIT_REQ control packet to send now, or None."""
        ...

    def waiting_for_credit(self) -> int | None:
        """Since when (ps) sending has been refused for lack of credit with no credit heard
        since, or None: the target's scheduler, not the network, holds the PDC back."""
        ...


class SenderCongestion(Protocol):
    """Per-PDC sender side: EV selection plus window (and, through ``rccc``, credit)."""

    @property
    def rccc(self) -> CreditSender | None:
        """The credit side of this sender (RCCC), or None: then the PDS sends plain
        requests and never asks for credit."""
        ...

    def choose_ev(self, now: int) -> int:
        """EV (16 bits) for the next data packet of this PDC."""
        ...

    def can_send(self, now: int, *, nbytes: int, in_flight: int, retx: bool = False) -> bool:
        """May a packet of ``nbytes`` payload go now, with ``in_flight`` bytes in flight?
        ``retx``: it is a retransmission (also gated by credit under RCCC; NSCC lets it use
        the window like new data)."""
        ...

    def window_full(self, *, nbytes: int, in_flight: int) -> bool:
        """Would a packet of ``nbytes`` (already counted in ``in_flight``) leave no room
        for another one? No side effects; the PDS then sets AR on it (htsim)."""
        ...

    def on_send(self, now: int, *, nbytes: int, ev: int, retx: bool) -> None:
        """A packet left on ``ev``."""

    def on_ack(self, now: int, *, fb: AckFeedback) -> None:
        """What one ACK told the sender."""

    def on_nack(self, now: int, *, fb: NackFeedback) -> None:
        """What one NACK (or a loss the PDS inferred) told the sender."""

    def on_timeout(self, now: int, *, ev: int, nbytes: int) -> None:
        """A packet sent on ``ev`` timed out (RTO)."""

    def next_deadline(self) -> int | None:
        """When the CC wants ``handle_timer`` (e.g. pacing, a CREDIT_REQ), or None."""
        ...

    def handle_timer(self, now: int) -> None:
        """Run what was due at ``next_deadline``."""

    @property
    def cwnd(self) -> int:
        """Current window in bytes (for reports, plots and the SLEEK loss threshold)."""
        ...

    @property
    def max_window(self) -> int:
        """The largest window the CC may reach (NSCC maxwnd, RCCC max credit)."""
        ...


class CreditReceiver(Protocol):
    """Receiver side of credit (RCCC): grants and credit requests of one PDC."""

    def credit_grant(self, now: int) -> int:
        """Payload of a CREDIT control packet to send now for this PDC, or 0 (the same
        pending grant the end point's scheduler's ``poll_grants`` returns)."""
        ...

    def on_credit_request(self, now: int, *, credit_target: int) -> None:
        """A CREDIT_REQ (its payload) or a trimmed CC request (its ``credit_target``)."""


class ReceiverCongestion(Protocol):
    """Per-PDC receiver side: ACK_CC state (and, through ``rccc``, credit)."""

    @property
    def cc_type(self) -> int:
        """The CcType written in ACK_CC."""
        ...

    @property
    def rccc(self) -> CreditReceiver | None:
        """The credit side of this receiver (RCCC), or None."""
        ...

    def on_data(self, now: int, *, nbytes: int, ecn_ce: bool, credit_target: int,
                in_order: bool, ooo_count: int | None = None) -> None:
        """A new (not duplicate) data packet arrived. ``credit_target``: the request's
        field (0 for non-CC requests); ``ooo_count``: the receive tracker's current
        out-of-order count, if the PDS knows it."""

    def fill_ack_cc(self, now: int, *, ack: PdsAckCc) -> None:
        """Write the cc_type-specific state fields of an outgoing ACK_CC."""

    def close(self) -> None:
        """The PDC is gone: release shared state (RCCC scheduler entry)."""

    # ``ccx``: an optional attribute, the receiver's CCX state source
    # (:class:`uet.cms.ccx.TelemetryReceiver`: ``on_data``, ``on_trim``, ``ack_state``,
    # ``nack_state``) or None; when set the PDS sends ACK_CCX and NACK_CCX.


@dataclass(slots=True)
class CmsConfig:
    """Congestion management settings of an end point (profiles and experiments set them).

    ``ev_selector``: 'fixed' | 'oblivious' | 'bitmap' | 'reps' | 'mixed'
    ``algorithm``: 'none' | 'nscc' | 'rccc' | 'nscc+rccc'
    """

    ev_selector: str = "fixed"
    ev_count: int = 128
    algorithm: str = "none"
    link_rate_bps: int = 100_000_000_000
    base_rtt_ps: int = 14_020_000
    mtu_payload: int = 4096
    trimming: bool = True
    max_window_bytes: int | None = None  # None: 1.5 x BDP
    extra: dict = field(default_factory=dict)
    #: extended congestion state in ACK_CCX / NACK_CCX: 'none' or 'telemetry' (uet.cms.ccx)
    ccx: str = "none"
    # --- added by the CMS implementation (defaults follow htsim; see docs/cms.md) ---
    pkt_overhead_bytes: int = 64  # per-packet header bytes on the wire (BDP, pacing)
    target_qdelay_ps: int | None = None  # None: 0.75 x base RTT with trimming, else RTT
    initial_window_bytes: int | None = None  # None: the max window (htsim)
    quick_adapt: bool = True
    qa_gate: int = 3  # quick adapt only if achieved < max window >> qa_gate
    adapt_base_rtt: bool = True  # lower the base RTT to smaller samples (htsim)
    credit_unit_bytes: int = 256  # RCCC credit quantum (htsim UEC_PULL_QUANTUM)
    credit_per_pull_bytes: int | None = None  # None: 4 x mtu_payload
    credit_rate: float = 0.99  # credit pacing as a fraction of the link rate
    idle_credit: bool = True  # htsim "slow pull" of idle senders up to the max window
    reps_buffer_size: int = 8
    reps_freeze_ps: int = 10_000_000_000  # htsim exit_freeze_after (10 ms)
    reps_explore: int = 16  # random EVs after leaving frozen mode


class NullSenderCongestion:
    """No congestion control: a fixed EV and a fixed window of ``window_bytes``."""

    rccc: CreditSender | None = None
    credit_based = False

    def __init__(self, ev: int = 0, window_bytes: int = 1 << 30) -> None:
        self.ev = ev & 0xFFFF
        self.window_bytes = window_bytes

    def choose_ev(self, now: int) -> int:
        return self.ev

    def can_send(self, now: int, *, nbytes: int, in_flight: int, retx: bool = False) -> bool:
        return in_flight + nbytes <= self.window_bytes or in_flight == 0

    def on_send(self, now: int, *, nbytes: int, ev: int, retx: bool) -> None:
        pass

    def window_full(self, *, nbytes: int, in_flight: int) -> bool:
        return in_flight + nbytes >= self.window_bytes

    def on_ack(self, now: int, *, fb: AckFeedback) -> None:
        pass

    def on_nack(self, now: int, *, fb: NackFeedback) -> None:
        pass

    def on_timeout(self, now: int, *, ev: int, nbytes: int) -> None:
        pass

    def next_deadline(self) -> int | None:
        return None

    def handle_timer(self, now: int) -> None:
        pass

    @property
    def cwnd(self) -> int:
        return self.window_bytes

    @property
    def max_window(self) -> int:
        return self.window_bytes


class NullReceiverCongestion:
    """Receiver side without congestion state: ACK_CC carries NSCC type with zeros
    except ``rcvd_bytes`` and ``ooo_count``."""

    cc_type = 0
    rccc: CreditReceiver | None = None
    ccx: Any = None

    def __init__(self) -> None:
        self.rcvd_bytes = 0
        self.ooo_count = 0

    def on_data(self, now: int, *, nbytes: int, ecn_ce: bool, credit_target: int,
                in_order: bool, ooo_count: int | None = None) -> None:
        self.rcvd_bytes = (self.rcvd_bytes + nbytes) & 0xFFFFFF
        if ooo_count is not None:
            self.ooo_count = min(ooo_count, 0xFFFF)
        elif not in_order:
            self.ooo_count = (self.ooo_count + 1) & 0xFFFF

    def fill_ack_cc(self, now: int, *, ack: PdsAckCc) -> None:
        ack.cc_type = self.cc_type
        ack.rcvd_bytes = self.rcvd_bytes
        ack.ooo_count = self.ooo_count

    def close(self) -> None:
        pass
