"""Duplicates, RUD vs ROD ordering, RUDI and UUD (ref 3.5, 3.10, 2.8, 2.9)."""

from __future__ import annotations

from scapy.packet import Raw

from uet.wire.constants import PdsType, ReturnCode, RspOpcode, SesOpcode
from uet.wire.records import PdsRudi

from .. import packets as P
from ..peer import ANY_ACK, has_flags, lacks_flags, not_
from ..registry import case
from .common import OK, check_bytes, opened, read_back, require, response, unique

ACK_US = 1000
RUDI_RETX = 0x10


def _order(peer, rod: bool) -> tuple[bytes, bytes, bytes]:
    """Two single-packet WRITEs to the same bytes: PSN Start+1 writes A, Start+2 writes B;
    B arrives first. Returns (A, B, memory afterwards)."""
    pdc = opened(peer, rod=rod)
    a, b = unique(peer, 32), unique(peer, 32)
    wa = peer.ses.write("rma", peer.scratch, a)
    wb = peer.ses.write("rma", peer.scratch, b)
    pdc.send(wb[0], psn=pdc.psn(2))
    pdc.send(wa[0], psn=pdc.psn(1))
    for i in (1, 2):
        response(pdc, pdc.psn(i), OK)
    return a, b, read_back(pdc, "rma", peer.scratch, 32)


@case("PDS-DUP-001", "3.5, 3.10",
      "A duplicate request is never executed twice: a retransmitted WRITE arriving after "
      "a later WRITE to the same bytes (and after the window moved past it) is "
      "acknowledged but does not overwrite them")
def duplicate_not_reexecuted(peer):
    pdc = opened(peer)
    first, second = unique(peer, 32), unique(peer, 32)
    w1 = peer.ses.write("rma", peer.scratch, first)
    p1 = pdc.send(w1[0])
    response(pdc, p1, OK)
    response(pdc, pdc.send(peer.ses.write("rma", peer.scratch, second)[0]), OK)
    pdc.send(w1[0], psn=p1, retx=True)
    pdc.ack_of(p1, what="the ACK of the duplicate WRITE")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), second,
                "memory after a duplicate of the first WRITE")


def _dup_above_gap(peer, header):
    """Two single-packet WRITEs (``header(offset, length)`` builds their SES header, one
    without a message ID) to the same bytes at Start+2 and Start+3, Start+1 missing; then
    a duplicate of Start+2 while the gap holds the window: it must not be executed."""
    pdc = opened(peer)
    a, b = unique(peer, 32), unique(peer, 32)
    pa = pdc.send(header(32) / Raw(load=a), psn=pdc.psn(2))
    response(pdc, pa, OK, what="the RESPONSE OK of the WRITE above the gap")
    pb = pdc.send(header(32) / Raw(load=b), psn=pdc.psn(3))
    response(pdc, pb, OK, what="the RESPONSE OK of the second WRITE above the gap")
    pdc.send(header(32) / Raw(load=a), psn=pa, retx=True)
    pdc.ack_of(pa, what="the ACK of the in-window duplicate (PSN above the gap)")
    response(pdc, pdc.send(peer.ses.no_op()[0], psn=pdc.psn(1)), OK,
             what="the RESPONSE OK of the packet filling the gap")
    return b, pdc


@case("PDS-DUP-002", "3.5, 3.10, 4.3",
      "A duplicate of a PSN received above a gap (still inside the receive window) is "
      "not handed to the SES again: with the medium header, which carries no message ID "
      "for the SES to recognise it, the duplicate WRITE does not overwrite a later WRITE")
def duplicate_above_gap_medium(peer):
    r = peer.setup.region("rma")
    b, pdc = _dup_above_gap(peer, lambda n: peer.ses.medium(
        SesOpcode.WRITE, index=r.index, key=r.key, offset=peer.scratch, length=n))
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), b,
                "memory after an in-window duplicate of the first medium-header WRITE")


@case("PDS-DUP-003", "3.5, 3.10, 4.3",
      "The same with the small header (no message ID, key 0): a duplicate above a gap is "
      "not executed again", caps=("opt_non_matching",))
def duplicate_above_gap_small(peer):
    r = peer.setup.region("small")
    off = peer.scratch % (r.size - 64)
    b, pdc = _dup_above_gap(peer, lambda n: peer.ses.small(
        SesOpcode.WRITE, index=r.index, offset=off, length=n))
    check_bytes(peer, read_back(pdc, "small", off, 32), b,
                "memory after an in-window duplicate of the first small-header WRITE")


@case("PDS-ORD-001", "3.10",
      "RUD hands each packet to the SES on arrival: of two WRITEs to the same bytes, the "
      "one that arrives last (the lower PSN) wins")
def rud_unordered(peer):
    a, _b, mem = _order(peer, rod=False)
    check_bytes(peer, mem, a, "RUD: memory after PSN Start+2 then Start+1")


@case("PDS-ORD-002", "3.10",
      "ROD hands packets to the SES in PSN order: of two WRITEs to the same bytes sent out "
      "of order, the higher PSN wins")
def rod_ordered(peer):
    _a, b, mem = _order(peer, rod=True)
    check_bytes(peer, mem, b, "ROD: memory after PSN Start+2 then Start+1")


@case("PDS-ORD-003", "3.10, 2.4",
      "A ROD packet held for a gap is reported as received (SACK) but not named by an "
      "ACK's ACK_PSN before it is delivered")
def rod_buffered_not_acked(peer):
    pdc = opened(peer, rod=True)
    psn = pdc.send(peer.ses.no_op()[0], psn=pdc.psn(2))
    rx = peer.expect(ANY_ACK, timeout_us=ACK_US,
                     fields={"dpdcid": pdc.spdcid, "ack_psn": not_(psn)},
                     what="an ACK for the buffered packet, not naming it")
    p = rx.pds
    if hasattr(p, "sack_bitmap"):
        off = (psn - p.sack_base) % (1 << 32)
        require(peer, off < 64 and p.sack_bitmap >> off & 1,
                f"the buffered PSN {psn} is not SACKed: {rx.describe()}")
    peer.expect_nothing(ANY_ACK, within_us=ACK_US, fields={"ack_psn": psn},
                        what=f"an ACK naming the undelivered ROD packet {psn}")
    pdc.send(peer.ses.no_op()[0], psn=pdc.psn(1))
    response(pdc, pdc.psn(1), OK)
    response(pdc, psn, OK, what="the buffered packet's RESPONSE once delivered")


# ---------------------------------------------------------------------------- RUDI


def _rudi(peer, ses, *, pkt_id=None, retx=False, ev=None, ecn=0):
    pkt_id = peer.rng.getrandbits(32) if pkt_id is None else pkt_id
    peer.send(P.rudi(pkt_id, retx=retx) / ses, ev=ev, ecn=ecn)
    return pkt_id


def _rudi_resp(peer, pkt_id, what="", **fields):
    f = {"type": PdsType.RUDI_RESP, "pkt_id": pkt_id}
    f.update({k.replace("__", "."): v for k, v in fields.items()})
    return peer.expect(PdsRudi, timeout_us=ACK_US, fields=f,
                       what=what or f"the RUDI_RESP of pkt_id {pkt_id}")


@case("PDS-RUDI-001", "3.10, 2.8",
      "A RUDI request is answered by exactly one RUDI_RESP with the same pkt_id carrying "
      "its SES response (a WRITE to an idempotent-safe region: RESPONSE OK), no PDC",
      caps=("rudi",))
def rudi_write(peer):
    data = unique(peer, 48)
    off = peer.scratch % 65536
    pid = _rudi(peer, peer.ses.write("idempotent", off, data)[0])
    _rudi_resp(peer, pid, ses__opcode=RspOpcode.RESPONSE, ses__return_code=OK)
    peer.expect_nothing(PdsRudi, within_us=ACK_US, fields={"pkt_id": pid},
                        what="a second RUDI_RESP for one request")
    rid = _rudi(peer, peer.ses.read("idempotent", off, 48)[0])
    rx = _rudi_resp(peer, rid, ses__opcode=RspOpcode.RESPONSE_W_DATA)
    check_bytes(peer, rx.data, data, "the RUDI WRITE read back over RUDI")


@case("PDS-RUDI-002", "3.10, 2.8",
      "A duplicate RUDI request is answered from the target's response cache (RETX set, "
      "same response) and not executed again",
      caps=("rudi",))
def rudi_duplicate(peer):
    off = peer.scratch % 65536
    first, second = unique(peer, 16), unique(peer, 16)
    w1 = peer.ses.write("idempotent", off, first)[0]
    p1 = _rudi(peer, w1)
    _rudi_resp(peer, p1, ses__return_code=OK, flags=lacks_flags(RUDI_RETX))
    p2 = _rudi(peer, peer.ses.write("idempotent", off, second)[0])
    _rudi_resp(peer, p2, ses__return_code=OK)
    _rudi(peer, w1, pkt_id=p1, retx=True)
    _rudi_resp(peer, p1, ses__return_code=OK, flags=has_flags(RUDI_RETX),
               what="the cached RUDI_RESP of the duplicate (RETX set)")
    rid = _rudi(peer, peer.ses.read("idempotent", off, 16)[0])
    rx = _rudi_resp(peer, rid, ses__opcode=RspOpcode.RESPONSE_W_DATA)
    check_bytes(peer, rx.data, second, "memory after the duplicate RUDI WRITE")


@case("PDS-RUDI-003", "3.10, 4.5",
      "A RUDI READ is answered by a RUDI_RESP carrying RESPONSE_W_DATA and the bytes",
      caps=("rudi",))
def rudi_read(peer):
    off = peer.scratch % 65536
    data = unique(peer, 200)
    pdc = opened(peer)
    response(pdc, pdc.send(peer.ses.write("idempotent", off, data)[0]), OK)
    rid = _rudi(peer, peer.ses.read("idempotent", off, 200)[0])
    rx = _rudi_resp(peer, rid, ses__opcode=RspOpcode.RESPONSE_W_DATA, ses__return_code=OK)
    check_bytes(peer, rx.data, data, "RUDI READ of what a RUD WRITE put there")


@case("PDS-RUDI-004", "3.10, 4.6",
      "RUDI is for idempotent-safe memory only: a RUDI WRITE to a region not marked "
      "idempotent-safe is answered OP_VIOLATION and not executed",
      caps=("rudi",))
def rudi_not_idempotent(peer):
    pid = _rudi(peer, peer.ses.write("rma", peer.scratch, unique(peer, 16))[0])
    _rudi_resp(peer, pid, ses__return_code=ReturnCode.OP_VIOLATION)


@case("PDS-RUDI-005", "3.10, 4.6",
      "A non-idempotent operation (SEND) over RUDI is answered UNSUPPORTED_OP",
      caps=("rudi",))
def rudi_send(peer):
    pid = _rudi(peer, peer.ses.send("recv", unique(peer, 16))[0])
    _rudi_resp(peer, pid, ses__return_code=ReturnCode.UNSUPPORTED_OP)


@case("PDS-RUDI-006", "1.4, 2.8",
      "A RUDI_RESP carries the request's EV, the control DSCP, and M when the request "
      "arrived CE-marked",
      caps=("rudi",))
def rudi_resp_fields(peer):
    ev = peer.pick_ev()
    pid = _rudi(peer, peer.ses.no_op()[0], ev=ev, ecn=3)
    _rudi_resp(peer, pid, ev=ev, dscp=peer.setup.dscp_control, flags=has_flags(0x20))


# ---------------------------------------------------------------------------- UUD


@case("PDS-UUD-001", "3.10, 2.9",
      "A UUD request (DATAGRAM_SEND) is never answered: no ACK, NACK or response",
      caps=("uud",))
def uud_silent(peer):
    peer.send(P.uud() / peer.ses.send("recv", unique(peer, 64),
                                      opcode=SesOpcode.DATAGRAM_SEND)[0])
    peer.expect_nothing(within_us=ACK_US * 5, what="any answer to a UUD datagram")


@case("PDS-UUD-002", "2.9",
      "Receivers ignore the UUD flag bits: a UUD request with every flag bit set is not "
      "refused (no NACK) and not answered",
      caps=("uud",))
def uud_flags_ignored(peer):
    peer.send(P.uud(flags=0x7F) / peer.ses.send("recv", unique(peer, 8),
                                                opcode=SesOpcode.DATAGRAM_SEND)[0])
    peer.expect_nothing(within_us=ACK_US * 5, what="any answer to a UUD datagram")


@case("PDS-UUD-005", "3.10, 2.9, 6.3",
      "A trimmed UUD request (trimmed DSCP) is dropped without an answer: UUD carries no "
      "PSN or packet ID a NACK could name", caps=("uud",))
def uud_trimmed_silent(peer):
    peer.send(P.uud() / peer.ses.send("recv", unique(peer, 64),
                                      opcode=SesOpcode.DATAGRAM_SEND)[0],
              dscp=peer.setup.dscp_trimmed)
    peer.expect_nothing(within_us=ACK_US * 5, what="any answer to a trimmed UUD datagram")


@case("PDS-UUD-003", "3.10, 4.6",
      "Only DATAGRAM_SEND is legal over UUD: a WRITE carried by UUD is not executed (and, "
      "UUD having no responses, not answered)",
      caps=("uud",))
def uud_write_refused(peer):
    pdc = opened(peer)
    before = read_back(pdc, "rma", peer.scratch, 32)
    peer.send(P.uud() / peer.ses.write("rma", peer.scratch, unique(peer, 32))[0])
    peer.expect_nothing(within_us=ACK_US * 5, fields={"dst_ip": peer.ip},
                        where=lambda r: r.ses is not None and r.ses.opcode
                        == RspOpcode.RESPONSE and r.pds.dpdcid != pdc.spdcid,
                        what="a response to a UUD request")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), before,
                "memory after a WRITE over UUD")


@case("PDS-UUD-004", "3.10, 4.6",
      "DATAGRAM_SEND is only legal with UUD: over RUD it is answered UNSUPPORTED_OP")
def datagram_over_rud(peer):
    pdc = opened(peer)
    msg = peer.ses.send("recv", unique(peer, 16), opcode=SesOpcode.DATAGRAM_SEND)
    response(pdc, pdc.send(msg[0]), ReturnCode.UNSUPPORTED_OP)
