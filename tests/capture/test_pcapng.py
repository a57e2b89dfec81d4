"""pcapng writer / pcap+pcapng reader."""

from __future__ import annotations

import io
import struct

import pytest
from scapy.utils import PcapNgReader

from uet.capture.pcapng import CaptureError, CaptureTruncated, PcapngWriter, read_capture


def _write_sample() -> bytes:
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    a = w.add_interface("fep0")
    b = w.add_interface("sw0:p1", snaplen=10)
    w.write_packet(a, 1_000_000_123, b"\x01\x02\x03")
    w.write_packet(b, 2 * 10**18 + 7, bytes(range(20)))
    w.write_packet(a, 5, b"", orig_len=60)
    w.flush()
    return buf.getvalue()


def test_roundtrip_fields() -> None:
    frames = list(read_capture(io.BytesIO(_write_sample())))
    assert [f.index for f in frames] == [1, 2, 3]
    f1, f2, f3 = frames
    assert (f1.if_id, f1.if_name, f1.ts_ns, f1.data, f1.orig_len, f1.linktype) == (
        0, "fep0", 1_000_000_123, b"\x01\x02\x03", 3, 1)
    # snaplen 10 cuts the data, the original length is kept
    assert (f2.if_id, f2.if_name, f2.ts_ns, f2.data, f2.orig_len) == (
        1, "sw0:p1", 2 * 10**18 + 7, bytes(range(10)), 20)
    assert (f3.data, f3.orig_len, f3.ts_ns) == (b"", 60, 5)


def test_writer_is_deterministic_and_minimal() -> None:
    raw = _write_sample()
    assert raw == _write_sample()
    # SHB: type, length, byte-order magic, version 1.0, section length -1
    btype, total, bom, major, minor, seclen = struct.unpack_from("<IIIHHq", raw, 0)
    assert (btype, bom, major, minor, seclen) == (0x0A0D0D0A, 0x1A2B3C4D, 1, 0, -1)
    # the only SHB option is shb_userappl = "uet" (code 4), then opt_endofopt
    assert raw[24:total - 4] == struct.pack("<HH", 4, 3) + b"uet\x00" + bytes(4)
    # the IDB declares nanosecond resolution (if_tsresol = 9)
    assert struct.pack("<HH", 9, 1) + b"\x09\x00\x00\x00" in raw


def test_scapy_reads_our_pcapng() -> None:
    """An independent reader agrees on data and timestamps."""
    pkts = list(PcapNgReader(io.BytesIO(_write_sample())))
    assert bytes(pkts[0]) == b"\x01\x02\x03"
    assert int(pkts[0].time * 10**9) == pytest.approx(1_000_000_123, abs=1000)
    assert len(pkts) == 3


def test_file_path_roundtrip(tmp_path) -> None:
    path = tmp_path / "x.pcapng"
    with PcapngWriter.open(path) as w:
        i = w.add_interface("a")
        for k in range(5):
            w.write_packet(i, k * 1000, bytes([k]) * (k + 1))
    got = [(f.index, f.ts_ns, f.data) for f in read_capture(path)]
    assert got == [(k + 1, k * 1000, bytes([k]) * (k + 1)) for k in range(5)]


def _classic(endian: str, nano: bool) -> bytes:
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    hdr = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)
    recs = b""
    for k, payload in enumerate([b"abc", b"defgh"]):
        frac = 123456789 if nano else 123456
        recs += struct.pack(endian + "IIII", 100 + k, frac, len(payload), len(payload) + 1)
        recs += payload
    return hdr + recs


@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_classic_pcap(endian: str, nano: bool) -> None:
    frames = list(read_capture(io.BytesIO(_classic(endian, nano))))
    frac_ns = 123456789 if nano else 123456000
    assert [(f.index, f.ts_ns, f.data, f.orig_len, f.linktype, f.if_id) for f in frames] == [
        (1, 100 * 10**9 + frac_ns, b"abc", 4, 1, 0),
        (2, 101 * 10**9 + frac_ns, b"defgh", 6, 1, 0),
    ]


def _block(e: str, btype: int, body: bytes) -> bytes:
    body += bytes((4 - len(body) % 4) % 4)
    total = 12 + len(body)
    return struct.pack(e + "II", btype, total) + body + struct.pack(e + "I", total)


def _opt(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + value + bytes((4 - len(value) % 4) % 4)


def test_pcapng_big_endian_section_resolutions_and_spb() -> None:
    """Two sections (LE then BE), microsecond default, 2^-10 resolution, tsoffset, SPB,
    and skipped unknown blocks."""
    le = (_block("<", 0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
          + _block("<", 1, struct.pack("<HHI", 1, 0, 0))  # default resolution: microseconds
          + _block("<", 6, struct.pack("<IIIII", 0, 0, 1500, 2, 2) + b"ab")
          + _block("<", 0x0BAD, b"skip me!")
          + _block("<", 3, struct.pack("<I", 3) + b"xyz"))
    be = (_block(">", 0x0A0D0D0A, struct.pack(">IHHq", 0x1A2B3C4D, 1, 0, -1))
          + _block(">", 1, struct.pack(">HHI", 101, 0, 0) + _opt(">", 2, b"raw")
                   + _opt(">", 9, b"\x8a") + _opt(">", 14, struct.pack(">q", 2))
                   + _opt(">", 0, b""))
          + _block(">", 6, struct.pack(">IIIII", 0, 0, 1024, 1, 1) + b"z"))
    frames = list(read_capture(io.BytesIO(le + be)))
    assert [(f.index, f.if_name, f.ts_ns, f.data, f.linktype) for f in frames] == [
        (1, "", 1_500_000, b"ab", 1),
        (2, "", 0, b"xyz", 1),
        (3, "raw", 2 * 10**9 + 1_000_000_000, b"z", 101),
    ]


@pytest.mark.parametrize("mutate,match", [
    (lambda b: b[:-3], "cut short"),
    (lambda b: b"\x00\x01\x02\x03" + b[4:], "not a pcap"),
    (lambda b: b[:4] + struct.pack("<I", 13) + b[8:], "bad block length"),
    (lambda b: b[:-4] + struct.pack("<I", 999), "trailing length"),
    (lambda b: b"", "too short"),
])
def test_corrupt_pcapng(mutate, match) -> None:
    with pytest.raises(CaptureError, match=match):
        list(read_capture(io.BytesIO(mutate(_write_sample()))))


def test_corrupt_packet_block_unknown_interface() -> None:
    raw = bytearray(_write_sample())
    # the first EPB follows the SHB and the two IDBs: find it and point it at interface 9
    off = 0
    while struct.unpack_from("<I", raw, off)[0] != 6:
        off += struct.unpack_from("<I", raw, off + 4)[0]
    struct.pack_into("<I", raw, off + 8, 9)
    with pytest.raises(CaptureError, match="unknown interface 9"):
        list(read_capture(io.BytesIO(bytes(raw))))


def test_truncated_classic_pcap() -> None:
    with pytest.raises(CaptureError, match="cut short: the pcap record at byte"):
        list(read_capture(io.BytesIO(_classic("<", False)[:-2])))


def test_writer_rejects_unknown_interface() -> None:
    w = PcapngWriter(io.BytesIO())
    with pytest.raises(ValueError):
        w.write_packet(0, 0, b"x")


# --------------------------------------------------------------------------- comments


def test_packet_comments_and_interface_description_roundtrip() -> None:
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    a = w.add_interface("A:h0", description="A run1.pcapng h0")
    w.write_packet(a, 10, b"\x01\x02\x03", comments=["uet-diff: only in A | A#7",
                                                     "second, non-ASCII: µs"])
    w.write_packet(a, 20, b"\x04")
    raw = buf.getvalue()
    f1, f2 = read_capture(io.BytesIO(raw))
    assert f1.comments == ("uet-diff: only in A | A#7", "second, non-ASCII: µs")
    assert (f1.data, f1.ts_ns) == (b"\x01\x02\x03", 10)
    assert f2.comments == ()
    assert b"A run1.pcapng h0" in raw  # if_description (option 3)
    # scapy, an independent reader, reads the comment and the data around it
    pkts = list(PcapNgReader(io.BytesIO(raw)))
    assert bytes(pkts[0]) == b"\x01\x02\x03" and bytes(pkts[1]) == b"\x04"
    assert pkts[0].comments == [b"uet-diff: only in A | A#7",
                                "second, non-ASCII: µs".encode()]


def test_packets_without_comments_keep_their_bytes() -> None:
    """The reference captures depend on it: no comment, no option in the packet block."""
    raw = _write_sample()
    off = 0
    while struct.unpack_from("<I", raw, off)[0] != 6:
        off += struct.unpack_from("<I", raw, off + 4)[0]
    total = struct.unpack_from("<I", raw, off + 4)[0]
    assert total == 32 + 4  # header, 3 bytes of data padded to 4, trailing length


# --------------------------------------------------------------------------- cut short


def test_a_file_cut_short_yields_every_complete_packet_then_says_so() -> None:
    """Issue 19 item 11: the reader said "bad block length 4228 at byte 25880" for a file
    whose last block was simply cut; it now names the cut and keeps what is readable."""
    raw = _write_sample()
    whole = list(read_capture(io.BytesIO(raw)))
    # the offsets where each packet block starts and ends
    ends = []
    off = 0
    while off < len(raw):
        btype, total = struct.unpack_from("<II", raw, off)
        off += total
        if btype == 6:
            ends.append((off - total, off))
    for cut in range(ends[0][0] + 1, len(raw)):
        if any(cut == end for _, end in ends):
            continue
        got = []
        with pytest.raises(CaptureTruncated) as info:
            for f in read_capture(io.BytesIO(raw[:cut])):
                got.append(f)
        complete = sum(1 for _, end in ends if end <= cut)
        assert got == whole[:complete], cut
        exc = info.value
        assert isinstance(exc, CaptureError)
        assert "cut short" in str(exc) and f"file size {cut}" in str(exc)
        assert exc.packets == complete and exc.size == cut
        assert f"the {complete} packet(s) before it are complete" in str(exc)


def test_corruption_is_not_taken_for_a_cut() -> None:
    raw = bytearray(_write_sample())
    struct.pack_into("<I", raw, 4, 0x7FFFFFF0)  # an absurd section header length
    with pytest.raises(CaptureError, match="bad block length") as info:
        list(read_capture(io.BytesIO(bytes(raw))))
    assert not isinstance(info.value, CaptureTruncated)


def test_classic_pcap_cut_short() -> None:
    raw = _classic("<", False)
    frames = list(read_capture(io.BytesIO(raw)))
    got = []
    with pytest.raises(CaptureTruncated, match="cut short: the pcap record at byte"):
        got.extend(read_capture(io.BytesIO(raw[:-2])))
    assert got == frames[:-1]
