"""DCQCN (Zhu et al., SIGCOMM 2015): the reaction point (sender, per QP) and the
notification point (receiver, per QP). Sans-IO: time is ``now`` in integer picoseconds.

Congestion point: the switches' RED/ECN marking (:mod:`uet.fabric.switch`) sets CE on
data packets; the notification point turns CE arrivals into CNPs, at most one per
``cnp_interval`` per QP; the reaction point cuts and regrows the QP's rate, which the NIC
enforces by pacing (:mod:`uet.roce.endpoint`).

Reaction point, with rate ``RC``, target ``RT``, ``alpha``, the timer count ``T`` and the
byte count ``BC``:

* CNP: ``RT = RC``, ``RC = RC * (1 - alpha / 2)``, ``alpha = (1 - g) * alpha + g``; ``T``,
  ``BC`` and the byte counter restart, and so do the alpha and rate-increase timers.
* alpha timer (every ``alpha_timer`` without a CNP): ``alpha = (1 - g) * alpha``. It only
  matters at the next CNP, so it is applied then, for every period that elapsed (exact).
* rate-increase events, every ``rate_timer`` (``T += 1``) and every ``byte_counter`` bytes
  sent (``BC += 1``), while ``RC`` is below the line rate:
  ``max(T, BC) <= F``: fast recovery, ``RC = (RT + RC) / 2``;
  ``min(T, BC) > F``: hyper increase, ``RT += (min(T, BC) - F) * R_HAI``, then as above;
  otherwise additive increase, ``RT += R_AI``, then as above. ``RC`` is capped at the line
  rate (the conditions as in htsim's ``DCQCNSrc::increaseRate``).
"""

from __future__ import annotations

from enum import Enum

from uet.roce.config import DcqcnConfig
from uet.roce.states import transition

PS_PER_US = 1_000_000


class RpPhase(Enum):
    """Where the reaction point's rate is."""

    LINE_RATE = "line_rate"
    FAST_RECOVERY = "fast_recovery"
    ADDITIVE_INCREASE = "additive_increase"
    HYPER_INCREASE = "hyper_increase"


#: allowed phase changes (a CNP sends any phase to fast recovery)
RP_TRANSITIONS: dict[RpPhase, frozenset[RpPhase]] = {
    RpPhase.LINE_RATE: frozenset({RpPhase.FAST_RECOVERY}),
    RpPhase.FAST_RECOVERY: frozenset({RpPhase.FAST_RECOVERY, RpPhase.ADDITIVE_INCREASE,
                                      RpPhase.HYPER_INCREASE, RpPhase.LINE_RATE}),
    RpPhase.ADDITIVE_INCREASE: frozenset({RpPhase.FAST_RECOVERY, RpPhase.ADDITIVE_INCREASE,
                                          RpPhase.HYPER_INCREASE, RpPhase.LINE_RATE}),
    RpPhase.HYPER_INCREASE: frozenset({RpPhase.FAST_RECOVERY, RpPhase.HYPER_INCREASE,
                                       RpPhase.LINE_RATE}),
}

#: rate steps kept for inspection (the last ones)
TRACE_MAX = 4096


class ReactionPoint:
    """One QP's DCQCN rate (bits per second) and its timers. ``trace`` (if enabled) keeps
    ``(now, event, rc, rt, alpha, T, BC, phase)`` after every change, events ``cnp``,
    ``cnp_ignored``, ``timer``, ``bytes``."""

    __slots__ = ("cfg", "line", "rc", "rt", "alpha", "alpha_at", "t", "bc", "bytes",
                 "rate_deadline", "last_decrease", "phase", "trace", "cnps", "rai", "rhai",
                 "min_rate", "k_ps", "t_ps", "min_dec_ps")

    def __init__(self, cfg: DcqcnConfig, line_rate_bps: float, *, trace: bool = False) -> None:
        self.cfg = cfg
        self.line = float(line_rate_bps)
        self.rc = self.line
        self.rt = self.line
        self.alpha = cfg.alpha_init
        self.alpha_at: int | None = None  # start of the current alpha period
        self.t = 0
        self.bc = 0
        self.bytes = 0
        self.rate_deadline: int | None = None
        self.last_decrease: int | None = None
        self.phase = RpPhase.LINE_RATE
        self.trace: list[tuple] | None = [] if trace else None
        self.cnps = 0
        self.rai = self.line / 20 if cfg.rai_mbps is None else cfg.rai_mbps * 1e6
        self.rhai = self.line / 10 if cfg.rhai_mbps is None else cfg.rhai_mbps * 1e6
        self.min_rate = cfg.min_rate_mbps * 1e6
        self.k_ps = max(1, round(cfg.alpha_timer_us * PS_PER_US))
        self.t_ps = max(1, round(cfg.rate_timer_us * PS_PER_US))
        self.min_dec_ps = round(cfg.min_decrease_interval_us * PS_PER_US)

    def _go(self, phase: RpPhase) -> None:
        self.phase = transition(RP_TRANSITIONS, self.phase, phase, "DCQCN phase")

    def _log(self, now: int, event: str) -> None:
        tr = self.trace
        if tr is not None:
            if len(tr) >= TRACE_MAX:
                del tr[:TRACE_MAX // 2]
            tr.append((now, event, self.rc, self.rt, self.alpha, self.t, self.bc,
                       self.phase.value))

    def alpha_now(self, now: int) -> float:
        """alpha at ``now``, the alpha timer's decays since the last CNP applied."""
        if self.alpha_at is None:
            return self.alpha
        n = (now - self.alpha_at) // self.k_ps
        if n <= 0:
            return self.alpha
        return self.alpha * (1.0 - self.cfg.g) ** n

    def on_cnp(self, now: int) -> None:
        """A CNP for this QP arrived."""
        self.cnps += 1
        if (self.min_dec_ps and self.last_decrease is not None
                and now - self.last_decrease < self.min_dec_ps):
            self._log(now, "cnp_ignored")
            return
        g = self.cfg.g
        alpha = self.alpha_now(now)
        self.rt = self.rc
        self.rc = max(self.rc * (1.0 - alpha / 2.0), self.min_rate)
        self.alpha = (1.0 - g) * alpha + g
        self.alpha_at = now
        self.t = self.bc = self.bytes = 0
        self.rate_deadline = now + self.t_ps
        self.last_decrease = now
        self._go(RpPhase.FAST_RECOVERY)
        self._log(now, "cnp")

    def on_sent(self, now: int, nbytes: int) -> None:
        """``nbytes`` left at this QP's rate (the byte counter)."""
        if self.phase is RpPhase.LINE_RATE:
            return
        self.bytes += nbytes
        b = self.cfg.byte_counter
        while self.bytes >= b and self.phase is not RpPhase.LINE_RATE:
            self.bytes -= b
            self.bc += 1
            self._increase(now, "bytes")

    def next_deadline(self) -> int | None:
        """When the rate-increase timer fires next (None at line rate)."""
        return self.rate_deadline

    def handle_timer(self, now: int) -> None:
        """The rate-increase timer, if due."""
        while self.rate_deadline is not None and now >= self.rate_deadline:
            at = self.rate_deadline
            self.rate_deadline = at + self.t_ps
            self.t += 1
            self._increase(at, "timer")

    def _increase(self, now: int, event: str) -> None:
        f = self.cfg.threshold_f
        t, bc = self.t, self.bc
        if max(t, bc) <= f:
            phase = RpPhase.FAST_RECOVERY
        elif min(t, bc) > f:
            self.rt += (min(t, bc) - f) * self.rhai
            phase = RpPhase.HYPER_INCREASE
        else:
            self.rt += self.rai
            phase = RpPhase.ADDITIVE_INCREASE
        self.rc = (self.rt + self.rc) / 2.0
        if self.rc >= self.line:
            self.rc = self.line
            self.rate_deadline = None
            phase = RpPhase.LINE_RATE
        self._go(phase)
        self._log(now, event)


class NotificationPoint:
    """One QP's CNP generation: the first CE-marked arrival after a quiet ``cnp_interval``
    sends a CNP at once; CE arrivals within the interval send one more CNP when it ends."""

    __slots__ = ("interval", "last_cnp", "pending", "marked")

    def __init__(self, cfg: DcqcnConfig) -> None:
        self.interval = round(cfg.cnp_interval_us * PS_PER_US)
        self.last_cnp: int | None = None
        self.pending = False
        self.marked = 0

    def on_ce(self, now: int) -> bool:
        """A CE-marked packet arrived; True: send a CNP now."""
        self.marked += 1
        if self.last_cnp is None or now - self.last_cnp >= self.interval:
            self.last_cnp = now
            self.pending = False
            return True
        self.pending = True
        return False

    def next_deadline(self) -> int | None:
        if self.pending and self.last_cnp is not None:
            return self.last_cnp + self.interval
        return None

    def handle_timer(self, now: int) -> bool:
        """True: send the CNP held back by the interval."""
        if self.pending and self.last_cnp is not None and now >= self.last_cnp + self.interval:
            self.last_cnp = now
            self.pending = False
            return True
        return False
