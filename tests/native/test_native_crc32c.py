"""CRC-32C (Castagnoli) of both implementations and both C code paths."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

# check value and RFC 3720 appendix B.4 vectors
VECTORS = [
    (b"123456789", 0xE3069283),
    (b"", 0x00000000),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


@pytest.mark.parametrize(("data", "want"), VECTORS)
def test_vectors(impl: ModuleType, data: bytes, want: int) -> None:
    assert impl.crc32c(data) == want


@given(a=st.binary(max_size=200), b=st.binary(max_size=200))
def test_chainable(impl: ModuleType, a: bytes, b: bytes) -> None:
    assert impl.crc32c(b, impl.crc32c(a)) == impl.crc32c(a + b)


@given(data=st.binary(max_size=300), crc=st.integers(0, 0xFFFFFFFF))
def test_same_results(both: tuple[ModuleType, ModuleType], data: bytes, crc: int) -> None:
    pure, fast = both
    want = pure.crc32c(data, crc)
    assert fast.crc32c(data, crc) == want
    assert fast.crc32c_slicing8(data, crc) == want
    assert fast.crc32c_sse42(data, crc) == want


def test_alignment_and_large(both: tuple[ModuleType, ModuleType]) -> None:
    pure, fast = both
    data = bytes((i * 131 + 7) & 0xFF for i in range(5000))
    view = memoryview(data)
    for start in range(9):
        for end in (start, start + 1, start + 7, start + 8, start + 33, 4000 + start, 5000):
            want = pure.crc32c(view[start:end])
            assert fast.crc32c(view[start:end]) == want
            assert fast.crc32c_slicing8(view[start:end]) == want


def test_impl_name(impl: ModuleType) -> None:
    name = impl.crc32c_impl()
    if impl.IMPLEMENTATION == "python":
        assert name == "python"
    else:
        cpu = Path("/proc/cpuinfo")
        has_sse42 = cpu.exists() and "sse4_2" in cpu.read_text()
        assert name == ("sse4.2" if has_sse42 else "slicing8")


@pytest.mark.parametrize("crc", [-1, 1 << 32])
def test_bad_crc(impl: ModuleType, crc: int) -> None:
    with pytest.raises(ValueError, match="crc"):
        impl.crc32c(b"x", crc)
