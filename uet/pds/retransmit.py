"""Retransmission helpers: the RTO estimator and the two loss detectors fed by SACKs.

The initiator keeps, per packet, its send time and its transmission sequence number (a
per-PDC counter that grows with every transmission, first or repeated). Two detectors
judge packets by transmission order, so both work for retransmissions too:

* :class:`Rack` (time-based, RFC 8985 ideas): a packet is lost when a packet *sent after
  it* is known to have arrived (SACK bit, explicit ACK or CACK) and more than that packet's
  RTT plus a reordering window has passed since it was sent. The window adapts to the
  reordering this PDC has seen, so sprayed packets that merely take a slower path are not
  resent.
* :class:`LossDetector` (count-based): ``sack_dupthresh`` packets transmitted after it
  arrived while it has not (the classic "3 later PSNs were SACKed" rule).

Retransmissions keep their PSN and never go back N.
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


class Rack:
    """Time-based loss detection for one initiator PDC (RACK, after RFC 8985).

    ``delivered`` is told of every packet newly known to have arrived; ``deadline`` says
    when a packet still outstanding is deemed lost: ``send_time + rtt + reo_wnd``, if a
    packet transmitted after it has arrived (``rtt`` is that packet's RTT as the sender saw
    it, ACK coalescing included), else never.

    The reordering window is ``fixed_wnd`` when set, else adaptive: at least min_rtt / 4
    (RFC 8985), and at least the largest reordering skew seen in the last two buckets of
    32 min RTTs. A skew sample is how much later than the RACK deadline a packet arrived
    after a later-sent one (so a window this wide would have waited for it), the same for
    the original of a retransmission that proved spurious, and, once the PDC sprays over
    several EVs, its RTT minus the minimum RTT: packets on different paths reorder by up to
    the spread of their queueing delays, which that bounds before any reordering is seen.
    """

    __slots__ = ("fixed_wnd", "seq", "rtt", "min_rtt", "multipath", "spurious", "_cur",
                 "_prev", "_bucket_end")

    BUCKET_RTTS = 32

    def __init__(self, fixed_wnd: int = 0) -> None:
        self.fixed_wnd = fixed_wnd
        self.seq = 0  # transmission number of the latest-sent packet known delivered (0: none)
        self.rtt = 0  # its RTT
        self.min_rtt: int | None = None
        self.multipath = False  # the PDC has used more than one EV
        self.spurious = 0  # retransmissions found unnecessary (their original arrived)
        self._cur = 0  # largest skew in the current bucket
        self._prev = 0  # ... and in the previous one
        self._bucket_end = 0

    def _skew(self, now: int, sample: int) -> None:
        if now >= self._bucket_end:
            span = self.BUCKET_RTTS * (self.min_rtt or 1_000_000)
            self._prev = self._cur if now < self._bucket_end + span else 0
            self._cur = 0
            self._bucket_end = now + span
        if sample > self._cur:
            self._cur = sample

    def delivered(self, now: int, seq: int, send_time: int, prev_send: int,
                  retransmitted: bool, timely: bool = True, original: bool = False) -> bool:
        """A packet (latest transmission ``seq`` at ``send_time``; the one before at
        ``prev_send``) is newly known to have arrived. Returns False when the earlier copy
        of a retransmitted packet arrived, i.e. the retransmission was spurious: the ACK
        says so (``original``: it names the packet without the RETX flag), or it came too
        soon for the retransmission (under 3/4 of min_rtt after it, RFC 8985).
        ``timely=False``: the news is late (a CACK jump past what the SACK bitmap could
        name), so its RTT says nothing about the paths and feeds no estimate."""
        rtt = now - send_time
        if not timely:
            if seq > self.seq:
                self.seq = seq
                self.rtt = rtt
            return True
        min_rtt = self.min_rtt
        if retransmitted and (original or min_rtt is not None
                              and rtt < min_rtt - (min_rtt >> 2)):
            self.spurious += 1
            if self.seq:
                self._skew(now, now - prev_send - self.rtt)
            return False
        # skew samples: _skew only when one can matter (a new maximum or a bucket ended)
        if not retransmitted:
            if min_rtt is None or rtt < min_rtt:
                self.min_rtt = min_rtt = rtt
            if self.multipath and (rtt - min_rtt > self._cur or now >= self._bucket_end):
                self._skew(now, rtt - min_rtt)
        if seq > self.seq:
            self.seq = seq
            self.rtt = rtt
        elif (not retransmitted and self.seq  # arrived after a packet sent later than it
              and (rtt - self.rtt > self._cur or now >= self._bucket_end)):
            self._skew(now, rtt - self.rtt)
        return True

    @property
    def reo_wnd(self) -> int:
        """The reordering window (ps)."""
        if self.fixed_wnd:
            return self.fixed_wnd
        skew = self._cur if self._cur > self._prev else self._prev
        base = self.min_rtt or 0
        floor = base + (base >> 1) if self.multipath else base >> 2
        if skew:  # the next reordering may be worse than the worst seen so far
            skew += (skew >> 1) + (base >> 2)
        return skew if skew > floor else floor

    def deadline(self, seq: int, send_time: int) -> int | None:
        """When the packet (transmission ``seq`` at ``send_time``) counts as lost, or None
        while no packet sent after it is known to have arrived."""
        if seq >= self.seq:
            return None
        return send_time + self.rtt + self.reo_wnd


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
