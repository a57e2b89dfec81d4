"""Scapy layers of the SES request, extension and response headers (ref. 4)."""

from __future__ import annotations

from scapy.fields import (
    BitEnumField,
    BitField,
    ByteEnumField,
    ByteField,
    ConditionalField,
    FlagsField,
    IntField,
    ShortField,
    ThreeBytesField,
    XIntField,
    XLongField,
)

from uet.wire.constants import (
    AtomicDatatype,
    AtomicOpcode,
    ReturnCode,
    RspList,
    RspOpcode,
    SesOpcode,
)
from uet.wire.layers_base import UETLayer

SES_OPCODE_NAMES = {int(t): t.name for t in SesOpcode}
RSP_OPCODE_NAMES = {int(t): t.name for t in RspOpcode}
RETURN_CODE_NAMES = {int(t): t.name for t in ReturnCode}
RSP_LIST_NAMES = {int(t): t.name for t in RspList}
ATOMIC_OPCODE_NAMES = {int(t): t.name for t in AtomicOpcode}
ATOMIC_DATATYPE_NAMES = {int(t): t.name for t in AtomicDatatype}
SES_FLAGS = ["SOM", "EOM", "HD", "REL", "IE", "DC"]
SEM_CTL_FLAGS = ["CACHEABLE", "CPU_COHERENT", "rsvd2", "rsvd3", "rsvd4", "rsvd5", "rsvd6",
                 "rsvd7"]

_DEFERRABLE_SEND = {int(SesOpcode.DEFERRABLE_SEND), int(SesOpcode.DEFERRABLE_TSEND)}


def _req_head() -> list:
    return [
        BitField("rsvd0", 0, 2),
        BitEnumField("opcode", 0, 6, SES_OPCODE_NAMES),
        BitField("version", 0, 2),
        FlagsField("flags", 0, 6, SES_FLAGS),
    ]


def _req_ids() -> list:
    return [
        ByteField("ri_generation", 0),
        ThreeBytesField("job_id", 0),
        BitField("rsvd_pid", 0, 4),
        BitField("pid_on_fep", 0, 12),
        BitField("rsvd_ri", 0, 4),
        BitField("resource_index", 0, 12),
    ]


def _som(p) -> bool:
    return bool(int(p.flags) & 0x01)


def _not_som(p) -> bool:
    return not int(p.flags) & 0x01


class UETSesRequest(UETLayer):
    """Common base of the SES request headers."""

    name = "UET SES request"

    def mysummary(self) -> str:
        return self.sprintf("SES %opcode%")


class UETSesStd(UETSesRequest):
    """Standard request header (next_hdr 3), 44 bytes (ref. 4.2).

    Bytes 32-39 are ``header_data`` with SOM set, else reserved(18) + ``payload_length``(14)
    + ``message_offset``(32). DEFERRABLE_SEND/TSEND carry the restart token in
    ``buffer_offset``, DEFERRABLE_RTR in ``memory_key`` (see :meth:`restart_token`).
    """

    name = "UET SES standard request"
    fields_desc = _req_head() + [ShortField("message_id", 0)] + _req_ids() + [
        XLongField("buffer_offset", 0),
        XIntField("initiator", 0),
        XLongField("memory_key", 0),
        ConditionalField(XLongField("header_data", 0), _som),
        ConditionalField(BitField("rsvd_len", 0, 18), _not_som),
        ConditionalField(BitField("payload_length", 0, 14), _not_som),
        ConditionalField(IntField("message_offset", 0), _not_som),
        IntField("request_length", 0),
    ]

    def restart_token(self) -> int | None:
        """64-bit restart token (initiator token << 32 | target token) of the deferrable
        opcodes, ``None`` for other opcodes."""
        if self.opcode in _DEFERRABLE_SEND:
            return self.buffer_offset
        if self.opcode == SesOpcode.DEFERRABLE_RTR:
            return self.memory_key
        return None

    def match_bits(self) -> int:
        return self.memory_key


class UETSesMedium(UETSesRequest):
    """Medium (small-message) request header (next_hdr 2), 32 bytes (ref. 4.3).

    ``buffer_offset`` holds the header data when HD is set.
    """

    name = "UET SES medium request"
    fields_desc = _req_head() + [
        BitField("rsvd_len", 0, 2),
        BitField("request_length", 0, 14),
    ] + _req_ids() + [
        XLongField("buffer_offset", 0),
        XIntField("initiator", 0),
        XLongField("memory_key", 0),
    ]


class UETSesSmall(UETSesRequest):
    """Small (optimized non-matching) request header (next_hdr 1), 20 bytes (ref. 4.3)."""

    name = "UET SES small request"
    fields_desc = _req_head() + [
        BitField("rsvd_len", 0, 2),
        BitField("request_length", 0, 14),
    ] + _req_ids() + [XLongField("buffer_offset", 0)]


class UETSesExt(UETLayer):
    """Common base of the SES extension headers."""

    name = "UET SES extension"


def _atomic_head() -> list:
    return [
        ByteEnumField("atomic_opcode", 0, ATOMIC_OPCODE_NAMES),
        ByteEnumField("atomic_datatype", 0, ATOMIC_DATATYPE_NAMES),
        FlagsField("semantic_control", 0, 8, SEM_CTL_FLAGS),
        ByteField("rsvd", 0),
    ]


class UETAtomicExt(UETSesExt):
    """Atomic extension header (4 bytes) after a request with an atomic opcode."""

    name = "UET SES atomic extension"
    fields_desc = _atomic_head()


class UETCasExt(UETSesExt):
    """Compare-and-swap extension header (36 bytes) for the CSWAP atomic opcodes."""

    name = "UET SES compare-and-swap extension"
    fields_desc = _atomic_head() + [
        BitField("compare_value", 0, 128),
        BitField("swap_value", 0, 128),
    ]


class UETRendezvousExt(UETSesExt):
    """Rendezvous extension header (24 bytes) after the standard header (ref. 4.4)."""

    name = "UET SES rendezvous extension"
    fields_desc = [
        IntField("eager_length", 0),
        ByteField("ri_generation", 0),
        BitField("pid_on_fep", 0, 12),
        BitField("resource_index", 0, 12),
        XLongField("read_offset", 0),
        XLongField("read_memory_key", 0),
    ]


class UETSesResponse(UETLayer):
    """Common base of the SES response headers."""

    name = "UET SES response"

    def mysummary(self) -> str:
        return self.sprintf("SES %opcode% %return_code%")


def _rsp_head(opcode: int) -> list:
    return [
        BitEnumField("list", 0, 2, RSP_LIST_NAMES),
        BitEnumField("opcode", opcode, 6, RSP_OPCODE_NAMES),
        BitField("version", 0, 2),
        BitEnumField("return_code", 0, 6, RETURN_CODE_NAMES),
    ]


class UETSesRsp(UETSesResponse):
    """Response without data (next_hdr 4), 12 bytes (ref. 4.5)."""

    name = "UET SES response"
    fields_desc = _rsp_head(1) + [
        ShortField("message_id", 0),
        ByteField("ri_generation", 0),
        ThreeBytesField("job_id", 0),
        IntField("modified_length", 0),
    ]


class UETSesRspData(UETSesResponse):
    """Response with data (next_hdr 5), 20 bytes (ref. 4.5)."""

    name = "UET SES response with data"
    fields_desc = _rsp_head(2) + [
        ShortField("message_id", 0),
        ByteField("rsvd", 0),
        ThreeBytesField("job_id", 0),
        ShortField("read_request_message_id", 0),
        BitField("rsvd2", 0, 2),
        BitField("payload_length", 0, 14),
        IntField("modified_length", 0),
        IntField("message_offset", 0),
    ]


class UETSesRspDataSmall(UETSesResponse):
    """Small response with data (next_hdr 6), 12 bytes (ref. 4.5)."""

    name = "UET SES small response with data"
    fields_desc = _rsp_head(2) + [
        BitField("rsvd", 0, 2),
        BitField("payload_length", 0, 14),
        ByteField("rsvd2", 0),
        ThreeBytesField("job_id", 0),
        IntField("original_request_psn", 0),
    ]


#: next-header value -> scapy class.
SES_CLASSES: dict[int, type[UETLayer]] = {
    1: UETSesSmall, 2: UETSesMedium, 3: UETSesStd, 4: UETSesRsp, 5: UETSesRspData,
    6: UETSesRspDataSmall,
}
