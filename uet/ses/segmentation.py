"""Segmentation of a message into packets at the MTU.

A message of ``n`` bytes becomes ``max(1, ceil(n / mtu))`` packets. Every packet carries the
whole message's ``request_length``; the first has SOM (and the header data when HD is set),
the last EOM; the others carry ``message_offset`` and ``payload_length`` in bytes 32-39 of the
standard header (ref. 4.2, 4.7). ``buffer_offset`` is the same on every packet: the data of a
packet goes to ``buffer_offset + message_offset``.

A READ is segmented the same way with no payload: the packet at message offset ``o`` asks
for bytes ``[o, o + min(mtu, request_length - o))``, so ``ses.mtu_payload`` is fabric-wide.
"""

from __future__ import annotations

from dataclasses import replace

from uet.wire.constants import SesFlag
from uet.wire.records import SesStandard


def segments(length: int, mtu: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of each packet of a ``length``-byte message (one for length 0)."""
    if length <= 0:
        return [(0, 0)]
    return [(off, min(mtu, length - off)) for off in range(0, length, mtu)]


def read_slice(message_offset: int, request_length: int, mtu: int) -> int:
    """Bytes a READ request packet at ``message_offset`` asks for."""
    return max(0, min(mtu, request_length - message_offset))


def segment(base: SesStandard, payload: bytes, mtu: int, *,
            length: int | None = None) -> list[tuple[SesStandard, bytes]]:
    """Split a message into standard-header packets.

    ``base`` holds the message-wide fields (with HD/header_data if any, ``request_length``
    set); ``length`` (READ) segments a length without carrying payload.
    """
    carry = length is None
    total = len(payload) if carry else length
    parts = segments(total, mtu)
    out = []
    last = len(parts) - 1
    for i, (off, size) in enumerate(parts):
        flags = base.flags & ~(SesFlag.SOM | SesFlag.EOM | SesFlag.HD)
        if i == 0:
            flags |= SesFlag.SOM | (base.flags & SesFlag.HD)
        if i == last:
            flags |= SesFlag.EOM
        chunk = payload[off:off + size] if carry else b""
        if i == 0:
            hdr = replace(base, flags=flags, payload_length=0, message_offset=0)
        else:
            hdr = replace(base, flags=flags, header_data=0, payload_length=len(chunk),
                          message_offset=off)
        out.append((hdr, chunk))
    return out
