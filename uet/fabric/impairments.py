"""Link impairments, drawn from a seeded ``random.Random`` per link direction.

* ``loss``: Bernoulli loss probability per frame.
* ``gilbert``: bursty loss (Gilbert-Elliott): ``p_gb`` good->bad and ``p_bg`` bad->good
  transition probabilities per frame, loss probability ``loss_good`` / ``loss_bad`` in each
  state.
* ``corrupt``: probability that a frame has ``corrupt_bits`` random bits flipped, or ``ber``
  a bit error rate (per-frame probability ``1 - (1 - ber) ** bits``). The receiver checks the
  modelled Ethernet FCS (CRC-32, ``zlib.crc32``) and drops the frame as ``drop.fcs``.
* ``duplicate``: probability that a frame is delivered twice.
* ``jitter_ps``: extra delay uniform in [0, jitter_ps] per frame (reorders frames).
* ``reorder`` / ``reorder_delay_ps``: probability that a frame is held back by that delay.
* ``rate_bps``: a degraded rate for this direction (serialisation at that rate).
* ``queue_factor``: scale the byte limits and ECN thresholds of the switch port that
  transmits in this direction (htsim scales a degraded link's queue and ECN thresholds
  with its speed, keeping the buffer the same in time: ``rate_factor = queue_factor``).
* ``down``: list of ``(t_down_ps, t_up_ps)`` intervals (``t_up_ps`` None = stays down).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class GilbertElliott:
    """Two-state bursty loss model."""

    p_gb: float
    p_bg: float
    loss_good: float = 0.0
    loss_bad: float = 1.0

    def mean_loss(self) -> float:
        """Stationary loss rate."""
        pi_bad = self.p_gb / (self.p_gb + self.p_bg)
        return pi_bad * self.loss_bad + (1 - pi_bad) * self.loss_good


@dataclass
class Impairments:
    """What can go wrong on one direction of a link (all off by default)."""

    loss: float = 0.0
    gilbert: GilbertElliott | None = None
    corrupt: float = 0.0
    corrupt_bits: int = 1
    ber: float = 0.0
    duplicate: float = 0.0
    jitter_ps: int = 0
    reorder: float = 0.0
    reorder_delay_ps: int = 0
    rate_bps: int | None = None
    queue_factor: float | None = None
    down: list[tuple[int, int | None]] = field(default_factory=list)
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("loss", "corrupt", "ber", "duplicate", "reorder"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"impairments.{name}={v}: a probability is 0..1")
        if isinstance(self.gilbert, dict):
            self.gilbert = GilbertElliott(**self.gilbert)
        if self.corrupt_bits < 1:
            raise ValueError("impairments.corrupt_bits must be >= 1")
        if self.jitter_ps < 0 or self.reorder_delay_ps < 0:
            raise ValueError("impairments: delays must be >= 0")
        if self.rate_bps is not None and self.rate_bps <= 0:
            raise ValueError("impairments.rate_bps must be > 0")
        if self.queue_factor is not None and not 0.0 < self.queue_factor <= 1.0:
            raise ValueError(f"impairments.queue_factor={self.queue_factor}: allowed 0 < f <= 1")
        self.down = [(int(a), None if b is None else int(b)) for a, b in self.down]

    @property
    def per_frame(self) -> bool:
        """True if some impairment acts on every frame (not only rate / up-down)."""
        return bool(self.loss or self.gilbert or self.corrupt or self.ber or self.duplicate
                    or self.jitter_ps or self.reorder or self.down)

    @classmethod
    def from_dict(cls, d: dict) -> Impairments:
        allowed = set(cls.__dataclass_fields__)
        bad = set(d) - allowed
        if bad:
            raise ValueError(
                f"impairments: unknown keys {sorted(bad)}; allowed: {sorted(allowed)}")
        kw = dict(d)
        if "down" in kw:
            kw["down"] = [tuple(x) for x in kw["down"]]
        return cls(**kw)


class ImpairmentState:
    """Per-direction random state: decides the fate of each frame."""

    __slots__ = ("cfg", "rng", "bad")

    def __init__(self, cfg: Impairments, seed: int) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed if cfg.seed is not None else seed)
        self.bad = False

    def lost(self) -> str | None:
        """Reason the next frame is lost (``"loss"``, ``"burst_loss"``) or None."""
        cfg, rng = self.cfg, self.rng
        ge = cfg.gilbert
        if ge is not None:
            if self.bad:
                if rng.random() < ge.p_bg:
                    self.bad = False
            elif rng.random() < ge.p_gb:
                self.bad = True
            if rng.random() < (ge.loss_bad if self.bad else ge.loss_good):
                return "burst_loss"
        if cfg.loss and rng.random() < cfg.loss:
            return "loss"
        return None

    def corrupt(self, data: bytes) -> bytes | None:
        """A copy of ``data`` with bits flipped, or None if this frame is not corrupted."""
        cfg, rng = self.cfg, self.rng
        p = cfg.corrupt
        if cfg.ber:
            p = 1.0 - (1.0 - cfg.ber) ** (8 * len(data))
        if not p or rng.random() >= p:
            return None
        buf = bytearray(data)
        for _ in range(cfg.corrupt_bits):
            bit = rng.randrange(8 * len(buf))
            buf[bit >> 3] ^= 0x80 >> (bit & 7)
        return bytes(buf)

    def extra_delay(self) -> int:
        cfg, rng = self.cfg, self.rng
        d = rng.randint(0, cfg.jitter_ps) if cfg.jitter_ps else 0
        if cfg.reorder and rng.random() < cfg.reorder:
            d += cfg.reorder_delay_ps
        return d

    def duplicated(self) -> bool:
        return bool(self.cfg.duplicate) and self.rng.random() < self.cfg.duplicate
