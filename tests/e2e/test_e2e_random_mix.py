"""A seeded random mix of every operation between four hosts over the lossy fabric.

Each seed draws 40 operations (WRITE in RUD/ROD/RUDI, READ, SEND, TAGGED_SEND, rendezvous
and deferrable sends with the receive posted before or after, fetching atomics on a shared
counter), sizes from 1 byte to 200 KB, with random pauses between them; then checks every
byte written, read and received, and that the counter's fetched values are exactly 0..N-1.
"""

from __future__ import annotations

import random

import pytest
from e2e_net import check_clean, lossy_fabric, payload

US = 10**6
REGION = 1 << 20
RO_KEY, RW_KEY, CTR_KEY = 5, 1, 2


async def _run(profile: str, seed: int) -> None:
    rng = random.Random(seed)
    kinds = ["write", "read", "send", "tsend", "rdv", "defer", "amo", "rod"]
    if profile == "hpc":
        kinds.append("rudi")
    async with lossy_fabric(profile, hosts=4, seed=seed) as fab:
        hosts = fab.hosts
        mems = [bytearray(REGION) for _ in hosts]
        ro = payload(REGION // 2, 7)
        for h, mem in zip(hosts, mems, strict=True):
            h.register(mem, key=RW_KEY, index=1, idempotent_safe=True)
            h.register(bytearray(ro), key=RO_KEY, index=5, perms="r", idempotent_safe=True)
        counter = bytearray(8)
        hosts[0].register(counter, key=CTR_KEY, index=2, perms="a")
        fill = [0] * len(hosts)
        writes, reads, sends, fetches = [], [], [], []
        for k in range(40):
            src, dst = rng.sample(range(len(hosts)), 2)
            a, b = hosts[src], hosts[dst]
            kind = rng.choice(kinds)
            size = rng.randrange(1, rng.choice([5000, 70_000, 200_000]))
            data = payload(size, seed * 1000 + k)
            if kind in ("write", "rod", "rudi"):
                if fill[dst] + size > REGION:
                    continue
                off, fill[dst] = fill[dst], fill[dst] + size
                mode = {"write": None, "rod": "ROD", "rudi": "RUDI"}[kind]
                writes.append((dst, off, data, a.write(b, RW_KEY, off, data, index=1,
                                                       mode=mode)))
            elif kind == "read":
                off = rng.randrange(0, REGION // 2 - size)
                mode = rng.choice([None, "ROD"] + (["RUDI"] if profile == "hpc" else []))
                reads.append((off, size, a.read(b, RO_KEY, off, size, index=5, mode=mode)))
            elif kind == "amo":
                fetches.append(a.atomic(0, CTR_KEY, 0, "SUM", "UINT64", 1, fetch=True,
                                        index=2))
            else:
                tag = rng.randrange(1 << 40) if kind == "tsend" or rng.random() < 0.5 else None
                index = 10 + k  # its own receive queue: the match is unambiguous
                assert b.open_index(index) == 0
                posted_first = rng.random() < 0.5
                if posted_first:
                    recv = b.post_recv(size, tag=tag, index=index)
                s = a.send(b, data, tag=tag, index=index, rendezvous=kind == "rdv",
                           deferrable=kind == "defer")
                if not posted_first:
                    await fab.sleep(rng.randrange(0, 50 * US))
                    recv = b.post_recv(size, tag=tag, index=index)
                sends.append((data, s, recv))
            if rng.random() < 0.3:
                await fab.sleep(rng.randrange(0, 20 * US))
        for dst, off, data, h in writes:
            await h
            assert mems[dst][off:off + len(data)] == data
        for off, size, h in reads:
            assert (await h).data == ro[off:off + size]
        for data, s, recv in sends:
            await s
            assert (await recv).data == data
        values = sorted([(await h).value for h in fetches])
        assert values == list(range(len(fetches)))
        assert int.from_bytes(counter, "little") == len(fetches)
        assert len(writes) + len(reads) + len(sends) + len(fetches) >= 30
        check_clean(fab)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("profile", ["hpc", "ai-full"])
async def test_random_mix(profile, seed):
    await _run(profile, seed)
