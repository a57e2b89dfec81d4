"""What congestion control saw and did during a run, and where sprayed load went.

Two recorders the runner's sampler feeds into ``timeseries.json`` (shapes in
:mod:`uet.experiments.timeseries`):

* :class:`FlowSignals`: the fabric's drops and trims so far (counted from the log), and per
  traced flow the congestion signals its sender got and its
  reactions, each ``[t_ps, kind]``: ``nack`` (a NACK received: a trimmed or refused packet),
  ``rto`` (a retransmission timeout), ``loss`` (a loss found from SACK gaps or by time,
  RACK), ``ecn_cut`` (NSCC's multiplicative decrease on ECN echoes with a high delay),
  ``quick_adapt`` (NSCC's quick adapt: the window set to what was delivered). NACKs and
  retransmissions come from the structured event log; NSCC's reactions from its own counters,
  read at every sample (so they are stamped with the sample time). The cwnd plot marks them.
* :class:`EvLoad`: data bytes each host sent per entropy value (the UDP source port of its
  requests), counted by a tap on each host NIC: how a sender spread its packets over EVs.

Both only read the end points and frames; nothing here changes what the run does.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from uet import native as _native
from uet.fabric.eventlog import EventLog
from uet.wire.constants import UET_UDP_PORT

#: the kinds of flow events, in the order the plot's legend lists them
KINDS = ("nack", "loss", "rto", "ecn_cut", "quick_adapt")
#: PDS types of requests (data), the top 5 bits of the first PDS byte
_REQUEST_TYPES = frozenset({2, 3, 4, 6, 13, 14})
_ETH_IPV4 = b"\x08\x00"
_ETH_IPV6 = b"\x86\xdd"
_UET_PORT = UET_UDP_PORT.to_bytes(2, "big")
_UET_PORT_INT = int(UET_UDP_PORT)

# EvLoad's tap in C (uet/native/codec_core.c), unless UET_PURE_PYTHON=1 or not built
_EvTally: Any = None
if not _native.FORCED_PURE:
    try:
        from uet.native._codec_core import EvTally as _EvTally  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - the extension is optional
        _EvTally = None


class FlowSignals:
    """Congestion signals and reactions per traced flow (see the module docstring).

    ``hosts`` maps a host name (``"h3"``) to its index. The sampler tells which PDC carries
    which traced flow (:meth:`sample`); events of a PDC not (yet) seen are not attributed.
    """

    def __init__(self, log: EventLog, hosts: dict[str, int]) -> None:
        self.events: dict[str, list[list[Any]]] = {}
        self.drops = 0
        self.trims = 0
        self._hosts = hosts
        self._flow_of: dict[tuple[int, int], str] = {}
        self._seen: dict[str, tuple[int, int]] = {}
        log.subscribe(self._on_event)

    def _add(self, label: str, t: int, kind: str) -> None:
        self.events.setdefault(label, []).append([t, kind])

    def _on_event(self, rec: dict[str, Any]) -> None:
        ev = rec["event"]
        if ev == "drop":
            self.drops += 1
            return
        if ev == "trim":
            self.trims += 1
            return
        if ev not in ("nack_rx", "retransmit"):
            return
        host = self._hosts.get(rec.get("host", ""))
        label = self._flow_of.get((host, rec.get("pdc_id")))  # type: ignore[arg-type]
        if label is None:
            return
        if ev == "nack_rx":
            self._add(label, rec["t_ps"], "nack")
            return
        cause = str(rec.get("cause", ""))
        if cause == "rto":
            self._add(label, rec["t_ps"], "rto")
        elif not cause.startswith("nack"):  # a NACK's retransmission is its NACK's mark
            self._add(label, rec["t_ps"], "loss")

    def sample(self, now: int, host: int, pdc: Any, label: str) -> None:
        """The traced flow ``label`` runs on ``pdc`` of ``host``: attribute its events, and
        stamp NSCC reactions that happened since the last sample."""
        self._flow_of[host, pdc.pdc_id] = label
        nscc = getattr(getattr(pdc, "cc", None), "nscc", None)
        stats = getattr(nscc, "stats", None)
        if stats is None:
            return
        now_counts = (stats["multiplicative_decrease"], stats["quick_adapt"])
        before = self._seen.get(label, (0, 0))
        if now_counts != before:
            for kind, n, m in zip(("ecn_cut", "quick_adapt"), now_counts, before, strict=True):
                if n > m:
                    self._add(label, now, kind)
            self._seen[label] = now_counts


class EvLoad:
    """Data bytes per (host, EV): a tap on every host NIC counting the UET requests it
    transmits (UDP to port 4793, IPv4 without options or IPv6) by UDP source port."""

    def __init__(self, nics: list[Any]) -> None:
        self.bytes: dict[str, Counter[int]] = {}
        self._taps: list[tuple[Any, Any]] = []
        for nic in nics:
            tap = self._tap(self.bytes.setdefault(nic.name, Counter()))
            nic.taps.append(tap)
            self._taps.append((nic, tap))

    @staticmethod
    def _tap(counts: Counter[int]) -> Any:
        """The tap counting into ``counts``: the C one when built (a C callable, which the
        fabric's C path calls without entering the interpreter), else :meth:`py_tap`."""
        if _EvTally is not None:
            return _EvTally(counts, _UET_PORT_INT, _REQUEST_TYPES)
        return EvLoad.py_tap(counts)

    @staticmethod
    def py_tap(counts: Counter[int]) -> Any:
        """The reference tap (``uet/native/codec_core.c``'s ``EvTally`` matches it)."""
        def tap(now: int, data: bytes, direction: str) -> None:
            if direction != "tx" or len(data) < 24:
                return
            # IPv4 without options, UDP to the UET port: byte tests, no slices (per frame)
            if data[12] == 8 and not data[13] and data[14] == 0x45 and data[23] == 17:
                if len(data) <= 42 or data[36] << 8 | data[37] != _UET_PORT_INT:
                    return
                if data[42] >> 3 in _REQUEST_TYPES:
                    counts[data[34] << 8 | data[35]] += len(data)
                return
            if data[12:14] == _ETH_IPV6 and data[20] == 17:
                udp = 54
            else:
                return
            if data[udp + 2:udp + 4] != _UET_PORT or len(data) <= udp + 8:
                return
            if data[udp + 8] >> 3 in _REQUEST_TYPES:
                counts[int.from_bytes(data[udp:udp + 2], "big")] += len(data)

        return tap

    def close(self) -> dict[str, dict[str, int]]:
        """Detach the taps; the counts as plain data (hosts that sent data only)."""
        for nic, tap in self._taps:
            if tap in nic.taps:
                nic.taps.remove(tap)
        self._taps = []
        return {host: {str(ev): n for ev, n in sorted(c.items())}
                for host, c in self.bytes.items() if c}
