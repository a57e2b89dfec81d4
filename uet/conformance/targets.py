"""Targets: where the end point under test lives, and how each case gets a fresh peer.

* :class:`InProcessTarget` (the default): a new built-in end point per case, configured by
  the well-known setup (plus the case's own configuration, if any) and driven by a virtual
  clock. ``endpoint_factory`` swaps in another :class:`~uet.endpoint.fep.FabricEndpoint` class
  (fault-injection tests do).
* :class:`UdpTarget`: one or more devices at ``udp:HOST:PORT[@profile]``, real sockets and
  the real clock. Each case gets its own peer addresses (``127.0.92.0/22`` by default when
  the device is on loopback), so no state of one case reaches the next, and a per-run nonce
  in the peer's seed, so a second run against the same device opens different PDCs.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from uet.profiles import Profile, load_profile
from uet.wire.constants import UET_UDP_PORT, CtlType

from .capture import CaseCapture
from .driver import FepDriver
from .peer import ANY_ACK, ConformanceFailure, Peer
from .registry import Case, profile_caps
from .setup import WELL_KNOWN, DutSetup, conformance_tss, variant_profile
from .transport import InProcessTransport, UdpTransport
from .udp_io import parse_hostport

#: addresses of the in-process world
INPROC_DUT = "10.77.0.2"
INPROC_PEERS = ["10.77.0.1", "10.77.0.3"]
#: scratch slots of 4 KiB in the "rma" region, one per case
SLOT = 4096


def case_seed(case_id: str, nonce: int = 0) -> int:
    return zlib.crc32(case_id.encode()) ^ nonce


def scratch_for(index: int, setup: DutSetup) -> int:
    slots = max(1, setup.region("rma").size // SLOT - 1)
    return (index % slots) * SLOT


@dataclass(frozen=True)
class DutSpec:
    """A device under test over UDP: ``udp:HOST:PORT[@profile][+key=value...]``.

    ``+key=value`` items say how the device was configured beyond the well-known setup
    (PdsConfig fields, or dotted profile keys such as ``ses.reassembly_max_messages``;
    values are JSON, else text): cases needing exactly that configuration run against it,
    and only they (``uet serve --set pds_extra=... --set profile_extra=...`` starts one)."""

    host: str
    port: int
    profile: str | None = None
    config: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, text: str) -> DutSpec:
        spec = text.strip()
        if not spec.startswith("udp:"):
            raise ValueError(f"--dut {text!r}: expected udp:HOST:PORT[@profile][+key=value] "
                             "or inprocess")
        rest, *items = spec[4:].split("+")
        config = []
        for item in items:
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise ValueError(f"--dut {text!r}: {item!r} is not key=value")
            try:
                parsed: Any = json.loads(value)
            except json.JSONDecodeError:
                parsed = value
            config.append((key.strip(), parsed))
        profile = None
        if "@" in rest:
            rest, profile = rest.rsplit("@", 1)
            load_profile(profile)  # a clear error for an unknown profile
        host, port = parse_hostport(rest, UET_UDP_PORT)
        return cls(host, port, profile, tuple(config))

    @property
    def extras(self) -> dict[str, Any]:
        return dict(self.config)

    def __str__(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        extra = "".join(f"+{k}={json.dumps(v, separators=(',', ':'))}" for k, v in self.config)
        return f"udp:{h}:{self.port}" + (f"@{self.profile}" if self.profile else "") + extra


class InProcessTarget:
    """The built-in end point in this process, one fresh instance per case."""

    kind = "inprocess"

    def __init__(self, setup: DutSetup = WELL_KNOWN, *, endpoint_factory: Any = None,
                 profile: str | None = None, log: Any = None) -> None:
        self.setup = setup if profile is None else setup.with_(profile=profile)
        self.endpoint_factory = endpoint_factory
        self.log = log
        self.last_driver: FepDriver | None = None

    def describe(self) -> str:
        name = getattr(self.endpoint_factory, "__name__", "FabricEndpoint")
        return f"in-process {name} (virtual clock)"

    def unavailable(self, case: Case) -> str | None:
        if not case.caps:
            return None
        _setup, profile = self.case_setup(case)
        missing = set(case.caps) - profile_caps(profile)
        if missing:
            return (f"needs a profile with {', '.join(sorted(missing))} (the end point's is "
                    f"{profile.name})")
        return None

    def case_setup(self, case: Case) -> tuple[DutSetup, Profile]:
        setup = self.setup
        if case.profile:
            setup = setup.with_(profile=case.profile)
        if case.config:
            setup = setup.with_(pds_extra={**setup.pds_extra, **case.config})
        profile = load_profile(setup.profile)
        if case.profile_changes:
            profile = variant_profile(setup.profile, case.profile_changes)
        return setup, profile

    @contextmanager
    def peer(self, case: Case, index: int = 0,
             capture: CaseCapture | None = None) -> Iterator[Peer]:
        setup, profile = self.case_setup(case)
        tss = None
        if case.tss:
            tss = conformance_tss(setup, **(case.tss if isinstance(case.tss, dict) else {}))
        driver = FepDriver(setup, INPROC_DUT, profile=profile,
                           endpoint_factory=self.endpoint_factory, log=self.log, tss=tss)
        self.last_driver = driver
        transport = InProcessTransport(driver)
        peer = Peer(transport, setup, ips=INPROC_PEERS, seed=case_seed(case.id),
                    capture=capture or CaseCapture(case.id), rule=case.rule,
                    scratch=scratch_for(index, setup), profile=profile,
                    tss=peer_tss(setup, INPROC_PEERS[0]) if case.tss else None)
        try:
            yield peer
        finally:
            transport.close()


class UdpTarget:
    """Devices under test over UDP (one per profile they speak)."""

    kind = "udp"

    def __init__(self, duts: list[DutSpec], setup: DutSetup = WELL_KNOWN, *,
                 peer_ips: list[str] | None = None, peer_net: str = "127.0.92.0/22",
                 grace_ms: float = 500.0, quiet_ms: float = 40.0,
                 nonce: int | None = None, tss: bool = False) -> None:
        if not duts:
            raise ValueError("UdpTarget needs at least one device (udp:HOST:PORT)")
        self.duts = duts
        self.setup = setup
        self.peer_ips = peer_ips
        self.net = ipaddress.ip_network(peer_net)
        for d in duts:
            fam = ipaddress.ip_address(d.host).version
            ips = peer_ips or [str(self.net.network_address)]
            if any(ipaddress.ip_address(ip).version != fam for ip in ips):
                have = ", ".join(ips) if peer_ips else peer_net
                raise ValueError(f"{d}: the peer's addresses ({have}) are not IPv{fam}; give "
                                 f"IPv{fam} ones with --peer IP")
        self._hosts = self.net.hosts()
        self.grace_us = grace_ms * 1000
        self.quiet_us = quiet_ms * 1000
        self.nonce = int.from_bytes(os.urandom(4), "big") if nonce is None else nonce
        #: the devices serve the well-known secure domain (uet serve --tss well-known):
        #: only the TSS cases apply
        self.tss = tss

    def describe(self) -> str:
        secured = ", the well-known secure domain" if self.tss else ""
        return ", ".join(str(d) for d in self.duts) + f" (real UDP, wall clock{secured})"

    def _dut_for(self, case: Case) -> DutSpec | None:
        want = case.profile
        extras = case.extras
        for d in self.duts:
            if d.extras != extras:  # configured devices serve exactly their cases
                continue
            prof = d.profile or self.setup.profile
            if want is not None and prof != want:
                continue
            if set(case.caps) <= profile_caps(_profile_of(prof, d)):
                return d
        return None

    def unavailable(self, case: Case) -> str | None:
        if case.virtual or not case.udp_capable:
            return case.limits()
        if case.tss and not self.tss:
            return ("needs a device serving the well-known secure domain (uet serve --tss "
                    "well-known, then uet conformance --tss)")
        if self.tss and not case.tss:
            return "the device is secured (--tss): cleartext cases do not apply"
        if self._dut_for(case) is None:
            if case.needs_config:
                prof = f"@{case.profile}" if case.profile else ""
                return (f"needs a device configured with {case.config_text()} (add --dut "
                        f"udp:HOST:PORT{prof}+{case.config_text()})")
            if case.profile:
                return (f"needs a device with profile {case.profile} (add --dut "
                        f"udp:HOST:PORT@{case.profile})")
            return (f"needs a device whose profile has {', '.join(case.caps)} (add --dut "
                    "udp:HOST:PORT@hpc)")
        return None

    def check_reachable(self, timeout_s: float = 3.0) -> None:
        """Make sure every device answers before the catalogue runs: send a NO_OP in a SYN
        (a new PDC) a few times within ``timeout_s`` and wait for any datagram back (an ACK,
        or a NACK: either shows a UET end point listening). ValueError naming the device
        when nothing answers, so a wrong address fails in seconds, not after every case has
        timed out."""
        for dut in self.duts:
            setup = self.setup.with_(profile=dut.profile or self.setup.profile)
            transport = UdpTransport(dut.host, dut.port, self._addresses())
            try:
                peer = Peer(transport, setup, ips=transport.peer_ips,
                            seed=case_seed("probe", self.nonce), capture=CaseCapture("probe"),
                            rule="the device answers", profile=load_profile(setup.profile))
                tries, start = 3, transport.now_ps
                pdcs = []
                for i in range(tries):
                    pdcs.append(peer.pdc())
                    pdcs[-1].send(peer.ses.no_op()[0])
                    dg = transport.next(start + round(timeout_s * 1e12 * (i + 1) / tries))
                    if dg is not None:
                        break
                else:
                    raise ValueError(
                        f"{dut}: no answer within {timeout_s:g} s to a UET request (NO_OP "
                        f"from {transport.peer_ips[0]}); is uet serve (or the device) "
                        "listening there? (--probe-timeout S to wait longer, 0 to skip)")
                _give_back(peer, pdcs, peer._decode(dg))
            finally:
                transport.close()

    def _addresses(self) -> list[str]:
        if self.peer_ips:
            return list(self.peer_ips)
        try:
            return [str(next(self._hosts)), str(next(self._hosts))]
        except StopIteration:
            self._hosts = self.net.hosts()
            return [str(next(self._hosts)), str(next(self._hosts))]

    @contextmanager
    def peer(self, case: Case, index: int = 0,
             capture: CaseCapture | None = None) -> Iterator[Peer]:
        dut = self._dut_for(case)
        if dut is None:
            raise RuntimeError(self.unavailable(case))
        setup = self.setup.with_(profile=dut.profile or self.setup.profile,
                                 pds_extra={**self.setup.pds_extra, **(case.config or {})},
                                 profile_extra=dict(case.profile_changes or {}))
        transport = UdpTransport(dut.host, dut.port, self._addresses())
        peer = Peer(transport, setup, ips=transport.peer_ips,
                    seed=case_seed(case.id, self.nonce),
                    capture=capture or CaseCapture(case.id), rule=case.rule,
                    grace_us=self.grace_us, quiet_us=self.quiet_us,
                    scratch=scratch_for(index, setup), profile=_profile_of(setup.profile, dut),
                    # a device keeps replay state across runs: the peer's TSC starts at the
                    # wall clock in 10 us ticks (2^48 of them reach 2059), so a later run
                    # never repeats one
                    tss=peer_tss(setup, transport.peer_ips[0], time.time_ns() // 10_000)
                    if case.tss else None)
        try:
            yield peer
        finally:
            transport.close()


def peer_tss(setup: DutSetup, ip: str, start_tsc: int = 0) -> Any:
    """The peer's side of the well-known secure domain (its own TSC, from ``start_tsc``,
    and its own replay state)."""
    from uet.tss import TssConfig, TssSublayer

    sub = TssSublayer(TssConfig.from_dict(conformance_tss(setup)), ip)
    sub.domains[conformance_tss(setup)["sdi"]].tsc = start_tsc
    return sub


def _give_back(peer: Peer, pdcs: list[Any], first: Any) -> None:
    """Close the probe's PDCs the device opened (CLOSE with AR, best effort, up to 1 s
    each), so a device with a small PDC table (``max_target_pdcs = 1``) serves its first
    case with the slot free instead of reclaiming it from the probe."""
    answers = [first, *peer.collect(within_us=1000)]
    for pdc in pdcs:
        ack = next((rx for rx in answers if isinstance(rx.pds, ANY_ACK)
                    and rx.pds.dpdcid == pdc.spdcid), None)
        if ack is None:
            continue  # NACKed or unanswered: the device holds nothing for it
        pdc.note_ack(ack)
        with contextlib.suppress(ConformanceFailure):  # else its target idle timer reaps it
            pdc.ack_of(pdc.control(CtlType.CLOSE, ar=True), timeout_us=1_000_000,
                       what="the ACK of the probe's CLOSE")


def _profile_of(name: str, dut: DutSpec) -> Profile:
    """The profile a device speaks: ``name`` with the dotted profile keys of its spec."""
    changes = {k: v for k, v in dut.config if "." in k}
    return variant_profile(name, changes) if changes else load_profile(name)


def make_target(duts: list[str] | None, setup: DutSetup = WELL_KNOWN, **kw: Any) -> Any:
    """``inprocess`` (or nothing) -> :class:`InProcessTarget`; ``udp:...`` specs ->
    :class:`UdpTarget`."""
    specs = [d for d in (duts or []) if d and d != "inprocess"]
    if not specs:
        return InProcessTarget(setup)
    kw = {k: v for k, v in kw.items() if v is not None}
    return UdpTarget([DutSpec.parse(d) for d in specs], setup, **kw)
