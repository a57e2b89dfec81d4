"""The only package that imports Trio: the ``Fabric``/``Host`` API, live UDP, the responder.

* :class:`~uet.runtime.fabric.Fabric` — ``async with Fabric(topology, seed=...) as fab``:
  the emulated fabric (virtual or real time) driven from Trio; :mod:`uet.runtime.host` is
  the per-host operation API.
* :class:`~uet.runtime.udp.UdpNode` — the real end point on real UDP sockets
  (:mod:`uet.runtime.sockets`).
* :mod:`uet.runtime.responder` — ``uet serve``.

Everything below this package (``uet.wire``, ``uet.pds``, ``uet.ses``, ``uet.cms``,
``uet.endpoint``, ``uet.fabric`` ...) is sans-IO and never imports Trio
(``tests/test_architecture.py``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Fabric", "FabricStalled", "Host", "UdpNode"]


def __getattr__(name: str) -> Any:  # lazy, so that `import uet.runtime` stays cheap
    if name in ("Fabric", "FabricStalled"):
        from uet.runtime import fabric

        return getattr(fabric, name)
    if name == "Host":
        from uet.runtime.host import Host

        return Host
    if name == "UdpNode":
        from uet.runtime.udp import UdpNode

        return UdpNode
    raise AttributeError(f"module 'uet.runtime' has no attribute {name!r}")
