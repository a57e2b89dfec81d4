"""Reassembly bookkeeping at the target: which bytes of each message arrived.

A message is keyed by ``(source address, connection, initiator ID, job ID, message ID)``
(the connection is the target PDC it came on). Packets may arrive in any order and more than
once; :class:`Intervals` records covered byte ranges so a duplicate is recognised and never
re-applied. State is bounded three ways: at most ``max_messages`` messages in progress, a
message whose packets stop arriving for the reassembly timeout is abandoned
(:meth:`Reassembly.expired`), and every message of a connection is abandoned at once when
that connection (PDC) closes, since no packet of it can follow (:meth:`Reassembly.take_conn`).
A bounded history of finished keys makes late duplicates of a finished message be dropped
rather than start a new one; an abandoned message's key is remembered with the return code
its first late packet gets, so the initiator's operation ends with that code.
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
        # ranges never touch (touching ones are merged), so ``ends`` rises strictly: a
        # range at or after the last one (packets mostly arrive in order) needs no search
        if ends and start >= ends[-1]:
            if start == ends[-1]:
                ends[-1] = end
            else:
                starts.append(start)
                ends.append(end)
            self.covered += end - start
            return end - start
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
        ends = self._ends
        if not ends or start >= ends[-1]:
            return False  # at or beyond the end of the last range (the usual case)
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
    last: int = 0  # time of the latest packet (ps): the reassembly timeout counts from it

    def complete(self) -> bool:
        return self.packets > 0 and self.intervals.covered >= self.request_length


class Reassembly:
    """Messages in progress plus a bounded history of finished message keys."""

    # slots for what the SES core reads per packet
    __slots__ = ("active", "_history", "__dict__", "__weakref__")

    def __init__(self, max_messages: int, history: int) -> None:
        self.max_messages = max_messages
        self.history_size = history
        self.active: dict[MessageKey, MessageState] = {}
        self.by_conn: dict[int, set[MessageKey]] = {}
        # finished keys; the value is what a late packet of it gets: an int, the return
        # code of an abandoned message (its first late packet only), or a reply to replay
        # to every late packet (RUDI: its response cache may have forgotten the answer);
        # None: nothing (a duplicate)
        self._history: OrderedDict[MessageKey, Any] = OrderedDict()

    def get(self, key: MessageKey) -> MessageState | None:
        return self.active.get(key)

    def finished(self, key: MessageKey) -> bool:
        return key in self._history

    def full(self) -> bool:
        return len(self.active) >= self.max_messages

    def start(self, key: MessageKey | None, request_length: int, now: int = 0) -> MessageState:
        state = MessageState(key, request_length, last=now)
        if key is not None:
            self.active[key] = state
            conn = self.by_conn.get(key[1])
            if conn is None:
                self.by_conn[key[1]] = {key}
            else:
                conn.add(key)
        return state

    def finish(self, key: MessageKey | None, late_rc: Any = None) -> None:
        """Forget a message and remember its key (bounded FIFO history); ``late_rc``: an
        int (it was abandoned: its first late packet is answered with this return code) or
        a reply every late packet gets again."""
        if key is None:
            return
        if self.active.pop(key, None) is not None:
            conn = self.by_conn.get(key[1])
            if conn is not None:
                conn.discard(key)
                if not conn:
                    del self.by_conn[key[1]]
        self._history[key] = late_rc
        self._history.move_to_end(key)
        while len(self._history) > self.history_size:
            self._history.popitem(last=False)

    def late(self, key: MessageKey) -> Any:
        """What a late packet of a finished message gets: the return code owed to the first
        late packet of an abandoned message (once), a reply to replay, or None."""
        got = self._history.get(key)
        if isinstance(got, int):
            self._history[key] = None
        return got

    def expired(self, now: int, timeout: int) -> list[MessageState]:
        """Messages whose latest packet is ``timeout`` or more old."""
        return [st for st in self.active.values() if now - st.last >= timeout]

    def take_conn(self, conn: int) -> list[MessageState]:
        """Every message in progress on connection ``conn`` (its PDC closed)."""
        keys = self.by_conn.get(conn)
        if not keys:
            return []
        return [self.active[k] for k in list(keys) if k in self.active]

    def oldest(self) -> int | None:
        """The latest-packet time of the message silent longest, or None."""
        if not self.active:
            return None
        return min(st.last for st in self.active.values())
