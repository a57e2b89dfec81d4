"""What goes into the PDS (SendRequest, SendMessage) and what comes out (events for the SES
and reports)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, final

from uet.pds.states import PdcState
from uet.wire.constants import DeliveryMode
from uet.wire.records import ExtHeader, SesHeader, SesResponseHeader


@final
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


@final
class SendMessage:
    """Several request packets of one message for one PDC, made one at a time as it sends.

    ``submit`` takes it like a :class:`SendRequest`: the PDC queues it whole, counts its
    payload (``nbytes``) in its backlog at once, and asks ``next_part()`` for the next
    packet's ``(ses, payload, msg_ref, eom)`` only when that packet may go, so a message of
    hundreds of packets costs one object, not hundreds, until the window opens. ``count``
    is the number of packets not yet taken (at least one when submitted) and
    ``max_payload`` the payload of the largest. The SES's
    :class:`~uet.ses.messages.OutMessage` has this shape; the FEP hands it over as one.
    """

    __slots__ = ("dst_ip", "mode", "job_id", "tc", "ext", "count", "nbytes", "max_payload",
                 "_next", "_head", "sdi")

    def __init__(self, dst_ip: str, mode: DeliveryMode, job_id: int, tc: int,
                 ext: ExtHeader | None, count: int, nbytes: int, max_payload: int,
                 next_part: Callable[[], tuple[SesHeader, Any, object, bool]],
                 sdi: int | None = None) -> None:
        self.dst_ip = dst_ip
        self.mode = mode
        self.job_id = job_id
        self.tc = tc
        self.ext = ext
        self.count = count
        self.nbytes = nbytes
        self.max_payload = max_payload
        self._next = next_part
        self._head: SendRequest | None = None
        #: the secure domain (TSS SDI) the message travels in; None: cleartext
        self.sdi = sdi

    def head(self) -> SendRequest:
        """The next packet (made once, then kept until :meth:`pop` takes it)."""
        h = self._head
        if h is None:
            ses, payload, ref, eom = self._next()
            h = self._head = SendRequest(self.dst_ip, self.mode, self.job_id, self.tc, ses,
                                         self.ext, payload, ref, eom, self.sdi)
        return h

    def pop(self) -> SendRequest:
        """Take the next packet."""
        h = self._head
        if h is None:
            h = self.head()
        self._head = None
        self.count -= 1
        self.nbytes -= len(h.payload)
        return h


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


@dataclass(slots=True)
class PeerNegotiated(PdsEvent):
    """A NEGOTIATION control packet told us a peer's capabilities (uet.pds.negotiation):
    its ``fep_cap`` (for the SES's profile checks), receive window, largest payload and
    whether it sends CCX state. ``role`` is ours on that PDC."""

    peer_ip: str
    role: str
    fep_cap: int
    mp_range: int
    max_payload: int
    ccx: bool = False


__all__ = [
    "MessageFailed",
    "PacketAcked",
    "PdcClosed",
    "PdcOpened",
    "PdcState",
    "PdsEvent",
    "PeerNegotiated",
    "RequestDelivered",
    "ResponseReceived",
    "SendMessage",
    "SendRequest",
    "SesResponseHeader",
]
