"""pcapng writer and pcap/pcapng reader, with no dependency beyond the standard library.

The writer produces deterministic bytes: one little-endian section whose header carries only
``shb_userappl = "uet"`` (no host, OS or time options), interfaces with ``if_name`` and a
nanosecond ``if_tsresol``, and Enhanced Packet Blocks. Two runs of the same experiment thus
give byte-identical captures that can be diffed and checked into ``captures/``.

The reader accepts classic pcap (microsecond and nanosecond magic, either byte order) and
pcapng (any number of sections of either byte order; Enhanced, Simple and obsolete Packet
Blocks; ``if_tsresol`` and ``if_tsoffset`` honoured; packet comments (``opt_comment``) kept;
other blocks skipped). A corrupt file raises :class:`CaptureError` naming the byte offset. A
file cut short (a copy interrupted, a capture killed mid-write) raises
:class:`CaptureTruncated`, a :class:`CaptureError`, only after every complete packet before
the cut has been yielded, so callers can use the readable part and say the rest is missing.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from uet.errors import RemoteError

__all__ = ["PcapngWriter", "CapturedFrame", "CaptureError", "CaptureTruncated",
           "read_capture", "LINKTYPE_ETHERNET", "LINKTYPE_RAW"]

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101

_SHB = 0x0A0D0D0A
_IDB = 0x00000001
_OPB = 0x00000002  # obsolete Packet Block
_SPB = 0x00000003
_EPB = 0x00000006
_BOM = 0x1A2B3C4D

_OPT_END = 0
_OPT_COMMENT = 1
_OPT_SHB_USERAPPL = 4
_OPT_IF_NAME = 2
_OPT_IF_DESCRIPTION = 3
_OPT_IF_TSRESOL = 9
_OPT_IF_TSOFFSET = 14

#: Longer blocks are taken for corruption, not for a file cut short (Wireshark's own limit is
#: far lower: a 256 KiB packet plus options).
_MAX_BLOCK = 1 << 24
_BLOCK_NAMES = {_SHB: "section header", _IDB: "interface description",
                _OPB: "packet block", _SPB: "simple packet block", _EPB: "packet block"}

_PCAP_US = 0xA1B2C3D4
_PCAP_NS = 0xA1B23C4D

_EPB_HEAD = struct.Struct("<IIIIIII")
_U32 = struct.Struct("<I")


class CaptureError(RemoteError):
    """The capture file is corrupt, truncated or not a pcap/pcapng file."""


class CaptureTruncated(CaptureError):
    """The file ends in the middle of a block or record: it was cut short.

    Raised after the complete packets before the cut were yielded; ``offset`` is where the
    incomplete block starts, ``size`` the file size, ``packets`` the packets read.
    """

    def __init__(self, message: str, *, offset: int, size: int, packets: int) -> None:
        super().__init__(message)
        self.offset = offset
        self.size = size
        self.packets = packets


def _cut_short(off: int, need: int, n: int, packets: int, what: str) -> CaptureTruncated:
    return CaptureTruncated(
        f"the file is cut short: {what} at byte {off} needs {need} bytes but only "
        f"{n - off} remain (file size {n}); the {packets} packet(s) before it are complete",
        offset=off, size=n, packets=packets)


@dataclass(slots=True, frozen=True)
class CapturedFrame:
    """One packet read from a capture. ``index`` counts from 1 across the whole file;
    ``ts_ns`` is nanoseconds since the epoch (or since the start of a virtual run)."""

    index: int
    if_id: int
    if_name: str
    ts_ns: int
    data: bytes
    orig_len: int
    linktype: int
    comments: tuple[str, ...] = ()


def _pad4(n: int) -> int:
    return (4 - n % 4) % 4


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + bytes(_pad4(len(value)))


class PcapngWriter:
    """Write a pcapng capture to a binary file object.

    ``PcapngWriter(f)`` writes the section header at once; then
    ``add_interface(name)`` returns the interface id for ``write_packet``.
    ``PcapngWriter.open(path)`` opens (and on :meth:`close` closes) the file itself.
    """

    def __init__(self, fileobj: BinaryIO, *, _owns: bool = False) -> None:
        self._f = fileobj
        self._owns = _owns
        self._snaplens: list[int] = []
        self._names: list[str] = []
        opts = _option(_OPT_SHB_USERAPPL, b"uet") + _option(_OPT_END, b"")
        body = struct.pack("<IHHq", _BOM, 1, 0, -1) + opts
        total = 12 + len(body)
        self._f.write(struct.pack("<II", _SHB, total) + body + _U32.pack(total))

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> PcapngWriter:
        """A writer on a new file at ``path``, closed by :meth:`close`."""
        return cls(open(path, "wb"), _owns=True)  # noqa: SIM115 - closed by close()

    @property
    def interfaces(self) -> list[str]:
        """Names of the interfaces added so far, by id."""
        return list(self._names)

    def add_interface(self, name: str, linktype: int = LINKTYPE_ETHERNET,
                      snaplen: int = 0, description: str | None = None) -> int:
        """Add an interface (Ethernet by default, nanosecond timestamps); return its id.

        ``snaplen`` 0 means no limit; otherwise packets are cut to ``snaplen`` bytes.
        ``description`` becomes ``if_description`` (Wireshark shows it in the capture file
        properties).
        """
        desc = (b"" if description is None
                else _option(_OPT_IF_DESCRIPTION, description.encode()))
        opts = (_option(_OPT_IF_NAME, name.encode()) + desc
                + _option(_OPT_IF_TSRESOL, b"\x09") + _option(_OPT_END, b""))
        body = struct.pack("<HHI", linktype, 0, snaplen) + opts
        total = 12 + len(body)
        self._f.write(struct.pack("<II", _IDB, total) + body + _U32.pack(total))
        self._snaplens.append(snaplen)
        self._names.append(name)
        return len(self._names) - 1

    def write_packet(self, if_id: int, ts_ns: int, data: bytes,
                     orig_len: int | None = None, comments: Iterable[str] = ()) -> None:
        """Write one packet seen on interface ``if_id`` at ``ts_ns`` nanoseconds.

        ``orig_len`` is the length on the wire (default ``len(data)``); pass it when
        ``data`` is already truncated. ``comments`` become packet comments
        (``opt_comment``, Wireshark's ``frame.comment``); without any the block carries no
        options at all.
        """
        if not 0 <= if_id < len(self._snaplens):
            raise ValueError(f"unknown interface id {if_id}")
        if ts_ns < 0:
            raise ValueError("timestamps must be non-negative")
        if orig_len is None:
            orig_len = len(data)
        snap = self._snaplens[if_id]
        if snap and len(data) > snap:
            data = data[:snap]
        cap = len(data)
        pad = _pad4(cap)
        opts = b"".join(_option(_OPT_COMMENT, c.encode()) for c in comments)
        if opts:
            opts += _option(_OPT_END, b"")
        total = 32 + cap + pad + len(opts)
        self._f.write(b"".join((
            _EPB_HEAD.pack(_EPB, total, if_id, ts_ns >> 32 & 0xFFFFFFFF, ts_ns & 0xFFFFFFFF,
                           cap, orig_len),
            data, bytes(pad), opts, _U32.pack(total))))

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        """Flush; close the file if this writer opened it."""
        self._f.flush()
        if self._owns:
            self._f.close()

    def __enter__(self) -> PcapngWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- reader


def read_capture(path: str | os.PathLike[str] | BinaryIO) -> Iterator[CapturedFrame]:
    """Iterate over the packets of a pcap or pcapng file (path or binary file object)."""
    if hasattr(path, "read"):
        data = path.read()  # type: ignore[union-attr]
    else:
        with open(path, "rb") as f:  # type: ignore[arg-type]
            data = f.read()
    return _iter_capture(bytes(data))


def _iter_capture(data: bytes) -> Iterator[CapturedFrame]:
    if len(data) < 4:
        raise CaptureError("file too short to be a capture")
    magic_le = struct.unpack_from("<I", data, 0)[0]
    if magic_le == _SHB:
        yield from _iter_pcapng(data)
        return
    for endian in ("<", ">"):
        magic = struct.unpack_from(endian + "I", data, 0)[0]
        if magic in (_PCAP_US, _PCAP_NS):
            yield from _iter_pcap(data, endian, magic == _PCAP_NS)
            return
    raise CaptureError(f"not a pcap or pcapng file (magic 0x{magic_le:08x})")


def _iter_pcap(data: bytes, e: str, nano: bool) -> Iterator[CapturedFrame]:
    if len(data) < 24:
        raise CaptureError("truncated pcap file header")
    linktype = struct.unpack_from(e + "I", data, 20)[0] & 0x0FFFFFFF
    rec = struct.Struct(e + "IIII")
    mult = 1 if nano else 1000
    off, index = 24, 0
    n = len(data)
    while off < n:
        if off + 16 > n:
            raise _cut_short(off, 16, n, index, "the pcap record header")
        sec, frac, incl, orig = rec.unpack_from(data, off)
        off += 16
        if incl > _MAX_BLOCK:
            raise CaptureError(f"bad pcap record length {incl} at byte {off - 16}")
        if off + incl > n:
            raise _cut_short(off - 16, 16 + incl, n, index, "the pcap record")
        if frac >= (1_000_000_000 if nano else 1_000_000):
            raise CaptureError(f"bad sub-second timestamp {frac} at byte {off - 16}")
        index += 1
        yield CapturedFrame(index, 0, "", sec * 1_000_000_000 + frac * mult,
                            data[off:off + incl], orig, linktype)
        off += incl


@dataclass(slots=True)
class _Iface:
    linktype: int
    name: str
    tsresol: int  # if_tsresol byte: 10**-v, or 2**-(v & 0x7f) when the top bit is set
    tsoffset: int

    def to_ns(self, ts: int) -> int:
        r = self.tsresol
        if r & 0x80:
            ns = (ts * 1_000_000_000) >> (r & 0x7F)
        elif r <= 9:
            ns = ts * 10 ** (9 - r)
        else:
            ns = ts // 10 ** (r - 9)
        return ns + self.tsoffset * 1_000_000_000


def _parse_options(data: bytes, off: int, end: int, e: str, where: int,
                   repeated: dict[int, list[bytes]] | None = None) -> dict[int, bytes]:
    """The first value of each option code; every value of the codes in ``repeated``
    (such as comments) is appended there too."""
    opts: dict[int, bytes] = {}
    while off + 4 <= end:
        code, length = struct.unpack_from(e + "HH", data, off)
        off += 4
        if code == _OPT_END:
            break
        if off + length > end:
            raise CaptureError(f"option {code} overruns its block at byte {where}")
        value = data[off:off + length]
        opts.setdefault(code, value)
        if repeated is not None and code in repeated:
            repeated[code].append(value)
        off += length + _pad4(length)
    return opts


def _comments(data: bytes, off: int, end: int, e: str, where: int) -> tuple[str, ...]:
    if off + 4 > end:
        return ()
    found: dict[int, list[bytes]] = {_OPT_COMMENT: []}
    _parse_options(data, off, end, e, where, found)
    return tuple(c.decode("utf-8", "replace").rstrip("\x00") for c in found[_OPT_COMMENT])


def _iter_pcapng(data: bytes) -> Iterator[CapturedFrame]:
    n = len(data)
    off = 0
    e = "<"
    ifaces: list[_Iface] = []
    index = 0
    while off < n:
        if off + 12 > n:
            raise _cut_short(off, 12, n, index, "a block header")
        btype = struct.unpack_from(e + "I", data, off)[0]
        if btype == _SHB:
            bom = data[off + 8:off + 12]
            if bom == b"\x4d\x3c\x2b\x1a":
                e = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                e = ">"
            else:
                raise CaptureError(f"bad byte-order magic in section header at byte {off}")
            ifaces = []
        total = struct.unpack_from(e + "I", data, off + 4)[0]
        if total < 12 or total % 4 or total > _MAX_BLOCK:
            raise CaptureError(f"bad block length {total} at byte {off}")
        if off + total > n:
            raise _cut_short(off, total, n, index, f"the {_BLOCK_NAMES.get(btype, 'block')}")
        if struct.unpack_from(e + "I", data, off + total - 4)[0] != total:
            raise CaptureError(f"block at byte {off}: trailing length does not match")
        body, end = off + 8, off + total - 4
        if btype == _SHB:
            if total < 28:
                raise CaptureError(f"section header too short at byte {off}")
            major = struct.unpack_from(e + "H", data, body + 4)[0]
            if major != 1:
                raise CaptureError(f"unsupported pcapng major version {major} at byte {off}")
        elif btype == _IDB:
            if total < 20:
                raise CaptureError(f"interface description too short at byte {off}")
            linktype, _r, _snap = struct.unpack_from(e + "HHI", data, body)
            opts = _parse_options(data, body + 8, end, e, off)
            name = opts.get(_OPT_IF_NAME, b"").decode("utf-8", "replace").rstrip("\x00")
            tsresol = opts.get(_OPT_IF_TSRESOL, b"\x06")[:1] or b"\x06"
            tsoff = opts.get(_OPT_IF_TSOFFSET)
            tsoffset = struct.unpack(e + "q", tsoff)[0] if tsoff and len(tsoff) == 8 else 0
            ifaces.append(_Iface(linktype, name, tsresol[0], tsoffset))
        elif btype in (_EPB, _OPB):
            if total < 32:
                raise CaptureError(f"packet block too short at byte {off}")
            if btype == _EPB:
                if_id, hi, lo, cap, orig = struct.unpack_from(e + "IIIII", data, body)
            else:
                if_id, _drops, hi, lo, cap, orig = struct.unpack_from(e + "HHIIII", data, body)
            if if_id >= len(ifaces):
                raise CaptureError(f"packet block at byte {off} names unknown interface {if_id}")
            if body + 20 + cap > end:
                raise CaptureError(f"packet block at byte {off}: captured length {cap} "
                                   "overruns the block")
            iface = ifaces[if_id]
            index += 1
            comments = _comments(data, body + 20 + cap + _pad4(cap), end, e, off)
            yield CapturedFrame(index, if_id, iface.name, iface.to_ns(hi << 32 | lo),
                                data[body + 20:body + 20 + cap], orig, iface.linktype,
                                comments)
        elif btype == _SPB:
            if total < 16:
                raise CaptureError(f"simple packet block too short at byte {off}")
            if not ifaces:
                raise CaptureError(f"simple packet block at byte {off} before any interface")
            orig = struct.unpack_from(e + "I", data, body)[0]
            cap = min(orig, end - body - 4)
            iface = ifaces[0]
            index += 1
            yield CapturedFrame(index, 0, iface.name, 0, data[body + 4:body + 4 + cap], orig,
                                iface.linktype)
        # every other block type (name resolution, statistics, custom, ...) is skipped
        off += total
