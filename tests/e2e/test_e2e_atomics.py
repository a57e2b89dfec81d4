"""Atomics end to end over the lossy fabric: every datatype each profile allows.

The full opcode x datatype matrix is checked sans-IO in ``tests/ses/test_atomics.py``;
here each datatype crosses the real fabric with SUM, MAX and both outcomes of CSWAP,
fetching and not, against the same numpy / integer references.
"""

from __future__ import annotations

import importlib
import random
import sys
from pathlib import Path

import pytest
from e2e_net import check_clean, lossy_fabric

from uet.profiles import ProfileError, builtin_profile
from uet.ses import atomics as amo
from uet.wire.constants import AtomicDatatype as Dt
from uet.wire.constants import AtomicOpcode as Op

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ses"))
ref = importlib.import_module("test_atomics")  # reference functions of the SES tests

KEY = 0xA70


def _cases(profile_name: str, rng: random.Random) -> list[tuple]:
    """(opcode, datatype, old, operand, compare, fetch) for every allowed datatype
    (LONG_DOUBLE and its complex form, binary128, included)."""
    p = builtin_profile(profile_name)
    out = []
    for dt in sorted(p.atomic_datatypes):
        ops = [op for op in (Op.SUM, Op.MAX) if op in p.atomic_opcodes and ref.defined(op, dt)]
        for op in ops:
            for fetch in (False, True):
                out.append((op, dt, ref.gen_value(rng, dt), ref.gen_value(rng, dt), None,
                            fetch))
        if not ref.defined(Op.CSWAP, dt):  # LONG_DOUBLE_COMPLEX: 32 bytes, no CAS
            out.append((Op.SUM, dt, ref.gen_value(rng, dt), ref.gen_value(rng, dt), None,
                        False))
            continue
        old = ref.gen_value(rng, dt)
        out.append((Op.CSWAP, dt, old, ref.gen_value(rng, dt), old, True))  # swaps
        other = ref.gen_value(rng, dt)
        out.append((Op.CSWAP, dt, old, ref.gen_value(rng, dt), other, True))  # may not
    return out


@pytest.mark.parametrize("profile", ["ai-base", "ai-full", "hpc"])
async def test_every_allowed_datatype_is_arithmetically_right(profile):
    rng = random.Random(f"e2e-{profile}")
    cases = _cases(profile, rng)
    dts = {c[1] for c in cases}
    assert dts == builtin_profile(profile).atomic_datatypes  # every datatype is exercised
    async with lossy_fabric(profile, seed=21) as fab:
        a, b = fab.ep(0), fab.ep(1)
        mem = bytearray(64 * len(cases))
        b.register(mem, key=KEY, index=4, perms="a")
        started = []
        for i, (op, dt, old, x, cmp, fetch) in enumerate(cases):
            off = 64 * i
            mem[off:off + amo.DATATYPES[dt].size] = ref.host_bytes(dt, old)
            started.append(a.atomic(1, KEY, off, op, dt, x, compare=cmp, fetch=fetch,
                                    index=4))
        for i, ((op, dt, old, x, cmp, fetch), h) in enumerate(zip(cases, started,
                                                                  strict=True)):
            res = await h
            size = amo.DATATYPES[dt].size
            want = ref.reference(op, dt, old, x, cmp, None)
            got = bytes(mem[64 * i:64 * i + size])
            assert got == ref.host_bytes(dt, want), (Op(op).name, Dt(dt).name, old, x, cmp)
            assert res.modified_length == size
            if fetch:
                assert res.data == ref.wire_bytes(dt, old), (Op(op).name, Dt(dt).name)
                if dt not in ref.FLOATISH | ref.COMPLEX:
                    assert res.value == old
        check_clean(fab)


async def test_atomics_the_profile_lacks_fail_at_the_initiator():
    async with lossy_fabric("ai-base", seed=22) as fab:
        a, b = fab.ep(0), fab.ep(1)
        b.register(bytearray(64), key=KEY, index=4)
        with pytest.raises(ProfileError, match="atomics.datatypes"):
            a.atomic(1, KEY, 0, "SUM", "INT8", 1)
        with pytest.raises(ProfileError, match="atomics.opcodes"):
            a.atomic(1, KEY, 0, "PROD", "UINT64", 3)
        with pytest.raises(ValueError, match="allowed MIN, MAX"):
            a.atomic(1, KEY, 0, "SUMM", "UINT64", 3)
        assert a.stats.get("pds.tx_packets", 0) == 0  # nothing went out
