"""pcapng taps on interfaces (NIC or switch port) and links, timestamped in fabric time.

One :class:`Capture` is one pcapng file; each tap in it is one interface block named after
what it watches (``h0``, ``tor0.p2``, ``h0<->tor0.p0``). An interface tap records frames
the interface transmits (at the start of transmission) and receives (when the last bit
arrived); a link tap records what both ends put on the cable. Timestamps are the virtual
time in ns (ps // 1000). Same seed and configuration give byte-identical files.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING

from uet.capture.pcapng import PcapngWriter

if TYPE_CHECKING:
    from uet.fabric.network import Network
    from uet.fabric.port import Port


class Capture:
    """A pcapng file of one or more taps; ``snaplen`` 0 = whole frames."""

    def __init__(self, path: str | Path | IO[bytes], net: Network, *, snaplen: int = 0) -> None:
        self.net = net
        self.snaplen = snaplen
        if isinstance(path, str | Path):
            self.writer = PcapngWriter.open(path)
        else:
            self.writer = PcapngWriter(path)
        self.frames = 0
        self._hooks: list[tuple[Port, object]] = []
        self._closed = False

    def _add(self, port: Port, if_id: int, directions: tuple[str, ...]) -> None:
        write = self.writer.write_packet

        def tap(now: int, data: bytes, direction: str) -> None:
            if direction in directions:
                self.frames += 1
                write(if_id, now // 1000, data)

        port.taps.append(tap)
        self._hooks.append((port, tap))

    def tap_iface(self, name: str) -> int:
        """Tap interface ``name`` (tx and rx); returns the pcapng interface id."""
        port = self.net.ifaces.get(name)
        if port is None:
            raise KeyError(f"no interface {name!r}")
        if_id = self.writer.add_interface(name, snaplen=self.snaplen)
        self._add(port, if_id, ("tx", "rx"))
        return if_id

    def tap_link(self, name: str) -> int:
        """Tap the link named ``a<->b`` or attached to interface ``name`` (both directions)."""
        link = self.net.link_of.get(name)
        if link is None:
            link = next((lk for lk in self.net.links if lk.name == name), None)
        if link is None:
            raise KeyError(f"no link {name!r}")
        if_id = self.writer.add_interface(link.name, snaplen=self.snaplen)
        for end in (link.a, link.b):
            self._add(self.net.ifaces[end], if_id, ("tx",))
        return if_id

    def close(self) -> None:
        """Detach the taps and close the file."""
        if self._closed:
            return
        self._closed = True
        for port, tap in self._hooks:
            if tap in port.taps:
                port.taps.remove(tap)
        self.writer.close()
