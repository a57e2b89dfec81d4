"""NACK codes the end point must generate (ref 2.6), beyond establishment and window ones
(those are in the establishment and window areas)."""

from __future__ import annotations

from uet.wire.constants import CtlType, NackCode, NackFlag
from uet.wire.records import PdsControl, PdsNack

from .. import packets as P
from ..peer import ANY_ACK, has_flags, lacks_flags
from ..registry import case
from .common import OK, check_bytes, opened, read_back, response, unique

ACK_US = 1000


def _nack(peer, code, psn, what="", **fields):
    f = {"nack_code": code, "nack_psn": psn}
    f.update(fields)
    return peer.expect(PdsNack, timeout_us=ACK_US, fields=f,
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


@case("PDS-NAK-009", "2.6",
      "A new ROD request arriving while the target's receive memory is full is answered "
      "NACK NO_PKT_BUFFER", config={"max_rx_memory_bytes": 32})
def no_pkt_buffer(peer):
    pdc = peer.pdc(rod=True)
    pdc.auto_clear = False
    response(pdc, pdc.send(peer.ses.no_op()[0]), OK)
    psn = pdc.send(peer.ses.no_op()[0])
    _nack(peer, NackCode.NO_PKT_BUFFER, psn)


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
