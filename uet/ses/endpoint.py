"""One end point's SES: initiator + target + resources, sans-IO.

The driver (the FEP glue, or the test harness) moves packets:

* ``poll_transmit()`` -> :class:`~uet.ses.messages.OutPacket` to submit to the PDS
  (operations' requests, and requests the target side originates: rendezvous READs,
  DEFERRABLE_RTR, read data in the return direction); or ``poll_message()``, the same
  packets with a multi-packet message as one :class:`~uet.ses.messages.OutMessage` whose
  packets are made only as they are taken;
* ``target.handle(src, ses, ext, payload, mode=, psn=, conn=)`` for each delivered request, whose
  :class:`~uet.ses.messages.TargetReply` goes back through ``respond``;
* ``initiator.on_response(msg_ref, ses, payload)`` / ``initiator.on_failed(msg_ref, why)``
  for the PDS's ``ResponseReceived`` / ``MessageFailed``;
* ``next_event()`` for completions (:class:`OpCompleted`, :class:`RecvCompleted`);
* ``next_deadline()`` / ``handle_timer(now)`` for the SES's own timeouts (messages whose
  packets stopped arriving, unexpected and deferred state, operations waiting on the peer
  beyond what the PDS tracks: read data, rendezvous pulls, restarts). ``deadline`` is the
  same value as an attribute (the FEP reads it on every packet).
"""

from __future__ import annotations

from collections import Counter, deque

from uet.profiles import Profile, load_profile
from uet.ses.context import SesTimeouts
from uet.ses.initiator import Initiator
from uet.ses.memory import ResourceTable
from uet.ses.messages import OutItem, OutMessage, OutPacket, SesEvent
from uet.ses.target import Target
from uet.wire.constants import FepCap

PS_PER_MS = 1_000_000_000


class SesEndpoint:
    """The semantic sublayer of one fabric end point."""

    # slots for what the C cores read and write per packet (the FEP and SES cores)
    __slots__ = ("profile", "resources", "now", "deadline", "outq", "events", "target",
                 "__dict__", "__weakref__")

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
        #: packets and multi-packet messages waiting for the PDS, in order
        self.outq: deque[OutItem] = deque()
        self.events: deque[SesEvent] = deque()
        ses = self.profile.ses
        self.timeouts = SesTimeouts(ses.reassembly_timeout_ms * PS_PER_MS,
                                    ses.unexpected_timeout_ms * PS_PER_MS)
        #: the earliest SES deadline (ps), or None
        self.deadline: int | None = None
        #: time of the packet or call being handled (set by the target and the driver)
        self.now = 0
        self.initiator = Initiator(self)
        self.target = Target(self)

    @property
    def fep_cap(self) -> FepCap:
        """The capability bits this end point advertises."""
        return self.profile.fep_cap

    def poll_transmit(self) -> OutPacket | None:
        """Next packet to hand to the PDS, or None."""
        q = self.outq
        if not q:
            return None
        item = q[0]
        if type(item) is OutMessage:
            pkt = item.next_packet()
            if not item.count:
                q.popleft()
            return pkt
        q.popleft()
        return item

    def poll_message(self) -> OutItem | None:
        """Next packet, or the rest of a multi-packet message as one
        :class:`~uet.ses.messages.OutMessage` whose packets are made as they are taken (the
        FEP hands it to the PDS whole), or None."""
        return self.outq.popleft() if self.outq else None

    def next_event(self) -> SesEvent | None:
        """Next completion event, or None."""
        return self.events.popleft() if self.events else None

    def arm(self, t: int) -> None:
        """Make sure ``handle_timer`` runs at ``t`` or earlier."""
        if self.deadline is None or t < self.deadline:
            self.deadline = t

    def next_deadline(self) -> int | None:
        return self.deadline

    def handle_timer(self, now: int) -> None:
        """Run the timeouts due at ``now`` (a no-op before the deadline)."""
        if self.deadline is None or now < self.deadline:
            return
        self.now = now
        a = self.target.expire(now)
        b = self.initiator.expire(now)
        self.deadline = a if b is None else b if a is None else min(a, b)
