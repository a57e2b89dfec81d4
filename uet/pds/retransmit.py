"""Retransmission helpers: the RTO estimator and the SACK ("dupack-like") loss detector.

The initiator keeps, per packet, its send time and its transmission sequence number (a
per-PDC counter that grows with every transmission, first or repeated). A packet is deemed
lost when ``sack_dupthresh`` packets transmitted after it are known to have arrived (SACK bit,
explicit ACK or CACK) while it has not; this is the "N later PSNs were SACKed" rule
generalised to retransmissions (a retransmitted packet is judged against packets sent after
its retransmission). Retransmissions keep their PSN and never go back N.
"""

from __future__ import annotations

import bisect

from uet.pds.config import PdsConfig
from uet.wire.constants import NackCode

#: NACK codes meaning "the target is short of a resource": the packet is retransmitted when
#: its RTO (with backoff) expires rather than at once, so a full target is not hammered.
RESOURCE_NACKS = frozenset({
    NackCode.NO_PDC_AVAIL, NackCode.NO_CCC_AVAIL, NackCode.NO_BITMAP, NackCode.NO_PKT_BUFFER,
    NackCode.NO_GTD_DEL_AVAIL, NackCode.NO_SES_MSG_AVAIL, NackCode.NO_RESOURCE,
})


def nack_name(code: int) -> str:
    """``NackCode`` name, or ``0xNN`` for codes the enum does not know."""
    try:
        return NackCode(code).name
    except ValueError:
        return f"0x{code:02X}"


class RtoEstimator:
    """Fixed RTO, or RFC 6298-style srtt + 4 rttvar clamped to [min_rto, max_rto]."""

    __slots__ = ("adaptive", "base", "min_rto", "max_rto", "backoff", "srtt", "rttvar")

    def __init__(self, cfg: PdsConfig) -> None:
        self.adaptive = cfg.rto_adaptive
        self.base = cfg.rto_ps
        self.min_rto = cfg.min_rto_ps
        self.max_rto = cfg.max_rto_ps
        self.backoff = cfg.rto_backoff
        self.srtt: int | None = None
        self.rttvar = 0

    def sample(self, rtt: int) -> None:
        """Feed one RTT sample (ps) from a packet that was not retransmitted (Karn)."""
        if not self.adaptive or rtt < 0:
            return
        if self.srtt is None:
            self.srtt = rtt
            self.rttvar = rtt // 2
        else:
            self.rttvar = (3 * self.rttvar + abs(self.srtt - rtt)) // 4
            self.srtt = (7 * self.srtt + rtt) // 8
        rto = self.srtt + 4 * self.rttvar
        self.base = min(max(rto, self.min_rto), self.max_rto)

    def rto_for(self, retries: int) -> int:
        """RTO of a packet already retransmitted ``retries`` times (exponential backoff)."""
        if retries == 0:
            return self.base
        return min(self.base * self.backoff ** retries, max(self.max_rto, self.base))


class LossDetector:
    """Keeps the ``n`` highest transmission sequence numbers known to have arrived."""

    __slots__ = ("n", "top")

    def __init__(self, n: int) -> None:
        self.n = n
        self.top: list[int] = []  # ascending, at most n entries

    def delivered(self, seq: int) -> None:
        top = self.top
        if not self.n:
            return
        if len(top) < self.n:
            bisect.insort(top, seq)
        elif seq > top[0]:
            top.pop(0)
            bisect.insort(top, seq)

    @property
    def threshold(self) -> int:
        """Packets transmitted with a sequence number below this are lost (-1: none yet)."""
        top = self.top
        return top[0] if self.n and len(top) >= self.n else -1

    def reset(self) -> None:
        self.top.clear()
