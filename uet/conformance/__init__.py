"""Conformance testing: a catalogue of UET protocol checks, the peer that runs them, targets.

* :mod:`~uet.conformance.registry` — the catalogue (``catalogue()``, ``case`` decorator);
  the cases themselves are in :mod:`uet.conformance.cases`.
* :mod:`~uet.conformance.peer` — :class:`Peer`: send crafted packets, ``expect`` /
  ``expect_nothing`` what comes back, with explanations on failure.
* :mod:`~uet.conformance.packets` — stimulus builders on the scapy layers.
* :mod:`~uet.conformance.targets` — in-process (virtual clock) and UDP (``udp:HOST:PORT``)
  targets; :mod:`~uet.conformance.setup` — the well-known setup of the device under test.
* :mod:`~uet.conformance.plugin` — the pytest plugin (fixtures ``uet_peer``, ``uet_target``,
  ``uet_capture``); ``uet conformance`` runs the catalogue through it.
* :mod:`~uet.runtime.responder` — ``uet serve``: the built-in end point on real UDP.

See docs/conformance.md.
"""

from __future__ import annotations

import importlib
from typing import Any

# Exports are loaded on first use, so that the pytest plugin (loaded by every pytest run
# through the ``pytest11`` entry point) does not import scapy unless a test asks for it.
_EXPORTS = {
    "ANY_ACK": "peer", "ConformanceFailure": "peer", "Peer": "peer", "PeerPdc": "peer",
    "Received": "peer", "between": "peer", "has_flags": "peer", "lacks_flags": "peer",
    "not_": "peer", "one_of": "peer", "Case": "registry", "case": "registry",
    "catalogue": "registry", "WELL_KNOWN": "setup", "DutSetup": "setup", "pattern": "setup",
}
_RECORDS = ("PdsAck", "PdsAckCc", "PdsControl", "PdsNack", "PdsRequest", "PdsRudi")

__all__ = sorted([*_EXPORTS, *_RECORDS])


def __getattr__(name: str) -> Any:
    if name in _RECORDS:
        return getattr(importlib.import_module("uet.wire.records"), name)
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'uet.conformance' has no attribute {name!r}")
    return getattr(importlib.import_module(f"uet.conformance.{mod}"), name)
