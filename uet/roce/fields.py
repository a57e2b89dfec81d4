"""A RoCEv2 frame as flat fields named as Wireshark's InfiniBand dissector names them
(``infiniband.bth.psn``, ``infiniband.aeth.msn`` ...), plus a one-line summary: what
``uet decode`` prints for RoCE frames and what its ``-Y`` filters see.

Names follow tshark 4.0's ``infiniband`` fields; ``infiniband.bth.fecn`` and
``infiniband.bth.becn`` are ours (tshark 4.0 shows that byte as "Reserved"), and
``infiniband.invariant.crc.valid`` says whether the ICRC is right (tshark does not check).
"""

from __future__ import annotations

from uet.roce.constants import AethType, NakCode, Opcode
from uet.roce.records import RoceFrame

Value = int | bool | str | None

ROCE_FIELDS: frozenset[str] = frozenset({
    "eth.src", "eth.dst", "ip.src", "ip.dst", "ip.dsfield.dscp", "ip.dsfield.ecn",
    "ip.ttl", "ip.id", "ip.proto", "ipv6.src", "ipv6.dst", "ipv6.tclass.dscp",
    "ipv6.tclass.ecn", "ipv6.hlim", "ipv6.nxt", "udp.srcport", "udp.dstport",
    "infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m",
    "infiniband.bth.padcnt", "infiniband.bth.tver", "infiniband.bth.p_key",
    "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.reserved7",
    "infiniband.bth.psn", "infiniband.bth.fecn", "infiniband.bth.becn",
    "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
    "infiniband.immdt", "infiniband.aeth.syndrome", "infiniband.aeth.syndrome.opcode",
    "infiniband.aeth.syndrome.credit_count", "infiniband.aeth.syndrome.timer",
    "infiniband.aeth.syndrome.error_code", "infiniband.aeth.msn",
    "infiniband.invariant.crc", "infiniband.invariant.crc.valid", "infiniband.payload_len",
})


def roce_fields(f: RoceFrame) -> dict[str, Value]:
    """Every field of ``f`` by name (see the module docstring)."""
    out: dict[str, Value] = {"eth.src": f.src_mac, "eth.dst": f.dst_mac}
    if ":" in f.src_ip:
        out.update({"ipv6.src": f.src_ip, "ipv6.dst": f.dst_ip, "ipv6.tclass.dscp": f.dscp,
                    "ipv6.tclass.ecn": f.ecn, "ipv6.hlim": f.ttl, "ipv6.nxt": 17})
    else:
        out.update({"ip.src": f.src_ip, "ip.dst": f.dst_ip, "ip.dsfield.dscp": f.dscp,
                    "ip.dsfield.ecn": f.ecn, "ip.ttl": f.ttl, "ip.id": f.ip_id,
                    "ip.proto": 17})
    b = f.bth
    out.update({"udp.srcport": f.sport, "udp.dstport": f.dport,
                "infiniband.bth.opcode": b.opcode, "infiniband.bth.se": b.se,
                "infiniband.bth.m": b.migreq, "infiniband.bth.padcnt": b.padcount,
                "infiniband.bth.tver": b.tver, "infiniband.bth.p_key": b.pkey,
                "infiniband.bth.destqp": b.dqpn, "infiniband.bth.a": b.ackreq,
                "infiniband.bth.reserved7": b.resv7, "infiniband.bth.psn": b.psn,
                "infiniband.bth.fecn": b.fecn, "infiniband.bth.becn": b.becn})
    if f.reth is not None:
        out.update({"infiniband.reth.va": f.reth.va, "infiniband.reth.r_key": f.reth.rkey,
                    "infiniband.reth.dmalen": f.reth.dma_len})
    if f.imm is not None:
        out["infiniband.immdt"] = f.imm.to_bytes(4, "big").hex()
    if f.aeth is not None:
        syn = f.aeth.syndrome
        kind = syn >> 5 & 3
        out.update({"infiniband.aeth.syndrome": syn, "infiniband.aeth.syndrome.opcode": kind,
                    "infiniband.aeth.msn": f.aeth.msn})
        key = {AethType.ACK: "credit_count", AethType.RNR_NAK: "timer",
               AethType.NAK: "error_code"}.get(kind)
        if key is not None:
            out[f"infiniband.aeth.syndrome.{key}"] = syn & 0x1F
    out["infiniband.payload_len"] = len(f.payload)
    if f.icrc is not None:
        out["infiniband.invariant.crc"] = f.icrc
        out["infiniband.invariant.crc.valid"] = f.icrc_ok
    return out


def roce_summary(f: RoceFrame) -> str:
    """One line: addresses, opcode, QP, PSN and what the frame says."""
    b = f.bth
    try:
        name = Opcode(b.opcode).name
    except ValueError:
        name = f"opcode 0x{b.opcode:02x}"
    what = f"RoCEv2 {name} qp 0x{b.dqpn:06x} psn {b.psn}"
    if f.aeth is not None and b.opcode == Opcode.ACKNOWLEDGE:
        syn = f.aeth.syndrome
        kind, value = syn >> 5 & 3, syn & 0x1F
        if kind == AethType.NAK:
            try:
                code = NakCode(value).name
            except ValueError:
                code = str(value)
            what = f"RoCEv2 NAK {code} qp 0x{b.dqpn:06x} psn {b.psn} msn {f.aeth.msn}"
        elif kind == AethType.RNR_NAK:
            what = f"RoCEv2 RNR_NAK timer {value} qp 0x{b.dqpn:06x} psn {b.psn}"
        else:
            what += f" msn {f.aeth.msn}"
    if f.reth is not None:
        what += f" va 0x{f.reth.va:x} rkey 0x{f.reth.rkey:x} len {f.reth.dma_len}"
    if f.payload:
        what += f" payload {len(f.payload)}"
    if b.ackreq:
        what += " A"
    if f.ecn == 3:
        what += " CE"
    if not f.icrc_ok:
        what += " [bad ICRC]"
    return f"{f.src_ip} -> {f.dst_ip} {what}"
