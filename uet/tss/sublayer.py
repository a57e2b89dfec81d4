"""``TssSublayer``: the Transport Security Sublayer of one end point, between the wire and
the PDS (sans-IO: it never reads a clock; ``now`` is passed in).

Outgoing: the PDS marks every frame of a secured PDC (or a RUDI / UUD request of a secured
job) with ``frame.tss = TssHeader(sdi=...)``; :meth:`seal_frame` (a whole Ethernet frame)
or :meth:`seal_uet` (the UDP payload, live mode) stamps the header (AN, epoch, a fresh
TSC), encrypts everything after it and appends the 16-byte tag. Incoming: :meth:`open_frame`
/ :meth:`open_uet` authenticate and decrypt a frame whose first PDS-position type is 1 and
return the decoded frame, ``frame.tss`` holding its header, so the PDS knows the domain;
anything refused returns None, is counted by reason (``rx_refused.<reason>``) and logged
(``tss_refused``). Nothing of a frame that fails reaches the PDS.

Job isolation: :meth:`job_allowed` says whether a request naming ``job`` may be served when
it came in domain ``sdi`` (secured: only the domain's job) or in cleartext (never a job
bound to a domain; otherwise the non-secure fallback table ``job_sources``, which cannot
tell a spoofed source address from a real one: docs/tss.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import uet.native as _native
from uet.tss.config import TssConfig
from uet.tss.domain import SecureDomain, TssRefused
from uet.tss.header import header_len, ip_bytes, pack_header, unpack_header
from uet.wire.codec import (
    Envelope,
    decode_enveloped,
    decode_uet,
    encode_frame,
    encode_uet,
    split_frame,
)
from uet.wire.constants import UET_DEFAULT_IP_PROTO
from uet.wire.errors import DecodeError
from uet.wire.records import Frame

_TAG = bytes(16)


def is_secured(uet: bytes | bytearray | memoryview) -> bool:
    """Do these UET bytes (after UDP / the entropy header) start with a TSS header?"""
    return len(uet) >= 1 and uet[0] >> 3 == 1


class TssSublayer:
    """The TSS of one end point (module docstring)."""

    def __init__(self, cfg: TssConfig, local_ip: str, *,
                 log: Callable[..., None] | None = None,
                 trimmed_dscps: Iterable[int] = ()) -> None:
        self.cfg = cfg
        self.local_ip = local_ip
        self.counters: Counter[str] = Counter()
        self.log_hook = log
        self.domains: dict[int, SecureDomain] = {
            d.sdi: SecureDomain(d, local_ip, self.counters, log) for d in cfg.domains}
        self.by_job: dict[int, SecureDomain] = {d.cfg.job: d for d in self.domains.values()}
        self.job_sources = {ip: frozenset(jobs) for ip, jobs in cfg.job_sources.items()}
        self.trimmed_dscps = frozenset(d for d in trimmed_dscps if d >= 0)

    # ------------------------------------------------------------------ policy
    def domain_for_job(self, job: int) -> int | None:
        """The SDI that carries ``job`` (None: the job is not secured)."""
        dom = self.by_job.get(job)
        return None if dom is None else dom.sdi

    def domain(self, sdi: int) -> SecureDomain | None:
        return self.domains.get(sdi)

    def job_allowed(self, src_ip: str, job: int, sdi: int | None) -> bool:
        """May a request from ``src_ip`` naming ``job`` be served, having arrived in
        domain ``sdi`` (None: in cleartext)?"""
        if sdi is not None:
            dom = self.domains.get(sdi)
            return dom is not None and dom.cfg.job == job
        if job in self.by_job:
            return False  # a secured job's requests come through its domain only
        if self.job_sources:
            return job in self.job_sources.get(src_ip, ())
        return True

    def accept_cleartext(self, now: int, frame: Frame) -> bool:
        """Is a cleartext frame acceptable here (counted and logged when not)?"""
        if self.domains and not self.cfg.allow_cleartext:
            self._refuse(now, "cleartext", None, frame.src_ip, "cleartext UET refused")
            return False
        return True

    # ------------------------------------------------------------------ send
    def seal_frame(self, now: int, frame: Frame) -> bytes | None:
        """The whole Ethernet frame of ``frame`` (marked ``frame.tss``), encrypted; None if
        the domain refuses to send (counted)."""
        dom = self._tx_domain(now, frame)
        if dom is None:
            return None
        try:
            hdr = dom.stamp(now)
        except TssRefused as exc:
            self._refuse(now, exc.reason, dom.sdi, frame.dst_ip, exc.detail, tx=True)
            return None
        frame.tss = hdr
        frame.trailer = _TAG
        try:
            buf = bytearray(encode_frame(frame))
        finally:
            frame.trailer = b""
        v6 = ":" in frame.src_ip
        udp = frame.encap == "udp"
        l4 = 14 + (40 if v6 else 20)
        off = l4 + (8 if udp else 4)
        hl = header_len(hdr)
        raw = bytes(buf[off:off + hl])
        try:
            body = dom.encrypt(hdr, raw, memoryview(buf)[off + hl:len(buf) - 16],
                               frame.src_ip, frame.dst_ip, frame.ev, frame.encap)
        except TssRefused as exc:
            self._refuse(now, exc.reason, dom.sdi, frame.dst_ip, exc.detail, tx=True)
            return None
        buf[off + hl:] = body
        if udp and (v6 or frame.udp_checksum):
            buf[l4 + 6:l4 + 8] = b"\0\0"
            fn = _native.udp_checksum_ipv6 if v6 else _native.udp_checksum_ipv4
            csum = fn(ip_bytes(frame.src_ip), ip_bytes(frame.dst_ip), bytes(buf[l4:]))
            buf[l4 + 6:l4 + 8] = csum.to_bytes(2, "big")
        self.counters["tx_ok"] += 1
        return bytes(buf)

    def seal_uet(self, now: int, frame: Frame) -> bytes | None:
        """The UDP payload of ``frame`` (marked ``frame.tss``), encrypted; None if refused."""
        dom = self._tx_domain(now, frame)
        if dom is None:
            return None
        try:
            hdr = dom.stamp(now)
            frame.tss = hdr
            plain = encode_uet(frame)
            raw = pack_header(hdr)
            hl = len(raw)
            out = raw + dom.encrypt(hdr, raw, memoryview(plain)[hl:], frame.src_ip,
                                    frame.dst_ip, frame.ev, frame.encap)
        except TssRefused as exc:
            self._refuse(now, exc.reason, dom.sdi, frame.dst_ip, exc.detail, tx=True)
            return None
        self.counters["tx_ok"] += 1
        return out

    def _tx_domain(self, now: int, frame: Frame) -> SecureDomain | None:
        marker = frame.tss
        sdi = marker.sdi if marker is not None else -1
        dom = self.domains.get(sdi)
        if dom is None:
            self._refuse(now, "unknown_sdi", sdi, frame.dst_ip, "no such secure domain here",
                         tx=True)
        return dom

    # ------------------------------------------------------------------ receive
    def open_frame(self, now: int, data: bytes | bytearray | memoryview,
                   ip_proto: int = UET_DEFAULT_IP_PROTO) -> Frame | None:
        """A whole received Ethernet frame whose UET bytes start with a TSS header (over
        UDP, or native IP protocol ``ip_proto``): authenticated, decrypted and decoded, or
        None (refused: counted and logged). Raises :class:`~uet.wire.errors.DecodeError`
        when the envelope itself is bad."""
        env, off, end = split_frame(data, udp_port=None, ip_proto=ip_proto)
        entropy = bytes(data[off - 4:off]) if env.encap == "ip" else None
        return self._open(now, memoryview(data)[off:end], env.src_ip, env.dst_ip, env.ev,
                          env.dscp, env.encap, entropy, env)

    def open_uet(self, now: int, uet: bytes | bytearray | memoryview, *,
                 entropy: bytes | None = None, **fields: Any) -> Frame | None:
        """The UET bytes of a received frame (``fields``: the :class:`Frame` fields the
        envelope gave: ``src_ip``, ``dst_ip``, ``ev``, ``dscp``, ``encap`` ...)."""
        return self._open(now, uet, fields.get("src_ip", ""),
                          fields.get("dst_ip", self.local_ip), fields.get("ev", 0),
                          fields.get("dscp", 0), fields.get("encap", "udp"), entropy, fields)

    def _open(self, now: int, uet: bytes | bytearray | memoryview, src: str, dst: str,
              ev: int, dscp: int, encap: str, entropy: bytes | None,
              env: Any) -> Frame | None:
        hdr = unpack_header(uet)
        if hdr is None:
            self._refuse(now, "malformed", None, src, "TSS header cut short")
            return None
        dom = self.domains.get(hdr.sdi)
        if dom is None:
            self._refuse(now, "unknown_sdi", hdr.sdi, src, "no such secure domain here")
            return None
        if dscp in self.trimmed_dscps:
            # a switch cut the frame: its tag is gone, so it cannot authenticate (and must
            # not count as a forgery towards the failure threshold)
            self._refuse(now, "trimmed", hdr.sdi, src, "trimmed frame cannot authenticate")
            return None
        try:
            plain = dom.open(now, hdr, uet, src, dst, ev, encap, entropy)
        except TssRefused as exc:
            self._refuse(now, exc.reason, hdr.sdi, src, exc.detail)
            return None
        try:
            if isinstance(env, Envelope):
                frame = decode_enveloped(plain, env)
            else:
                frame = decode_uet(plain, **env)
            frame.tss = hdr
        except DecodeError as exc:
            self._refuse(now, "undecodable", hdr.sdi, src, str(exc))
            return None
        self.counters["rx_ok"] += 1
        return frame

    # ------------------------------------------------------------------ reporting
    def _refuse(self, now: int, reason: str, sdi: int | None, peer: str, detail: str,
                tx: bool = False) -> None:
        side = "tx_refused." if tx else "rx_refused."
        self.counters[side + reason] += 1
        if self.log_hook is not None:
            self.log_hook(now, "tss_refused", direction="tx" if tx else "rx", reason=reason,
                          sdi=sdi, peer=peer, detail=detail)

    @property
    def stats(self) -> dict[str, int]:
        out = dict(self.counters)
        for dom in self.domains.values():
            out[f"sdi.{dom.sdi}.auth_failures"] = dom.auth_failures
            out[f"sdi.{dom.sdi}.disabled"] = int(dom.disabled)
        return out


def frame_is_secured(data: bytes | bytearray | memoryview, *, udp_port: int | None = None,
                     ip_proto: int = 253) -> bool:
    """Does a whole Ethernet frame carry a TSS header (IPv4 or IPv6, UDP to ``udp_port``
    (None: any port) or the entropy header of native IP protocol ``ip_proto``)? One look
    at a few bytes, nothing decoded or checked."""
    n = len(data)
    if n < 34:
        return False
    etype = data[12] << 8 | data[13]
    if etype == 0x0800:
        l4 = 14 + (data[14] & 0xF) * 4
        proto = data[23]
    elif etype == 0x86DD:
        l4 = 54
        proto = data[20]
    else:
        return False
    if proto == 17:
        if udp_port is not None and (n < l4 + 4 or data[l4 + 2] << 8 | data[l4 + 3]
                                     != udp_port):
            return False
        off = l4 + 8
    elif proto == ip_proto:
        off = l4 + 4
    else:
        return False
    return off < n and data[off] >> 3 == 1


__all__ = ["TssSublayer", "frame_is_secured", "is_secured"]
