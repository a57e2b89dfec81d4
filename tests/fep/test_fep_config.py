"""Profile -> PdsConfig / CmsConfig: every key, its unit, overrides and their errors."""

from __future__ import annotations

import pytest

from uet.cms.api import CmsConfig
from uet.endpoint.config import PROFILE_PDS_KEYS, cms_config_from_profile, pds_config_from_profile
from uet.endpoint.fep import FabricEndpoint
from uet.pds.config import PdsConfig, PdsConfigError
from uet.profiles import BUILTIN_PROFILES, SCHEMA, builtin_profile, parse_profile

US, MS = 10**6, 10**9

#: profile [pds] key -> (distinct test value, {PdsConfig field: expected value})
EXPECT = {
    "rto_min_us": (37, {"min_rto_ps": 37 * US}),
    "rto_initial_us": (4321, {"rto_ps": 4321 * MS // 1000}),
    "max_retx": (9, {"max_retries": 9}),
    "mp_range": (384, {"mp_range": 384}),
    "ack_coalesce_bytes": (8192, {"ack_every_bytes": 8192, "ar_every_packet": False}),
    "ack_timer_us": (13, {"ack_timer_ps": 13 * US}),
    "new_pdc_time_ms": (17, {"new_pdc_time_ps": 17 * MS}),
    "close_req_time_ms": (19, {"close_req_time_ps": 19 * MS}),
    "msl_ms": (23, {"msl_ps": 23 * MS}),
    "max_pdcs": (777, {"max_initiator_pdcs": 777, "max_target_pdcs": 777}),
}


def _with_pds(**pds) -> object:
    return parse_profile({"profile": {"name": "t", "extends": "hpc"}, "pds": pds}, "<test>")


def test_every_profile_pds_key_is_mapped():
    keys = {k.split(".", 1)[1] for k in SCHEMA if k.startswith("pds.")}
    assert keys == set(EXPECT)
    assert set(PROFILE_PDS_KEYS) == keys - {"max_pdcs"}


@pytest.mark.parametrize("key", sorted(EXPECT))
def test_profile_key_lands_in_its_field_with_its_unit(key):
    value, want = EXPECT[key]
    base = pds_config_from_profile(_with_pds())
    cfg = pds_config_from_profile(_with_pds(**{key: value}))
    for field_name, expected in want.items():
        assert getattr(cfg, field_name) == expected, field_name
    # nothing else moved
    changed = {f for f in PdsConfig.__slots__ if getattr(cfg, f) != getattr(base, f)}
    assert changed <= set(want)


@pytest.mark.parametrize("name", BUILTIN_PROFILES)
def test_builtin_profiles_map_to_valid_configs(name):
    prof = builtin_profile(name)
    cfg = pds_config_from_profile(name)
    assert cfg.mtu_payload == prof.ses.mtu_payload  # the PDS carries every SES packet
    assert cfg.min_rto_ps == prof.pds["rto_min_us"] * US
    assert cfg.rto_ps == prof.pds["rto_initial_us"] * US
    assert cfg.msl_ps == prof.pds["msl_ms"] * MS
    assert cfg.rto_adaptive and cfg.rack and cfg.sack_dupthresh == 0
    cms = cms_config_from_profile(name)
    assert cms.algorithm == prof.cc_default and cms.ev_selector == prof.cc_ev_selector
    assert cms.trimming == prof.trimming and cms.mtu_payload == prof.ses.mtu_payload


def test_ack_every_packet_and_pdc_cap():
    cfg = pds_config_from_profile(_with_pds(ack_coalesce_bytes=0, max_pdcs=65535))
    assert cfg.ar_every_packet and cfg.ack_every_bytes == 1
    assert cfg.max_initiator_pdcs == cfg.max_target_pdcs == (65535 - 1024) // 2


def test_fixed_then_overrides_apply_on_top():
    cfg = pds_config_from_profile("hpc", {"rto_ps": 7 * MS}, dscp_data=10, rto_ps=1)
    assert cfg.rto_ps == 7 * MS and cfg.dscp_data == 10
    cms = cms_config_from_profile("hpc", {"ev_count": 16}, link_rate_bps=400 * 10**9)
    assert cms.ev_count == 16 and cms.link_rate_bps == 400 * 10**9
    assert isinstance(cms, CmsConfig)


def test_bad_override_keys_name_the_section_and_the_key():
    with pytest.raises(PdsConfigError, match=r"pds\.rto_us: unknown key; allowed: .*rto_ps"):
        pds_config_from_profile("hpc", {"rto_us": 5})
    with pytest.raises(ValueError, match=r"cms\.algo: unknown key; allowed: .*algorithm"):
        cms_config_from_profile("hpc", {"algo": "nscc"})
    with pytest.raises(ValueError, match=r"cms\.algorithm: 'rccc' is not allowed by profile "
                                         r"'ai-base'; allowed: none, nscc"):
        cms_config_from_profile("ai-base", {"algorithm": "rccc"})
    with pytest.raises(PdsConfigError, match=r"pds\.rto_ps: must be an integer"):
        pds_config_from_profile("hpc", {"rto_ps": "5ms"})


def test_pds_mtu_below_the_ses_mtu_is_refused():
    with pytest.raises(PdsConfigError, match=r"pds\.mtu_payload: 2048 is below the profile's "
                                             r"ses\.mtu_payload \(4096\)"):
        pds_config_from_profile("hpc", {"mtu_payload": 2048})
    assert pds_config_from_profile("hpc", {"mtu_payload": 9000}).mtu_payload == 9000


@pytest.mark.parametrize("key,value,field_name", [
    ("ack_timer_us", 0, "ack_timer_ps"), ("mp_range", 100, "mp_range"),
    ("msl_ms", 0, "msl_ps"), ("new_pdc_time_ms", 0, "new_pdc_time_ps")])
def test_profile_value_the_pds_refuses_names_the_profile_key(key, value, field_name):
    with pytest.raises(PdsConfigError, match=rf"profile 't' pds\.{key} = {value}: "
                                             rf"pds\.{field_name}"):
        pds_config_from_profile(_with_pds(**{key: value}))


def test_factory_checks_overrides_before_building_any_host():
    with pytest.raises(PdsConfigError, match=r"pds\.bogus"):
        FabricEndpoint.factory(profile="hpc", pds_overrides={"bogus": 1})
    with pytest.raises(ValueError, match=r"cms\.algorithm"):
        FabricEndpoint.factory(profile="ai-full", host_profiles={1: "ai-base"},
                               cms_overrides={"algorithm": "rccc"})
