"""The catalogue as pytest tests: one ``test_conformance[<ID>]`` per case.

``uet conformance`` runs this module with the :mod:`uet.conformance.plugin`; it can also be
run directly: ``pytest --pyargs uet.conformance.suite --uet-dut udp:127.0.0.2:4793``
(select cases with ``-k PDS-EST``).
"""

from __future__ import annotations

import pytest

from uet.conformance.registry import catalogue

CASES = catalogue()


@pytest.mark.parametrize("uet_case", CASES, ids=[c.id for c in CASES])
def test_conformance(uet_case, uet_peer) -> None:
    """Run one catalogue case against the end point under test."""
    uet_case.fn(uet_peer)
