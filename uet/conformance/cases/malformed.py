"""Malformed and unexpected packets (ref 2, 4, 9.1).

A datagram that does not decode as UET is dropped without an answer (an answer would need
the very fields that are missing), and the end point keeps serving its PDCs unharmed: every
case checks that an established PDC still answers its next request with the right CACK. A
datagram that decodes but breaks a PDS rule is NACKed with the rule's code.
"""

from __future__ import annotations

import random

from scapy.packet import Raw

from uet.wire.constants import (
    AtomicDatatype,
    AtomicOpcode,
    NackCode,
    ReturnCode,
    SesOpcode,
)
from uet.wire.layers import UETAtomicExt, UETPdsAck, UETSesRsp
from uet.wire.records import PdsNack

from .. import packets as P
from ..registry import case
from .common import OK, quiet, require, response

ACK_US = 1000


def _alive(peer, pdc, what):
    """The PDC still works after the bad input: next request answered, CACK right."""
    psn = pdc.send(peer.ses.no_op()[0])
    rx = response(pdc, psn, OK, what=f"the PDC answering its next request after {what}")
    require(peer, rx.pds.cack_psn == (psn - 1) % (1 << 32),
            f"after {what} the CACK is {rx.pds.cack_psn}, expected {(psn - 1) % (1 << 32)}")


def _dropped(peer, datagrams, what):
    pdc = quiet(peer)
    peer.flush()
    for data in datagrams:
        peer.send(data)
    peer.expect_nothing(within_us=ACK_US, what=f"any answer to {what}")
    _alive(peer, pdc, what)


def _req(peer, pdc, ses=None, **kw):
    hdr = P.request(pdc.next_psn, pdc.spdcid, dpdcid=pdc.dpdcid, start_psn=pdc.start_psn,
                    clear_psn=pdc.clear_psn, **kw)
    return hdr / ses if ses is not None else hdr


def _std(peer, opcode, **kw):
    return peer.ses.std(opcode, index=peer.setup.region("rma").index,
                        key=peer.setup.region("rma").key, **kw)


def _case_dropped(case_id, ref, what, build):
    @case(case_id, ref, f"A datagram that does not decode ({what}) is dropped without an "
          "answer and the end point keeps serving its PDCs")
    def fn(peer):
        pdc = quiet(peer)
        peer.flush()
        for data in build(peer, pdc):
            peer.send(data)
        peer.expect_nothing(within_us=ACK_US, what=f"any answer to {what}")
        _alive(peer, pdc, what)

    fn.__name__ = f"malformed_{case_id[-3:]}"
    return fn


_case_dropped("MAL-001", "1.2", "an empty UDP payload", lambda peer, pdc: [b""])
_case_dropped("MAL-002", "2.1", "a single byte, shorter than the PDS prologue",
              lambda peer, pdc: [b"\x10"])
_case_dropped("MAL-003", "2.1", "PDS type 0, reserved",
              lambda peer, pdc: [b"\x01\x80" + bytes(42)])
_case_dropped("MAL-004", "2.1", "PDS types 15 to 31, defined by no source",
              lambda peer, pdc: [bytes([t << 3, 0x80]) + bytes(42) for t in range(15, 32)])
_case_dropped("MAL-005", "2.10, 7.1", "a TSS header cut short",
              lambda peer, pdc: [b"\x08\x00\x00\x01\x00\x00"])
_case_dropped("MAL-006", "2.2", "a RUD request header cut to 6 of its 12 bytes",
              lambda peer, pdc: [bytes(_req(peer, pdc))[:6]])
_case_dropped("MAL-007", "4.2", "a standard SES header cut to 20 of its 44 bytes",
              lambda peer, pdc: [bytes(_req(peer, pdc, _std(peer, SesOpcode.WRITE)))[:32]])
_case_dropped("MAL-008", "2.1", "next_hdr values 7 to 15, undefined",
              lambda peer, pdc: [bytes(_req(peer, pdc, next_hdr=nh)) + bytes(44)
                                 for nh in range(7, 16)])
_case_dropped("MAL-009", "4.5, 9.1", "an SES response opcode not allowed in its header "
              "(RESPONSE_W_DATA in a 12-byte RSP after an ACK)",
              lambda peer, pdc: [bytes(UETPdsAck(next_hdr=4, cack_psn=1, spdcid=1, dpdcid=1)
                                       / UETSesRsp(opcode=2, return_code=1))])
_case_dropped("MAL-010", "4.4", "an atomic extension header cut to 2 of its 4 bytes",
              lambda peer, pdc: [bytes(_req(peer, pdc, _std(peer, SesOpcode.ATOMIC,
                                                             length=8)))
                                 + bytes([AtomicOpcode.SUM, AtomicDatatype.UINT64])])
_case_dropped("MAL-011", "4.4", "a compare-and-swap extension header cut to 10 of its 36 "
              "bytes",
              lambda peer, pdc: [bytes(_req(peer, pdc, _std(peer, SesOpcode.ATOMIC,
                                                             length=32)))
                                 + bytes([AtomicOpcode.CSWAP, AtomicDatatype.UINT64])
                                 + bytes(8)])
_case_dropped("MAL-012", "4.4", "a rendezvous extension header cut to 10 of its 24 bytes",
              lambda peer, pdc: [bytes(_req(peer, pdc, _std(peer, SesOpcode.RENDEZVOUS_SEND,
                                                             length=64))) + bytes(10)])
_case_dropped("MAL-013", "2.7", "control packet types 10 to 15, undefined",
              lambda peer, pdc: [bytes([(11 << 3) | (ct >> 1), (ct & 1) << 7]) + bytes(14)
                                 for ct in range(10, 16)])
_case_dropped("MAL-014", "2.8", "a RUDI header cut to 6 of its 8 bytes",
              lambda peer, pdc: [bytes(P.rudi(7) / peer.ses.no_op()[0])[:6]])
_case_dropped("MAL-015", "2.6", "a NACK cut to 10 of its 16 bytes",
              lambda peer, pdc: [bytes(P.nack(NackCode.TRIMMED, 1, 1, 1))[:10]])
_case_dropped("MAL-016", "2.4", "an ACK_CC cut to 20 of its 32 bytes",
              lambda peer, pdc: [bytes(P.ack_cc(1, 1, 1, 1))[:20]])


def _refused_request(peer, pdc, data, what):
    """A request that must not be delivered: NACK PDC_HDR_MISMATCH or no answer at all;
    its PSN stays unused (a valid request with that PSN is then accepted)."""
    psn = pdc.next_psn
    peer.send(data)
    got = peer.collect(within_us=ACK_US, where=lambda r: getattr(r.pds, "dpdcid", None)
                       == pdc.spdcid or isinstance(r.pds, PdsNack))
    for rx in got:
        if isinstance(rx.pds, PdsNack):
            require(peer, rx.pds.nack_code == NackCode.PDC_HDR_MISMATCH
                    and rx.pds.nack_psn == psn,
                    f"{what} answered {rx.describe()}; expected NACK PDC_HDR_MISMATCH for "
                    f"PSN {psn} or no answer")
        else:
            peer.fail(f"{what} was acknowledged: {rx.describe()}")
    response(pdc, pdc.send(peer.ses.no_op()[0], psn=psn), OK,
             what=f"a valid request on PSN {psn}, which the refused one must not have used")


@case("MAL-017", "2.1, 3.2",
      "A request with no SES request header (next_hdr NONE) is never delivered: it is "
      "answered NACK PDC_HDR_MISMATCH or dropped as malformed, and its PSN stays unused",
      note="ref 3.2 names PDC_HDR_MISMATCH; the built-in codec drops the frame as an "
           "inconsistent header chain (docs/wire-format.md), so both are accepted")
def request_without_ses(peer):
    pdc = quiet(peer)
    _refused_request(peer, pdc, _req(peer, pdc, next_hdr=0), "a request with next_hdr NONE")


@case("MAL-018", "2.1, 4.7",
      "A request carrying an SES response header without data (RSP) is never delivered: "
      "NACK PDC_HDR_MISMATCH or dropped as malformed, its PSN unused",
      note="as MAL-017")
def request_with_rsp(peer):
    pdc = quiet(peer)
    data = _req(peer, pdc, UETSesRsp(opcode=1, return_code=1, job_id=peer.setup.job_id))
    _refused_request(peer, pdc, data, "a request with an RSP header")


@case("MAL-019", "2.2, 9.1",
      "Non-zero pdc_info bits in a SYN (use_rsv_pdc and the reserved bits) are reported, "
      "not rejected: the SYN opens the PDC as usual")
def pdc_info_bits(peer):
    pdc = peer.pdc()
    psn = pdc.send(peer.ses.no_op()[0], use_rsv_pdc=1, pdc_info_rsvd=7)
    response(pdc, psn, OK, what="the ACK of a SYN with pdc_info bits set")


@case("MAL-020", "3.2, 3.6",
      "An ACK for a PDC the end point does not have is dropped silently (no NACK)")
def stray_ack(peer):
    _dropped(peer, [bytes(P.ack_cc(5, 5, peer.new_pdcid(), peer.new_pdcid()))],
             "an ACK for an unknown PDC")


@case("MAL-021", "2.6",
      "A NACK for a PDC the end point does not have is dropped silently")
def stray_nack(peer):
    _dropped(peer, [bytes(P.nack(NackCode.TRIMMED, 5, peer.new_pdcid(), peer.new_pdcid()))],
             "a NACK for an unknown PDC")


@case("MAL-022", "2.8, 3.10",
      "A RUDI_RESP nobody asked for is dropped silently")
def stray_rudi_resp(peer):
    _dropped(peer, [bytes(P.rudi(peer.rng.getrandbits(32), response=True)
                          / P.rsp(1, job_id=peer.setup.job_id))],
             "an unsolicited RUDI_RESP")


@case("MAL-023", "9.1",
      "A burst of random datagrams (seeded) does not take the end point down: its PDC "
      "keeps answering correctly afterwards")
def garbage_burst(peer):
    pdc = quiet(peer)
    rng = random.Random(peer.rng.getrandbits(32))
    for _ in range(200):
        peer.send(bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 120))),
                  ev=rng.randrange(0xC100, 0xC200))
    peer.wait(ACK_US)
    peer.flush()
    _alive(peer, pdc, "200 random datagrams")


@case("MAL-024", "4.4, 9.1",
      "An atomic request without its extension header (the opcode promises one, the "
      "bytes end) is dropped, never executed")
def atomic_without_ext(peer):
    pdc = quiet(peer)
    peer.flush()
    peer.send(_req(peer, pdc, _std(peer, SesOpcode.ATOMIC, length=8)))
    peer.expect_nothing(within_us=ACK_US, what="an answer to an atomic without extension")
    _alive(peer, pdc, "an atomic without extension")


@case("MAL-025", "4.4, 4.6",
      "An atomic extension naming an atomic opcode that no table defines is answered "
      "AMO_UNSUPPORTED_OP (the packet decodes; the operation does not exist)")
def unknown_atomic_opcode(peer):
    pdc = quiet(peer)
    hdr = _std(peer, SesOpcode.ATOMIC, length=8, offset=peer.scratch)
    ext = UETAtomicExt(atomic_opcode=0x55, atomic_datatype=AtomicDatatype.UINT64,
                       semantic_control=0, rsvd=0)
    response(pdc, pdc.send(hdr / ext / Raw(load=bytes(8))), ReturnCode.AMO_UNSUPPORTED_OP)
