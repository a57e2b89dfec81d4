"""The Trio-facing fabric: ``async with Fabric(topology, profile="hpc", seed=1) as fab: ...``.

The network (:class:`~uet.fabric.network.Network`) runs on a discrete-event core
(:class:`~uet.fabric.scheduler.EventLoop`). A driver task in the fabric's nursery runs the
core; user tasks act in the fabric's time through ``fab.sleep``, ``fab.wait_until``,
``fab.send`` and ``fab.submit``.

Virtual time (default): the driver waits until every Trio task is blocked
(``trio.testing.wait_all_tasks_blocked``), then runs events in time order as fast as the CPU
allows, stopping as soon as an event wakes a user task so that the task runs at that exact
virtual time. If user tasks wait on conditions and no event is left, they get
:class:`FabricStalled`. Real time (``realtime=True``): events run when the monotonic clock
reaches them; virtual ps = ps since the fabric started.

A program with no tasks of its own (``uet run``'s virtual driver) can also step a virtual
fabric from plain code, outside ``async with``: ``fab.advance_to(t_ps)`` runs the events
up to ``t_ps`` exactly as ``await fab.sleep_until(t_ps)`` would. Trio is imported only when
the fabric is entered, so such a program never loads it (~0.2 s of every ``uet run``).

Each host runs a real :class:`uet.endpoint.fep.FabricEndpoint` (SES + PDS + CMS) built from a
profile; ``fab.ep(i)`` / ``fab.hosts[i]`` give its operation API
(:class:`uet.runtime.host.Host`). Any other end point plugs in with ``endpoint_factory``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uet.errors import LocalError
from uet.fabric.clock import S
from uet.fabric.endpoint import EndpointFactory
from uet.fabric.eventlog import EventLog
from uet.fabric.gcpause import paused_collector
from uet.fabric.network import Network
from uet.fabric.nic import Nic
from uet.fabric.qos import QosConfig
from uet.fabric.taps import Capture
from uet.fabric.topology import build
from uet.runtime.host import Host

if TYPE_CHECKING:
    import trio


class FabricStalled(LocalError, RuntimeError):
    """Tasks wait for a condition but the fabric has nothing left to do."""


class _Waiter:
    __slots__ = ("pred", "event", "error", "deadline")

    def __init__(self, pred: Callable[[], bool] | None, deadline: int | None) -> None:
        import trio

        self.pred = pred
        self.event = trio.Event()
        self.error: BaseException | None = None
        self.deadline = deadline


class Fabric:
    """An emulated fabric driven from Trio.

    ``topology``: a parameter dict (see :mod:`uet.fabric.topology`) or a built
    :class:`Network`. Every host runs a :class:`uet.endpoint.fep.FabricEndpoint` speaking
    ``profile`` (a built-in name, a profile file or a ``Profile``; default ``"ai-base"``),
    or the profile ``host_profiles`` names for its index; ``endpoint_options`` are more
    keyword arguments of ``FabricEndpoint.factory`` (``sink_bytes``, ``pds_overrides``,
    ``cms_overrides``, ``mode``, ``job_id`` ...). ``endpoint_factory(ctx) -> FrameEndpoint``
    replaces all that with any other end point (e.g.
    ``uet.bench.traffic_endpoint.factory()``). ``eventlog``: an :class:`EventLog` or a
    path for JSON lines.
    """

    def __init__(self, topology: dict[str, Any] | Network, *, seed: int = 0,
                 profile: Any = None, host_profiles: Mapping[int, Any] | None = None,
                 endpoint_options: Mapping[str, Any] | None = None,
                 endpoint_factory: EndpointFactory | None = None,
                 qos: QosConfig | dict | None = None,
                 eventlog: EventLog | str | Path | None = None,
                 ecmp_seed: int | None = None, realtime: bool = False) -> None:
        if endpoint_factory is not None and (profile is not None or host_profiles
                                             or endpoint_options):
            raise ValueError("Fabric: give either endpoint_factory or profile / "
                             "host_profiles / endpoint_options, not both")
        if endpoint_factory is None:
            from uet.endpoint.fep import FabricEndpoint

            opts = dict(endpoint_options or {})
            for key in ("profile", "host_profiles"):
                if key in opts:
                    raise ValueError(f"Fabric: endpoint_options.{key}: pass it as the "
                                     f"Fabric's own {key}= argument")
            endpoint_factory = FabricEndpoint.factory(
                profile="ai-base" if profile is None else profile,
                host_profiles=host_profiles, **opts)
        if isinstance(eventlog, EventLog):
            self.log = eventlog
        else:
            self.log = EventLog(eventlog)
        if isinstance(qos, dict):
            qos = QosConfig.from_dict(qos)
        with paused_collector():  # building: nothing is garbage yet (uet.fabric.gcpause)
            if isinstance(topology, Network):
                self.net = topology
            else:
                self.net = build(Network(seed=seed, qos=qos, log=self.log,
                                         ecmp_seed=ecmp_seed), dict(topology))
            if host_profiles:
                bad = [i for i in host_profiles if not 0 <= int(i) < len(self.net.hosts)]
                if bad:
                    raise ValueError(f"Fabric: host_profiles names host(s) {bad}; the "
                                     f"topology has hosts 0..{len(self.net.hosts) - 1}")
            self.net.attach(self._wrap_factory(endpoint_factory))
        self.hosts: list[Host] = [Host(self, i) for i in range(len(self.net.nics))]
        self._ip_index = {ctx.ip: i for i, ctx in enumerate(self.net.hosts)}
        self.loop = self.net.loop
        self.realtime = realtime
        self.captures: list[Capture] = []
        self._waiters: list[_Waiter] = []
        #: the waiters with a condition: while there are none, the NICs do not call back
        #: (a call per frame and timer was ~2% of a run's time)
        self._watchers: list[_Waiter] = []
        #: set when there is work for the driver (made when the fabric is entered)
        self._work: trio.Event | None = None
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: Any = None
        self._t0 = 0.0
        self.wakeups = 0
        self.closed = False

    def _wrap_factory(self, factory: EndpointFactory) -> EndpointFactory:
        """The factory the hosts' end points come from (the live fabric puts its
        external hosts' edge in here)."""
        return factory

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Fabric:
        import trio

        self._work = trio.Event()
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        self._t0 = trio.current_time()
        self._nursery.start_soon(self._drive_real if self.realtime else self._drive_virtual)
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        try:
            return await self._nursery_cm.__aexit__(*exc)
        except BaseExceptionGroup as eg:
            # the body's own exception: let it propagate unwrapped
            if exc[1] is not None and len(eg.exceptions) == 1 and eg.exceptions[0] is exc[1]:
                return False
            raise
        finally:
            self._nursery = None
            self.close()

    def close(self) -> None:
        """Flush and close captures and the event log."""
        self.closed = True
        for cap in self.captures:
            cap.close()
        self.log.close()

    # ---------------------------------------------------------------- time

    @property
    def now(self) -> int:
        """Current fabric time in picoseconds."""
        if self.realtime:
            self._sync_real()
        return self.loop.now

    def _real_ps(self) -> int:
        import trio

        return int((trio.current_time() - self._t0) * S)

    def _sync_real(self) -> None:
        t = self._real_ps()
        nt = self.loop.next_time()
        if nt is not None:
            t = min(t, nt)
        if t > self.loop.now:
            self.loop.now = t

    # ---------------------------------------------------------------- drivers

    async def _drive_virtual(self) -> None:
        import trio

        try:  # trio.testing imports pytest when it is installed: ~0.1 s of every command
            from trio._core import wait_all_tasks_blocked
        except ImportError:  # pragma: no cover - a trio that keeps it elsewhere
            from trio.testing import wait_all_tasks_blocked
        loop = self.loop
        while True:
            await wait_all_tasks_blocked()
            if not len(loop):
                if self._waiters:
                    self._fail_waiters(FabricStalled(
                        f"at t={loop.now} ps tasks wait on conditions but no event is left"))
                    continue
                self._work = trio.Event()
                await self._work.wait()
                continue
            loop.run()

    async def _drive_real(self) -> None:
        import trio

        loop = self.loop
        while True:
            now = self._real_ps()
            loop.run(until=now)
            if loop.now < now and (loop.next_time() or math.inf) > now:
                loop.now = now
            nt = loop.next_time()
            self._work = trio.Event()
            deadline = math.inf if nt is None else self._t0 + nt / S
            with trio.move_on_at(deadline):
                await self._work.wait()

    def _notify(self) -> None:
        if self._work is not None:
            self._work.set()

    # ---------------------------------------------------------------- waiting

    def _drop(self, w: _Waiter) -> None:
        if w in self._waiters:
            self._waiters.remove(w)
        if w in self._watchers:
            self._watchers.remove(w)
            if not self._watchers:
                self._watch(False)

    def _watch(self, on: bool) -> None:
        """Have every NIC report its changes (``_on_change``), or stop them."""
        callback = self._on_change if on else None
        for nic in self.net.nics:
            nic.on_change = callback

    def _wake(self, w: _Waiter) -> None:
        self._drop(w)
        w.event.set()
        self.wakeups += 1
        self.loop.stop()

    def _fail_waiters(self, err: BaseException) -> None:
        for w in list(self._waiters):
            w.error = err
            self._wake(w)

    def _on_change(self, nic: Nic) -> None:
        for w in list(self._watchers):
            if w.pred is not None and w.pred():
                self._wake(w)

    async def _wait(self, w: _Waiter) -> None:
        self._waiters.append(w)
        if w.pred is not None:
            self._watchers.append(w)
            if len(self._watchers) == 1:
                self._watch(True)
        self._notify()
        try:
            await w.event.wait()
        finally:
            self._drop(w)
        if w.error is not None:
            raise w.error

    async def sleep_until(self, t_ps: int) -> None:
        """Sleep until fabric time ``t_ps``."""
        w = _Waiter(None, t_ps)
        self.loop.at(t_ps, lambda _: self._wake(w))
        await self._wait(w)

    def advance_to(self, t_ps: int) -> None:
        """Run a virtual fabric's events up to fabric time ``t_ps``, from plain code.

        The same events, in the same order, as ``await fab.sleep_until(t_ps)`` in a task
        (a wake-up event at ``t_ps`` stops the loop), for a program that has no tasks of
        its own: only outside ``async with`` and only in virtual time."""
        if self.realtime:
            raise LocalError("Fabric.advance_to: a real-time fabric runs on the clock; "
                             "use await fab.sleep_until() inside `async with`")
        if self._nursery is not None:
            raise LocalError("Fabric.advance_to: the fabric is running under Trio "
                             "(`async with`); use await fab.sleep_until()")
        if self.closed:
            raise LocalError("Fabric.advance_to: the fabric is closed")
        loop = self.loop
        if t_ps < loop.now:
            raise LocalError(f"Fabric.advance_to: {t_ps} ps is in the past "
                             f"(the fabric is at {loop.now} ps)")

        def wake(_: Any) -> None:
            self.wakeups += 1
            loop.stop()

        loop.at(t_ps, wake)
        loop.run()

    async def sleep(self, dt_ps: int) -> None:
        """Sleep ``dt_ps`` picoseconds of fabric time."""
        await self.sleep_until(self.now + dt_ps)

    async def wait_until(self, pred: Callable[[], bool], timeout_ps: int | None = None) -> bool:
        """Wait until ``pred()`` holds (checked whenever an end point changes).

        Returns False on timeout (fabric time), True otherwise.
        """
        if pred():
            return True
        w = _Waiter(pred, None)
        if timeout_ps is not None:
            self.loop.at(self.now + timeout_ps, lambda _: self._wake(w))
        await self._wait(w)
        return pred()

    # ---------------------------------------------------------------- acting

    def host(self, index: int) -> Nic:
        """The NIC of host ``index``."""
        return self.net.nics[index]

    def endpoint(self, index: int) -> Any:
        """The sans-IO end point of host ``index`` (a ``FabricEndpoint`` by default)."""
        return self.net.nics[index].ep

    def ep(self, host: int | str) -> Host:
        """The operation API of a host, by index or IP (see :mod:`uet.runtime.host`)."""
        return self.hosts[self.host_index_of(host)]

    def host_index_of(self, host: Any) -> int:
        """Index of a host given as an index, an IP address or a :class:`Host`."""
        if isinstance(host, Host):
            if host.fab is not self:
                raise ValueError(f"{host!r} belongs to another fabric")
            return host.index
        if isinstance(host, str):
            i = self._ip_index.get(host)
            if i is None:
                raise ValueError(f"no host has IP {host!r}; hosts: "
                                 f"{', '.join(list(self._ip_index)[:8])}"
                                 f"{' ...' if len(self._ip_index) > 8 else ''}")
            return i
        if isinstance(host, bool) or not isinstance(host, int):
            raise TypeError(f"a host is an index, an IP or a Host, not {type(host).__name__}")
        if not 0 <= host < len(self.hosts):
            raise ValueError(f"no host {host}; the fabric has hosts 0..{len(self.hosts) - 1}")
        return host

    def host_ip(self, host: Any) -> str:
        """IP address of a host given as an index, an IP address or a :class:`Host`."""
        return self.net.hosts[self.host_index_of(host)].ip

    def host_index(self, ip: str | None) -> int | None:
        """Index of the host with this IP, or None."""
        return self._ip_index.get(ip) if ip is not None else None

    def submit(self, host: int, fn: Callable[[Any, int], Any]) -> Any:
        """Call ``fn(endpoint, now)`` on host ``host`` now, then let its NIC transmit."""
        nic = self.net.nics[host]
        out = fn(nic.ep, self.now)
        nic.poke()
        self._notify()
        return out

    def start_message(self, src: int, dst: int, nbytes: int) -> Any:
        """Start a message (end points with ``send_message(now, dst, nbytes)``).

        With ``FabricEndpoint``s this is a bulk RMA WRITE into the destination's sink
        region, which is grown to ``nbytes`` first if needed."""
        grow = getattr(self.endpoint(dst), "ensure_sink", None)
        if grow is not None:
            grow(nbytes)
        return self.submit(src, lambda ep, now: ep.send_message(now, dst, nbytes))

    async def send(self, src: int, dst: int, nbytes: int,
                   timeout_ps: int | None = None) -> Any:
        """Send a message and wait for its completion; returns the message handle."""
        msg = self.start_message(src, dst, nbytes)
        await self.wait_until(lambda: msg.done, timeout_ps)
        return msg

    async def run_messages(self, flows: Iterable[tuple[int, int, int]],
                           timeout_ps: int | None = None) -> list[Any]:
        """Start every ``(src, dst, nbytes)`` at once and wait until all complete."""
        msgs = [self.start_message(s, d, n) for s, d, n in flows]
        first = [0]  # messages before this index are done (checked after every frame)

        def all_done() -> bool:
            i = first[0]
            while i < len(msgs) and msgs[i].done:
                i += 1
            first[0] = i
            return i == len(msgs)

        await self.wait_until(all_done, timeout_ps)
        return msgs

    def pending(self) -> int:
        """Events pending in the fabric (0: nothing left to do)."""
        return len(self.loop)

    def events_run(self) -> int:
        """Events run so far."""
        return self.loop.events

    # ---------------------------------------------------------------- observing

    def capture(self, path: str | Path, ifaces: Iterable[str] | None = None, *,
                links: Iterable[str] = (), snaplen: int = 0) -> Capture:
        """Write a pcapng of the named interfaces (tx and rx) and links (both directions)."""
        cap = Capture(path, self.net, snaplen=snaplen)
        for name in ifaces or ():
            cap.tap_iface(name)
        for name in links:
            cap.tap_link(name)
        self.captures.append(cap)
        return cap

    def counters(self) -> dict[str, Any]:
        """All counters: per NIC, switch port and link direction, plus the core."""
        out = self.net.counters()
        out["endpoint"] = {n.name: dict(getattr(n.ep, "stats", {})) for n in self.net.nics}
        return out
