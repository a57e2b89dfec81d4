"""Anti-replay at the receiver: a sliding window over a sender's 64-bit counter.

The counter of a TSS packet is its epoch (16 bits) above its TSC (48 bits): a sender never
repeats a TSC under one key and a restarted sender comes back with a later epoch, so the
64-bit value only grows per (sender, key generation). The window remembers the highest
counter authenticated so far (``top``) and which of the ``size`` counters below it were
seen, in one Python int used as a bitmap (RFC 4303's / RFC 6479's scheme): a counter above
``top`` is new, one inside the window is new once, anything older is stale.

:meth:`check` runs before decryption (a replayed frame costs no AES work) and
:meth:`mark` only after the tag verified, so forged frames never move the window.
"""

from __future__ import annotations

from enum import Enum


class Replay(Enum):
    """What :meth:`ReplayWindow.check` says of a counter."""

    NEW = "new"
    DUPLICATE = "duplicate"  #: inside the window and seen before
    STALE = "stale"  #: below the window: too old to tell, refused


class ReplayWindow:
    """The replay state of one sender under one key generation."""

    __slots__ = ("size", "top", "bits", "mask")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("replay window size must be >= 1")
        self.size = size
        self.top = -1  # nothing seen yet
        self.bits = 0  # bit i: counter top - i was seen
        self.mask = (1 << size) - 1

    def check(self, counter: int) -> Replay:
        """Is ``counter`` new? Changes nothing."""
        top = self.top
        if counter > top:
            return Replay.NEW
        d = top - counter
        if d >= self.size:
            return Replay.STALE
        return Replay.DUPLICATE if self.bits >> d & 1 else Replay.NEW

    def mark(self, counter: int) -> None:
        """Record an authenticated ``counter`` (after :meth:`check` said NEW)."""
        top = self.top
        if counter > top:
            shift = counter - top
            self.bits = ((self.bits << shift) | 1) & self.mask if shift < self.size else 1
            self.top = counter
        else:
            self.bits |= 1 << (top - counter)


__all__ = ["Replay", "ReplayWindow"]
