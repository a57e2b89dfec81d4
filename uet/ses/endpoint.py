"""One end point's SES: initiator + target + resources, sans-IO.

The driver (the FEP glue, or the test harness) moves packets:

* ``poll_transmit()`` -> :class:`~uet.ses.messages.OutPacket` to submit to the PDS
  (operations' requests, and requests the target side originates: rendezvous READs,
  DEFERRABLE_RTR, read data in the return direction);
* ``target.handle(src, ses, ext, payload, mode=, psn=, conn=)`` for each delivered request, whose
  :class:`~uet.ses.messages.TargetReply` goes back through ``respond``;
* ``initiator.on_response(msg_ref, ses, payload)`` / ``initiator.on_failed(msg_ref, why)``
  for the PDS's ``ResponseReceived`` / ``MessageFailed``;
* ``next_event()`` for completions (:class:`OpCompleted`, :class:`RecvCompleted`).
"""

from __future__ import annotations

from collections import Counter, deque

from uet.profiles import Profile, load_profile
from uet.ses.initiator import Initiator
from uet.ses.memory import ResourceTable
from uet.ses.messages import OutPacket, SesEvent
from uet.ses.target import Target
from uet.wire.constants import FepCap


class SesEndpoint:
    """The semantic sublayer of one fabric end point."""

    def __init__(self, profile: Profile | str, *, address: str, initiator_id: int = 0,
                 pid_on_fep: int = 0, rendezvous_index: int = 0xFFF) -> None:
        self.profile = profile if isinstance(profile, Profile) else load_profile(profile)
        self.address = address
        self.initiator_id = initiator_id & 0xFFFFFFFF
        self.pid_on_fep = pid_on_fep
        #: resource index (per job, on ``pid_on_fep``) where rendezvous sends expose data
        self.rendezvous_index = rendezvous_index
        self.resources = ResourceTable()
        self.counters: Counter = Counter()
        self.outq: deque[OutPacket] = deque()
        self.events: deque[SesEvent] = deque()
        self.initiator = Initiator(self)
        self.target = Target(self)

    @property
    def fep_cap(self) -> FepCap:
        """The capability bits this end point advertises."""
        return self.profile.fep_cap

    def poll_transmit(self) -> OutPacket | None:
        """Next packet to hand to the PDS, or None."""
        return self.outq.popleft() if self.outq else None

    def next_event(self) -> SesEvent | None:
        """Next completion event, or None."""
        return self.events.popleft() if self.events else None
