"""Posted receives, the unexpected list and tag matching.

Each resource index has one :class:`MatchQueue`. An arriving send is matched against the
posted receives in the order they were posted (first match wins); a receive being posted is
matched against the unexpected entries in arrival order. Untagged sends match untagged
receives only; tagged sends match tagged receives whose tag agrees on every bit not set in
the receive's ``ignore`` mask (exact matching: ``ignore == 0``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from uet.wire.constants import ReturnCode, RspList

MASK64 = (1 << 64) - 1


def tag_matches(match_bits: int, tag: int, ignore: int) -> bool:
    """Wildcard tag match: equal on every bit not ignored."""
    return ((match_bits ^ tag) & ~ignore & MASK64) == 0


@dataclass(eq=False, slots=True)
class Receive:
    """A posted receive and, once done, its completion.

    Completion fields: ``return_code`` (OK, or e.g. CANCELLED), ``length`` (bytes placed),
    ``request_length`` (bytes the sender sent), ``truncated``, ``header_data``,
    ``match_bits``, ``src``, ``initiator``, ``opcode`` and ``list`` (EXPECTED if the receive
    was posted first, OVERFLOW if the message waited in the unexpected list).
    """

    job_id: int
    pid_on_fep: int
    resource_index: int
    buffer: bytearray
    tagged: bool = False
    tag: int = 0
    ignore: int = 0
    recv_id: int = 0
    done: bool = False
    return_code: int | None = None
    length: int = 0
    request_length: int = 0
    truncated: bool = False
    header_data: int | None = None
    match_bits: int | None = None
    src: str | None = None
    initiator: int | None = None
    opcode: int | None = None
    list: int = RspList.EXPECTED

    def matches(self, tagged: bool, match_bits: int) -> bool:
        if tagged != self.tagged:
            return False
        return not tagged or tag_matches(match_bits, self.tag, self.ignore)

    def place(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at message offset ``offset``, truncated to the buffer; bytes copied."""
        end = min(len(self.buffer), offset + len(data))
        if end <= offset:
            return 0
        self.buffer[offset:end] = data[:end - offset]
        return end - offset

    def bind(self, src: str, initiator: int, opcode: int, request_length: int,
             match_bits: int | None) -> None:
        """Record who the matched message is from (before its data arrives)."""
        self.src = src
        self.initiator = initiator
        self.opcode = opcode
        self.request_length = request_length
        self.match_bits = match_bits
        self.length = min(request_length, len(self.buffer))
        self.truncated = request_length > len(self.buffer)

    def finish(self, return_code: int = ReturnCode.OK) -> None:
        self.done = True
        self.return_code = return_code


@dataclass(eq=False, slots=True)
class Unexpected:
    """A message that arrived before any matching receive.

    ``kind``: ``'eager'`` (data buffered in ``data``), ``'rendezvous'`` (eager part buffered,
    the rest to be read from ``ext``), ``'deferred'`` (no data: the sender waits for a
    ready-to-restart, ``init_token`` identifies its send).
    """

    kind: str
    src: str
    job_id: int
    initiator: int
    opcode: int
    tagged: bool
    match_bits: int
    request_length: int
    data: bytearray = field(default_factory=bytearray)
    header_data: int | None = None
    complete: bool = False
    state: Any = None  # the reassembly MessageState while packets still arrive
    ext: Any = None  # RendezvousExt
    init_token: int = 0
    charged: int = 0  # bytes counted against the unexpected-bytes limit
    mode: int = 2  # delivery mode the message came in (RUD); reused for the pull / RTR
    queue: Any = None  # the MatchQueue holding this entry
    key: Any = None  # the message key (src, initiator, job, message ID), if any
    arrived: int = 0  # time it was listed (ps): ses.unexpected_timeout_ms counts from it

    def place(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        end = min(len(self.data), offset + len(data))
        if end <= offset:
            return 0
        self.data[offset:end] = data[:end - offset]
        return end - offset


@dataclass(eq=False, slots=True)
class MatchQueue:
    """Posted receives and unexpected messages of one resource index."""

    posted: list[Receive] = field(default_factory=list)
    unexpected: list[Unexpected] = field(default_factory=list)

    def find_posted(self, tagged: bool, match_bits: int) -> Receive | None:
        """The first posted receive the message matches (left in place)."""
        for recv in self.posted:
            if recv.matches(tagged, match_bits):
                return recv
        return None

    def take_posted(self, tagged: bool, match_bits: int) -> Receive | None:
        """Remove and return the first posted receive the message matches."""
        recv = self.find_posted(tagged, match_bits)
        if recv is not None:
            self.posted.remove(recv)
        return recv

    def take_unexpected(self, recv: Receive) -> Unexpected | None:
        """Remove and return the oldest unexpected message the receive matches."""
        for i, msg in enumerate(self.unexpected):
            if recv.matches(msg.tagged, msg.match_bits):
                del self.unexpected[i]
                return msg
        return None
