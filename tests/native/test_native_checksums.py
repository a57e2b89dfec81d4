"""Internet checksums (RFC 1071/768/1624) of both implementations, against scapy and a model."""

from __future__ import annotations

import array
import platform
import random
import shutil
import struct
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw, raw

from uet.native import pure

payloads = st.binary(min_size=0, max_size=300)
u32 = st.integers(0, 0xFFFFFFFF)
u16 = st.integers(0, 0xFFFF)


def model_ones_sum(data: bytes, initial: int = 0) -> int:
    """Textbook RFC 1071 loop, the model both implementations are held to."""
    if len(data) % 2:
        data += b"\0"
    total = initial
    for i in range(0, len(data), 2):
        total += data[i] << 8 | data[i + 1]
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


# --------------------------------------------------------------------------- internet_checksum


def test_rfc1071_example(impl: ModuleType) -> None:
    data = bytes.fromhex("0001f203f4f5f6f7")  # RFC 1071 section 3: sum 0xddf2
    assert impl.ones_sum(data) == 0xDDF2
    assert impl.internet_checksum(data) == 0x220D


def test_empty_and_zero(impl: ModuleType) -> None:
    assert impl.ones_sum(b"") == 0
    assert impl.internet_checksum(b"") == 0xFFFF
    assert impl.ones_sum(b"\0" * 7) == 0
    assert impl.ones_sum(b"\xff\xff") == 0xFFFF
    assert impl.internet_checksum(b"\xff\xff") == 0
    assert impl.ones_sum(b"\xff\xff", 0xFFFF) == 0xFFFF  # never folds to 0
    assert impl.ones_sum(b"\x01") == 0x0100  # odd byte padded on the right


@given(data=payloads, initial=u32)
def test_matches_model(impl: ModuleType, data: bytes, initial: int) -> None:
    assert impl.ones_sum(data, initial) == model_ones_sum(data, initial)
    assert impl.internet_checksum(data, initial) == ~model_ones_sum(data, initial) & 0xFFFF


@settings(max_examples=30)
@given(data=st.binary(min_size=0, max_size=70000))
def test_large_buffers(impl: ModuleType, data: bytes) -> None:
    assert impl.ones_sum(data) == model_ones_sum(data)


@given(data=payloads)
def test_verifies_to_zero(impl: ModuleType, data: bytes) -> None:
    data = data + b"\0" * (len(data) % 2)
    csum = impl.internet_checksum(data + b"\0\0")
    assert impl.internet_checksum(data + csum.to_bytes(2, "big")) == 0


@given(a=payloads, b=payloads)
def test_chaining(impl: ModuleType, a: bytes, b: bytes) -> None:
    a = a + b"\0" * (len(a) % 2)  # chaining needs an even-length first chunk
    assert impl.internet_checksum(a + b) == impl.internet_checksum(b, impl.ones_sum(a))


# The C one's-complement sum has a portable path and, on x86-64, SSE2 and AVX2 paths (64- and
# 128-byte blocks, then 32-byte steps, then the portable code for the rest): every path must
# agree with the pure-Python sum at every length, start offset and initial value.
PATH_LENGTHS = sorted(
    {n + d for n in (0, 16, 32, 64, 96, 128, 160, 256, 384, 512, 4096, 9000)
     for d in (-1, 0, 1, 2, 31, 33, 127) if n + d >= 0}
)  # fmt: skip


def _path_sums(fast: ModuleType) -> list:
    return [fast.ones_sum, fast.ones_sum_portable, fast.ones_sum_sse2, fast.ones_sum_avx2]


def test_every_sum_path_matches_pure(both: tuple[ModuleType, ModuleType]) -> None:
    pure, fast = both
    rng = random.Random(1071)
    lengths = PATH_LENGTHS + [rng.randrange(0, 9001) for _ in range(300)]
    for n in lengths:
        offset = rng.randrange(0, 4)  # odd and even start addresses
        data = memoryview(rng.randbytes(n + offset))[offset:]
        initial = rng.choice((0, 1, 0xFFFF, 0xFFFFFFFF, rng.randrange(1 << 32)))
        want = pure.ones_sum(data, initial)
        for func in _path_sums(fast):
            assert func(data, initial) == want, (func.__name__, n, offset, initial)
        assert fast.internet_checksum(data, initial) == ~want & 0xFFFF


@pytest.mark.parametrize("fill", [0x00, 0xFF, 0x80])
def test_every_sum_path_extremes(both: tuple[ModuleType, ModuleType], fill: int) -> None:
    """All-zero data sums to 0 (not 0xFFFF), all-ones data carries in every lane."""
    pure, fast = both
    for n in PATH_LENGTHS + [70001]:
        for offset in (0, 1):
            data = memoryview(bytes([fill]) * (n + offset))[offset:]
            want = pure.ones_sum(data)
            assert want == model_ones_sum(bytes(data))
            for func in _path_sums(fast):
                assert func(data) == want, (func.__name__, n, offset)
                assert func(bytearray(data), 0xFFFFFFFF) == pure.ones_sum(data, 0xFFFFFFFF)


@pytest.mark.parametrize("fill", [0x00, 0xFF, 0x7F, 0x80])
def test_every_sum_path_over_several_rounds(both: tuple[ModuleType, ModuleType], fill: int) -> None:
    """Buffers longer than a vector round (1 MiB SSE2, 2 MiB AVX2) with the extreme words
    (biased to -32768 or 32767 in every lane), so the 32-bit lanes are at their limits."""
    pure, fast = both
    rng = random.Random(fill)
    data = bytearray([fill]) * (5 * 1024 * 1024 + 77)
    for i in rng.sample(range(len(data)), 50):
        data[i] = rng.randrange(256)
    for view in (memoryview(data), memoryview(data)[1:], memoryview(bytes([fill]) * (4 << 20))):
        want = pure.ones_sum(view)
        for func in _path_sums(fast):
            assert func(view) == want, func.__name__


def test_sum_path_variants_check_arguments(fast_impl: ModuleType) -> None:
    for func in _path_sums(fast_impl):
        with pytest.raises(TypeError):
            func("text")
        with pytest.raises(ValueError, match="initial"):
            func(b"ab", 1 << 32)


def test_checksum_impl(impl: ModuleType) -> None:
    name = impl.checksum_impl()
    if impl.IMPLEMENTATION == "python":
        assert name == "python"
    elif platform.machine() in ("x86_64", "AMD64"):
        cpuinfo = Path("/proc/cpuinfo")
        flags = set(cpuinfo.read_text().split()) if cpuinfo.exists() else set()
        assert name == ("avx2" if "avx2" in flags else "sse2")
    else:
        assert name == "portable"


def test_buffer_types(impl: ModuleType) -> None:
    data = bytes(range(256)) * 3 + b"\x07"
    want = impl.internet_checksum(data)
    assert impl.internet_checksum(bytearray(data)) == want
    assert impl.internet_checksum(memoryview(data)) == want
    assert impl.internet_checksum(memoryview(b"xx" + data)[2:]) == want
    words = array.array("H", data[:-1])
    assert impl.internet_checksum(words) == impl.internet_checksum(data[:-1])
    assert impl.crc32c(bytearray(data)) == impl.crc32c(data)


@pytest.mark.parametrize("initial", [-1, 1 << 32])
def test_bad_initial(impl: ModuleType, initial: int) -> None:
    with pytest.raises(ValueError, match="initial"):
        impl.internet_checksum(b"ab", initial)
    with pytest.raises(ValueError, match="initial"):
        impl.ones_sum(b"ab", initial)


@pytest.mark.parametrize("bad", ["text", 12, None, [1, 2]])
def test_bad_data_type(impl: ModuleType, bad: object) -> None:
    with pytest.raises(TypeError):
        impl.internet_checksum(bad)
    with pytest.raises(TypeError):
        impl.crc32c(bad)


# --------------------------------------------------------------------------- IPv4 / UDP frames


def ipv4_frame(
    src: str, dst: str, tos: int, ttl: int, ident: int, opt_words: int, payload: bytes
) -> bytes:
    """An IPv4/UDP packet with scapy's own checksums."""
    options = [Raw(b"\x01" * 4)] * opt_words  # NOPs
    pkt = IP(src=src, dst=dst, tos=tos, ttl=ttl, id=ident, options=options)
    return raw(pkt / UDP(sport=ident ^ 0x5555, dport=4793) / Raw(payload))


ipv4_addrs = st.ip_addresses(v=4).map(str)
ipv6_addrs = st.ip_addresses(v=6).map(str)


@given(
    src=ipv4_addrs,
    dst=ipv4_addrs,
    tos=st.integers(0, 255),
    ttl=st.integers(0, 255),
    ident=u16,
    opt_words=st.integers(0, 10),
    payload=payloads,
)
def test_ipv4_udp_against_scapy(
    impl: ModuleType,
    src: str,
    dst: str,
    tos: int,
    ttl: int,
    ident: int,
    opt_words: int,
    payload: bytes,
) -> None:
    frame = ipv4_frame(src, dst, tos, ttl, ident, opt_words, payload)
    hlen = (frame[0] & 0x0F) * 4
    assert hlen == 20 + 4 * opt_words
    assert impl.ipv4_header_checksum(frame) == int.from_bytes(frame[10:12], "big")
    assert impl.ipv4_header_checksum(frame[:hlen]) == int.from_bytes(frame[10:12], "big")
    udp = frame[hlen:]
    assert impl.udp_checksum_ipv4(frame[12:16], frame[16:20], udp) == int.from_bytes(
        udp[6:8], "big"
    )


@given(src=ipv6_addrs, dst=ipv6_addrs, sport=u16, payload=payloads)
def test_ipv6_udp_against_scapy(
    impl: ModuleType, src: str, dst: str, sport: int, payload: bytes
) -> None:
    frame = raw(IPv6(src=src, dst=dst) / UDP(sport=sport, dport=4793) / Raw(payload))
    udp = frame[40:]
    want = int.from_bytes(udp[6:8], "big")
    assert impl.udp_checksum_ipv6(frame[8:24], frame[24:40], udp) == want


@given(field=u16, data=st.binary(min_size=20, max_size=20))
def test_ipv4_checksum_field_ignored(impl: ModuleType, field: int, data: bytes) -> None:
    hdr = bytearray(data)
    hdr[0] = 0x45
    want = impl.ipv4_header_checksum(bytes(hdr))
    hdr[10:12] = field.to_bytes(2, "big")
    assert impl.ipv4_header_checksum(hdr) == want
    hdr[10:12] = want.to_bytes(2, "big")
    assert impl.internet_checksum(hdr) == 0


def test_udp_zero_becomes_ffff(impl: ModuleType) -> None:
    src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    udp = bytearray(struct.pack("!HHHH", 1000, 4793, 12, 0) + b"\0\0\0\0")
    filler = impl.udp_checksum_ipv4(src, dst, udp)
    udp[8:10] = filler.to_bytes(2, "big")  # makes the one's-complement sum 0xFFFF
    assert model_ones_sum(src + dst + b"\0\x11\0\x0c" + bytes(udp)) == 0xFFFF
    assert impl.udp_checksum_ipv4(src, dst, udp) == 0xFFFF
    src6, dst6 = bytes(15) + b"\1", bytes(15) + b"\2"
    udp[8:10] = b"\0\0"
    filler = impl.udp_checksum_ipv6(src6, dst6, udp)
    udp[8:10] = filler.to_bytes(2, "big")
    assert impl.udp_checksum_ipv6(src6, dst6, udp) == 0xFFFF


def test_ipv4_bad_input(impl: ModuleType) -> None:
    good = ipv4_frame("1.2.3.4", "5.6.7.8", 0, 64, 1, 2, b"x")
    with pytest.raises(ValueError, match="at least 20 bytes"):
        impl.ipv4_header_checksum(good[:19])
    with pytest.raises(ValueError, match="at least 20 bytes"):
        impl.ipv4_header_checksum(b"")
    with pytest.raises(ValueError, match="IHL"):
        impl.ipv4_header_checksum(b"\x44" + good[1:])
    with pytest.raises(ValueError, match="IHL 7 needs 28 bytes"):
        impl.ipv4_header_checksum(good[:27])
    with pytest.raises(TypeError):
        impl.ipv4_header_checksum("x" * 20)


def test_udp_bad_input(impl: ModuleType) -> None:
    udp = struct.pack("!HHHH", 1, 2, 8, 0)
    for fn, alen in ((impl.udp_checksum_ipv4, 4), (impl.udp_checksum_ipv6, 16)):
        good = bytes(alen)
        for wrong in (bytes(alen - 1), bytes(alen + 1), b""):
            with pytest.raises(ValueError, match="addresses must be"):
                fn(wrong, good, udp)
            with pytest.raises(ValueError, match="addresses must be"):
                fn(good, wrong, udp)
        with pytest.raises(ValueError, match="UDP datagram"):
            fn(good, good, udp[:7])
        with pytest.raises(TypeError):
            fn(good, good, "12345678")
    with pytest.raises(ValueError, match="UDP datagram"):
        impl.udp_checksum_ipv4(bytes(4), bytes(4), bytes(65536))
    assert impl.udp_checksum_ipv6(bytes(16), bytes(16), bytes(65536)) == (
        pure.udp_checksum_ipv6(bytes(16), bytes(16), bytes(65536))
    )


# --------------------------------------------------------------------------- RFC 1624


@given(
    src=ipv4_addrs,
    tos=st.integers(0, 255),
    ttl=st.integers(0, 255),
    new_tos=st.integers(0, 255),
    new_ttl=st.integers(0, 255),
)
def test_checksum_adjust_matches_recompute(
    impl: ModuleType, src: str, tos: int, ttl: int, new_tos: int, new_ttl: int
) -> None:
    hdr = bytearray(ipv4_frame(src, "192.0.2.1", tos, ttl, 7, 0, b"")[:20])
    csum = int.from_bytes(hdr[10:12], "big")
    # a switch rewriting DSCP/ECN (word 0), then TTL (word 4, with the protocol)
    old0 = int.from_bytes(hdr[0:2], "big")
    hdr[1] = new_tos
    csum = impl.checksum_adjust(csum, old0, int.from_bytes(hdr[0:2], "big"))
    assert csum == impl.ipv4_header_checksum(hdr)
    old4 = int.from_bytes(hdr[8:10], "big")
    hdr[8] = new_ttl
    csum = impl.checksum_adjust(csum, old4, int.from_bytes(hdr[8:10], "big"))
    assert csum == impl.ipv4_header_checksum(hdr)


@given(csum=u16, old=u16, new=u16)
def test_checksum_adjust_formula(impl: ModuleType, csum: int, old: int, new: int) -> None:
    total = (~csum & 0xFFFF) + (~old & 0xFFFF) + new
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    assert impl.checksum_adjust(csum, old, new) == ~total & 0xFFFF


@pytest.mark.parametrize("args", [(0x10000, 0, 0), (0, -1, 0), (0, 0, 1 << 20)])
def test_checksum_adjust_bad(impl: ModuleType, args: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError, match=r"\[0, 65535\]"):
        impl.checksum_adjust(*args)


# --------------------------------------------------------------------------- tshark


def _pcap(frames: list[bytes]) -> bytes:
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]  # LINKTYPE_ETHERNET
    for i, frame in enumerate(frames):
        out.append(struct.pack("<IIII", 1_700_000_000 + i, 0, len(frame), len(frame)))
        out.append(frame)
    return b"".join(out)


@pytest.mark.tshark
def test_tshark_accepts_our_checksums(both: tuple[ModuleType, ModuleType], tmp_path: Path) -> None:
    """Frames whose IPv4 and UDP checksums we computed: tshark must call them Good."""
    tshark = shutil.which("tshark") or "/usr/bin/tshark"
    eth = raw(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02"))
    frames = []
    for impl in both:
        for i, payload in enumerate((b"", b"odd", b"uet payload bytes " * 20)):
            ip = bytearray(ipv4_frame("10.1.0.1", "10.2.0.2", 0x68, 63, i, i, payload))
            ip[10:12] = b"\xde\xad"  # garbage: must be ignored and replaced
            ip[10:12] = impl.ipv4_header_checksum(ip).to_bytes(2, "big")
            hlen = (ip[0] & 0x0F) * 4
            ip[hlen + 6 : hlen + 8] = b"\0\0"
            csum = impl.udp_checksum_ipv4(ip[12:16], ip[16:20], ip[hlen:])
            ip[hlen + 6 : hlen + 8] = csum.to_bytes(2, "big")
            frames.append(eth[:12] + b"\x08\x00" + bytes(ip))
    path = tmp_path / "checksums.pcap"
    path.write_bytes(_pcap(frames))
    result = subprocess.run(
        [tshark, "-r", str(path), "-o", "ip.check_checksum:TRUE", "-o",
         "udp.check_checksum:TRUE", "-T", "fields", "-e", "ip.checksum.status",
         "-e", "udp.checksum.status"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert result.stdout.split("\n")[:-1] == ["1\t1"] * len(frames), result.stdout
