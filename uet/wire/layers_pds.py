"""Scapy layers of the entropy header, the TSS header and every PDS header (ref. 1.3, 2, 7).

Field names match :mod:`uet.wire.records`; reserved bits are explicit fields (``*rsvd*``)
so that a decoded packet shows non-zero reserved bits instead of hiding them.
"""

from __future__ import annotations

from typing import Any

from scapy.fields import (
    BitEnumField,
    BitField,
    ByteEnumField,
    ByteField,
    ConditionalField,
    FlagsField,
    IntField,
    LongField,
    ShortField,
    SignedShortField,
    StrFixedLenField,
    ThreeBytesField,
    XLongField,
    XShortField,
)

from uet.wire.constants import CtlType, NackCode, NextHeader, PdsType
from uet.wire.layers_base import UETLayer
from uet.wire.records import psn_add

PDS_TYPE_NAMES = {int(t): t.name for t in PdsType}
NEXT_HDR_NAMES = {int(t): t.name for t in NextHeader}
CTL_TYPE_NAMES = {int(t): t.name for t in CtlType}
NACK_CODE_NAMES = {int(t): t.name for t in NackCode}

# flag names, least significant bit first (scapy FlagsField convention)
REQ_FLAGS = ["rsvd0", "rsvd1", "SYN", "AR", "RETX", "rsvd5", "rsvd6"]
ACK_FLAGS = ["rsvd0", "REQ_CLR", "REQ_CLS", "P", "RETX", "M", "EPSN"]
NACK_FLAGS = ["rsvd0", "rsvd1", "rsvd2", "NT", "RETX", "M", "rsvd6"]
CP_FLAGS = ["rsvd0", "rsvd1", "SYN", "AR", "RETX", "ISROD", "rsvd6"]
RUDI_FLAGS = ["rsvd0", "rsvd1", "rsvd2", "rsvd3", "RETX", "M", "rsvd6"]
UUD_FLAGS = ["rsvd0", "rsvd1", "rsvd2", "rsvd3", "rsvd4", "rsvd5", "rsvd6"]


def _prologue(type_default: int, flag_names: list[str], nh_default: int = 3) -> list:
    return [
        BitEnumField("type", type_default, 5, PDS_TYPE_NAMES),
        BitEnumField("next_hdr", nh_default, 4, NEXT_HDR_NAMES),
        FlagsField("flags", 0, 7, flag_names),
    ]


def _syn(p) -> bool:
    return bool(int(p.flags) & 0x04)


def _not_syn(p) -> bool:
    return not int(p.flags) & 0x04


def _pdc_tail() -> list[Any]:
    """Bytes 10-11 of requests and CPs: DPDCID, or pdc_info + psn_offset when SYN=1."""
    return [
        ConditionalField(ShortField("dpdcid", 0), _not_syn),
        ConditionalField(BitField("use_rsv_pdc", 0, 1), _syn),
        ConditionalField(BitField("pdc_info_rsvd", 0, 3), _syn),
        ConditionalField(BitField("psn_offset", 0, 12), _syn),
    ]


class UETEntropy(UETLayer):
    """Entropy header of native-IP mode (ref. 1.3): EV + 2 reserved bytes."""

    name = "UET entropy"
    fields_desc = [XShortField("entropy", 0), XShortField("rsvd", 0)]


class UETTss(UETLayer):
    """Transport security header (ref. 7.1): 12 bytes, 16 with the SSI (SP set)."""

    name = "UET TSS"
    fields_desc = [
        BitField("type", 1, 5),
        BitField("sp", 0, 1),
        BitField("rsvd", 0, 1),
        BitField("an", 0, 1),
        BitField("sdi", 0, 24),
        ConditionalField(IntField("ssi", 0), lambda p: p.sp == 1),
        ShortField("epoch", 0),
        BitField("tsc", 0, 48),
    ]


class UETPds(UETLayer):
    """Common base of the PDS layers (for ``isinstance`` / ``haslayer``-style checks)."""

    name = "UET PDS"

    def mysummary(self) -> str:
        return self.sprintf("UET %type%")


class _SynHelpers:
    psn: int  # scapy fields of the classes this mixes into (declared for the checker)
    psn_offset: int

    def start_psn(self) -> int:
        """Start PSN = PSN - psn_offset (meaningful with SYN set)."""
        return psn_add(self.psn, -(self.psn_offset or 0))


class UETPdsReq(_SynHelpers, UETPds):
    """RUD / ROD request (type 2 / 3), 12 bytes (ref. 2.2)."""

    name = "UET PDS RUD/ROD request"
    fields_desc = _prologue(2, REQ_FLAGS) + [
        SignedShortField("clear_psn_offset", 0),
        IntField("psn", 0),
        ShortField("spdcid", 0),
    ] + _pdc_tail()

    def clear_psn(self) -> int:
        """Clear PSN = PSN + clear_psn_offset (32-bit serial arithmetic)."""
        return psn_add(self.psn, self.clear_psn_offset)


class UETPdsCcReq(UETPdsReq):
    """RUD_CC / ROD_CC request (type 13 / 14), 16 bytes (ref. 2.2)."""

    name = "UET PDS RUD/ROD CC request"
    fields_desc = _prologue(13, REQ_FLAGS) + UETPdsReq.fields_desc[3:] + [
        ByteField("ccc_id", 0),
        ThreeBytesField("credit_target", 0),
    ]


class UETPdsRudi(UETPds):
    """RUDI request / response (type 4 / 5), 8 bytes (ref. 2.8)."""

    name = "UET PDS RUDI"
    fields_desc = _prologue(4, RUDI_FLAGS) + [XShortField("rsvd", 0), IntField("pkt_id", 0)]


class UETPdsUud(UETPds):
    """UUD request (type 6), 4 bytes (ref. 2.9)."""

    name = "UET PDS UUD"
    fields_desc = _prologue(6, UUD_FLAGS) + [XShortField("rsvd", 0)]


def _probe(p) -> bool:
    return bool(int(p.flags) & 0x08)


def _not_probe(p) -> bool:
    return not int(p.flags) & 0x08


def _ack_common() -> list:
    return [
        ConditionalField(SignedShortField("ack_psn_offset", 0), _not_probe),
        ConditionalField(XShortField("probe_opaque", 0), _probe),
        IntField("cack_psn", 0),
        ShortField("spdcid", 0),
        ShortField("dpdcid", 0),
    ]


class _AckHelpers:
    ack_psn_offset: int  # scapy fields of the ACK classes (declared for the checker)
    probe_opaque: int
    cack_psn: int

    def ack_psn(self) -> int:
        """ACK PSN = CACK PSN + ack_psn_offset (the probe-opaque bits when P is set)."""
        off = self.ack_psn_offset
        if off is None:
            off = self.probe_opaque - 0x10000 if self.probe_opaque & 0x8000 else self.probe_opaque
        return psn_add(self.cack_psn, off)


class UETPdsAck(_AckHelpers, UETPds):
    """ACK (type 7), 12 bytes; 16 with the reference provider's EPSN flag (ref. 2.3)."""

    name = "UET PDS ACK"
    fields_desc = _prologue(7, ACK_FLAGS, 0) + _ack_common() + [
        ConditionalField(IntField("epsn", 0), lambda p: bool(int(p.flags) & 0x40)),
    ]


def _cc_state() -> list:
    nscc = lambda p: p.cc_type == 0  # noqa: E731
    credit = lambda p: p.cc_type == 1  # noqa: E731
    return [
        BitField("cc_type", 0, 4),
        BitField("cc_flags", 0, 4),
        ByteField("mpr", 0),
        SignedShortField("sack_psn_offset", 0),
        XLongField("sack_bitmap", 0),
        ConditionalField(ShortField("service_time", 0), nscc),
        ConditionalField(BitField("restore_cwnd", 0, 1), nscc),
        ConditionalField(BitField("rcv_cwnd_pend", 0, 7), nscc),
        ConditionalField(ThreeBytesField("rcvd_bytes", 0), nscc),
        ConditionalField(ThreeBytesField("credit", 0), credit),
        ConditionalField(ThreeBytesField("cc_rsvd", 0), credit),
        ConditionalField(StrFixedLenField("cc_state_raw", bytes(8), 8),
                         lambda p: p.cc_type not in (0, 1)),
        ConditionalField(ShortField("ooo_count", 0), lambda p: p.cc_type in (0, 1)),
    ]


class UETPdsAckCc(_AckHelpers, UETPds):
    """ACK_CC (type 8), 32 bytes: ACK + SACK + NSCC or credit state (ref. 2.4)."""

    name = "UET PDS ACK_CC"
    fields_desc = _prologue(8, ACK_FLAGS, 0) + _ack_common() + _cc_state()

    def sack_base(self) -> int:
        """SACK base PSN = CACK PSN + sack_psn_offset (signed)."""
        return psn_add(self.cack_psn, self.sack_psn_offset)

    def sacked_psns(self) -> list[int]:
        """PSNs marked received in the SACK bitmap (bit i = base + i)."""
        base, bm = self.sack_base(), self.sack_bitmap
        return [psn_add(base, i) for i in range(64) if bm >> i & 1]


class UETPdsAckCcx(UETPdsAckCc):
    """ACK_CCX (type 9), 40 bytes: ACK_CC + 8 bytes of CCX state (ref. 2.5)."""

    name = "UET PDS ACK_CCX"
    fields_desc = _prologue(9, ACK_FLAGS, 0) + _ack_common() + _cc_state() + [
        StrFixedLenField("ccx_state", bytes(8), 8),
    ]


class UETPdsNack(UETPds):
    """NACK (type 10), 16 bytes (ref. 2.6)."""

    name = "UET PDS NACK"
    fields_desc = _prologue(10, NACK_FLAGS, 0) + [
        ByteEnumField("nack_code", 0, NACK_CODE_NAMES),
        ByteField("vendor_code", 0),
        IntField("nack_psn", 0),
        ShortField("spdcid", 0),
        ShortField("dpdcid", 0),
        IntField("nack_payload", 0),  # records: PdsNack.payload ("payload" is scapy's)
    ]


class UETPdsNackCcx(UETPdsNack):
    """NACK_CCX (type 12), 32 bytes: NACK + 4-bit type + 60 + 64 bits of state."""

    name = "UET PDS NACK_CCX"
    fields_desc = _prologue(12, NACK_FLAGS, 0) + UETPdsNack.fields_desc[3:] + [
        BitField("nccx_type", 0, 4),
        BitField("nccx_state1", 0, 60),
        LongField("nccx_state2", 0),
    ]


class UETPdsCp(_SynHelpers, UETPds):
    """Control packet (type 11), 16 bytes; ``ctl_type`` sits in the next-header bits."""

    name = "UET PDS control"
    fields_desc = [  # type: ignore[assignment]  # Field and ConditionalField lists mixed
        BitEnumField("type", 11, 5, PDS_TYPE_NAMES),
        BitEnumField("ctl_type", 0, 4, CTL_TYPE_NAMES),
        FlagsField("flags", 0, 7, CP_FLAGS),
        XShortField("probe_opaque", 0),
        IntField("psn", 0),
        ShortField("spdcid", 0),
    ] + _pdc_tail() + [IntField("ctl_payload", 0)]  # records: PdsControl.payload


#: PDS type -> scapy class.
PDS_CLASSES: dict[int, type[UETPds]] = {
    2: UETPdsReq, 3: UETPdsReq, 13: UETPdsCcReq, 14: UETPdsCcReq, 4: UETPdsRudi,
    5: UETPdsRudi, 6: UETPdsUud, 7: UETPdsAck, 8: UETPdsAckCc, 9: UETPdsAckCcx,
    10: UETPdsNack, 12: UETPdsNackCcx, 11: UETPdsCp,
}
