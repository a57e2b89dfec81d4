"""Control packets (ref 2.7)."""

from __future__ import annotations

from uet.pds import negotiation as neg
from uet.wire.constants import AckFlag, CpFlag, CtlType, NackCode
from uet.wire.records import PdsControl, PdsNack, psn_add

from .. import packets as P
from ..peer import ANY_ACK, has_flags
from ..registry import case
from .clear import dut_clear_answer, held
from .close import dut_idle_close
from .common import (
    OK,
    check_bytes,
    opened,
    other_pdcids,
    quiet,
    read_back,
    require,
    response,
    unique,
)
from .reactions import sacked_ack_req

ACK_US = 1000


@case("PDS-CP-001", "2.7, 3.8",
      "An ACK_REQ control packet for a PSN the target received is answered by an ACK "
      "naming that PSN")
def ack_req_received(peer):
    pdc = opened(peer)
    psn = pdc.send(peer.ses.no_op()[0])
    response(pdc, psn, OK)
    pdc.control(CtlType.ACK_REQ, psn)
    pdc.ack_of(psn, what=f"the ACK answering ACK_REQ({psn})")


@case("PDS-CP-002", "2.7, 3.7",
      "An ACK_REQ for a PSN whose guaranteed response is stored is answered by the ACK "
      "with that response again")
def ack_req_stored(peer):
    pdc = peer.pdc()
    pdc.auto_clear = False
    msg = peer.ses.write("rma", peer.scratch, unique(peer, 40))
    psn = pdc.send(msg[0])
    response(pdc, psn, OK)
    pdc.control(CtlType.ACK_REQ, psn)
    response(pdc, psn, OK, ses__modified_length=40,
             what="the stored RESPONSE answering ACK_REQ")


@case("PDS-CP-003", "2.7",
      "A NOOP control packet is not answered and leaves the PDC as it was: the PSN it "
      "carries (the next unused one) is not consumed, so a WRITE then sent at that PSN is "
      "executed and answered")
def noop(peer):
    pdc = quiet(peer)
    nxt = pdc.next_psn
    pdc.control(CtlType.NOOP, nxt)
    peer.expect_nothing(within_us=ACK_US, fields={"dpdcid": pdc.spdcid},
                        what="an answer to a NOOP control packet")
    data = unique(peer, 32)
    psn = pdc.send(peer.ses.write("rma", peer.scratch, data)[0])
    require(peer, psn == nxt, "peer bug: the WRITE did not take the NOOP's PSN")
    response(pdc, psn, OK, what="the RESPONSE OK of a WRITE at the PSN a NOOP carried")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), data,
                "the WRITE sent at the PSN a NOOP carried")


@case("PDS-CP-004", "2.7, 3.2",
      "A non-SYN control packet naming an unknown DPDCID is answered NACK INV_DPDCID")
def cp_unknown_dpdcid(peer):
    good = opened(peer)
    pkt = P.control(CtlType.ACK_REQ, good.psn(0), peer.new_pdcid(),
                    dpdcid=(good.dpdcid ^ 0x6969) or 1)
    peer.send(pkt)
    peer.expect(PdsNack, timeout_us=ACK_US,
                fields={"nack_code": NackCode.INV_DPDCID, "nack_psn": good.psn(0)},
                what="NACK INV_DPDCID for the control packet")


@case("PDS-CP-005", "2.7, 2.3",
      "A PROBE is answered by an ACK with P set echoing probe_opaque in bytes 2-3, with "
      "the current CACK")
def probe(peer):
    pdc = opened(peer)
    last = response(pdc, pdc.send(peer.ses.no_op()[0]), OK)
    opaque = peer.rng.randrange(1, 0x7FFF)
    pdc.control(CtlType.PROBE, pdc.psn(1), payload=pdc.psn(1), probe_opaque=opaque)
    rx = peer.expect(ANY_ACK, timeout_us=ACK_US,
                     fields={"flags": has_flags(AckFlag.P), "dpdcid": pdc.spdcid},
                     what="the probe ACK (P set)")
    require(peer, rx.pds.ack_psn_offset & 0xFFFF == opaque,
            f"probe_opaque {rx.pds.ack_psn_offset & 0xFFFF:#x} echoed, sent {opaque:#x}")
    require(peer, rx.pds.cack_psn == last.pds.cack_psn,
            f"probe ACK CACK {rx.pds.cack_psn}, the last ACK said {last.pds.cack_psn}")


@case("PDS-CP-006", "2.7",
      "Control packets the target sends carry isROD (flag 0x20) = the PDC's mode: a "
      "CLEAR_REQ on a ROD PDC has it set")
def isrod_on_target_cps(peer):
    pdc = peer.pdc(rod=True)
    pdc.auto_clear = False
    response(pdc, pdc.send(peer.ses.no_op()[0]), OK)
    period = peer.setup.clear_req_us or peer.setup.rto_us
    peer.expect(PdsControl, timeout_us=period * 1.5,
                fields={"ctl_type": CtlType.CLEAR_REQ, "dpdcid": pdc.spdcid,
                        "flags": has_flags(CpFlag.ISROD)},
                what="a CLEAR_REQ with isROD set on the ROD PDC")
    pdc.control(CtlType.CLEAR, 0, payload=pdc.psn(0))


@case("PDS-CP-007", "2.7, 3.8",
      "An ACK_REQ with SYN for a PDC that was never established is answered NACK "
      "PKT_NOT_RCVD")
def ack_req_syn_unknown(peer):
    pdc = peer.pdc()
    pdc.control(CtlType.ACK_REQ, pdc.psn(0), syn=True)
    peer.expect(PdsNack, timeout_us=ACK_US,
                fields={"nack_code": NackCode.PKT_NOT_RCVD, "nack_psn": pdc.psn(0),
                        "dpdcid": pdc.spdcid},
                what="NACK PKT_NOT_RCVD")


@case("PDS-CP-008", "2.7, 9.1",
      "Receivers accept either value of the CP isROD flag: an ACK_REQ with isROD set on a "
      "RUD PDC is answered normally")
def isrod_either(peer):
    pdc = opened(peer)
    pdc.control(CtlType.ACK_REQ, pdc.psn(0), rod=True)
    pdc.ack_of(pdc.psn(0), what="the ACK answering ACK_REQ with isROD set")


@case("PDS-CP-009", "2.7, 3.2",
      "A control packet whose SPDCID is not the PDC's (one below it, one above) is "
      "answered NACK PDC_HDR_MISMATCH")
def cp_spdcid_mismatch(peer):
    pdc = opened(peer)
    for foreign in other_pdcids(pdc.spdcid):
        pkt = P.control(CtlType.ACK_REQ, pdc.psn(0), foreign, dpdcid=pdc.dpdcid)
        peer.send(pkt)
        peer.expect(PdsNack, timeout_us=ACK_US,
                    fields={"nack_code": NackCode.PDC_HDR_MISMATCH, "nack_psn": pdc.psn(0)},
                    what=f"NACK PDC_HDR_MISMATCH for the control packet from SPDCID "
                         f"{foreign} (the PDC's is {pdc.spdcid})")


@case("PDS-CP-010", "2.7",
      "A NEGOTIATION control packet (not implemented by the reference provider) is "
      "ignored: no answer, the PDC keeps working")
def negotiation_ignored(peer):
    pdc = quiet(peer)
    pdc.control(CtlType.NEGOTIATION, pdc.psn(0))
    peer.expect_nothing(PdsNack, within_us=ACK_US, what="a NACK for NEGOTIATION")
    response(pdc, pdc.send(peer.ses.no_op()[0]), OK, what="the PDC still answering")


@case("PDS-CP-011", "2.7, 3.8",
      "An ACK_REQ for a PSN beyond everything received is answered NACK PKT_NOT_RCVD, "
      "not by an ACK")
def ack_req_future(peer):
    pdc = opened(peer)
    psn = psn_add(pdc.next_psn, 5)
    pdc.control(CtlType.ACK_REQ, psn)
    peer.expect(PdsNack, timeout_us=ACK_US,
                fields={"nack_code": NackCode.PKT_NOT_RCVD, "nack_psn": psn},
                what="NACK PKT_NOT_RCVD")
    peer.expect_nothing(ANY_ACK, within_us=ACK_US, fields={"ack_psn": psn},
                        what="an ACK naming a PSN never sent")


# ------------------------------------------------------------------ DSCP of control packets
# ACKs, NACKs and RUDI responses are checked in their areas (PDS-ACK-003, PDS-NAK-*,
# PDS-RUDI-006); these cases cover every control packet kind the device sends.


def _dscp(peer, rx):
    want = peer.setup.dscp_control
    require(peer, rx.dscp == want,
            f"{CtlType(rx.pds.ctl_type).name} left with DSCP {rx.dscp}, not the control DSCP "
            f"{want} (control packets must not queue behind data): {rx.describe()}")


@case("PDS-CP-012", "1.4, 2.7, 3.7",
      "A CLEAR_REQ the device sends as target leaves at the control DSCP (EF, 46 by "
      "default; the setup names it), not behind data")
def clear_req_dscp(peer):
    pdc, _msg, psn, _first = held(peer)
    period = peer.setup.clear_req_us or peer.setup.rto_us
    _dscp(peer, peer.expect(PdsControl, timeout_us=period * 1.5,
                            fields={"ctl_type": CtlType.CLEAR_REQ, "dpdcid": pdc.spdcid},
                            what="the CLEAR_REQ for the held response"))
    pdc.control(CtlType.CLEAR, 0, payload=psn)


@case("PDS-CP-013", "1.4, 2.7, 3.9",
      "A CLOSE_REQ the device sends as target (idle PDC) leaves at the control DSCP")
def close_req_dscp(peer):
    s = peer.setup
    if not s.target_idle_us:
        peer.fail("the setup disables the target idle close (target_idle_us = 0)")
    pdc = opened(peer)
    _dscp(peer, peer.expect(PdsControl, timeout_us=s.target_idle_us * 1.5,
                            fields={"ctl_type": CtlType.CLOSE_REQ, "dpdcid": pdc.spdcid},
                            what="the CLOSE_REQ of the idle PDC"))
    pdc.ack_of(pdc.control(CtlType.CLOSE, ar=True), what="the ACK of the CLOSE")


@case("PDS-CP-014", "1.4, 2.7, 3.9",
      "A CLOSE the device sends as initiator leaves at the control DSCP")
def close_dscp(peer):
    _dscp(peer, dut_idle_close(peer, lambda flow: {}, what="the CLOSE of the idle PDC"))


@case("PDS-CP-015", "1.4, 2.7, 3.8",
      "An ACK_REQ the device sends as initiator (for a packet SACKed but not ACKed) "
      "leaves at the control DSCP")
def ack_req_dscp(peer):
    _dscp(peer, sacked_ack_req(peer))


@case("PDS-CP-016", "1.4, 2.7, 3.7",
      "A CLEAR the device sends as initiator (answering CLEAR_REQ) leaves at the control "
      "DSCP")
def clear_dscp(peer):
    _dscp(peer, dut_clear_answer(peer, lambda flow: {}, what="the CLEAR answering CLEAR_REQ"))


@case("PDS-CP-017", "2.7, 4.8",
      "A NEGOTIATION (version 1) opening a PDC in its SYN form is answered with the "
      "device's own NEGOTIATION: the reply bit, version 1, the fep_cap of its profile, its "
      "MP_RANGE / 128 and its largest payload / 64; the PDC it opened then takes requests",
      note="our NEGOTIATION format (the reference is silent; docs/pds.md)")
def negotiation_answered(peer):
    pdc = peer.pdc()
    mine = neg.Capabilities(0x04, 1, 4096)
    pdc.control(CtlType.NEGOTIATION, pdc.psn(0), payload=neg.encode(mine), syn=True)
    rx = peer.expect(PdsControl, timeout_us=ACK_US,
                     fields={"ctl_type": CtlType.NEGOTIATION, "dpdcid": pdc.spdcid},
                     what="the device's NEGOTIATION answering ours")
    got = neg.decode(rx.pds.payload)
    want = (True, 1, int(peer.profile.fep_cap) & 0xFF, peer.setup.mp_range // 128,
            peer.profile.ses.mtu_payload // 64 * 64)
    have = (got.reply, got.version, got.fep_cap, got.mpr, got.max_payload)
    require(peer, have == want, f"NEGOTIATION (reply, version, fep_cap, mpr, max payload) "
            f"{have}, expected {want}: {rx.describe()}")
    pdc.dpdcid = rx.pds.spdcid  # the PDC is open: its ID came with the answer
    response(pdc, pdc.send(peer.ses.no_op()[0], syn=False), OK,
             what="a request on the PDC the NEGOTIATION opened")


@case("PDS-CP-018", "2.7, 3.9",
      "NOOP control packets keep an idle PDC open: while they come more often than the "
      "target's idle time no CLOSE_REQ is sent; once they stop, it is")
def noop_keepalive(peer):
    s = peer.setup
    if not s.target_idle_us:
        peer.fail("the setup disables the target idle close (target_idle_us = 0)")
    pdc = opened(peer)
    every = s.target_idle_us / 3
    for _ in range(4):
        peer.expect_nothing(PdsControl, within_us=every,
                            fields={"ctl_type": CtlType.CLOSE_REQ, "dpdcid": pdc.spdcid},
                            what="a CLOSE_REQ while NOOPs keep coming")
        pdc.control(CtlType.NOOP, pdc.psn(0))
    peer.expect(PdsControl, timeout_us=s.target_idle_us * 1.5,
                fields={"ctl_type": CtlType.CLOSE_REQ, "dpdcid": pdc.spdcid},
                what="the CLOSE_REQ once the NOOPs stopped")
