"""Packet Delivery Sublayer (sans-IO): ephemeral PDCs, RUD/ROD/RUDI/UUD, ACK/SACK/NACK/CP,
selective retransmission. See ``docs/pds.md`` and the "PDS" section of
``docs/architecture.md``."""

from uet.pds.config import PdsConfig, PdsConfigError
from uet.pds.context import MemoryAccount, PdcContext
from uet.pds.endpoint import PdcLimitError, PdsEndpoint
from uet.pds.events import (
    MessageFailed,
    PacketAcked,
    PdcClosed,
    PdcOpened,
    PdsEvent,
    RequestDelivered,
    ResponseReceived,
    SendMessage,
    SendRequest,
)
from uet.pds.invariants import LivenessError
from uet.pds.recovery import LossRecovery, SentPacket
from uet.pds.states import (
    InitiatorEvent,
    InitiatorState,
    PdcState,
    PdcStateError,
    TargetEvent,
    TargetState,
)

__all__ = [
    "InitiatorEvent",
    "InitiatorState",
    "LivenessError",
    "LossRecovery",
    "MemoryAccount",
    "MessageFailed",
    "PacketAcked",
    "PdcClosed",
    "PdcContext",
    "PdcLimitError",
    "PdcOpened",
    "PdcState",
    "PdcStateError",
    "PdsConfig",
    "PdsConfigError",
    "PdsEndpoint",
    "PdsEvent",
    "RequestDelivered",
    "ResponseReceived",
    "SendMessage",
    "SendRequest",
    "SentPacket",
    "TargetEvent",
    "TargetState",
]
