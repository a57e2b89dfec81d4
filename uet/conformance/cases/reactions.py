"""The device as initiator: reactions to received NACKs and retransmission (ref 2.6, 3.8).

The peer makes the device initiate a PDC (a READ larger than fits in ACKs: the device sends
the data back as requests, ref. 4.7) and then plays the target of that PDC: it ACKs, NACKs
with each code, withholds ACKs, or SACKs without ACKing, and watches what the device does.

Expected reaction per NACK code (ref 2.6 "RP action", the reference provider's
``uet_pds_nack_action``):

* retransmit: the NACKed packet is sent again (same PSN, RETX|AR) without waiting for the
  RTO; TRIMMED_ACK, which an initiator sends about an ACK of the target's, makes the
  device (the READ's target) send that ACK again; the resource codes (NO_PDC_AVAIL ...
  NO_RESOURCE) only need a retransmission before the RTO has passed 1.5 times (the
  built-in end point deliberately waits for the packet's RTO so a full target is not
  hammered: docs/pds.md);
* close PDC: the packet is never sent again and the device closes the PDC (a best-effort
  CLOSE, ref 3.9 "close in error");
* RCVD_SES_PROCG and reserved codes: ignored, the packet is retransmitted by its RTO only;
* NEW_START_PSN (SYN state): every outstanding packet is resent re-based on the new
  Start_PSN.
"""

from __future__ import annotations

from uet.wire.constants import AckFlag, CpFlag, CtlType, NackCode, ReqFlag, RspOpcode
from uet.wire.records import PdsControl, PdsRequest, psn_add

from .. import packets as P
from ..peer import has_flags
from ..registry import case
from ..setup import pattern
from .common import OK, DutFlow, check_bytes, opened, other_pdcids, require

RETRANSMIT = ("TRIMMED", "TRIMMED_LASTHOP", "TRIMMED_ACK", "PSN_OOR_WINDOW", "ROD_OOO",
              "PKT_NOT_RCVD", "ACK_WITH_DATA", "RCVR_INFER_LOSS", "EXP_NACK_NORMAL",
              "EXP_NACK_ERR")
RESOURCE = ("NO_PDC_AVAIL", "NO_CCC_AVAIL", "NO_BITMAP", "NO_PKT_BUFFER", "NO_GTD_DEL_AVAIL",
            "NO_SES_MSG_AVAIL", "NO_RESOURCE")
CLOSE = ("INV_DPDCID", "PDC_HDR_MISMATCH", "CLOSING", "CLOSING_IN_ERR", "GTD_RESP_UNAVAIL",
         "INVALID_SYN", "PDC_MODE_MISMATCH", "UNEXP_EVENT", "EXP_NACK_FATAL")
IGNORE = (("RCVD_SES_PROCG", NackCode.RCVD_SES_PROCG), ("reserved 0x0C", 0x0C),
          ("reserved 0x1B", 0x1B))


def _established_flow(peer, n=3, my_id=None):
    """A device flow of ``n`` packets whose first packet is acknowledged (ESTABLISHED).
    ``my_id``: the peer's PDC ID of an earlier flow (the device may send on the PDC it
    opened then, which knows the peer by that ID)."""
    flow = DutFlow(peer, n)
    if my_id is not None:
        flow.my_id = my_id
    flow.begin()
    flow.ack(flow.psn(0))
    return flow


def _retransmit_case(name: str):
    code = NackCode[name]

    def fn(peer):
        rto = peer.setup.rto_us
        flow = _established_flow(peer)
        t = peer.now_ps
        flow.nack(code, flow.psn(1))
        rx = flow.expect_retx(flow.psn(1), timeout_us=rto / 2,
                              what=f"the retransmission of PSN {flow.psn(1)} right after "
                                   f"NACK {name} (well before the {rto} us RTO)")
        require(peer, peer.elapsed_us(rx, t) < rto / 2,
                f"the retransmission came {peer.elapsed_us(rx, t):.0f} us after NACK "
                f"{name}; a retransmit-class NACK is acted on at once (RTO {rto} us)")
        require(peer, bool(rx.pds.flags & ReqFlag.AR), f"retransmission without AR: "
                f"{rx.describe()}")
        require(peer, rx.data == flow.got[1].data, "the retransmission carries other data")
        flow.ack(flow.psn(2))

    return fn


def _resource_case(name: str):
    code = NackCode[name]

    def fn(peer):
        rto = peer.setup.rto_us
        flow = _established_flow(peer)
        flow.nack(code, flow.psn(1))
        flow.expect_retx(flow.psn(1), timeout_us=rto * 1.5,
                         what=f"the retransmission of PSN {flow.psn(1)} after NACK {name} "
                              f"(at the latest by 1.5 RTO)")
        flow.ack(flow.psn(2))

    return fn


def _close_case(name: str):
    code = NackCode[name]

    def fn(peer):
        rto = peer.setup.rto_us
        flow = _established_flow(peer)
        sent = flow.nack(code, flow.psn(1))
        peer.expect(PdsControl, timeout_us=rto,
                    fields={"ctl_type": CtlType.CLOSE, "spdcid": flow.dut_id},
                    what=f"the device closing the PDC after NACK {name} (a CLOSE)")
        # a retransmission already here when the NACK left (its RTO fired first: a peer
        # slowed down by a loaded machine) is not a reaction to the NACK
        peer.collect(PdsRequest, within_us=0,
                     fields={"psn": flow.psn(1), "spdcid": flow.dut_id},
                     where=lambda rx: rx.t_ps <= sent)
        flow.expect_no_retx(flow.psn(1), within_us=rto * 1.5,
                            what=f"a retransmission of PSN {flow.psn(1)} after the "
                                 f"close-class NACK {name}")

    return fn


def _ignore_case(label: str, code: int):
    def fn(peer):
        rto = peer.setup.rto_us
        flow = _established_flow(peer)
        t = peer.now_ps
        flow.nack(code, flow.psn(1))
        peer.expect_nothing(PdsRequest, within_us=rto / 2, exact=True,
                            fields={"psn": flow.psn(1), "spdcid": flow.dut_id},
                            what=f"an immediate retransmission after NACK {label} (to be "
                                 "ignored)")
        rx = flow.expect_retx(flow.psn(1), timeout_us=rto,
                              what=f"the RTO retransmission after the ignored NACK {label}")
        require(peer, peer.elapsed_us(rx, t) >= rto / 2, "retransmitted before the RTO")
        flow.ack(flow.psn(2))

    return fn


def _trimmed_ack_case(peer):
    """TRIMMED_ACK is about an ACK: the initiator of a READ NACKs the ACK that carried the
    data when a switch trimmed it, and the ACK's sender (the device, as target) resends it
    (ref 2.6 "RP action: retransmit", 4.7, 6.3)."""
    rto = peer.setup.rto_us
    pdc = opened(peer)
    psn = pdc.send_msg(peer.ses.read("readonly", 64, 128))[-1]
    first = pdc.ack_of(psn, fields={"ses.opcode": RspOpcode.RESPONSE_W_DATA,
                                    "ses.return_code": OK},
                       what=f"the ACK of the READ at PSN {psn} carrying its 128 bytes")
    t = peer.send(P.nack(NackCode.TRIMMED_ACK, psn, pdc.spdcid, pdc.dpdcid),
                  ev=pdc.ev, dscp=peer.setup.dscp_control)
    again = pdc.ack_of(psn, fields={"ses.opcode": RspOpcode.RESPONSE_W_DATA,
                                    "flags": has_flags(AckFlag.RETX)},
                       timeout_us=rto / 2,
                       what=f"the ACK of PSN {psn} sent again (RETX) after NACK TRIMMED_ACK, "
                            f"well before the {rto} us RTO")
    require(peer, peer.elapsed_us(again, t) < rto / 2, "the ACK came back only after "
            f"{peer.elapsed_us(again, t):.0f} us; TRIMMED_ACK is acted on at once")
    check_bytes(peer, again.data, first.data, "the read data of the resent ACK")
    check_bytes(peer, again.data, pattern(128, 64), "the read data")


for _i, _name in enumerate(RETRANSMIT, 1):
    if _name == "TRIMMED_ACK":  # sent by an initiator to the target whose ACK it names
        case(f"PDS-RNK-{_i:03d}", "2.6, 4.7, 6.3",
             "NACK TRIMMED_ACK (code 0x03) from the initiator of a READ, naming the PSN "
             "whose ACK carried the read data, makes the device send that ACK again at "
             "once: the same response and data, RETX set")(_trimmed_ack_case)
        continue
    case(f"PDS-RNK-{_i:03d}", "2.6, 3.8",
         f"NACK {_name} (code 0x{int(NackCode[_name]):02X}) for an outstanding packet makes "
         "the device retransmit it at once: same PSN and data, RETX and AR set, without "
         "waiting for the RTO")(_retransmit_case(_name))
for _i, _name in enumerate(RESOURCE, len(RETRANSMIT) + 1):
    case(f"PDS-RNK-{_i:03d}", "2.6, 3.8",
         f"NACK {_name} (code 0x{int(NackCode[_name]):02X}, target short of a resource) "
         "makes the device retransmit the packet (RETX) by 1.5 RTO at the latest",
         note="the built-in end point waits for the packet's RTO (documented choice)")(
        _resource_case(_name))
for _i, _name in enumerate(CLOSE, len(RETRANSMIT) + len(RESOURCE) + 1):
    case(f"PDS-RNK-{_i:03d}", "2.6, 3.9",
         f"NACK {_name} (code 0x{int(NackCode[_name]):02X}, close class) closes the PDC in "
         "error: the NACKed packet is never retransmitted and the device sends a CLOSE")(
        _close_case(_name))
for _i, (_label, _code) in enumerate(IGNORE, len(RETRANSMIT) + len(RESOURCE) + len(CLOSE) + 1):
    case(f"PDS-RNK-{_i:03d}", "2.6, 3.8",
         f"NACK {_label} is not acted on: no immediate retransmission, the packet is "
         "retransmitted by its RTO")(_ignore_case(_label, _code))
_NEXT = len(RETRANSMIT) + len(RESOURCE) + len(CLOSE) + len(IGNORE) + 1


@case(f"PDS-RNK-{_NEXT:03d}", "2.6, 3.2",
      "NACK NEW_START_PSN while the device's PDC is in SYN state re-bases it: every "
      "un-ACKed packet is resent with PSN = new Start_PSN + its offset, SYN still set")
def new_start_psn(peer):
    flow = DutFlow(peer, 2)
    first = flow.begin()
    new_start = (first[0].pds.start_psn + 0x10000) & 0x7FFFFFFF or 0x10000
    flow.nack(NackCode.NEW_START_PSN, first[0].pds.psn, payload=new_start)
    for i in range(2):
        peer.expect(PdsRequest, timeout_us=peer.setup.rto_us / 2,
                    fields={"psn": psn_add(new_start, i), "spdcid": flow.dut_id,
                            "psn_offset": i, "flags": lambda f: bool(f & ReqFlag.SYN),
                            "ses.message_offset": i * 4096},
                    what=f"packet {i} resent at PSN new Start_PSN + {i} with SYN")
    flow.ack(psn_add(new_start, 1))


@case(f"PDS-RNK-{_NEXT + 1:03d}", "2.6",
      "A NACK naming a PSN that is not outstanding (already acknowledged) is ignored: "
      "nothing is retransmitted")
def stale_nack(peer):
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(1))
    flow.nack(NackCode.TRIMMED, flow.psn(0))
    flow.expect_no_retx(flow.psn(0), within_us=peer.setup.rto_us * 1.5,
                        what="a retransmission of an acknowledged PSN after a stale NACK")


@case(f"PDS-RNK-{_NEXT + 2:03d}", "2.6, 3.2",
      "A NACK whose SPDCID is not the peer PDC's (once established; one below it, one "
      "above) is ignored: no immediate retransmission")
def foreign_nack(peer):
    rto = peer.setup.rto_us
    real = None
    for side in (0, 1):
        flow = _established_flow(peer, my_id=real)
        real = flow.my_id
        flow.my_id = other_pdcids(real)[side]
        flow.nack(NackCode.TRIMMED, flow.psn(1))
        flow.my_id = real
        peer.expect_nothing(PdsRequest, within_us=rto / 2, exact=True,
                            fields={"psn": flow.psn(1), "spdcid": flow.dut_id},
                            what="a retransmission triggered by a NACK from a foreign PDC "
                                 f"(SPDCID {other_pdcids(real)[side]}, the peer's is {real})")
        flow.ack(flow.psn(2))


# ---------------------------------------------------------------------------- RTO (3.8)


@case("PDS-RTX-001", "3.8",
      "A packet not acknowledged within the RTO is retransmitted: same PSN, same SES "
      "header and data, RETX and AR set, not before the RTO")
def rto_retransmit(peer):
    rto = peer.setup.rto_us
    flow = DutFlow(peer, 2)
    first = flow.begin()
    flow.ack(flow.psn(0))
    rx = flow.expect_retx(flow.psn(1), timeout_us=rto * 1.5,
                          what=f"the RTO retransmission of PSN {flow.psn(1)}")
    gap = peer.elapsed_us(rx, first[1].t_ps)
    require(peer, gap >= rto * 0.8, f"retransmitted {gap:.0f} us after the first "
            f"transmission, before the {rto} us RTO")
    require(peer, bool(rx.pds.flags & ReqFlag.AR), f"no AR: {rx.describe()}")
    require(peer, rx.data == first[1].data and rx.ses == first[1].ses,
            "the retransmission's SES header or data differ from the original")
    flow.ack(flow.psn(1))


@case("PDS-RTX-002", "3.8",
      "RTO backoff: a packet retransmitted once and still not acknowledged is "
      "retransmitted again after about twice the RTO (backoff x2)")
def rto_backoff(peer):
    rto = peer.setup.rto_us
    k = peer.setup.rto_backoff
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(0))
    r1 = flow.expect_retx(flow.psn(1), timeout_us=rto * 1.5)
    r2 = flow.expect_retx(flow.psn(1), timeout_us=rto * k * 1.5,
                          what="the second retransmission")
    gap = peer.elapsed_us(r2, r1.t_ps)
    require(peer, rto * k * 0.8 <= gap <= rto * k * 1.3 + peer.grace_us / 10,
            f"second retransmission {gap:.0f} us after the first; RTO {rto} us x{k}")
    flow.ack(flow.psn(1))


@case("PDS-RTX-003", "3.8, 3.9",
      "After max_retries retransmissions of one packet the PDC is closed in error: the "
      "packet is sent 1 + max_retries times in all, then a CLOSE")
def retry_limit(peer):
    s = peer.setup
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(0))
    total = sum(s.rto_backoff ** i for i in range(s.max_retries + 1))
    seen = peer.collect(PdsRequest, within_us=s.rto_us * (total + 1.5),
                        fields={"psn": flow.psn(1), "spdcid": flow.dut_id})
    require(peer, len(seen) == s.max_retries,
            f"{len(seen)} retransmissions of PSN {flow.psn(1)}, max_retries is "
            f"{s.max_retries}")
    peer.expect(PdsControl, timeout_us=s.rto_us,
                fields={"ctl_type": CtlType.CLOSE, "spdcid": flow.dut_id},
                what="the CLOSE of the PDC closed in error")


@case("PDS-RTX-004", "3.8",
      "A packet SACKed (arrived) but whose ACK never came is not resent at its RTO: the "
      "device sends an ACK_REQ control packet for its PSN instead")
def sack_then_ack_req(peer):
    def no_data_retx(flow):
        peer.expect_nothing(PdsRequest, within_us=1000,
                            fields={"psn": flow.psn(1), "spdcid": flow.dut_id},
                            what="a data retransmission of a SACKed packet")
    sacked_ack_req(peer, no_data_retx)


def sacked_ack_req(peer, then=None):
    """The device's return flow of three packets, the second SACKed (arrived) but not
    ACKed: the ACK_REQ the device sends for it at its RTO (``then(flow)`` runs after it,
    before the flow is acknowledged)."""
    rto = peer.setup.rto_us
    flow = DutFlow(peer, 3)
    flow.begin()
    base = psn_add(flow.psn(0), 1)
    flow.ack(flow.psn(0), sack_base=base, sack_bitmap=0b1)  # PSN 1 arrived, 2 not
    rx = peer.expect(PdsControl, timeout_us=rto * 1.5,
                     fields={"ctl_type": CtlType.ACK_REQ, "psn": flow.psn(1),
                             "spdcid": flow.dut_id},
                     what=f"an ACK_REQ for the SACKed PSN {flow.psn(1)}")
    if then is not None:
        then(flow)
    flow.ack(flow.psn(2))
    return rx


@case("PDS-RTX-005", "3.6, 3.8",
      "A CACK covering every packet releases them: nothing is retransmitted afterwards")
def cack_releases(peer):
    flow = DutFlow(peer, 3)
    flow.begin()
    flow.ack(flow.psn(2))
    peer.expect_nothing(PdsRequest, within_us=peer.setup.rto_us * 1.5,
                        fields={"spdcid": flow.dut_id},
                        what="a retransmission of a packet covered by the CACK")


@case("PDS-RTX-006", "3.8",
      "An ACK_REQ answered by NACK PKT_NOT_RCVD makes the device resend the data")
def ack_req_then_not_rcvd(peer):
    rto = peer.setup.rto_us
    flow = DutFlow(peer, 3)
    flow.begin()
    flow.ack(flow.psn(0), sack_base=psn_add(flow.psn(0), 1), sack_bitmap=0b1)
    peer.expect(PdsControl, timeout_us=rto * 1.5,
                fields={"ctl_type": CtlType.ACK_REQ, "psn": flow.psn(1)},
                what=f"an ACK_REQ for PSN {flow.psn(1)}")
    flow.nack(NackCode.PKT_NOT_RCVD, flow.psn(1))
    flow.expect_retx(flow.psn(1), timeout_us=rto / 2,
                     what="the data resent after PKT_NOT_RCVD")
    flow.ack(flow.psn(2))


@case("PDS-RTX-007", "3.7, 3.8",
      "The device's retransmissions carry the current Clear_PSN: lowest un-released PSN "
      "- 1 (here the acknowledged first packet)")
def retx_clear_psn(peer):
    flow = _established_flow(peer)
    flow.nack(NackCode.TRIMMED, flow.psn(1))
    rx = flow.expect_retx(flow.psn(1), timeout_us=peer.setup.rto_us / 2)
    require(peer, rx.pds.clear_psn == flow.psn(0),
            f"Clear_PSN {rx.pds.clear_psn}, expected {flow.psn(0)} (PSN {flow.psn(0)} is "
            f"released, PSN {flow.psn(1)} is not)")
    require(peer, not rx.pds.flags & CpFlag.SYN, "SYN still set after the first ACK")
    flow.ack(flow.psn(2))


@case("PDS-RTX-008", "3.6, 3.8",
      "An ACK whose CACK lies beyond every PSN the device sent is ignored: nothing is "
      "released, the packets are retransmitted by their RTO")
def ack_beyond_next_psn(peer):
    rto = peer.setup.rto_us
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(psn_add(flow.psn(1), 10))
    flow.expect_retx(flow.psn(0), timeout_us=rto * 1.5,
                     what="the RTO retransmission despite the bogus ACK")
    flow.ack(flow.psn(1))


@case("PDS-RTX-009", "3.1, 3.6",
      "An ACK from another source address than the PDC's peer is ignored: the packet "
      "it names is retransmitted by its RTO")
def ack_wrong_source(peer):
    rto = peer.setup.rto_us
    flow = DutFlow(peer, 2)
    flow.begin()
    flow.ack(flow.psn(0))
    pkt = P.ack_cc(flow.psn(1), flow.psn(1), flow.my_id, flow.dut_id)
    peer.send(pkt, src=peer.alt_ip, ev=flow.my_ev)
    flow.expect_retx(flow.psn(1), timeout_us=rto * 1.5,
                     what="the RTO retransmission despite the ACK from a foreign address")
    flow.ack(flow.psn(1))


@case("PDS-RTX-010", "3.2, 3.6",
      "An ACK whose SPDCID is not the peer PDC's (once established; one below it, one "
      "above) is ignored: the packet it names is retransmitted by its RTO")
def ack_foreign_spdcid(peer):
    rto = peer.setup.rto_us
    real = None
    for side in (0, 1):
        flow = _established_flow(peer, 2, my_id=real)
        real = flow.my_id
        flow.my_id = other_pdcids(real)[side]
        flow.ack(flow.psn(1))
        flow.my_id = real
        flow.expect_retx(flow.psn(1), timeout_us=rto * 1.5,
                         what="the RTO retransmission despite the ACK from a foreign PDC "
                              f"(SPDCID {other_pdcids(real)[side]}, the peer's is {real})")
        flow.ack(flow.psn(1))
