"""Deliberately broken end points: each breaks one rule, small and explicit.

Used to show that the catalogue catches exactly the cases of the broken rule (and explains
them). Each is a :class:`~uet.endpoint.fep.FabricEndpoint` subclass passed as the in-process
target's ``endpoint_factory``.
"""

from __future__ import annotations

from uet.endpoint.fep import FabricEndpoint
from uet.wire.constants import NackCode
from uet.wire.records import PdsAckCc, PdsNack, PdsRudi


class NoSackEndpoint(FabricEndpoint):
    """Never reports selective ACKs: every ACK_CC leaves with an empty SACK bitmap."""

    def poll_frame(self, now):
        frame = super().poll_frame(now)
        if frame is not None and type(frame.pds) is PdsAckCc:
            frame.pds.sack_bitmap = 0
        return frame


class AnyJobEndpoint(FabricEndpoint):
    """Accepts requests naming a job it does not host (treats them as its own job)."""

    def receive_frame(self, now, frame):
        ses = frame.ses
        if ses is not None and hasattr(ses, "job_id") and not hasattr(ses, "return_code"):
            ses.job_id = self.job_id
        super().receive_frame(now, frame)


class NoInvDpdcidEndpoint(FabricEndpoint):
    """Never sends NACK INV_DPDCID (silently drops what should get it)."""

    def poll_frame(self, now):
        while True:
            frame = super().poll_frame(now)
            if not (frame is not None and type(frame.pds) is PdsNack
                    and frame.pds.nack_code == NackCode.INV_DPDCID):
                return frame


class FixedEvEndpoint(FabricEndpoint):
    """Answers (ACK, NACK, RUDI_RESP) from one fixed EV instead of the triggering one's."""

    def poll_frame(self, now):
        frame = super().poll_frame(now)
        if frame is not None and (type(frame.pds).__name__.startswith("PdsAck")
                                  or type(frame.pds) in (PdsNack, PdsRudi)):
            frame.ev = 0x4242
        return frame
