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

from typing import Any

from uet.wire.constants import SesFlag
from uet.wire.records import SesStandard

_SOM = int(SesFlag.SOM)
_EOM = int(SesFlag.EOM)
_HD = int(SesFlag.HD)


def segments(length: int, mtu: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of each packet of a ``length``-byte message (one for length 0)."""
    if length <= 0:
        return [(0, 0)]
    return [(off, min(mtu, length - off)) for off in range(0, length, mtu)]


def read_slice(message_offset: int, request_length: int, mtu: int) -> int:
    """Bytes a READ request packet at ``message_offset`` asks for."""
    return max(0, min(mtu, request_length - message_offset))


def segment(base: SesStandard, payload: bytes | bytearray | memoryview, mtu: int, *,
            length: int | None = None) -> list[tuple[SesStandard, Any]]:
    """Split a message into standard-header packets.

    ``base`` holds the message-wide fields (with HD/header_data if any, ``request_length``
    set); ``length`` (READ) segments a length without carrying payload.
    """
    carry = length is None
    total: int = len(payload) if length is None else length
    # one packet per MTU (a multi-megabyte message is thousands): plain int flags and a
    # positional constructor, not IntFlag arithmetic and dataclasses.replace per packet
    bf = int(base.flags)
    mid_flags = bf & ~(_SOM | _EOM | _HD)
    first_flags = mid_flags | _SOM | (bf & _HD)
    b = base
    fields = (b.opcode, b.version)
    common = (b.message_id, b.ri_generation, b.job_id, b.pid_on_fep, b.resource_index,
              b.buffer_offset, b.initiator, b.memory_key)
    rlen = b.request_length
    if total <= mtu:  # one packet: SOM and EOM
        chunk = payload[:total] if carry else b""
        hdr = SesStandard(*fields, first_flags | _EOM, *common, b.header_data, 0, 0, rlen)
        return [(hdr, chunk)]
    if type(payload) is bytes:
        # zero-copy slices of an immutable message (the encoder copies each into its frame
        # anyway); a mutable buffer is copied per packet, so later changes do not leak in
        payload = memoryview(payload)
    out = [(SesStandard(*fields, first_flags, *common, b.header_data, 0, 0, rlen),
            payload[:mtu] if carry else b"")]
    last_off = (total - 1) // mtu * mtu
    for off in range(mtu, last_off, mtu):
        chunk = payload[off:off + mtu] if carry else b""
        out.append((SesStandard(*fields, mid_flags, *common, 0, len(chunk), off, rlen), chunk))
    chunk = payload[last_off:total] if carry else b""
    out.append((SesStandard(*fields, mid_flags | _EOM, *common, 0, len(chunk), last_off, rlen),
                chunk))
    return out
