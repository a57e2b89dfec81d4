"""PDC establishment and SYN rules (ref 3.1, 3.2)."""

from __future__ import annotations

from uet.wire.constants import NackCode, PdsType, ReqFlag
from uet.wire.records import PdsNack, PdsRequest, psn_add

from .. import packets as P
from ..peer import ANY_ACK, between, has_flags, lacks_flags, not_
from ..registry import case
from .common import (
    OK,
    DutFlow,
    check_bytes,
    close_pdc,
    opened,
    other_pdcids,
    read_back,
    require,
    response,
    unique,
)

ACK_US = 1000


def _nack(peer, code, psn, what, **fields):
    f = {"nack_code": code, "nack_psn": psn}
    f.update(fields)
    return peer.expect(PdsNack, timeout_us=ACK_US, fields=f, what=what)


@case("PDS-EST-001", "3.2",
      "A SYN request for an unknown {source, destination, SPDCID} opens a target PDC at "
      "once (0-RTT): it is executed and acknowledged by an ACK whose DPDCID is the "
      "initiator's SPDCID and whose SPDCID is a non-zero target PDC ID")
def syn_opens_pdc(peer):
    pdc = peer.pdc()
    data = unique(peer, 64)
    psn = pdc.send(peer.ses.write("rma", peer.scratch, data)[0])
    response(pdc, psn, OK, spdcid=not_(0), dpdcid=pdc.spdcid)
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 64), data,
                "the WRITE carried by the SYN")


@case("PDS-EST-002", "3.2",
      "The target bases its receive window at Start_PSN = PSN - psn_offset: a first SYN "
      "packet at Start_PSN + 2 is acknowledged with CACK = Start_PSN - 1 and ACK_PSN = its "
      "PSN")
def syn_start_psn(peer):
    pdc = peer.pdc()
    psn = pdc.send(peer.ses.no_op()[0], psn=pdc.psn(2))
    pdc.ack_of(psn, fields={"cack_psn": pdc.psn(-1)})


@case("PDS-EST-003", "3.2",
      "A non-SYN request naming a DPDCID the target does not know is answered NACK "
      "INV_DPDCID (nack_psn = its PSN, DPDCID = the sender's SPDCID) and is not executed")
def unknown_dpdcid(peer):
    good = opened(peer)
    before = read_back(good, "rma", peer.scratch, 32)
    stray = peer.pdc()
    stray.dpdcid = (good.dpdcid ^ 0x5A5A) or 1
    psn = stray.send(peer.ses.write("rma", peer.scratch, unique(peer, 32))[0], syn=False)
    _nack(peer, NackCode.INV_DPDCID, psn, "NACK INV_DPDCID", dpdcid=stray.spdcid)
    check_bytes(peer, read_back(good, "rma", peer.scratch, 32), before,
                "memory after a request on an unknown PDC")


@case("PDS-EST-004", "3.2",
      "A non-SYN request whose SPDCID is not the PDC's (one below it, one above) is "
      "answered NACK PDC_HDR_MISMATCH and not executed")
def spdcid_mismatch(peer):
    pdc = opened(peer)
    before = read_back(pdc, "rma", peer.scratch, 32)
    for foreign in other_pdcids(pdc.spdcid):
        hdr = P.request(pdc.next_psn, foreign, dpdcid=pdc.dpdcid,
                        start_psn=pdc.start_psn, clear_psn=pdc.clear_psn)
        peer.send(hdr / peer.ses.write("rma", peer.scratch, unique(peer, 32))[0])
        _nack(peer, NackCode.PDC_HDR_MISMATCH, pdc.next_psn,
              f"NACK PDC_HDR_MISMATCH for SPDCID {foreign} (the PDC's is {pdc.spdcid})",
              spdcid=pdc.dpdcid)
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), before,
                "memory after requests with a foreign SPDCID")


@case("PDS-EST-005", "3.2",
      "A non-SYN request from another source address than the PDC's is answered (to that "
      "address) NACK PDC_HDR_MISMATCH and not executed")
def source_mismatch(peer):
    pdc = opened(peer)
    before = read_back(pdc, "rma", peer.scratch, 32)
    psn = pdc.send(peer.ses.write("rma", peer.scratch, unique(peer, 32))[0],
                   src=peer.alt_ip)
    _nack(peer, NackCode.PDC_HDR_MISMATCH, psn, "NACK PDC_HDR_MISMATCH to the other address",
          dst_ip=peer.alt_ip)
    pdc.next_psn = psn  # that PSN was never accepted: send it again below
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), before,
                "memory after a request from a foreign address")


@case("PDS-EST-006", "3.2",
      "A ROD request naming an established RUD PDC is answered NACK PDC_MODE_MISMATCH")
def mode_mismatch(peer):
    pdc = opened(peer)
    hdr = P.request(pdc.next_psn, pdc.spdcid, dpdcid=pdc.dpdcid, rod=True,
                    start_psn=pdc.start_psn, clear_psn=pdc.clear_psn)
    peer.send(hdr / peer.ses.no_op()[0])
    _nack(peer, NackCode.PDC_MODE_MISMATCH, pdc.next_psn, "NACK PDC_MODE_MISMATCH")


@case("PDS-EST-007", "3.2",
      "A ROD SYN from the same initiator PDC (same source and SPDCID) as an open RUD PDC is "
      "answered NACK PDC_MODE_MISMATCH")
def mode_mismatch_syn(peer):
    pdc = opened(peer)
    hdr = P.request(pdc.next_psn, pdc.spdcid, syn=True, rod=True, start_psn=pdc.start_psn)
    peer.send(hdr / peer.ses.no_op()[0])
    _nack(peer, NackCode.PDC_MODE_MISMATCH, pdc.next_psn, "NACK PDC_MODE_MISMATCH")


def _refused_syn_leaves_nothing(peer, offset, rod=False):
    """A SYN WRITE with psn_offset ``offset`` (>= MP_RANGE) must be NACKed INVALID_SYN,
    not executed, and leave no target PDC behind: the NACK's SPDCID names no PDC, and a
    valid SYN from the same initiator PDC (same SPDCID, a new Start_PSN) opens one."""
    probe = opened(peer)
    before = read_back(probe, "rma", peer.scratch, 32)
    pdc = peer.pdc(rod=rod)
    psn = pdc.send(peer.ses.write("rma", peer.scratch, unique(peer, 32))[0],
                   psn=pdc.psn(offset))
    nack = _nack(peer, NackCode.INVALID_SYN, psn, "NACK INVALID_SYN", dpdcid=pdc.spdcid)
    check_bytes(peer, read_back(probe, "rma", peer.scratch, 32), before,
                "memory after an invalid SYN")
    # a target PDC left behind would answer for the PDC ID the NACK named
    stray = peer.pdc(spdcid=pdc.spdcid, start_psn=pdc.start_psn, rod=rod)
    stray.dpdcid = nack.pds.spdcid
    p = stray.send(peer.ses.write("rma", peer.scratch, unique(peer, 32))[0], syn=False)
    _nack(peer, NackCode.INV_DPDCID, p, "NACK INV_DPDCID for the PDC ID the INVALID_SYN "
          f"NACK named ({nack.pds.spdcid}): no PDC may exist for a refused SYN",
          dpdcid=pdc.spdcid)
    check_bytes(peer, read_back(probe, "rma", peer.scratch, 32), before,
                "memory after a request naming the refused SYN's PDC ID")
    again = peer.pdc(spdcid=pdc.spdcid, rod=rod)
    data = unique(peer, 32)
    response(again, again.send(peer.ses.write("rma", peer.scratch, data)[0]), OK,
             what="RESPONSE OK of a valid SYN from the initiator PDC whose SYN was refused")
    check_bytes(peer, read_back(again, "rma", peer.scratch, 32), data,
                "the WRITE carried by the valid SYN after the refused one")


@case("PDS-EST-008", "3.2, 3.5",
      "A SYN whose psn_offset puts it beyond the receive window it would open "
      "(psn_offset = MP_RANGE) is answered NACK INVALID_SYN, not executed, and creates no "
      "PDC state: the PDC ID its NACK names is unknown (INV_DPDCID) and a later valid SYN "
      "from the same initiator PDC opens a PDC")
def syn_offset_beyond_window(peer):
    _refused_syn_leaves_nothing(peer, peer.setup.mp_range)


@case("PDS-EST-021", "3.2, 3.5",
      "A SYN far beyond the window it would open (psn_offset = 2 x MP_RANGE + 3) is "
      "refused the same way: NACK INVALID_SYN, nothing executed, no PDC left behind")
def syn_offset_far_beyond_window(peer):
    _refused_syn_leaves_nothing(peer, 2 * peer.setup.mp_range + 3)


@case("PDS-EST-022", "3.2, 3.5, 3.10",
      "The same for a ROD SYN at psn_offset = MP_RANGE: NACK INVALID_SYN, nothing executed, "
      "no PDC left behind")
def rod_syn_offset_beyond_window(peer):
    _refused_syn_leaves_nothing(peer, peer.setup.mp_range, rod=True)


@case("PDS-EST-009", "3.2",
      "A SYN naming another Start_PSN than the open PDC's (same initiator PDC) is answered "
      "NACK INVALID_SYN")
def syn_other_start(peer):
    pdc = opened(peer)
    psn = pdc.next_psn
    hdr = P.request(psn, pdc.spdcid, syn=True, start_psn=psn_add(pdc.start_psn, -5))
    peer.send(hdr / peer.ses.no_op()[0])
    _nack(peer, NackCode.INVALID_SYN, psn, "NACK INVALID_SYN")


@case("PDS-EST-010", "3.2",
      "Once the initiator has learnt the DPDCID, requests without SYN naming it are "
      "accepted (the PDC is ESTABLISHED at the target)")
def established_non_syn(peer):
    pdc = opened(peer)
    data = unique(peer, 48)
    psn = pdc.send(peer.ses.write("rma", peer.scratch, data)[0])
    require(peer, int(peer.sent[-1][1][1]) & ReqFlag.SYN == 0, "the peer sent SYN (bug)")
    response(pdc, psn, OK, spdcid=pdc.dpdcid)
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 48), data, "the non-SYN WRITE")


@case("PDS-EST-011", "3.2, 3.5",
      "A retransmitted SYN packet (same Start_PSN) is a duplicate on the PDC it opened: "
      "acknowledged by the same target PDC with the same response, not a second PDC")
def syn_retransmitted(peer):
    pdc = peer.pdc()
    pdc.auto_clear = False
    psn = pdc.send(peer.ses.no_op()[0])
    first = response(pdc, psn, OK)
    pdc.send(peer.ses.no_op(msg_id=first.ses.message_id)[0], psn=psn, syn=True, retx=True)
    response(pdc, psn, OK, spdcid=first.pds.spdcid, flags=has_flags(0x10),
             what="the ACK of the retransmitted SYN (RETX echoed) from the same PDC")


@case("PDS-EST-012", "3.1",
      "Two initiator PDCs of one source (different SPDCIDs) get two different target PDCs "
      "(target key = {source, destination, initiator SPDCID})")
def distinct_pdcs(peer):
    a = opened(peer)
    b = opened(peer)
    require(peer, a.dpdcid != b.dpdcid,
            f"both initiator PDCs ({a.spdcid}, {b.spdcid}) were given target PDC {a.dpdcid}")


@case("PDS-EST-013", "3.2",
      "The initiator may keep sending SYN packets before the first ACK: three SYN packets "
      "Start_PSN..+2 are all accepted by one target PDC")
def syn_window(peer):
    pdc = peer.pdc()
    psns = [pdc.send(peer.ses.no_op()[0], syn=True) for _ in range(3)]
    ids = {response(pdc, p, OK).pds.spdcid for p in psns}
    require(peer, len(ids) == 1, f"the three SYN packets were answered by PDCs {sorted(ids)}")


@case("PDS-EST-014", "3.2",
      "When no target PDC is free, a SYN is answered NACK NO_PDC_AVAIL and the open PDCs "
      "keep working", config={"max_target_pdcs": 1})
def no_pdc_avail(peer):
    pdc = opened(peer)
    other = peer.pdc()
    psn = other.send(peer.ses.no_op()[0])
    _nack(peer, NackCode.NO_PDC_AVAIL, psn, "NACK NO_PDC_AVAIL", dpdcid=other.spdcid)
    psn = pdc.send(peer.ses.no_op()[0])
    response(pdc, psn, OK, what="the open PDC answering after the refusal")
    close_pdc(pdc)


@case("PDS-EST-015", "3.2",
      "A target that picks Start_PSNs itself answers a first SYN with NACK NEW_START_PSN "
      "(payload = its Start_PSN) and accepts the SYN re-based on it",
      config={"start_psn_mode": "target"})
def new_start_psn(peer):
    pdc = peer.pdc()
    psn = pdc.send(peer.ses.no_op()[0])
    n = _nack(peer, NackCode.NEW_START_PSN, psn, "NACK NEW_START_PSN")
    start = n.pds.payload
    again = peer.pdc(start_psn=start, spdcid=pdc.spdcid)
    psn = again.send(peer.ses.no_op()[0])
    response(again, psn, OK, what="the ACK of the SYN re-based on the target's Start_PSN")


@case("PDS-EST-016", "3.2",
      "A PENDING target PDC (waiting for the SYN with its Start_PSN) is reaped after "
      "New_PDC_Time: that SYN is then refused with a new NEW_START_PSN",
      config={"start_psn_mode": "target"})
def pending_reaped(peer):
    pdc = peer.pdc()
    psn = pdc.send(peer.ses.no_op()[0])
    start = _nack(peer, NackCode.NEW_START_PSN, psn, "NACK NEW_START_PSN").pds.payload
    peer.wait(peer.setup.new_pdc_time_us * 1.2)
    again = peer.pdc(start_psn=start, spdcid=pdc.spdcid)
    psn = again.send(peer.ses.no_op()[0])
    _nack(peer, NackCode.NEW_START_PSN, psn, "NACK NEW_START_PSN from a new PENDING PDC",
          payload=not_(start))


@case("PDS-EST-017", "3.2",
      "The device as initiator opens a PDC 0-RTT: its first request has SYN, psn_offset 0, "
      "a non-zero SPDCID, Start_PSN in [2^16, 2^31) (random, RP), Clear_PSN = Start_PSN - 1 "
      "and AR on the EOM packet")
def dut_first_syn(peer):
    flow = DutFlow(peer, 2)
    rx = flow.begin()[0]
    p = rx.pds
    require(peer, bool(p.flags & ReqFlag.SYN), f"first request without SYN: {rx.describe()}")
    require(peer, p.psn_offset == 0 and p.spdcid != 0,
            f"first request psn_offset={p.psn_offset} spdcid={p.spdcid}: {rx.describe()}")
    require(peer, (1 << 16) <= p.start_psn < (1 << 31),
            f"Start_PSN {p.start_psn} outside [2^16, 2^31)")
    require(peer, p.clear_psn == psn_add(p.start_psn, -1),
            f"Clear_PSN {p.clear_psn} is not Start_PSN - 1 = {psn_add(p.start_psn, -1)}")
    require(peer, bool(p.flags & ReqFlag.AR), "the EOM request has no AR")
    require(peer, p.type == PdsType.RUD_REQ, f"type {p.type} for a RUD READ's return flow")
    flow.ack_all()


@case("PDS-EST-018", "3.2",
      "Before the first ACK the device sends every packet with SYN and psn_offset = PSN - "
      "Start_PSN, counting up per packet")
def dut_syn_offsets(peer):
    flow = DutFlow(peer, 3)
    rxs = flow.begin()
    starts = {r.pds.start_psn for r in rxs}
    offs = sorted(r.pds.psn_offset for r in rxs)
    require(peer, all(r.pds.flags & ReqFlag.SYN for r in rxs), "a packet before the first "
            "ACK lacks SYN: " + "; ".join(r.describe() for r in rxs))
    require(peer, len(starts) == 1 and offs == [0, 1, 2],
            f"SYN packets name Start_PSNs {sorted(starts)} with offsets {offs}")
    flow.ack_all()


@case("PDS-EST-019", "3.2",
      "After the first ACK the device stops setting SYN and names the peer's PDC ID (the "
      "ACK's SPDCID) as DPDCID")
def dut_learns_dpdcid(peer):
    flow = DutFlow(peer, 3)
    rxs = flow.begin()
    flow.ack(rxs[0].pds.psn)
    flow.nack(NackCode.TRIMMED, rxs[1].pds.psn)
    flow.peer.expect(PdsRequest, timeout_us=peer.setup.rto_us / 2,
                     fields={"psn": rxs[1].pds.psn, "flags": lacks_flags(ReqFlag.SYN),
                             "dpdcid": flow.my_id},
                     what="the resent packet without SYN, DPDCID = the ACK's SPDCID")
    flow.ack(rxs[2].pds.psn)


@case("PDS-EST-020", "3.4",
      "Each direction has its own PSN space: the device's Start_PSN for its return flow "
      "does not follow the peer's PSNs on the forward PDC")
def own_psn_space(peer):
    flow = DutFlow(peer, 2)
    rx = flow.begin()[0]
    fwd = flow.read_pdc.start_psn
    require(peer, between(0, 1 << 32)(rx.pds.start_psn) and rx.pds.start_psn != fwd,
            f"the device's Start_PSN {rx.pds.start_psn} equals the peer's {fwd}")
    flow.ack_all()
    peer.expect(ANY_ACK, timeout_us=ACK_US, fields={"dpdcid": flow.read_pdc.spdcid},
                what="the ACKs of the READ on the forward PDC")
