"""Semantic sublayer (sans-IO): operations, segmentation, matching, memory, atomics.

Entry point: :class:`SesEndpoint`. See ``docs/ses.md`` for how a driver runs it.
"""

from uet.profiles import ProfileError
from uet.ses.endpoint import SesEndpoint
from uet.ses.errors import OperationResult, SesError
from uet.ses.initiator import Operation, OpState
from uet.ses.matching import Receive
from uet.ses.memory import MemoryRegion, Perm
from uet.ses.messages import (
    OpCompleted,
    OutPacket,
    PacketRef,
    RecvCompleted,
    TargetAddr,
    TargetReply,
)

__all__ = [
    "MemoryRegion", "OpCompleted", "OpState", "Operation", "OperationResult", "OutPacket",
    "PacketRef", "Perm", "ProfileError", "Receive", "RecvCompleted", "SesEndpoint", "SesError",
    "TargetAddr", "TargetReply",
]
