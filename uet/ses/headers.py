"""Request headers: a uniform view of the three layouts and the choice between them.

* Standard (44 B, next_hdr 3): every operation, any number of packets; the only one with a
  message ID.
* Medium (32 B, next_hdr 2): single-packet operations; carries the initiator ID and the
  memory key or match bits, and either header data or a buffer offset (not both).
* Small (20 B, next_hdr 1): single-packet RMA (WRITE, READ, ATOMIC, FETCHING_ATOMIC) with no
  memory key, header data or initiator ID: it addresses a region registered under key 0.
  Used only when both end points advertise ``OPT_NON_MATCHING``.

Both optimized headers carry a 14-bit request length and need ``ses.optimized_headers``.
"""

from __future__ import annotations

from dataclasses import dataclass

from uet.wire.constants import FepCap, NextHeader, SesFlag, SesOpcode
from uet.wire.records import SesMedium, SesRequestHeader, SesSmall, SesStandard

OPT_MAX_LENGTH = (1 << 14) - 1

# flag bits as plain ints: an IntFlag test costs ~1 us and these run per packet
_SOM = int(SesFlag.SOM)
_EOM = int(SesFlag.EOM)
_HD = int(SesFlag.HD)
_REL = int(SesFlag.REL)
_IE = int(SesFlag.IE)
_REQ_STD = NextHeader.REQ_STD

#: Opcodes a small header may carry.
SMALL_OPCODES = frozenset({SesOpcode.WRITE, SesOpcode.READ, SesOpcode.ATOMIC,
                           SesOpcode.FETCHING_ATOMIC})
#: Opcodes a medium header may carry.
MEDIUM_OPCODES = SMALL_OPCODES | {SesOpcode.SEND, SesOpcode.TAGGED_SEND,
                                  SesOpcode.TSEND_ATOMIC, SesOpcode.TSEND_FETCH_ATOMIC,
                                  SesOpcode.DATAGRAM_SEND}


@dataclass(slots=True)
class Req:
    """A request header seen uniformly, whatever its layout."""

    kind: NextHeader
    opcode: int
    flags: int
    message_id: int | None  # None for medium/small headers
    ri_generation: int
    job_id: int
    pid_on_fep: int
    resource_index: int
    buffer_offset: int
    initiator: int
    memory_key: int
    header_data: int | None  # only on SOM packets with HD
    message_offset: int
    payload_length: int | None  # only on non-SOM standard packets
    request_length: int

    @property
    def som(self) -> bool:
        return bool(int(self.flags) & _SOM)

    @property
    def eom(self) -> bool:
        return bool(int(self.flags) & _EOM)

    @property
    def relative(self) -> bool:
        return bool(int(self.flags) & _REL)

    @property
    def ie(self) -> bool:
        return bool(int(self.flags) & _IE)

    @property
    def match_bits(self) -> int:
        return self.memory_key

    @property
    def restart_token(self) -> int:
        """Restart token of DEFERRABLE_SEND/TSEND (bytes 12-19)."""
        return self.buffer_offset


def view(ses: SesRequestHeader) -> Req:
    """Normalise a request header record into a :class:`Req`."""
    if isinstance(ses, SesStandard):
        flags = ses.flags
        f = int(flags)
        if f & _SOM:
            return Req(_REQ_STD, ses.opcode, flags, ses.message_id, ses.ri_generation,
                       ses.job_id, ses.pid_on_fep, ses.resource_index, ses.buffer_offset,
                       ses.initiator, ses.memory_key, ses.header_data if f & _HD else None,
                       0, None, ses.request_length)
        return Req(_REQ_STD, ses.opcode, flags, ses.message_id, ses.ri_generation, ses.job_id,
                   ses.pid_on_fep, ses.resource_index, ses.buffer_offset, ses.initiator,
                   ses.memory_key, None, ses.message_offset, ses.payload_length,
                   ses.request_length)
    if isinstance(ses, SesMedium):
        hd = bool(ses.flags & SesFlag.HD)
        return Req(NextHeader.REQ_MEDIUM, ses.opcode, ses.flags, None, ses.ri_generation,
                   ses.job_id, ses.pid_on_fep, ses.resource_index,
                   0 if hd else ses.buffer_offset, ses.initiator, ses.memory_key,
                   ses.buffer_offset if hd else None, 0, None, ses.request_length)
    if isinstance(ses, SesSmall):
        return Req(NextHeader.REQ_SMALL, ses.opcode, ses.flags & ~SesFlag.HD, None,
                   ses.ri_generation, ses.job_id, ses.pid_on_fep, ses.resource_index,
                   ses.buffer_offset, 0, 0, None, 0, None, ses.request_length)
    raise TypeError(f"not a SES request header: {type(ses).__name__}")


def choose_header(opcode: int, *, single_packet: bool, request_length: int, memory_key: int,
                  header_data: int | None, buffer_offset: int, optimized: bool,
                  own_cap: int, peer_cap: int | None) -> NextHeader:
    """The smallest request header that can carry this operation.

    ``peer_cap`` None (unknown peer) never selects the small header.
    """
    if not optimized or not single_packet or request_length > OPT_MAX_LENGTH:
        return NextHeader.REQ_STD
    if (opcode in SMALL_OPCODES and memory_key == 0 and header_data is None
            and own_cap & FepCap.OPT_NON_MATCHING
            and peer_cap is not None and peer_cap & FepCap.OPT_NON_MATCHING):
        return NextHeader.REQ_SMALL
    if opcode in MEDIUM_OPCODES and (header_data is None or buffer_offset == 0):
        return NextHeader.REQ_MEDIUM
    return NextHeader.REQ_STD


def single_header(kind: NextHeader, base: SesStandard) -> SesRequestHeader:
    """The single-packet medium or small header equivalent to a standard SOM|EOM header."""
    flags = base.flags | SesFlag.SOM | SesFlag.EOM
    hd = bool(flags & SesFlag.HD)
    if kind == NextHeader.REQ_MEDIUM:
        return SesMedium(opcode=base.opcode, flags=flags, request_length=base.request_length,
                         ri_generation=base.ri_generation, job_id=base.job_id,
                         pid_on_fep=base.pid_on_fep, resource_index=base.resource_index,
                         buffer_offset=base.header_data if hd else base.buffer_offset,
                         initiator=base.initiator, memory_key=base.memory_key)
    if kind == NextHeader.REQ_SMALL:
        return SesSmall(opcode=base.opcode, flags=flags & ~SesFlag.HD,
                        request_length=base.request_length, ri_generation=base.ri_generation,
                        job_id=base.job_id, pid_on_fep=base.pid_on_fep,
                        resource_index=base.resource_index, buffer_offset=base.buffer_offset)
    return base
