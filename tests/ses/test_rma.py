"""WRITE and READ through the in-memory loop, with reordering and duplication."""

from __future__ import annotations

import pytest
from ses_harness import JOB, KEY, addr, pair, payload, region

from uet.ses import OpState, SesError
from uet.wire.constants import DeliveryMode, ReturnCode
from uet.wire.records import SesMedium, SesResponseData, SesSmall, SesStandard

SIZES = [0, 1, 4095, 4096, 4097, 3 * 4096 + 17, 65536]


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("pds_dedup", [True, False])
def test_write_then_read_many_sizes_reordered_duplicated(seed, pds_dedup):
    a, b, loop = pair("ai-base", seed=seed, dup=0.3, pds_dedup=pds_dedup)
    mem = region(b, 1 << 20, fill=0xEE)
    expect = bytearray(mem)
    ops = []
    off = 3
    for i, n in enumerate(SIZES):
        data = payload(n, seed * 100 + i)
        ops.append(a.initiator.write(addr(b), KEY, off, data))
        expect[off:off + n] = data
        off += n + 5
    loop.run()
    assert all(op.state == OpState.DONE for op in ops)
    assert [op.result().modified_length for op in ops] == SIZES
    assert mem == expect
    reads = []
    off = 3
    for n in SIZES:
        reads.append((a.initiator.read(addr(b), KEY, off, n), off, n))
        off += n + 5
    loop.run()
    for op, o, n in reads:
        assert op.result().data == bytes(expect[o:o + n])


def test_many_concurrent_multi_packet_writes_interleave():
    a, b, loop = pair("ai-full", seed=7, dup=0.1)
    mem = region(b, 1 << 20)
    datas = [payload(20000 + i, i) for i in range(12)]
    ops = [a.initiator.write(addr(b), KEY, i * 32768, d) for i, d in enumerate(datas)]
    loop.run()
    assert all(op.state == OpState.DONE for op in ops)
    for i, d in enumerate(datas):
        assert mem[i * 32768:i * 32768 + len(d)] == d
    assert b.target.reassembly.active == {}


def test_write_with_header_data_and_absolute_addressing():
    a, b, loop = pair("hpc", seed=3)
    mem = region(b, 9000, base_va=0x7F000000)
    data = payload(9000 - 64)
    op = a.initiator.write(addr(b), KEY, 0x7F000000 + 64, data, header_data=0xABCD,
                           absolute=True)
    loop.run()
    assert op.result().modified_length == len(data)
    assert mem[64:] == data
    # relative addressing with the same number is out of range
    bad = a.initiator.write(addr(b), KEY, 0x7F000000 + 64, b"x")
    loop.run()
    assert bad.return_code == ReturnCode.BAD_ADDR


def test_read_data_in_ack_versus_return_direction():
    a, b, loop = pair("hpc", seed=5)
    mem = region(b, 1 << 16)
    mem[:] = payload(1 << 16, 9)
    small = a.initiator.read(addr(b), KEY, 100, 4096)  # <= max_ack_data: in the ACK
    big = a.initiator.read(addr(b), KEY, 0, 3 * 4096 + 1)  # > max_ack_data: return direction
    loop.run()
    assert small.result().data == bytes(mem[100:4196])
    assert big.result().data == bytes(mem[:3 * 4096 + 1])
    # the big read: 4 request packets answered by 4 return-direction RSP_DATA packets
    assert b.counters["read_return_packets"] == 4
    reads = [s for dst, s in loop.delivered if dst == b.address and s.opcode == 2]
    assert len(reads) == 1 + 4


def test_return_direction_packets_carry_offsets():
    a, b, loop = pair("hpc", seed=11, reorder=False)
    mem = region(b, 1 << 16)
    mem[:] = payload(1 << 16, 1)
    op = a.initiator.read(addr(b), KEY, 0, 2 * 4096 + 10)
    loop.run()
    assert op.state == OpState.DONE
    returned = [s for dst, s in loop.delivered if dst == a.address]
    assert all(isinstance(s, SesResponseData) for s in returned)
    assert sorted((s.message_offset, s.payload_length) for s in returned) == [
        (0, 4096), (4096, 4096), (8192, 10)]
    assert {s.read_request_message_id for s in returned} == {op.message_ids[0]}


def test_optimized_headers_chosen_when_allowed():
    a, b, loop = pair("ai-base", seed=1)
    region(b, 8192)
    region(b, 8192, key=0)  # key 0: reachable by the small header
    a.initiator.write(addr(b), 0, 0, b"small")  # single packet, key 0, peer has OPT bit
    a.initiator.write(addr(b), KEY, 0, b"medium")  # needs the key: medium
    a.initiator.write(addr(b), KEY, 0, payload(5000))  # two packets: standard
    a.initiator.write(addr(b), KEY, 8, b"hd", header_data=1)  # header data + offset: std
    a.initiator.read(addr(b), 0, 0, 100)
    loop.run()
    kinds = [type(s) for dst, s in loop.delivered]
    assert kinds.count(SesSmall) == 2
    assert kinds.count(SesMedium) == 1
    assert kinds.count(SesStandard) == 3


def test_unknown_peer_never_gets_small_header():
    a, b, loop = pair("ai-base", seed=1, known_caps=False)
    mem = region(b, 64, key=0)
    op = a.initiator.write(addr(b), 0, 0, b"abc")
    loop.run()
    assert op.state == OpState.DONE and mem[:3] == b"abc"
    assert [type(s) for _, s in loop.delivered] == [SesMedium]


def test_rudi_write_needs_idempotent_safe_region():
    a, b, loop = pair("hpc", seed=1)
    region(b, 64)
    safe = region(b, 64, key=KEY + 1, idempotent_safe=True)
    bad = a.initiator.write(addr(b), KEY, 0, b"x", mode=DeliveryMode.RUDI)
    good = a.initiator.write(addr(b), KEY + 1, 0, b"y", mode=DeliveryMode.RUDI)
    rd = a.initiator.read(addr(b), KEY + 1, 0, 1, mode=DeliveryMode.RUDI)
    loop.run()
    assert bad.return_code == ReturnCode.OP_VIOLATION
    assert good.state == OpState.DONE and safe[0] == ord("y")
    assert rd.result().data in (b"y", b"\0")
    with pytest.raises(SesError) as exc:
        bad.result()
    assert exc.value.return_code == ReturnCode.OP_VIOLATION


def test_message_ids_are_per_job_and_sixteen_bit():
    a, b, loop = pair("ai-base", seed=1)
    region(b, 1 << 16)
    a.initiator._next_mid[JOB] = 0xFFFE
    ops = [a.initiator.write(addr(b), KEY, 0, payload(5000)) for _ in range(4)]
    loop.run()
    assert [op.message_ids[0] for op in ops] == [0xFFFE, 0xFFFF, 0, 1]
    assert all(op.state == OpState.DONE for op in ops)
