"""TSS configuration: secure domains, their keys and limits, and the job-isolation table.

A secure domain (SD, named by its 24-bit SDI) is configured per job: the job it carries,
its key mode and key material, whether its members send an SSI, its limits (replay window,
authentication-failure threshold, epoch lifetime, TSC limit) and its rekey and rotation
schedule. :class:`TssConfig` holds an end point's domains, whether cleartext UET is still
accepted next to them, and the non-secure fallback table (which jobs a source address may
use when its traffic is not secured).

Every bad value raises :class:`TssConfigError` naming ``tss.<key>`` and what is allowed.
The same domains can come from a key file (:func:`load_key_file`), the format shared by
``uet serve --tss``, ``uet decode --keys`` and the Wireshark dissector (docs/tss.md).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from uet.errors import ConfigError

MODES = ("direct", "cluster", "server")
ROLES = ("member", "server", "client")
TSC_MAX = (1 << 48) - 1
PS_PER_MS = 1_000_000_000


class TssConfigError(ConfigError):
    """A bad TSS setting; the message names the key (``tss.<key>``) and the allowed values."""


def _int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            raise TssConfigError(f"tss.{name}: must be an integer in [{lo}, {hi}], "
                                 f"got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise TssConfigError(f"tss.{name}: must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def parse_key(name: str, value: Any, lengths: tuple[int, ...] = (32,)) -> bytes:
    """Key material given as hex text (spaces and colons allowed) or bytes."""
    if isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
    elif isinstance(value, str):
        text = value.replace(":", "").replace(" ", "").removeprefix("0x")
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raise TssConfigError(f"tss.{name}: must be hex digits, got {value!r}") from None
    else:
        raise TssConfigError(f"tss.{name}: must be a hex string, got {type(value).__name__}")
    if len(raw) not in lengths:
        want = " or ".join(f"{n} bytes ({2 * n} hex digits)" for n in lengths)
        raise TssConfigError(f"tss.{name}: must be {want}, got {len(raw)} bytes")
    return raw


@dataclass(frozen=True, slots=True)
class DomainConfig:
    """One secure domain as one end point sees it."""

    sdi: int
    mode: str
    key: bytes = field(repr=False)
    job: int
    role: str = "member"
    ssi: int | None = None
    epoch: int = 0
    rekey_mask: int = 0
    rotation_ps: int = 0
    rotation_guard_ps: int = 0
    replay_window: int = 2048
    auth_fail_threshold: int = 1000
    max_epoch_lifetime: int = 16
    tsc_limit: int = TSC_MAX
    max_senders: int = 4096
    clients: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        p = f"domains[{self.sdi}]."
        _int(p + "sdi", self.sdi, 1, 0xFFFFFF)
        if self.mode not in MODES:
            raise TssConfigError(f"tss.{p}mode: must be one of {', '.join(MODES)}, "
                                 f"got {self.mode!r}")
        if self.mode == "server":
            if self.role not in ("server", "client"):
                raise TssConfigError(f"tss.{p}role: server mode needs role 'server' or "
                                     f"'client', got {self.role!r}")
        elif self.role != "member":
            raise TssConfigError(f"tss.{p}role: {self.mode} mode has role 'member' only, "
                                 f"got {self.role!r}")
        lengths = (32, 44) if self.role == "client" else (32,)
        if len(self.key) not in lengths:
            raise TssConfigError(f"tss.{p}key: must be {' or '.join(map(str, lengths))} bytes")
        _int(p + "job", self.job, 0, 0xFFFFFF)
        if self.ssi is not None:
            _int(p + "ssi", self.ssi, 0, 0xFFFFFFFF)
        _int(p + "epoch", self.epoch, 0, 0xFFFF)
        _int(p + "rekey_mask", self.rekey_mask, 0, TSC_MAX)
        if self.rekey_mask and self.mode != "cluster":
            raise TssConfigError(f"tss.{p}rekey_mask: implicit rekeying derives per-source "
                                 f"keys, so it needs mode 'cluster' (got {self.mode!r})")
        _int(p + "rotation_ps", self.rotation_ps, 0, 1 << 62)
        _int(p + "rotation_guard_ps", self.rotation_guard_ps, 0, 1 << 62)
        if self.rotation_ps and self.mode == "server":
            raise TssConfigError(f"tss.{p}rotation_ps: AN rotation is not available in "
                                 "server mode (its clients hold derived keys only)")
        if self.rotation_ps and self.rotation_guard_ps >= self.rotation_ps:
            raise TssConfigError(f"tss.{p}rotation_guard_ps: must be below rotation_ps")
        _int(p + "replay_window", self.replay_window, 1, 1 << 16)
        _int(p + "auth_fail_threshold", self.auth_fail_threshold, 0, 1 << 62)
        _int(p + "max_epoch_lifetime", self.max_epoch_lifetime, 0, 0x7FFF)
        _int(p + "tsc_limit", self.tsc_limit, 0, TSC_MAX)
        _int(p + "max_senders", self.max_senders, 1, 1 << 24)
        for ip, ssi in dict(self.clients).items():
            _addr(f"{p}clients", ip)
            _int(f"{p}clients[{ip}]", ssi, 0, 0xFFFFFFFF)

    @property
    def use_ssi(self) -> bool:
        return self.ssi is not None

    @property
    def guard_ps(self) -> int:
        """How long after a rotation the previous key is still accepted."""
        return self.rotation_guard_ps or self.rotation_ps // 5


def _addr(name: str, value: Any) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise TssConfigError(f"tss.{name}: {value!r} is not an IP address") from None


_DOMAIN_KEYS = {f.name for f in fields(DomainConfig)}
_TIME_MS_KEYS = {"rotation_ms": "rotation_ps", "rotation_guard_ms": "rotation_guard_ps"}


def domain_from_dict(d: Mapping[str, Any], where: str = "") -> DomainConfig:
    """A :class:`DomainConfig` from plain data (TOML, JSON, a key-file line)."""
    d = dict(d)
    for ms, ps in _TIME_MS_KEYS.items():
        if ms in d:
            d[ps] = int(float(d.pop(ms)) * PS_PER_MS)
    unknown = set(d) - _DOMAIN_KEYS
    if unknown:
        allowed = sorted(_DOMAIN_KEYS | set(_TIME_MS_KEYS))
        raise TssConfigError(f"tss{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                             f"allowed: {', '.join(allowed)}")
    for req in ("sdi", "mode", "key", "job"):
        if req not in d:
            raise TssConfigError(f"tss{where}.{req}: missing (a secure domain needs sdi, "
                                 "mode, key and job)")
    if d["mode"] not in MODES:
        raise TssConfigError(f"tss{where}.mode: must be one of {', '.join(MODES)}, got "
                             f"{d['mode']!r}")
    d["sdi"] = _int(f"{where.lstrip('.')}sdi" if where else "sdi", d["sdi"], 1, 0xFFFFFF)
    role = d.get("role", "member")
    lengths = (32, 44) if role == "client" else (32,)
    d["key"] = parse_key(f"domains[{d['sdi']}].key", d["key"], lengths)
    for k in ("job", "ssi", "epoch", "rekey_mask", "replay_window", "auth_fail_threshold",
              "max_epoch_lifetime", "tsc_limit", "max_senders", "rotation_ps",
              "rotation_guard_ps"):
        if isinstance(d.get(k), str):
            d[k] = _int(f"domains[{d['sdi']}].{k}", d[k], 0, 1 << 62)
    return DomainConfig(**d)


@dataclass(frozen=True, slots=True)
class TssConfig:
    """An end point's TSS: its secure domains (by SDI), whether cleartext UET is accepted
    next to them, and the non-secure fallback (``job_sources``: source address -> the jobs
    it may use; when the table is not empty, a source it does not list may use none)."""

    domains: tuple[DomainConfig, ...] = ()
    allow_cleartext: bool = False
    job_sources: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: dict[int, int] = {}
        jobs: dict[int, int] = {}
        for dom in self.domains:
            if dom.sdi in seen:
                raise TssConfigError(f"tss.domains: SDI {dom.sdi} is configured twice")
            seen[dom.sdi] = 1
            if dom.job in jobs:
                raise TssConfigError(f"tss.domains: job {dom.job} is bound to SDI "
                                     f"{jobs[dom.job]} and {dom.sdi}; one domain per job")
            jobs[dom.job] = dom.sdi

    @property
    def enabled(self) -> bool:
        return bool(self.domains) or bool(self.job_sources)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, base: Path | None = None,
                  defaults: Mapping[str, Any] | None = None) -> TssConfig:
        """From ``transport.tss``: ``{mode = "off"}``, one domain (``{mode, sdi, key, job,
        ...}``), ``{domains = [...]}`` or ``{key_file = PATH}``; plus ``allow_cleartext``
        and ``job_sources``. ``defaults`` (a profile's ``[tss]``) fill in what a domain
        does not say."""
        if not d:
            return cls()
        d = dict(d)
        dflt = dict(defaults or {})
        allow = d.pop("allow_cleartext", None)
        sources = d.pop("job_sources", None) or {}
        domains: list[DomainConfig] = []
        if d.get("mode") == "off":
            # the other keys stay (a sweep over mode = "off", "cluster" keeps the domain's
            # key and job in the file) but secure nothing
            d.clear()
        elif "key_file" in d:
            path = Path(d.pop("key_file"))
            if base is not None and not path.is_absolute():
                path = base / path
            domains.extend(load_key_file(path, dflt))
            if d:
                raise TssConfigError(f"tss.key_file: give the domains in the file; other "
                                     f"keys {', '.join(sorted(d))} are not allowed with it")
        elif "domains" in d:
            items = d.pop("domains")
            if d:
                raise TssConfigError(f"tss: unknown key(s) {', '.join(sorted(d))} next to "
                                     "domains (allowed: domains, allow_cleartext, job_sources)")
            if not isinstance(items, list):
                raise TssConfigError("tss.domains: must be a list of tables")
            for i, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise TssConfigError(f"tss.domains[{i}]: must be a table")
                domains.append(domain_from_dict({**dflt, **item}, f".domains[{i}]"))
        elif d:
            domains.append(domain_from_dict({**dflt, **d}))
        if allow is not None and not isinstance(allow, bool):
            raise TssConfigError(f"tss.allow_cleartext: must be true or false, got {allow!r}")
        return cls(tuple(domains), bool(allow) if allow is not None else not domains,
                   parse_job_sources(sources))


def parse_job_sources(table: Any) -> dict[str, tuple[int, ...]]:
    """``{"10.0.0.1" = [1, 2], ...}``: the jobs each source address may use."""
    if not isinstance(table, Mapping):
        raise TssConfigError("tss.job_sources: must be a table of address = [jobs]")
    out: dict[str, tuple[int, ...]] = {}
    for ip, jobs in table.items():
        addr = _addr("job_sources", ip)
        if isinstance(jobs, int) and not isinstance(jobs, bool):
            jobs = [jobs]
        if not isinstance(jobs, (list, tuple)):
            raise TssConfigError(f"tss.job_sources[{ip}]: must be a list of job IDs")
        out[addr] = tuple(_int(f"job_sources[{ip}]", j, 0, 0xFFFFFF) for j in jobs)
    return out


# --------------------------------------------------------------------------- key files

KEY_FILE_HELP = """\
# uet TSS key file: one secure domain per line, '#' starts a comment
# SDI  MODE     KEY (64 hex digits; 88 for a server-mode client's derived key)  OPTIONS
# 1    direct   000102...1f   job=1
# 2    cluster  000102...1f   job=2 ssi=7 rekey_mask=0xff00
# 3    server   000102...1f   job=3 role=server
"""


def parse_key_file(text: str, source: str = "key file",
                   defaults: Mapping[str, Any] | None = None) -> list[DomainConfig]:
    """Domains from key-file text (format: :data:`KEY_FILE_HELP`, docs/tss.md)."""
    out: list[DomainConfig] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) < 3:
            raise TssConfigError(f"{source}:{n}: expected 'SDI MODE KEY [key=value ...]', "
                                 f"got {raw.strip()!r}")
        d: dict[str, Any] = {**(defaults or {}), "sdi": parts[0], "mode": parts[1],
                             "key": parts[2]}
        for opt in parts[3:]:
            k, sep, v = opt.partition("=")
            if not sep:
                raise TssConfigError(f"{source}:{n}: option {opt!r} is not key=value")
            d[k] = v
        if "job" not in d:
            d["job"] = 0
        if d["mode"] == "server" and "role" not in d:
            d["role"] = "server"  # a key file's server-mode line holds the domain key
        try:
            out.append(domain_from_dict(d, f" ({source}:{n})"))
        except TssConfigError as exc:
            raise TssConfigError(f"{source}:{n}: {exc}") from None
    return out


def load_key_file(path: str | Path,
                  defaults: Mapping[str, Any] | None = None) -> list[DomainConfig]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TssConfigError(f"tss.key_file: cannot read {path}: {exc.strerror or exc}") \
            from None
    return parse_key_file(text, str(path), defaults)


def format_key_file(domains: Iterable[DomainConfig]) -> str:
    """Key-file text for ``domains`` (what :func:`parse_key_file` reads back)."""
    lines = [KEY_FILE_HELP.rstrip("\n")]
    for d in domains:
        opts = [f"job={d.job}"]
        if d.role != "member":
            opts.append(f"role={d.role}")
        if d.ssi is not None:
            opts.append(f"ssi={d.ssi}")
        if d.epoch:
            opts.append(f"epoch={d.epoch}")
        if d.rekey_mask:
            opts.append(f"rekey_mask={d.rekey_mask:#x}")
        lines.append(f"{d.sdi} {d.mode} {d.key.hex()} {' '.join(opts)}")
    return "\n".join(lines) + "\n"


__all__ = ["DomainConfig", "KEY_FILE_HELP", "MODES", "TSC_MAX", "TssConfig",
           "TssConfigError", "domain_from_dict", "format_key_file", "load_key_file",
           "parse_job_sources", "parse_key", "parse_key_file"]
