"""The only package that imports Trio: the ``Fabric``/``Host`` API, live UDP, the responder.

* :class:`~uet.runtime.fabric.Fabric` — ``async with Fabric(topology, seed=...) as fab``:
  the emulated fabric (virtual or real time) driven from Trio; :mod:`uet.runtime.host` is
  the per-host operation API.
* :class:`~uet.runtime.udp.UdpNode` — the real end point on real UDP sockets
  (:mod:`uet.runtime.sockets`).
* :class:`~uet.runtime.live.LiveFabric` — the same fabric in real time: NICs and
  switches as Trio tasks exchanging real frames (:mod:`uet.runtime.wire`).
* :mod:`uet.runtime.responder` — ``uet serve``.
* :func:`run` — ``trio.run`` for the drivers outside this package.

Everything below this package (``uet.wire``, ``uet.pds``, ``uet.ses``, ``uet.cms``,
``uet.endpoint``, ``uet.fabric`` ...) is sans-IO and never imports Trio
(``tests/test_architecture.py``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Fabric", "FabricStalled", "Host", "LiveFabric", "UdpNode", "run"]


def run(async_fn: Any, *args: Any) -> Any:
    """Run ``async_fn(*args)`` to completion under Trio and return its result.

    The drivers outside this package (``uet run``, ``uet bench``, ``uet serve``) call this
    instead of importing Trio: their async code only awaits the fabric's own API."""
    import trio

    return trio.run(async_fn, *args)


def __getattr__(name: str) -> Any:  # lazy, so that `import uet.runtime` stays cheap
    if name in ("Fabric", "FabricStalled"):
        from uet.runtime import fabric

        return getattr(fabric, name)
    if name == "Host":
        from uet.runtime.host import Host

        return Host
    if name == "LiveFabric":
        from uet.runtime.live import LiveFabric

        return LiveFabric
    if name == "UdpNode":
        from uet.runtime.udp import UdpNode

        return UdpNode
    raise AttributeError(f"module 'uet.runtime' has no attribute {name!r}")
