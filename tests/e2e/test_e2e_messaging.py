"""Two-sided operations end to end over the lossy fabric: sends, tag matching, rendezvous,
deferrable sends, datagrams, ROD ordering, tagged atomics."""

from __future__ import annotations

import random

import pytest
from e2e_net import check_clean, frames_lost, lossy_fabric, payload

from uet.profiles import ProfileError
from uet.ses import SesError
from uet.wire.constants import ReturnCode as Rc
from uet.wire.constants import RspList, SesOpcode

US = 10**6


def _sizes(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(20 * 1024, 60 * 1024) for _ in range(n)]


async def test_sends_match_posted_receives_and_wait_in_the_unexpected_list():
    async with lossy_fabric("ai-base", seed=31) as fab:
        a, b = fab.ep(0), fab.ep(1)
        msgs = [payload(n, 100 + i) for i, n in enumerate(_sizes(4, 1))]
        # posted first
        recvs = [b.post_recv(64 * 1024) for _ in msgs]
        sends = [a.send(1, m) for m in msgs]
        for s in sends:
            assert (await s).list == RspList.EXPECTED
        got = [await r for r in recvs]
        assert sorted(r.data for r in got) == sorted(msgs)  # each message once, whole
        assert all(not r.unexpected and not r.truncated and r.src_host == 0 for r in got)
        assert {r.opcode for r in got} == {SesOpcode.SEND}
        # unexpected first: the sends complete before any receive exists
        sends = [a.send(b, m, header_data=7 + i) for i, m in enumerate(msgs)]
        for s in sends:
            assert (await s).list == RspList.OVERFLOW
        got = [await b.post_recv(64 * 1024) for _ in msgs]
        assert sorted(r.data for r in got) == sorted(msgs)
        assert all(r.unexpected for r in got)
        assert sorted(r.header_data for r in got) == [7, 8, 9, 10]
        # a receive smaller than the message takes its first bytes
        small = b.post_recv(bytearray(1000))
        await a.send(1, msgs[0])
        r = await small
        assert r.truncated and r.length == 1000 and r.request_length == len(msgs[0])
        assert r.data == msgs[0][:1000] and small.buffer == msgs[0][:1000]
        check_clean(fab)


async def test_exact_tag_matching_posted_first_and_unexpected_first():
    async with lossy_fabric("ai-full", seed=32) as fab:
        a, b = fab.ep(0), fab.ep(1)
        tags = [0x11, 0x22, 0x33, 0x44]
        data = {t: payload(n, t) for t, n in zip(tags, _sizes(4, 2), strict=True)}
        recvs = {t: b.post_recv(64 * 1024, tag=t) for t in (0x33, 0x11, 0x44, 0x22)}
        untagged = b.post_recv(64 * 1024)  # tagged sends never match untagged receives
        for t in tags:
            await a.send(1, data[t], tag=t)
        for t in tags:
            r = await recvs[t]
            assert r.data == data[t] and r.tag == t and r.opcode == SesOpcode.TAGGED_SEND
        assert not untagged.done
        # unexpected first, then receives posted in another order
        for t in tags:
            assert (await a.send(1, data[t], tag=t + 1)).list == RspList.OVERFLOW
        for t in reversed(tags):
            r = await b.post_recv(64 * 1024, tag=t + 1)
            assert r.data == data[t] and r.unexpected
        with pytest.raises(ProfileError, match="wildcard"):
            b.post_recv(16, tag=1, ignore=0xF)
        assert untagged.cancel() and untagged.done
        with pytest.raises(SesError, match="CANCELLED"):
            await untagged
        check_clean(fab)


async def test_wildcard_matching_first_posted_wins_and_exact_bits_still_count():
    async with lossy_fabric("hpc", seed=33) as fab:
        a, b = fab.ep(0), fab.ep(2)
        m = [payload(n, 40 + i) for i, n in enumerate(_sizes(5, 3))]
        w1 = b.post_recv(64 * 1024, tag=0x100, ignore=0xFF)
        exact = b.post_recv(64 * 1024, tag=0x205)
        w2 = b.post_recv(64 * 1024, tag=0x100, ignore=0xFF)
        anytag = b.post_recv(64 * 1024, tag=0, ignore=(1 << 64) - 1)
        await a.send(2, m[0], tag=0x205)
        await a.send(2, m[1], tag=0x1AB)
        await a.send(2, m[2], tag=0x1CD)
        await a.send(2, m[3], tag=0x9999)
        assert (await exact).data == m[0]
        r1, r2 = await w1, await w2
        assert (r1.data, r1.tag) == (m[1], 0x1AB) and (r2.data, r2.tag) == (m[2], 0x1CD)
        assert (await anytag).tag == 0x9999
        # unexpected first: the oldest matching message goes to the wildcard receive
        await a.send(2, m[4], tag=0x301)
        await a.send(2, m[0], tag=0x302)
        r = await b.post_recv(64 * 1024, tag=0x300, ignore=0x0F)
        assert (r.data, r.tag, r.unexpected) == (m[4], 0x301, True)
        check_clean(fab)


@pytest.mark.parametrize("tag", [None, 0xBEEF], ids=["untagged", "tagged"])
async def test_rendezvous_posted_first_and_unexpected_first(tag):
    async with lossy_fabric("ai-full", seed=34) as fab:
        a, b = fab.ep(0), fab.ep(1)
        big = payload(60 * 1024, 1)
        recv = b.post_recv(64 * 1024, tag=tag)
        s = a.send(1, big, tag=tag, rendezvous=True)
        r = await recv
        assert r.data == big and r.opcode in (SesOpcode.RENDEZVOUS_SEND,
                                              SesOpcode.RENDEZVOUS_TSEND)
        assert (await s).modified_length == len(big)
        # unexpected first: only the eager part travels; the rest waits for a receive
        big2 = payload(50 * 1024, 2)
        s = a.send(1, big2, tag=tag, rendezvous=True)
        await fab.sleep(200 * US)
        assert not s.done  # the target has not pulled the data yet
        r = await b.post_recv(64 * 1024, tag=tag)
        assert r.data == big2 and r.unexpected
        assert (await s).return_code == Rc.OK
        # a smaller receive: truncated, the sender still completes
        short = b.post_recv(bytearray(10_000), tag=tag)
        s = a.send(1, big, tag=tag, rendezvous=True)
        r = await short
        assert r.truncated and r.data == big[:10_000]
        await s
        assert b.stats["ses.rendezvous_pulls"] == 3
        assert not a.fep.ses.resources.get(a.job, 0, 0xFFF).regions  # exposures removed
        check_clean(fab)


async def test_deferrable_send_posted_first_and_restarted_when_a_receive_comes():
    async with lossy_fabric("hpc", seed=35) as fab:
        a, b = fab.ep(0), fab.ep(1)
        m1, m2 = payload(30_000, 3), payload(45_000, 4)
        recv = b.post_recv(64 * 1024, tag=5)
        s = a.send(1, m1, tag=5, deferrable=True)
        assert (await recv).data == m1
        await s
        s = a.send(1, m2, deferrable=True)
        await fab.sleep(300 * US)
        assert s.deferred and not s.done  # parked at the target: no receive yet
        r = await b.post_recv(64 * 1024)
        assert r.data == m2
        assert (await s).return_code == Rc.OK
        assert a.stats["ses.deferrable_deferred"] == 1
        assert a.stats["ses.deferrable_restarts"] == 1 and b.stats["ses.rtr_sent"] == 1
        check_clean(fab)


async def test_datagrams_over_uud_arrive_whole_or_not_at_all():
    async with lossy_fabric("hpc", seed=36) as fab:
        a, b = fab.ep(0), fab.ep(1)
        n = 300
        sent = {payload(1 + (i * 37) % 4096, 500 + i) for i in range(n)}
        assert len(sent) == n
        recvs = [b.post_recv(4096) for _ in range(n)]
        lost0 = frames_lost(fab)
        for d in sorted(sent):
            h = a.datagram(1, d)
            assert h.done  # fire and forget
            await fab.sleep(400_000)  # about one frame time apart
        await fab.sleep(50 * US)
        got = [r.result().data for r in recvs if r.done]
        lost = frames_lost(fab) - lost0
        assert lost > 0 and len(got) == n - lost  # every frame lost is one datagram
        assert len(set(got)) == len(got) and set(got) <= sent
        assert b.stats.get("fep.tx_control", 0) == 0  # UUD: no ACKs
        with pytest.raises(SesError, match="TOO_LONG"):
            a.datagram(1, bytes(4097))
        check_clean(fab)


async def test_datagram_waits_in_the_unexpected_list_and_ai_base_has_none():
    async with lossy_fabric("ai-full", seed=37, hosts=2) as fab:
        a, b = fab.ep(0), fab.ep(1)
        for i in range(5):
            a.datagram(1, payload(100, i), header_data=i)
            await fab.sleep(US)
        await fab.sleep(20 * US)
        got = [b.post_recv(100) for _ in range(5)]
        arrived = [r for r in got if r.done]
        assert arrived and all(r.result().unexpected for r in arrived)
        assert all(r.result().data == payload(100, r.result().header_data) for r in arrived)
    async with lossy_fabric("ai-base", seed=37, hosts=2) as fab:
        with pytest.raises(ProfileError, match="DATAGRAM_SEND"):
            fab.ep(0).datagram(1, b"x")


@pytest.mark.parametrize("mode", ["ROD", "RUD"])
async def test_rod_delivers_messages_in_order(mode):
    async with lossy_fabric("ai-base", seed=38) as fab:
        a, b = fab.ep(0), fab.ep(1)
        msgs = [payload(9000 + i, 60 + i) for i in range(12)]  # 3 packets each
        recvs = [b.post_recv(16 * 1024) for _ in msgs]
        sends = [a.send(1, m, mode=mode) for m in msgs]
        for s in sends:
            await s
        got = [(await r).data for r in recvs]
        assert sorted(got) == sorted(msgs)
        in_order = got == msgs
        if mode == "ROD":
            assert in_order  # matched in the order sent despite loss and reordering
        else:
            assert not in_order  # RUD: the reordering fabric mixes them (seeded)
        check_clean(fab)


async def test_tagged_atomic_applies_to_the_matched_receive():
    async with lossy_fabric("hpc", seed=39) as fab:
        a, b = fab.ep(0), fab.ep(1)
        recv = b.post_recv(bytearray(16), tag=0x77)
        recv.buffer[8:16] = (40).to_bytes(8, "little")
        h = a.tagged_atomic(1, 0x77, "SUM", "UINT64", 2, fetch=True, offset=8)
        assert (await h).value == 40
        r = await recv  # the atomic worked on the receive's own buffer
        assert int.from_bytes(recv.buffer[8:16], "little") == 42 and r.tag == 0x77
        assert r.opcode == SesOpcode.TSEND_FETCH_ATOMIC and r.length == 8
        assert r.data == bytes(recv.buffer) and len(r.data) == 16
        with pytest.raises(SesError, match="NO_MATCH"):
            await a.tagged_atomic(1, 0x78, "SUM", "UINT64", 2)
        check_clean(fab, min_lost=0)


async def test_abandoned_deferred_send_is_dropped_at_the_target():
    async with lossy_fabric("hpc", seed=40) as fab:
        a, b = fab.ep(0), fab.ep(1)
        s = a.send(1, payload(30_000, 9), deferrable=True)
        await fab.sleep(300 * US)
        assert s.deferred
        s.abandon()  # MSG_ERROR: the target forgets the parked send
        with pytest.raises(SesError, match="CANCELLED"):
            await s
        await fab.sleep(300 * US)
        assert b.stats["ses.msg_error_aborted"] == 1
        recv = b.post_recv(64 * 1024)
        await fab.sleep(300 * US)
        assert not recv.done and b.stats.get("ses.rtr_sent", 0) == 0
        m = payload(5000, 10)
        await a.send(1, m)
        assert (await recv).data == m
        check_clean(fab, min_lost=0)
