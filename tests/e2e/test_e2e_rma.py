"""WRITE / READ end to end over the lossy fabric: bytes, READ paths, RUDI, ROD, errors."""

from __future__ import annotations

import math

import pytest
from e2e_net import check_clean, lossy_fabric, payload

from uet.ses import SesError
from uet.wire.constants import ReturnCode as Rc

KEY = 0x1000
SIZES = [1, 100, 4096, 4097, 20_000, 33_333, 60 * 1024]


async def test_writes_then_reads_move_exactly_the_right_bytes():
    async with lossy_fabric("hpc", seed=11) as fab:
        a, b = fab.ep(0), fab.ep(1)
        mem = bytearray(256 * 1024)
        b.register(mem, key=KEY, index=1)
        expect = bytearray(len(mem))
        started = []
        off = 0
        for i, n in enumerate(SIZES):  # all in flight at once, on distinct ranges
            data = payload(n, i)
            started.append((off, data, a.write(1, KEY, off, data, index=1)))
            expect[off:off + n] = data
            off += n + 13
        for _, data, h in started:
            r = await h
            assert r.return_code == Rc.OK and r.modified_length == len(data)
        assert mem == expect  # every byte, and nothing between the ranges
        reads = [(data, a.read(b, KEY, off, len(data), index=1)) for off, data, _ in started]
        for data, h in reads:
            r = await h
            assert r.data == data and r.modified_length == len(data)
        # READs above max_ack_data (4096) return their data as requests B -> A, one per
        # READ packet; the others ride in the ACKs
        ses = b.profile.ses
        back = sum(math.ceil(n / ses.mtu_payload) for n in SIZES if n > ses.max_ack_data)
        assert b.stats["ses.read_return_packets"] == back
        assert a.stats["fep.ops_completed"] == 2 * len(SIZES)
        check_clean(fab)


async def test_reads_of_one_region_from_two_initiators_and_absolute_addresses():
    async with lossy_fabric("ai-base", seed=12) as fab:
        a, b, c = fab.hosts
        base = 0x7F00_0000_0000
        mem = bytearray(payload(50_000, 5))
        b.register(mem, key=KEY, index=3, base_va=base, perms="rw")
        r1 = a.read(1, KEY, base + 1000, 45_000, index=3, absolute=True)
        r2 = c.read(b.ip, KEY, 10, 4000, index=3)
        assert (await r1).data == bytes(mem[1000:46_000])
        assert (await r2).data == bytes(mem[10:4010])
        data = payload(25_000, 6)
        await c.write(b, KEY, base + 20_000, data, index=3, absolute=True)
        assert mem[20_000:45_000] == data
        check_clean(fab)


@pytest.mark.parametrize("mode", ["ROD", "RUDI"])
async def test_rod_and_rudi_writes_and_reads(mode):
    async with lossy_fabric("hpc", seed=13) as fab:
        a, b = fab.ep(0), fab.ep(2)
        mem = bytearray(120_000)
        b.register(mem, key=KEY, index=1, idempotent_safe=True)
        datas = [payload(40_000, 20 + i) for i in range(3)]
        hs = [a.write(2, KEY, 40_000 * i, d, index=1, mode=mode) for i, d in enumerate(datas)]
        for h in hs:
            assert (await h).return_code == Rc.OK
        assert mem == b"".join(datas)
        r = await a.read(2, KEY, 5, 100_000, index=1, mode=mode)
        assert r.data == bytes(mem[5:100_005])
        pdcs = a.stats.get("fep.pdc_opened.initiator", 0)
        assert pdcs == 0 if mode == "RUDI" else pdcs >= 1  # RUDI needs no PDC
        check_clean(fab)


async def test_rudi_needs_an_idempotent_safe_region():
    async with lossy_fabric("hpc", seed=14) as fab:
        a, b = fab.ep(0), fab.ep(1)
        mem = bytearray(payload(30_000, 7))
        before = bytes(mem)
        b.register(mem, key=KEY, index=1)  # not idempotent_safe
        with pytest.raises(SesError, match="OP_VIOLATION") as err:
            await a.write(1, KEY, 0, payload(30_000, 8), index=1, mode="RUDI")
        assert err.value.return_code == Rc.OP_VIOLATION
        with pytest.raises(SesError, match="OP_VIOLATION"):
            await a.read(1, KEY, 0, 100, index=1, mode="RUDI")
        assert mem == before
        check_clean(fab, min_lost=0)


WRONG = [  # (expected code, target keywords, memory key, write offset, atomic offset)
    ("BAD_MKEY", dict(generation=1), KEY + 1, 0, 8),
    ("BAD_JOB_ID", dict(job=99, generation=1), KEY, 0, 8),
    ("BAD_PID", dict(pid=5, generation=1), KEY, 0, 8),
    ("BAD_INDEX", dict(index=7), KEY, 0, 8),
    ("BAD_GENERATION", dict(generation=0), KEY, 0, 8),
    ("PERM_VIOLATION", dict(generation=1), KEY + 5, 0, 8),  # read-only region
    ("BAD_ADDR", dict(generation=1), KEY, 50_000, 65_536),  # past the 64 KiB region
]


async def test_wrong_key_job_index_generation_get_their_codes_and_touch_nothing():
    async with lossy_fabric("hpc", seed=15) as fab:
        a, b = fab.ep(0), fab.ep(1)
        mem = bytearray(payload(64 * 1024, 1))
        ro = bytearray(payload(32 * 1024, 2))
        b.register(mem, key=KEY, index=1)
        b.register(ro, key=KEY + 5, index=1, perms="r")
        assert b.bump_generation(1) == 1 and b.generation(1) == 1
        snap_mem, snap_ro = bytes(mem), bytes(ro)
        data = payload(30_000, 3)  # 8 packets: each is checked, none writes
        started = []
        for code, kw, key, woff, aoff in WRONG:
            kw = {"index": 1, **kw}
            started.append((code, a.write(1, key, woff, data, **kw)))
            if code != "PERM_VIOLATION":  # reading a read-only region is allowed
                started.append((code, a.read(1, key, woff, 30_000, **kw)))
            started.append((code, a.atomic(1, key, aoff, "SUM", "UINT64", 1, fetch=True,
                                           **kw)))
        for code, h in started:
            with pytest.raises(SesError, match=code) as err:
                await h
            assert err.value.return_code == Rc[code], h
            res = h.result(check=False)
            assert res.return_code == Rc[code] and res.modified_length == 0
        assert mem == snap_mem and ro == snap_ro  # byte for byte
        assert (await a.read(1, KEY + 5, 0, 30_000, index=1, generation=1)).data == \
            snap_ro[:30_000]
        b.set_enabled(1, False)
        with pytest.raises(SesError, match="DISABLED"):
            await a.write(1, KEY, 0, data, index=1, generation=1)
        b.set_enabled(1, True)
        region = b.register(bytearray(100), key=KEY + 9, index=1)
        region.deregister()
        with pytest.raises(SesError, match="BAD_MKEY"):
            await a.write(1, KEY + 9, 0, b"x", index=1, generation=1)
        assert mem == snap_mem
        await a.write(1, KEY, 0, data, index=1, generation=1)  # the right address works
        assert mem[:30_000] == data and mem[30_000:] == snap_mem[30_000:]
        # a bad WRITE answers once (first failing packet), each of the 8 READ packets answers
        assert b.stats["ses.rc.BAD_MKEY"] == 1 + 8 + 1 + 1
        assert b.stats["ses.rc.BAD_ADDR"] == 1 + 8 + 1
        check_clean(fab)
