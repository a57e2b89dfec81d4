"""Profiles end to end: refused at once at the initiator; forced onto the wire, refused by
the target with its return code, nothing changed there."""

from __future__ import annotations

import pytest
from e2e_net import check_clean, lossy_fabric, payload

from uet.profiles import ProfileError
from uet.ses import SesError

KEY = 0xB0


def _ops(a, dst):
    """Operations AI Base lacks, as (name, start) pairs."""
    data = payload(20_000, 1)
    return [
        ("TAGGED_SEND", lambda: a.send(dst, data, tag=9)),
        ("RENDEZVOUS_SEND", lambda: a.send(dst, data, rendezvous=True)),
        ("DEFERRABLE_SEND", lambda: a.send(dst, data, deferrable=True)),
        ("TSEND_ATOMIC", lambda: a.tagged_atomic(dst, 9, "SUM", "UINT64", 1)),
        ("delivery mode RUDI", lambda: a.write(dst, KEY, 0, data, index=2, mode="RUDI")),
        ("atomics.datatypes", lambda: a.atomic(dst, KEY, 0, "SUM", "INT8", 1, index=2)),
        ("atomics.opcodes", lambda: a.atomic(dst, KEY, 0, "PROD", "UINT64", 3, index=2)),
    ]


#: what an AI Base target answers each of them when it reaches the wire
TARGET_CODE = {"TAGGED_SEND": "UNSUPPORTED_OP", "RENDEZVOUS_SEND": "UNSUPPORTED_OP",
               "DEFERRABLE_SEND": "UNSUPPORTED_OP", "TSEND_ATOMIC": "UNSUPPORTED_OP",
               "delivery mode RUDI": "UNSUPPORTED_OP", "atomics.datatypes": "AMO_UNSUPPORTED_DT",
               "atomics.opcodes": "AMO_UNSUPPORTED_OP"}


async def test_ai_base_initiator_refuses_what_its_profile_lacks():
    async with lossy_fabric("ai-base", seed=51) as fab:
        a = fab.ep(0)
        for name, start in _ops(a, 1):
            with pytest.raises(ProfileError, match=name):
                start()
        with pytest.raises(ProfileError, match="DATAGRAM_SEND"):
            a.datagram(1, b"x")
        with pytest.raises(ProfileError, match="tagged.matching is none"):
            a.post_recv(16, tag=1)
        assert a.stats.get("pds.tx_packets", 0) == 0  # nothing reached the wire
    async with lossy_fabric("ai-full", seed=51) as fab:
        with pytest.raises(ProfileError, match="tagged.matching is exact"):
            fab.ep(1).post_recv(16, tag=1, ignore=0xFF)


async def test_a_peer_profile_refuses_at_the_initiator_and_at_the_target_when_forced():
    async with lossy_fabric("hpc", host_profiles={1: "ai-base"}, seed=52) as fab:
        a, b = fab.ep(0), fab.ep(1)
        mem = bytearray(payload(4096, 2))
        before = bytes(mem)
        b.register(mem, key=KEY, index=2)
        recv = b.post_recv(64 * 1024)
        # a knows b's fep_cap (AI Base): refused at once, nothing sent
        for _name, start in _ops(a, 1):
            with pytest.raises(ProfileError, match="ai-base"):
                start()
        assert a.stats.get("pds.tx_packets", 0) == 0
        # forced: a forgets b's capabilities, so only its own (HPC) profile is checked
        del a.fep.ses.initiator.peer_caps[b.ip]
        started = [(name, start()) for name, start in _ops(a, 1)]
        for name, h in started:
            with pytest.raises(SesError, match=TARGET_CODE[name]):
                await h
        assert mem == before and not recv.done  # the target changed nothing
        assert b.stats["ses.rc.UNSUPPORTED_OP"] >= 5
        # what AI Base allows still works between them
        await a.write(1, KEY, 0, b"fine", index=2)
        await a.send(1, b"plain")
        assert mem[:4] == b"fine" and (await recv).data == b"plain"
        check_clean(fab, min_lost=0)


async def test_ai_full_and_hpc_peers_tag_match_each_other():
    async with lossy_fabric("ai-full", host_profiles={1: "hpc"}, seed=53) as fab:
        a, b = fab.ep(0), fab.ep(1)
        recv = b.post_recv(64 * 1024, tag=0x10, ignore=0x0F)  # HPC: wildcard
        await a.send(1, payload(30_000, 3), tag=0x1A)
        r = await recv
        assert r.tag == 0x1A and r.data == payload(30_000, 3)
        # the HPC host may not use RUDI towards the AI Full one (its profile lacks it)
        with pytest.raises(ProfileError, match=r"'ai-base, ai-full \(the peer's"):
            b.write(0, KEY, 0, b"x", mode="RUDI")
        check_clean(fab)
