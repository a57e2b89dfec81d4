"""What goes into the PDS (SendRequest) and what comes out (events for the SES and reports)."""

from __future__ import annotations

from dataclasses import dataclass

from uet.pds.states import PdcState
from uet.wire.constants import DeliveryMode
from uet.wire.records import ExtHeader, SesHeader, SesResponseHeader


@dataclass(slots=True)
class SendRequest:
    """One SES request packet to deliver.

    ``ses`` is a request header (small / medium / standard), or a response-with-data header
    when read data travels target->initiator as requests (ref. 4.7). ``msg_ref`` is any
    hashable the SES uses to recognise the message in events. ``eom`` asks for an ACK (AR).
    """

    dst_ip: str
    mode: DeliveryMode
    job_id: int
    tc: int
    ses: SesHeader
    ext: ExtHeader | None = None
    payload: bytes = b""
    msg_ref: object = None
    eom: bool = True
    #: the secure domain (TSS SDI) the packet travels in; None: cleartext
    sdi: int | None = None


class PdsEvent:
    """Base class of everything ``PdsEndpoint.next_event`` returns."""

    __slots__ = ()


@dataclass(slots=True)
class RequestDelivered(PdsEvent):
    """A request reached the SES. Answer with ``PdsEndpoint.respond(now, token, ...)``.

    ``psn`` is the RUDI ``pkt_id`` for RUDI and 0 for UUD; ``pdc_id`` is 0 without a PDC;
    ``token`` is 0 when no response is possible (UUD).
    """

    token: int
    src_ip: str
    pdc_id: int
    mode: DeliveryMode
    psn: int
    ses: SesHeader | None
    ext: ExtHeader | None
    payload: bytes
    ecn_ce: bool = False
    #: the secure domain (TSS SDI) the request came in; None: cleartext
    sdi: int | None = None


@dataclass(slots=True)
class ResponseReceived(PdsEvent):
    """An SES response (in an ACK or a RUDI_RESP) for a packet of ``msg_ref``."""

    msg_ref: object
    ses: SesResponseHeader | SesHeader  # a response header (the codec's type is wider)
    payload: bytes
    psn: int = 0


@dataclass(slots=True)
class PacketAcked(PdsEvent):
    """A request packet of ``msg_ref`` is acknowledged (delivered exactly once)."""

    msg_ref: object
    psn: int


@dataclass(slots=True)
class MessageFailed(PdsEvent):
    """Packets of ``msg_ref`` will never be acknowledged (PDC closed in error, retries)."""

    msg_ref: object
    reason: str


@dataclass(slots=True)
class PdcOpened(PdsEvent):
    pdc_id: int
    role: str  # 'initiator' | 'target'
    peer_ip: str
    mode: DeliveryMode


@dataclass(slots=True)
class PdcClosed(PdsEvent):
    pdc_id: int
    error: bool
    role: str = "initiator"
    reason: str = ""


__all__ = [
    "MessageFailed",
    "PacketAcked",
    "PdcClosed",
    "PdcOpened",
    "PdcState",
    "PdsEvent",
    "RequestDelivered",
    "ResponseReceived",
    "SendRequest",
    "SesResponseHeader",
]
