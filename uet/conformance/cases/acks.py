"""ACK and SACK contents, coalescing and the ACK timer (ref 2.3, 2.4, 3.6)."""

from __future__ import annotations

from uet.wire.constants import AckFlag, NextHeader, ReturnCode, RspOpcode
from uet.wire.records import PdsAckCc, psn_diff

from ..peer import ANY_ACK, has_flags, lacks_flags
from ..registry import case
from .common import OK, opened, require, response, unique

ACK_US = 1000


def _multi(peer, n, offset=None):
    """A WRITE of n 4 KiB packets to the case's scratch slot (non-final packets get no
    SES response, so nothing holds the CACK back)."""
    return peer.ses.write("rma", peer.scratch if offset is None else offset,
                          unique(peer, 4096 * n))


@case("PDS-ACK-001", "2.3, 3.6",
      "A request with AR is acknowledged at once by an ACK whose ACK_PSN (CACK_PSN + "
      "ack_psn_offset) is the request's PSN and whose DPDCID is the initiator's PDC")
def ar_acked_at_once(peer):
    pdc = opened(peer)
    t = peer.now_ps
    psn = pdc.send(peer.ses.no_op()[0], ar=True)
    rx = pdc.ack_of(psn, timeout_us=ACK_US)
    require(peer, peer.virtual is False or peer.elapsed_us(rx, t) == 0,
            f"the ACK came {peer.elapsed_us(rx, t):.1f} us after the AR request (virtual "
            "time: an ACK for AR is due at once)")


@case("PDS-ACK-002", "1.4, 2.3",
      "An ACK carries the EV of the packet that triggered it (UDP source port), so the "
      "sender can attribute feedback to a path")
def ack_copies_ev(peer):
    pdc = opened(peer)
    for _ in range(2):
        ev = peer.pick_ev()
        psn = pdc.send(peer.ses.no_op()[0], ev=ev)
        pdc.ack_of(psn, fields={"ev": ev}, what=f"the ACK of PSN {psn} with EV {ev}")


@case("PDS-ACK-003", "1.4",
      "ACKs are sent with the control DSCP (EF, 46, reference provider default; the setup "
      "names the value)")
def ack_dscp(peer):
    pdc = peer.pdc()
    psn = pdc.send(peer.ses.no_op()[0])
    pdc.ack_of(psn, fields={"dscp": peer.setup.dscp_control})


@case("PDS-ACK-015", "1.4, 2.6, 4.7, 6.3",
      "An ACK carrying read data (RESPONSE_W_DATA) travels in the data class (the data "
      "DSCP: bulk payload a congested switch may trim, which is what NACK TRIMMED_ACK is "
      "for); an ACK without data in the same PDC keeps the control DSCP")
def ack_data_dscp(peer):
    pdc = opened(peer)
    psn = pdc.send_msg(peer.ses.read("readonly", 0, 64))[-1]
    rx = pdc.ack_of(psn, fields={"ses.opcode": RspOpcode.RESPONSE_W_DATA,
                                 "ses.return_code": OK},
                    what="the READ response of 64 bytes")
    require(peer, rx.dscp == peer.setup.dscp_data,
            f"the ACK with 64 bytes of read data came at DSCP {rx.dscp}, not the data "
            f"class's {peer.setup.dscp_data}: {rx.describe()}")
    pdc.ack_of(pdc.send(peer.ses.no_op()[0]), fields={"dscp": peer.setup.dscp_control},
               what="the ACK of a NO_OP (no data) at the control DSCP")


@case("PDS-ACK-004", "2.3",
      "The ACK of a retransmitted packet (RETX) has RETX set; the ACK of a first "
      "transmission has it clear")
def ack_retx_echo(peer):
    pdc = peer.pdc()
    pdc.auto_clear = False
    psn = pdc.send(peer.ses.no_op()[0])
    first = pdc.ack_of(psn, fields={"flags": lacks_flags(AckFlag.RETX)})
    pdc.send(peer.ses.no_op(msg_id=first.ses.message_id)[0], psn=psn, retx=True, syn=False)
    pdc.ack_of(psn, fields={"flags": has_flags(AckFlag.RETX)},
               what="the ACK of the retransmission, RETX set")


@case("PDS-ACK-014", "2.3, 3.8",
      "A retransmission whose original was lost (the first copy to arrive has RETX) is "
      "acknowledged, with its RESPONSE, by an ACK with RETX set")
def ack_retx_first_arrival(peer):
    pdc = opened(peer)
    psn = pdc.send(peer.ses.write("rma", peer.scratch, unique(peer, 16))[0], retx=True)
    response(pdc, psn, OK, flags=has_flags(AckFlag.RETX),
             what="the RESPONSE ACK of a first-arriving RETX packet, RETX set")


@case("PDS-ACK-005", "2.3",
      "The ACK of a request that arrived ECN-CE marked has M (ECN echo) set; of a Not-CE "
      "request, M clear")
def ack_ecn_echo(peer):
    pdc = opened(peer)
    psn = pdc.send(peer.ses.no_op()[0], ecn=2)
    pdc.ack_of(psn, fields={"flags": lacks_flags(AckFlag.M)})
    psn = pdc.send(peer.ses.no_op()[0], ecn=3)
    pdc.ack_of(psn, fields={"flags": has_flags(AckFlag.M)}, what="the ACK of a CE packet, M set")


@case("PDS-ACK-006", "2.4",
      "The SACK bitmap of ACK_CC reports received PSNs above the CACK: bit i (value 1 << i "
      "of the big-endian 64-bit word) = PSN SACK_base + i, where SACK_base = CACK_PSN + "
      "sack_psn_offset; a missing PSN reads 0")
def sack_bitmap(peer):
    pdc = opened(peer)
    msg = _multi(peer, 5)
    # packets 0, 2, 3 of the message arrive, packet 1 (PSN Start+2) does not
    psns = [pdc.send(msg[i], psn=pdc.psn(1 + i), ar=True) for i in (0, 2, 3)]
    rx = pdc.ack_of(psns[-1])
    if not isinstance(rx.pds, PdsAckCc):
        peer.fail(f"the device acknowledges with plain ACKs, no SACK to check: {rx.describe()}")
    p = rx.pds
    base, bm = p.sack_base, p.sack_bitmap
    gap, got = pdc.psn(2), [pdc.psn(3), pdc.psn(4)]
    for q in (gap, *got):
        off = psn_diff(q, base)
        require(peer, 0 <= off < 64, f"SACK base {base} does not cover PSN {q}: "
                f"{rx.describe()}")
    require(peer, not bm >> psn_diff(gap, base) & 1,
            f"SACK bit for the missing PSN {gap} is set: {rx.describe()}")
    for q in got:
        require(peer, bool(bm >> psn_diff(q, base) & 1),
                f"SACK bit for received PSN {q} is clear: {rx.describe()}")


@case("PDS-ACK-007", "3.6",
      "The CACK is cumulative: when the missing PSN arrives, the CACK jumps over every PSN "
      "received after it")
def cack_jumps(peer):
    pdc = opened(peer)
    msg = _multi(peer, 5)
    for i in (1, 2):
        pdc.send(msg[i], psn=pdc.psn(1 + i), ar=True)
    rx = pdc.ack_of(pdc.psn(3))
    require(peer, rx.pds.cack_psn == pdc.psn(0),
            f"CACK {rx.pds.cack_psn} with Start+1 missing (expected Start = {pdc.psn(0)})")
    psn = pdc.send(msg[0], psn=pdc.psn(1), ar=True)
    pdc.ack_of(psn, fields={"cack_psn": pdc.psn(3)},
               what="the ACK of the gap-filling packet with CACK = Start+3")
    for i in (3, 4):
        pdc.send(msg[i], psn=pdc.psn(1 + i), ar=True)
    response(pdc, pdc.psn(5), OK)


@case("PDS-ACK-008", "3.6",
      "Packets without AR are coalesced: four 4 KiB packets (16 KiB, the coalescing "
      "threshold) sent back to back get one ACK, naming the last, not four")
def coalescing(peer):
    pdc = peer.pdc()
    threshold = peer.setup.ack_every_bytes
    n = max(1, threshold // 4096)
    if n > 4:
        peer.fail(f"setup coalesces every {threshold} B: this case needs <= 16 KiB")
    msg = _multi(peer, n + 2)
    pdc.ack_of(pdc.send(msg[0], ar=False), what="the ACK of the SYN packet")
    for i in range(1, n + 1):
        pdc.send(msg[i], ar=False)
    acks = peer.collect(ANY_ACK, within_us=peer.setup.ack_timer_us / 2,
                        fields={"dpdcid": pdc.spdcid})
    require(peer, len(acks) == 1, f"{len(acks)} ACKs for {n} coalescable packets: "
            + "; ".join(a.describe() for a in acks))
    require(peer, acks[0].pds.ack_psn == pdc.psn(n),
            f"the coalesced ACK names {acks[0].pds.ack_psn}, not the last packet "
            f"{pdc.psn(n)}")
    pdc.send(msg[n + 1])
    response(pdc, pdc.psn(n + 1), OK)


@case("PDS-ACK-009", "3.6",
      "The receiver ACK timer: a packet without AR is acknowledged no later than the ACK "
      "timer after it arrived, and not before half of it")
def ack_timer(peer):
    pdc = peer.pdc()
    msg = _multi(peer, 3)
    pdc.ack_of(pdc.send(msg[0], ar=False), what="the ACK of the SYN packet")
    t = peer.now_ps
    psn = pdc.send(msg[1], ar=False)
    timer = peer.setup.ack_timer_us
    peer.expect_nothing(ANY_ACK, within_us=timer / 2, exact=True,
                        fields={"dpdcid": pdc.spdcid},
                        what="ACK before half the ACK timer for a packet without AR")
    rx = pdc.ack_of(psn, timeout_us=timer, what="the ACK timer's ACK")
    require(peer, peer.elapsed_us(rx, t) <= timer * 1.05 + peer.grace_us,
            f"the ACK came {peer.elapsed_us(rx, t):.0f} us after the packet; ACK timer "
            f"{timer} us")
    pdc.send(msg[2])
    response(pdc, pdc.psn(2), OK)


@case("PDS-ACK-010", "3.6",
      "A SYN packet is acknowledged at once even without AR (the initiator learns the "
      "DPDCID)")
def syn_acked_at_once(peer):
    pdc = peer.pdc()
    msg = _multi(peer, 2)
    psn = pdc.send(msg[0], ar=False)
    pdc.ack_of(psn, timeout_us=peer.setup.ack_timer_us / 2, what="the ACK of the SYN")
    pdc.send(msg[1])
    response(pdc, pdc.psn(1), OK)


@case("PDS-ACK-011", "2.3, 4.7",
      "An SES response rides in the ACK of the request it answers: next_hdr RSP (4), the "
      "response's message ID and job ID those of the request")
def response_in_ack(peer):
    pdc = opened(peer)
    msg = peer.ses.write("rma", peer.scratch, unique(peer, 8))
    psn = pdc.send(msg[0])
    response(pdc, psn, OK, next_hdr=NextHeader.RSP, ses__message_id=msg.msg_id,
             ses__job_id=peer.setup.job_id)


@case("PDS-ACK-012", "2.3, 3.4",
      "The ACK PSN offset is signed: an ACK naming a PSN below its CACK (a late duplicate) "
      "carries a negative offset")
def negative_ack_offset(peer):
    pdc = opened(peer)
    for _ in range(3):
        response(pdc, pdc.send(peer.ses.no_op()[0]), OK)
    response(pdc, pdc.send(peer.ses.no_op()[0]), OK)  # carries Clear_PSN = Start + 3
    pdc.send(peer.ses.no_op()[0], psn=pdc.start_psn, retx=True)
    rx = pdc.ack_of(pdc.start_psn, fields={"ses.opcode": RspOpcode.DEFAULT_RESPONSE,
                                           "ses.return_code": ReturnCode.NULL})
    require(peer, rx.pds.ack_psn_offset < 0,
            f"ack_psn_offset {rx.pds.ack_psn_offset} for PSN {pdc.start_psn} below CACK "
            f"{rx.pds.cack_psn}")


@case("PDS-ACK-013", "2.3, 2.4",
      "Reserved ACK bits are zero: flag 0x01, flag 0x40 (EPSN, reference-provider "
      "extension, not used without TSS) and the ACK_CC cc_flags nibble")
def ack_reserved_zero(peer):
    pdc = peer.pdc()
    rx = pdc.ack_of(pdc.send(peer.ses.no_op()[0]),
                    fields={"flags": lacks_flags(0x41)})
    if isinstance(rx.pds, PdsAckCc):
        require(peer, rx.pds.cc_flags == 0, f"cc_flags {rx.pds.cc_flags}: {rx.describe()}")
        require(peer, rx.pds.cc_type in (0, 1), f"cc_type {rx.pds.cc_type} is neither NSCC "
                "nor credit")
