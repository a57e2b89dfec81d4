"""The scapy reference for RoCEv2 frames: ``scapy.contrib.roce`` (BTH with its ICRC, AETH,
the CNP padding) plus the RETH and ImmDt headers it lacks, bound by BTH opcode.

:func:`frame_to_scapy` builds the scapy packet of a :class:`~uet.roce.records.RoceFrame`
(scapy computes the ICRC), :func:`scapy_to_frame` reads one back; the property tests hold
:mod:`uet.roce.codec` to both, byte for byte and field by field. The payload's pad bytes
(BTH pad count) are part of scapy's ``Raw`` load.
"""

from __future__ import annotations

from typing import Any

from scapy.contrib.roce import AETH, BTH, CNPPadding
from scapy.fields import IntField, XIntField, XLongField
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers

from uet.roce.constants import AETH_OPCODES, CNP_PAD_LEN, IMM_OPCODES, RETH_OPCODES, Opcode
from uet.roce.records import Aeth, Bth, Reth, RoceFrame

__all__ = ["BTH", "AETH", "RETH", "ImmDt", "CNPPadding", "frame_to_scapy", "scapy_to_frame"]


class RETH(Packet):
    """RDMA extended transport header (IBTA 9.3.3): virtual address, R_Key, DMA length."""

    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dma_len", 0)]

    def guess_payload_class(self, payload: bytes) -> Any:
        under = self.underlayer
        if isinstance(under, BTH) and under.opcode in IMM_OPCODES:
            return ImmDt
        return Raw


class ImmDt(Packet):
    """Immediate data extended transport header (IBTA 9.3.5): 4 bytes."""

    name = "ImmDt"
    fields_desc = [XIntField("imm", 0)]

    def guess_payload_class(self, payload: bytes) -> Any:
        return Raw


for _op in RETH_OPCODES:
    bind_layers(BTH, RETH, opcode=int(_op))
for _op in IMM_OPCODES - RETH_OPCODES:
    bind_layers(BTH, ImmDt, opcode=int(_op))
for _op in AETH_OPCODES - {Opcode.ACKNOWLEDGE}:  # contrib binds ACKNOWLEDGE itself
    bind_layers(BTH, AETH, opcode=int(_op))


def frame_to_scapy(f: RoceFrame) -> Packet:
    """The scapy packet with exactly the bytes :func:`uet.roce.codec.encode_frame` gives."""
    b = f.bth
    pad = -len(f.payload) & 3
    tos = (f.dscp & 0x3F) << 2 | (f.ecn & 3)
    if ":" in f.src_ip:
        ip: Packet = IPv6(tc=tos, fl=0, hlim=f.ttl, src=f.src_ip, dst=f.dst_ip)
        udp = UDP(sport=f.sport, dport=f.dport)
    else:
        ip = IP(tos=tos, id=f.ip_id, flags="DF", ttl=f.ttl, src=f.src_ip, dst=f.dst_ip)
        udp = UDP(sport=f.sport, dport=f.dport, chksum=None if f.udp_checksum else 0)
    bth = BTH(opcode=b.opcode, solicited=int(b.se), migreq=int(b.migreq), padcount=pad,
              version=b.tver, pkey=b.pkey, fecn=int(b.fecn), becn=int(b.becn),
              resv6=b.resv6, dqpn=b.dqpn, ackreq=int(b.ackreq), resv7=b.resv7, psn=b.psn)
    pkt = Ether(dst=f.dst_mac, src=f.src_mac) / ip / udp / bth
    if b.opcode == Opcode.CNP:
        return pkt / CNPPadding(reserved1=int.from_bytes(f.cnp_pad[:8], "big"),
                                reserved2=int.from_bytes(f.cnp_pad[8:], "big"))
    if f.reth is not None:
        pkt = pkt / RETH(va=f.reth.va, rkey=f.reth.rkey, dma_len=f.reth.dma_len)
    if f.imm is not None:
        pkt = pkt / ImmDt(imm=f.imm)
    if f.aeth is not None:
        pkt = pkt / AETH(syndrome=f.aeth.syndrome, msn=f.aeth.msn)
    if f.payload or pad:
        pkt = pkt / Raw(f.payload + bytes(pad))
    return pkt


def scapy_to_frame(pkt: Packet) -> RoceFrame:
    """The record of a dissected scapy RoCEv2 packet (``Ether(bytes)``)."""
    ip = pkt[IPv6] if IPv6 in pkt else pkt[IP]
    udp = pkt[UDP]
    bth = pkt[BTH]
    v6 = isinstance(ip, IPv6)
    tos = ip.tc if v6 else ip.tos
    b = Bth(opcode=bth.opcode, dqpn=bth.dqpn, psn=bth.psn, ackreq=bool(bth.ackreq),
            se=bool(bth.solicited), migreq=bool(bth.migreq), padcount=bth.padcount,
            tver=bth.version, pkey=bth.pkey, fecn=bool(bth.fecn), becn=bool(bth.becn),
            resv6=bth.resv6, resv7=bth.resv7)
    reth = Reth(pkt[RETH].va, pkt[RETH].rkey, pkt[RETH].dma_len) if RETH in pkt else None
    imm = pkt[ImmDt].imm if ImmDt in pkt else None
    aeth = Aeth(pkt[AETH].syndrome, pkt[AETH].msn) if AETH in pkt else None
    cnp_pad = bytes(CNP_PAD_LEN)
    if CNPPadding in pkt:
        c = pkt[CNPPadding]
        cnp_pad = c.reserved1.to_bytes(8, "big") + c.reserved2.to_bytes(8, "big")
    load = bytes(pkt[Raw].load) if Raw in pkt else b""
    payload = load[:len(load) - bth.padcount] if bth.padcount else load
    return RoceFrame(b, reth, aeth, imm, payload, src_mac=pkt[Ether].src,
                     dst_mac=pkt[Ether].dst, src_ip=ip.src, dst_ip=ip.dst, sport=udp.sport,
                     dport=udp.dport, dscp=tos >> 2, ecn=tos & 3,
                     ttl=ip.hlim if v6 else ip.ttl, ip_id=0 if v6 else ip.id,
                     udp_checksum=bool(udp.chksum), cnp_pad=cnp_pad, icrc=bth.icrc)
