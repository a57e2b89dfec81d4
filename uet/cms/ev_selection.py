"""Entropy value (EV) selection per PDC: fixed, oblivious, bitmap, REPS and mixed (sans-IO).

The EV is the UDP source port (or the native-IP entropy header) that switches hash for
ECMP; choosing it per packet sprays one PDC over many paths. The algorithms follow the
UEC's htsim models (``uec_mp.cpp``: ``UecMpOblivious``, ``UecMpBitmap``, ``UecMpReps``,
``UecMpMixed``; ``buffer_reps.cpp``: ``CircularBufferREPS``). Every selector takes its
randomness from the ``random.Random`` the caller hands in, so runs are reproducible.

Feedback is attributed to the EV echoed in the ACK / NACK (``AckFeedback.ev``); the sender
maps each ACK, NACK and timeout to one :class:`PathFeedback` and calls ``feedback``.
"""

from __future__ import annotations

import random
from collections import deque
from enum import IntEnum

EV_MASK = 0xFFFF


class PathFeedback(IntEnum):
    """What one piece of feedback says about the path of an EV (htsim ``PathFeedback``)."""

    GOOD = 0  # ACK without ECN echo, or a last-hop trim without ECN
    ECN = 1  # ACK (or last-hop trim NACK) with ECN echo
    NACK = 2  # trimmed / lost in the fabric
    TIMEOUT = 3  # retransmission timer expired


class EvSelector:
    """Base class: ``next_ev(now)`` for each data packet, ``feedback(now, ev, kind)``.

    The selectors keep their state in ``__slots__``: the CMS core (``uet/native/cms_core.c``)
    reads and writes the bitmap selector's at fixed offsets for every packet."""

    __slots__ = ()
    name = "base"

    def next_ev(self, now: int) -> int:
        raise NotImplementedError

    def feedback(self, now: int, ev: int, kind: PathFeedback) -> None:
        """Default: oblivious to feedback."""


class FixedEv(EvSelector):
    """One EV for the whole PDC (per-flow ECMP); ROD PDCs always use this."""

    __slots__ = ("ev",)
    name = "fixed"

    def __init__(self, rng: random.Random, ev: int | None = None) -> None:
        self.ev = (rng.getrandbits(16) if ev is None else ev) & EV_MASK

    def next_ev(self, now: int) -> int:
        return self.ev


def _check_power_of_two(n: int) -> int:
    if n < 1 or n > 0x10000 or n & (n - 1):
        raise ValueError(f"ev_count must be a power of two in [1, 65536], got {n!r}")
    return n


class ObliviousEv(EvSelector):
    """Cycle through ``n`` EV indices XOR a random mask re-drawn every round.

    The low log2(n) bits cycle so every index is used once per round (an even spread);
    the upper bits are random per PDC (htsim ``_path_random``) so two PDCs between the
    same hosts still hash differently.
    """

    __slots__ = ("rng", "n", "mask", "upper", "xor", "index")
    name = "oblivious"

    def __init__(self, rng: random.Random, n: int) -> None:
        self.rng = rng
        self.n = _check_power_of_two(n)
        self.mask = n - 1
        self.upper = rng.getrandbits(16) & ~self.mask & EV_MASK
        self.xor = rng.randrange(n)
        self.index = 0

    def _advance(self) -> None:
        self.index += 1
        if self.index == self.n:
            self.index = 0
            self.xor = self.rng.randrange(self.n)

    def _current(self) -> int:
        return (self.index ^ self.xor) & self.mask

    def next_ev(self, now: int) -> int:
        low = self._current()
        self._advance()
        return self.upper | low


class BitmapEv(ObliviousEv):
    """Oblivious spraying that skips penalised EVs.

    Each EV index has a penalty counter: +1 on ECN echo, +4 on NACK, +15 (the maximum) on
    timeout. When the cycle reaches penalised indices it skips them; as in htsim only the
    first penalised index met during one selection is decremented, so a penalty of p
    keeps an EV out for about p rounds. If all indices are penalised, the one reached
    after a full lap is used anyway.
    """

    __slots__ = ("penalty",)
    name = "bitmap"
    MAX_PENALTY = 15
    PENALTY = {
        PathFeedback.GOOD: 0,
        PathFeedback.ECN: 1,
        PathFeedback.NACK: 4,
        PathFeedback.TIMEOUT: 15,
    }

    def __init__(self, rng: random.Random, n: int) -> None:
        super().__init__(rng, n)
        self.penalty = [0] * n

    def feedback(self, now: int, ev: int, kind: PathFeedback) -> None:
        add = self.PENALTY[kind]
        if add:
            i = ev & self.mask
            self.penalty[i] = min(self.penalty[i] + add, self.MAX_PENALTY)

    def next_ev(self, now: int) -> int:
        # _current() and _advance(), inline: this runs for every packet sent
        mask = self.mask
        n = self.n
        penalty = self.penalty
        low = (self.index ^ self.xor) & mask
        decremented = False
        laps = 0
        while penalty[low] > 0:
            if not decremented:
                penalty[low] -= 1
                decremented = True
            laps += 1
            if laps > n:
                break
            self.index += 1
            if self.index == n:
                self.index = 0
                self.xor = self.rng.randrange(n)
            low = (self.index ^ self.xor) & mask
        self.index += 1
        if self.index == n:
            self.index = 0
            self.xor = self.rng.randrange(n)
        return self.upper | low


class RepsBuffer:
    """REPS circular buffer of recently good EVs (htsim ``CircularBufferREPS``).

    ``add`` writes at ``head`` (overwriting the oldest entry); ``pop_fresh`` takes the
    earliest still-unused ("fresh") entry; ``pop_frozen`` walks the stored entries round
    robin whether used or not (frozen mode reuses known-good EVs).
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"reps_buffer_size must be >= 1, got {size!r}")
        self.size = size
        self.values = [0] * size
        self.valid = [False] * size
        self.reset()

    def reset(self) -> None:
        self.values = [0] * self.size
        self.valid = [False] * self.size
        self.head = 0
        self.count = 0
        self.fresh = 0
        self.frozen_head = 0

    def add(self, ev: int) -> None:
        if not self.valid[self.head]:
            self.fresh += 1
        self.values[self.head] = ev
        self.valid[self.head] = True
        self.head = (self.head + 1) % self.size
        self.fresh = min(self.fresh, self.size)
        self.count = min(self.count + 1, self.size)

    def pop_fresh(self) -> int:
        assert self.fresh > 0
        i = (self.head - self.fresh) % self.size
        self.valid[i] = False
        self.fresh -= 1
        return self.values[i]

    def pop_frozen(self) -> int:
        assert self.count > 0
        i = self.frozen_head
        if self.valid[i]:
            self.fresh -= 1
        self.valid[i] = False
        self.frozen_head = (self.frozen_head + 1) % self.count
        return self.values[i]


class RepsEv(EvSelector):
    """Recycled entropy (REPS): reuse EVs that came back in good (un-marked) ACKs.

    Normal mode: the earliest fresh EV of the buffer, else a random EV (exploration).
    On a timeout (only with trimming: without it a timeout is the normal loss signal)
    enter *frozen* mode for ``freeze_ps``: keep cycling through the buffered known-good
    EVs. Leaving it (checked on the next feedback) resets the buffer and explores
    ``explore`` random EVs first. ECN-marked or NACKed EVs are simply not recycled.
    """

    __slots__ = ("rng", "n", "mask", "upper", "trimming", "buffer", "freeze_ps", "explore",
                 "frozen", "frozen_until", "explore_left")
    name = "reps"

    def __init__(
        self,
        rng: random.Random,
        n: int,
        *,
        trimming: bool = True,
        buffer_size: int = 8,
        freeze_ps: int = 10_000_000_000,
        explore: int = 16,
    ) -> None:
        self.rng = rng
        self.n = _check_power_of_two(n)
        self.mask = n - 1
        self.upper = rng.getrandbits(16) & ~self.mask & EV_MASK
        self.trimming = trimming
        self.buffer = RepsBuffer(buffer_size)
        self.freeze_ps = freeze_ps
        self.explore = explore
        self.frozen = False
        self.frozen_until = 0
        self.explore_left = 0

    def _random(self) -> int:
        return self.upper | self.rng.randrange(self.n)

    def feedback(self, now: int, ev: int, kind: PathFeedback) -> None:
        if (
            kind == PathFeedback.TIMEOUT
            and self.trimming
            and not self.frozen
            and self.explore_left == 0
        ):
            self.frozen = True
            self.frozen_until = now + self.freeze_ps
        if self.frozen and now > self.frozen_until:
            self.frozen = False
            self.buffer.reset()
            self.explore_left = self.explore
        if kind == PathFeedback.GOOD:
            self.buffer.add(ev & EV_MASK)

    def next_ev(self, now: int) -> int:
        if self.explore_left > 0:
            self.explore_left -= 1
            return self._random()
        buf = self.buffer
        if self.frozen:
            return buf.pop_frozen() if buf.count else self._random()
        if buf.count and buf.fresh:
            return buf.pop_fresh()
        return self._random()


class MixedEv(BitmapEv):
    """htsim's default load balancer (``UecMpMixed``): recycle first, else bitmap.

    Every EV echoed in an un-marked ACK goes to the back of a FIFO (htsim's legacy REPS
    list); the next packet takes the front of that FIFO if there is one, otherwise the
    bitmap selector chooses (which also takes every penalty: +1 ECN, +4 NACK, +15
    timeout). With ACKs coalesced every few packets, most packets still come from the
    bitmap. The FIFO holds at most one entry per ACKed packet still unsent-on, so it is
    bounded by the window; ``max(n, 64)`` entries cap it anyway (oldest dropped).
    """

    __slots__ = ("recycled",)
    name = "mixed"

    def __init__(self, rng: random.Random, n: int) -> None:
        super().__init__(rng, n)
        self.recycled: deque[int] = deque(maxlen=max(n, 64))

    def feedback(self, now: int, ev: int, kind: PathFeedback) -> None:
        if kind:  # BitmapEv.feedback: GOOD (0) adds no penalty
            BitmapEv.feedback(self, now, ev, kind)
        else:
            self.recycled.append(ev & EV_MASK)

    def next_ev(self, now: int) -> int:
        if self.recycled:
            return self.recycled.popleft()
        return BitmapEv.next_ev(self, now)


SELECTORS = ("fixed", "oblivious", "bitmap", "reps", "mixed")


def make_ev_selector(
    name: str,
    rng: random.Random,
    n: int = 128,
    *,
    trimming: bool = True,
    reps_buffer_size: int = 8,
    reps_freeze_ps: int = 10_000_000_000,
    reps_explore: int = 16,
) -> EvSelector:
    """Build the selector called ``name`` (one of :data:`SELECTORS`)."""
    if name == "fixed":
        return FixedEv(rng)
    if name == "oblivious":
        return ObliviousEv(rng, n)
    if name == "bitmap":
        return BitmapEv(rng, n)
    if name == "mixed":
        return MixedEv(rng, n)
    if name == "reps":
        return RepsEv(
            rng,
            n,
            trimming=trimming,
            buffer_size=reps_buffer_size,
            freeze_ps=reps_freeze_ps,
            explore=reps_explore,
        )
    raise ValueError(f"ev_selector must be one of {', '.join(SELECTORS)}; got {name!r}")
