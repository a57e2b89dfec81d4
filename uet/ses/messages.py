"""Plain records the SES exchanges with its driver (the FEP glue or the test harness)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True, slots=True)
class PacketRef:
    """``msg_ref`` of one request packet: which operation, which attempt, which packet."""

    op_id: int
    attempt: int
    index: int


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
