"""Configuration of one fabric end point: profile, PDS and CMS settings in one place.

A profile (``uet/profiles/*.toml``) gives the PDS timers and windows in friendly units
(``pds.rto_min_us`` ...) and the congestion control it allows; experiments and users can
override any :class:`~uet.pds.config.PdsConfig` or :class:`~uet.cms.api.CmsConfig` field on
top. :func:`pds_config_from_profile` and :func:`cms_config_from_profile` do the mapping, so
that the profile files stay the single source of the defaults.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from uet.cms.api import CmsConfig, CmsConfigError
from uet.cms.factory import validate_config
from uet.pds.config import PS_PER_MS, PS_PER_US, PdsConfig, PdsConfigError
from uet.profiles import Profile, load_profile

#: profile ``[pds]`` key -> (PdsConfig field, multiplier to picoseconds or 1)
PROFILE_PDS_KEYS: dict[str, tuple[str, int]] = {
    "rto_min_us": ("min_rto_ps", PS_PER_US),
    "rto_initial_us": ("rto_ps", PS_PER_US),
    "max_retx": ("max_retries", 1),
    "mp_range": ("mp_range", 1),
    "ack_coalesce_bytes": ("ack_every_bytes", 1),
    "ack_timer_us": ("ack_timer_ps", PS_PER_US),
    "new_pdc_time_ms": ("new_pdc_time_ps", PS_PER_MS),
    "close_req_time_ms": ("close_req_time_ps", PS_PER_MS),
    "msl_ms": ("msl_ps", PS_PER_MS),
}


#: profile ``pds.max_pdcs`` bounds both PDC tables
_PDC_LIMITS = {"max_pdcs": ("max_initiator_pdcs", 1)}


def as_profile(profile: Profile | str) -> Profile:
    """A loaded profile from a profile object, a built-in name or a file path."""
    return profile if isinstance(profile, Profile) else load_profile(profile)


def pds_config_from_profile(profile: Profile | str, overrides: dict[str, Any] | None = None,
                            **fixed: Any) -> PdsConfig:
    """The PdsConfig a profile implies, with ``fixed`` then ``overrides`` applied on top.

    Profiles give an initial RTO and a minimum one, so the adaptive RTO estimator is on
    (srtt + 4 rttvar within [rto_min, max_rto]); ``ack_coalesce_bytes = 0`` means an ACK for
    every packet. ``max_pdcs`` bounds initiator and target PDCs alike. Losses are found
    from SACK gaps by time (``rack``, reorder tolerant: one retransmission per lost packet,
    none on the lossless htsim rows), not by the SACK duplicate count: sprayed packets
    arrive out of order by design, and a "3 later packets were SACKed" rule retransmits
    most of a sprayed flow spuriously (measured: 604 retransmissions for 489 packets on the
    htsim permutation). Trimming NACKs and the RTO (the backstop) do the rest.
    """
    prof = as_profile(profile)
    values: dict[str, Any] = {"rto_adaptive": True, "mtu_payload": prof.ses.mtu_payload,
                              "rack": True, "sack_dupthresh": 0}
    for key, value in prof.pds.items():
        if key == "max_pdcs":
            cap = min(int(value), (65535 - 1024) // 2)
            values["max_initiator_pdcs"] = values["max_target_pdcs"] = cap
            continue
        if key == "ack_coalesce_bytes" and value == 0:
            values["ar_every_packet"] = True
            values["ack_every_bytes"] = 1
            continue
        field_name, scale = PROFILE_PDS_KEYS[key]
        values[field_name] = int(value) * scale
    start = prof.values.get("tss.start_psn")
    if start is not None:
        values["secure_start_psn"] = start
    values.update(fixed)
    values.update(overrides or {})
    known = {f.name for f in fields(PdsConfig)}
    for key in values:
        if key not in known:
            raise PdsConfigError(f"pds.{key}: unknown key; allowed: {', '.join(sorted(known))}")
    if values["mtu_payload"] < prof.ses.mtu_payload:
        raise PdsConfigError(f"pds.mtu_payload: {values['mtu_payload']} is below the profile's "
                             f"ses.mtu_payload ({prof.ses.mtu_payload}): the PDS must carry "
                             "every SES packet")
    try:
        return PdsConfig(**values)
    except PdsConfigError as exc:
        # a value the profile gave: name the profile key too, not only the PdsConfig field
        field_name = str(exc).split(":", 1)[0].removeprefix("pds.")
        for key, (target, _) in {**PROFILE_PDS_KEYS, **_PDC_LIMITS}.items():
            if (target == field_name and key in prof.pds
                    and field_name not in (overrides or {})):
                raise PdsConfigError(f"profile {prof.name!r} pds.{key} = {prof.pds[key]}: "
                                     f"{exc}") from None
        raise


#: profile ``[tss]`` keys that are defaults of every secure domain
PROFILE_TSS_KEYS = ("replay_window", "auth_fail_threshold", "max_epoch_lifetime")


def tss_defaults_from_profile(profile: Profile | str) -> dict[str, Any]:
    """The secure-domain defaults a profile gives (``[tss]``, docs/tss.md)."""
    prof = as_profile(profile)
    return {k: prof.values[f"tss.{k}"] for k in PROFILE_TSS_KEYS if f"tss.{k}" in prof.values}


def cms_config_from_profile(profile: Profile | str, overrides: dict[str, Any] | None = None,
                            **fixed: Any) -> CmsConfig:
    """The CmsConfig a profile implies (its default algorithm, EV selector, trimming), with
    ``fixed`` then ``overrides`` applied. An algorithm the profile does not allow is refused."""
    prof = as_profile(profile)
    cfg = CmsConfig(ev_selector=prof.cc_ev_selector, algorithm=prof.cc_default,
                    trimming=prof.trimming, mtu_payload=prof.ses.mtu_payload)
    values = {**fixed, **(overrides or {})}
    known = {f.name for f in fields(CmsConfig)}
    for key in values:
        if key not in known:
            raise CmsConfigError(f"cms.{key}: unknown key; allowed: {', '.join(sorted(known))}")
    cfg = replace(cfg, **values)
    parts = [] if cfg.algorithm == "none" else cfg.algorithm.split("+")
    if any(part not in prof.cc_algorithms for part in parts):
        allowed = ["none", *prof.cc_algorithms]
        if set(prof.cc_algorithms) >= {"nscc", "rccc"}:
            allowed.append("nscc+rccc")
        raise CmsConfigError(f"cms.algorithm: {cfg.algorithm!r} is not allowed by profile "
                         f"{prof.name!r}; allowed: {', '.join(allowed)}")
    return validate_config(cfg)
