"""Hypothesis strategies for consistent UET record frames, covering every field's full range.

"Consistent" means what a decoder gives back: fields a layout does not carry (``dpdcid``
with SYN set, ``header_data`` with SOM clear, ...) are zero, the next-header value matches
the SES record, the extension matches the opcode.
"""

from __future__ import annotations

from hypothesis import strategies as st

from uet.wire import rules
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


def u(bits: int) -> st.SearchStrategy[int]:
    return st.integers(0, 2**bits - 1)


S16 = st.integers(-32768, 32767)
PDS_TYPES = sorted(rules.ALLOWED_NEXT_HDR) + [11]


@st.composite
def pds_header(draw, t: int, nhs: list[int] | None = None) -> tuple:
    """(record, next_hdr) for PDS type ``t``, next_hdr drawn from ``nhs`` if given."""
    if t == 11:
        flags = draw(u(7))
        syn = flags & 0x04
        return PdsControl(draw(st.sampled_from(sorted(rules.KNOWN_CTL_TYPES))), flags,
                          draw(u(16)), draw(u(32)), draw(u(16)), 0 if syn else draw(u(16)),
                          draw(st.booleans()) if syn else False, draw(u(12)) if syn else 0,
                          draw(u(32))), 0
    allowed = sorted(rules.ALLOWED_NEXT_HDR[t])
    nh = draw(st.sampled_from([n for n in allowed if nhs is None or n in nhs]))
    flags = draw(u(7))
    if t in (2, 3, 13, 14):
        syn = flags & 0x04
        cc = t >= 13
        return PdsRequest(t, nh, flags, draw(S16), draw(u(32)), draw(u(16)),
                          0 if syn else draw(u(16)), draw(st.booleans()) if syn else False,
                          draw(u(12)) if syn else 0, draw(u(8)) if cc else 0,
                          draw(u(24)) if cc else 0), nh
    if t in (4, 5):
        return PdsRudi(t, nh, flags, draw(u(32))), nh
    if t == 6:
        return PdsUud(nh, flags), nh
    aoff = draw(u(16)) if flags & 0x08 else draw(S16)
    if t == 7:
        return PdsAck(nh, flags, aoff, draw(u(32)), draw(u(16)), draw(u(16)),
                      draw(u(32)) if flags & 0x40 else 0), nh
    if t in (8, 9):
        cc = draw(u(4))
        rec = PdsAckCc(t, nh, flags, aoff, draw(u(32)), draw(u(16)), draw(u(16)), cc,
                       draw(u(4)), draw(u(8)), draw(S16), draw(u(64)))
        if cc == 0:
            rec.service_time, rec.restore_cwnd = draw(u(16)), draw(st.booleans())
            rec.rcv_cwnd_pend, rec.rcvd_bytes, rec.ooo_count = draw(u(7)), draw(u(24)), draw(u(16))
        elif cc == 1:
            rec.credit, rec.ooo_count = draw(u(24)), draw(u(16))
        else:
            rec.cc_state_raw = draw(st.binary(min_size=8, max_size=8))
        if t == 9:
            rec.ccx_state = draw(st.binary(min_size=8, max_size=8))
        return rec, nh
    ccx = t == 12
    return PdsNack(t, nh, flags, draw(u(8)), draw(u(8)), draw(u(32)), draw(u(16)),
                   draw(u(16)), draw(u(32)), draw(u(4)) if ccx else 0,
                   draw(u(60)) if ccx else 0, draw(u(64)) if ccx else 0), nh


@st.composite
def ses_header(draw, nh: int, opcodes: list[int] | None = None) -> tuple:
    """(ses record or None, ext record or None) for next header ``nh``."""
    if nh == 0:
        return None, None
    if nh >= 4:
        ops = sorted(rules.RSP_OPCODES[nh])
        head = (draw(u(2)), draw(st.sampled_from(ops)), draw(u(2)), draw(u(6)))
        if nh == 4:
            return SesResponse(*head, draw(u(16)), draw(u(8)), draw(u(24)), draw(u(32))), None
        if nh == 5:
            return SesResponseData(*head, draw(u(16)), draw(u(24)), draw(u(16)), draw(u(14)),
                                   draw(u(32)), draw(u(32))), None
        return SesResponseDataSmall(*head, draw(u(14)), draw(u(24)), draw(u(32))), None
    # bias opcodes towards those with extensions, but cover the whole 6-bit range
    opcode = draw(st.sampled_from(opcodes) if opcodes
                  else st.one_of(u(6), st.sampled_from([3, 4, 6, 10, 13, 14])))
    flags = draw(u(6))
    common = (opcode, draw(u(2)), flags)
    ids = (draw(u(8)), draw(u(24)), draw(u(12)), draw(u(12)))
    if nh == 3:
        som = flags & 1
        ses = SesStandard(*common, draw(u(16)), *ids, draw(u(64)), draw(u(32)), draw(u(64)),
                          draw(u(64)) if som else 0, 0 if som else draw(u(14)),
                          0 if som else draw(u(32)), draw(u(32)))
    elif nh == 2:
        ses = SesMedium(*common, draw(u(14)), *ids, draw(u(64)), draw(u(32)), draw(u(64)))
    else:
        ses = SesSmall(*common, draw(u(14)), *ids, draw(u(64)))
    kind = rules.ext_kind(nh, opcode)
    ext = None
    if kind == rules.EXT_ATOMIC:
        aop = draw(st.one_of(u(8), st.sampled_from(sorted(rules.CAS_OPCODES_INT))))
        if aop in rules.CAS_OPCODES_INT:
            ext = CasExt(aop, draw(u(8)), draw(u(8)), draw(u(128)), draw(u(128)))
        else:
            ext = AtomicExt(aop, draw(u(8)), draw(u(8)))
    elif kind == rules.EXT_RENDEZVOUS:
        ext = RendezvousExt(draw(u(32)), draw(u(8)), draw(u(12)), draw(u(12)), draw(u(64)),
                            draw(u(64)))
    return ses, ext


TSS = st.one_of(st.none(), st.builds(
    lambda sp, an, sdi, ssi, epoch, tsc: TssHeader(sp, an, sdi, ssi if sp else 0, epoch, tsc),
    st.booleans(), u(1), u(24), u(32), u(16), u(48)))


@st.composite
def uet_frame(draw, pds_types: list[int] | None = None, nhs: list[int] | None = None,
              opcodes: list[int] | None = None, **frame_fields) -> Frame:
    """A frame with default addresses: only the UET part varies."""
    types = [t for t in pds_types or PDS_TYPES
             if nhs is None or set(nhs) & (rules.ALLOWED_NEXT_HDR.get(t) or {0})]
    pds, nh = draw(pds_header(draw(st.sampled_from(types)), nhs))
    ses, ext = draw(ses_header(nh, opcodes))
    return Frame(pds, ses, ext, draw(st.binary(max_size=64)), tss=draw(TSS),
                 trailer=draw(st.binary(max_size=20)), **frame_fields)


MAC = st.binary(min_size=6, max_size=6).map(lambda b: b.hex(":"))
IPV4 = st.sampled_from(["10.0.0.1", "10.0.0.2", "192.168.1.254", "0.0.0.0", "255.255.255.255"])
IPV6 = st.sampled_from(["fd00::1", "fd00::2", "2001:db8::abcd:1", "::1", "fe80::1:2:3:4"])


@st.composite
def full_frame(draw, pds_types: list[int] | None = None,
               nhs: list[int] | None = None) -> Frame:
    """A whole Ethernet frame: IPv4 or IPv6, UDP or native IP, every L2-L4 field varied."""
    f = draw(uet_frame(pds_types, nhs))
    v6 = draw(st.booleans())
    f.src_ip, f.dst_ip = (draw(IPV6), draw(IPV6)) if v6 else (draw(IPV4), draw(IPV4))
    f.src_mac, f.dst_mac = draw(MAC), draw(MAC)
    f.ev, f.dscp, f.ecn, f.ttl = draw(u(16)), draw(u(6)), draw(u(2)), draw(u(8))
    f.ip_id = 0 if v6 else draw(u(16))
    f.encap = draw(st.sampled_from(["udp", "ip"]))
    if f.encap == "udp":
        f.udp_checksum = True if v6 else draw(st.booleans())
    return f
