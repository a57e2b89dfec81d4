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


#: all-zero payloads by size, shared: bulk transfers that carry no data of their own (the
#: fabric end point's ``send_message``) send one of these. bytes are immutable, so every
#: message of one size can share one; a fresh ``bytes(n)`` is zero pages the kernel maps in
#: as each packet first reads its 4 KiB (a page fault per packet sent, several
#: microseconds in a VM). A :class:`Segmenter` knows them: each full packet of one carries
#: the shared ``zeros(mtu)`` instead of a slice of its own.
_ZEROS: dict[int, bytes] = {}
_ZEROS_KEPT = 8  # sizes kept (oldest dropped first)
_ZEROS_MAX_BYTES = 1 << 26  # larger payloads are made per message


def zeros(n: int) -> bytes:
    """``n`` zero bytes, shared with every other caller of the same size while kept."""
    z = _ZEROS.get(n)
    if z is None:
        z = bytes(n)
        if n <= _ZEROS_MAX_BYTES:
            if len(_ZEROS) >= _ZEROS_KEPT:
                del _ZEROS[next(iter(_ZEROS))]
            _ZEROS[n] = z
    return z


def segments(length: int, mtu: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of each packet of a ``length``-byte message (one for length 0)."""
    if length <= 0:
        return [(0, 0)]
    return [(off, min(mtu, length - off)) for off in range(0, length, mtu)]


def read_slice(message_offset: int, request_length: int, mtu: int) -> int:
    """Bytes a READ request packet at ``message_offset`` asks for."""
    return max(0, min(mtu, request_length - message_offset))


class Segmenter:
    """The packets of one message, made one at a time (:func:`segment` makes them all).

    Holding a multi-megabyte message as its hundreds of packets costs four objects per
    packet from the moment it is queued; a PDC sends them only as its window opens, so the
    PDS takes them from here as it sends (``part(i)`` is packet ``i``, identical to
    ``segment(...)[i]``). ``count`` packets in all; ``payload_bytes(i)`` is the payload
    from packet ``i`` on (0 for a READ).
    """

    __slots__ = ("carry", "total", "mtu", "payload", "count", "last_off", "fields", "common",
                 "header_data", "first_flags", "mid_flags", "rlen", "zero_chunk")

    def __init__(self, base: SesStandard, payload: bytes | bytearray | memoryview, mtu: int,
                 *, length: int | None = None) -> None:
        carry = self.carry = length is None
        total = self.total = len(payload) if length is None else length
        self.mtu = mtu
        # one packet per MTU: plain int flags and a positional constructor, not IntFlag
        # arithmetic and dataclasses.replace per packet
        bf = int(base.flags)
        self.mid_flags = bf & ~(_SOM | _EOM | _HD)
        self.first_flags = self.mid_flags | _SOM | (bf & _HD)
        b = base
        self.fields = (b.opcode, b.version)
        self.common = (b.message_id, b.ri_generation, b.job_id, b.pid_on_fep,
                       b.resource_index, b.buffer_offset, b.initiator, b.memory_key)
        self.header_data = b.header_data
        self.rlen = b.request_length
        if carry and type(payload) is not bytes:
            # a mutable buffer is copied once, now, so that changes made after the operation
            # was posted do not leak into packets made later
            payload = bytes(payload)
        #: a payload from :func:`zeros`: each full packet carries the shared ``zeros(mtu)``
        #: (the same bytes as its slice, without a slice object per packet in flight)
        self.zero_chunk = (zeros(mtu) if carry and total > mtu and payload is _ZEROS.get(total)
                           else None)
        if total <= mtu:
            self.count = 1
            self.last_off = 0
        else:
            self.count = (total + mtu - 1) // mtu
            self.last_off = (total - 1) // mtu * mtu
            if carry:
                # zero-copy slices (the encoder copies each into its frame anyway)
                payload = memoryview(payload)
        self.payload = payload

    def part(self, i: int) -> tuple[SesStandard, Any]:
        """Packet ``i``: its standard header and payload chunk."""
        carry = self.carry
        total = self.total
        if self.count == 1:  # one packet: SOM and EOM
            return (SesStandard(*self.fields, self.first_flags | _EOM, *self.common,
                                self.header_data, 0, 0, self.rlen),
                    self.payload[:total] if carry else b"")
        mtu = self.mtu
        off = i * mtu
        last = off == self.last_off
        hi = total if last else off + mtu
        zc = self.zero_chunk
        chunk: bytes | bytearray | memoryview
        if not carry:
            chunk = b""
        elif zc is not None and hi - off == mtu:  # an all-zero payload's full packet
            chunk = zc
        else:
            chunk = self.payload[off:hi]
        if i == 0:
            return (SesStandard(*self.fields, self.first_flags, *self.common,
                                self.header_data, 0, 0, self.rlen), chunk)
        flags = self.mid_flags | _EOM if last else self.mid_flags
        return (SesStandard(*self.fields, flags, *self.common, 0, len(chunk), off, self.rlen),
                chunk)

    def payload_bytes(self, i: int) -> int:
        """Payload bytes of packets ``i`` to the last."""
        if not self.carry:
            return 0
        return max(0, self.total - i * self.mtu)


def segment(base: SesStandard, payload: bytes | bytearray | memoryview, mtu: int, *,
            length: int | None = None) -> list[tuple[SesStandard, Any]]:
    """Split a message into standard-header packets.

    ``base`` holds the message-wide fields (with HD/header_data if any, ``request_length``
    set); ``length`` (READ) segments a length without carrying payload.
    """
    seg = Segmenter(base, payload, mtu, length=length)
    part = seg.part
    return [part(i) for i in range(seg.count)]


def _configure_sender_core() -> None:
    """Hand the PDS's C sender core (``uet.native._sender_core``) this layer's message
    classes, so that it makes a message's next packet as :meth:`Segmenter.part` does
    (``SendMessage.head`` over ``OutMessage.next_part``): the PDS below names no SES class.
    Without the core (``UET_PURE_PYTHON=1``, not built) the Python makes every packet."""
    from uet.native._common import field_defaults, load_core
    from uet.ses.messages import OutMessage, PacketRef

    core = load_core("_sender_core")
    if core is None:
        return
    for cls in (SesStandard, PacketRef):
        field_defaults(cls)  # no __post_init__: the core fills their slots
    core.configure_segments(OutMessage, Segmenter, SesStandard, PacketRef,
                            {"next_part": OutMessage.next_part, "ses_eom": int(SesFlag.EOM)})


_configure_sender_core()
