"""The emulated fabric: NICs, switches, links, topologies, taps and live UDP mode.

Entry points: :class:`uet.fabric.api.Fabric` (``async with Fabric(topology, seed=...) as
fab``), :class:`uet.fabric.udp.UdpNode` (real sockets), :func:`uet.fabric.topology.build`
and :class:`uet.fabric.network.Network` (no Trio). See ``docs/fabric.md``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Fabric", "FabricStalled", "UdpNode", "Network", "build_topology"]


def __getattr__(name: str) -> Any:  # lazy: importing uet.fabric.clock must not pull in trio
    if name in ("Fabric", "FabricStalled"):
        from uet.fabric import api

        return getattr(api, name)
    if name == "UdpNode":
        from uet.fabric.udp import UdpNode

        return UdpNode
    if name == "Network":
        from uet.fabric.network import Network

        return Network
    if name == "build_topology":
        from uet.fabric.topology import build

        return build
    raise AttributeError(f"module 'uet.fabric' has no attribute {name!r}")
