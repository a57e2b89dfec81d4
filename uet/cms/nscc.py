"""NSCC: the UEC network-signal-based sender window (sans-IO).

A model of the reference simulator's NSCC (``ultraethernet/uet-htsim``, ``uec.cpp``:
``UecSrc::initNsccParams``, ``updateCwndOnAck_NSCC``, ``updateCwndOnNack_NSCC``,
``quick_adapt``, ``fair_increase``, ``proportional_increase``, ``fast_increase``,
``multiplicative_decrease``, ``fulfill_adjustment``, ``update_delay``,
``update_base_rtt``). Signals: ECN echo, the queuing delay (RTT sample - base RTT),
trims / losses, and the receiver's ACK_CC NSCC state. All sizes are payload bytes, all
times picoseconds. ``docs/cms.md`` gives the reactions and the parameter formulas.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from uet.cms.api import CmsConfig
from uet.wire.constants import CcType
from uet.wire.records import PdsAckCc

PS_PER_S = 1_000_000_000_000
REF_LINK_BPS = 100_000_000_000  # htsim _reference_network_linkspeed
REF_RTT_PS = 12_000_000  # htsim _reference_network_rtt (12 us)
RCV_PENALTY_MAX = 127  # rcv_cwnd_pend is 7 bits on the wire
_NSCC = CcType.NSCC  # a module name: an Enum class attribute lookup costs ~70 ns per ACK


def bdp_bytes(config: CmsConfig, rtt_ps: int | None = None) -> int:
    """Payload bytes that fill the link for one RTT (wire BDP x payload / packet size)."""
    rtt = config.base_rtt_ps if rtt_ps is None else rtt_ps
    wire = config.link_rate_bps * rtt // (8 * PS_PER_S)
    return wire * config.mtu_payload // (config.mtu_payload + config.pkt_overhead_bytes)


def max_window_bytes(config: CmsConfig) -> int:
    """The configured maximum window: ``max_window_bytes`` or 1.5 x BDP (htsim)."""
    if config.max_window_bytes is not None:
        return config.max_window_bytes
    return int(1.5 * bdp_bytes(config))


@dataclass(slots=True)
class NsccParams:
    """NSCC constants, scaled from the link rate and base RTT as htsim does."""

    mtu: int  # payload bytes of a full packet; also the minimum window
    network_rtt: int  # ps: the configured base RTT
    target_qdelay: int  # ps
    bdp: int
    max_wnd: int
    initial_wnd: int
    alpha: float  # proportional increase, bytes per ps of headroom (x acked / cwnd)
    fi: float  # fair increase, bytes (x acked / cwnd)
    fi_scale: float  # fast increase: cwnd += acked * fi_scale
    eta: float  # additive bytes per adjust period
    gamma: float = 0.8  # multiplicative decrease strength
    delay_alpha: float = 0.0125  # delay EWMA weight
    qa_threshold: int = 0  # ps of delay that triggers quick adapt (4 x target)
    qa_gate: int = 3
    quick_adapt: bool = True
    adjust_period: int = 0  # ps between fulfill adjustments (the network RTT)
    adjust_bytes: int = 0  # or after this many acked bytes (8 MTU)
    fast_increase_delay: int = 1_000_000  # ps: below this delay count towards fast increase
    adapt_base_rtt: bool = True
    fixed_max_wnd: bool = False  # max window configured explicitly: never rescale it
    link_rate_bps: int = REF_LINK_BPS
    overhead: int = 64

    @classmethod
    def from_config(cls, config: CmsConfig) -> NsccParams:
        """Scale the constants: a = BDP / (100 Gb/s x 12 us), b = target / 12 us,
        alpha = 4 MSS a b / target, fi = 5 MSS a, eta = 0.15 MSS a, fi_scale = 0.25 a."""
        mss = config.mtu_payload
        rtt = config.base_rtt_ps
        if config.target_qdelay_ps is not None:
            target = config.target_qdelay_ps
        else:
            target = int(rtt * 0.75) if config.trimming else rtt
        a = (config.link_rate_bps * rtt) / (REF_LINK_BPS * REF_RTT_PS)
        b = target / REF_RTT_PS
        bdp = bdp_bytes(config)
        max_wnd = max_window_bytes(config)
        init = config.initial_window_bytes if config.initial_window_bytes else max_wnd
        return cls(
            mtu=mss,
            network_rtt=rtt,
            target_qdelay=target,
            bdp=bdp,
            max_wnd=max_wnd,
            initial_wnd=init,
            alpha=4.0 * mss * a * b / target,
            fi=5.0 * mss * a,
            fi_scale=0.25 * a,
            eta=0.15 * mss * a,
            qa_threshold=4 * target,
            qa_gate=config.qa_gate,
            quick_adapt=config.quick_adapt,
            adjust_period=rtt,
            adjust_bytes=8 * mss,
            adapt_base_rtt=config.adapt_base_rtt,
            fixed_max_wnd=config.max_window_bytes is not None,
            link_rate_bps=config.link_rate_bps,
            overhead=config.pkt_overhead_bytes,
        )


class Nscc:
    """The NSCC window of one PDC. The caller maps PDS feedback onto these methods.

    ``receiver_credit``: RCCC runs as well, so last-hop trims do not shrink the window
    (the receiver's credit already paces the last hop).
    """

    # slots: the C form of on_ack (uet.cms.sender's core) reads and writes them in place
    __slots__ = ("p", "receiver_credit", "base_rtt", "bdp", "max_wnd", "cwnd", "avg_delay",
                 "inc_bytes", "received_bytes", "achieved_bytes", "bytes_ignored",
                 "bytes_to_ignore", "trigger_qa", "qa_endtime", "fi_count", "increasing",
                 "last_dec_time", "last_adjust_time", "in_flight", "ooo_count",
                 "cwnd_before_penalty", "rcvd_raw", "rcvd_total", "credited", "stats")

    def __init__(self, params: NsccParams, *, receiver_credit: bool = False) -> None:
        self.p = params
        self.receiver_credit = receiver_credit
        self.base_rtt = params.network_rtt
        self.bdp = params.bdp
        self.max_wnd = params.max_wnd
        self.cwnd = max(min(params.initial_wnd, params.max_wnd), params.mtu)
        self.avg_delay = 0.0
        self.inc_bytes = 0.0  # pending fair/proportional increase (bytes^2 / cwnd)
        self.received_bytes = 0  # acked since the last fulfill adjustment
        self.achieved_bytes = 0  # acked in the current quick-adapt period
        self.bytes_ignored = 0
        self.bytes_to_ignore = 0
        self.trigger_qa = False
        self.qa_endtime: int | None = None
        self.fi_count = 0
        self.increasing = False
        self.last_dec_time = 0
        self.last_adjust_time = 0
        self.in_flight = 0
        self.ooo_count = 0
        self.cwnd_before_penalty: int | None = None
        self.rcvd_raw = 0  # last 24-bit rcvd_bytes seen in an ACK_CC (both sides start at 0)
        self.rcvd_total = 0  # the receiver's count, unwrapped
        self.credited = 0  # acked bytes already fed to the window
        self.stats: Counter[str] = Counter()

    # ------------------------------------------------------------------ gates

    def can_send(self, nbytes: int, in_flight_bytes: int) -> bool:
        """htsim ``can_send_NSCC``: the window must hold the packet."""
        return self.cwnd >= in_flight_bytes + nbytes

    @property
    def loss_suspected(self) -> bool:
        """The receiver reports at least max(min(1.5 cwnd, maxwnd), 5 MTU) packets out
        of order (htsim's SLEEK threshold): a hint for the PDS to retransmit early."""
        threshold = max(min(int(1.5 * self.cwnd), self.max_wnd), 5 * self.p.mtu)
        return self.ooo_count >= threshold // self.p.mtu

    # ------------------------------------------------------------------ delay

    def _update_base_rtt(self, rtt: int) -> None:
        if self.p.adapt_base_rtt and rtt < self.base_rtt and rtt > 0:
            self.base_rtt = rtt
            self.bdp = (
                self.p.link_rate_bps
                * rtt
                // (8 * PS_PER_S)
                * self.p.mtu
                // (self.p.mtu + self.p.overhead)
            )
            if not self.p.fixed_max_wnd:
                self.max_wnd = max(int(1.5 * self.bdp), self.p.mtu)

    def _update_delay(self, rtt: int, skip: bool) -> None:
        """EWMA of the queuing delay; an un-marked sample above target counts as
        base_RTT / 4 (htsim: a high delay without ECN is not trusted)."""
        delay = rtt - self.base_rtt
        a = self.p.delay_alpha
        if not skip and delay > self.p.target_qdelay:
            self.avg_delay = a * self.base_rtt * 0.25 + (1 - a) * self.avg_delay
        else:
            self.avg_delay = a * delay + (1 - a) * self.avg_delay

    def _sample(self, rtt: int | None, skip: bool) -> float:
        if rtt is None:
            return self.avg_delay
        self._update_base_rtt(rtt)
        if rtt >= self.base_rtt:
            self._update_delay(rtt, skip)
            return rtt - self.base_rtt
        return self.avg_delay

    # ------------------------------------------------------------------ feedback

    def on_ack(
        self,
        now: int,
        newly_acked: int,
        ecn: bool,
        rtt_sample: int | None,
        in_flight: int,
        ack_cc: PdsAckCc | None = None,
    ) -> None:
        """One ACK: receiver state, then the four-way reaction and fulfill adjustment."""
        self.in_flight = in_flight
        if ack_cc is not None and ack_cc.cc_type == _NSCC:
            newly_acked = self._received(ack_cc.rcvd_bytes)
            self._receiver_state(ack_cc, newly_acked)
        else:
            self.credited += newly_acked
            if ack_cc is not None:
                self.ooo_count = ack_cc.ooo_count
        self.achieved_bytes += newly_acked
        self.received_bytes += newly_acked
        self.bytes_ignored += newly_acked
        delay = self._sample(rtt_sample, ecn)
        self._react(now, ecn, delay, newly_acked)

    def _received(self, raw: int) -> int:
        """Bytes newly received according to the receiver's 24-bit ``rcvd_bytes`` (htsim's
        ``newly_recvd_bytes``): every arrival is credited with the delay of the ACK that
        reported it, even arrivals beyond the 64-packet SACK bitmap that the PDS can only
        name later. Stale counts (an overtaken ACK) give 0; bytes already credited from
        plain ACKs are not credited twice."""
        delta = (raw - self.rcvd_raw) & 0xFFFFFF
        if 0 < delta < 0x800000:
            self.rcvd_raw = raw
            self.rcvd_total += delta
        newly = self.rcvd_total - self.credited
        if newly <= 0:
            return 0
        self.credited = self.rcvd_total
        return newly

    def _receiver_state(self, ack: PdsAckCc, newly: int) -> None:
        self.ooo_count = ack.ooo_count
        pen = ack.rcv_cwnd_pend
        if pen > 0 and newly > 0:
            if self.cwnd_before_penalty is None:
                self.cwnd_before_penalty = self.cwnd
            dec = newly * min(pen, RCV_PENALTY_MAX) // RCV_PENALTY_MAX
            self.cwnd = max(self.cwnd - dec, self.p.mtu)
            self.stats["dec_receiver"] += dec
        if ack.restore_cwnd and self.cwnd_before_penalty is not None:
            self.cwnd = min(max(self.cwnd, self.cwnd_before_penalty), self.max_wnd)
            self.cwnd_before_penalty = None
            self.stats["restore"] += 1

    def _react(self, now: int, skip: bool, delay: float, newly: int) -> None:
        if self._quick_adapt(now, False, skip, delay):
            return
        target = self.p.target_qdelay
        if not skip and delay >= target:
            self._fair_increase(newly)
        elif not skip:
            self._proportional_increase(newly, delay)
        elif delay >= target:
            self._multiplicative_decrease(now)
        # else: ECN with low delay: the window stays, the EV selector moves the path
        self._bound()
        if (
            self.received_bytes > self.p.adjust_bytes
            or now - self.last_adjust_time > self.p.adjust_period
        ):
            self._fulfill(now)
        self._bound()

    def on_nack(
        self,
        now: int,
        nbytes: int,
        *,
        last_hop: bool = False,
        rtt_sample: int | None = None,
        in_flight: int | None = None,
    ) -> None:
        """A trim or loss: delay sample of one network RTT, quick adapt, else
        ``cwnd -= nbytes`` (not for last-hop trims when RCCC paces the last hop)."""
        if in_flight is not None:
            self.in_flight = in_flight
        if rtt_sample is not None:
            self._update_base_rtt(rtt_sample)
        self.bytes_ignored += nbytes
        self.stats["dec_nack_bytes"] += nbytes
        self._update_delay(self.base_rtt + self.p.network_rtt, True)
        self.trigger_qa = True
        if self._quick_adapt(now, True, True, 0):
            return
        if not (self.receiver_credit and last_hop):
            self.cwnd -= nbytes
            self._bound()

    def on_timeout(self, now: int, nbytes: int) -> None:
        """RTO of one packet: ``cwnd -= nbytes`` (htsim mark_packet_for_retransmission)."""
        self.in_flight = max(self.in_flight - nbytes, 0)
        self.cwnd = max(self.cwnd - nbytes, self.p.mtu)

    def on_send(self, nbytes: int) -> None:
        self.in_flight += nbytes

    # ------------------------------------------------------------------ pieces

    def _bound(self) -> None:
        if self.cwnd < self.p.mtu:
            self.cwnd = self.p.mtu
        if self.cwnd > self.max_wnd:
            self.cwnd = self.max_wnd

    def _quick_adapt(self, now: int, is_loss: bool, skip: bool, delay: float) -> bool:
        """At most once per (base RTT + target delay): if a trim/loss, a very high delay
        or a pending trigger was seen and less than max_wnd >> qa_gate was delivered in
        the last period, set cwnd to what was delivered. Marked ACKs of the packets in
        flight at that moment are then ignored."""
        if not self.p.quick_adapt:
            return False
        done = False
        if self.bytes_ignored < self.bytes_to_ignore and skip:
            done = True
        elif self.qa_endtime is None or now > self.qa_endtime:
            if (
                self.qa_endtime is not None
                and (self.trigger_qa or is_loss or delay > self.p.qa_threshold)
                and self.achieved_bytes < (self.max_wnd >> self.p.qa_gate)
            ):
                before = self.cwnd
                self.cwnd = max(self.achieved_bytes, self.p.mtu)
                self.stats["dec_quick_bytes"] += before - self.cwnd
                self.stats["quick_adapt"] += 1
                self.bytes_to_ignore = self.in_flight
                self.bytes_ignored = 0
                self.trigger_qa = False
                done = True
            self.achieved_bytes = 0
            self.qa_endtime = now + self.base_rtt + self.p.target_qdelay
        if done:
            self.inc_bytes = 0.0
            self.received_bytes = 0
        return done

    def _fair_increase(self, newly: int) -> None:
        self.inc_bytes += self.p.fi * newly
        self.stats["fair_increase"] += 1

    def _proportional_increase(self, newly: int, delay: float) -> None:
        self._fast_increase(newly, delay)
        if self.increasing:
            return
        self.inc_bytes += self.p.alpha * newly * (self.p.target_qdelay - delay)
        self.stats["proportional_increase"] += 1

    def _fast_increase(self, newly: int, delay: float) -> None:
        if delay < self.p.fast_increase_delay:
            self.fi_count += newly
            if self.fi_count > self.cwnd or self.increasing:
                self.cwnd = int(self.cwnd + newly * self.p.fi_scale)
                self.increasing = True
                self.stats["fast_increase"] += 1
                return
        else:
            self.fi_count = 0
        self.increasing = False

    def _multiplicative_decrease(self, now: int) -> None:
        self.increasing = False
        self.fi_count = 0
        avg = self.avg_delay
        target = self.p.target_qdelay
        if avg > target and now - self.last_dec_time > self.base_rtt:
            factor = max(1 - self.p.gamma * (avg - target) / avg, 0.5)
            before = self.cwnd
            self.cwnd = max(int(self.cwnd * factor), self.p.mtu)
            self.last_dec_time = now
            self.stats["dec_multi_bytes"] += before - self.cwnd
            self.stats["multiplicative_decrease"] += 1

    def _fulfill(self, now: int) -> None:
        """Apply the accumulated increase (inc / cwnd), plus eta once per period."""
        self.cwnd = int(self.cwnd + self.inc_bytes / self.cwnd)
        if now - self.last_adjust_time >= self.p.adjust_period:
            self.cwnd = int(self.cwnd + self.p.eta)
            self.last_adjust_time = now
        self.inc_bytes = 0.0
        self.received_bytes = 0
        self.stats["fulfill"] += 1
