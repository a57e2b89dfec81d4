"""NACK codes the end point must generate (ref 2.6), beyond establishment and window ones
(those are in the establishment and window areas)."""

from __future__ import annotations

from uet.pds import negotiation as neg
from uet.wire.constants import CtlType, NackCode, NackFlag, RspOpcode, SesOpcode
from uet.wire.records import (
    PdsControl,
    PdsNack,
    PdsRequest,
    SesMedium,
    SesStandard,
    psn_add,
)

from .. import packets as P
from ..peer import ANY_ACK, has_flags, lacks_flags
from ..registry import case
from .common import (
    OK,
    check_bytes,
    close_pdc,
    opened,
    read_back,
    require,
    response,
    unique,
)

ACK_US = 1000


def _nack(peer, code, psn, what="", timeout_us=ACK_US, **fields):
    f = {"nack_code": code, "nack_psn": psn}
    f.update(fields)
    return peer.expect(PdsNack, timeout_us=timeout_us, fields=f,
                       what=what or f"NACK {NackCode(code).name}")


def _trimmed(peer, lasthop: bool):
    pdc = opened(peer)
    before = read_back(pdc, "rma", peer.scratch, 32)
    data = unique(peer, 32)
    msg = peer.ses.write("rma", peer.scratch, data)
    dscp = peer.setup.dscp_trimmed_lasthop if lasthop else peer.setup.dscp_trimmed
    psn = pdc.send(msg[0], dscp=dscp)
    code = NackCode.TRIMMED_LASTHOP if lasthop else NackCode.TRIMMED
    _nack(peer, code, psn, dpdcid=pdc.spdcid, spdcid=pdc.dpdcid)
    peer.expect_nothing(ANY_ACK, within_us=ACK_US, fields={"ack_psn": psn},
                        what="an ACK for the trimmed packet")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), before,
                "memory after a trimmed WRITE")
    pdc.send(msg[0], psn=psn, retx=True)
    response(pdc, psn, OK, what="the ACK of the untrimmed retransmission")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), data,
                "the retransmitted WRITE")


@case("PDS-NAK-001", "2.6, 6.3",
      "A request whose DSCP is the trimmed code point (a switch cut its payload) is "
      "answered NACK TRIMMED, not acknowledged and not executed; its retransmission is")
def trimmed(peer):
    _trimmed(peer, False)


@case("PDS-NAK-002", "2.6, 6.3",
      "A request trimmed at the last hop (DSCP = the last-hop trimmed code point) is "
      "answered NACK TRIMMED_LASTHOP and not executed")
def trimmed_lasthop(peer):
    _trimmed(peer, True)


@case("PDS-NAK-023", "2.6, 6.3",
      "Only the two trimmed code points mean trimmed: a WRITE at another DSCP (the first "
      "one above both trimmed code points that is not the control DSCP) is executed and "
      "answered RESPONSE OK, not NACKed")
def untrimmed_other_dscp(peer):
    s = peer.setup
    dscp = max(s.dscp_trimmed, s.dscp_trimmed_lasthop) + 1
    if dscp == s.dscp_control:
        dscp += 1
    pdc = opened(peer)
    data = unique(peer, 32)
    psn = pdc.send(peer.ses.write("rma", peer.scratch, data)[0], dscp=dscp)
    response(pdc, psn, OK, what=f"the RESPONSE OK of a WRITE sent at DSCP {dscp}")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), data,
                f"the WRITE sent at DSCP {dscp}")


@case("PDS-NAK-003", "2.6, 3.8",
      "An ACK_REQ control packet for a PSN the target never received (a gap below PSNs it "
      "did receive) is answered NACK PKT_NOT_RCVD")
def pkt_not_rcvd(peer):
    pdc = opened(peer)
    response(pdc, pdc.send(peer.ses.no_op()[0], psn=pdc.psn(2)), OK)
    pdc.control(CtlType.ACK_REQ, pdc.psn(1))
    _nack(peer, NackCode.PKT_NOT_RCVD, pdc.psn(1))


@case("PDS-NAK-004", "2.6, 3.8",
      "An ACK_REQ for a PSN received but not yet handed to the SES (ROD, waiting for a "
      "gap) is answered NACK RCVD_SES_PROCG")
def rcvd_ses_procg(peer):
    pdc = opened(peer, rod=True)
    psn = pdc.send(peer.ses.no_op()[0], psn=pdc.psn(2))
    pdc.control(CtlType.ACK_REQ, psn)
    _nack(peer, NackCode.RCVD_SES_PROCG, psn)


@case("PDS-NAK-005", "2.6, 3.9",
      "After the PDC was closed, a request with a PSN after the close PSN is answered NACK "
      "CLOSING")
def closing(peer):
    pdc = opened(peer)
    close_psn = pdc.control(CtlType.CLOSE, ar=True)
    pdc.ack_of(close_psn, what="the ACK of the CLOSE")
    psn = pdc.send(peer.ses.no_op()[0])
    _nack(peer, NackCode.CLOSING, psn)


@case("PDS-NAK-006", "2.6, 3.9",
      "A target PDC closed in error (its CLOSE_REQ got no CLOSE within Close_REQ_Time) "
      "answers later requests NACK CLOSING_IN_ERR")
def closing_in_err(peer):
    s = peer.setup
    if not s.target_idle_us:
        peer.fail("the setup disables the target idle close (target_idle_us = 0)")
    pdc = opened(peer)
    peer.expect(PdsControl, timeout_us=s.target_idle_us * 1.5,
                fields={"ctl_type": CtlType.CLOSE_REQ, "dpdcid": pdc.spdcid},
                what="the CLOSE_REQ of the idle PDC")
    peer.wait(s.close_req_time_us * 1.2 + s.rto_us)
    peer.flush()
    psn = pdc.send(peer.ses.no_op()[0])
    _nack(peer, NackCode.CLOSING_IN_ERR, psn)


@case("PDS-NAK-007", "2.6, 3.7",
      "A duplicate of a packet whose guaranteed response the target could not store is "
      "answered NACK GTD_RESP_UNAVAIL", config={"max_rx_memory_bytes": 1})
def gtd_resp_unavail(peer):
    pdc = peer.pdc()
    pdc.auto_clear = False
    psn = pdc.send(peer.ses.no_op()[0])
    first = response(pdc, psn, OK)
    pdc.send(peer.ses.no_op(msg_id=first.ses.message_id)[0], psn=psn, retx=True, syn=False)
    _nack(peer, NackCode.GTD_RESP_UNAVAIL, psn)


@case("PDS-NAK-008", "2.6",
      "A new RUD request arriving while the target's receive memory is full is answered "
      "NACK NO_RESOURCE", config={"max_rx_memory_bytes": 32})
def no_resource(peer):
    pdc = peer.pdc()
    pdc.auto_clear = False
    response(pdc, pdc.send(peer.ses.no_op()[0]), OK)
    psn = pdc.send(peer.ses.no_op()[0])
    _nack(peer, NackCode.NO_RESOURCE, psn)
    close_pdc(pdc)  # gives the stored response's memory back


@case("PDS-NAK-009", "2.6",
      "A new ROD request arriving while the target's receive memory is full is answered "
      "NACK NO_PKT_BUFFER", config={"max_rx_memory_bytes": 32})
def no_pkt_buffer(peer):
    pdc = peer.pdc(rod=True)
    pdc.auto_clear = False
    response(pdc, pdc.send(peer.ses.no_op()[0]), OK)
    psn = pdc.send(peer.ses.no_op()[0])
    _nack(peer, NackCode.NO_PKT_BUFFER, psn)
    close_pdc(pdc)


@case("PDS-NAK-010", "2.6, 3.10",
      "A ROD packet that would overflow the reorder buffer is answered NACK ROD_OOO (go-"
      "back style); the buffered ones are kept", config={"rod_buffer_packets": 2})
def rod_ooo(peer):
    pdc = opened(peer, rod=True)
    for i in (2, 3):
        pdc.send(peer.ses.no_op()[0], psn=pdc.psn(i))
    psn = pdc.send(peer.ses.no_op()[0], psn=pdc.psn(4))
    _nack(peer, NackCode.ROD_OOO, psn)
    psn = pdc.send(peer.ses.no_op()[0], psn=pdc.psn(1))
    for i in (1, 2, 3):
        response(pdc, pdc.psn(i), OK, what=f"the in-order delivery of Start+{i}")


@case("PDS-NAK-011", "2.6, 4.5",
      "A request the SES cannot take for lack of message state (reassembly table full) is "
      "answered NACK NO_SES_MSG_AVAIL and taken when retransmitted later",
      profile_changes={"ses.reassembly_max_messages": 1})
def no_ses_msg_avail(peer):
    pdc = opened(peer)
    a = peer.ses.write("rma", peer.scratch, unique(peer, 8192))
    b = peer.ses.write("rma", peer.scratch + 8192, unique(peer, 8192))
    pa = pdc.send(a[0])
    pdc.ack_of(pa)
    pb = pdc.send(b[0])
    _nack(peer, NackCode.NO_SES_MSG_AVAIL, pb)
    response(pdc, pdc.send(a[1]), OK, what="message A completing")
    pdc.send(b[0], psn=pb, retx=True)
    pdc.ack_of(pb, what="the retransmitted first packet of B, now accepted")
    response(pdc, pdc.send(b[1]), OK, what="message B completing")


@case("PDS-NAK-012", "2.6",
      "A NACK echoes the packet it answers: its EV, RETX if that packet was a "
      "retransmission, M if it arrived CE-marked; NT clear for RUD/ROD; control DSCP")
def nack_echoes(peer):
    pdc = opened(peer)
    stray = peer.pdc()
    stray.dpdcid = (pdc.dpdcid ^ 0x3C3C) or 1
    ev = peer.pick_ev()
    psn = stray.send(peer.ses.no_op()[0], syn=False, retx=True, ecn=3, ev=ev)
    _nack(peer, NackCode.INV_DPDCID, psn, ev=ev, dscp=peer.setup.dscp_control,
          flags=has_flags(NackFlag.RETX | NackFlag.M))
    psn = stray.send(peer.ses.no_op()[0], syn=False, ecn=2)
    _nack(peer, NackCode.INV_DPDCID, psn,
          flags=lacks_flags(NackFlag.RETX | NackFlag.M | NackFlag.NT))


@case("PDS-NAK-013", "2.6, 2.8",
      "A RUDI request the target cannot take (trimmed) is answered by a NACK with NT set, "
      "nack_psn = its pkt_id and both PDC IDs 0", caps=("rudi",))
def rudi_nack(peer):
    pkt_id = peer.rng.getrandbits(32)
    w = peer.ses.write("idempotent", 0, unique(peer, 16))
    peer.send(P.rudi(pkt_id) / w[0], dscp=peer.setup.dscp_trimmed)
    _nack(peer, NackCode.TRIMMED, pkt_id, flags=has_flags(NackFlag.NT), spdcid=0, dpdcid=0)


@case("PDS-NAK-014", "2.6, 4.7, 6.3",
      "An ACK carrying read data that arrives trimmed (the trimmed DSCP, its data cut) is "
      "answered NACK TRIMMED_ACK naming that PSN; the untrimmed ACK then completes the "
      "READ without the request being sent again", caps=("rendezvous",))
def trimmed_ack(peer):
    rest_len = 256
    eager = unique(peer, 64)
    rest = unique(peer, rest_len)
    pdc = opened(peer)
    msg = peer.ses.rendezvous("recv", eager, len(eager) + rest_len, read_key=0x5EED_0003,
                              read_index=0x00A, read_offset=0)
    response(pdc, pdc.send(msg[0]), OK, what="RESPONSE OK of the rendezvous eager part")
    rx = peer.expect(PdsRequest, timeout_us=ACK_US * 5,
                     where=lambda r: isinstance(r.ses, (SesStandard, SesMedium))
                     and r.ses.opcode == SesOpcode.READ,
                     what="the device's READ of the rest (its pull)")
    s, my_id = rx.ses, peer.new_pdcid()
    if isinstance(s, SesStandard):
        body = P.rsp_data(rest, message_id=s.message_id, job_id=s.job_id)
        cut = P.rsp_data(b"", message_id=s.message_id, job_id=s.job_id)
    else:
        body = P.rsp_data_small(rest, job_id=s.job_id, request_psn=rx.pds.psn)
        cut = P.rsp_data_small(b"", job_id=s.job_id, request_psn=rx.pds.psn)
    cut.payload_length = rest_len  # the header still says what the data was
    ack = P.ack_cc(psn_add(rx.pds.psn, -1), rx.pds.psn, my_id, rx.pds.spdcid)
    peer.send(ack / cut, ev=rx.ev, dscp=peer.setup.dscp_trimmed_lasthop)
    _nack(peer, NackCode.TRIMMED_ACK, rx.pds.psn, spdcid=rx.pds.spdcid, dpdcid=my_id,
          what="NACK TRIMMED_ACK for the trimmed ACK of the READ")
    peer.send(P.ack_cc(rx.pds.psn, rx.pds.psn, my_id, rx.pds.spdcid) / body, ev=rx.ev,
              dscp=peer.setup.dscp_control)
    peer.expect_nothing(PdsRequest, within_us=peer.setup.rto_us * 1.5,
                        fields={"psn": rx.pds.psn, "spdcid": rx.pds.spdcid},
                        what="the READ retransmitted although its data came in the end")


@case("PDS-NAK-015", "2.6, 6.2",
      "A congestion-controlled SYN (RUD_CC_REQ) when every congestion-control context is "
      "taken is answered NACK NO_CCC_AVAIL and not executed; a plain request still opens a "
      "PDC", config={"max_cc_contexts": 1})
def no_ccc_avail(peer):
    first = peer.pdc()
    response(first, first.send(peer.ses.no_op()[0], cc=True), OK,
             what="the first CC request opening a PDC (it takes the only context)")
    second = peer.pdc()
    psn = second.send(peer.ses.no_op()[0], cc=True)
    _nack(peer, NackCode.NO_CCC_AVAIL, psn, dpdcid=second.spdcid)
    plain = peer.pdc()
    response(plain, plain.send(peer.ses.no_op()[0]), OK,
             what="a plain (not congestion-controlled) SYN still taken")
    close_pdc(first)
    close_pdc(plain)


@case("PDS-NAK-016", "2.6, 3.5",
      "A SYN when every PSN-tracking bitmap is taken (a PDC ID is free) is answered NACK "
      "NO_BITMAP; once a PDC closes its bitmap serves a new one", config={"max_rx_bitmaps": 1})
def no_bitmap(peer):
    first = opened(peer)
    second = peer.pdc()
    psn = second.send(peer.ses.no_op()[0])
    _nack(peer, NackCode.NO_BITMAP, psn, dpdcid=second.spdcid)
    close = first.control(CtlType.CLOSE, ar=True)
    first.ack_of(close, what="the ACK of the first PDC's CLOSE")
    response(second, second.send(peer.ses.no_op()[0], psn=psn, retx=True), OK,
             what="the SYN taken once the bitmap is free")
    close_pdc(second)


@case("PDS-NAK-017", "2.6, 3.7",
      "A request whose guaranteed response the target has no room to store (receive memory "
      "not full, but short) is answered NACK NO_GTD_DEL_AVAIL and not executed; a packet "
      "that needs no stored response is taken", config={"max_rx_memory_bytes": 48})
def no_gtd_del_avail(peer):
    pdc = peer.pdc()
    pdc.auto_clear = False  # the first response stays stored
    response(pdc, pdc.send(peer.ses.no_op()[0]), OK)
    data = unique(peer, 32)
    msg = peer.ses.write("rma", peer.scratch, data)
    psn = pdc.send(msg[0])
    _nack(peer, NackCode.NO_GTD_DEL_AVAIL, psn, dpdcid=pdc.spdcid)
    peer.expect_nothing(ANY_ACK, within_us=ACK_US, fields={"ack_psn": psn},
                        what="an ACK of the refused WRITE")
    close_pdc(pdc)


@case("PDS-NAK-018", "2.6, 3.8, 4.7",
      "An ACK_REQ for a READ whose stored response carries the read data (an ACK of the "
      "data class) is answered NACK ACK_WITH_DATA; the READ sent again gets that ACK with "
      "the data")
def ack_with_data(peer):
    pdc = opened(peer)
    pdc.auto_clear = False  # the READ's response must stay stored for the ACK_REQ
    psn = pdc.send_msg(peer.ses.read("readonly", 200, 96))[-1]
    first = pdc.ack_of(psn, fields={"ses.opcode": RspOpcode.RESPONSE_W_DATA},
                       what="the ACK of the READ with its data")
    pdc.control(CtlType.ACK_REQ, psn)
    _nack(peer, NackCode.ACK_WITH_DATA, psn, dpdcid=pdc.spdcid)
    msg = peer.ses.read("readonly", 200, 96, msg_id=first.ses.message_id
                        if hasattr(first.ses, "message_id") else None)
    pdc.send(msg[0], psn=psn, retx=True)
    again = pdc.ack_of(psn, fields={"ses.opcode": RspOpcode.RESPONSE_W_DATA},
                       what="the stored ACK with the data, for the READ sent again")
    check_bytes(peer, again.data, first.data, "the read data of the ACK sent again")


@case("PDS-NAK-019", "2.6, 3.2",
      "A SYN reusing a closed PDC's SPDCID with a Start_PSN within 2^16 of that PDC's last "
      "PSN is answered NACK NEW_START_PSN with a Start_PSN 2^16 past it; the SYN re-based "
      "on it is taken")
def new_start_psn_reuse(peer):
    old = opened(peer)
    close = old.control(CtlType.CLOSE, ar=True)
    old.ack_of(close, what="the ACK of the CLOSE")
    again = peer.pdc(start_psn=psn_add(close, 100))
    again.spdcid = old.spdcid  # the same initiator PDC, a new incarnation
    psn = again.send(peer.ses.no_op()[0])
    n = _nack(peer, NackCode.NEW_START_PSN, psn, dpdcid=old.spdcid,
              payload=psn_add(close, 1 << 16))
    fresh = peer.pdc(start_psn=n.pds.payload)
    fresh.spdcid = old.spdcid
    response(fresh, fresh.send(peer.ses.no_op()[0]), OK,
             what="the SYN with the Start_PSN the device asked for")


@case("PDS-NAK-020", "2.6, 6.2",
      "A CREDIT_REQ to an end point without credit-based congestion control (an "
      "unsupported feature) is answered NACK UNEXP_EVENT")
def unexp_event_credit(peer):
    if peer.setup.cc in ("rccc", "nscc+rccc"):
        peer.fail(f"the setup's congestion control is {peer.setup.cc} (credit-based)")
    pdc = opened(peer)
    psn = pdc.control(CtlType.CREDIT_REQ, pdc.psn(0), payload=64)
    _nack(peer, NackCode.UNEXP_EVENT, psn, dpdcid=pdc.spdcid)


@case("PDS-NAK-021", "2.6, 2.7",
      "A NEGOTIATION of a version the end point does not speak (2; docs/pds.md) is "
      "answered NACK UNEXP_EVENT", note="our NEGOTIATION format (the reference is silent)")
def unexp_event_negotiation(peer):
    pdc = opened(peer)
    payload = neg.encode(neg.Capabilities(0x04, 1, 4096, version=2))
    psn = pdc.control(CtlType.NEGOTIATION, pdc.psn(0), payload=payload)
    _nack(peer, NackCode.UNEXP_EVENT, psn, dpdcid=pdc.spdcid)


@case("PDS-NAK-022", "2.6, 3.6",
      "With plain ACKs (no SACK bitmap for the initiator to see gaps), a PSN still missing "
      "after a later one arrived is NACKed RCVR_INFER_LOSS by the target within 4 ACK "
      "timers, and not again before its retransmission could come (6 more ACK timers)",
      config={"ack_type": "ack"})
def rcvr_infer_loss(peer):
    pdc = opened(peer)
    t = peer.now_ps
    pdc.send(peer.ses.no_op()[0], psn=pdc.psn(2), ar=False)
    timer = peer.setup.ack_timer_us
    n = _nack(peer, NackCode.RCVR_INFER_LOSS, pdc.psn(1), dpdcid=pdc.spdcid,
              timeout_us=6 * timer, what="NACK RCVR_INFER_LOSS for the missing PSN")
    require(peer, peer.elapsed_us(n, t) >= 3 * timer,
            f"the gap NACK came {peer.elapsed_us(n, t):.0f} us after the later PSN, before "
            f"4 ACK timers ({4 * timer} us): no room for reordering")
    peer.expect_nothing(PdsNack, within_us=6 * timer,
                        fields={"nack_code": NackCode.RCVR_INFER_LOSS, "nack_psn": pdc.psn(1)},
                        what="a second RCVR_INFER_LOSS for the PSN while its retransmission "
                        "may still be on its way")
    response(pdc, pdc.send(peer.ses.no_op()[0], psn=pdc.psn(1)), OK,
             what="the missing PSN sent: its ACK")
