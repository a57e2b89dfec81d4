"""The TSS header (ref. 7.1) as bytes, and the AAD and IV built around it (ref. 7.2).

Header: type 1 (5 bits), SP (SSI present), reserved, AN (1 bit), SDI (24 bits); the SSI
(32 bits) when SP is set; epoch (16 bits) and TSC (48 bits). 12 bytes, 16 with the SSI.
The same layout as ``uet.wire.codec`` writes (tests hold the two together).

AAD, for both encapsulations: IP source and destination addresses (4 + 4 or 16 + 16
bytes), four bytes of entropy, then the TSS header. In native-IP mode the four bytes are
the entropy header as it is on the wire (EV, 2 reserved bytes), as the UEC reference
provider builds it; over UDP, where no entropy header exists and the EV rides in the UDP
source port, they are the same four bytes rebuilt from that port (EV, 0x0000). So a frame
authenticates identically in either encapsulation, the EV (the path a switch chose from it)
is covered, and a packet moved from one encapsulation to the other by a gateway that keeps
the EV still verifies (docs/tss.md).

IV (12 bytes): a 4-byte sender identity (its SSI when SP is set, else its IPv4 source
address, or the SDI for IPv6) followed by epoch:TSC (8 bytes), XOR the 12-byte IV mask of a
derived key (every mode but DIRECT).
"""

from __future__ import annotations

import socket
import struct
from functools import lru_cache

from uet.wire.records import TssHeader

HDR_LEN = 12
HDR_SSI_LEN = 16
_HDR = struct.Struct("!IHHI")
_HDR_SSI = struct.Struct("!IIHHI")
_EV = struct.Struct("!HH")
_IV_TAIL = struct.Struct("!HHI")


def pack_header(h: TssHeader) -> bytes:
    """The header's bytes (what ``uet.wire.codec`` encodes for the same record)."""
    tsc = h.tsc
    base = 0x08000000 | (h.an & 1) << 24 | (h.sdi & 0xFFFFFF)
    if h.sp:
        return _HDR_SSI.pack(base | 0x04000000, h.ssi, h.epoch, tsc >> 32 & 0xFFFF,
                             tsc & 0xFFFFFFFF)
    return _HDR.pack(base, h.epoch, tsc >> 32 & 0xFFFF, tsc & 0xFFFFFFFF)


def unpack_header(data: bytes | bytearray | memoryview) -> TssHeader | None:
    """The TSS header at the start of ``data`` (None: not a TSS header or cut short)."""
    if len(data) < HDR_LEN or data[0] >> 3 != 1:
        return None
    w0 = int.from_bytes(data[0:4], "big")
    if w0 & 0x04000000:
        if len(data) < HDR_SSI_LEN:
            return None
        _w, ssi, epoch, hi, lo = _HDR_SSI.unpack_from(data, 0)
        return TssHeader(True, w0 >> 24 & 1, w0 & 0xFFFFFF, ssi, epoch, hi << 32 | lo)
    _w, epoch, hi, lo = _HDR.unpack_from(data, 0)
    return TssHeader(False, w0 >> 24 & 1, w0 & 0xFFFFFF, 0, epoch, hi << 32 | lo)


def header_len(h: TssHeader) -> int:
    return HDR_SSI_LEN if h.sp else HDR_LEN


@lru_cache(maxsize=65536)
def ip_bytes(ip: str) -> bytes:
    """The packed address (4 or 16 bytes)."""
    return socket.inet_pton(socket.AF_INET6 if ":" in ip else socket.AF_INET, ip)


def aad(encap: str, src_ip: str, dst_ip: str, ev: int, hdr: bytes,
        entropy: bytes | None = None) -> bytes:
    """Additional authenticated data of a frame (module docstring). ``encap`` is 'udp' or
    'ip'; ``entropy`` the native-IP entropy header as received (default: EV + 0x0000)."""
    if encap == "ip" and entropy is not None:
        four = bytes(entropy[:4])
    elif encap in ("udp", "ip"):
        four = _EV.pack(ev & 0xFFFF, 0)
    else:
        raise ValueError(f"encap must be 'udp' or 'ip', got {encap!r}")
    return b"".join((ip_bytes(src_ip), ip_bytes(dst_ip), four, hdr))


def iv(identity4: bytes, epoch: int, tsc: int, mask: bytes | None) -> bytes:
    """The 12-byte GCM IV: identity (4) || epoch:TSC (8), XOR ``mask`` when given."""
    raw = identity4 + _IV_TAIL.pack(epoch & 0xFFFF, tsc >> 32 & 0xFFFF, tsc & 0xFFFFFFFF)
    if mask is None:
        return raw
    return (int.from_bytes(raw, "big") ^ int.from_bytes(mask, "big")).to_bytes(12, "big")


__all__ = ["HDR_LEN", "HDR_SSI_LEN", "aad", "header_len", "ip_bytes", "iv", "pack_header",
           "unpack_header"]
