"""Reading secured frames of a capture: ``uet decode --keys FILE``.

A capture reader holds keys but no replay state and no clock: :class:`CaptureKeys` tries
every way the frame's header allows (the key generations whose AN matches, and in server
mode both the sender's and the receiver's identity as the client's) and keeps the one
whose tag verifies. Nothing is refused for its epoch or for being a replay: a capture
shows what was on the wire. The Wireshark dissector (uet/wireshark/uet.lua) does the same
with the same key file.
"""

from __future__ import annotations

from collections.abc import Iterable

from cryptography.exceptions import InvalidTag

from uet.tss.config import DomainConfig
from uet.tss.domain import SecureDomain, TssRefused
from uet.tss.header import aad, header_len, ip_bytes, iv, unpack_header
from uet.wire.codec import decode_uet, split_frame
from uet.wire.errors import DecodeError
from uet.wire.records import Frame

#: key generations tried per frame when the key file does not say (AN 0: 0, 2, ...; AN 1:
#: 1, 3, ...)
DEFAULT_GENERATIONS = 2


class CaptureKeys:
    """Keys of the secure domains of a capture (one :class:`SecureDomain` each, used for
    its key schedule only)."""

    def __init__(self, domains: Iterable[DomainConfig],
                 generations: int = DEFAULT_GENERATIONS) -> None:
        self.domains = {d.sdi: SecureDomain(_reader_view(d), "0.0.0.0") for d in domains}
        self.generations = max(1, generations)
        self.client_ssi: dict[str, int] = {}  # server mode: learned from the clients' frames

    def __contains__(self, sdi: int) -> bool:
        return sdi in self.domains

    def open_frame(self, data: bytes | bytearray | memoryview) -> Frame | None:
        """The decoded frame (its ``trailer`` the 16-byte ICV), or None: no key for its
        SDI, or no key verifies its tag. Raises :class:`DecodeError` for a bad envelope."""
        env, off, end = split_frame(data, udp_port=None)
        uet = memoryview(data)[off:end]
        hdr = unpack_header(uet)
        if hdr is None or hdr.sdi not in self.domains:
            return None
        dom = self.domains[hdr.sdi]
        hl = header_len(hdr)
        if len(uet) < hl + 16:
            return None
        src, dst, v6 = env.src_ip, env.dst_ip, ":" in env.src_ip
        raw = bytes(uet[:hl])
        body = bytes(uet[hl:])
        entropy = bytes(data[off - 4:off]) if env.encap == "ip" else None
        ad = aad(env.encap, src, dst, env.ev, raw, entropy)
        ident_iv = hdr.ssi.to_bytes(4, "big") if hdr.sp else (
            hdr.sdi.to_bytes(4, "big") if v6 else ip_bytes(src))
        mode = dom.cfg.mode
        if mode == "cluster":
            idents = [ip_bytes(src) if v6 or not hdr.sp else hdr.ssi.to_bytes(4, "big")]
        elif mode == "server":
            to = self.client_ssi.get(dst)
            idents = [ip_bytes(src) if v6 or not hdr.sp else hdr.ssi.to_bytes(4, "big"),
                      to.to_bytes(4, "big") if to is not None and not v6 else ip_bytes(dst)]
        else:
            idents = [b""]
        for gen in range(hdr.an, max(self.generations, hdr.an + 1), 2):
            for i, ident in enumerate(idents):
                try:
                    key, mask = dom.packet_key(gen, hdr.epoch, hdr.tsc, ident)
                except TssRefused:
                    continue
                try:
                    plain = key.decrypt(iv(ident_iv, hdr.epoch, hdr.tsc, mask), body, ad)
                except InvalidTag:
                    continue
                if mode == "server" and i == 0 and hdr.sp and not v6:
                    self.client_ssi[src] = hdr.ssi
                try:
                    frame = decode_uet(raw + plain, **env._asdict())
                except DecodeError:
                    return None
                frame.trailer = body[-16:]
                return frame
        return None


def _reader_view(d: DomainConfig) -> DomainConfig:
    """A server-mode domain read as the server (it derives every client's key)."""
    if d.mode == "server" and d.role == "client" and len(d.key) == 32:
        from dataclasses import replace

        return replace(d, role="server")
    return d


__all__ = ["CaptureKeys", "DEFAULT_GENERATIONS"]
