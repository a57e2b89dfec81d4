"""Packet Delivery Sublayer (sans-IO): ephemeral PDCs, RUD/ROD/RUDI/UUD, ACK/SACK/NACK/CP,
selective retransmission. See ``docs/pds.md`` and the "PDS" section of
``docs/architecture.md``."""

from uet.pds.config import PdsConfig, PdsConfigError
from uet.pds.endpoint import PdcLimitError, PdsEndpoint
from uet.pds.events import (
    MessageFailed,
    PacketAcked,
    PdcClosed,
    PdcOpened,
    PdcState,
    PdsEvent,
    RequestDelivered,
    ResponseReceived,
    SendRequest,
)

__all__ = [
    "MessageFailed",
    "PacketAcked",
    "PdcClosed",
    "PdcLimitError",
    "PdcOpened",
    "PdcState",
    "PdsConfig",
    "PdsConfigError",
    "PdsEndpoint",
    "PdsEvent",
    "RequestDelivered",
    "ResponseReceived",
    "SendRequest",
]
