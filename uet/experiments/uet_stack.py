"""The runner of an experiment on the UET stack: the fabric, the hosts' real end points,
the workload played on them (:func:`uet.experiments.runner.run_experiment` picks it, or
the RoCE baseline's subclass in :mod:`uet.experiments.roce_stack`).

:class:`Runner` builds the fabric of ``[topology]`` (virtual, or live with ``[live]``),
applies ``[[impairments]]``, attaches a real :class:`~uet.endpoint.fep.FabricEndpoint`
(SES + PDS + CMS) per host configured by ``[transport]``, and plays the ``[traffic]``
workload on it: every flow is one RMA WRITE of ``size`` bytes into the destination's sink
region, started when its start time comes and its dependencies (collectives, pairwise
steps, htsim triggers) have completed; a flow completes when the WRITE's response reaches
its sender, i.e. when its data is placed at the target. (UUD carries only single-packet
datagrams, so experiments run over RUD, ROD or RUDI; under RUDI the sink region is marked
idempotent-safe, which a sink of bulk data is: a re-executed WRITE puts the same bytes in
the same place.) Collectives carry real bytes
(:class:`~uet.experiments.collectives.ByteState`) written at their own offset of the
receiver's sink, and are checked byte for byte at the end.

The run stops when every flow is delivered (then, with ``experiment.drain``, it runs on
until every PDC has closed, so closes are counted and captured), when nothing is left to
do (``stalled``: a message failed and what depends on it cannot start), at
``experiment.time_limit_us`` or after ``experiment.wall_limit_s``.
"""

from __future__ import annotations

import operator
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from uet.endpoint.fep import SINK_INDEX, SINK_KEY, DeliveryAudit, FabricEndpoint
from uet.experiments.collectives import ByteState
from uet.experiments.collector import paused_collector, quiet_collector
from uet.experiments.config import error_at, fabric_topology, resolve_path
from uet.experiments.ideal import TopologyModel, WireFormat
from uet.experiments.impairments import plan
from uet.experiments.ops import OpRunner
from uet.experiments.progress import RunProgress
from uet.experiments.report import write_outputs
from uet.experiments.results import build_results, check_results
from uet.experiments.signals import EvLoad, FlowSignals
from uet.experiments.timeseries import ChangeRecorder, Points, SeriesRecorder, flow_label
from uet.experiments.traffic import build_workload, traffic_seed
from uet.experiments.workload import DependencyTracker, Flow, Workload
from uet.fabric.eventlog import EventLog, level_filter
from uet.fabric.network import Network
from uet.fabric.topology import build
from uet.native import huge_heap
from uet.runtime import run as run_async
from uet.runtime.fabric import Fabric
from uet.ses.messages import OpCompleted
from uet.wire.constants import UET_DEFAULT_IP_PROTO, DeliveryMode, ReturnCode

PS_PER_US = 1_000_000
#: after this many samples the sampling interval doubles (long runs stay small)
MAX_SAMPLES = 1000
#: flows whose congestion window is sampled (the first ones by id)
MAX_TRACED = 256
#: how often a drain (waiting for PDCs to close) checks, in ps
DRAIN_CHECK_PS = 50 * PS_PER_US
EVENT_LOG = "events.jsonl"


def check_live(cfg: dict[str, Any]) -> None:
    """What ``uet run --live`` cannot do, as a ConfigError naming the key and why."""
    if cfg["transport"].get("stack", "uet") != "uet":
        raise error_at(cfg, ("transport", "stack"), "live mode runs the UET stack: the "
                       "RoCE baseline's end points are modelled for virtual time only",
                       allowed="uet (or run without --live)")


def _in_notebook() -> bool:
    """True under Jupyter (rich draws its progress bars there as widgets)."""
    from rich.console import Console

    return Console(stderr=True).is_jupyter


# ---------------------------------------------------------------------------- pieces


_ECN_MARKED = operator.attrgetter("ecn_marked")

#: the sampled series: link bytes, queue occupancy, per-flow windows with their signals
#: (and the fabric's), data bytes per EV
SERIES = ("links", "queues", "flows", "ev")
#: the series each plot draws (``output.plot_kinds``)
PLOT_SERIES: dict[str, tuple[str, ...]] = {
    "fct_cdf": (), "link_utilisation": ("links",), "queues": ("queues",),
    "cwnd": ("flows",), "paths": ("links", "ev")}


def _some(names: list[str], n: int = 6) -> str:
    """The first ``n`` names, and how many more there are."""
    more = f" ... ({len(names)} in all)" if len(names) > n else ""
    return ", ".join(names[:n]) + more


class SinkSpace:
    """Offsets in one host's sink region for messages whose bytes are checked: first fit
    over freed ranges, growing the region when nothing fits (the SES region object keeps
    the same bytearray, so a grown sink stays registered). ``reuse=False`` never hands a
    range out twice (RUDI: a late re-executed WRITE must not land on newer data)."""

    def __init__(self, ep: FabricEndpoint, reuse: bool = True) -> None:
        self.ep = ep
        self.reuse = reuse
        self.free: list[tuple[int, int]] = []
        self.high = 0

    def take(self, size: int) -> int:
        for i, (off, length) in enumerate(self.free):
            if length >= size:
                if length == size:
                    self.free.pop(i)
                else:
                    self.free[i] = (off + size, length - size)
                return off
        off = self.high
        self.high += size
        sink = self.ep.sink
        assert sink is not None
        if len(sink) < self.high:
            sink.extend(bytes(self.high - len(sink)))
        return off

    def give(self, off: int, size: int) -> None:
        if not self.reuse:
            return
        self.free.append((off, size))
        self.free.sort()
        merged: list[tuple[int, int]] = []
        for o, n in self.free:
            if merged and merged[-1][0] + merged[-1][1] == o:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((o, n))
        self.free = merged


class Sampler:
    """Samples link bytes, queue occupancy and congestion windows into the
    :class:`SeriesRecorder` shape (as :class:`~uet.experiments.timeseries.Points`),
    storing a point only where a series changes (plus the last point of a flat stretch),
    so idle links and queues cost nothing and the step shape is kept exactly. A sample
    reads every channel's and port's counter in one pass; only changed series do more."""

    def __init__(self, fab: Fabric, traced: dict[int, tuple[str, int, int]],
                 window: Callable[[int, int], int | None] | None = None,
                 nominal_bps: dict[str, float] | None = None,
                 record: Iterable[str] = SERIES) -> None:
        """``record``: which of :data:`SERIES` to sample (all for ``timeseries.json``;
        for plots alone, what they draw: :data:`PLOT_SERIES`)."""
        rec = SeriesRecorder()
        record = set(record)
        #: (src, dst) -> bytes for the cwnd series; None: the UET PDC's window (and its
        #: congestion signals, uet.experiments.signals)
        self.window = window
        net = fab.net
        self.channels = [ch for link in net.links for ch in (link.ab, link.ba)]
        self.ports = [p for sw in net.switches.values() for p in sw.ports]
        self.eps = [fab.endpoint(i) for i in range(len(net.nics))]
        rec.links(0, {}, {ch.name: ch.rate_bps for ch in self.channels})
        self.data = rec.data
        if "links" not in record:
            self.channels = []
        if "queues" not in record:
            self.ports = []
        self.links = ChangeRecorder([ch.name for ch in self.channels],
                                    self.data["link_tx_bytes"])
        self.queues = ChangeRecorder([p.name for p in self.ports], self.data["queue_bytes"])
        self.cwnds = self.data["cwnd_bytes"]
        # congestion signals and reactions per flow, fabric-wide signals, EV load
        self.data["link_nominal_bps"] = {n: r for n, r in (nominal_bps or {}).items()
                                         if r != self.data["link_rate_bps"].get(n)}
        #: per-flow windows, their signals and the fabric's (the cwnd plot)
        self.flow_signals: FlowSignals | None = None
        if "flows" in record:
            self.flow_signals = FlowSignals(fab.log, {nic.name: i
                                                      for i, nic in enumerate(net.nics)})
            self.data["flow_events"] = self.flow_signals.events
        self.fabric = ChangeRecorder(["ecn_marks", "trims", "drops"],
                                     self.data.setdefault("fabric_signals", {}))
        self.ev_load = EvLoad(net.nics) if "ev" in record else None
        #: cwnd series -> [last value, time of the last sample it was seen in]
        self.state: dict[str, list[int]] = {}
        self.samples = 0

    def sample(self, now: int, active: dict[int, tuple[str, int, int]]) -> None:
        """One sample at ``now``; ``active``: traced flows in progress, id -> (label, src,
        dst)."""
        self.samples += 1
        self.links.sample(now, [ch.tx_bytes for ch in self.channels])
        self.queues.sample(now, [p.qtotal for p in self.ports])
        signals = self.flow_signals
        if signals is None:
            return
        self.fabric.sample(now, [sum(map(_ECN_MARKED, self.ports)), signals.trims,
                                 signals.drops])
        cwnds, state, window = self.cwnds, self.state, self.window
        for label, src, dst in active.values():
            if window is not None:  # another stack's own measure (RoCE: DCQCN rate x RTT)
                w = window(src, dst)
            else:  # the UET PDC: its window, and the signals it got since the last sample
                pdc = self._pdc(src, dst)
                if pdc is None:
                    continue
                signals.sample(now, src, pdc, label)
                cw = getattr(pdc.cc, "cwnd", None)
                w = int(cw) if isinstance(cw, int | float) else None
            if w is None:
                continue
            st = state.get(label)
            if st is None:
                pts = cwnds[label] = Points()
                pts.append((now, w))
                state[label] = [w, now]
                continue
            if w != st[0]:
                pts = cwnds[label]
                if pts.t[-1] != st[1]:
                    pts.append((st[1], st[0]))
                pts.append((now, w))
                st[0] = w
            st[1] = now

    def _pdc(self, src: int, dst: int) -> Any:
        ep = self.eps[src]
        key = (ep.mode, ep.job_id, ep.ip, ep.peer_ips[dst], ep.tc)
        return ep.pds.mgr.ini_by_key.get(key)

    def finish(self) -> dict[str, Any]:
        """The series, each closed with its last sample."""
        self.links.close()
        self.queues.close()
        self.fabric.close()
        for label, (w, t) in self.state.items():
            pts = self.cwnds[label]
            if pts.t[-1] != t:
                pts.append((t, w))
        if self.ev_load is not None:
            self.data["ev_bytes"] = self.ev_load.close()
        return self.data


# ---------------------------------------------------------------------------- the run


class Runner:
    """One run: build, drive, collect (see the module docstring). The end point specific
    steps (:meth:`endpoint_factory`, :meth:`attach`, :meth:`_submit`, :meth:`_error`,
    :meth:`_pdcs_closed`, :meth:`counters`, :meth:`wire_format`, :attr:`window`) are
    methods, so another stack's runner overrides only those."""

    #: the sampled congestion window of a flow (src, dst) -> bytes (None: the UET PDC's)
    window: Callable[[int, int], int | None] | None = None

    def __init__(self, config: dict[str, Any], out_dir: Path | None) -> None:
        self.cfg = config
        self.out = out_dir
        self.series: dict[str, Any] | None = None
        exp = config["experiment"]
        self.limit_ps = round(exp["time_limit_us"] * PS_PER_US)
        self.wall_limit = exp["wall_limit_s"] or None
        self.drain = exp.get("drain", True)
        self.wl: Workload = build_workload(config)
        self.tracker = DependencyTracker(self.wl)
        self.by_id = self.wl.by_id()
        self.start_ps: dict[int, int] = {}
        self.end_ps: dict[int, int] = {}
        self.errors: dict[int, str] = {}
        self.pending: dict[tuple[int, int], int] = {}  # (src host, op id) -> flow id
        self.offsets: dict[int, int] = {}
        self.bytes_state: ByteState | None = None
        if self.wl.collective is not None:
            self.bytes_state = ByteState(self.wl.collective, seed=traffic_seed(config))
        self.files: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.last_delivery = 0
        self.scheduled = 0  # flows scheduled to start, not started yet
        #: real time: the live fabric (uet.runtime.live) instead of the virtual one
        self.live = bool((config.get("live") or {}).get("enabled"))

    # ------------------------------------------------------------------ building

    def _profile(self) -> str:
        name = self.cfg["transport"]["profile"]
        from uet.profiles import BUILTIN_PROFILES

        return name if name in BUILTIN_PROFILES else str(resolve_path(self.cfg, name))

    def endpoint_factory(self) -> Any:
        tr = self.cfg["transport"]
        cms = dict(tr["cms"])
        model = TopologyModel.from_config(self.cfg["topology"])
        cms.setdefault("base_rtt_ps", model.base_rtt_ps())
        cms.setdefault("trimming", self.cfg["topology"]["trimming"])
        sink = max((f.size for f in self.wl.flows), default=0)
        # bulk data is counted and audited per flow; only collectives read it back, so
        # only they need a sink of their own per host (else one scratch buffer for all)
        return FabricEndpoint.factory(profile=self._profile(), pds_overrides=dict(tr["pds"]),
                                      cms_overrides=cms, sink_bytes=sink,
                                      shared_sink=self.bytes_state is None,
                                      mode=DeliveryMode[tr["mode"]],
                                      encap=tr.get("encap", "udp"),
                                      ip_proto=tr.get("ip_proto", UET_DEFAULT_IP_PROTO),
                                      tss=tr.get("tss") or None)

    def build(self) -> Fabric:
        cfg = self.cfg
        logged = cfg["output"]["event_log"] and self.out is not None
        log = EventLog(self.out / EVENT_LOG) if logged else EventLog()
        if logged:
            self.files["event_log"] = EVENT_LOG
        level = cfg["output"].get("log_level", "off")
        if level != "off":
            log.subscribe(level_filter(level, lambda line: print(line, file=sys.stderr)))
        self.log = log
        seed = cfg["experiment"]["seed"]
        live = cfg.get("live") or {}
        if live.get("enabled"):
            check_live(cfg)
            from uet.runtime.live import LiveFabric, live_network

            net = build(live_network(seed=seed, log=log), fabric_topology(cfg))
        else:
            net = build(Network(seed=seed, log=log), fabric_topology(cfg))
        if cfg["transport"].get("encap", "udp") == "native-ip":
            net.set_ip_proto(cfg["transport"].get("ip_proto", UET_DEFAULT_IP_PROTO))
        self.nominal_bps = {ch.name: ch.rate_bps for link in net.links
                            for ch in (link.ab, link.ba)}
        for item in plan(cfg, net.links):
            net.impair(item["at"], item["cfg"], item["direction"])
        if live.get("enabled"):
            fab: Fabric = LiveFabric(net, endpoint_factory=self.endpoint_factory(),
                                     eventlog=log, dilation=live["dilation"],
                                     backend=live["backend"],
                                     address_block=live["address_block"])
        else:
            fab = Fabric(net, endpoint_factory=self.endpoint_factory(), eventlog=log)
        cap = cfg["capture"]
        self._check_taps(net)
        if (cap["ifaces"] or cap["links"]) and self.out is not None:
            fab.capture(self.out / cap["file"], cap["ifaces"], links=cap["links"],
                        snaplen=cap["snaplen"])
            self.files["capture"] = cap["file"]
        self.attach(fab)
        self.fab = fab
        self.loop = fab.loop
        return fab

    def attach(self, fab: Fabric) -> None:
        """Hook the runner into every host's end point (audits, completions, sinks)."""
        self.eps: list[Any] = [fab.endpoint(i) for i in range(len(fab.net.nics))]
        self.audits: list[DeliveryAudit] = []
        for i, ep in enumerate(self.eps):
            ep.audit.count_flows()  # first-copy bytes and duplicates per flow
            self.audits.append(ep.audit)
            ep.on_complete = self._completion_hook(i)
        rudi = self.cfg["transport"]["mode"] == "RUDI"
        if rudi:
            for ep in self.eps:
                res = ep.ses.resources.get(ep.job_id, ep.ses.pid_on_fep, SINK_INDEX)
                if res is not None:
                    res.regions[SINK_KEY].idempotent_safe = True
        self.sinks = [SinkSpace(ep, reuse=not rudi) for ep in self.eps]
        self.op_runner = OpRunner(self) if self.cfg["traffic"].get("ops") else None

    def _check_taps(self, net: Network) -> None:
        """Every ``[capture]`` interface and link must exist in this topology (a ``--set
        topology.kind=...`` can leave the file's taps behind): ConfigError naming them."""
        cap = self.cfg["capture"]
        links = sorted(lk.name for lk in net.links)
        for i, name in enumerate(cap["ifaces"]):
            if name not in net.ifaces:
                raise error_at(self.cfg, ("capture", "ifaces", i),
                               f"no interface {name!r} in this {self.cfg['topology']['kind']} "
                               "topology", allowed=_some(sorted(net.ifaces)))
        for i, name in enumerate(cap["links"]):
            if name not in net.link_of and name not in links:
                raise error_at(self.cfg, ("capture", "links", i),
                               f"no link {name!r} in this {self.cfg['topology']['kind']} "
                               "topology", allowed=_some(links) + " or an interface on one")

    # ------------------------------------------------------------------ flows

    def _start(self, flow: Flow) -> None:
        """Start ``flow`` now (an event on the fabric core)."""
        self.scheduled -= 1
        now = self.loop.now
        ep = self.eps[flow.src]
        payload = None
        offset = 0
        if self.bytes_state is not None:
            payload = self.bytes_state.payload(flow)
            offset = self.sinks[flow.dst].take(flow.size)
            self.offsets[flow.id] = offset
        self.start_ps[flow.id] = now
        if self.log.enabled:
            self.log.emit(now, "flow_start", flow=flow.id, src=flow.src, dst=flow.dst,
                          size=flow.size)
        self._submit(flow, ep, payload, offset, now)
        self.fab.host(flow.src).poke()

    def _submit(self, flow: Flow, ep: Any, payload: Any, offset: int, now: int) -> None:
        """Hand ``flow`` to its source end point (one RMA WRITE into the sink, or the
        operation ``traffic.ops`` gave it)."""
        if flow.op != "write":
            assert self.op_runner is not None  # the RoCE runner refuses traffic.ops
            op = self.op_runner.start(flow, ep, now)
            if op.done:
                self._finished(flow, op, now)
            else:
                self.pending[flow.src, op.op_id] = flow.id
            return
        dc = {"dc": True} if self.cfg["traffic"].get("dc") else {}
        msg = ep.send_message(now, flow.dst, flow.size, payload, offset=offset, **dc)
        audit = self.audits[flow.dst]
        for mid in msg.op.message_ids:
            audit.flow_of[ep.ip, mid] = flow.id
        if msg.done:
            self._finished(flow, msg.op, now)
        else:
            self.pending[flow.src, msg.op.op_id] = flow.id

    def _schedule(self, ready: list[tuple[int, Flow]]) -> None:
        self.scheduled += len(ready)
        for t, flow in ready:
            self.loop.at(t, self._start, flow)

    def _completion_hook(self, host: int) -> Callable[[Any], None]:
        def hook(done: Any) -> None:
            if type(done) is not OpCompleted:
                return
            fid = self.pending.get((host, done.op.op_id))
            if fid is None:
                return
            del self.pending[host, done.op.op_id]
            # the host's own core (the fabric's one core in virtual time)
            self._finished(self.by_id[fid], done.op, self.fab.host(host).loop.now)

        return hook

    def _error(self, op: Any) -> str | None:
        """Why the operation that carried a flow failed (None: it succeeded)."""
        if op is None or op.return_code == 1:
            return None
        try:
            rc = ReturnCode(op.return_code).name
        except ValueError:
            rc = str(op.return_code)
        return f"{op.opcode.name} failed: {rc}" + (f" ({op.reason})" if op.reason else "")

    def _finished(self, flow: Flow, op: Any, now: int) -> None:
        error = self._error(op)
        if error is not None:
            self.errors[flow.id] = error
            if self.log.enabled:
                self.log.emit(now, "flow_failed", flow=flow.id, error=self.errors[flow.id])
            return
        self.end_ps[flow.id] = now
        if self.log.enabled:
            self.log.emit(now, "flow_done", flow=flow.id,
                          fct_ps=now - self.start_ps[flow.id])
        self.last_delivery = max(self.last_delivery, now)
        if self.bytes_state is not None:
            off = self.offsets.pop(flow.id)
            sink = self.eps[flow.dst].sink
            assert sink is not None
            self.bytes_state.deliver(flow, bytes(sink[off:off + flow.size]))
            self.sinks[flow.dst].give(off, flow.size)
        self._schedule(self.tracker.delivered(flow.id, now))

    # ------------------------------------------------------------------ driving

    def _traced(self) -> dict[int, tuple[str, int, int]]:
        """Flows whose congestion window is sampled (the plot shows the slowest of them)."""
        return {f.id: (flow_label(f.id, f.src, f.dst), f.src, f.dst)
                for f in sorted(self.wl.flows, key=lambda f: f.id)[:MAX_TRACED]}

    def _pdcs_closed(self) -> bool:
        for ep in self.eps:
            c = ep.pds.counters
            if c["opened"] != c["closed"] + c["closed_in_error"]:
                return False
        return True

    def drive(self, progress: RunProgress, t_wall0: float) -> None:
        """Run a virtual fabric from plain code: no Trio is imported or entered."""
        for t in self._steps(progress, t_wall0):
            self.fab.advance_to(t)

    async def drive_live(self, progress: RunProgress, t_wall0: float) -> None:
        """Run the live fabric: its nodes are Trio tasks on the real clock."""
        async with self.fab:
            for t in self._steps(progress, t_wall0):
                await self.fab.sleep_until(t)

    def _steps(self, progress: RunProgress, t_wall0: float) -> Iterator[int]:
        """The run's loop, whichever driver moves the fabric: sample, report progress,
        decide whether to stop, and yield the fabric time to run to next."""
        fab = self.fab
        interval = max(1, round(self.cfg["output"]["sample_interval_us"] * PS_PER_US))
        out = self.cfg["output"]
        if out["timeseries"]:
            record = set(SERIES)
        elif out["plots"]:  # only what the plots asked for draw
            record = {s for kind in out.get("plot_kinds", PLOT_SERIES)
                      for s in PLOT_SERIES[kind]}
        else:
            record = set()
        traced = self._traced()
        sampler = (Sampler(fab, traced, self.window, self.nominal_bps, record) if record
                   else None)
        self.sampler = sampler
        total = len(self.wl.flows)
        self._schedule(self.tracker.initial())
        draining = False
        while True:
            done = len(self.end_ps)
            now = fab.now
            if not draining and sampler is not None:
                active = {fid: v for fid, v in traced.items()
                          if fid in self.start_ps and fid not in self.end_ps}
                sampler.sample(now, active)
                if sampler.samples % MAX_SAMPLES == 0:
                    interval *= 2
            progress.update(now, done)
            if done == total:
                self.stop_reason = "done"
                if not self.drain or self._pdcs_closed() or not fab.pending():
                    break
                draining = True  # stop sampling; wait for the PDCs to close
            elif not fab.pending() or (not self.pending and not self.scheduled):
                # nothing in flight and nothing to start: what is left waits on
                # failed messages
                self.stop_reason = "stalled"
                break
            if self.wall_limit and time.perf_counter() - t_wall0 >= self.wall_limit:
                self.stop_reason = self.stop_reason or "wall_limit"
                break
            if now >= self.limit_ps:
                self.stop_reason = self.stop_reason or "time_limit"
                break
            step = DRAIN_CHECK_PS if draining else interval
            yield min((now // step + 1) * step, self.limit_ps)
        self.virtual_ps = fab.now
        progress.update(fab.now, len(self.end_ps), force=True)

    def execute(self) -> dict[str, Any]:
        # the frames and pymalloc's arenas in a huge-page region where the kernel offers
        # them (uet.native.huge_heap), before the fabric is built
        huge_heap.enable()
        t0 = time.perf_counter()
        with paused_collector():
            fab = self.build()
        t_built = time.perf_counter()
        opts = self.cfg["output"]
        show = bool(opts["progress"]) and (sys.stderr.isatty() or _in_notebook())
        progress = RunProgress(len(self.wl.flows), self.limit_ps,
                               description=self.cfg["experiment"]["name"], enabled=show)
        cpu0 = time.process_time()
        with progress, quiet_collector():
            if self.live:
                run_async(self.drive_live, progress, t0)
            else:
                self.drive(progress, t0)
        t_ran = time.perf_counter()
        self.timing = {"build_s": t_built - t0, "run_s": t_ran - t_built,
                       "run_cpu_s": time.process_time() - cpu0}
        wall = t_ran - t0
        fab.close()
        series = self.sampler.finish() if self.sampler is not None else None
        self.series = series
        results = build_results(self.cfg, self.flow_records(), self.counters(),
                                run=self.run_info(wall), workload=self.wl,
                                wire=self.wire_format(), files=self.files)
        if self.bytes_state is not None:
            results["collective"] = self.collective_check()
        if self.out is None:
            check_results(results)
            return results
        return write_outputs(results, self.out, series)

    # ------------------------------------------------------------------ results

    def wire_format(self) -> WireFormat:
        ep = self.eps[0]
        cc = bool(ep.pds_config.cc_requests) or "rccc" in ep.cms_config.algorithm
        return WireFormat.emulator(ep.pds_config.mtu_payload,
                                   ipv6=self.cfg["topology"]["ipv6"], cc_header=cc,
                                   native_ip=ep.encap == "native-ip")

    def flow_records(self) -> list[dict[str, Any]]:
        out = []
        for f in self.wl.flows:
            start = self.start_ps.get(f.id)
            end = self.end_ps.get(f.id)
            audit = self.audits[f.dst]
            got = f.size if end is not None else min(f.size, audit.flow_bytes[f.id])
            if f.op != "write":  # the audit counts WRITE data at the destination only
                got = f.size if end is not None else 0
            rec: dict[str, Any] = {"id": f.id, "src": f.src, "dst": f.dst, "size": f.size,
                                   "start_ps": start, "end_ps": end, "bytes_delivered": got,
                                   "duplicates": audit.flow_dups[f.id]}
            if self.cfg["traffic"].get("ops"):
                rec["op"] = f.op
            if f.depends_on:
                rec["depends_on"] = list(f.depends_on)
            if f.id in self.errors:
                rec["error"] = self.errors[f.id]
            out.append(rec)
        return out

    def counters(self) -> dict[str, Any]:
        c = self.fab.counters()
        pds: dict[str, dict[str, int]] = {}
        for nic, ep in zip(self.fab.net.nics, self.eps, strict=True):
            d = dict(ep.pds.counters)
            for role in ("initiator", "target"):
                closed = ep.counters[f"pdc_closed.{role}"]
                err = ep.counters[f"pdc_closed_in_error.{role}"]
                d[f"closed.{role}"] = closed - err
                d[f"closed_in_error.{role}"] = err
            d["duplicates_delivered"] = ep.audit.duplicates
            pds[nic.name] = d
        c["pds"] = pds
        return c

    def run_info(self, wall: float) -> dict[str, Any]:
        return {"completed": len(self.end_ps) == len(self.wl.flows),
                "stop_reason": self.stop_reason or "error",
                "virtual_time_ps": int(self.virtual_ps),
                "last_delivery_ps": int(self.last_delivery) if self.end_ps else None,
                "wall_time_s": wall, "events": self.fab.events_run(),
                "packet_hops": self.fab.net.packet_hops(), "timing": self.timing,
                **({"live": self.live_info()} if self.live else {})}

    def live_info(self) -> dict[str, Any]:
        """How the live run went: backend, dilation (and its calibration), lag."""
        c = self.fab.counters()["live"]
        return {"backend": c["backend"], "dilation": c["dilation"],
                "calibration": c["calibration"], "real_s": c["real_s"],
                "behind": c["behind"]}

    def collective_check(self) -> dict[str, Any]:
        """The all-reduce's data check: ranks whose final buffer is wrong (empty: every
        byte where it belongs)."""
        assert self.bytes_state is not None
        bs = self.bytes_state
        bad = bs.mismatches()
        return {"kind": bs.coll.kind, "ranks": len(bs.coll.ranks),
                "buffer_bytes": bs.coll.buffer_bytes,
                "complete": len(self.end_ps) == len(self.wl.flows),
                "mismatched_ranks": bad, "ok": not bad and len(self.end_ps) == len(
                    self.wl.flows)}
