"""PDC state machines: one state enum per role and a transition table each (ref. 3.3, 3.9).

A PDC changes state only through :meth:`PdcBase.transition(event)
<uet.pds.manager.PdcBase.transition>`, which looks ``(state, event)`` up in its role's
table; an event the table does not allow in the current state raises
:class:`PdcStateError`, a :class:`~uet.errors.LocalProtocolError` naming the PDC, the
state and the event (h11's ``_state.py`` works the same way). A peer cannot cause one: a
peer's packet that makes no sense in the current state is answered on the wire (NACK) or
dropped and counted before any transition is asked for, so the error always means a bug.

The values match the reference provider's numbering that ``PdcState`` used before the
roles were split, so a state still compares equal to the old ``PdcState`` member of the
same name. ``docs/pds.md`` ("State machines") prints both tables; a test holds the
document to them.

Adding a state or an event: add the member, add its rows to the table, and give the PDC
the method that asks for the transition; :func:`describe` and the docs test pick it up.
"""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import Any, Protocol

from uet.errors import LocalProtocolError


class InitiatorState(IntEnum):
    """States of an initiator PDC."""

    SYN = 1  #: sending with SYN, the target's PDC ID (DPDCID) not known yet
    ESTABLISHED = 3  #: the first ACK gave the DPDCID
    CLOSING = 4  #: CLOSE sent (a new PSN, AR, tracked like data), waiting for its ACK
    CLOSED = 5  #: closed normally; lingering (MSL) before the ID is freed
    ERROR = 6  #: closed in error (every queued and outstanding message failed); lingering
    FREED = 7  #: forgotten; its ID may be reused


class TargetState(IntEnum):
    """States of a target PDC."""

    PENDING = 2  #: waiting for a SYN with the Start_PSN it asked for (NEW_START_PSN)
    ESTABLISHED = 3  #: receiving
    CLOSED = 5  #: the initiator's CLOSE arrived; lingering (MSL), answers late packets
    ERROR = 6  #: no CLOSE within Close_REQ_Time after its CLOSE_REQ; lingering
    FREED = 7  #: forgotten (MSL over, PENDING reaped, or a new incarnation took the key)


class PdcState(IntEnum):
    """The states of both roles under one enum, as before the split (kept so existing
    callers comparing ``pdc.state == PdcState.ESTABLISHED`` keep working: the values are
    those of :class:`InitiatorState` and :class:`TargetState`)."""

    SYN = 1
    PENDING = 2
    ESTABLISHED = 3
    CLOSING = 4
    CLOSED = 5
    ERROR = 6
    FREED = 7


class InitiatorEvent(Enum):
    """What can happen to an initiator PDC."""

    ESTABLISH = "establish"  #: the first ACK named our PDC (its SPDCID is the DPDCID)
    START_CLOSE = "start_close"  #: idle with everything acknowledged: CLOSE sent
    CLOSE_ACKED = "close_acked"  #: the CLOSE was acknowledged (or NACKed by a target
    #: that no longer knows the PDC: everything was acknowledged before)
    FAIL = "fail"  #: retry limit, close-class NACK, peer window never reopened
    FREE = "free"  #: linger (MSL) over, or evicted by the lingering limit


class TargetEvent(Enum):
    """What can happen to a target PDC."""

    START_PSN_MATCHED = "start_psn_matched"  #: a SYN with the Start_PSN it asked for
    CLOSE_RECEIVED = "close_received"  #: the initiator's CLOSE
    FAIL = "fail"  #: no CLOSE within Close_REQ_Time after its CLOSE_REQ
    REAP = "reap"  #: PENDING for New_PDC_Time
    FREE = "free"  #: linger over, evicted, or a new incarnation of the initiator's PDC


_I = InitiatorState
_IE = InitiatorEvent
#: (state, event) -> next state of an initiator PDC
INITIATOR_TRANSITIONS: dict[tuple[InitiatorState, InitiatorEvent], InitiatorState] = {
    (_I.SYN, _IE.ESTABLISH): _I.ESTABLISHED,
    (_I.SYN, _IE.FAIL): _I.ERROR,
    (_I.ESTABLISHED, _IE.START_CLOSE): _I.CLOSING,
    (_I.ESTABLISHED, _IE.FAIL): _I.ERROR,
    (_I.CLOSING, _IE.CLOSE_ACKED): _I.CLOSED,
    (_I.CLOSING, _IE.FAIL): _I.ERROR,
    (_I.CLOSED, _IE.FREE): _I.FREED,
    (_I.ERROR, _IE.FREE): _I.FREED,
}

_T = TargetState
_TE = TargetEvent
#: (state, event) -> next state of a target PDC
TARGET_TRANSITIONS: dict[tuple[TargetState, TargetEvent], TargetState] = {
    (_T.PENDING, _TE.START_PSN_MATCHED): _T.ESTABLISHED,
    (_T.PENDING, _TE.REAP): _T.FREED,
    (_T.ESTABLISHED, _TE.CLOSE_RECEIVED): _T.CLOSED,
    (_T.ESTABLISHED, _TE.FAIL): _T.ERROR,
    (_T.CLOSED, _TE.FREE): _T.FREED,
    (_T.ERROR, _TE.FREE): _T.FREED,
}

#: states in which a PDC sends requests (initiator) or accepts them (target)
INITIATOR_OPEN = frozenset({_I.SYN, _I.ESTABLISHED, _I.CLOSING})
#: closed PDCs keep their ID for MSL and answer late packets
LINGERING = frozenset({_I.CLOSED, _I.ERROR, _T.CLOSED, _T.ERROR})


class NamedPdc(Protocol):
    """What a :class:`PdcStateError` reads of the PDC it names (``uet.pds.manager.PdcBase``
    builds on this module, so the error names it by what it needs)."""

    pdc_id: int
    role: str
    state: Any
    peer_ip: str


class PdcStateError(LocalProtocolError):
    """A PDC was asked for a transition its table does not allow in its state."""

    def __init__(self, pdc: NamedPdc, event: Enum) -> None:
        self.pdc_id = pdc.pdc_id
        self.role = pdc.role
        self.state = pdc.state
        self.event = event
        super().__init__(f"{pdc.role} PDC {pdc.pdc_id} (peer {pdc.peer_ip}): event "
                         f"{event.name} is not allowed in state {pdc.state.name}")


def describe(table: dict) -> list[tuple[str, str, str]]:
    """The rows of a transition table as ``(state, event, next state)`` names, in table
    order (what docs/pds.md prints)."""
    return [(s.name, e.name, n.name) for (s, e), n in table.items()]


__all__ = [
    "INITIATOR_TRANSITIONS",
    "LINGERING",
    "NamedPdc",
    "TARGET_TRANSITIONS",
    "InitiatorEvent",
    "InitiatorState",
    "PdcState",
    "PdcStateError",
    "TargetEvent",
    "TargetState",
    "describe",
]
