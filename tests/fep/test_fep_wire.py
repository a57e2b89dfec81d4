"""FabricEndpoint in pure sans-IO: two end points joined by a list of frames."""

from __future__ import annotations

import random

import pytest
from fep_wire import A_IP, A_MAC, B_IP, B_MAC, Wire, pair

from uet.endpoint.fep import DeliveryAudit, FabricEndpoint
from uet.pds.events import RequestDelivered
from uet.profiles import ProfileError
from uet.ses import SesError, TargetAddr
from uet.ses.memory import Perm
from uet.wire.codec import decode_frame, encode_frame
from uet.wire.constants import DeliveryMode, SesFlag, SesOpcode
from uet.wire.constants import ReturnCode as Rc
from uet.wire.records import PdsRequest, SesMedium, SesStandard

KEY = 0x4B


def _region(ep: FabricEndpoint, size: int, index: int = 1, fill: int = 0) -> bytearray:
    mem = bytearray([fill]) * size
    ep.ses.resources.add_region(ep.job_id, 0, index, KEY, mem, Perm.ALL)
    return mem


def _tgt(ep: FabricEndpoint, index: int = 1, **kw) -> TargetAddr:
    return TargetAddr(ep.ip, ep.job_id, 0, index, **kw)


@pytest.mark.parametrize("decoded", [False, True], ids=["bytes", "records"])
def test_write_read_send_cross_the_list_and_every_frame_round_trips(decoded):
    a, b = pair("hpc")
    wire = Wire(a, b, decoded=decoded)
    mem = _region(b, 40_000)
    data = random.Random(3).randbytes(30_000)
    w = a.call(0, "write", _tgt(b), KEY, 100, data)
    assert wire.run_until(lambda: w.done)
    assert w.return_code == Rc.OK and mem[100:30_100] == data
    r = a.call(wire.now, "read", _tgt(b), KEY, 100, 30_000)  # > max_ack_data: return direction
    assert wire.run_until(lambda: r.done)
    assert r.return_code == Rc.OK and bytes(r.data) == data
    recv = b.post_recv(wire.now, bytearray(64), tag=5)
    s = a.call(wire.now, "tagged_send", _tgt(b, index=0), b"hello", 5)
    assert wire.run_until(lambda: s.done and recv.done)
    assert bytes(recv.buffer[:recv.length]) == b"hello" and recv.src == A_IP
    assert b.counters["ses.duplicates"] == 0 and b.stats["fep.duplicates_delivered"] == 0
    assert b.ses.counters["read_return_packets"] == 8  # ceil(30000 / 4096)
    # every frame: addressed right, decodes, and re-encodes to the same bytes
    kinds = set()
    for _, src, data in wire.tap:
        f = decode_frame(data, udp_port=None)
        assert encode_frame(f) == data
        assert f.src_ip == src and f.dst_ip == (B_IP if src == A_IP else A_IP)
        assert (f.src_mac, f.dst_mac) == ((A_MAC, B_MAC) if src == A_IP else (B_MAC, A_MAC))
        kinds.add(type(f.pds).__name__)
    assert {"PdsRequest", "PdsAck"} <= kinds or {"PdsRequest", "PdsAckCc"} <= kinds
    assert a.counters["tx_data"] > 0 and b.counters["tx_control"] > 0
    assert a.counters["rx_decode_error"] == b.counters["rx_decode_error"] == 0


def test_received_payloads_are_views_of_the_frame_on_the_c_path_and_land_intact():
    """The C receive path hands the PDS a data frame's payload as a read-only view of the
    received bytes (no copy out of a frame its SES may only count); a storing region gets
    every byte, a scratch one counts them; the Python path hands bytes, to the same end."""
    from uet.endpoint import fep as fep_mod

    a, b = pair("hpc")
    wire = Wire(a, b)
    mem = _region(b, 70_000)
    scratch = bytearray(70_000)
    b.ses.resources.add_region(b.job_id, 0, 2, KEY, scratch, Perm.ALL, store=False)
    seen: list[type] = []
    rx = b.pds._rx
    for t, handler in list(rx.items()):
        def spy(now, frame, hdr, handler=handler):
            seen.append(type(frame.payload))
            return handler(now, frame, hdr)
        rx[t] = spy
    data = random.Random(11).randbytes(60_000)
    w1 = a.call(0, "write", _tgt(b), KEY, 7, data)
    w2 = a.call(0, "write", _tgt(b, index=2), KEY, 0, data)
    assert wire.run_until(lambda: w1.done and w2.done)
    assert w1.return_code == w2.return_code == Rc.OK
    assert mem[7:60_007] == data and scratch == bytearray(70_000)
    assert b.audit.seen == 2 * 15 and b.audit.duplicates == 0
    native = fep_mod.IMPLEMENTATION == "native"
    assert seen and set(seen) == ({memoryview} if native else {bytes})


def test_losses_are_recovered_and_nothing_is_delivered_twice():
    a, b = pair("hpc")
    rng = random.Random(7)
    wire = Wire(a, b, drop=lambda _: rng.random() < 0.05)
    mem = _region(b, 200_000)
    data = random.Random(4).randbytes(150_000)
    ops = [a.call(0, "write", _tgt(b), KEY, i * 50_000, data[i * 50_000:(i + 1) * 50_000])
           for i in range(3)]
    assert wire.run_until(lambda: all(o.done for o in ops))
    retx = sum(v for k, v in a.pds.counters.items() if k.startswith("retx."))
    assert wire.dropped > 0 and retx > 0 and a.pds.counters["tx_packets"] > 39
    assert all(o.return_code == Rc.OK for o in ops) and mem[:150_000] == data
    # 3 x ceil(50000 / 4096) packets, each handed to the SES exactly once
    assert b.audit.duplicates == 0 and b.audit.seen == 39


def test_decode_errors_are_counted_not_raised():
    a, b = pair("ai-base")
    wire = Wire(a, b)
    mem = _region(b, 64)
    op = a.call(0, "write", _tgt(b), KEY, 0, b"abc")
    good = a.pop_data(0)
    assert good is not None
    b.receive(1, b"")
    b.receive(2, b"\x00" * 10)
    b.receive(3, good[:40])  # cut inside the IP header
    b.receive(4, good[:14 + 20 + 8 + 3])  # cut inside the PDS header
    assert b.counters["rx_decode_error"] == 4
    assert sum(v for k, v in b.counters.items() if k.startswith("rx_decode_error.")) == 4
    assert b.counters["rx_decode_error.ethernet"] >= 1
    assert b.counters["rx_frames"] == 0 and mem == bytearray(64)
    # the end point still works: the real frame goes through
    b.receive(5, good)
    wire.now = 5
    assert wire.run_until(lambda: op.done)
    assert op.return_code == Rc.OK and mem[:3] == b"abc"


def test_decode_error_goes_to_the_log_hook():
    seen = []
    ep = FabricEndpoint(ip=A_IP, log=lambda now, kind, **f: seen.append((now, kind, f)))
    ep.receive(9, b"\x01\x02")
    assert seen and seen[0][0] == 9 and seen[0][1] == "decode_error"
    assert "ethernet" in seen[0][2]["error"]


def _std(mid: int, offset: int, length: int, total: int, opcode=SesOpcode.WRITE) -> SesStandard:
    flags = SesFlag.REL
    if offset == 0:
        flags |= SesFlag.SOM
    if offset + length >= total:
        flags |= SesFlag.EOM
    return SesStandard(opcode=opcode, flags=flags, message_id=mid, job_id=1, initiator=7,
                       message_offset=offset, request_length=total, memory_key=KEY,
                       resource_index=1)


def test_delivery_audit_counts_duplicates_in_and_after_a_message():
    audit = DeliveryAudit(history=2, mtu_payload=4096)
    assert audit.see(A_IP, _std(1, 0, 4096, 8192), 4096)
    assert not audit.see(A_IP, _std(1, 0, 4096, 8192), 4096)  # same packet again
    assert audit.see(A_IP, _std(1, 4096, 4096, 8192), 4096)  # completes message 1
    assert not audit.see(A_IP, _std(1, 4096, 4096, 8192), 4096)  # late copy
    assert audit.duplicates == 2 and not audit.messages
    assert audit.see(B_IP, _std(1, 0, 4096, 8192), 4096)  # another source: not a copy
    # another connection (a restarted initiator's new PDC): message IDs start again
    assert audit.see(A_IP, _std(1, 0, 4096, 8192), 4096, 77)
    # READ requests carry no payload: their slice counts
    assert audit.see(A_IP, _std(2, 0, 0, 6000, SesOpcode.READ), 0)
    assert audit.see(A_IP, _std(2, 4096, 0, 6000, SesOpcode.READ), 0)
    assert not audit.see(A_IP, _std(2, 4096, 0, 6000, SesOpcode.READ), 0)
    assert (A_IP, 0, 7, 1, 2, SesOpcode.READ) in audit.finished
    # medium headers carry no message ID: not audited
    med = SesMedium(opcode=SesOpcode.WRITE, job_id=1)
    assert audit.see(A_IP, med, 8) and audit.see(A_IP, med, 8)
    assert audit.duplicates == 3
    # bounded: only ``history`` finished keys are kept
    for mid in range(10, 20):
        audit.see(A_IP, _std(mid, 0, 10, 10), 10)
    assert len(audit.finished) == 2


def test_delivery_audit_keys_offsets_exactly_whatever_their_alignment():
    """Packet-aligned offsets live in a per-message bitmap, any other offset (or one past
    the message, or a message too long for a bitmap) in a set: a duplicate is the same
    offset again in either, and a 2 MB message costs a few dozen bytes, not a set."""
    audit = DeliveryAudit(mtu_payload=4096)
    total = 2_000_000
    for off in range(0, total - 4096, 4096):  # every packet but the last, out of order
        assert audit.see(A_IP, _std(3, off, 4096, total), 4096) is True
    entry = audit.messages[(A_IP, 0, 7, 1, 3, SesOpcode.WRITE)]
    assert len(entry[0]) == 62 and entry[2] is None
    assert not audit.see(A_IP, _std(3, 8192, 4096, total), 4096)  # a duplicate
    assert audit.see(A_IP, _std(3, 100, 7, total), 7)  # unaligned: its own offset
    assert not audit.see(A_IP, _std(3, 100, 7, total), 7)
    assert audit.see(A_IP, _std(3, 4096 * 600, 4096, total), 4096)  # past the end
    assert not audit.see(A_IP, _std(3, 4096 * 600, 4096, total), 4096)
    assert entry[2] == {100, 4096 * 600}
    huge = 4096 * (1 << 21)  # too many packets for a bitmap: a set for all
    assert audit.see(A_IP, _std(4, 0, 4096, huge), 4096)
    assert not audit.see(A_IP, _std(4, 0, 4096, huge), 4096)
    assert audit.messages[(A_IP, 0, 7, 1, 4, SesOpcode.WRITE)][0] == bytearray()
    assert audit.duplicates == 4


def test_injected_duplicate_is_counted_by_the_audit_and_ignored_by_the_ses():
    a, b = pair("hpc")
    mem = _region(b, 16_384)
    data = random.Random(2).randbytes(8192)
    a.call(0, "write", _tgt(b), KEY, 0, data)
    pkts = []
    while (f := a.pds.poll_transmit(0, False)) is not None:
        pkts.append(f)
    assert len(pkts) == 2 and all(type(p.ses) is SesStandard for p in pkts)

    def deliver(frame):  # straight to the SES, bypassing the PDS (token 0: no answer)
        b.deliver(1, RequestDelivered(0, A_IP, 0, DeliveryMode.RUD, 0, frame.ses, frame.ext,
                                      frame.payload))

    deliver(pkts[0])
    deliver(pkts[0])
    assert b.audit.duplicates == 1 and b.ses.counters["duplicates"] == 1
    deliver(pkts[1])
    assert mem[:8192] == data
    mem[:8192] = bytes(8192)
    deliver(pkts[1])  # a late copy of a finished message changes nothing
    assert b.audit.duplicates == 2 and mem[:8192] == bytes(8192)
    assert b.stats["fep.duplicates_delivered"] == 2


def test_peer_capabilities_refuse_at_the_initiator_and_send_nothing():
    a, b = pair("hpc", "ai-base")
    b.ses.resources.register(b.job_id, 0, 0)
    with pytest.raises(ProfileError, match="ai-base"):
        a.call(0, "tagged_send", _tgt(b, index=0), b"x", 1)
    with pytest.raises(ProfileError, match="RUDI"):
        a.call(0, "write", _tgt(b), KEY, 0, b"x", mode=DeliveryMode.RUDI)
    with pytest.raises(ProfileError, match="atomics.datatypes"):
        a.call(0, "atomic", _tgt(b), KEY, 0, 2, 0x00, 1)  # SUM on INT8: not in ai-base
    with pytest.raises(ProfileError, match="tagged.matching"):
        b.post_recv(0, bytearray(8), tag=1)
    assert a.pop_data(0) is None and a.pds.counters["tx_packets"] == 0
    # the same operations towards an HPC peer go out
    c, d = pair("hpc")
    c.call(0, "tagged_send", _tgt(d, index=0), b"x", 1)
    frame = decode_frame(c.pop_data(0), udp_port=None)
    assert isinstance(frame.pds, PdsRequest) and frame.ses.opcode == SesOpcode.TAGGED_SEND


def test_unknown_peer_is_checked_against_the_local_profile_only():
    a = FabricEndpoint(ip=A_IP, profile="ai-full", gateway_mac="02:ff:00:00:00:09")
    a.call(0, "tagged_send", TargetAddr("10.9.9.9", 1, 0, 0), b"x", 1)
    frame = decode_frame(a.pop_data(0), udp_port=None)
    assert frame.dst_ip == "10.9.9.9" and frame.dst_mac == "02:ff:00:00:00:09"
    assert frame.ses.opcode == SesOpcode.TAGGED_SEND
    with pytest.raises(ProfileError, match="ai-full"):
        a.call(0, "write", TargetAddr("10.9.9.9", 1), KEY, 0, b"x", mode=DeliveryMode.RUDI)


def test_target_refusal_goes_back_as_a_response_code():
    a, b = pair("hpc")
    mem = _region(b, 64, fill=0x5A)
    op = a.call(0, "write", _tgt(b), KEY + 1, 0, b"zz")
    wire = Wire(a, b)
    assert wire.run_until(lambda: op.done)
    assert op.return_code == Rc.BAD_MKEY and mem == bytearray([0x5A]) * 64
    with pytest.raises(SesError, match="BAD_MKEY"):
        op.result()


def test_resource_index_zero_takes_unexpected_sends():
    a, b = pair("ai-base")
    wire = Wire(a, b)
    op = a.call(0, "send", _tgt(b, index=0), b"early")
    assert wire.run_until(lambda: op.done)
    assert op.return_code == Rc.OK and op.rsp_list == 1  # OVERFLOW: the unexpected list
    recv = b.post_recv(wire.now, bytearray(16))
    assert recv.done and bytes(recv.buffer[:recv.length]) == b"early"


def test_sink_grows_in_place_and_bulk_messages_report_fct():
    a, b = pair("ai-base")
    b.expose_sink(1000)
    sink = b.sink
    b.ensure_sink(50_000)
    assert b.sink is sink and len(sink) == 50_000
    b.ensure_sink(10)
    assert len(b.sink) == 50_000
    wire = Wire(a, b)
    payload = random.Random(5).randbytes(50_000)
    msg = a.send_message(0, B_IP, 50_000, payload)
    assert wire.run_until(lambda: msg.done)
    assert msg.ok and msg.fct_ps == msg.end_ps > 0 and bytes(b.sink) == payload
    assert a.idle() or a.pds.pdcs()


def test_a_shared_sink_checks_and_counts_but_keeps_no_bytes():
    """factory(shared_sink=True): one scratch region for every host. A WRITE into it passes
    the SES checks, completes and is audited, but nothing is copied in; a WRITE beyond it
    is still refused. A sink of its own keeps the bytes."""
    shared = bytearray(60_000)
    a, b = pair("ai-base", sink_buffer=shared)
    assert b.sink is shared and a.sink is shared
    wire = Wire(a, b)
    payload = random.Random(6).randbytes(50_000)
    msg = a.send_message(0, B_IP, 50_000, payload)
    assert wire.run_until(lambda: msg.done)
    assert msg.ok and not any(shared)
    assert b.audit.seen == 13 and b.audit.duplicates == 0  # ceil(50000 / 4096) packets
    big = a.send_message(wire.now, B_IP, 70_000, bytes(70_000))
    assert wire.run_until(lambda: big.done)
    assert not big.ok and big.op.return_code == Rc.BAD_ADDR
    own = bytearray(60_000)
    b.ses.resources.remove_region(b.job_id, 0, 0x7FF, 0x5155_4E4B)
    b.sink = own
    b._register_sink()
    kept = a.send_message(wire.now, B_IP, 50_000, payload)
    assert wire.run_until(lambda: kept.done)
    assert kept.ok and bytes(own[:50_000]) == payload


def test_request_headers_on_the_wire_follow_the_message_size():
    a, b = pair("ai-base")
    wire = Wire(a, b)
    mem = _region(b, 10_000)
    one = a.call(0, "write", _tgt(b), KEY, 0, b"q" * 100)
    two = a.call(0, "write", _tgt(b), KEY, 100, b"r" * 5000)
    assert wire.run_until(lambda: one.done and two.done)
    assert mem[:100] == b"q" * 100 and mem[100:5100] == b"r" * 5000
    reqs = [decode_frame(d, udp_port=None) for _, ip, d in wire.tap if ip == A_IP]
    hdrs = [type(f.ses) for f in reqs if isinstance(f.pds, PdsRequest)]
    assert hdrs == [SesMedium, SesStandard, SesStandard]
    acks = [decode_frame(d, udp_port=None) for _, ip, d in wire.tap if ip == B_IP]
    assert acks and all(type(f.pds).__name__.startswith("PdsAck") for f in acks)


def test_rudi_message_the_pds_gives_up_on_fails_without_msg_error():
    # regression: a failed multi-packet RUDI write made the SES build a MSG_ERROR over RUDI,
    # which raised inside the end point's timer
    a, b = pair("hpc")
    b.ses.resources.add_region(b.job_id, 0, 1, KEY, bytearray(20_000), Perm.ALL,
                               idempotent_safe=True)
    wire = Wire(a, b, drop=lambda _: True)  # nothing gets through
    op = a.call(0, "write", _tgt(b), KEY, 0, bytes(10_000), mode=DeliveryMode.RUDI)
    assert wire.run_until(lambda: op.done)
    assert op.return_code == Rc.UNDELIVERABLE and "retr" in (op.reason or "")
    assert a.ses.poll_transmit() is None  # no MSG_ERROR queued
    # a failed RUD message is abandoned with MSG_ERROR (RUD can carry it)
    c, d = pair("hpc")
    _region(d, 20_000)
    wire = Wire(c, d, drop=lambda data: len(data) > 1000)  # only the data is lost
    op = c.call(0, "write", _tgt(d), KEY, 0, bytes(10_000))
    assert wire.run_until(lambda: op.done)
    assert op.return_code == Rc.UNDELIVERABLE
    wire.run_until(lambda: False, limit_ps=wire.now + 10**9)
    sent = [decode_frame(f, udp_port=None) for _, ip, f in wire.tap if ip == A_IP]
    assert any(getattr(f.ses, "opcode", None) == SesOpcode.MSG_ERROR for f in sent)
