"""Atomics: every opcode x datatype a profile allows, against numpy/int references."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from ses_harness import JOB, KEY, PID, RI, addr, pair, region

from uet.profiles import builtin_profile, parse_profile
from uet.ses import OpState, SesEndpoint, SesError
from uet.ses import atomics as amo
from uet.wire.codec import encode_uet
from uet.wire.constants import AtomicDatatype as Dt
from uet.wire.constants import AtomicOpcode as Op
from uet.wire.constants import NextHeader, SesFlag, SesOpcode
from uet.wire.constants import ReturnCode as Rc
from uet.wire.records import AtomicExt, CasExt, Frame, PdsRequest, SesMedium, SesStandard

NP = {Dt.INT8: np.int8, Dt.UINT8: np.uint8, Dt.INT16: np.int16, Dt.UINT16: np.uint16,
      Dt.INT32: np.int32, Dt.UINT32: np.uint32, Dt.INT64: np.int64, Dt.UINT64: np.uint64,
      Dt.FLOAT: np.float32, Dt.DOUBLE: np.float64, Dt.FP16: np.float16,
      Dt.FLOAT_COMPLEX: np.complex64, Dt.DOUBLE_COMPLEX: np.complex128, Dt.BF16: np.float32}
WIDE = {Dt.INT128: True, Dt.UINT128: False}
CAS = {Op.CSWAP, Op.CSWAP_NE, Op.CSWAP_LE, Op.CSWAP_LT, Op.CSWAP_GE, Op.CSWAP_GT}
FLOATISH = {Dt.FLOAT, Dt.DOUBLE, Dt.FP16, Dt.BF16}
COMPLEX = {Dt.FLOAT_COMPLEX, Dt.DOUBLE_COMPLEX}
INT_OPS = set(Op) - {Op.INVAL}
FLOAT_OPS = {Op.MIN, Op.MAX, Op.SUM, Op.DIFF, Op.PROD, Op.READ, Op.WRITE} | CAS
COMPLEX_OPS = {Op.SUM, Op.DIFF, Op.PROD, Op.READ, Op.WRITE, Op.CSWAP, Op.CSWAP_NE}
QUAD = {Dt.LONG_DOUBLE, Dt.LONG_DOUBLE_COMPLEX}  # IEEE binary128 components
QUAD_COMPLEX_OPS = {Op.SUM, Op.DIFF, Op.PROD, Op.READ, Op.WRITE}


def defined(op, dt):
    if dt == Dt.LONG_DOUBLE_COMPLEX:
        return op in QUAD_COMPLEX_OPS
    if dt == Dt.LONG_DOUBLE:
        return op in FLOAT_OPS
    if dt in COMPLEX:
        return op in COMPLEX_OPS
    if dt in FLOATISH:
        return op in FLOAT_OPS
    return op in INT_OPS


# ---------------------------------------------------------------- references


def bf16_round(f32: np.ndarray) -> np.ndarray:
    """binary32 -> bfloat16 bits, round to nearest even, NaN kept quiet (vectorised)."""
    u = f32.astype(np.float32).view(np.uint32).astype(np.uint64)
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f32)
    out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def bf16_to_f32(bits: int) -> np.float32:
    return np.array([bits << 16], dtype=np.uint32).view(np.float32)[0]


def quad_bits(x: Fraction) -> int:
    """binary128 encoding of a (finite) rational, rounded to nearest-even: a reference
    written apart from uet.ses.ieee (scale into [2^112, 2^113), round the integer part)."""
    sign = 1 if x < 0 else 0
    x = abs(x)
    if x == 0:
        return sign << 127
    k = 0
    while x * Fraction(2) ** k < 2 ** 112:
        k += 1
    while x * Fraction(2) ** k >= 2 ** 113:
        k -= 1
    k = min(k, 16382 + 112)  # subnormals: the quantum stops at 2^-16494
    scaled = x * Fraction(2) ** k
    n, rem = divmod(scaled.numerator, scaled.denominator)
    if 2 * rem > scaled.denominator or (2 * rem == scaled.denominator and n & 1):
        n += 1
    exp = 112 - k  # value = n * 2^-k = (n / 2^112) * 2^exp
    if n == 2 ** 113:
        n //= 2
        exp += 1
    if n < 2 ** 112:  # subnormal
        return sign << 127 | n
    if exp > 16383:
        return sign << 127 | 0x7FFF << 112
    return sign << 127 | (exp + 16383) << 112 | (n - 2 ** 112)


def quad_value(bits: int) -> Fraction:
    e = bits >> 112 & 0x7FFF
    m = bits & ((1 << 112) - 1)
    v = Fraction(m, 2 ** 112) * Fraction(2) ** -16382 if e == 0 else \
        Fraction(2 ** 112 + m, 2 ** 112) * Fraction(2) ** (e - 16383)
    return -v if bits >> 127 else v


def _quad_parts(dt, value):
    return list(value) if dt == Dt.LONG_DOUBLE_COMPLEX else [value]


def host_bytes(dt, value) -> bytes:
    """Little-endian memory image of one element."""
    if dt in QUAD:
        return b"".join(quad_bits(v).to_bytes(16, "little") for v in _quad_parts(dt, value))
    if dt in WIDE:
        return (value % (1 << 128)).to_bytes(16, "little")
    if dt == Dt.BF16:
        return int(bf16_round(np.array([value], np.float32))[0]).to_bytes(2, "little")
    return np.array([value], dtype=np.dtype(NP[dt]).newbyteorder("<")).tobytes()


def wire_bytes(dt, value) -> bytes:
    """Big-endian wire image of one element (fetched values)."""
    if dt in QUAD:
        return b"".join(quad_bits(v).to_bytes(16, "big") for v in _quad_parts(dt, value))
    if dt in WIDE:
        return (value % (1 << 128)).to_bytes(16, "big")
    if dt == Dt.BF16:
        return int(bf16_round(np.array([value], np.float32))[0]).to_bytes(2, "big")
    return np.array([value], dtype=np.dtype(NP[dt]).newbyteorder(">")).tobytes()


def ref_wide(op, signed, old, x, cmp, mask):
    m = (1 << 128) - 1

    def s(v):
        v &= m
        return v - (1 << 128) if signed and v >> 127 else v

    old, x = s(old), s(x)
    table = {
        Op.MIN: lambda: min(old, x), Op.MAX: lambda: max(old, x), Op.SUM: lambda: old + x,
        Op.DIFF: lambda: old - x, Op.PROD: lambda: old * x,
        Op.LOR: lambda: int(bool(old) or bool(x)), Op.LAND: lambda: int(bool(old) and bool(x)),
        Op.LXOR: lambda: int(bool(old) ^ bool(x)), Op.BOR: lambda: (old & m) | (x & m),
        Op.BAND: lambda: (old & m) & (x & m), Op.BXOR: lambda: (old & m) ^ (x & m),
        Op.READ: lambda: old, Op.WRITE: lambda: x,
        Op.MSWAP: lambda: ((old & m) & ~(mask & m)) | ((x & m) & (mask & m)),
    }
    if op in CAS:
        c = s(cmp)
        hold = {Op.CSWAP: c == old, Op.CSWAP_NE: c != old, Op.CSWAP_LE: c <= old,
                Op.CSWAP_LT: c < old, Op.CSWAP_GE: c >= old, Op.CSWAP_GT: c > old}[op]
        return (x if hold else old) & m
    return table[op]() & m


def ref_complex_prod(dt, a, b):
    f = np.float32 if dt == Dt.FLOAT_COMPLEX else np.float64
    ar, ai = np.array([a.real], f), np.array([a.imag], f)
    br, bi = np.array([b.real], f), np.array([b.imag], f)
    re = (ar * br) - (ai * bi)
    im = (ar * bi) + (ai * br)
    return NP[dt](complex(re[0], im[0]))


def ref_numpy(op, dt, old, x, cmp, mask):
    t = NP[dt]
    o, y = np.array([old], t), np.array([x], t)
    with np.errstate(all="ignore"):
        if op == Op.PROD and dt in COMPLEX:
            return ref_complex_prod(dt, old, x)
        if op in CAS:
            c = np.array([cmp], t)
            hold = {Op.CSWAP: c == o, Op.CSWAP_NE: c != o, Op.CSWAP_LE: c <= o,
                    Op.CSWAP_LT: c < o, Op.CSWAP_GE: c >= o, Op.CSWAP_GT: c > o}[op]
            r = np.where(hold, y, o)
        elif op == Op.MSWAP:
            k = np.array([mask], t)
            r = (o & ~k) | (y & k)
        else:
            r = {Op.MIN: lambda: np.minimum(o, y), Op.MAX: lambda: np.maximum(o, y),
                 Op.SUM: lambda: o + y, Op.DIFF: lambda: o - y, Op.PROD: lambda: o * y,
                 Op.LOR: lambda: np.logical_or(o, y).astype(t),
                 Op.LAND: lambda: np.logical_and(o, y).astype(t),
                 Op.LXOR: lambda: np.logical_xor(o, y).astype(t),
                 Op.BOR: lambda: o | y, Op.BAND: lambda: o & y, Op.BXOR: lambda: o ^ y,
                 Op.READ: lambda: o, Op.WRITE: lambda: y}[op]()
    return r.astype(t)[0]


def ref_quad(op, dt, old, x, cmp):
    """LONG_DOUBLE(_COMPLEX) reference: exact rational arithmetic, rounded once per
    operation (complex PROD: the textbook formula, every product and sum rounded)."""
    def r(v):
        return quad_value(quad_bits(v))

    if op == Op.READ:
        return old
    if op == Op.WRITE:
        return x
    if op in CAS:
        hold = {Op.CSWAP: cmp == old, Op.CSWAP_NE: cmp != old, Op.CSWAP_LE: cmp <= old,
                Op.CSWAP_LT: cmp < old, Op.CSWAP_GE: cmp >= old, Op.CSWAP_GT: cmp > old}[op]
        return x if hold else old
    if dt == Dt.LONG_DOUBLE_COMPLEX:
        (a, b), (c, d) = old, x
        if op == Op.SUM:
            return (r(a + c), r(b + d))
        if op == Op.DIFF:
            return (r(a - c), r(b - d))
        return (r(r(a * c) - r(b * d)), r(r(a * d) + r(b * c)))
    return r({Op.MIN: min(old, x), Op.MAX: max(old, x), Op.SUM: old + x, Op.DIFF: old - x,
              Op.PROD: old * x}[op])


def reference(op, dt, old, x, cmp, mask):
    if dt in QUAD:
        return ref_quad(op, dt, old, x, cmp)
    if dt in WIDE:
        return ref_wide(op, WIDE[dt], old, x, cmp, mask)
    return ref_numpy(op, dt, old, x, cmp, mask)


# ---------------------------------------------------------------- operand generation


def gen_value(rng: random.Random, dt):
    if dt in QUAD:
        parts = [Fraction(rng.randrange(-(1 << 70), 1 << 70), 1 << rng.randrange(0, 60))
                 for _ in range(2 if dt == Dt.LONG_DOUBLE_COMPLEX else 1)]
        return tuple(parts) if dt == Dt.LONG_DOUBLE_COMPLEX else parts[0]
    if dt in WIDE or np.issubdtype(NP[dt], np.integer):
        bits = 128 if dt in WIDE else np.iinfo(NP[dt]).bits
        signed = WIDE[dt] if dt in WIDE else np.issubdtype(NP[dt], np.signedinteger)
        choice = rng.random()
        if choice < 0.15:
            v = 0
        elif choice < 0.3:
            v = rng.choice([1, -1, (1 << (bits - 1)) - 1, -(1 << (bits - 1))])
        else:
            v = rng.getrandbits(bits)
        v %= 1 << bits
        if signed and v >> (bits - 1):
            v -= 1 << bits
        return v
    if dt == Dt.BF16:
        while True:
            bits = rng.getrandbits(16)
            if (bits >> 7) & 0xFF != 0xFF:
                return float(bf16_to_f32(bits))
    if dt in COMPLEX:
        t = NP[dt]
        return complex(t(complex(rng.uniform(-1e3, 1e3), rng.uniform(-1e3, 1e3))))
    t = NP[dt]
    return float(t(rng.choice([0.0, 1.0, -2.5]) if rng.random() < 0.2
                   else rng.uniform(-1e4, 1e4)))


def trials(op, dt, rng):
    out = []
    for i in range(4):
        old, x = gen_value(rng, dt), gen_value(rng, dt)
        cmp = mask = None
        if op in CAS:
            cmp = [old, gen_value(rng, dt), old, gen_value(rng, dt)][i]
        if op == Op.MSWAP:
            mask = gen_value(rng, dt)
        out.append((old, x, cmp, mask))
    return out


def combos(name):
    p = builtin_profile(name)
    return [(name, op, dt) for op in sorted(p.atomic_opcodes) for dt in sorted(p.atomic_datatypes)
            if defined(op, dt)]


ARITH = {Op.MIN, Op.MAX, Op.SUM, Op.DIFF, Op.PROD}


def fp_failure(op, dt, want):
    """The AMO_FP_* code the built-in profiles fail on (NaN, overflow) for this reference
    result, or None: the operands are finite, so a non-finite result is an exception."""
    if op not in ARITH or not (dt in FLOATISH or dt in COMPLEX):
        return None
    parts = [complex(want).real, complex(want).imag] if dt in COMPLEX else [float(want)]
    if any(np.isnan(v) for v in parts):
        return Rc.AMO_FP_NAN
    if any(np.isinf(v) for v in parts):
        return Rc.AMO_FP_OVERFLOW
    return None


ALL_COMBOS = combos("ai-base") + combos("ai-full") + combos("hpc")


@pytest.mark.parametrize("profile,op,dt", ALL_COMBOS,
                         ids=[f"{p}-{Op(o).name}-{Dt(d).name}" for p, o, d in ALL_COMBOS])
def test_atomic_matches_reference(profile, op, dt):
    rng = random.Random(f"{profile}-{int(op)}-{int(dt)}")
    a, b, loop = pair(profile, seed=int(op) * 31 + int(dt), dup=0.2)
    mem = region(b, 4096)
    size = amo.DATATYPES[dt].size
    cases = []
    for i, (old, x, cmp, mask) in enumerate(trials(op, dt, rng)):
        for fetch in (False, True):
            off = 64 * (2 * i + fetch)
            mem[off:off + size] = host_bytes(dt, old)
            o = a.initiator.atomic(addr(b), KEY, off, op, dt, x, compare=cmp, mask=mask,
                                   fetch=fetch)
            cases.append((o, off, old, x, cmp, mask, fetch))
    loop.run()
    for o, off, old, x, cmp, mask, fetch in cases:
        want = reference(op, dt, old, x, cmp, mask)
        fail = fp_failure(op, dt, want)
        if fail is not None:  # e.g. FP16 PROD of two values near 1e4: overflow
            assert o.return_code == fail, (old, x, o.return_code)
            assert bytes(mem[off:off + size]) == host_bytes(dt, old)  # memory unchanged
            continue
        assert o.state == OpState.DONE, (o.return_code, o.reason)
        assert bytes(mem[off:off + size]) == host_bytes(dt, want), (old, x, cmp, mask)
        if fetch:
            assert bytes(o.result().data) == wire_bytes(dt, old)
            if dt not in FLOATISH | COMPLEX:
                assert o.result().value == old


UNDEFINED = [(op, dt) for op in sorted(builtin_profile("hpc").atomic_opcodes)
             for dt in sorted(builtin_profile("hpc").atomic_datatypes) if not defined(op, dt)]


@pytest.mark.parametrize("op,dt", UNDEFINED,
                         ids=[f"{Op(o).name}-{Dt(d).name}" for o, d in UNDEFINED])
def test_undefined_combination_is_amo_unsupported_op(op, dt):
    a, b, loop = pair("hpc", seed=1)
    mem = region(b, 256, fill=0x11)
    if op in CAS and amo.DATATYPES[dt].size > 16:  # cannot even be encoded: refused here
        with pytest.raises(SesError) as err:
            a.initiator.atomic(addr(b), KEY, 0, op, dt, 0, compare=0, fetch=True)
        assert err.value.return_code == Rc.AMO_UNSUPPORTED_SIZE
        return
    o = a.initiator.atomic(addr(b), KEY, 0, op, dt, 0, compare=0, mask=0, fetch=True)
    loop.run()
    assert o.return_code == Rc.AMO_UNSUPPORTED_OP and mem == bytearray([0x11]) * 256


_MID = iter(range(1, 1 << 16))


def _raw(b, a, opcode, ext, payload, request_length, offset=0, key=KEY):
    hdr = SesStandard(opcode=opcode, flags=SesFlag.SOM | SesFlag.EOM | SesFlag.REL,
                      message_id=next(_MID), initiator=0xA, job_id=JOB, pid_on_fep=PID,
                      resource_index=RI, buffer_offset=offset, memory_key=key,
                      request_length=request_length)
    return b.target.handle(a.address, hdr, ext, payload).response.return_code


def test_bad_sizes_alignment_and_datatypes():
    a, b, loop = pair("hpc", seed=1)
    mem = region(b, 256, fill=0x22)
    before = bytes(mem)
    A = SesOpcode.FETCHING_ATOMIC
    assert _raw(b, a, A, AtomicExt(Op.SUM, Dt.UINT32), b"\0\0\1", 3) == Rc.AMO_UNSUPPORTED_SIZE
    assert _raw(b, a, A, AtomicExt(Op.SUM, Dt.UINT32), b"\0" * 8, 8) == Rc.AMO_UNSUPPORTED_SIZE
    assert _raw(b, a, A, CasExt(Op.CSWAP, Dt.UINT64), b"", 16) == Rc.AMO_UNSUPPORTED_SIZE
    assert _raw(b, a, A, AtomicExt(Op.CSWAP, Dt.UINT64), b"\0" * 32, 32) == \
        Rc.AMO_UNSUPPORTED_SIZE  # CSWAP needs the compare-and-swap extension
    assert _raw(b, a, A, AtomicExt(Op.SUM, Dt.UINT64), b"\0" * 8, 8, offset=4) == \
        Rc.AMO_UNALIGNED
    assert _raw(b, a, A, AtomicExt(Op.SUM, Dt.UINT64), b"\0" * 8, 8, offset=252) == \
        Rc.BAD_ADDR
    assert _raw(b, a, A, AtomicExt(Op.INVAL, Dt.UINT64), b"\0" * 8, 8) == \
        Rc.AMO_UNSUPPORTED_OP  # not in any profile's atomics.opcodes
    assert _raw(b, a, A, AtomicExt(0x77, Dt.UINT64), b"\0" * 8, 8) == Rc.AMO_UNSUPPORTED_OP
    assert _raw(b, a, A, AtomicExt(Op.SUM, Dt.LONG_DOUBLE), b"\0" * 8, 8) == \
        Rc.AMO_UNSUPPORTED_SIZE  # binary128: 16-byte operands
    assert _raw(b, a, A, CasExt(Op.CSWAP, Dt.LONG_DOUBLE_COMPLEX), b"", 32) == \
        Rc.AMO_UNSUPPORTED_OP  # 32 bytes do not fit the 16-byte compare / swap fields
    assert _raw(b, a, A, AtomicExt(Op.SUM, 0x55), b"\0" * 16, 16) == Rc.AMO_UNSUPPORTED_DT
    assert _raw(b, a, A, None, b"\0" * 8, 8) == Rc.AMO_UNSUPPORTED_OP
    assert bytes(mem) == before


def test_a_datatype_outside_the_profile_is_unsupported():
    raw = {"profile": {"name": "ld", "extends": "hpc"},
           "atomics": {"datatypes": ["UINT64"]}}
    prof = parse_profile(raw, "<test>")
    a = SesEndpoint("hpc", address="10.0.0.1", initiator_id=0xA)
    b = SesEndpoint(prof, address="10.0.0.2")
    mem = region(b, 64)
    assert _raw(b, a, SesOpcode.ATOMIC, AtomicExt(Op.SUM, Dt.LONG_DOUBLE), b"\0" * 16, 16) \
        == Rc.AMO_UNSUPPORTED_DT
    assert _raw(b, a, SesOpcode.ATOMIC, AtomicExt(Op.SUM, Dt.INT32), b"\0" * 4, 4) \
        == Rc.AMO_UNSUPPORTED_DT  # INT32 is not in this profile's datatypes
    assert mem == bytearray(64)


def test_cas_operands_are_right_aligned_big_endian_on_the_wire():
    a, b, loop = pair("hpc", seed=1)
    region(b, 64)
    a.initiator.atomic(addr(b), KEY, 8, Op.CSWAP, Dt.INT16, -3, compare=-2, fetch=True)
    pkt = a.poll_transmit()
    assert pkt.ses.request_length == 32 and pkt.payload == b""
    assert isinstance(pkt.ext, CasExt)
    nh = NextHeader.REQ_MEDIUM if isinstance(pkt.ses, SesMedium) else NextHeader.REQ_STD
    raw = encode_uet(Frame(PdsRequest(next_hdr=nh), pkt.ses, pkt.ext, pkt.payload))
    ext = raw[-36:]
    assert ext[:2] == bytes([Op.CSWAP, Dt.INT16])
    assert ext[4:20] == bytes(14) + b"\xff\xfe"  # compare, right-aligned
    assert ext[20:36] == bytes(14) + b"\xff\xfd"  # swap


def test_fetching_atomic_operand_is_big_endian():
    a, b, loop = pair("hpc", seed=1)
    region(b, 64)
    a.initiator.atomic(addr(b), KEY, 8, Op.SUM, Dt.UINT64, 0x0102030405060708, fetch=True)
    pkt = a.poll_transmit()
    assert pkt.payload == bytes.fromhex("0102030405060708") and pkt.ses.request_length == 8


@pytest.mark.parametrize("fetch", [False, True])
def test_tagged_atomic_applies_to_the_matched_receive(fetch):
    a, b, loop = pair("ai-full", seed=2, dup=0.2)
    b.resources.register(JOB, PID, RI)
    other = b.target.post_recv(JOB, PID, RI, 16, tag=7)
    recv = b.target.post_recv(JOB, PID, RI, 16, tag=9)
    recv.buffer[8:16] = (40).to_bytes(8, "little")
    op = a.initiator.tagged_atomic(addr(b), 9, Op.SUM, Dt.UINT64, 2, offset=8, fetch=fetch)
    miss = a.initiator.tagged_atomic(addr(b), 10, Op.SUM, Dt.UINT64, 2, fetch=fetch)
    loop.run()
    assert op.state == OpState.DONE and recv.done and recv.match_bits == 9
    assert int.from_bytes(recv.buffer[8:16], "little") == 42
    if fetch:
        assert op.result().value == 40
    assert miss.return_code == Rc.NO_MATCH  # tagged atomics are never buffered
    assert not other.done
