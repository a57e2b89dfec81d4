"""Transport security: authentication, replay, epochs, secured PDCs, job isolation
(ref 7, 3.2; docs/tss.md).

The device serves the well-known secure domain (``uet serve --tss well-known``; in process
the built-in end point gets it): the peer seals every request in it and opens every
answer. Each rule that must refuse something checks that nothing came back and that the
memory aimed at is unchanged, through a genuine secured READ afterwards.
"""

from __future__ import annotations

import struct

from uet.wire.constants import (
    AtomicDatatype,
    AtomicOpcode,
    CtlType,
    NackCode,
    ReturnCode,
)
from uet.wire.records import PdsAck, PdsNack, psn_add

from ..peer import ANY_ACK
from ..registry import case
from .common import OK, check_bytes, opened, read_back, response, unique

QUIET_US = 3000
U64 = AtomicDatatype.UINT64


def _frame_of(peer, pkt, *, src=None, ev=None):
    """The sealed datagram of a scapy UET packet (not sent)."""
    return peer.seal(bytes(pkt), src=src, ev=ev)


def _nothing_back(peer, what: str) -> None:
    """No ACK or NACK (a CLEAR_REQ for responses stored earlier may still come)."""
    peer.expect_nothing((*ANY_ACK, PdsNack), within_us=QUIET_US, what=what)


def _request(peer, pdc, msg):
    """A header + the first packet of ``msg`` on ``pdc`` (the next PSN taken)."""
    return pdc.header() / msg[0]


@case("TSS-001", "7.2",
      "A request sealed in the device's secure domain (AES-GCM-256, AAD = addresses, EV "
      "and TSS header) is executed, and its ACK comes back sealed in the same SDI",
      tss=True)
def secured_write(peer):
    pdc = peer.pdc()
    data = unique(peer, 48)
    psn = pdc.send(peer.ses.write("rma", peer.scratch, data)[0])
    rx = response(pdc, psn, OK)
    if rx.frame is None or rx.frame.tss is None or rx.frame.tss.sdi != peer.sdi:
        peer.fail(f"the ACK was not sealed in SDI {peer.sdi}: {rx.describe()}")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 48), data, "the secured WRITE")


def _refused(peer, act, what: str) -> None:
    """On an opened secured PDC: ``act(pdc)`` sends something that must be refused; no ACK
    or NACK comes back and the peer's scratch memory is unchanged."""
    pdc = opened(peer)
    before = read_back(pdc, "rma", peer.scratch, 32)
    act(pdc)
    _nothing_back(peer, f"any answer to {what}")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), before,
                f"memory after {what}")


def _write_packet(peer, pdc):
    """The next 32-byte WRITE to the peer's scratch memory on ``pdc`` (scapy, not sealed)."""
    return _request(peer, pdc, peer.ses.write("rma", peer.scratch, unique(peer, 32)))


def _sealed_write(peer, pdc) -> bytearray:
    """:func:`_write_packet` sealed, as bytes to change before sending."""
    return bytearray(_frame_of(peer, _write_packet(peer, pdc)))


def _refused_bytes(peer, mutate, what: str) -> None:
    def act(pdc):
        raw = _sealed_write(peer, pdc)
        mutate(raw)
        peer.send(bytes(raw), cleartext=True)
    _refused(peer, act, what)


@case("TSS-002", "7.2",
      "A secured request whose encrypted payload was changed fails authentication: it is "
      "dropped without an answer and writes nothing", tss=True)
def tampered_payload(peer):
    def flip(b):
        b[-20] ^= 0x01
    _refused_bytes(peer, flip, "a request with a changed payload")


@case("TSS-003", "7.2",
      "A secured request whose TSS header (part of the AAD) was changed fails "
      "authentication: its reserved bit (in neither the IV nor the key choice, so only the "
      "tag over the header tells) or its TSC; dropped, nothing written", tss=True)
def tampered_header(peer):
    def act(pdc):
        for byte, bit in ((0, 0x02), (6, 0x40)):  # reserved bit; a TSC 2^46 ahead
            raw = _sealed_write(peer, pdc)
            raw[byte] ^= bit
            peer.send(bytes(raw), cleartext=True)
    _refused(peer, act, "requests with a changed TSS header")


@case("TSS-004", "7.2",
      "A request sealed under another key, or naming an SDI the device does not serve, is "
      "dropped without an answer and writes nothing", tss=True)
def wrong_key_and_sdi(peer):
    from uet.tss import TssConfig, TssSublayer

    from ..setup import conformance_tss

    def act(pdc):
        other = TssSublayer(TssConfig.from_dict({**conformance_tss(peer.setup),
                                                 "key": "00" * 32}), peer.ip).domains[peer.sdi]
        other.tsc = peer.tss.domains[peer.sdi].tsc + 1000
        _hdr, bad_key = other.seal(peer.now_ps, bytes(_write_packet(peer, pdc)), peer.ip,
                                   peer.dut_ip, peer.default_ev)
        peer.send(bad_key, cleartext=True)
        raw = _sealed_write(peer, pdc)
        raw[1:4] = ((peer.sdi + 1) & 0xFFFFFF).to_bytes(3, "big")  # another SDI
        peer.send(bytes(raw), cleartext=True)
    _refused(peer, act, "requests under a wrong key or an unknown SDI")


@case("TSS-005", "7.2",
      "Replay protection: a secured datagram sent again (the same TSC) is dropped: a "
      "FETCHING_ATOMIC SUM replayed five times is applied once", tss=True)
def replayed_atomic(peer):
    pdc = opened(peer)
    start = read_back(pdc, "rma", peer.scratch, 8)
    one = struct.pack(">Q", 1)
    msg = peer.ses.atomic(AtomicOpcode.SUM, U64, one, offset=peer.scratch, fetching=True)
    psn = pdc.next_psn
    sealed = _frame_of(peer, _request(peer, pdc, msg))
    peer.send(sealed, cleartext=True)
    pdc.ack_of(psn, what="the ACK of the FETCHING_ATOMIC")
    for _ in range(5):
        peer.send(sealed, cleartext=True)
    _nothing_back(peer, "an answer to a replayed datagram")
    got = read_back(pdc, "rma", peer.scratch, 8)
    want = (int.from_bytes(start, "little") + 1).to_bytes(8, "little")
    if got not in (want, (int.from_bytes(start, "big") + 1).to_bytes(8, "big")):
        peer.fail(f"the counter went {start.hex()} -> {got.hex()}: applied more than once")


@case("TSS-006", "7.2",
      "A retransmission is a new frame with a fresh TSC: the same request sent again with "
      "a new TSC is taken as a duplicate (its ACK comes again) and executed once",
      tss=True)
def retransmission_fresh_tsc(peer):
    pdc = opened(peer)
    data = unique(peer, 32)
    msg = peer.ses.write("rma", peer.scratch, data)
    psn = pdc.send(msg[0])
    pdc.ack_of(psn)
    pdc.send(msg[0], psn=psn, retx=True)  # peer.send seals it again: a new TSC
    pdc.ack_of(psn, what="the ACK of the retransmission (a duplicate)")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), data, "the WRITE")


@case("TSS-007", "7.2",
      "A secured device refuses cleartext UET: a plain request gets no answer and writes "
      "nothing", tss=True)
def cleartext_refused(peer):
    def act(pdc):
        plain = peer.pdc()  # a new PDC, in the clear
        peer.send(plain.header() / peer.ses.write("rma", peer.scratch, unique(peer, 32))[0],
                  cleartext=True)
    _refused(peer, act, "a cleartext WRITE")


@case("TSS-008", "7.2",
      "An older epoch than the domain's is refused: by more than its lifetime (40 back), "
      "or one back, within the lifetime but from before the device joined; dropped, "
      "nothing written", tss=True)
def old_epoch(peer):
    def act(pdc):
        dom = peer.tss.domains[peer.sdi]
        saved = dom.epoch
        try:
            for back in (40, 1):
                dom.epoch = (saved - back) & 0xFFFF
                pdc.send(peer.ses.write("rma", peer.scratch, unique(peer, 32))[0])
        finally:
            dom.epoch = saved
    _refused(peer, act, "a frame of an old epoch")


@case("TSS-009", "4.6, 7.2",
      "Job isolation: a request sealed in the domain but naming another job than the "
      "domain's is answered BAD_JOB_ID and not executed", tss=True)
def other_job(peer):
    pdc = opened(peer)
    before = read_back(pdc, "rma", peer.scratch, 32)
    job = (peer.setup.job_id + 1) & 0xFFFFFF or 1
    psn = pdc.send(peer.ses.write("rma", peer.scratch, unique(peer, 32), job_id=job)[0])
    response(pdc, psn, ReturnCode.BAD_JOB_ID, ses__modified_length=0)
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 32), before,
                "memory after a request naming another job")


@case("TSS-010", "3.2",
      "EXPECTED_0RTT_START: a secured PDC's CLOSE is acknowledged by an ACK with the EPSN "
      "flag carrying the domain's Expected PSN (above every PSN the PDC used); a later SYN "
      "below it gets NACK NEW_START_PSN with that PSN, and a SYN re-based on it is taken",
      tss=True)
def expected_psn(peer):
    pdc = opened(peer)
    close_psn = pdc.control(CtlType.CLOSE, ar=True)
    rx = peer.expect(PdsAck, timeout_us=peer.ack_bound_us,
                     fields={"ack_psn": close_psn, "flags": lambda f: bool(f & 0x40)},
                     what="the closing ACK with the EPSN flag")
    epsn = rx.pds.epsn
    if ((epsn - psn_add(close_psn, 1)) & 0xFFFFFFFF) >= 0x80000000:
        peer.fail(f"Expected PSN {epsn} is not above the CLOSE PSN {close_psn}")
    stale = peer.pdc(start_psn=psn_add(epsn, -5000))
    psn = stale.send(peer.ses.no_op()[0])
    nack = peer.expect(PdsNack, timeout_us=peer.ack_bound_us,
                       fields={"nack_code": NackCode.NEW_START_PSN, "nack_psn": psn},
                       what="NACK NEW_START_PSN")
    if nack.pds.payload != epsn:
        peer.fail(f"NEW_START_PSN carries {nack.pds.payload}, not the Expected PSN {epsn}")
    fresh = peer.pdc(start_psn=nack.pds.payload)
    fresh.spdcid = stale.spdcid
    data = unique(peer, 16)
    psn = fresh.send(peer.ses.write("rma", peer.scratch, data)[0])
    response(fresh, psn, OK, what="the re-based SYN's RESPONSE OK")
    check_bytes(peer, read_back(fresh, "rma", peer.scratch, 16), data, "the re-based WRITE")


@case("TSS-011", "7.2",
      "The authentication-failure threshold: after more forged frames than the threshold "
      "(here 3) the domain drops everything, a genuine request included",
      tss={"auth_fail_threshold": 3})
def failure_threshold(peer):
    pdc = opened(peer)
    for _ in range(4):
        raw = bytearray(_frame_of(peer, _request(peer, pdc, peer.ses.no_op())))
        raw[-1] ^= 0x5A
        peer.send(bytes(raw), cleartext=True)
    pdc.send(peer.ses.no_op()[0])
    _nothing_back(peer, "any answer once the domain is disabled")


@case("TSS-012", "3.2",
      "RANDOM_1RTT_START: the target answers a secured PDC's first SYN with NACK "
      "NEW_START_PSN carrying a Start_PSN of its own, and takes the SYN re-based on it",
      tss=True, config={"secure_start_psn": "random_1rtt"})
def random_1rtt(peer):
    stale = peer.pdc()
    psn = stale.send(peer.ses.no_op()[0])
    nack = peer.expect(PdsNack, timeout_us=peer.ack_bound_us,
                       fields={"nack_code": NackCode.NEW_START_PSN, "nack_psn": psn},
                       what="NACK NEW_START_PSN")
    fresh = peer.pdc(start_psn=nack.pds.payload)
    fresh.spdcid = stale.spdcid
    data = unique(peer, 16)
    psn = fresh.send(peer.ses.write("rma", peer.scratch, data)[0])
    response(fresh, psn, OK, what="the re-based SYN's RESPONSE OK")
    check_bytes(peer, read_back(fresh, "rma", peer.scratch, 16), data, "the re-based WRITE")
