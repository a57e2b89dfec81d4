"""Everything at once on four hosts over the lossy fabric: all-to-all writes, reads, tagged
sends and a shared atomic counter (exactly-once: the fetched values are 0..N-1)."""

from __future__ import annotations

import random

from e2e_net import check_clean, frames_lost, lossy_fabric, payload

KEY, CTR_KEY = 0x51, 0x52
SLOT = 64 * 1024


async def test_all_to_all_operations_at_once():
    rng = random.Random(77)
    async with lossy_fabric("hpc", hosts=4, seed=61) as fab:
        hosts = fab.hosts
        n = len(hosts)
        mems = [bytearray(SLOT * n) for _ in hosts]
        for h, mem in zip(hosts, mems, strict=True):
            h.register(mem, key=KEY, index=1)
        counter = bytearray(8)
        hosts[0].register(counter, key=CTR_KEY, index=2, perms="a")
        writes, sends, recvs, fetches = [], [], [], []
        for src in hosts:
            for dst in hosts:
                if dst is src:
                    continue
                size = rng.randrange(20 * 1024, 60 * 1024)
                data = payload(size, 1000 * src.index + dst.index)
                writes.append((dst.index, src.index, data,
                               src.write(dst, KEY, SLOT * src.index, data, index=1)))
                tag = (src.index << 8) | dst.index
                recvs.append((tag, data, dst.post_recv(SLOT, tag=tag)))
                sends.append(src.send(dst, data, tag=tag))
            fetches += [src.atomic(0, CTR_KEY, 0, "SUM", "UINT64", 1, fetch=True, index=2)
                        for _ in range(10)]
        for dst, src, data, h in writes:
            await h
            assert mems[dst][SLOT * src:SLOT * src + len(data)] == data
        for tag, data, r in recvs:
            got = await r
            assert got.data == data and got.tag == tag
        for s in sends:
            await s
        reads = [(dst, src, data, hosts[src].read(dst, KEY, SLOT * src, len(data), index=1))
                 for dst, src, data, _ in writes]
        for _, _, data, h in reads:
            assert (await h).data == data
        olds = sorted([(await h).value for h in fetches])
        assert olds == list(range(10 * n))  # each increment applied exactly once
        assert int.from_bytes(counter, "little") == 10 * n
        assert frames_lost(fab) >= 20
        check_clean(fab)
