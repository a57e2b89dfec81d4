"""The built-in end point under test, datagram in and datagram out (sans-IO).

:class:`FepDriver` wraps one :class:`~uet.endpoint.fep.FabricEndpoint` configured by a
:class:`~uet.conformance.setup.DutSetup` and speaks UDP payloads: ``datagram_in`` decodes
the bytes a UDP socket received (``decode_uet``, the EV from the source port, DSCP/ECN from
the IP TOS byte) and ``datagrams_out`` encodes what the end point sends (``encode_uet``).
``uet serve`` puts it behind real sockets (:mod:`uet.runtime.responder`); the in-process
target drives it with a virtual clock. Both run exactly this code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

from uet.endpoint.config import cms_config_from_profile, pds_config_from_profile
from uet.endpoint.fep import FabricEndpoint
from uet.profiles import Profile, load_profile
from uet.ses.memory import Perm
from uet.ses.messages import RecvCompleted
from uet.wire.codec import decode_uet, encode_uet
from uet.wire.constants import UET_UDP_PORT
from uet.wire.errors import DecodeError, EncodeError

from .setup import DutSetup, pattern, variant_profile

_PERM = {"read": Perm.READ, "write": Perm.WRITE, "atomic": Perm.ATOMIC}


class Datagram(NamedTuple):
    """One UDP datagram of UET: addresses, EV (the UDP source port), IP TOS, payload."""

    t_ps: int
    src_ip: str
    dst_ip: str
    ev: int
    tos: int
    payload: bytes


EndpointFactory = Callable[..., FabricEndpoint]


def build_profile(setup: DutSetup, profile: Profile | str | None = None) -> Profile:
    """The profile object of a setup (or an explicit one: in-process variants), with the
    setup's ``profile_extra`` keys changed."""
    if isinstance(profile, Profile):
        return profile
    name = profile or setup.profile
    if setup.profile_extra:
        return variant_profile(name, setup.profile_extra)
    return load_profile(name)


class FepDriver:
    """A FabricEndpoint with the well-known setup, exchanging UDP payloads."""

    def __init__(self, setup: DutSetup, ip: str, *, profile: Profile | str | None = None,
                 endpoint_factory: EndpointFactory | None = None,
                 log: Callable[..., None] | None = None, tss: Any = None) -> None:
        self.setup = setup
        self.ip = ip
        self.profile = build_profile(setup, profile)
        pds = pds_config_from_profile(self.profile, setup.pds_overrides())
        cms = cms_config_from_profile(self.profile, {"algorithm": setup.cc})
        make = endpoint_factory or FabricEndpoint
        extra = {"tss": tss} if tss is not None else {}
        self.ep: FabricEndpoint = make(ip=ip, profile=self.profile, pds=pds, cms=cms,
                                       seed=setup.seed,
                                       job_id=setup.job_id, pid_on_fep=setup.pid_on_fep,
                                       log=log, **extra)
        self.counters: Counter[str] = Counter()
        self.buffers: dict[str, bytearray] = {}
        self._apply()

    # ------------------------------------------------------------------ setup
    def _apply(self) -> None:
        s = self.setup
        ep = self.ep
        res = ep.ses.resources
        for r in s.regions:
            buf = bytearray(pattern(r.size))
            perms = Perm(0)
            for p in r.perms:
                perms |= _PERM[p]
            res.add_region(s.job_id, s.pid_on_fep, r.index, r.key, buf, perms,
                           base_va=r.base_va, idempotent_safe=r.idempotent_safe)
            self.buffers[r.name] = buf
        tagging = self.profile.tag_matching != "none"
        for r in s.resources:
            resource = res.register(s.job_id, s.pid_on_fep, r.index, generation=r.generation)
            resource.enabled = r.enabled
            if r.tag is not None and not tagging:
                continue  # the profile cannot post tagged receives: the index stays empty
            for _ in range(r.receives):
                self._post(0, r.index, r.recv_size, r.tag)
        ep.on_complete = self._on_complete

    def _post(self, now: int, index: int, size: int, tag: int | None) -> None:
        self.ep.post_recv(now, bytearray(size), tag=tag, resource_index=index)

    def _on_complete(self, done: Any) -> None:
        if type(done) is not RecvCompleted:
            return
        recv = done.recv
        self.counters["recv_completed"] += 1
        for r in self.setup.resources:
            if r.index == recv.resource_index and r.receives:
                # keep the documented number of receives posted (called from inside the
                # FEP's pump: the new receive is matched by the next packet, not now)
                tag = recv.tag if recv.tagged else None
                self.ep.ses.target.post_recv(self.setup.job_id, self.setup.pid_on_fep,
                                             recv.resource_index, bytearray(r.recv_size),
                                             tag=tag)
                return

    # ------------------------------------------------------------------ I/O
    def datagram_in(self, now: int, payload: bytes, src_ip: str, ev: int, tos: int = 0) -> bool:
        """One received UDP payload; False (and counted) if it does not decode."""
        self.counters["rx_datagrams"] += 1
        if self.ep.tss is not None:  # TSS: the end point opens secured datagrams itself
            before = self.ep.counters["rx_decode_error"]
            ok = self.ep.receive_uet(now, payload, src_ip=src_ip, dst_ip=self.ip, ev=ev,
                                     dscp=tos >> 2, ecn=tos & 3, udp_dport=UET_UDP_PORT)
            if self.ep.counters["rx_decode_error"] != before:
                self.counters["rx_decode_errors"] += 1
            return ok
        try:
            frame = decode_uet(payload, src_ip=src_ip, dst_ip=self.ip, ev=ev, dscp=tos >> 2,
                               ecn=tos & 3, udp_dport=UET_UDP_PORT)
        except DecodeError as exc:
            self.counters["rx_decode_errors"] += 1
            self.counters[f"rx_decode_error.{exc.header}"] += 1
            return False
        self.ep.receive_frame(now, frame)
        return True

    def datagrams_out(self, now: int) -> list[Datagram]:
        """Everything the end point wants to send now (control class first)."""
        out = []
        ep = self.ep
        while True:
            if ep.tss is not None:
                got = ep.poll_uet(now)
                if got is None:
                    return out
                frame, data = got
            else:
                frame = ep.poll_frame(now)
                if frame is None:
                    return out
                try:
                    data = encode_uet(frame)
                except EncodeError:
                    self.counters["tx_encode_errors"] += 1
                    continue
            self.counters["tx_datagrams"] += 1
            out.append(Datagram(now, frame.src_ip, frame.dst_ip, frame.ev,
                                (frame.dscp & 0x3F) << 2 | (frame.ecn & 3), data))

    def next_deadline(self) -> int | None:
        return self.ep.next_deadline()

    def handle_timer(self, now: int) -> None:
        self.ep.handle_timer(now)
