"""Profile gating (ref 5; the per-profile matrix is docs/profiles.md).

These cases need a device speaking a given profile: over UDP, give one device per profile
(``--dut udp:HOST:PORT@ai-base``); in process the built-in end point takes the profile.
"""

from __future__ import annotations

from scapy.packet import Raw

from uet.wire.constants import (
    AtomicDatatype,
    AtomicOpcode,
    PdsType,
    ReturnCode,
    RspOpcode,
    SesOpcode,
)
from uet.wire.records import PdsRudi

from .. import packets as P
from ..registry import case
from .common import OK, opened, response, unique

Rc = ReturnCode
U64 = AtomicDatatype.UINT64


@case("PROF-001", "5",
      "An AI Base end point (no tag matching) answers TAGGED_SEND UNSUPPORTED_OP",
      profile="ai-base")
def ai_base_no_tagged(peer):
    pdc = opened(peer)
    msg = peer.ses.send("recv", unique(peer, 32), tag=0x1234)
    response(pdc, pdc.send(msg[0]), Rc.UNSUPPORTED_OP)


@case("PROF-002", "5, 3.10",
      "An AI Base end point (RUDI belongs to HPC) answers a RUDI request UNSUPPORTED_OP",
      profile="ai-base")
def ai_base_no_rudi(peer):
    pkt_id = peer.rng.getrandbits(32)
    peer.send(P.rudi(pkt_id) / peer.ses.write("idempotent", 0, unique(peer, 16))[0])
    peer.expect(PdsRudi, timeout_us=1000,
                fields={"type": PdsType.RUDI_RESP, "pkt_id": pkt_id,
                        "ses.opcode": RspOpcode.RESPONSE,
                        "ses.return_code": Rc.UNSUPPORTED_OP},
                what="RUDI_RESP UNSUPPORTED_OP")


@case("PROF-003", "5",
      "An AI Base end point (no rendezvous) answers RENDEZVOUS_SEND UNSUPPORTED_OP",
      profile="ai-base")
def ai_base_no_rendezvous(peer):
    pdc = opened(peer)
    msg = peer.ses.rendezvous("recv", unique(peer, 16), 4096, read_key=1, read_index=1)
    response(pdc, pdc.send(msg[0]), Rc.UNSUPPORTED_OP)


@case("PROF-004", "5",
      "An AI Base end point (no deferrable send) answers DEFERRABLE_SEND UNSUPPORTED_OP",
      profile="ai-base")
def ai_base_no_deferrable(peer):
    pdc = opened(peer)
    r = peer.setup.resource("recv")
    hdr = peer.ses.std(SesOpcode.DEFERRABLE_SEND, index=r.index, offset=1 << 32, length=8)
    response(pdc, pdc.send(hdr / Raw(load=bytes(8))), Rc.UNSUPPORTED_OP)


@case("PROF-005", "5, 4.4",
      "An AI Base end point answers an atomic opcode outside its set (DIFF) "
      "AMO_UNSUPPORTED_OP", profile="ai-base")
def ai_base_atomic_opcode(peer):
    pdc = opened(peer)
    msg = peer.ses.atomic(AtomicOpcode.DIFF, U64, (1).to_bytes(8, "big"), offset=peer.scratch)
    response(pdc, pdc.send(msg[0]), Rc.AMO_UNSUPPORTED_OP)


@case("PROF-006", "5, 4.4",
      "An AI Base end point answers an atomic datatype outside its set (INT8) "
      "AMO_UNSUPPORTED_DT", profile="ai-base")
def ai_base_atomic_datatype(peer):
    pdc = opened(peer)
    msg = peer.ses.atomic(AtomicOpcode.SUM, AtomicDatatype.INT8, b"\x01", offset=peer.scratch)
    response(pdc, pdc.send(msg[0]), Rc.AMO_UNSUPPORTED_DT)


@case("PROF-007", "5",
      "An AI Base end point serves what AI Base has: SEND, WRITE, READ and ATOMIC SUM on "
      "UINT64 all succeed", profile="ai-base")
def ai_base_basics(peer):
    pdc = opened(peer)
    response(pdc, pdc.send(peer.ses.send("recv", unique(peer, 32))[0]), OK)
    response(pdc, pdc.send(peer.ses.write("rma", peer.scratch, unique(peer, 32))[0]), OK)
    pdc.ack_of(pdc.send(peer.ses.read("rma", peer.scratch, 32)[0]),
               fields={"ses.opcode": RspOpcode.RESPONSE_W_DATA, "ses.return_code": OK})
    msg = peer.ses.atomic(AtomicOpcode.SUM, U64, (1).to_bytes(8, "big"), offset=peer.scratch)
    response(pdc, pdc.send(msg[0]), OK)


@case("PROF-008", "5, 4.3",
      "An end point that does not advertise optimized non-matching headers answers a "
      "small (20-byte) header UNSUPPORTED_OP",
      profile_changes={"profile.fep_cap": ["HPC"]})
def small_header_refused(peer):
    pdc = opened(peer)
    r = peer.setup.region("small")
    w = peer.ses.small(SesOpcode.WRITE, index=r.index, offset=0, length=8) / Raw(load=bytes(8))
    response(pdc, pdc.send(w), Rc.UNSUPPORTED_OP)


@case("PROF-009", "5",
      "An HPC end point accepts RUDI (required by HPC): a RUDI NO_OP is answered by a "
      "RUDI_RESP with RESPONSE OK", profile="hpc")
def hpc_rudi(peer):
    pkt_id = peer.rng.getrandbits(32)
    peer.send(P.rudi(pkt_id) / peer.ses.no_op()[0])
    peer.expect(PdsRudi, timeout_us=1000,
                fields={"type": PdsType.RUDI_RESP, "pkt_id": pkt_id, "ses.return_code": OK},
                what="RUDI_RESP OK from the HPC end point")
