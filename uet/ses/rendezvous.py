"""Rendezvous send: the eager part travels, the target reads the rest.

The initiator registers the bytes after the eager part as a read-only memory region on its
own end point (``SesEndpoint.rendezvous_index`` of the job) under a fresh key, and sends one
standard-header packet with the eager bytes and a rendezvous extension naming that region
(``pid_on_fep``, ``resource_index``, ``ri_generation``, ``read_memory_key``,
``read_offset``). ``request_length`` is the whole message.

The target, once a receive matches (at arrival or when posted later), copies the eager part
and issues an ordinary READ of ``request_length - eager_length`` bytes back to the
initiator's address, landing at ``eager_length`` in the receive buffer (truncated to the
buffer). The receive completes when that READ does. The initiator's operation completes
when the eager packet was answered OK and every exposed byte has been read; the region is
then removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from uet.ses.reassembly import Intervals

#: Keys of rendezvous exposures: a recognisable high tag plus a counter.
RENDEZVOUS_KEY_BASE = 0x5244_5600_0000_0000


@dataclass(eq=False, slots=True)
class Exposure:
    """The initiator's exposed remainder of one rendezvous send."""

    job_id: int
    pid_on_fep: int
    resource_index: int
    key: int
    length: int
    served: Intervals = field(default_factory=Intervals)

    def all_served(self) -> bool:
        return self.served.covered >= self.length
