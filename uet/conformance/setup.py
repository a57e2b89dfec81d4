"""The well-known setup of an end point under test: what the conformance cases can hit.

A conformance case needs something to address at the device under test (DUT): a job, memory
regions with known keys and contents, posted receives, and timers short enough to be waited
for in wall time. :class:`DutSetup` describes all of it as plain data. ``uet serve`` applies
it to the built-in end point (and prints it at start), the in-process target applies the very
same description, and the test peer reads it to know which keys, indices and timers to use.
Another implementation tested with ``uet conformance --dut udp:HOST:PORT`` is configured to
match (or describes itself in a setup file given with ``--setup``).

Everything is JSON-ready (:meth:`DutSetup.to_dict`, :meth:`DutSetup.from_dict`); unknown keys
and bad values are refused naming the key.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from uet.errors import ConfigError
from uet.profiles import Profile, builtin_profiles, parse_profile

#: Memory region kinds: remote access rights of the region.
PERMS = ("read", "write", "atomic")
#: congestion control choices of the setup (the profile must allow the algorithm)
CC_CHOICES = ("none", "nscc", "rccc", "nscc+rccc")


class SetupError(ConfigError):
    """A bad setup value; the message names the key and what is allowed."""


def pattern(length: int, start: int = 0) -> bytes:
    """The known contents of every region at setup time: byte ``i`` is
    ``(i * 31 + 7) % 251`` (a period that is not a power of two, so a misplaced offset
    shows)."""
    k = start % 251
    reps = (k + length) // 251 + 1
    return (_PERIOD * reps)[k:k + length]


_PERIOD = bytes((i * 31 + 7) % 251 for i in range(251))


@dataclass(frozen=True, slots=True)
class Region:
    """One registered memory region: resource ``index``, memory ``key``, ``size`` bytes."""

    name: str
    index: int
    key: int
    size: int
    perms: tuple[str, ...]
    idempotent_safe: bool = False
    base_va: int = 0


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource index without memory: a receive queue, a disabled index, or one whose
    generation is not 0. ``receives`` untagged receives (or tagged with ``tag``) of
    ``recv_size`` bytes are kept posted: the end point posts a new one whenever one
    completes."""

    name: str
    index: int
    receives: int = 0
    recv_size: int = 65536
    tag: int | None = None
    enabled: bool = True
    generation: int = 0


@dataclass(frozen=True, slots=True)
class DutSetup:
    """What the end point under test exposes and how its timers are set.

    Times are microseconds. ``profile`` is a built-in profile name (the profile gates which
    cases apply). The defaults are the documented well-known setup (docs/conformance.md).
    """

    profile: str = "hpc"
    job_id: int = 0x00ABCD
    pid_on_fep: int = 0
    regions: tuple[Region, ...] = (
        Region("rma", 0x001, 0x1111_0001, 1 << 20, ("read", "write", "atomic"),
               base_va=0x7F00_0000_0000),
        Region("readonly", 0x002, 0x2222_0002, 65536, ("read",)),
        Region("writeonly", 0x003, 0x3333_0003, 65536, ("write",)),
        Region("idempotent", 0x004, 0x4444_0004, 65536, ("read", "write"),
               idempotent_safe=True),
        Region("small", 0x005, 0x0, 65536, ("read", "write", "atomic")),
    )
    resources: tuple[Resource, ...] = (
        Resource("recv", 0x010, receives=8),
        Resource("tagged", 0x011, receives=8, tag=0x7A6_0000_0001),
        Resource("unexpected", 0x012),
        Resource("disabled", 0x013, enabled=False),
        Resource("generation", 0x014, generation=7),
    )
    # ---- timers (µs) and windows
    rto_us: int = 60_000
    rto_backoff: int = 2
    max_retries: int = 3
    ack_timer_us: int = 20_000
    ack_every_bytes: int = 16384
    close_idle_us: int = 150_000
    target_idle_us: int = 150_000
    close_req_time_us: int = 150_000
    clear_req_us: int = 30_000
    msl_us: int = 100_000
    new_pdc_time_us: int = 100_000
    mp_range: int = 128
    # ---- marking
    #: the data class: requests, and ACKs that carry read data (trimmable bulk payload)
    dscp_data: int = 0
    dscp_control: int = 46
    dscp_trimmed: int = 12
    dscp_trimmed_lasthop: int = 14
    #: congestion control of the end point: "none" keeps the PDS's own window the only
    #: limit, so that wall-clock RTTs over UDP (milliseconds where the CMS expects
    #: microseconds) do not turn "retransmit at once" into "retransmit when the CC allows"
    cc: str = "none"
    seed: int = 1
    #: extra PdsConfig fields (cases that need another configuration)
    pds_extra: dict[str, Any] = field(default_factory=dict)
    #: profile keys changed from ``profile``'s (dotted: ``ses.reassembly_max_messages``)
    profile_extra: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ lookups
    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(f"setup has no region {name!r} (regions: "
                       f"{', '.join(r.name for r in self.regions)})")

    def resource(self, name: str) -> Resource:
        for r in self.resources:
            if r.name == name:
                return r
        raise KeyError(f"setup has no resource {name!r} (resources: "
                       f"{', '.join(r.name for r in self.resources)})")

    def pds_overrides(self) -> dict[str, Any]:
        """PdsConfig fields (picoseconds) implied by the timers: a fixed RTO, no SACK
        threshold guessing, every timer short enough to be waited for in wall time."""
        us = 1_000_000
        out: dict[str, Any] = {
            "rto_adaptive": False, "rto_ps": self.rto_us * us, "rto_backoff": self.rto_backoff,
            "max_retries": self.max_retries, "ack_timer_ps": self.ack_timer_us * us,
            "ack_every_bytes": self.ack_every_bytes, "close_idle_ps": self.close_idle_us * us,
            "target_idle_ps": self.target_idle_us * us,
            "close_req_time_ps": self.close_req_time_us * us,
            "clear_req_ps": self.clear_req_us * us, "msl_ps": self.msl_us * us,
            "new_pdc_time_ps": self.new_pdc_time_us * us, "mp_range": self.mp_range,
            "dscp_data": self.dscp_data, "dscp_control": self.dscp_control,
            "dscp_trimmed": self.dscp_trimmed,
            "dscp_trimmed_lasthop": self.dscp_trimmed_lasthop, "ar_every_packet": False,
        }
        out.update(self.pds_extra)
        return out

    def with_(self, **changes: Any) -> DutSetup:
        """A copy with some fields changed (validated)."""
        out = replace(self, **changes)
        out.validate()
        return out

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["regions"] = [dict(r, perms=list(r["perms"])) for r in d["regions"]]
        d["resources"] = [dict(r) for r in d["resources"]]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "setup") -> DutSetup:
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise SetupError(f"{source}: unknown key {key!r}; allowed: "
                                 f"{', '.join(sorted(known))}")
        values = dict(data)
        try:
            if "regions" in values:
                values["regions"] = tuple(
                    Region(**dict(r, perms=tuple(r.get("perms", ()))))
                    for r in values["regions"])
            if "resources" in values:
                values["resources"] = tuple(Resource(**r) for r in values["resources"])
        except TypeError as exc:
            raise SetupError(f"{source}: bad region/resource entry: {exc}") from None
        out = cls(**values)
        out.validate(source)
        return out

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DutSetup:
        """Read a setup written by ``uet serve --setup-out`` (JSON)."""
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, json.JSONDecodeError) as exc:
            raise SetupError(f"{path}: cannot read the setup: {exc}") from None
        if not isinstance(data, dict):
            raise SetupError(f"{path}: the setup must be a JSON object")
        return cls.from_dict(data, str(path))

    def validate(self, source: str = "setup") -> None:
        """Raise :class:`SetupError` naming the first bad key."""
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (isinstance(value, bool) or not isinstance(value, int)):
                raise SetupError(f"{source}: {f.name}: must be an integer, got {value!r}")
            if f.type == "str" and not isinstance(value, str):
                raise SetupError(f"{source}: {f.name}: must be a string, got {value!r}")
        if not isinstance(self.pds_extra, dict):
            raise SetupError(f"{source}: pds_extra: must be an object of PdsConfig fields, "
                             f"got {self.pds_extra!r}")
        if not isinstance(self.profile_extra, dict) or any(
                not isinstance(k, str) or "." not in k for k in self.profile_extra):
            raise SetupError(f"{source}: profile_extra: must be an object of dotted profile "
                             f"keys (e.g. ses.reassembly_max_messages), got "
                             f"{self.profile_extra!r}")
        if self.profile not in builtin_profiles():
            raise SetupError(f"{source}: profile: must be one of "
                             f"{', '.join(sorted(builtin_profiles()))}, got {self.profile!r}")
        if not 0 < self.job_id < 1 << 24:
            raise SetupError(f"{source}: job_id: must be in [1, 2**24 - 1], got {self.job_id}")
        if not 0 <= self.pid_on_fep < 1 << 12:
            raise SetupError(f"{source}: pid_on_fep: must be in [0, 4095], got "
                             f"{self.pid_on_fep}")
        indices: dict[int, str] = {}
        for r in (*self.regions, *self.resources):
            if not 0 < r.index < 1 << 12:
                raise SetupError(f"{source}: {r.name}.index: must be in [1, 4095], got "
                                 f"{r.index}")
            other = indices.get(r.index)
            if other is not None and not (isinstance(r, Region) and other.startswith("region")):
                raise SetupError(f"{source}: {r.name}.index: {r.index:#x} already used by "
                                 f"{other.split(':')[1]}")
            indices[r.index] = ("region:" if isinstance(r, Region) else "resource:") + r.name
        for r in self.regions:
            bad = [p for p in r.perms if p not in PERMS]
            if bad or not r.perms:
                raise SetupError(f"{source}: {r.name}.perms: must be a non-empty list of "
                                 f"{', '.join(PERMS)}, got {list(r.perms)}")
            if r.size <= 0:
                raise SetupError(f"{source}: {r.name}.size: must be > 0, got {r.size}")
        if self.cc not in CC_CHOICES:
            raise SetupError(f"{source}: cc: must be one of {', '.join(CC_CHOICES)}, got "
                             f"{self.cc!r}")
        for name in ("rto_us", "ack_timer_us", "ack_every_bytes", "close_req_time_us",
                     "msl_us", "new_pdc_time_us", "rto_backoff"):
            if getattr(self, name) <= 0:
                raise SetupError(f"{source}: {name}: must be > 0, got {getattr(self, name)}")
        for name in ("max_retries", "close_idle_us", "target_idle_us", "clear_req_us"):
            if getattr(self, name) < 0:
                raise SetupError(f"{source}: {name}: must be >= 0, got {getattr(self, name)}")
        self._check_pds(source)
        if self.profile_extra:
            from uet.profiles import ProfileConfigError

            try:
                variant_profile(self.profile, self.profile_extra)
            except ProfileConfigError as exc:
                raise SetupError(f"{source}: profile_extra: {exc}") from None

    def _check_pds(self, source: str) -> None:
        """The PDS configuration these values imply must be valid too (``mp_range``, DSCPs,
        ``pds_extra``): its errors are reported under the setup's own key names."""
        from uet.endpoint.config import pds_config_from_profile

        try:
            pds_config_from_profile(self.profile, self.pds_overrides())
        except (TypeError, ValueError) as exc:
            text = str(exc)
            m = re.match(r"pds\.(\w+)(.*)", text, re.S)
            if m is None:
                raise SetupError(f"{source}: {text}") from None
            name = m.group(1)
            if name in self.pds_extra:
                key = f"pds_extra.{name}"
            else:
                key = _SETUP_KEY_OF_PDS.get(name, f"pds.{name}")
            raise SetupError(f"{source}: {key}{m.group(2)}") from None

    def describe(self) -> str:
        """Human-readable summary (printed by ``uet serve`` at start)."""
        lines = [f"profile {self.profile}, job 0x{self.job_id:06x}, PIDonFEP {self.pid_on_fep}"]
        for r in self.regions:
            extra = " idempotent-safe" if r.idempotent_safe else ""
            va = f" base_va 0x{r.base_va:x}" if r.base_va else ""
            lines.append(f"  region {r.name:<11} index 0x{r.index:03x} key 0x{r.key:x} "
                         f"{r.size} B {'/'.join(r.perms)}{extra}{va}")
        for r in self.resources:
            what = []
            if r.receives:
                tag = f" tag 0x{r.tag:x}" if r.tag is not None else ""
                what.append(f"{r.receives} x {r.recv_size} B receives{tag} kept posted")
            if not r.enabled:
                what.append("disabled")
            if r.generation:
                what.append(f"generation {r.generation}")
            lines.append(f"  resource {r.name:<11} index 0x{r.index:03x} "
                         f"{', '.join(what) or 'no receives (unexpected list)'}")
        lines.append(
            f"  timers: RTO {self.rto_us} us x{self.rto_backoff} up to {self.max_retries} "
            f"retries, ACK timer {self.ack_timer_us} us / {self.ack_every_bytes} B, close idle "
            f"{self.close_idle_us} us, target idle {self.target_idle_us} us, Close_REQ_Time "
            f"{self.close_req_time_us} us, CLEAR_REQ every {self.clear_req_us} us, MSL "
            f"{self.msl_us} us, New_PDC_Time {self.new_pdc_time_us} us, MP_RANGE "
            f"{self.mp_range}")
        lines.append(f"  congestion control: {self.cc}")
        if self.pds_extra or self.profile_extra:
            items = {**self.pds_extra, **self.profile_extra}
            lines.append("  configured: " + ", ".join(f"{k}={v}" for k, v in items.items()))
        lines.append(f"  DSCP: data {self.dscp_data}, control {self.dscp_control}, "
                     f"trimmed {self.dscp_trimmed}, trimmed last hop "
                     f"{self.dscp_trimmed_lasthop}; region contents: byte i = (i * 31 + 7) % 251")
        return "\n".join(lines)


#: PdsConfig field -> the setup key that sets it (errors name the key the user wrote)
_SETUP_KEY_OF_PDS = {
    "rto_ps": "rto_us", "rto_backoff": "rto_backoff", "max_retries": "max_retries",
    "ack_timer_ps": "ack_timer_us", "ack_every_bytes": "ack_every_bytes",
    "close_idle_ps": "close_idle_us", "target_idle_ps": "target_idle_us",
    "close_req_time_ps": "close_req_time_us", "clear_req_ps": "clear_req_us",
    "msl_ps": "msl_us", "new_pdc_time_ps": "new_pdc_time_us", "mp_range": "mp_range",
    "dscp_data": "dscp_data", "dscp_control": "dscp_control",
    "dscp_trimmed": "dscp_trimmed", "dscp_trimmed_lasthop": "dscp_trimmed_lasthop",
}

WELL_KNOWN = DutSetup()

#: The well-known secure domain of the TSS cases (a published key: for conformance runs
#: only): direct mode, carrying the setup's job. ``uet serve --tss well-known`` serves it;
#: ``uet conformance --tss`` runs the TSS cases (and only them) against such a device.
CONFORMANCE_TSS_SDI = 0x00_C0DE
CONFORMANCE_TSS_KEY = "756574207473732077656c6c2d6b6e6f776e20636f6e666f726d616e63652121"


def conformance_tss(setup: DutSetup = WELL_KNOWN, **overrides: Any) -> dict[str, Any]:
    """The well-known secure domain for ``setup`` (``overrides``: other domain keys, e.g.
    ``auth_fail_threshold`` for an in-process case)."""
    return {"mode": "direct", "sdi": CONFORMANCE_TSS_SDI, "key": CONFORMANCE_TSS_KEY,
            "job": setup.job_id, **overrides}


def variant_profile(name: str, changes: dict[str, Any]) -> Profile:
    """``name`` with some profile keys changed (``{"ses.reassembly_max_messages": 1}``)."""
    data: dict[str, dict[str, Any]] = {"profile": {"extends": name, "name": f"{name}-variant"}}
    for key, value in changes.items():
        section, sub = key.split(".", 1)
        data.setdefault(section, {})[sub] = value
    return parse_profile(data, f"profile {name} with {', '.join(changes)}")
