"""What the fabric's NIC drives: the sans-IO ``FrameEndpoint`` shape, and what it gets.

``uet.endpoint.fep.FabricEndpoint`` (and ``uet.bench.traffic_endpoint.TrafficEndpoint``, the
fabric's own test/bench end point) have this shape. Time is integer picoseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from uet.fabric.qos import QosConfig


@runtime_checkable
class FrameEndpoint(Protocol):
    """A sans-IO end point speaking whole Ethernet frames (bytes)."""

    def receive(self, now: int, data: bytes) -> None:
        """A frame addressed to this end point arrived."""

    def pop_control(self, now: int) -> bytes | None:
        """Next ACK/NACK/control frame (high-priority class), or None."""

    def pop_data(self, now: int) -> bytes | None:
        """Next request frame (window/CC gated), or None."""

    def next_deadline(self) -> int | None:
        """Earliest time ``handle_timer`` must be called, or None."""

    def handle_timer(self, now: int) -> None:
        """Timers due at ``now``."""


@dataclass
class HostContext:
    """What an ``endpoint_factory(ctx)`` learns about the host it runs on.

    ``peers`` maps every host index to its IP and MAC (a fabric has no ARP: the end point
    addresses frames itself); every host's context holds the same map: read it, do not
    change it. ``log(now, event, **fields)`` writes to the fabric event log.
    ``seed`` is a per-host seed derived from the fabric seed.
    """

    index: int
    name: str
    ip: str
    mac: str
    rate_bps: int
    qos: QosConfig
    seed: int
    peers: dict[int, tuple[str, str]] = field(default_factory=dict)
    gateway_mac: str = "02:ff:00:00:00:01"
    log: Callable[..., None] = lambda now, event, **fields: None
    extra: dict[str, Any] = field(default_factory=dict)

    def mac_of(self, ip: str) -> str:
        """Destination MAC for a frame to ``ip`` (the peer's MAC: switches do not rewrite)."""
        for pip, pmac in self.peers.values():
            if pip == ip:
                return pmac
        return self.gateway_mac


EndpointFactory = Callable[[HostContext], FrameEndpoint]
