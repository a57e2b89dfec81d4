"""CCX: extended congestion-control state in ACK_CCX and NACK_CCX (ref 2.5, 2.6), sans-IO.

The specification leaves the contents of ACK_CCX's ``ccx_state`` and NACK_CCX's state
proprietary (xdp2 calls the type nibble "proprietary extensions"; the reference provider
and Wireshark only size it). ``cms.ccx = "telemetry"`` (off by default) turns on our
documented plug-in, in the spirit of in-band network telemetry: the receiver measures what
actually reached it and says so in every ACK and NACK of the PDC, and the sender caps its
window at the delivery rate the receiver saw whenever that receiver reports congestion.

Receiver report (:class:`TelemetryReceiver`), for the interval since the PDC's previous
report:

* ACK_CCX ``ccx_state`` (8 bytes, after the 32-byte ACK_CC layout whose NSCC / credit
  state is unchanged): byte 0 the format (``TELEMETRY_V1`` = 1), byte 1 the CE-marked share
  of the interval's bytes (0-255), bytes 2-3 the interval in nanoseconds (0xFFFF: longer),
  byte 4 the packets that arrived trimmed in it (255: more), bytes 5-7 the payload bytes
  received in it (0xFFFFFF: more).
* NACK_CCX (``nccx_type`` = 1): ``nccx_state1`` (60 bits) = CE share (8) | interval ns (16) |
  trimmed packets seen in the interval (16) | 20 reserved bits; ``nccx_state2`` (64 bits) =
  interval bytes (32) | bytes received since the PDC opened (32, wrapping). A NACK does
  not end the interval: the next ACK reports it whole.

Sender reaction (:class:`TelemetrySender`): an EWMA of the delivery rate (bytes per ps,
weight 1/8, from intervals of at least ``MIN_INTERVAL_PS`` with data) and a DCTCP-style
EWMA ``alpha`` of the CE share (gain 1/16). A report with a CE share or trims (ACK_CCX or
NACK_CCX) sets the CCX window to
``max(MTU, rate x (base RTT + target queueing delay) x (1 - alpha / 2))`` when that is
below it; a report without congestion grows it by one MTU, up to the maximum window. The
PDC's window is the smaller of the CC's (NSCC, RCCC or fixed) and the CCX window. What
this buys: a sender that joins a congested last hop learns the receiver's actual share of
the link within one report instead of cutting by halves; the cost is 8 bytes per ACK and
16 per NACK. Off by default, so no htsim row changes (docs/cms.md, "CCX").
"""

from __future__ import annotations

from typing import Any

TELEMETRY_V1 = 1
NCCX_TELEMETRY = 1
CCX_MODES = ("none", "telemetry")
#: shorter intervals are too coarse for a rate sample (a few packets at 100 Gb/s)
MIN_INTERVAL_PS = 500_000
RATE_WEIGHT = 1 / 8
ALPHA_GAIN = 1 / 16


class TelemetryReceiver:
    """Receiver side of one PDC: bytes, CE-marked bytes and trims per report interval."""

    __slots__ = ("t0", "nbytes", "ce_bytes", "trims", "total")

    def __init__(self, now: int = 0) -> None:
        self.t0 = now
        self.nbytes = 0
        self.ce_bytes = 0
        self.trims = 0
        self.total = 0

    def on_data(self, now: int, *, nbytes: int, ecn_ce: bool) -> None:
        """A new data packet of the PDC arrived."""
        self.nbytes += nbytes
        self.total += nbytes
        if ecn_ce:
            self.ce_bytes += nbytes

    def on_trim(self, now: int) -> None:
        """A packet of the PDC arrived trimmed."""
        self.trims += 1

    def _interval(self, now: int) -> tuple[int, int, int]:
        nbytes = self.nbytes
        share = 255 * self.ce_bytes // nbytes if nbytes else 0
        ns = min((now - self.t0) // 1000, 0xFFFF) if now > self.t0 else 0
        return share, ns, nbytes

    def ack_state(self, now: int) -> bytes:
        """The 8-byte ``ccx_state`` of an outgoing ACK_CCX; starts a new interval."""
        share, ns, nbytes = self._interval(now)
        trims = min(self.trims, 0xFF)
        self.t0 = now
        self.nbytes = self.ce_bytes = self.trims = 0
        return (bytes((TELEMETRY_V1, share)) + ns.to_bytes(2, "big") + bytes((trims,))
                + min(nbytes, 0xFFFFFF).to_bytes(3, "big"))

    def nack_state(self, now: int) -> tuple[int, int, int]:
        """(``nccx_type``, ``nccx_state1``, ``nccx_state2``) of an outgoing NACK_CCX."""
        share, ns, nbytes = self._interval(now)
        s1 = share << 52 | ns << 36 | min(self.trims, 0xFFFF) << 20
        return NCCX_TELEMETRY, s1, min(nbytes, 0xFFFFFFFF) << 32 | self.total & 0xFFFFFFFF


def parse_ack_state(state: bytes) -> tuple[int, int, int, int] | None:
    """(CE share 0-255, interval ns, trims, bytes) of a telemetry ``ccx_state``, or None
    when the bytes are not ours (another format, or too short)."""
    if len(state) < 8 or state[0] != TELEMETRY_V1:
        return None
    return (state[1], int.from_bytes(state[2:4], "big"), state[4],
            int.from_bytes(state[5:8], "big"))


def parse_nack_state(nccx_type: int, s1: int, s2: int) -> tuple[int, int, int, int] | None:
    """(CE share, interval ns, trims, interval bytes) of a telemetry NACK_CCX, or None."""
    if nccx_type != NCCX_TELEMETRY:
        return None
    return s1 >> 52 & 0xFF, s1 >> 36 & 0xFFFF, s1 >> 20 & 0xFFFF, s2 >> 32 & 0xFFFFFFFF


class TelemetrySender:
    """Sender side of one PDC: the CCX window from the receiver's reports."""

    __slots__ = ("mtu", "max_window", "horizon_ps", "rate", "alpha", "cwnd", "reports",
                 "cuts")

    def __init__(self, *, mtu: int, max_window: int, base_rtt_ps: int,
                 target_qdelay_ps: int) -> None:
        self.mtu = mtu
        self.max_window = max(max_window, mtu)
        self.horizon_ps = base_rtt_ps + target_qdelay_ps
        self.rate = 0.0  # bytes per ps the receiver saw (EWMA); 0: no sample yet
        self.alpha = 0.0  # CE share (EWMA, 0..1)
        self.cwnd = self.max_window
        self.reports = 0
        self.cuts = 0

    def _sample(self, ns: int, nbytes: int) -> None:
        if ns == 0xFFFF or ns * 1000 < MIN_INTERVAL_PS or not nbytes:
            return
        r = nbytes / (ns * 1000)
        self.rate = r if not self.rate else self.rate + RATE_WEIGHT * (r - self.rate)

    def _react(self, congested: bool) -> None:
        if congested and self.rate:
            target = int(self.rate * self.horizon_ps * (1 - self.alpha / 2))
            target = max(self.mtu, target)
            if target < self.cwnd:
                self.cwnd = target
                self.cuts += 1
        elif not congested and self.cwnd < self.max_window:
            self.cwnd = min(self.max_window, self.cwnd + self.mtu)

    def on_ack_state(self, now: int, state: bytes) -> None:
        """An ACK_CCX's ``ccx_state``."""
        parsed = parse_ack_state(state)
        if parsed is None:
            return
        share, ns, trims, nbytes = parsed
        self.reports += 1
        self.alpha += ALPHA_GAIN * (share / 255 - self.alpha)
        self._sample(ns, nbytes if nbytes < 0xFFFFFF else 0)
        self._react(share > 0 or trims > 0)

    def on_nack_state(self, now: int, nack: Any) -> None:
        """A NACK_CCX record (its ``nccx_*`` fields)."""
        parsed = parse_nack_state(nack.nccx_type, nack.nccx_state1, nack.nccx_state2)
        if parsed is None:
            return
        share, _ns, trims, _nbytes = parsed
        self.reports += 1
        self._react(share > 0 or trims > 0)


__all__ = ["CCX_MODES", "NCCX_TELEMETRY", "TELEMETRY_V1", "TelemetryReceiver",
           "TelemetrySender", "parse_ack_state", "parse_nack_state"]
