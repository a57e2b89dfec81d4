"""Flat ``name -> value`` view of a frame, named like Wireshark's UET dissector fields.

This is the single place that maps records to field names. ``uet decode --json`` prints
it, and the Lua dissector's tests compare ``tshark -T fields`` output to it field by field.

Conventions (see ``docs/wire-format.md`` for the full list and every difference from
Wireshark's ``packet-uet.c`` at commit 2e69f352):

* Names come from Wireshark's dissector (``WS_FIELDS``) when it has the field; fields it
  lacks get ``uet.`` names of our own (``OUR_FIELDS``); lower layers use Wireshark's
  ``eth.*``, ``ip.*``, ``ipv6.*``, ``udp.*`` names (``LOWER_FIELDS``).
* Values are integers, ``True``/``False`` for Wireshark's FT_BOOLEAN fields, text for
  addresses and lowercase hex (no separators) for FT_BYTES fields.
* Masked fields carry the value after masking and shifting, as Wireshark shows them
  (``uet.pds.flags`` is the 7-bit flags value, ``uet.pds.type`` the 5-bit type, ...).
* Derived fields are computed like Wireshark does: ``uet.pds.clear_psn`` = PSN + signed
  clear offset, ``uet.pds.ack_psn`` = CACK PSN + signed ACK offset, ``uet.pds.start_psn`` =
  PSN - psn_offset, all modulo 2**32.
* Reserved fields the records do not keep (reserved bytes, ``pdc_mode_rsv``) are not
  emitted; reserved *flag* bits are, since the records keep the raw flags.
"""

from __future__ import annotations

from uet.wire.constants import SesOpcode
from uet.wire.records import (
    AtomicExt,
    CasExt,
    Frame,
    PdsAck,
    PdsAckCc,
    PdsControl,
    PdsNack,
    PdsRequest,
    PdsRudi,
    PdsUud,
    RendezvousExt,
    SesMedium,
    SesResponse,
    SesResponseData,
    SesResponseDataSmall,
    SesSmall,
    SesStandard,
    psn_add,
)

Value = int | bool | str



def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Wireshark field names (from its dissector) that frame_fields emits.
WS_FIELDS: frozenset[str] = _names("""
uet.tss.type uet.tss.sp uet.tss.an uet.tss.sdi uet.tss.ssi uet.tss.tsc
uet.pds.entropy uet.pds.entropy.rsvd
uet.pds.type uet.pds.nh uet.pds.ctl_type uet.pds.flags uet.pds.flags.m uet.pds.flags.retx
uet.pds.flags.ar uet.pds.flags.p uet.pds.flags.nt uet.pds.flags.syn uet.pds.flags.req
uet.pds.flags.rsvd_rud_rod uet.pds.flags.rsvd_uud uet.pds.flags.rsvd_ctl
uet.pds.flags.rsvd_ack uet.pds.flags.rsvd_rudi uet.pds.flags.rsvd_nack
uet.pds.clear_psn uet.pds.psn uet.pds.ack_psn uet.pds.cack_psn uet.pds.spdcid uet.pds.dpdcid
uet.pds.nack.psn uet.pds.nack.code uet.pds.nack.vendor_code
uet.pds.nack.max_recv_psn_plus_1 uet.pds.pdc_mode uet.pds.pdc_mode_use_rsv
uet.pds.psn_offset uet.pds.start_psn uet.pds.cc_state.ccc_id uet.pds.cc_state.credit_target
uet.pds.ctrl_probe_opaque uet.pds.ctrl_payload uet.pds.ack.cc_type uet.pds.ack.mpr
uet.pds.ack.sack_offset uet.pds.ack.cc_state uet.pds.ack.ccx_state uet.pds.ack.sack_bitmap
uet.pds.ack.cc_state.service_time uet.pds.ack.cc_state.rc uet.pds.ack.cc_state.rcv_cwnd_pend
uet.pds.ack.cc_state.credit uet.pds.ack.cc_state.rcvd_bytes uet.pds.ack.cc_state.reserved
uet.pds.ack.cc_state.ooo_count uet.pds.rudi.pkt_id
uet.ses.std.flags uet.ses.std.opcode uet.ses.std.ver uet.ses.std.dc uet.ses.std.ie
uet.ses.std.rel uet.ses.std.hd uet.ses.std.eom uet.ses.std.som uet.ses.std.message_id
uet.ses.std.index_generation uet.ses.std.job_id uet.ses.std.pidonfep
uet.ses.std.resource_index uet.ses.std.buffer_offset uet.ses.std.restart_token
uet.ses.std.initiator uet.ses.std.mem_key_match_bits uet.ses.std.header_data
uet.ses.std.payload_length uet.ses.std.message_offset uet.ses.std.request_length
uet.ses.atomic_op_ext_hdr.atomic_opcode uet.ses.atomic_op_ext_hdr.atomic_data_type
uet.ses.atomic_op_ext_hdr.sem_ctl
uet.ses.rendv_ext_hdr.eager_length uet.ses.rendv_ext_hdr.read_pid_on_fep
uet.ses.rendv_ext_hdr.read_resource_index uet.ses.rendv_ext_hdr.read_offset
uet.ses.rendv_ext_hdr.read_match_bits
uet.ses.comp_swap_ext_hdr.atomic_opcode uet.ses.comp_swap_ext_hdr.atomic_data_type
uet.ses.comp_swap_ext_hdr.sem_ctl uet.ses.comp_swap_ext_hdr.comp_value
uet.ses.comp_swap_ext_hdr.swap_value
uet.ses.rsp.list uet.ses.rsp.opcode uet.ses.rsp.ver uet.ses.rsp.return_code
uet.ses.rsp.message_id uet.ses.rsp.resource_index_gen uet.ses.rsp.job_id
uet.ses.rsp.mod_length uet.ses.rsp.read_req_message_id uet.ses.rsp.payload_length
uet.ses.rsp.message_offset
uet.ses.small_req.flags uet.ses.small_req.flags.ver uet.ses.small_req.flags.dc
uet.ses.small_req.flags.ie uet.ses.small_req.flags.rel uet.ses.small_req.flags.rsvd
uet.ses.small_req.eom uet.ses.small_req.som uet.ses.small_req.req_length
uet.ses.small_req.index_generation uet.ses.small_req.job_id uet.ses.small_req.pidonfep
uet.ses.small_req.resource_index uet.ses.small_req.buffer_offset
uet.ses.med_req.flags uet.ses.med_req.flags.ver uet.ses.med_req.flags.dc
uet.ses.med_req.flags.ie uet.ses.med_req.flags.rel uet.ses.med_req.flags.hd
uet.ses.med_req.eom uet.ses.med_req.som uet.ses.med_req.req_length
uet.ses.med_req.resource_index_generation uet.ses.med_req.job_id uet.ses.med_req.pidonfep
uet.ses.med_req.resource_index uet.ses.med_req.buffer_offset uet.ses.med_req.header_data
uet.ses.med_req.initiator uet.ses.med_req.mem_key_match_bits
""")

#: Our own names for what Wireshark's dissector does not show.
OUR_FIELDS: dict[str, str] = {
    "uet.tss.epoch": "TSS epoch (upper 16 bits of uet.tss.tsc)",
    "uet.tss.decrypted": "a TSS frame's ICV verified with a key of the key file (--keys)",
    "uet.tss.encrypted": "the encrypted bytes of a TSS frame no key could open (hex)",
    "uet.pds.clear_psn_offset": "signed clear PSN offset of a request (bytes 2-3)",
    "uet.pds.ack_psn_offset": "signed ACK PSN offset (bytes 2-3; probe opaque when P)",
    "uet.pds.flags.isrod": "CP flag 0x20 isROD (reserved in Wireshark)",
    "uet.pds.flags.epsn": "ACK flag 0x40, reference provider's expected-PSN ACK",
    "uet.pds.ack.probe_opaque": "ACK with P set: bytes 2-3 as the unsigned probe opaque",
    "uet.pds.ack.epsn": "expected PSN of the reference provider's EPSN ACK (bytes 12-15)",
    "uet.pds.ack.cc_flags": "low nibble of ACK_CC byte 12",
    "uet.pds.sack_base": "SACK base PSN = CACK PSN + signed SACK offset",
    "uet.pds.nack.nccx_type": "NACK_CCX state type (4 bits)",
    "uet.pds.nack.nccx_state1": "NACK_CCX state word 1 (60 bits)",
    "uet.pds.nack.nccx_state2": "NACK_CCX state word 2 (64 bits)",
    "uet.ses.rendv_ext_hdr.read_ri_generation": "rendezvous read RI generation (8 bits)",
    "uet.ses.rsp.original_request_psn": "RSP_DATA_SMALL original request PSN",
    "uet.payload_len": "bytes after the UET headers (payload, without trailer)",
    "uet.trailer": "trailer bytes (hex), when a trailer length was given",
}

#: Lower-layer fields, named as Wireshark names them.
LOWER_FIELDS: frozenset[str] = _names("""
eth.src eth.dst ip.src ip.dst ip.dsfield.dscp ip.dsfield.ecn ip.ttl ip.id ip.proto
ipv6.src ipv6.dst ipv6.tclass.dscp ipv6.tclass.ecn ipv6.hlim ipv6.nxt
udp.srcport udp.dstport
""")

_DEFERRABLE_SEND = {int(SesOpcode.DEFERRABLE_SEND), int(SesOpcode.DEFERRABLE_TSEND)}
_RTR = int(SesOpcode.DEFERRABLE_RTR)


def _cc_state_bytes(h: PdsAckCc) -> bytes:
    if h.cc_type == 0:
        return (h.service_time.to_bytes(2, "big")
                + ((0x80 if h.restore_cwnd else 0) | h.rcv_cwnd_pend).to_bytes(1, "big")
                + h.rcvd_bytes.to_bytes(3, "big") + h.ooo_count.to_bytes(2, "big"))
    if h.cc_type == 1:
        return h.credit.to_bytes(3, "big") + bytes(3) + h.ooo_count.to_bytes(2, "big")
    return h.cc_state_raw or bytes(8)


def _pdc_tail(out: dict[str, Value], h: PdsRequest | PdsControl) -> None:
    if h.flags & 0x04:
        out["uet.pds.pdc_mode"] = (0x80 if h.use_rsv_pdc else 0) | h.psn_offset >> 8
        out["uet.pds.pdc_mode_use_rsv"] = bool(h.use_rsv_pdc)
        out["uet.pds.psn_offset"] = h.psn_offset
        out["uet.pds.start_psn"] = psn_add(h.psn, -h.psn_offset)
    else:
        out["uet.pds.dpdcid"] = h.dpdcid


def _signed16(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v & 0x8000 else v


def _pds_fields(out: dict[str, Value], h) -> None:
    f = h.flags
    t = int(h.type)
    out["uet.pds.type"] = t
    if t == 11:
        out["uet.pds.ctl_type"] = int(h.ctl_type)
    else:
        out["uet.pds.nh"] = int(h.next_hdr)
    out["uet.pds.flags"] = f
    cls = h.__class__
    if cls is PdsRequest:
        out["uet.pds.flags.retx"] = bool(f & 0x10)
        out["uet.pds.flags.ar"] = bool(f & 0x08)
        out["uet.pds.flags.syn"] = bool(f & 0x04)
        out["uet.pds.flags.rsvd_rud_rod"] = f & 0x63
        out["uet.pds.clear_psn"] = psn_add(h.psn, h.clear_psn_offset)
        out["uet.pds.clear_psn_offset"] = h.clear_psn_offset
        out["uet.pds.psn"] = h.psn
        out["uet.pds.spdcid"] = h.spdcid
        _pdc_tail(out, h)
        if t in (13, 14):
            out["uet.pds.cc_state.ccc_id"] = h.ccc_id
            out["uet.pds.cc_state.credit_target"] = h.credit_target
    elif cls is PdsAck or cls is PdsAckCc:
        out["uet.pds.flags.m"] = bool(f & 0x20)
        out["uet.pds.flags.retx"] = bool(f & 0x10)
        out["uet.pds.flags.p"] = bool(f & 0x08)
        out["uet.pds.flags.req"] = f >> 1 & 3
        # 0x40 is the reference provider's EPSN flag on plain ACKs, reserved on ACK_CC/CCX
        out["uet.pds.flags.rsvd_ack"] = f & (0x01 if cls is PdsAck else 0x41)
        aoff = _signed16(h.ack_psn_offset)
        out["uet.pds.ack_psn"] = psn_add(h.cack_psn, aoff)
        out["uet.pds.ack_psn_offset"] = aoff
        if f & 0x08:
            out["uet.pds.ack.probe_opaque"] = h.ack_psn_offset & 0xFFFF
        out["uet.pds.cack_psn"] = h.cack_psn
        out["uet.pds.spdcid"] = h.spdcid
        out["uet.pds.dpdcid"] = h.dpdcid
        if cls is PdsAck:
            out["uet.pds.flags.epsn"] = bool(f & 0x40)
            if f & 0x40:
                out["uet.pds.ack.epsn"] = h.epsn
            return
        out["uet.pds.ack.cc_type"] = h.cc_type
        out["uet.pds.ack.cc_flags"] = h.cc_flags
        out["uet.pds.ack.mpr"] = h.mpr
        out["uet.pds.ack.sack_offset"] = h.sack_psn_offset
        out["uet.pds.sack_base"] = psn_add(h.cack_psn, h.sack_psn_offset)
        out["uet.pds.ack.sack_bitmap"] = h.sack_bitmap
        out["uet.pds.ack.cc_state"] = _cc_state_bytes(h).hex()
        if h.cc_type == 0:
            out["uet.pds.ack.cc_state.service_time"] = h.service_time
            out["uet.pds.ack.cc_state.rc"] = bool(h.restore_cwnd)
            out["uet.pds.ack.cc_state.rcv_cwnd_pend"] = h.rcv_cwnd_pend
            out["uet.pds.ack.cc_state.rcvd_bytes"] = h.rcvd_bytes
            out["uet.pds.ack.cc_state.ooo_count"] = h.ooo_count
        elif h.cc_type == 1:
            out["uet.pds.ack.cc_state.credit"] = h.credit
            out["uet.pds.ack.cc_state.reserved"] = "000000"
            out["uet.pds.ack.cc_state.ooo_count"] = h.ooo_count
        if t == 9:  # ACK_CCX: bytes 32-39 (Wireshark: one 16-byte field over 24-39)
            out["uet.pds.ack.ccx_state"] = (h.ccx_state or bytes(8)).hex()
    elif cls is PdsNack:
        out["uet.pds.flags.m"] = bool(f & 0x20)
        out["uet.pds.flags.retx"] = bool(f & 0x10)
        out["uet.pds.flags.nt"] = bool(f & 0x08)
        out["uet.pds.flags.rsvd_nack"] = f & 0x47
        out["uet.pds.nack.code"] = h.nack_code
        out["uet.pds.nack.vendor_code"] = h.vendor_code
        out["uet.pds.nack.psn"] = h.nack_psn
        out["uet.pds.spdcid"] = h.spdcid
        out["uet.pds.dpdcid"] = h.dpdcid
        out["uet.pds.nack.max_recv_psn_plus_1"] = h.payload
        if t == 12:
            out["uet.pds.nack.nccx_type"] = h.nccx_type
            out["uet.pds.nack.nccx_state1"] = h.nccx_state1
            out["uet.pds.nack.nccx_state2"] = h.nccx_state2
    elif cls is PdsControl:
        out["uet.pds.flags.retx"] = bool(f & 0x10)
        out["uet.pds.flags.ar"] = bool(f & 0x08)
        out["uet.pds.flags.syn"] = bool(f & 0x04)
        out["uet.pds.flags.isrod"] = bool(f & 0x20)
        out["uet.pds.flags.rsvd_ctl"] = f & 0x43
        out["uet.pds.ctrl_probe_opaque"] = h.probe_opaque
        out["uet.pds.psn"] = h.psn
        out["uet.pds.spdcid"] = h.spdcid
        _pdc_tail(out, h)
        out["uet.pds.ctrl_payload"] = h.payload
    elif cls is PdsRudi:
        out["uet.pds.flags.m"] = bool(f & 0x20)
        out["uet.pds.flags.retx"] = bool(f & 0x10)
        out["uet.pds.flags.rsvd_rudi"] = f & 0x4F
        out["uet.pds.rudi.pkt_id"] = h.pkt_id
    elif cls is PdsUud:
        out["uet.pds.flags.rsvd_uud"] = f & 0x3F


def _req_flag_fields(out: dict[str, Value], prefix: str, flag_prefix: str, h) -> None:
    f = h.flags
    out[f"{prefix}.flags"] = (h.version & 3) << 6 | f
    out[f"{flag_prefix}.ver"] = h.version
    out[f"{flag_prefix}.dc"] = bool(f & 0x20)
    out[f"{flag_prefix}.ie"] = bool(f & 0x10)
    out[f"{flag_prefix}.rel"] = bool(f & 0x08)


def _ses_fields(out: dict[str, Value], h, ext) -> None:
    cls = h.__class__
    if cls is SesStandard:
        op = h.opcode
        out["uet.ses.std.opcode"] = op
        _req_flag_fields(out, "uet.ses.std", "uet.ses.std", h)
        out["uet.ses.std.hd"] = bool(h.flags & 0x04)
        out["uet.ses.std.eom"] = bool(h.flags & 0x02)
        out["uet.ses.std.som"] = bool(h.flags & 0x01)
        out["uet.ses.std.message_id"] = h.message_id
        out["uet.ses.std.index_generation"] = h.ri_generation
        out["uet.ses.std.job_id"] = h.job_id
        out["uet.ses.std.pidonfep"] = h.pid_on_fep
        out["uet.ses.std.resource_index"] = h.resource_index
        if op in _DEFERRABLE_SEND:
            out["uet.ses.std.restart_token"] = h.buffer_offset
        else:
            out["uet.ses.std.buffer_offset"] = h.buffer_offset
        out["uet.ses.std.initiator"] = h.initiator
        if op == _RTR:
            out["uet.ses.std.restart_token"] = h.memory_key
        else:
            out["uet.ses.std.mem_key_match_bits"] = h.memory_key
        if h.flags & 0x01:
            out["uet.ses.std.header_data"] = h.header_data
        else:
            out["uet.ses.std.payload_length"] = h.payload_length
            out["uet.ses.std.message_offset"] = h.message_offset
        out["uet.ses.std.request_length"] = h.request_length
    elif cls is SesMedium:
        out["uet.ses.std.opcode"] = h.opcode
        _req_flag_fields(out, "uet.ses.med_req", "uet.ses.med_req.flags", h)
        out["uet.ses.med_req.flags.hd"] = bool(h.flags & 0x04)
        out["uet.ses.med_req.eom"] = bool(h.flags & 0x02)
        out["uet.ses.med_req.som"] = bool(h.flags & 0x01)
        out["uet.ses.med_req.req_length"] = h.request_length
        out["uet.ses.med_req.resource_index_generation"] = h.ri_generation
        out["uet.ses.med_req.job_id"] = h.job_id
        out["uet.ses.med_req.pidonfep"] = h.pid_on_fep
        out["uet.ses.med_req.resource_index"] = h.resource_index
        if h.flags & 0x04:
            out["uet.ses.med_req.header_data"] = h.buffer_offset
        else:
            out["uet.ses.med_req.buffer_offset"] = h.buffer_offset
        out["uet.ses.med_req.initiator"] = h.initiator
        out["uet.ses.med_req.mem_key_match_bits"] = h.memory_key
    elif cls is SesSmall:
        out["uet.ses.std.opcode"] = h.opcode
        _req_flag_fields(out, "uet.ses.small_req", "uet.ses.small_req.flags", h)
        out["uet.ses.small_req.flags.rsvd"] = h.flags >> 2 & 1
        out["uet.ses.small_req.eom"] = bool(h.flags & 0x02)
        out["uet.ses.small_req.som"] = bool(h.flags & 0x01)
        out["uet.ses.small_req.req_length"] = h.request_length
        out["uet.ses.small_req.index_generation"] = h.ri_generation
        out["uet.ses.small_req.job_id"] = h.job_id
        out["uet.ses.small_req.pidonfep"] = h.pid_on_fep
        out["uet.ses.small_req.resource_index"] = h.resource_index
        out["uet.ses.small_req.buffer_offset"] = h.buffer_offset
    else:
        out["uet.ses.rsp.list"] = h.list
        out["uet.ses.rsp.opcode"] = h.opcode
        out["uet.ses.rsp.ver"] = h.version
        out["uet.ses.rsp.return_code"] = h.return_code
        if cls is SesResponse:
            out["uet.ses.rsp.message_id"] = h.message_id
            out["uet.ses.rsp.resource_index_gen"] = h.ri_generation
            out["uet.ses.rsp.job_id"] = h.job_id
            out["uet.ses.rsp.mod_length"] = h.modified_length
        elif cls is SesResponseData:
            out["uet.ses.rsp.message_id"] = h.message_id
            out["uet.ses.rsp.job_id"] = h.job_id
            out["uet.ses.rsp.read_req_message_id"] = h.read_request_message_id
            out["uet.ses.rsp.payload_length"] = h.payload_length
            out["uet.ses.rsp.mod_length"] = h.modified_length
            out["uet.ses.rsp.message_offset"] = h.message_offset
        elif cls is SesResponseDataSmall:
            out["uet.ses.rsp.payload_length"] = h.payload_length
            out["uet.ses.rsp.job_id"] = h.job_id
            out["uet.ses.rsp.original_request_psn"] = h.original_request_psn
    if ext is None:
        return
    ecls = ext.__class__
    if ecls is AtomicExt:
        out["uet.ses.atomic_op_ext_hdr.atomic_opcode"] = ext.atomic_opcode
        out["uet.ses.atomic_op_ext_hdr.atomic_data_type"] = ext.atomic_datatype
        out["uet.ses.atomic_op_ext_hdr.sem_ctl"] = ext.semantic_control
    elif ecls is CasExt:
        out["uet.ses.comp_swap_ext_hdr.atomic_opcode"] = ext.atomic_opcode
        out["uet.ses.comp_swap_ext_hdr.atomic_data_type"] = ext.atomic_datatype
        out["uet.ses.comp_swap_ext_hdr.sem_ctl"] = ext.semantic_control
        # FT_BYTES in Wireshark: 16 bytes of hex, like every byte field (and safe in JSON)
        out["uet.ses.comp_swap_ext_hdr.comp_value"] = f"{ext.compare_value:032x}"
        out["uet.ses.comp_swap_ext_hdr.swap_value"] = f"{ext.swap_value:032x}"
    elif ecls is RendezvousExt:
        out["uet.ses.rendv_ext_hdr.eager_length"] = ext.eager_length
        out["uet.ses.rendv_ext_hdr.read_ri_generation"] = ext.ri_generation
        out["uet.ses.rendv_ext_hdr.read_pid_on_fep"] = ext.pid_on_fep
        out["uet.ses.rendv_ext_hdr.read_resource_index"] = ext.resource_index
        out["uet.ses.rendv_ext_hdr.read_offset"] = ext.read_offset
        out["uet.ses.rendv_ext_hdr.read_match_bits"] = ext.read_memory_key


def frame_fields(frame: Frame) -> dict[str, Value]:
    """Every field of ``frame`` as a flat ``{wireshark-style name: value}`` mapping."""
    out: dict[str, Value] = {"eth.src": frame.src_mac, "eth.dst": frame.dst_mac}
    udp = frame.encap == "udp"
    if frame.ipv6:
        out["ipv6.src"] = frame.src_ip
        out["ipv6.dst"] = frame.dst_ip
        out["ipv6.tclass.dscp"] = frame.dscp
        out["ipv6.tclass.ecn"] = frame.ecn
        out["ipv6.hlim"] = frame.ttl
        out["ipv6.nxt"] = 17 if udp else frame.ip_proto
    else:
        out["ip.src"] = frame.src_ip
        out["ip.dst"] = frame.dst_ip
        out["ip.dsfield.dscp"] = frame.dscp
        out["ip.dsfield.ecn"] = frame.ecn
        out["ip.ttl"] = frame.ttl
        out["ip.id"] = frame.ip_id
        out["ip.proto"] = 17 if udp else frame.ip_proto
    if udp:
        out["udp.srcport"] = frame.ev
        out["udp.dstport"] = frame.udp_dport
    else:
        out["uet.pds.entropy"] = frame.ev
        out["uet.pds.entropy.rsvd"] = 0
    tss = frame.tss
    if tss is not None:
        out["uet.tss.type"] = 1
        out["uet.tss.sp"] = bool(tss.sp)
        out["uet.tss.an"] = tss.an
        out["uet.tss.sdi"] = tss.sdi
        if tss.sp:
            out["uet.tss.ssi"] = tss.ssi
        out["uet.tss.tsc"] = tss.epoch << 48 | tss.tsc
        out["uet.tss.epoch"] = tss.epoch
    _pds_fields(out, frame.pds)
    if frame.ses is not None:
        _ses_fields(out, frame.ses, frame.ext)
    out["uet.payload_len"] = len(frame.payload)
    if frame.trailer:
        out["uet.trailer"] = frame.trailer.hex()
    return out


def all_field_names() -> frozenset[str]:
    """Every name :func:`frame_fields` may emit."""
    return WS_FIELDS | frozenset(OUR_FIELDS) | LOWER_FIELDS
