"""Conformance of RUDI and UUD (ref 2.8, 2.9, 3.10): no PDC; RUDI has one response per
request and its own retransmission; UUD has no reliability at all."""

from __future__ import annotations

from pds_harness import A_IP, B_IP, US, request
from pds_script import Side, only

from uet.wire.constants import (
    DeliveryMode,
    NackCode,
    NackFlag,
    NextHeader,
    PdsType,
    ReturnCode,
    RspOpcode,
    RudiFlag,
)
from uet.wire.records import Frame, PdsNack, PdsRudi, PdsUud, SesResponse


def rudi_req(pkt_id: int, retx: bool = False, ev: int = 0x3333, ecn: int = 0) -> Frame:
    from pds_harness import ses_std
    return Frame(pds=PdsRudi(PdsType.RUDI_REQ, NextHeader.REQ_STD,
                             RudiFlag.RETX if retx else 0, pkt_id),
                 ses=ses_std(msg_id=pkt_id & 0xFFFF), payload=b"r" * 32, src_ip=A_IP,
                 dst_ip=B_IP, ev=ev, ecn=ecn)


OK = SesResponse(opcode=RspOpcode.RESPONSE, return_code=ReturnCode.OK, job_id=7)


def test_ref_2_8_rudi_request_has_pkt_id_and_no_pdc():
    """ref 2.8 / 3.10: a RUDI request is type 4 with a pkt_id; no PDC is opened."""
    s = Side(ip=A_IP)
    for i in range(3):
        s.ep.submit(0, request(mode=DeliveryMode.RUDI, msg_ref=i))
    frames = s.data()
    assert [f.pds.type for f in frames] == [PdsType.RUDI_REQ] * 3
    ids = [f.pds.pkt_id for f in frames]
    assert ids == [ids[0], (ids[0] + 1) & 0xFFFFFFFF, (ids[0] + 2) & 0xFFFFFFFF]
    assert s.ep.pdcs() == [] and not s.opened


def test_ref_3_10_rudi_exactly_one_response_with_ses_answer():
    """ref 3.10 / 2.8: the target answers with one RUDI_RESP (type 5, same pkt_id, next_hdr
    of the response, EV echoed, M echoed); the initiator reports it once."""
    t = Side(responder=lambda ev: (OK, b""))
    out = t.feed(rudi_req(0xABCDEF01, ev=0x4444, ecn=3))
    r = only(out, PdsRudi)
    assert r.pds.type == PdsType.RUDI_RESP and r.pds.pkt_id == 0xABCDEF01
    assert r.pds.next_hdr == NextHeader.RSP and r.ses is OK
    assert r.ev == 0x4444 and r.pds.flags & RudiFlag.M and r.dst_ip == A_IP
    assert t.delivered[0].mode == DeliveryMode.RUDI and t.delivered[0].pdc_id == 0


def test_ref_3_10_rudi_duplicate_answered_from_cache():
    """ref 3.10: a duplicate request is answered from the response cache (RETX set) and is
    not handed to the SES again."""
    t = Side(responder=lambda ev: (OK, b"dat"))
    first = only(t.feed(rudi_req(5)))
    again = only(t.feed(rudi_req(5, retx=True)))
    assert again.ses is first.ses and again.payload == b"dat"
    assert again.pds.flags & RudiFlag.RETX and len(t.delivered) == 1


def test_ref_3_10_rudi_cache_is_bounded():
    """ref 3.10 (choice, docs/pds.md): the cache keeps rudi_cache_entries responses; an
    evicted request is delivered again (RUDI operations are idempotent)."""
    t = Side(responder=lambda ev: (OK, b""), rudi_cache_entries=2)
    for i in range(3):
        t.feed(rudi_req(i))
    assert len(t.ep.rudi_target.cache) == 2
    t.feed(rudi_req(0, retx=True))
    assert len(t.delivered) == 4


def test_ref_3_10_rudi_without_ses_answer_gets_default_response():
    """ref 3.10 / 4.5: no SES response -> RUDI_RESP with DEFAULT_RESPONSE."""
    t = Side()
    r = only(t.feed(rudi_req(9)))
    assert r.ses.opcode == RspOpcode.DEFAULT_RESPONSE and r.pds.next_hdr == NextHeader.RSP


def test_ref_3_10_rudi_initiator_retransmits_and_fails():
    """ref 3.10: the initiator's own RTO (RETX set), retry limit, then MessageFailed."""
    s = Side(ip=A_IP, rto_ps=100 * US, max_retries=2)
    s.ep.submit(0, request(mode=DeliveryMode.RUDI, msg_ref="m"))
    f0 = s.data()[0]
    s.advance(100 * US)
    f1 = only(s.data())
    assert f1.pds.pkt_id == f0.pds.pkt_id and f1.pds.flags & RudiFlag.RETX
    s.advance(100 * US + 200 * US)
    assert len(s.data()) == 1
    s.advance(10_000 * US)
    assert [m.msg_ref for m in s.failed] == ["m"] and s.ep.tx_memory == 0


def test_ref_3_10_rudi_response_completes_request_once():
    """ref 3.10: ResponseReceived + PacketAcked once; a second copy is counted duplicate."""
    s = Side(ip=A_IP)
    s.ep.submit(0, request(mode=DeliveryMode.RUDI, msg_ref="m"))
    f = s.data()[0]
    resp = Frame(pds=PdsRudi(PdsType.RUDI_RESP, NextHeader.RSP, 0, f.pds.pkt_id), ses=OK,
                 src_ip=B_IP, dst_ip=A_IP)
    s.feed(resp)
    s.feed(resp)
    assert [r.msg_ref for r in s.responses] == ["m"] and [a.msg_ref for a in s.acked] == ["m"]
    assert s.ep.counters["rudi_resp_duplicate"] == 1 and s.ep.next_deadline() is None


def test_ref_2_6_rudi_nack_has_nt_flag():
    """ref 2.6: a RUDI NACK sets NT and carries the pkt_id in nack_psn (PDC IDs 0)."""
    t = Side(responder=lambda ev: (OK, b""), max_rx_memory_bytes=32)
    t.feed(rudi_req(1))
    n = only(t.feed(rudi_req(2)), PdsNack).pds
    assert n.nack_code == NackCode.NO_RESOURCE and n.flags & NackFlag.NT
    assert (n.nack_psn, n.spdcid, n.dpdcid) == (2, 0, 0)


def test_ref_3_10_uud_no_ack_no_retransmission():
    """ref 2.9 / 3.10: UUD requests (type 6) are delivered with no ACK, no response, no
    timer, and are never sent twice."""
    s = Side(ip=A_IP)
    s.ep.submit(0, request(mode=DeliveryMode.UUD, msg_ref="u"))
    f = only(s.data())
    assert type(f.pds) is PdsUud and f.pds.next_hdr == NextHeader.REQ_STD
    assert s.ep.next_deadline() is None
    s.advance(1_000_000 * US)
    assert s.data() == [] and s.control() == [] and not s.failed
    t = Side()
    assert t.feed(f) == []
    ev = only(t.delivered)
    assert ev.mode == DeliveryMode.UUD and ev.token == 0 and ev.payload == f.payload
    assert t.ep.respond(t.now, 0, OK) is False and t.control() == []
