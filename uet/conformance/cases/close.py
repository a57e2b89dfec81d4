"""Close and close request (ref 3.9)."""

from __future__ import annotations

from uet.wire.constants import AckFlag, CpFlag, CtlType, NackCode, ReturnCode, RspOpcode
from uet.wire.records import PdsControl, PdsNack, PdsRequest, psn_add

from ..peer import has_flags, lacks_flags
from ..registry import case
from .common import OK, DutFlow, close_pdc, opened, require, response

ACK_US = 1000


def _closed(peer):
    pdc = opened(peer)
    response(pdc, pdc.send(peer.ses.no_op()[0]), OK)
    close_psn = pdc.control(CtlType.CLOSE, ar=True)
    pdc.ack_of(close_psn, fields={"flags": lacks_flags(AckFlag.RETX)},
               what="the ACK of the CLOSE (a first transmission: RETX clear)")
    return pdc, close_psn


@case("PDS-CLS-001", "2.3, 2.7, 3.9",
      "A CLOSE control packet (a new PSN, AR set) is acknowledged by an ACK naming the "
      "close PSN, with RETX clear (the CLOSE was not a retransmission)")
def close_acked(peer):
    pdc, close_psn = _closed(peer)
    require(peer, close_psn == pdc.psn(2), "peer bug: CLOSE PSN")


@case("PDS-CLS-002", "3.9, 3.5",
      "After the close, a duplicate of a packet before the close PSN is answered by an "
      "ACK with a DEFAULT_RESPONSE (the PDC lingers to answer late packets)")
def late_duplicate_after_close(peer):
    pdc, _close_psn = _closed(peer)
    pdc.send(peer.ses.no_op()[0], psn=pdc.psn(1), retx=True)
    pdc.ack_of(pdc.psn(1), fields={"ses.opcode": RspOpcode.DEFAULT_RESPONSE,
                                   "ses.return_code": ReturnCode.NULL},
               what="the DEFAULT_RESPONSE ACK of the late duplicate")


@case("PDS-CLS-003", "3.9",
      "A repeated CLOSE (its ACK was lost; RETX set) is acknowledged again, RETX set")
def close_repeated(peer):
    pdc, close_psn = _closed(peer)
    pdc.control(CtlType.CLOSE, close_psn, ar=True, retx=True)
    pdc.ack_of(close_psn, fields={"flags": has_flags(AckFlag.RETX)},
               what="the ACK of the repeated CLOSE (RETX set)")


@case("PDS-CLS-004", "3.9",
      "After the maximum segment lifetime the closed PDC is forgotten: a non-SYN request "
      "naming it is answered NACK INV_DPDCID")
def forgotten_after_msl(peer):
    pdc, _close_psn = _closed(peer)
    peer.wait(peer.setup.msl_us * 1.3)
    peer.flush()
    psn = pdc.send(peer.ses.no_op()[0])
    peer.expect(PdsNack, timeout_us=ACK_US,
                fields={"nack_code": NackCode.INV_DPDCID, "nack_psn": psn},
                what="NACK INV_DPDCID for the forgotten PDC")


@case("PDS-CLS-005", "3.2, 3.9",
      "After a close, a SYN from the same initiator PDC ID with a new Start_PSN opens a "
      "new PDC (a new incarnation), even while the old one lingers")
def reopen_after_close(peer):
    pdc, _close_psn = _closed(peer)
    again = peer.pdc(spdcid=pdc.spdcid, start_psn=psn_add(pdc.start_psn, 1 << 20))
    response(again, again.send(peer.ses.no_op()[0]), OK,
             what="the new incarnation's first RESPONSE")


@case("PDS-CLS-006", "2.7, 3.9",
      "A target PDC idle for its idle time asks the initiator to close: a CLOSE_REQ "
      "control packet with AR; later ACKs carry REQ = 2 (close request)")
def target_requests_close(peer):
    s = peer.setup
    if not s.target_idle_us:
        peer.fail("the setup disables the target idle close (target_idle_us = 0)")
    pdc = opened(peer)
    peer.expect(PdsControl, timeout_us=s.target_idle_us * 1.5,
                fields={"ctl_type": CtlType.CLOSE_REQ, "dpdcid": pdc.spdcid,
                        "spdcid": pdc.dpdcid, "flags": has_flags(CpFlag.AR)},
                what="CLOSE_REQ after the idle time")
    rx = response(pdc, pdc.send(peer.ses.no_op()[0]), OK)
    req = (rx.pds.flags & AckFlag.REQ_MASK) >> 1
    require(peer, req == 2, f"ACK REQ field {req} after CLOSE_REQ (2 = close request): "
            f"{rx.describe()}")
    close_psn = pdc.control(CtlType.CLOSE, ar=True)
    pdc.ack_of(close_psn, what="the ACK of the CLOSE answering CLOSE_REQ")


@case("PDS-CLS-007", "3.9",
      "The device as initiator closes an idle PDC once everything is acknowledged: a "
      "CLOSE control packet with AR carrying the next PSN")
def dut_closes_when_idle(peer):
    dut_idle_close(peer, lambda flow: {
        "dpdcid": flow.my_id, "psn": psn_add(flow.psn(1), 1), "flags": has_flags(CpFlag.AR)})


def dut_idle_close(peer, fields, what="the CLOSE of the idle PDC (PSN = last data PSN + 1)"):
    """The device's return flow of two packets, all acknowledged: the CLOSE it sends once
    idle (``fields(flow)``: what it must carry), acknowledged."""
    s = peer.setup
    if not s.close_idle_us:
        peer.fail("the setup disables the initiator idle close (close_idle_us = 0)")
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(1))
    rx = peer.expect(PdsControl, timeout_us=s.close_idle_us * 1.5,
                     fields={"ctl_type": CtlType.CLOSE, "spdcid": flow.dut_id,
                             **fields(flow)}, what=what)
    flow.ack(rx.pds.psn)
    return rx


@case("PDS-CLS-008", "3.8, 3.9",
      "The device retransmits a CLOSE that is not acknowledged (it is tracked like data: "
      "RTO, RETX)")
def dut_close_retransmitted(peer):
    s = peer.setup
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(1))
    first = peer.expect(PdsControl, timeout_us=s.close_idle_us * 1.5,
                        fields={"ctl_type": CtlType.CLOSE, "spdcid": flow.dut_id},
                        what="the CLOSE")
    peer.expect(PdsControl, timeout_us=s.rto_us * 1.5,
                fields={"ctl_type": CtlType.CLOSE, "spdcid": flow.dut_id,
                        "psn": first.pds.psn, "flags": has_flags(CpFlag.RETX)},
                what="the retransmitted CLOSE (same PSN, RETX)")
    flow.ack(first.pds.psn)


@case("PDS-CLS-009", "2.7, 3.9",
      "The device as initiator answers a CLOSE_REQ by closing as soon as its packets are "
      "acknowledged (not only after its own idle time)")
def dut_honours_close_req(peer):
    s = peer.setup
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(0))
    flow.control(CtlType.CLOSE_REQ, flow.psn(0), ar=True)
    flow.ack(flow.psn(1))
    peer.expect(PdsControl, timeout_us=max(s.close_idle_us / 2, 1000), strict=True,
                fields={"ctl_type": CtlType.CLOSE, "spdcid": flow.dut_id},
                what="the CLOSE right after the last ACK (requested by CLOSE_REQ)")


@case("PDS-CLS-010", "2.3, 3.9",
      "The device as initiator treats an ACK with REQ = 2 as a close request: it closes "
      "as soon as its packets are acknowledged")
def dut_honours_ack_req_close(peer):
    s = peer.setup
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(0), flags=0x04)
    flow.ack(flow.psn(1))
    peer.expect(PdsControl, timeout_us=max(s.close_idle_us / 2, 1000), strict=True,
                fields={"ctl_type": CtlType.CLOSE, "spdcid": flow.dut_id},
                what="the CLOSE right after the last ACK (requested by REQ = 2)")


@case("PDS-CLS-011", "3.9",
      "Once its CLOSE is acknowledged the device's PDC is closed: it sends nothing more "
      "on it (no CLOSE retransmission, no data)")
def dut_closed_quiet(peer):
    s = peer.setup
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(0), flags=0x04)
    flow.ack(flow.psn(1))
    rx = peer.expect(PdsControl, timeout_us=s.close_idle_us * 1.5,
                     fields={"ctl_type": CtlType.CLOSE, "spdcid": flow.dut_id},
                     what="the CLOSE")
    flow.ack(rx.pds.psn)
    peer.flush()
    peer.expect_nothing(within_us=s.rto_us * 1.5,
                        where=lambda r: getattr(r.pds, "spdcid", None) == flow.dut_id
                        and isinstance(r.pds, (PdsControl, PdsRequest)),
                        what="any packet on the closed PDC")



@case("PDS-CLS-012", "3.1, 3.9",
      "When a SYN finds the PDC table full, the target NACKs it NO_PDC_AVAIL and asks an "
      "idle PDC to close (CLOSE_REQ, AR), once per reclaim; after that PDC's CLOSE the SYN "
      "is taken", config={"max_target_pdcs": 1})
def reclaim_close_req(peer):
    idle = opened(peer)
    newcomer = peer.pdc()
    psn = newcomer.send(peer.ses.no_op()[0])
    peer.expect(PdsNack, timeout_us=peer.ack_bound_us,
                fields={"nack_code": NackCode.NO_PDC_AVAIL, "nack_psn": psn},
                what="NACK NO_PDC_AVAIL for the SYN")
    rx = peer.expect(PdsControl, timeout_us=peer.ack_bound_us,
                     fields={"ctl_type": CtlType.CLOSE_REQ, "dpdcid": idle.spdcid,
                             "flags": has_flags(CpFlag.AR)},
                     what="the CLOSE_REQ asking the idle PDC to make room")
    require(peer, rx.pds.spdcid == idle.dpdcid, f"the CLOSE_REQ names PDC {rx.pds.spdcid}, "
            f"not the idle one ({idle.dpdcid})")
    close = idle.control(CtlType.CLOSE, ar=True)
    idle.ack_of(close, what="the ACK of the CLOSE the CLOSE_REQ asked for")
    response(newcomer, newcomer.send(peer.ses.no_op()[0], psn=psn, retx=True), OK,
             what="the SYN taken now that the table has room")
    close_pdc(newcomer)
