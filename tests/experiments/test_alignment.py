"""The experiment schema uses the fabric's and the CMS's own key names."""

from __future__ import annotations

import dataclasses

from uet.experiments.impairments import FABRIC_KEYS
from uet.experiments.schema import CC_ALGORITHMS, EV_SELECTORS, TABLES


def test_topology_keys_are_the_fabrics() -> None:
    from uet.fabric.topology import COMMON, KINDS

    fabric = set(COMMON) | {k for kind in KINDS.values() for k in kind}
    assert set(TABLES["topology"].keys) == fabric - {"impairments"}
    assert set(TABLES["topology"].keys["kind"].choices) == set(KINDS)


def test_impairment_and_pfc_keys_are_the_fabrics() -> None:
    from uet.fabric.impairments import GilbertElliott, Impairments
    from uet.fabric.pfc import PfcConfig

    fields = {f.name for f in dataclasses.fields(Impairments)}
    assert set(FABRIC_KEYS) | {"gilbert", "corrupt_bits", "down", "seed"} <= fields
    assert fields - {"rate_bps"} <= set(TABLES["impairments"].keys)
    assert set(TABLES["impairments.gilbert"].keys) == {
        f.name for f in dataclasses.fields(GilbertElliott)}
    assert set(TABLES["topology.pfc"].keys) == {f.name for f in dataclasses.fields(PfcConfig)}


def test_cms_names_are_the_cms() -> None:
    from uet.cms.api import CmsConfig
    from uet.cms.ev_selection import SELECTORS
    from uet.cms.factory import ALGORITHMS

    assert set(EV_SELECTORS) == set(SELECTORS) and set(CC_ALGORITHMS) == set(ALGORITHMS)
    names = {f.name for f in dataclasses.fields(CmsConfig)}
    assert set(TABLES["transport.cms"].keys) <= names
