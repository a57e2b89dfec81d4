"""PSN windows and wraparound (ref 3.4, 3.5)."""

from __future__ import annotations

from uet.wire.constants import NackCode, ReturnCode, RspOpcode
from uet.wire.records import PdsNack, PdsRequest, SesResponseData, psn_add, psn_diff

from ..registry import case
from .common import (
    OK,
    DutFlow,
    check_bytes,
    opened,
    read_back,
    require,
    response,
    unique,
)

ACK_US = 1000


@case("PDS-WIN-001", "3.5",
      "A request with PSN at or beyond the receive window (>= first missing PSN + "
      "MP_RANGE) is answered NACK PSN_OOR_WINDOW and not executed")
def beyond_window(peer):
    pdc = opened(peer)
    before = read_back(pdc, "rma", peer.scratch, 32)
    psn = pdc.psn(2 + peer.setup.mp_range)  # first missing is at most Start + 2
    hdr = pdc.header(psn)
    peer.send(hdr / peer.ses.write("rma", peer.scratch, unique(peer, 32))[0])
    peer.expect(PdsNack, timeout_us=ACK_US,
                fields={"nack_code": NackCode.PSN_OOR_WINDOW, "nack_psn": psn,
                        "dpdcid": pdc.spdcid, "spdcid": pdc.dpdcid},
                what="NACK PSN_OOR_WINDOW")
    pdc.next_psn = pdc.psn(2)
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), before,
                "memory after an out-of-window request")


@case("PDS-WIN-002", "3.5",
      "A request with a PSN older than the previous MP_RANGE (neither in the window nor "
      "a recent duplicate) is answered NACK PSN_OOR_WINDOW")
def below_previous_range(peer):
    pdc = opened(peer)
    psn = pdc.psn(-2 * peer.setup.mp_range)
    peer.send(pdc.header(psn, retx=True) / peer.ses.no_op()[0])
    peer.expect(PdsNack, timeout_us=ACK_US,
                fields={"nack_code": NackCode.PSN_OOR_WINDOW, "nack_psn": psn},
                what="NACK PSN_OOR_WINDOW for a PSN two windows old")


@case("PDS-WIN-003", "3.5, 4.5",
      "A duplicate of a packet already shifted out of the window (within the previous "
      "MP_RANGE, response cleared) is acknowledged with a DEFAULT_RESPONSE, return code "
      "NULL")
def shifted_out_duplicate(peer):
    pdc = opened(peer)  # Start: NO_OP answered, clear PSN now Start
    psn = pdc.send(peer.ses.no_op()[0])  # carries Clear_PSN = Start
    response(pdc, psn, OK)
    pdc.send(peer.ses.no_op()[0], psn=pdc.start_psn, retx=True)
    pdc.ack_of(pdc.start_psn, fields={"ses.opcode": RspOpcode.DEFAULT_RESPONSE,
                                      "ses.return_code": ReturnCode.NULL},
               what="the ACK of the old duplicate with DEFAULT_RESPONSE / NULL")


@case("PDS-WIN-004", "3.4",
      "PSNs wrap around 2^32 with serial arithmetic: a PDC whose Start_PSN is 2^32 - 2 "
      "accepts PSNs 2^32 - 2, 2^32 - 1, 0, 1 in order and acknowledges them")
def wraparound(peer):
    start = (1 << 32) - 2
    pdc = peer.pdc(start_psn=start)
    datas = []
    last = None
    for i in range(4):
        data = unique(peer, 16)
        datas.append(data)
        psn = pdc.send(peer.ses.write("rma", peer.scratch + 16 * i, data)[0])
        require(peer, psn == (start + i) % (1 << 32), f"peer PSN {psn} (bug)")
        last = response(pdc, psn, OK)
    require(peer, last.pds.cack_psn in (0, 1),
            f"after PSN 1 the CACK is {last.pds.cack_psn}, not 0 or 1 (wrapped)")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 64), b"".join(datas),
                "the four WRITEs across the wrap")


@case("PDS-WIN-005", "3.2, 3.4",
      "Start_PSN = PSN - psn_offset is computed modulo 2^32: a first SYN at PSN 2 with "
      "psn_offset 18 opens a PDC based at 2^32 - 16 (ACK CACK = 2^32 - 17)")
def syn_offset_wraps(peer):
    start = (1 << 32) - 16
    pdc = peer.pdc(start_psn=start)
    psn = pdc.send(peer.ses.no_op()[0], psn=psn_add(start, 18))
    require(peer, psn == 2, f"peer PSN {psn} (bug)")
    pdc.ack_of(psn, fields={"cack_psn": (1 << 32) - 17})


@case("PDS-WIN-006", "2.4, 3.5",
      "ACK_CC advertises the receive window: mpr = MP_RANGE / 128 (at least 1)")
def mpr_advertised(peer):
    pdc = peer.pdc()
    psn = pdc.send(peer.ses.no_op()[0])
    want = max(1, peer.setup.mp_range // 128)
    rx = pdc.ack_of(psn)
    if rx.pds.__class__.__name__ == "PdsAckCc":
        require(peer, rx.pds.mpr == want,
                f"ACK_CC advertises mpr={rx.pds.mpr}, MP_RANGE {peer.setup.mp_range} means "
                f"{want}")


@case("PDS-WIN-007", "3.5, 3.10",
      "RUD accepts any new PSN inside the window: PSN Start+5 arriving before Start+1.."
      "Start+4 is executed at once, its ACK names it and the CACK stays below the gap")
def in_window_out_of_order(peer):
    pdc = opened(peer)
    data = unique(peer, 24)
    psn = pdc.send(peer.ses.write("rma", peer.scratch, data)[0], psn=pdc.psn(5))
    rx = response(pdc, psn, OK)
    require(peer, psn_diff(rx.pds.cack_psn, pdc.psn(1)) < 0,
            f"CACK {rx.pds.cack_psn} covers the gap at {pdc.psn(1)}")
    pdc.next_psn = pdc.psn(1)
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 24), data,
                "the out-of-order WRITE")


def _first_window(peer, mp):
    """The device READs back (mp + 2) x 4 KiB: collect what it sends before any ACK
    (the first MP_RANGE packets). Returns (flow, Start_PSN)."""
    flow = DutFlow(peer, mp + 2, region="rma")
    flow.read_pdc.send_msg(peer.ses.read("rma", 0, (mp + 2) * 4096))
    # collect until the window is full (a loaded host may need more than rto/2 for 128
    # packets; retransmissions reuse their PSNs, so waiting longer cannot fill it falsely),
    # then rto/4 more: a PSN beyond the window would show there
    def data(r):
        return isinstance(r.ses, SesResponseData)
    rto = peer.setup.rto_us
    got = peer.collect(PdsRequest, within_us=rto / 2, where=data)
    for _ in range(6):
        if len({r.pds.psn for r in got}) >= mp:
            break
        got += peer.collect(PdsRequest, within_us=rto / 2, where=data)
    got += peer.collect(PdsRequest, within_us=rto / 4, where=data)
    require(peer, bool(got), f"the device sent no data for a READ of {mp + 2} x 4 KiB")
    syn = [r for r in got if r.pds.flags & 0x04]
    require(peer, bool(syn), "no SYN packet among the device's first packets")
    start = syn[0].pds.start_psn
    flow.dut_id = syn[0].pds.spdcid
    top = max(psn_diff(r.pds.psn, start) for r in got)
    require(peer, top < mp, f"PSN Start+{top} sent with nothing acknowledged (window "
            f"MP_RANGE {mp})")
    require(peer, len({r.pds.psn for r in got}) == mp,
            f"{len({r.pds.psn for r in got})} packets sent before any ACK, the window "
            f"allows {mp}")
    return flow, start


@case("PDS-WIN-008", "3.5",
      "The device as initiator sends no PSN beyond max CACK + the peer's MP_RANGE: with "
      "nothing acknowledged at most MP_RANGE packets leave, and one more after an ACK")
def dut_respects_window(peer):
    mp = 128
    flow, start = _first_window(peer, mp)
    flow.ack(start, mpr=1)
    peer.expect(PdsRequest, timeout_us=peer.setup.rto_us / 2, strict=True,
                fields={"psn": psn_add(start, mp), "spdcid": flow.dut_id},
                what=f"PSN Start+{mp}, allowed once Start is acknowledged")
    peer.expect_nothing(PdsRequest, within_us=peer.setup.rto_us / 2,
                        fields={"psn": psn_add(start, mp + 1), "spdcid": flow.dut_id},
                        what=f"PSN Start+{mp + 1}: beyond max CACK (Start) + MP_RANGE")
    flow.ack(psn_add(start, mp + 1))


@case("PDS-WIN-009", "3.5, 3.6",
      "The device's window is counted from the peer's CACK, not from what it released: "
      "with every packet acknowledged one by one but the CACK held at Start - 1, nothing "
      "beyond Start - 1 + MP_RANGE leaves; a CACK covering them lets the rest go")
def dut_window_from_cack(peer):
    mp = 128
    flow, start = _first_window(peer, mp)
    held = psn_add(start, -1)
    for i in range(mp):
        flow.ack(psn_add(start, i), cack=held, mpr=1)
    peer.expect_nothing(PdsRequest, within_us=peer.setup.rto_us / 2,
                        fields={"psn": psn_add(start, mp), "spdcid": flow.dut_id},
                        what=f"PSN Start+{mp} while the peer's CACK stays at Start - 1")
    flow.ack(psn_add(start, mp - 1), mpr=1)
    peer.expect(PdsRequest, timeout_us=peer.setup.rto_us / 2,
                fields={"psn": psn_add(start, mp), "spdcid": flow.dut_id},
                what=f"PSN Start+{mp} once the CACK covers Start+{mp - 1}")
    flow.ack(psn_add(start, mp + 1))
