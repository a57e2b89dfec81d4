"""Hypothesis strategies for consistent RoCEv2 record frames over every field's full range.

"Consistent" means what a decoder gives back: the extension headers are exactly those the
opcode calls for, the pad count is the one the payload length implies, IPv6 frames carry a
UDP checksum, CNPs carry no payload.
"""

from __future__ import annotations

from hypothesis import strategies as st

from uet.roce.constants import (
    AETH_OPCODES,
    IMM_OPCODES,
    PAYLOAD_OPCODES,
    RETH_OPCODES,
    Opcode,
)
from uet.roce.records import Aeth, Bth, Reth, RoceFrame


def u(bits: int) -> st.SearchStrategy[int]:
    return st.integers(0, 2**bits - 1)


MACS = st.builds(lambda b: b.hex(":"), st.binary(min_size=6, max_size=6))
IPV4 = st.builds(lambda b: ".".join(str(x) for x in b), st.binary(min_size=4, max_size=4))
IPV6 = st.sampled_from(["fd00::1", "fd00::2", "2001:db8::7", "fe80::1:2:3:4", "::1"])
OPCODES = sorted(int(o) for o in Opcode)


@st.composite
def roce_frame(draw, opcodes: list[int] | None = None, v6: bool | None = None) -> RoceFrame:
    op = draw(st.sampled_from(opcodes or OPCODES))
    payload = draw(st.binary(max_size=300)) if op in PAYLOAD_OPCODES else b""
    bth = Bth(opcode=op, dqpn=draw(u(24)), psn=draw(u(24)), ackreq=draw(st.booleans()),
              se=draw(st.booleans()), migreq=draw(st.booleans()), padcount=-len(payload) & 3,
              tver=draw(u(4)), pkey=draw(u(16)), fecn=draw(st.booleans()),
              becn=draw(st.booleans()), resv6=draw(u(6)), resv7=draw(u(7)))
    reth = Reth(draw(u(64)), draw(u(32)), draw(u(32))) if op in RETH_OPCODES else None
    imm = draw(u(32)) if op in IMM_OPCODES else None
    aeth = Aeth(draw(u(8)), draw(u(24))) if op in AETH_OPCODES else None
    cnp_pad = draw(st.binary(min_size=16, max_size=16)) if op == Opcode.CNP else bytes(16)
    six = draw(st.booleans()) if v6 is None else v6
    ip = IPV6 if six else IPV4
    return RoceFrame(bth, reth, aeth, imm, payload, src_mac=draw(MACS), dst_mac=draw(MACS),
                     src_ip=draw(ip), dst_ip=draw(ip), sport=draw(u(16)),
                     dscp=draw(u(6)), ecn=draw(u(2)), ttl=draw(u(8)),
                     ip_id=0 if six else draw(u(16)),
                     udp_checksum=True if six else draw(st.booleans()), cnp_pad=cnp_pad)
