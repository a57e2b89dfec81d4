"""Settings of the RoCEv2 stack: the RC queue pair attributes, the NIC, DCQCN.

Every field has the default documented in ``docs/roce.md``. :meth:`RoceConfig.from_dict`
builds one from a TOML-style table (``[transport.roce]``, with ``[transport.roce.dcqcn]``
inside); a bad key or value raises :class:`RoceConfigError` naming ``roce.<key>`` (or
``roce.dcqcn.<key>``) and the allowed values.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from uet.errors import ConfigError

#: the path MTUs InfiniBand (and so RoCE) defines
IB_MTUS = (256, 512, 1024, 2048, 4096)


class RoceConfigError(ConfigError):
    """A bad ``roce.*`` setting; the message names the key and the allowed values."""


@dataclass
class DcqcnConfig:
    """DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
    SIGCOMM 2015). The defaults are those of the UEC htsim tree's ``htsim_roce``
    (``dcqcn.cpp``): g = 1/256, alpha starting at 1, the alpha and rate-increase timers at
    55 us, a 10 MB byte counter, F = 5 fast-recovery steps, the additive and hyper
    increase steps at 1/20 and 1/10 of the line rate, one CNP per 50 us per QP at most.

    ``rai_mbps`` / ``rhai_mbps`` None: line rate / 20 and / 10. ``min_rate_mbps``: the
    rate never falls below it. ``min_decrease_interval_us``: CNPs arriving sooner after
    a rate decrease are counted but do not cut the rate again (0: every CNP cuts).
    """

    enabled: bool = True
    g: float = 1 / 256
    alpha_init: float = 1.0
    alpha_timer_us: float = 55.0
    rate_timer_us: float = 55.0
    byte_counter: int = 10_000_000
    threshold_f: int = 5
    rai_mbps: float | None = None
    rhai_mbps: float | None = None
    min_rate_mbps: float = 1.0
    min_decrease_interval_us: float = 0.0
    cnp_interval_us: float = 50.0

    def __post_init__(self) -> None:
        _check_bool(self, "dcqcn.", "enabled")
        _check_num(self, "dcqcn.", "g", 0.0, 1.0, open_lo=True)
        _check_num(self, "dcqcn.", "alpha_init", 0.0, 1.0)
        for name in ("alpha_timer_us", "rate_timer_us"):
            _check_num(self, "dcqcn.", name, 0.0, None, open_lo=True)
        _check_int(self, "dcqcn.", "byte_counter", 1, None)
        _check_int(self, "dcqcn.", "threshold_f", 0, 1000)
        for name in ("rai_mbps", "rhai_mbps"):
            if getattr(self, name) is not None:
                _check_num(self, "dcqcn.", name, 0.0, None)
        _check_num(self, "dcqcn.", "min_rate_mbps", 0.0, None, open_lo=True)
        _check_num(self, "dcqcn.", "min_decrease_interval_us", 0.0, None)
        _check_num(self, "dcqcn.", "cnp_interval_us", 0.0, None)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DcqcnConfig:
        """Build from a TOML-style table; unknown keys fail naming the allowed ones."""
        return _from_dict(cls, d, "dcqcn.")


@dataclass
class RoceConfig:
    """The RC transport, the NIC and DCQCN (see ``docs/roce.md`` for each field).

    QP attributes use the InfiniBand encodings: ``timeout`` is the local ACK timeout
    exponent (4.096 us x 2**timeout; 0 = wait forever), ``retry_cnt`` and ``rnr_retry``
    are 3-bit counts (``rnr_retry`` 7 = retry RNR NAKs forever), ``min_rnr_timer`` is the
    5-bit RNR NAK timer code the responder puts in its RNR NAKs.
    """

    mtu: int = 4096
    qps_per_flow: int = 1
    ack_coalesce: int = 1
    ackreq_every: int = 0
    timeout: int = 8
    retry_cnt: int = 7
    rnr_retry: int = 7
    min_rnr_timer: int = 12
    irn: bool = False
    irn_window: int = 256
    irn_rto_low_us: float = 100.0
    irn_rto_high_us: float = 320.0
    irn_low_threshold: int = 3
    max_inflight_packets: int = 0
    dscp_data: int = 26
    dscp_ack: int | None = None
    dscp_cnp: int | None = None
    ecn_capable: bool = True
    verify_icrc: bool = True
    auto_post_recv: bool = True
    start_psn: int = -1
    max_wqes: int = 4096
    dcqcn: DcqcnConfig = field(default_factory=DcqcnConfig)

    def __post_init__(self) -> None:
        if isinstance(self.dcqcn, dict):
            self.dcqcn = DcqcnConfig.from_dict(self.dcqcn)
        if self.mtu not in IB_MTUS:
            raise RoceConfigError(f"roce.mtu={self.mtu!r}: allowed one of "
                                  + ", ".join(map(str, IB_MTUS)))
        _check_int(self, "", "qps_per_flow", 1, 64)
        _check_int(self, "", "ack_coalesce", 1, 1 << 16)
        _check_int(self, "", "ackreq_every", 0, 1 << 16)
        _check_int(self, "", "timeout", 0, 31)
        _check_int(self, "", "retry_cnt", 0, 7)
        _check_int(self, "", "rnr_retry", 0, 7)
        _check_int(self, "", "min_rnr_timer", 0, 31)
        _check_bool(self, "", "irn")
        _check_int(self, "", "irn_window", 1, 1 << 20)
        _check_num(self, "", "irn_rto_low_us", 0.0, None, open_lo=True)
        _check_num(self, "", "irn_rto_high_us", 0.0, None, open_lo=True)
        _check_int(self, "", "irn_low_threshold", 0, 1 << 20)
        _check_int(self, "", "max_inflight_packets", 0, 1 << 22)
        _check_int(self, "", "dscp_data", 0, 63)
        for name in ("dscp_ack", "dscp_cnp"):
            if getattr(self, name) is not None:
                _check_int(self, "", name, 0, 63)
        for name in ("ecn_capable", "verify_icrc", "auto_post_recv"):
            _check_bool(self, "", name)
        _check_int(self, "", "start_psn", -1, 0xFFFFFF)
        _check_int(self, "", "max_wqes", 1, 1 << 20)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RoceConfig:
        """Build from a TOML-style table; unknown keys fail naming the allowed ones."""
        return _from_dict(cls, d, "")


def _from_dict(cls: Any, d: dict[str, Any], prefix: str) -> Any:
    if not isinstance(d, dict):
        raise RoceConfigError(f"roce.{prefix.rstrip('.') or 'table'}: must be a table")
    names = [f.name for f in dataclasses.fields(cls)]
    bad = sorted(set(d) - set(names))
    if bad:
        raise RoceConfigError(f"roce.{prefix}{bad[0]}: unknown key; allowed: "
                              + ", ".join(names))
    return cls(**d)


def _fail(prefix: str, name: str, value: Any, allowed: str) -> RoceConfigError:
    return RoceConfigError(f"roce.{prefix}{name}={value!r}: allowed {allowed}")


def _check_int(obj: Any, prefix: str, name: str, lo: int, hi: int | None) -> None:
    v = getattr(obj, name)
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
        rng = f"an integer in [{lo}, {hi}]" if hi is not None else f"an integer >= {lo}"
        raise _fail(prefix, name, v, rng)


def _check_num(obj: Any, prefix: str, name: str, lo: float, hi: float | None, *,
               open_lo: bool = False) -> None:
    v = getattr(obj, name)
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) \
        and (v > lo if open_lo else v >= lo) and (hi is None or v <= hi)
    if not ok:
        lo_txt = f"> {lo:g}" if open_lo else f">= {lo:g}"
        raise _fail(prefix, name, v, f"a number {lo_txt}" + (f" and <= {hi:g}" if hi is not None
                                                             else ""))
    setattr(obj, name, float(v))


def _check_bool(obj: Any, prefix: str, name: str) -> None:
    v = getattr(obj, name)
    if not isinstance(v, bool):
        raise _fail(prefix, name, v, "true or false")
