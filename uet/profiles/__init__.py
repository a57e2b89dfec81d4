"""Profiles (AI Base, AI Full, HPC) as data: loading, validation and capability checks.

A profile is a TOML file with the sections ``[profile]``, ``[delivery]``, ``[operations]``,
``[tagged]``, ``[atomics]``, ``[ses]``, ``[cms]`` and ``[pds]``; the built-in ones
(``ai-base.toml``, ``ai-full.toml``, ``hpc.toml``) live in this package's folder. Every key
is checked against :data:`SCHEMA`; an unknown key, a missing key or a bad value raises
:class:`ProfileConfigError` naming the file, the key and what is allowed. A user profile may
say ``extends = "ai-full"`` in ``[profile]`` and then give only the keys it changes.
``docs/profiles.md`` lists every key and says which choices are ours.

An end point advertises its profile as ``fep_cap`` bits; :func:`peer_profiles` maps a peer's
bits back to the built-in profiles, and :meth:`Profile.check_operation` refuses (with
:class:`ProfileError`) an operation that this profile or the peer's does not allow.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from uet.errors import ConfigError, LocalError
from uet.wire.constants import (
    AtomicDatatype,
    AtomicOpcode,
    DeliveryMode,
    FepCap,
    SesOpcode,
)

BUILTIN_PROFILES: tuple[str, ...] = ("ai-base", "ai-full", "hpc")
#: The fep_cap bit that names each built-in profile (how a peer's profile is recognised).
PROFILE_BITS: dict[FepCap, str] = {
    FepCap.AI_BASE: "ai-base",
    FepCap.AI_FULL: "ai-full",
    FepCap.HPC: "hpc",
}
TAG_MATCHING = ("none", "exact", "wildcard")
#: floating-point exceptions an atomic can report (ref 4.6: the AMO_FP_* return codes)
FP_EXCEPTIONS = ("NAN", "OVERFLOW", "UNDERFLOW", "INEXACT")
#: our default when a profile file omits atomics.fp_exceptions (docs/profiles.md)
DEFAULT_FP_EXCEPTIONS = ("NAN", "OVERFLOW")
CC_ALGORITHMS = ("nscc", "rccc")
CC_DEFAULTS = ("none", "nscc", "rccc", "nscc+rccc")
EV_SELECTORS = ("fixed", "oblivious", "bitmap", "reps", "mixed")

#: Operations that may travel over RUDI (idempotent ones, ref. 3.10).
RUDI_OPCODES = frozenset({SesOpcode.WRITE, SesOpcode.READ, SesOpcode.NO_OP})
TAGGED_OPCODES = frozenset({
    SesOpcode.TAGGED_SEND, SesOpcode.RENDEZVOUS_TSEND, SesOpcode.DEFERRABLE_TSEND,
    SesOpcode.TSEND_ATOMIC, SesOpcode.TSEND_FETCH_ATOMIC,
})
ATOMIC_OPCODES = frozenset({
    SesOpcode.ATOMIC, SesOpcode.FETCHING_ATOMIC, SesOpcode.TSEND_ATOMIC,
    SesOpcode.TSEND_FETCH_ATOMIC,
})
DEFERRABLE_OPCODES = frozenset({SesOpcode.DEFERRABLE_SEND, SesOpcode.DEFERRABLE_TSEND})


class ProfileConfigError(ConfigError):
    """A profile file is malformed: the message names the file, the key and the allowed values."""


class ProfileError(LocalError):
    """An operation that the local or the peer's profile does not allow."""

    def __init__(self, operation: str, profile: str, reason: str) -> None:
        self.operation = operation
        self.profile = profile
        self.reason = reason
        super().__init__(f"{operation} is not allowed by profile '{profile}': {reason}")


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True, slots=True)
class Key:
    """How one profile key is checked."""

    kind: str  # 'str' | 'slug' | 'bool' | 'int' | 'enum' | 'enumlist'
    doc: str
    choices: tuple[str, ...] = ()
    lo: int | None = None
    hi: int | None = None
    required: bool = True
    empty_ok: bool = False  # enumlist may be empty


def _names(enum) -> tuple[str, ...]:
    return tuple(m.name for m in enum)


_FEPCAP_NAMES = tuple(m.name for m in FepCap if m.name)

SCHEMA: dict[str, Key] = {
    "profile.name": Key("slug", "profile name (lower case, digits, '-')"),
    "profile.title": Key("str", "human-readable title"),
    "profile.extends": Key("enum", "built-in profile this file starts from (user profiles)",
                           BUILTIN_PROFILES, required=False),
    "profile.fep_cap": Key("enumlist", "fep_cap bits the end point advertises", _FEPCAP_NAMES),
    "delivery.modes": Key("enumlist", "PDS delivery modes allowed", _names(DeliveryMode)),
    "delivery.default_mode": Key("enum", "mode used when an operation names none",
                                 _names(DeliveryMode)),
    "operations.allowed": Key("enumlist", "SES request opcodes allowed", _names(SesOpcode)),
    "tagged.matching": Key("enum", "tag matching: none, exact, or wildcard (ignore bits)",
                           TAG_MATCHING),
    "atomics.opcodes": Key("enumlist", "atomic opcodes allowed", _names(AtomicOpcode),
                           empty_ok=True),
    "atomics.datatypes": Key("enumlist", "atomic datatypes allowed", _names(AtomicDatatype),
                             empty_ok=True),
    "atomics.fp_exceptions": Key("enumlist", "floating-point exceptions that fail an atomic "
                                 "with AMO_FP_NAN / _OVERFLOW / _UNDERFLOW / _INEXACT, memory "
                                 "unchanged (the others keep IEEE's default result)",
                                 FP_EXCEPTIONS, empty_ok=True, required=False),
    "ses.mtu_payload": Key("int", "SES payload bytes per packet (fabric-wide)", lo=256,
                           hi=16383),
    "ses.max_message_size": Key("int", "largest message (bytes)", lo=1, hi=0xFFFFFFFF),
    "ses.max_ack_data": Key("int", "Max_ACK_Data_Size: read data carried in ACKs", lo=0,
                            hi=16383),
    "ses.optimized_headers": Key("bool", "use the small/medium request headers when possible"),
    "ses.rendezvous_eager_bytes": Key("int", "eager part of a rendezvous send", lo=0,
                                      hi=16383),
    "ses.unexpected_max_messages": Key("int", "unexpected-list entries", lo=0, hi=1 << 20),
    "ses.unexpected_max_bytes": Key("int", "bytes buffered for unexpected messages", lo=0,
                                    hi=1 << 40),
    "ses.reassembly_max_messages": Key("int", "messages being reassembled at once", lo=1,
                                       hi=1 << 20),
    "ses.completed_history": Key("int", "completed message IDs remembered (duplicates)",
                                 lo=1, hi=32768),
    "ses.reassembly_timeout_ms": Key("int", "a message whose packets stop arriving this long "
                                     "is abandoned (and read data awaited this long)", lo=1,
                                     hi=3_600_000, required=False),
    "ses.dc_latency_ns": Key("int", "delivery complete (DC): a request with DC set is "
                             "answered NO_RESPONSE at once and with its response this long "
                             "later, when its data is visible in host memory (0: at once)",
                             lo=0, hi=1_000_000_000, required=False),
    "ses.unexpected_timeout_ms": Key("int", "unexpected messages, rendezvous exposures and "
                                     "deferred sends wait at most this long", lo=1,
                                     hi=86_400_000, required=False),
    "cms.algorithms": Key("enumlist", "congestion control algorithms allowed", CC_ALGORITHMS),
    "cms.default": Key("enum", "congestion control used by default", CC_DEFAULTS),
    "cms.ev_selector": Key("enum", "EV (entropy) selection", EV_SELECTORS),
    "cms.trimming": Key("bool", "packet trimming enabled"),
    "pds.rto_min_us": Key("int", "minimum retransmission timeout (us)", lo=1, hi=10_000_000),
    "pds.rto_initial_us": Key("int", "retransmission timeout before any RTT sample (us)",
                              lo=1, hi=10_000_000),
    "pds.max_retx": Key("int", "Max_RTO_Retx_Cnt: retransmissions before failing",
                        lo=0, hi=1000),
    "pds.mp_range": Key("int", "MP_RANGE: PSN window (packets)", lo=1, hi=1 << 15),
    "pds.ack_coalesce_bytes": Key("int", "ACK after this many bytes (0 = every packet)",
                                  lo=0, hi=1 << 24),
    "pds.ack_timer_us": Key("int", "ACK no later than this after a packet (us)", lo=0,
                            hi=1_000_000),
    "pds.new_pdc_time_ms": Key("int", "New_PDC_Time (ms)", lo=0, hi=1_000_000),
    "pds.close_req_time_ms": Key("int", "Close_REQ_Time (ms)", lo=0, hi=1_000_000),
    "pds.msl_ms": Key("int", "maximum segment lifetime (ms)", lo=0, hi=1_000_000),
    "pds.max_pdcs": Key("int", "PDCs per end point", lo=1, hi=65535),
    "tss.start_psn": Key("enum", "secured PDCs: who picks the Start_PSN (ref. 3.2)",
                         ("expected_0rtt", "random_1rtt"), required=False),
    "tss.replay_window": Key("int", "replay window per sender (TSC values)", lo=1,
                             hi=1 << 16, required=False),
    "tss.auth_fail_threshold": Key("int", "authentication failures before a secure domain "
                                   "drops everything (0: never)", lo=0, hi=1 << 40,
                                   required=False),
    "tss.max_epoch_lifetime": Key("int", "epochs an older frame may lag the domain's", lo=0,
                                  hi=0x7FFF, required=False),
}
SECTIONS = tuple(sorted({k.split(".")[0] for k in SCHEMA}))


# --------------------------------------------------------------------------- profile


@dataclass(frozen=True, slots=True)
class SesParams:
    mtu_payload: int
    max_message_size: int
    max_ack_data: int
    optimized_headers: bool
    rendezvous_eager_bytes: int
    unexpected_max_messages: int
    unexpected_max_bytes: int
    reassembly_max_messages: int
    completed_history: int
    #: abandon a message (free its reassembly slot) whose packets stopped arriving this
    #: long; the end point raises it to at least the PDS's progress bound
    reassembly_timeout_ms: int = 10_000
    #: unexpected messages, rendezvous exposures, deferred sends and reserved receives wait
    #: at most this long
    unexpected_timeout_ms: int = 60_000
    #: DC (delivery complete) requests: NO_RESPONSE at once, the response this much later
    dc_latency_ns: int = 1_000


@dataclass(frozen=True, slots=True)
class Profile:
    """One validated profile. ``values`` holds every key flattened (``"ses.mtu_payload"``)."""

    name: str
    title: str
    source: str
    fep_cap: FepCap
    modes: frozenset[DeliveryMode]
    default_mode: DeliveryMode
    operations: frozenset[SesOpcode]
    tag_matching: str
    atomic_opcodes: frozenset[AtomicOpcode]
    atomic_datatypes: frozenset[AtomicDatatype]
    ses: SesParams
    cc_algorithms: tuple[str, ...]
    cc_default: str
    cc_ev_selector: str
    trimming: bool
    pds: dict[str, int]
    values: dict[str, Any] = field(repr=False)
    #: exceptions that fail a floating-point atomic (atomics.fp_exceptions)
    fp_exceptions: frozenset[str] = frozenset(DEFAULT_FP_EXCEPTIONS)

    # ---- capability checks

    def allows_op(self, opcode: int) -> bool:
        return opcode in self.operations

    def allows_mode(self, mode: int) -> bool:
        return mode in self.modes

    def allows_atomic(self, opcode: int, datatype: int) -> bool:
        return opcode in self.atomic_opcodes and datatype in self.atomic_datatypes

    def check_operation(self, opcode: SesOpcode, *, mode: DeliveryMode | None = None,
                        atomic: tuple[int, int] | None = None,
                        peer_cap: int | None = None) -> None:
        """Raise :class:`ProfileError` unless this profile and the peer's allow the operation."""
        opname = SesOpcode(opcode).name
        _check_one(self, opname, opcode, mode, atomic)
        if peer_cap is None:
            return
        peers = peer_profiles(peer_cap)
        if not peers:
            raise ProfileError(opname, f"peer fep_cap {int(peer_cap):#x}",
                               "the peer advertises no known profile")
        errors = []
        for p in peers:
            try:
                _check_one(p, opname, opcode, mode, atomic)
                return
            except ProfileError as exc:
                errors.append(exc)
        names = ", ".join(e.profile for e in errors)
        reasons = "; ".join(dict.fromkeys(e.reason for e in errors))
        raise ProfileError(opname, f"{names} (the peer's, fep_cap {int(peer_cap):#x})",
                           reasons)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): every key plus the fep_cap bits as a number."""
        out = dict(sorted(self.values.items()))
        out.pop("profile.extends", None)
        out["profile.fep_cap_bits"] = int(self.fep_cap)
        return out


def _check_one(p: Profile, opname: str, opcode: int, mode: int | None,
               atomic: tuple[int, int] | None) -> None:
    if opcode not in p.operations:
        raise ProfileError(opname, p.name, "not in operations.allowed")
    if mode is not None and mode not in p.modes:
        raise ProfileError(opname, p.name,
                           f"delivery mode {DeliveryMode(mode).name} not in delivery.modes")
    if atomic is not None:
        aop, adt = atomic
        if aop not in p.atomic_opcodes:
            raise ProfileError(opname, p.name,
                               f"atomic opcode {_enum_name(AtomicOpcode, aop)} not in "
                               "atomics.opcodes")
        if adt not in p.atomic_datatypes:
            raise ProfileError(opname, p.name,
                               f"atomic datatype {_enum_name(AtomicDatatype, adt)} not in "
                               "atomics.datatypes")


def _enum_name(enum, value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return f"{value:#x}"


# --------------------------------------------------------------------------- loading


def profiles_dir() -> Path:
    """Directory of the built-in profiles: this package's own folder (``ai-base.toml``
    etc. ship in the wheel as package data); ``UET_PROFILES_DIR`` overrides."""
    env = os.environ.get("UET_PROFILES_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent


def load_profile(name_or_path: str | os.PathLike) -> Profile:
    """A built-in profile by name (``"ai-base"``) or a profile file by path."""
    text = str(name_or_path)
    if text in BUILTIN_PROFILES:
        return builtin_profile(text)
    path = Path(text)
    if not path.exists():
        raise ProfileConfigError(
            f"{text}: no such profile file (built-in profiles: {', '.join(BUILTIN_PROFILES)})")
    return _load_path(path)


@cache
def builtin_profile(name: str) -> Profile:
    """A built-in profile (cached: profiles are immutable)."""
    if name not in BUILTIN_PROFILES:
        raise ProfileConfigError(
            f"unknown profile '{name}'; built-in profiles: {', '.join(BUILTIN_PROFILES)}")
    return _load_path(profiles_dir() / f"{name}.toml")


def builtin_profiles() -> dict[str, Profile]:
    return {name: builtin_profile(name) for name in BUILTIN_PROFILES}


def peer_profiles(fep_cap: int) -> list[Profile]:
    """The built-in profiles a peer advertising ``fep_cap`` speaks."""
    return [builtin_profile(name) for bit, name in PROFILE_BITS.items() if fep_cap & bit]


def _load_path(path: Path) -> Profile:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ProfileConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_profile(data, str(path))


def flatten(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``{"ses": {"mtu_payload": 4096}}`` -> ``{"ses.mtu_payload": 4096}``; refuses unknowns."""
    flat: dict[str, Any] = {}
    for section, body in data.items():
        if section not in SECTIONS:
            raise ProfileConfigError(
                f"{source}: unknown section [{section}]; allowed sections: "
                f"{', '.join(SECTIONS)}")
        if not isinstance(body, dict):
            raise ProfileConfigError(f"{source}: '{section}' must be a table [{section}]")
        for key, value in body.items():
            full = f"{section}.{key}"
            if full not in SCHEMA:
                allowed = ", ".join(k for k in SCHEMA if k.startswith(section + "."))
                raise ProfileConfigError(
                    f"{source}: unknown key '{full}'; allowed keys in [{section}]: {allowed}")
            flat[full] = value
    return flat


def parse_profile(data: dict[str, Any], source: str = "<profile>") -> Profile:
    """Validate a parsed TOML document and build a :class:`Profile`."""
    flat = flatten(data, source)
    base = flat.get("profile.extends")
    if base is not None:
        _check_value(source, "profile.extends", base)
        merged = dict(builtin_profile(base).values)
        merged.pop("profile.extends", None)
        merged.update(flat)
        flat = merged
    for key, spec in SCHEMA.items():
        if key not in flat:
            if spec.required:
                raise ProfileConfigError(f"{source}: missing key '{key}' ({spec.doc})")
            continue
        _check_value(source, key, flat[key])
    _cross_check(source, flat)
    return _build(flat, source)


def _check_value(source: str, key: str, value: Any) -> None:
    spec = SCHEMA[key]
    where = f"{source}: {key} = {value!r}"
    if spec.kind in ("str", "slug"):
        if not isinstance(value, str) or not value:
            raise ProfileConfigError(f"{where}: expected a non-empty string ({spec.doc})")
        if spec.kind == "slug" and not re.fullmatch(r"[a-z0-9][a-z0-9-]*", value):
            raise ProfileConfigError(
                f"{where}: expected lower-case letters, digits and '-' ({spec.doc})")
    elif spec.kind == "bool":
        if not isinstance(value, bool):
            raise ProfileConfigError(f"{where}: expected true or false ({spec.doc})")
    elif spec.kind == "int":
        lo = spec.lo if spec.lo is not None else value
        hi = spec.hi if spec.hi is not None else value
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ProfileConfigError(
                f"{where}: expected an integer in {spec.lo}..{spec.hi} ({spec.doc})")
    elif spec.kind == "enum":
        if value not in spec.choices:
            raise ProfileConfigError(
                f"{where}: expected one of {', '.join(spec.choices)} ({spec.doc})")
    elif spec.kind == "enumlist":
        if not isinstance(value, list):
            raise ProfileConfigError(
                f"{where}: expected a list of {', '.join(spec.choices)} ({spec.doc})")
        if not value and not spec.empty_ok:
            raise ProfileConfigError(f"{where}: must not be empty ({spec.doc})")
        for item in value:
            if item not in spec.choices:
                raise ProfileConfigError(
                    f"{where}: {item!r} is not one of {', '.join(spec.choices)} ({spec.doc})")
        if len(set(value)) != len(value):
            raise ProfileConfigError(f"{where}: repeated entries")
    else:  # pragma: no cover - schema bug
        raise AssertionError(spec.kind)


def _cross_check(source: str, v: dict[str, Any]) -> None:
    def fail(key: str, msg: str) -> None:
        raise ProfileConfigError(f"{source}: {key} = {v[key]!r}: {msg}")

    ops = set(v["operations.allowed"])
    modes = set(v["delivery.modes"])
    if v["delivery.default_mode"] not in modes:
        fail("delivery.default_mode", f"must be one of delivery.modes ({', '.join(modes)})")
    tagged = sorted(op.name for op in TAGGED_OPCODES if op.name in ops)
    if v["tagged.matching"] == "none" and tagged:
        fail("tagged.matching", f"must be exact or wildcard when operations.allowed has "
             f"{', '.join(tagged)}")
    if v["tagged.matching"] != "none" and "TAGGED_SEND" not in ops:
        fail("tagged.matching", "must be none when operations.allowed lacks TAGGED_SEND")
    if "DATAGRAM_SEND" in ops and "UUD" not in modes:
        fail("operations.allowed", "DATAGRAM_SEND needs UUD in delivery.modes")
    if "UUD" in modes and "DATAGRAM_SEND" not in ops:
        fail("delivery.modes", "UUD carries only DATAGRAM_SEND, which operations.allowed lacks")
    if ({op.name for op in DEFERRABLE_OPCODES} & ops) and "DEFERRABLE_RTR" not in ops:
        fail("operations.allowed", "deferrable sends need DEFERRABLE_RTR")
    if "DEFERRABLE_RTR" in ops and not ({op.name for op in DEFERRABLE_OPCODES} & ops):
        fail("operations.allowed", "DEFERRABLE_RTR without a deferrable send")
    if ({op.name for op in ATOMIC_OPCODES} & ops) and not (
            v["atomics.opcodes"] and v["atomics.datatypes"]):
        fail("atomics.opcodes", "atomic operations are allowed but the atomic set is empty")
    if ({"RENDEZVOUS_SEND", "RENDEZVOUS_TSEND"} & ops) and "READ" not in ops:
        fail("operations.allowed", "rendezvous sends need READ (the target pulls the rest)")
    if "RUDI" in modes and not (ops & {op.name for op in RUDI_OPCODES}):
        fail("delivery.modes", "RUDI needs an idempotent operation (WRITE, READ, NO_OP)")
    cc = v["cms.default"]
    if cc != "none" and not set(cc.split("+")) <= set(v["cms.algorithms"]):
        fail("cms.default", f"uses an algorithm not in cms.algorithms "
             f"({', '.join(v['cms.algorithms'])})")
    if v["ses.rendezvous_eager_bytes"] > v["ses.mtu_payload"]:
        fail("ses.rendezvous_eager_bytes", "must not exceed ses.mtu_payload "
             f"({v['ses.mtu_payload']})")
    if v["ses.max_message_size"] < v["ses.mtu_payload"]:
        fail("ses.max_message_size", f"must be at least ses.mtu_payload ({v['ses.mtu_payload']})")
    if not ({"AI_BASE", "AI_FULL", "HPC"} & set(v["profile.fep_cap"])):
        fail("profile.fep_cap", "must name at least one profile bit (AI_BASE, AI_FULL, HPC)")


def _build(v: dict[str, Any], source: str) -> Profile:
    cap = FepCap(0)
    for name in v["profile.fep_cap"]:
        cap |= FepCap[name]
    ses = SesParams(**{k.split(".", 1)[1]: v[k] for k in SCHEMA
                       if k.startswith("ses.") and k in v})
    return Profile(
        name=v["profile.name"],
        title=v["profile.title"],
        source=source,
        fep_cap=cap,
        modes=frozenset(DeliveryMode[m] for m in v["delivery.modes"]),
        default_mode=DeliveryMode[v["delivery.default_mode"]],
        operations=frozenset(SesOpcode[o] for o in v["operations.allowed"]),
        tag_matching=v["tagged.matching"],
        atomic_opcodes=frozenset(AtomicOpcode[o] for o in v["atomics.opcodes"]),
        atomic_datatypes=frozenset(AtomicDatatype[d] for d in v["atomics.datatypes"]),
        ses=ses,
        cc_algorithms=tuple(v["cms.algorithms"]),
        cc_default=v["cms.default"],
        cc_ev_selector=v["cms.ev_selector"],
        trimming=v["cms.trimming"],
        pds={k.split(".", 1)[1]: v[k] for k in SCHEMA if k.startswith("pds.")},
        values=dict(v),
        fp_exceptions=frozenset(v.get("atomics.fp_exceptions", DEFAULT_FP_EXCEPTIONS)),
    )


# --------------------------------------------------------------------------- matrix


def _yes(flag: bool) -> str:
    return "yes" if flag else "-"


def feature_matrix(profiles: list[Profile]) -> list[tuple[str, list[str]]]:
    """Rows (feature, one cell per profile) of the profile matrix ``uet profiles`` prints."""
    rows: list[tuple[str, list[str]]] = []

    def row(name: str, fn) -> None:
        rows.append((name, [fn(p) for p in profiles]))

    row("fep_cap", lambda p: " ".join(str(m.name) for m in FepCap if m in p.fep_cap))
    for mode in DeliveryMode:
        row(f"mode {mode.name}", lambda p, m=mode: _yes(m in p.modes))
    row("default mode", lambda p: p.default_mode.name)
    for op in SesOpcode:
        row(f"op {op.name}", lambda p, o=op: _yes(o in p.operations))
    row("tag matching", lambda p: p.tag_matching)
    for aop in AtomicOpcode:
        row(f"atomic {aop.name}", lambda p, a=aop: _yes(a in p.atomic_opcodes))
    for dt in AtomicDatatype:
        row(f"datatype {dt.name}", lambda p, d=dt: _yes(d in p.atomic_datatypes))
    row("cc algorithms", lambda p: ", ".join(p.cc_algorithms))
    row("cc default", lambda p: p.cc_default)
    row("ev selector", lambda p: p.cc_ev_selector)
    row("trimming", lambda p: _yes(p.trimming))
    for key in SCHEMA:
        if key.startswith(("ses.", "pds.")):
            row(key, lambda p, k=key: str(p.values.get(k, "-")).lower())
    return rows
