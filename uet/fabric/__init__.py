"""The emulated fabric: NICs, switches, links, impairments, topologies, taps (no Trio).

:func:`uet.fabric.topology.build` and :class:`uet.fabric.network.Network` are the models and
the virtual-time driver; the Trio front end (:class:`uet.runtime.fabric.Fabric`, live UDP in
:mod:`uet.runtime.udp`) lives in :mod:`uet.runtime`. ``Fabric``, ``FabricStalled`` and
``UdpNode`` stay importable from here for existing scripts. See ``docs/fabric.md``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Fabric", "FabricStalled", "UdpNode", "Network", "build_topology"]


def __getattr__(name: str) -> Any:  # lazy: importing uet.fabric.clock must not pull in trio
    if name in ("Fabric", "FabricStalled"):
        from uet.runtime import fabric

        return getattr(fabric, name)
    if name == "UdpNode":
        from uet.runtime.udp import UdpNode

        return UdpNode
    if name == "Network":
        from uet.fabric.network import Network

        return Network
    if name == "build_topology":
        from uet.fabric.topology import build

        return build
    raise AttributeError(f"module 'uet.fabric' has no attribute {name!r}")
