"""Plain records the SES exchanges with its driver (the FEP glue or the test harness)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

from uet.wire.constants import DeliveryMode, NackCode
from uet.wire.records import ExtHeader, SesHeader, SesResponseHeader


@dataclass(frozen=True, slots=True)
class TargetAddr:
    """Where an operation goes: the target FEP's fabric address and the resource there."""

    dst: str
    job_id: int
    pid_on_fep: int = 0
    resource_index: int = 0
    ri_generation: int = 0


@dataclass(slots=True, unsafe_hash=True)
class PacketRef:
    """``msg_ref`` of one request packet: which operation, which attempt, which packet.

    Hashable and compared by value as the frozen dataclass it was, but not frozen: a
    frozen dataclass sets each field through ``object.__setattr__`` and took twice as
    long to make (one per request packet). Treat it as immutable."""

    op_id: int
    attempt: int
    index: int


@final
@dataclass(slots=True)
class OutPacket:
    """One packet the SES wants sent: the fields of the PDS ``SendRequest``.

    ``ses`` is a request header, or a ``SesResponseData`` when the target returns read data
    in the return direction (a request packet target -> initiator, ref. 4.7).
    ``msg_ref`` is a :class:`PacketRef`, or None when no completion is wanted.
    """

    dst: str
    mode: DeliveryMode
    job_id: int
    tc: int
    ses: SesHeader
    ext: ExtHeader | None
    payload: bytes
    msg_ref: PacketRef | None
    eom: bool


@final
class OutMessage:
    """A multi-packet message the SES wants sent, its packets made as they are taken.

    What a driver that hands whole messages to the PDS takes (``SesEndpoint.poll_message``):
    the fields every packet shares (``dst``, ``mode``, ``job_id``, ``tc``, ``ext``), the
    packets not yet taken (``count``) and their payload bytes (``nbytes``), and
    :meth:`next_part` for the next packet's ``(ses, payload, msg_ref, eom)``. A message of
    489 packets is one object until its PDC's window opens, not 489 packets queued at once.
    ``SesEndpoint.poll_transmit`` takes the same packets one :class:`OutPacket` at a time.
    """

    __slots__ = ("dst", "mode", "job_id", "tc", "ext", "op_id", "attempt", "parts",
                 "taken", "count", "max_payload")

    def __init__(self, dst: str, mode: DeliveryMode, job_id: int, tc: int,
                 ext: ExtHeader | None, op_id: int, attempt: int, parts: Any) -> None:
        self.dst = dst
        self.mode = mode
        self.job_id = job_id
        self.tc = tc
        self.ext = ext
        self.op_id = op_id
        self.attempt = attempt
        #: the message's :class:`~uet.ses.segmentation.Segmenter`
        self.parts = parts
        self.taken = 0
        self.count: int = parts.count
        #: payload bytes of the largest packet
        self.max_payload: int = min(parts.mtu, parts.total) if parts.carry else 0

    @property
    def nbytes(self) -> int:
        """Payload bytes of the packets not yet taken."""
        return self.parts.payload_bytes(self.taken)

    def next_part(self) -> tuple[SesHeader, Any, PacketRef, bool]:
        """The next packet: ``(ses, payload, msg_ref, eom)``."""
        i = self.taken
        if i >= self.parts.count:
            raise IndexError("every packet of the message was taken")
        self.taken = i + 1
        self.count -= 1
        hdr, chunk = self.parts.part(i)
        return hdr, chunk, PacketRef(self.op_id, self.attempt, i), not self.count

    def next_packet(self) -> OutPacket:
        """The next packet as an :class:`OutPacket`."""
        hdr, chunk, ref, eom = self.next_part()
        return OutPacket(self.dst, self.mode, self.job_id, self.tc, hdr, self.ext, chunk, ref,
                         eom)


@dataclass(slots=True)
class TargetReply:
    """The target's answer to one delivered request packet.

    ``response`` None means "no semantic response": the PDS sends the default response
    (or nothing for UUD). ``data`` is the payload after an RSP_DATA / RSP_DATA_SMALL header.
    ``nack`` set means the SES could not take the packet (e.g. NO_SES_MSG_AVAIL when the
    reassembly table is full): the PDS should NACK it with that code so it is retransmitted.
    ``later`` set means ``response`` is the NO_RESPONSE placeholder (ref 4.5): the driver
    gives the PDS ``later`` (the guaranteed response) ``delay_ps`` afterwards.
    """

    response: SesResponseHeader | None = None
    data: bytes = b""
    nack: NackCode | None = None
    #: a NO_RESPONSE ``response`` (the early ACK) is replaced by this reply ``delay_ps``
    #: later (a DC request: its data must reach host memory first, docs/ses.md)
    later: TargetReply | None = None
    delay_ps: int = 0


@dataclass(frozen=True, slots=True)
class OpCompleted:
    """Event: an initiator operation finished (successfully or not)."""

    op: Any


@dataclass(frozen=True, slots=True)
class RecvCompleted:
    """Event: a posted receive finished."""

    recv: Any


SesEvent = OpCompleted | RecvCompleted
#: what ``SesEndpoint.poll_message`` returns: one packet, or a whole message
OutItem = OutPacket | OutMessage
