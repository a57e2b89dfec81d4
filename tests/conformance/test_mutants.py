"""The mutation harness (benchmarks/conformance_mutants.py) cannot rot: every mutant still
applies to the current code, and the four bugs the catalogue used to miss are killed, each
by the case written for it, through the harness's own code. The full harness (every mutant,
the UDP subset) is a benchmark: docs/conformance.md has its score and runtime."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "conformance_mutants.py"
_spec = importlib.util.spec_from_file_location("conformance_mutants", _PATH)
assert _spec is not None and _spec.loader is not None
cm = importlib.util.module_from_spec(_spec)
sys.modules["conformance_mutants"] = cm
_spec.loader.exec_module(cm)

#: issue 22's four missing rules: mutant -> the new case that must kill it
MISSING_RULES = {
    "pds.dup-above-gap": "PDS-DUP-002",
    "ses.msg-error-no-history": "SES-OP-024",
    "pds.invalid-syn-boundary": "PDS-EST-008",
    "pds.cp-data-dscp": "PDS-CP-012",
}


def test_every_mutant_applies_to_the_current_code():
    """A mutant whose text moved fails here (and the harness refuses to run)."""
    cm.check_all_apply(cm.MUTANTS)
    assert len(cm.MUTANTS) >= 40
    assert len({m.name for m in cm.MUTANTS}) == len(cm.MUTANTS)
    areas = {m.area for m in cm.MUTANTS}
    assert {"PDS", "SES", "RUDI/UUD", "CMS", "profiles", "TSS"} <= areas


def test_a_stale_mutant_fails_loudly(tmp_path):
    stale = cm.Mutant("stale", "PDS", "pds/target.py",
                      (("this text is not in the file", "x"),), "moved code")
    with pytest.raises(cm.PatchError, match="occurs 0 times in uet/pds/target.py"):
        cm.check_all_apply([stale])
    twice = cm.Mutant("twice", "PDS", "pds/target.py", (("self", "me"),), "ambiguous")
    with pytest.raises(cm.PatchError, match="expected once"):
        cm.check_all_apply([twice])
    broken = cm.Mutant("broken", "PDS", "pds/target.py",
                       (("class TargetPdc(PdcBase):", "class TargetPdc(PdcBase"),), "syntax")
    with pytest.raises(cm.PatchError, match="does not compile"):
        cm.check_all_apply([broken])


def test_the_four_missing_rules_are_killed_by_their_new_cases():
    """Each mutant runs the whole catalogue in process from a mutated copy of the package;
    its new case fails, and the unmutated copy passes every case."""
    mutants = [m for m in cm.MUTANTS if m.name in MISSING_RULES]
    assert len(mutants) == 4
    baseline, outcomes = cm.run_mutants(mutants, jobs=2, udp=False)
    assert not baseline.killed, cm.cases_text(baseline)
    for o in outcomes:
        assert not o.problem, (o.name, o.problem)
        assert MISSING_RULES[o.name] in o.inprocess, (o.name, sorted(o.inprocess))
        assert set(o.mutant.targets) <= set(o.inprocess), (o.name, sorted(o.inprocess))
    assert cm.target_misses(outcomes) == []
    lines = cm.table(outcomes)
    assert lines[0].startswith("| mutant") and len(lines) == 2 + len(outcomes)


def test_every_target_names_a_catalogue_case():
    """A target is a case ID; a renumbered case (the PDS-RNK IDs follow their tables) must
    be renamed in the harness too, or "every new case fails on its bug" would check nothing."""
    from uet.conformance.registry import catalogue

    ids = {c.id for c in catalogue()}
    for m in cm.MUTANTS:
        assert set(m.targets) <= ids, (m.name, sorted(set(m.targets) - ids))


#: cosmic-ray survivors (benchmarks/cosmic_ray_sample.py) written as hand-made mutants
COSMIC_RAY_SURVIVORS = ("pds.spdcid-below-accepted", "pds.spdcid-above-accepted",
                        "pds.ack-spdcid-one-way",
                        "pds.nack-spdcid-one-way", "pds.cp-ack-retx-always",
                        "cms.dscp-above-lasthop-trimmed", "ses.one-packet-no-som")


def test_the_cosmic_ray_survivors_are_killed_by_their_cases():
    """Only the target cases run (the whole catalogue per mutant is the benchmark's job);
    the unmutated copy passes them."""
    mutants = [m for m in cm.MUTANTS if m.name in COSMIC_RAY_SURVIVORS]
    assert len(mutants) == len(COSMIC_RAY_SURVIVORS)
    targets = sorted({t for m in mutants for t in m.targets})
    baseline, outcomes = cm.run_mutants(mutants, jobs=2, udp=False, cases=targets)
    assert not baseline.killed, cm.cases_text(baseline)
    for o in outcomes:
        assert not o.problem, (o.name, o.problem)
    assert cm.target_misses(outcomes) == []


def test_the_tss_mutants_are_killed_by_their_cases():
    """Issue 14's mutants (one per TSS rule) against the TSS cases only, in process."""
    mutants = [m for m in cm.MUTANTS if m.area == "TSS"]
    assert len(mutants) >= 8
    ids = sorted({t for m in mutants for t in m.targets})
    baseline, outcomes = cm.run_mutants(mutants, jobs=2, udp=False, cases=ids)
    assert not baseline.killed, cm.cases_text(baseline)
    for o in outcomes:
        assert not o.problem, (o.name, o.problem)
        assert set(o.mutant.targets) <= set(o.inprocess), (o.name, sorted(o.inprocess))
