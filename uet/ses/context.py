"""What the SES initiator and target see of the end point that owns them (a narrow context).

:class:`~uet.ses.endpoint.SesEndpoint` composes an :class:`~uet.ses.initiator.Initiator`
and a :class:`~uet.ses.target.Target`; they reach back to it only through these
protocols, so the endpoint module sits above both and nothing imports upwards.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from uet.profiles import Profile
from uet.ses.memory import ResourceTable
from uet.ses.messages import OutItem, SesEvent, TargetAddr
from uet.wire.constants import DeliveryMode


@dataclass(slots=True)
class SesTimeouts:
    """The SES's timeouts in picoseconds (from the profile's ``ses.*_timeout_ms``).

    ``reassembly_ps``: a message whose packets stopped arriving this long is abandoned, and
    an operation waiting for read data this long fails; ``unexpected_ps``: unexpected
    messages, receives reserved for a restart, rendezvous exposures not read and deferred
    sends not restarted live at most this long."""

    reassembly_ps: int
    unexpected_ps: int


class InitiatorHooks(Protocol):
    """What the target asks of its end point's initiator."""

    def on_return_data(self, src: str, ses: Any, payload: bytes, *, now: int = 0) -> bool: ...

    def on_rtr(self, src: str, req: Any) -> int: ...

    def internal_read(self, tgt: TargetAddr, memory_key: int, offset: int, length: int,
                      mode: DeliveryMode, on_data: Callable[[int, bytes], None],
                      on_done: Callable[[Any], None]) -> Any: ...

    def internal_rtr(self, tgt: TargetAddr, token: int, mode: DeliveryMode,
                     on_done: Callable[[Any], None]) -> Any: ...


class SesContext(Protocol):
    """The end point as its initiator and target see it: profile, resources, identity,
    counters and the queues they fill."""

    profile: Profile
    resources: ResourceTable
    counters: Counter
    outq: deque[OutItem]
    events: deque[SesEvent]
    initiator_id: int
    pid_on_fep: int
    rendezvous_index: int
    timeouts: SesTimeouts
    #: time of the packet or call being handled
    now: int

    @property
    def initiator(self) -> InitiatorHooks:
        """The end point's initiator (read-only here, so a subclass of it fits)."""

    def arm(self, t: int) -> None:
        """Make sure the end point's timer runs at ``t`` or earlier."""
