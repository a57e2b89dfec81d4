"""Clear and guaranteed delivery of SES responses (ref 3.7)."""

from __future__ import annotations

from uet.wire.constants import AckFlag, CpFlag, CtlType, ReturnCode, RspOpcode
from uet.wire.records import PdsControl, psn_add

from ..peer import lacks_flags, not_
from ..registry import case
from .common import OK, DutFlow, require, response, unique

REQ_FIELD = int(AckFlag.REQ_MASK)


def held(peer):
    """A PDC whose first request (a WRITE) got a RESPONSE the peer does not clear."""
    pdc = peer.pdc()
    pdc.auto_clear = False
    msg = peer.ses.write("rma", peer.scratch, unique(peer, 16))
    psn = pdc.send(msg[0])
    return pdc, msg, psn, response(pdc, psn, OK, ses__modified_length=16)


@case("PDS-CLR-001", "3.7, 3.5",
      "A guaranteed SES response is stored until cleared: a duplicate of the request "
      "gets the very same RESPONSE again (return code, modified length, message ID)")
def stored_response_resent(peer):
    pdc, msg, psn, first = held(peer)
    pdc.send(msg[0], psn=psn, retx=True, syn=False)
    response(pdc, psn, OK, ses__modified_length=first.ses.modified_length,
             ses__message_id=first.ses.message_id,
             what="the stored RESPONSE re-sent for the duplicate")


@case("PDS-CLR-002", "2.3, 3.7",
      "While guaranteed responses wait to be cleared, the target's ACKs carry REQ = 1 "
      "(clear request)")
def ack_requests_clear(peer):
    _pdc, _msg, _psn, first = held(peer)
    req = (first.pds.flags & REQ_FIELD) >> 1
    require(peer, req == 1, f"ACK REQ field {req} with a stored response (1 = clear "
            f"request): {first.describe()}")


@case("PDS-CLR-003", "3.6, 3.7",
      "The CACK reported does not cover a packet whose guaranteed response is still "
      "stored (reference provider): the ACK of the first request has CACK = Start - 1")
def cack_held_by_response(peer):
    pdc, _msg, psn, first = held(peer)
    require(peer, first.pds.cack_psn == psn_add(psn, -1),
            f"CACK {first.pds.cack_psn} covers PSN {psn} whose RESPONSE is not cleared")


@case("PDS-CLR-004", "2.7, 3.7",
      "A CLEAR control packet (payload = clear PSN) lets the target discard the stored "
      "response: the next ACK no longer requests a clear and its CACK covers the PSN")
def clear_cp(peer):
    pdc, _msg, psn, _first = held(peer)
    pdc.control(CtlType.CLEAR, 0, payload=psn)
    probe = pdc.send(peer.ses.no_op()[0], clear_psn=psn_add(psn, -1))
    rx = response(pdc, probe, OK)
    require(peer, rx.pds.cack_psn == psn,
            f"after CLEAR({psn}) the CACK is {rx.pds.cack_psn}, expected {psn}")


@case("PDS-CLR-005", "3.7",
      "The Clear_PSN carried by a request (PSN + clear_psn_offset) clears like a CLEAR: "
      "a later duplicate of the cleared packet gets no stored RESPONSE")
def clear_in_header(peer):
    pdc, msg, psn, _first = held(peer)
    nxt = pdc.send(peer.ses.no_op()[0], clear_psn=psn)
    response(pdc, nxt, OK)
    pdc.send(msg[0], psn=psn, retx=True, clear_psn=psn)
    pdc.ack_of(psn, fields={"ses.opcode": not_(RspOpcode.RESPONSE)},
               what="the ACK of the cleared duplicate, without the stored RESPONSE")


@case("PDS-CLR-006", "2.7, 3.7",
      "A target holding un-cleared responses with no request flowing sends CLEAR_REQ "
      "control packets (payload = the PSN to clear) until it is cleared")
def clear_req(peer):
    pdc, _msg, psn, _first = held(peer)
    period = peer.setup.clear_req_us or peer.setup.rto_us
    peer.expect(PdsControl, timeout_us=period * 1.5,
                fields={"ctl_type": CtlType.CLEAR_REQ, "dpdcid": pdc.spdcid,
                        "spdcid": pdc.dpdcid, "payload": psn,
                        "flags": lacks_flags(CpFlag.ISROD)},
                what=f"CLEAR_REQ for PSN {psn}")
    pdc.control(CtlType.CLEAR, 0, payload=psn)
    peer.flush()
    peer.expect_nothing(PdsControl, within_us=period * 1.5,
                        fields={"ctl_type": CtlType.CLEAR_REQ},
                        what="another CLEAR_REQ once cleared")


@case("PDS-CLR-007", "2.3, 3.7",
      "The device as initiator answers an ACK with REQ = 1 (clear request) by a CLEAR "
      "control packet whose payload is its clear PSN (lowest un-released - 1)")
def dut_clears_on_req(peer):
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(0), flags=0x02)
    peer.expect(PdsControl, timeout_us=1000,
                fields={"ctl_type": CtlType.CLEAR, "spdcid": flow.dut_id,
                        "payload": flow.psn(0)},
                what=f"a CLEAR with payload {flow.psn(0)}")
    flow.ack(flow.psn(1))


@case("PDS-CLR-008", "2.7, 3.7",
      "The device as initiator answers a CLEAR_REQ control packet by a CLEAR with its "
      "clear PSN")
def dut_clears_on_clear_req(peer):
    dut_clear_answer(peer, lambda flow: {"payload": flow.psn(0)})


def dut_clear_answer(peer, fields, what="a CLEAR with the clear PSN"):
    """The device's return flow of two packets, the first acknowledged, then a CLEAR_REQ:
    the CLEAR it answers with (``fields(flow)``: what it must carry)."""
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(0))
    flow.control(CtlType.CLEAR_REQ, flow.psn(0), payload=flow.psn(0))
    rx = peer.expect(PdsControl, timeout_us=1000,
                     fields={"ctl_type": CtlType.CLEAR, "spdcid": flow.dut_id,
                             **fields(flow)}, what=what)
    flow.ack(flow.psn(1))
    return rx


@case("PDS-CLR-009", "3.7, 4.5",
      "Responses other than DEFAULT_RESPONSE are guaranteed: a READ's RESPONSE_W_DATA is "
      "stored and re-sent with its data for a duplicate")
def read_response_guaranteed(peer):
    pdc = peer.pdc()
    pdc.auto_clear = False
    msg = peer.ses.read("readonly", 128, 64)
    psn = pdc.send(msg[0])
    first = pdc.ack_of(psn, fields={"ses.opcode": RspOpcode.RESPONSE_W_DATA,
                                    "ses.return_code": ReturnCode.OK})
    pdc.send(msg[0], psn=psn, retx=True, syn=False)
    again = pdc.ack_of(psn, fields={"ses.opcode": RspOpcode.RESPONSE_W_DATA},
                       what="the stored READ response re-sent")
    require(peer, again.data == first.data, "the re-sent READ response carries other data")

