"""What the SES initiator and target see of the end point that owns them (a narrow context).

:class:`~uet.ses.endpoint.SesEndpoint` composes an :class:`~uet.ses.initiator.Initiator`
and a :class:`~uet.ses.target.Target`; they reach back to it only through these
protocols, so the endpoint module sits above both and nothing imports upwards.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from typing import Any, Protocol

from uet.profiles import Profile
from uet.ses.memory import ResourceTable
from uet.ses.messages import OutPacket, SesEvent, TargetAddr
from uet.wire.constants import DeliveryMode


class InitiatorHooks(Protocol):
    """What the target asks of its end point's initiator."""

    def on_return_data(self, src: str, ses: Any, payload: bytes) -> bool: ...

    def on_rtr(self, src: str, req: Any) -> int: ...

    def internal_read(self, tgt: TargetAddr, memory_key: int, offset: int, length: int,
                      mode: DeliveryMode, on_data: Callable[[int, bytes], None],
                      on_done: Callable[[Any], None]) -> Any: ...


class SesContext(Protocol):
    """The end point as its initiator and target see it: profile, resources, identity,
    counters and the queues they fill."""

    profile: Profile
    resources: ResourceTable
    counters: Counter
    outq: deque[OutPacket]
    events: deque[SesEvent]
    initiator_id: int
    pid_on_fep: int
    rendezvous_index: int
    initiator: InitiatorHooks
