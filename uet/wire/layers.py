"""Scapy layers for every UET header: the reference the fast codec is tested against.

Layers live in :mod:`uet.wire.layers_pds` (entropy, TSS, PDS) and
:mod:`uet.wire.layers_ses` (SES requests, extensions, responses); this module re-exports
them, installs the dissection rules and scapy bindings, and converts between scapy packets
and :mod:`uet.wire.records`.

Dissection (same rules as the codec, from :mod:`uet.wire.rules`):

* UDP destination port 4793 -> :class:`UET` (a dispatcher); IP protocol 253 (IPv4) /
  next header 253 (IPv6) -> :class:`UETEntropy` then the same dispatch. Other protocol
  numbers for native-IP mode: :func:`bind_native_ip_proto`.
* The first 5 bits after UDP / the entropy header: 1 = TSS (then PDS), else the PDS type.
* PDS type + next_hdr choose the SES header; the SES opcode (and for atomics the atomic
  opcode) chooses the extension header; anything after that is ``Raw`` payload.
* Unknown or inconsistent combinations and truncated headers give a
  :class:`UETDecodeError` layer holding the reason, never a silent ``Raw``.

Building: ``Ether()/IP()/UDP()/UETPdsReq()/UETSesStd()`` fills in dport 4793 and the PDS
next_hdr by binding; :func:`frame_to_scapy` builds the exact packet of a record frame.
"""

from __future__ import annotations

from typing import Any

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_top_down

from uet.wire import rules
from uet.wire.constants import UET_DEFAULT_IP_PROTO, UET_UDP_PORT
from uet.wire.errors import DecodeError, UnknownType
from uet.wire.layers_base import Err, UETDecodeError, UETEmptyError, UETLayer, set_top_rule
from uet.wire.layers_pds import (
    PDS_CLASSES,
    UETEntropy,
    UETPds,
    UETPdsAck,
    UETPdsAckCc,
    UETPdsAckCcx,
    UETPdsCcReq,
    UETPdsCp,
    UETPdsNack,
    UETPdsNackCcx,
    UETPdsReq,
    UETPdsRudi,
    UETPdsUud,
    UETTss,
)
from uet.wire.layers_ses import (
    SES_CLASSES,
    UETAtomicExt,
    UETCasExt,
    UETRendezvousExt,
    UETSesExt,
    UETSesMedium,
    UETSesRequest,
    UETSesResponse,
    UETSesRsp,
    UETSesRspData,
    UETSesRspDataSmall,
    UETSesSmall,
    UETSesStd,
)
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
    TssHeader,
)

__all__ = [
    "UET", "UETDecodeError", "UETLayer", "UETEntropy", "UETTss", "UETPds", "UETPdsReq",
    "UETPdsCcReq", "UETPdsRudi", "UETPdsUud", "UETPdsAck", "UETPdsAckCc", "UETPdsAckCcx",
    "UETPdsNack", "UETPdsNackCcx", "UETPdsCp", "UETSesRequest", "UETSesStd", "UETSesMedium",
    "UETSesSmall", "UETSesExt", "UETAtomicExt", "UETCasExt", "UETRendezvousExt",
    "UETSesResponse", "UETSesRsp", "UETSesRspData", "UETSesRspDataSmall",
    "uet_to_scapy", "frame_to_scapy", "scapy_to_uet", "scapy_to_frame", "dissect_frame",
    "bind_native_ip_proto",
]

_PDS_NAMES = {2: "RUD_REQ", 3: "ROD_REQ", 4: "RUDI_REQ", 5: "RUDI_RESP", 6: "UUD_REQ",
              7: "ACK", 8: "ACK_CC", 9: "ACK_CCX", 10: "NACK", 11: "CP", 12: "NACK_CCX",
              13: "RUD_CC_REQ", 14: "ROD_CC_REQ"}
_SES_NAMES = {1: "REQ_SMALL", 2: "REQ_MEDIUM", 3: "REQ_STD", 4: "RSP", 5: "RSP_DATA",
              6: "RSP_DATA_SMALL"}

# --------------------------------------------------------------------------- rules


def _check_pds(word: int, after_tss: bool) -> Err | None:
    t = word >> 11
    if t not in PDS_CLASSES:
        if t == 1:
            return Err("InconsistentHeader", "pds", "TSS header after a TSS header")
        return Err("UnknownType", "pds", f"unknown PDS type {t}")
    nh = word >> 7 & 0xF
    if t == 11:
        if nh not in rules.KNOWN_CTL_TYPES:
            return Err("UnknownType", "pds", f"unknown control packet type {nh}")
    elif (t, nh) not in rules.ALLOWED_PAIRS:
        if nh > 6:
            return Err("UnknownType", "pds", f"unknown next header {nh}")
        return Err("InconsistentHeader", "pds", f"next header {_SES_NAMES.get(nh, 'NONE')} "
                   f"not allowed after {_PDS_NAMES[t]}")
    return None


def _classify(s: bytes, after_tss: bool) -> type[Packet] | Err:
    """Class of the first header in ``s`` (TSS or PDS), or why there is none."""
    n = len(s)
    if n < 2:
        return Err("TruncatedHeader", "pds", f"PDS header needs at least 2 bytes, {n} left")
    word = s[0] << 8 | s[1]
    if word >> 11 == 1 and not after_tss:
        need = 16 if s[0] & 0x04 else 12
        if n < need:
            return Err("TruncatedHeader", "tss", f"TSS header needs {need} bytes, {n} left")
        return UETTss
    err = _check_pds(word, after_tss)
    if err:
        return err
    t = word >> 11
    need = rules.pds_header_len(t, word & 0x7F) or 0  # a known type: _check_pds passed
    if n < need:
        return Err("TruncatedHeader", "pds", f"{_PDS_NAMES[t]} header needs {need} bytes, "
                   f"{n} left")
    return PDS_CLASSES[t]


def _rule_top(self: Packet, s: bytes) -> type[Packet] | Err:
    return _classify(s, False)


def _rule_after_tss(self: Packet, s: bytes) -> type[Packet] | Err:
    return _classify(s, True)


def _rule_after_pds(self: Packet, s: bytes) -> type[Packet] | Err | None:
    t = int(self.type)
    if t == 11:
        return None
    nh = int(self.next_hdr)
    if not nh:
        return None
    err = _check_pds(t << 11 | nh << 7, False)
    if err:
        return err
    need = rules.SES_LEN[nh]
    if len(s) < need:
        return Err("TruncatedHeader", "ses", f"SES {_SES_NAMES[nh]} header needs {need} "
                   f"bytes, {len(s)} left")
    if nh >= 4 and s[0] & 0x3F not in rules.RSP_OPCODES[nh]:
        return Err("InconsistentHeader", "ses", f"response opcode {s[0] & 0x3F} not allowed "
                   f"in {_SES_NAMES[nh]}")
    return SES_CLASSES[nh]


_REQ_NH: dict[type[Packet], int] = {UETSesSmall: 1, UETSesMedium: 2, UETSesStd: 3}


def _rule_after_request(self: Packet, s: bytes) -> type[Packet] | Err | None:
    kind = rules.ext_kind(_REQ_NH[self.__class__], int(self.opcode))
    if kind == rules.EXT_NONE:
        return None
    if kind == rules.EXT_ATOMIC:
        if not s:
            return Err("TruncatedHeader", "ext", "atomic extension header needs 4 bytes, 0 left")
        kind = rules.atomic_ext_kind(s[0])
    need = rules.EXT_LEN[kind]
    if len(s) < need:
        what = {rules.EXT_ATOMIC: "atomic", rules.EXT_CAS: "compare-and-swap",
                rules.EXT_RENDEZVOUS: "rendezvous"}[kind]
        return Err("TruncatedHeader", "ext", f"{what} extension header needs {need} bytes, "
                   f"{len(s)} left")
    return {rules.EXT_ATOMIC: UETAtomicExt, rules.EXT_CAS: UETCasExt,
            rules.EXT_RENDEZVOUS: UETRendezvousExt}[kind]


def _rule_payload(self: Packet, s: bytes) -> None:
    return None


UETEntropy.uet_next = _rule_top
UETTss.uet_next = _rule_after_tss
_layer: type[Packet]
for _layer in set(PDS_CLASSES.values()):
    _layer.uet_next = _rule_after_pds
for _layer in (UETSesStd, UETSesMedium, UETSesSmall):
    _layer.uet_next = _rule_after_request
for _layer in (UETAtomicExt, UETCasExt, UETRendezvousExt, UETSesRsp, UETSesRspData,
               UETSesRspDataSmall):
    _layer.uet_next = _rule_payload
set_top_rule(lambda s: _classify(s, False))


class UET(Packet):
    """Dispatcher: ``UET(data)`` returns the first UET layer of ``data`` (the bytes after
    UDP): :class:`UETTss`, a PDS layer, or :class:`UETDecodeError`."""

    name = "UET"

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        if not _pkt:
            return UETEmptyError
        r = _classify(bytes(_pkt), False)
        return UETDecodeError if isinstance(r, Err) else r


# --------------------------------------------------------------------------- bindings


def _bind_front(lower: type[Packet], upper: type[Packet], **fval: int) -> None:
    """Dissection binding tried before all others (an EV in the UDP source port may equal
    a well-known port such as 53, which must not win over dport 4793)."""
    lower.payload_guess = [(fval, upper)] + [g for g in lower.payload_guess
                                             if g != (fval, upper)]


def bind_native_ip_proto(proto: int = UET_DEFAULT_IP_PROTO) -> None:
    """Dissect IPv4 protocol / IPv6 next header ``proto`` as native-IP UET (entropy
    header first) and use it when building ``IP()/UETEntropy()``."""
    _bind_front(IP, UETEntropy, proto=proto)
    _bind_front(IPv6, UETEntropy, nh=proto)
    bind_top_down(IP, UETEntropy, proto=proto)
    bind_top_down(IPv6, UETEntropy, nh=proto)


_bind_front(UDP, UET, dport=UET_UDP_PORT)
_over_udp: list[type[Packet]] = [UETTss, *set(PDS_CLASSES.values())]
for _bound in _over_udp:
    bind_top_down(UDP, _bound, dport=UET_UDP_PORT)
bind_native_ip_proto(UET_DEFAULT_IP_PROTO)
for _pds in set(PDS_CLASSES.values()) - {UETPdsCp}:
    for _nh, _ses in SES_CLASSES.items():
        bind_top_down(_pds, _ses, next_hdr=_nh)


# --------------------------------------------------------------------------- records -> scapy


def _pds_to_scapy(h: Any) -> Packet:
    cls = h.__class__
    if cls is PdsRequest:
        t = int(h.type)
        kw: dict[str, Any] = dict(type=t, next_hdr=int(h.next_hdr), flags=h.flags,
                                  clear_psn_offset=h.clear_psn_offset, psn=h.psn,
                                  spdcid=h.spdcid)
        if h.flags & 0x04:
            kw.update(use_rsv_pdc=int(h.use_rsv_pdc), pdc_info_rsvd=0, psn_offset=h.psn_offset)
        else:
            kw["dpdcid"] = h.dpdcid
        if t in (13, 14):
            return UETPdsCcReq(ccc_id=h.ccc_id, credit_target=h.credit_target, **kw)
        return UETPdsReq(**kw)
    if cls is PdsAck or cls is PdsAckCc:
        kw = dict(type=int(h.type), next_hdr=int(h.next_hdr), flags=h.flags,
                  cack_psn=h.cack_psn, spdcid=h.spdcid, dpdcid=h.dpdcid)
        if h.flags & 0x08:
            kw["probe_opaque"] = h.ack_psn_offset & 0xFFFF
        else:
            kw["ack_psn_offset"] = h.ack_psn_offset
        if cls is PdsAck:
            if h.flags & 0x40:
                kw["epsn"] = h.epsn
            return UETPdsAck(**kw)
        kw.update(cc_type=h.cc_type, cc_flags=h.cc_flags, mpr=h.mpr,
                  sack_psn_offset=h.sack_psn_offset, sack_bitmap=h.sack_bitmap)
        if h.cc_type == 0:
            kw.update(service_time=h.service_time, restore_cwnd=int(h.restore_cwnd),
                      rcv_cwnd_pend=h.rcv_cwnd_pend, rcvd_bytes=h.rcvd_bytes,
                      ooo_count=h.ooo_count)
        elif h.cc_type == 1:
            kw.update(credit=h.credit, cc_rsvd=0, ooo_count=h.ooo_count)
        else:
            kw["cc_state_raw"] = h.cc_state_raw or bytes(8)
        if int(h.type) == 9:
            return UETPdsAckCcx(ccx_state=h.ccx_state or bytes(8), **kw)
        return UETPdsAckCc(**kw)
    if cls is PdsNack:
        kw = dict(type=int(h.type), next_hdr=int(h.next_hdr), flags=h.flags,
                  nack_code=h.nack_code, vendor_code=h.vendor_code, nack_psn=h.nack_psn,
                  spdcid=h.spdcid, dpdcid=h.dpdcid, nack_payload=h.payload)
        if int(h.type) == 12:
            return UETPdsNackCcx(nccx_type=h.nccx_type, nccx_state1=h.nccx_state1,
                                 nccx_state2=h.nccx_state2, **kw)
        return UETPdsNack(**kw)
    if cls is PdsControl:
        kw = dict(type=11, ctl_type=int(h.ctl_type), flags=h.flags,
                  probe_opaque=h.probe_opaque, psn=h.psn, spdcid=h.spdcid,
                  ctl_payload=h.payload)
        if h.flags & 0x04:
            kw.update(use_rsv_pdc=int(h.use_rsv_pdc), pdc_info_rsvd=0, psn_offset=h.psn_offset)
        else:
            kw["dpdcid"] = h.dpdcid
        return UETPdsCp(**kw)
    if cls is PdsRudi:
        return UETPdsRudi(type=int(h.type), next_hdr=int(h.next_hdr), flags=h.flags, rsvd=0,
                          pkt_id=h.pkt_id)
    if cls is PdsUud:
        return UETPdsUud(type=6, next_hdr=int(h.next_hdr), flags=h.flags, rsvd=0)
    raise TypeError(f"not a PDS record: {h!r}")


def _req_common(h: Any) -> dict[str, Any]:
    return dict(rsvd0=0, opcode=h.opcode, version=h.version, flags=h.flags,
                ri_generation=h.ri_generation, job_id=h.job_id, rsvd_pid=0,
                pid_on_fep=h.pid_on_fep, rsvd_ri=0, resource_index=h.resource_index)


def _ses_to_scapy(h: Any) -> Packet:
    cls = h.__class__
    if cls is SesStandard:
        kw = _req_common(h)
        kw.update(message_id=h.message_id, buffer_offset=h.buffer_offset,
                  initiator=h.initiator, memory_key=h.memory_key,
                  request_length=h.request_length)
        if h.flags & 0x01:
            kw["header_data"] = h.header_data
        else:
            kw.update(rsvd_len=0, payload_length=h.payload_length,
                      message_offset=h.message_offset)
        return UETSesStd(**kw)
    if cls is SesMedium:
        return UETSesMedium(rsvd_len=0, request_length=h.request_length,
                            buffer_offset=h.buffer_offset, initiator=h.initiator,
                            memory_key=h.memory_key, **_req_common(h))
    if cls is SesSmall:
        return UETSesSmall(rsvd_len=0, request_length=h.request_length,
                           buffer_offset=h.buffer_offset, **_req_common(h))
    head = dict(list=h.list, opcode=h.opcode, version=h.version, return_code=h.return_code)
    if cls is SesResponse:
        return UETSesRsp(message_id=h.message_id, ri_generation=h.ri_generation,
                         job_id=h.job_id, modified_length=h.modified_length, **head)
    if cls is SesResponseData:
        return UETSesRspData(message_id=h.message_id, rsvd=0, job_id=h.job_id,
                             read_request_message_id=h.read_request_message_id, rsvd2=0,
                             payload_length=h.payload_length,
                             modified_length=h.modified_length,
                             message_offset=h.message_offset, **head)
    if cls is SesResponseDataSmall:
        return UETSesRspDataSmall(rsvd=0, payload_length=h.payload_length, rsvd2=0,
                                  job_id=h.job_id, original_request_psn=h.original_request_psn,
                                  **head)
    raise TypeError(f"not an SES record: {h!r}")


def _ext_to_scapy(h: Any) -> Packet:
    cls = h.__class__
    if cls is AtomicExt:
        return UETAtomicExt(atomic_opcode=h.atomic_opcode, atomic_datatype=h.atomic_datatype,
                            semantic_control=h.semantic_control, rsvd=0)
    if cls is CasExt:
        return UETCasExt(atomic_opcode=h.atomic_opcode, atomic_datatype=h.atomic_datatype,
                         semantic_control=h.semantic_control, rsvd=0,
                         compare_value=h.compare_value, swap_value=h.swap_value)
    if cls is RendezvousExt:
        return UETRendezvousExt(eager_length=h.eager_length, ri_generation=h.ri_generation,
                                pid_on_fep=h.pid_on_fep, resource_index=h.resource_index,
                                read_offset=h.read_offset, read_memory_key=h.read_memory_key)
    raise TypeError(f"not an extension record: {h!r}")


def uet_to_scapy(frame: Frame) -> Packet:
    """Scapy packet of the UET part of ``frame``: [TSS] / PDS / [SES [/ ext]] / Raw."""
    layers: list[Packet] = []
    if frame.tss is not None:
        t = frame.tss
        kw: dict[str, Any] = dict(type=1, sp=int(t.sp), rsvd=0, an=t.an, sdi=t.sdi,
                                  epoch=t.epoch, tsc=t.tsc)
        if t.sp:
            kw["ssi"] = t.ssi
        layers.append(UETTss(**kw))
    layers.append(_pds_to_scapy(frame.pds))
    if frame.ses is not None:
        layers.append(_ses_to_scapy(frame.ses))
        if frame.ext is not None:
            layers.append(_ext_to_scapy(frame.ext))
    data = frame.payload + frame.trailer
    if data:
        layers.append(Raw(load=data))
    pkt = layers[0]
    for layer in layers[1:]:
        pkt = pkt / layer
    return pkt


def frame_to_scapy(frame: Frame) -> Packet:
    """Scapy packet of the whole frame with every address and field explicit (so scapy
    does no route or ARP lookup): Ether / IP (DF, id) or IPv6 / UDP or entropy / UET."""
    tos = (frame.dscp & 0x3F) << 2 | (frame.ecn & 3)
    udp = frame.encap == "udp"
    proto = 17 if udp else frame.ip_proto
    eth = Ether(dst=frame.dst_mac, src=frame.src_mac)
    l3: Packet
    l4: Packet
    if frame.ipv6:
        l3 = IPv6(version=6, tc=tos, fl=0, nh=proto, hlim=frame.ttl, src=frame.src_ip,
                  dst=frame.dst_ip)
        csum = None
    else:
        l3 = IP(version=4, ihl=5, tos=tos, id=frame.ip_id, flags="DF", frag=0, ttl=frame.ttl,
                proto=proto, src=frame.src_ip, dst=frame.dst_ip)
        csum = None if frame.udp_checksum else 0
    if udp:
        l4 = UDP(sport=frame.ev, dport=frame.udp_dport, chksum=csum)
    else:
        l4 = UETEntropy(entropy=frame.ev, rsvd=0)
    return eth / l3 / l4 / uet_to_scapy(frame)


# --------------------------------------------------------------------------- scapy -> records


def _scapy_to_pds(p: Packet) -> Any:
    flags = int(p.flags)
    if isinstance(p, UETPdsReq):  # includes the CC form
        syn = bool(flags & 0x04)
        cc = isinstance(p, UETPdsCcReq)
        return PdsRequest(int(p.type), int(p.next_hdr), flags, p.clear_psn_offset, p.psn,
                          p.spdcid, 0 if syn else p.dpdcid,
                          bool(p.use_rsv_pdc) if syn else False, p.psn_offset if syn else 0,
                          p.ccc_id if cc else 0, p.credit_target if cc else 0)
    if isinstance(p, UETPdsAck | UETPdsAckCc):
        aoff = p.probe_opaque if flags & 0x08 else p.ack_psn_offset
        if isinstance(p, UETPdsAck):
            return PdsAck(int(p.next_hdr), flags, aoff, p.cack_psn, p.spdcid, p.dpdcid,
                          p.epsn if flags & 0x40 else 0)
        cc = p.cc_type
        rec = PdsAckCc(int(p.type), int(p.next_hdr), flags, aoff, p.cack_psn, p.spdcid,
                       p.dpdcid, cc, p.cc_flags, p.mpr, p.sack_psn_offset, p.sack_bitmap)
        if cc == 0:
            rec.service_time, rec.restore_cwnd = p.service_time, bool(p.restore_cwnd)
            rec.rcv_cwnd_pend, rec.rcvd_bytes = p.rcv_cwnd_pend, p.rcvd_bytes
            rec.ooo_count = p.ooo_count
        elif cc == 1:
            rec.credit, rec.ooo_count = p.credit, p.ooo_count
        else:
            rec.cc_state_raw = bytes(p.cc_state_raw)
        if isinstance(p, UETPdsAckCcx):
            rec.ccx_state = bytes(p.ccx_state)
        return rec
    if isinstance(p, UETPdsNack):
        ccx = isinstance(p, UETPdsNackCcx)
        return PdsNack(int(p.type), int(p.next_hdr), flags, p.nack_code, p.vendor_code,
                       p.nack_psn, p.spdcid, p.dpdcid, p.nack_payload,
                       p.nccx_type if ccx else 0, p.nccx_state1 if ccx else 0,
                       p.nccx_state2 if ccx else 0)
    if isinstance(p, UETPdsCp):
        syn = bool(flags & 0x04)
        return PdsControl(int(p.ctl_type), flags, p.probe_opaque, p.psn, p.spdcid,
                          0 if syn else p.dpdcid, bool(p.use_rsv_pdc) if syn else False,
                          p.psn_offset if syn else 0, p.ctl_payload)
    if isinstance(p, UETPdsRudi):
        return PdsRudi(int(p.type), int(p.next_hdr), flags, p.pkt_id)
    if isinstance(p, UETPdsUud):
        return PdsUud(int(p.next_hdr), flags)
    raise TypeError(f"not a PDS layer: {p!r}")


def _scapy_to_ses(p: Packet) -> Any:
    if isinstance(p, UETSesStd):
        som = bool(int(p.flags) & 1)
        return SesStandard(int(p.opcode), p.version, int(p.flags), p.message_id,
                           p.ri_generation, p.job_id, p.pid_on_fep, p.resource_index,
                           p.buffer_offset, p.initiator, p.memory_key,
                           p.header_data if som else 0, 0 if som else p.payload_length,
                           0 if som else p.message_offset, p.request_length)
    if isinstance(p, UETSesMedium):
        return SesMedium(int(p.opcode), p.version, int(p.flags), p.request_length,
                         p.ri_generation, p.job_id, p.pid_on_fep, p.resource_index,
                         p.buffer_offset, p.initiator, p.memory_key)
    if isinstance(p, UETSesSmall):
        return SesSmall(int(p.opcode), p.version, int(p.flags), p.request_length,
                        p.ri_generation, p.job_id, p.pid_on_fep, p.resource_index,
                        p.buffer_offset)
    head = (int(p.list), int(p.opcode), p.version, int(p.return_code))
    if isinstance(p, UETSesRsp):
        return SesResponse(*head, p.message_id, p.ri_generation, p.job_id, p.modified_length)
    if isinstance(p, UETSesRspData):
        return SesResponseData(*head, p.message_id, p.job_id, p.read_request_message_id,
                               p.payload_length, p.modified_length, p.message_offset)
    if isinstance(p, UETSesRspDataSmall):
        return SesResponseDataSmall(*head, p.payload_length, p.job_id, p.original_request_psn)
    raise TypeError(f"not an SES layer: {p!r}")


def _scapy_to_ext(p: Packet) -> Any:
    if isinstance(p, UETCasExt):
        return CasExt(int(p.atomic_opcode), int(p.atomic_datatype), int(p.semantic_control),
                      p.compare_value, p.swap_value)
    if isinstance(p, UETAtomicExt):
        return AtomicExt(int(p.atomic_opcode), int(p.atomic_datatype), int(p.semantic_control))
    return RendezvousExt(p.eager_length, p.ri_generation, p.pid_on_fep, p.resource_index,
                         p.read_offset, p.read_memory_key)


def _raise_if_error(layer: Packet) -> None:
    if isinstance(layer, UETDecodeError):
        raise layer.as_exception()


def scapy_to_uet(pkt: Packet, trailer_len: int = 0, **frame_fields: Any) -> Frame:
    """Record frame of a dissected scapy packet's UET part (from its first TSS / PDS
    layer). Raises the :class:`DecodeError` of a :class:`UETDecodeError` layer."""
    layer = pkt
    while layer and not isinstance(layer, UETTss | UETPds | UETDecodeError):
        layer = layer.payload
    if not layer:
        raise UnknownType("frame", 0, "no UET layer in this packet")
    _raise_if_error(layer)
    tss = None
    if isinstance(layer, UETTss):
        tss = TssHeader(bool(layer.sp), layer.an, layer.sdi, layer.ssi if layer.sp else 0,
                        layer.epoch, layer.tsc)
        layer = layer.payload
        _raise_if_error(layer)
    pds = _scapy_to_pds(layer)
    layer = layer.payload
    _raise_if_error(layer)
    ses = ext = None
    if isinstance(layer, UETSesRequest | UETSesResponse):
        ses = _scapy_to_ses(layer)
        layer = layer.payload
        _raise_if_error(layer)
        if isinstance(layer, UETSesExt):
            ext = _scapy_to_ext(layer)
            layer = layer.payload
            _raise_if_error(layer)
    rest = bytes(layer) if layer else b""
    cut = len(rest) - trailer_len
    if cut < 0:
        from uet.wire.errors import BadLength

        raise BadLength("trailer", 0, f"trailer of {trailer_len} bytes does not fit")
    return Frame(pds, ses, ext, rest[:cut], tss=tss, trailer=rest[cut:], **frame_fields)


def dissect_frame(data: bytes | bytearray) -> Packet:
    """``Ether(data)``; scapy's own exceptions on frames too short for its Ethernet or IP
    layers become a :class:`DecodeError` (UET layers never raise: they yield
    :class:`UETDecodeError`)."""
    try:
        return Ether(bytes(data))
    except Exception as exc:
        raise DecodeError("ethernet", 0, f"scapy could not dissect the frame: {exc}") from None


def scapy_to_frame(pkt: Packet, trailer_len: int = 0) -> Frame:
    """Record frame of a dissected Ether / IP|IPv6 / UDP|entropy / UET scapy packet.

    Raises :class:`DecodeError` (only) when the packet is not a decodable UET frame.
    """
    try:
        return _scapy_to_frame(pkt, trailer_len)
    except DecodeError:
        raise
    except Exception as exc:  # partially dissected lower layers (None fields, ...)
        raise DecodeError("frame", 0, f"not a decodable UET frame ({exc!r})") from None


def _scapy_to_frame(pkt: Packet, trailer_len: int) -> Frame:
    if not isinstance(pkt, Ether):
        raise DecodeError("ethernet", 0, "not an Ethernet frame")
    l3 = pkt.payload
    kw: dict[str, Any] = dict(src_mac=pkt.src, dst_mac=pkt.dst)
    if isinstance(l3, IP):
        kw.update(src_ip=l3.src, dst_ip=l3.dst, dscp=l3.tos >> 2, ecn=l3.tos & 3, ttl=l3.ttl,
                  ip_id=l3.id)
    elif isinstance(l3, IPv6):
        kw.update(src_ip=l3.src, dst_ip=l3.dst, dscp=l3.tc >> 2, ecn=l3.tc & 3, ttl=l3.hlim)
    else:
        raise UnknownType("ethernet", 12, "not IPv4 or IPv6")
    l4 = l3.payload
    if isinstance(l4, UDP):
        kw.update(ev=l4.sport, udp_dport=l4.dport, encap="udp",
                  udp_checksum=bool(l4.chksum) or isinstance(l3, IPv6))
    elif isinstance(l4, UETEntropy):
        kw.update(ev=l4.entropy, encap="ip", ip_proto=l3.proto if isinstance(l3, IP) else l3.nh)
    else:
        raise UnknownType("ip", 14, "neither UDP nor native-IP UET")
    return scapy_to_uet(l4.payload, trailer_len, **kw)
