"""Reassembly bookkeeping at the target: which bytes of each message arrived.

A message is keyed by ``(source address, initiator ID, job ID, message ID)``. Packets may
arrive in any order and more than once; :class:`Intervals` records covered byte ranges so a
duplicate is recognised and never re-applied. State is bounded: at most
``max_messages`` messages in progress, and a bounded history of finished keys so that late
duplicates of a finished message are dropped rather than starting a new one.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

#: (src, connection (target PDC ID, 0 without a PDC), initiator, job_id, message_id)
MessageKey = tuple[str, int, int, int, int]


class Intervals:
    """Disjoint, sorted byte ranges ``[start, end)``; ``covered`` counts bytes in them."""

    __slots__ = ("_starts", "_ends", "covered")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self.covered = 0

    def add(self, start: int, end: int) -> int:
        """Add ``[start, end)``; return how many bytes were not covered before."""
        if end <= start:
            return 0
        starts, ends = self._starts, self._ends
        i = bisect.bisect_left(ends, start)
        j = bisect.bisect_right(starts, end)
        if j == i + 1:  # touches one range (the usual case: the packet after the last one)
            s0, e0 = starts[i], ends[i]
            if s0 < start:
                start = s0
            if e0 > end:
                end = e0
            starts[i] = start
            ends[i] = end
            new = (end - start) - (e0 - s0)
        else:
            old = sum(ends[k] - starts[k] for k in range(i, j))
            if i < j:
                start = min(start, starts[i])
                end = max(end, ends[j - 1])
            starts[i:j] = [start]
            ends[i:j] = [end]
            new = (end - start) - old
        self.covered += new
        return new

    def contains(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` is entirely covered (empty ranges never are)."""
        if end <= start:
            return False
        i = bisect.bisect_right(self._starts, start) - 1
        return i >= 0 and self._ends[i] >= end

    def __len__(self) -> int:
        return len(self._starts)


@dataclass(eq=False, slots=True)
class MessageState:
    """One message being received."""

    key: MessageKey | None
    request_length: int
    sink: Any = None  # a Receive, an Unexpected entry, or None (discard)
    intervals: Intervals = field(default_factory=Intervals)
    packets: int = 0

    def complete(self) -> bool:
        return self.packets > 0 and self.intervals.covered >= self.request_length


class Reassembly:
    """Messages in progress plus a bounded history of finished message keys."""

    def __init__(self, max_messages: int, history: int) -> None:
        self.max_messages = max_messages
        self.history_size = history
        self.active: dict[MessageKey, MessageState] = {}
        self._history: OrderedDict[MessageKey, None] = OrderedDict()

    def get(self, key: MessageKey) -> MessageState | None:
        return self.active.get(key)

    def finished(self, key: MessageKey) -> bool:
        return key in self._history

    def full(self) -> bool:
        return len(self.active) >= self.max_messages

    def start(self, key: MessageKey | None, request_length: int) -> MessageState:
        state = MessageState(key, request_length)
        if key is not None:
            self.active[key] = state
        return state

    def finish(self, key: MessageKey | None) -> None:
        """Forget a message and remember its key (bounded FIFO history)."""
        if key is None:
            return
        self.active.pop(key, None)
        self._history[key] = None
        self._history.move_to_end(key)
        while len(self._history) > self.history_size:
            self._history.popitem(last=False)
