"""Deferrable send: restart tokens and the target's reserved receives.

Flow (docs/ses.md): the initiator sends DEFERRABLE_SEND/TSEND with restart token
``initiator_token << 32`` (target half 0). A target with a matching posted receive takes it
like a SEND. A target without one keeps a small "deferred" entry in its unexpected list (no
data), answers NO_MATCH, and drops the rest of that message. When a matching receive is
posted, the target reserves it under a fresh target token and sends DEFERRABLE_RTR to the
initiator with ``initiator_token << 32 | target_token`` in the memory-key field. The
initiator then restarts the whole send (a new message ID) carrying both tokens, and the
target places it in the reserved receive.
"""

from __future__ import annotations

from dataclasses import dataclass

from uet.ses.matching import Receive

TOKEN_MASK = 0xFFFFFFFF


def join_token(initiator_token: int, target_token: int) -> int:
    """The 64-bit restart token: initiator half (upper 32) and target half (lower 32)."""
    return ((initiator_token & TOKEN_MASK) << 32) | (target_token & TOKEN_MASK)


def split_token(token: int) -> tuple[int, int]:
    return (token >> 32) & TOKEN_MASK, token & TOKEN_MASK


class TokenAllocator:
    """Non-zero 32-bit tokens, never handing out one still in use."""

    def __init__(self) -> None:
        self._next = 1
        self.in_use: set[int] = set()

    def allocate(self) -> int:
        for _ in range(1 << 20):
            tok = self._next
            self._next = (self._next % TOKEN_MASK) + 1
            if tok not in self.in_use:
                self.in_use.add(tok)
                return tok
        raise RuntimeError("no free restart token")

    def release(self, token: int) -> None:
        self.in_use.discard(token)


@dataclass(eq=False, slots=True)
class Reserved:
    """A receive the target reserved for a deferred send it asked to restart."""

    recv: Receive
    src: str
    job_id: int
    initiator_token: int
    since: int = 0  # when it was reserved (ps): ses.unexpected_timeout_ms counts from it
