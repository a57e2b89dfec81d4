"""Scheduler alternatives for the fabric, measured side by side on the same workload.

Workload: the htsim 16-host permutation on a k=4 fat tree (100 Gb/s, 1 us links), every
packet encoded at its source and decoded at its destination by the fabric's traffic end
point; queues large enough that nothing is trimmed (so both models carry the same frames).

(a) ``trio-tasks``: one Trio task per transmitter (NIC or switch port) and one per cable
    direction (a delay line), ``trio.sleep`` / ``trio.sleep_until`` for serialisation and
    propagation under ``trio.testing.MockClock(autojump_threshold=0)``; frames move through
    memory channels. Single FIFO per port, no ECN/trimming/PFC (cheaper than the real thing).
(b) ``event-core``: ``uet.fabric`` as shipped: a heap of (time, seq, callback, arg) run by
    one Trio task, objects instead of tasks, lazy transmitter wake-ups.

Run: ``python benchmarks/scheduler_alternatives.py [--bytes N]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import trio
import trio.testing

from uet.bench.emulation import PERMUTATION, measure
from uet.bench.traffic_endpoint import TrafficEndpoint
from uet.fabric.network import Network
from uet.fabric.nic import Nic
from uet.fabric.topology import build

PS = 1e-12


def trio_tasks(msg_bytes: int, seed: int = 13) -> dict[str, Any]:
    """Alternative (a): a Trio task per transmitter and per cable direction."""
    net = build(Network(seed=seed), {"kind": "fat_tree", "k": 4, "queue_bytes": 1 << 40,
                                     "ecn": False})
    net.attach(lambda ctx: TrafficEndpoint(ctx, rto_ps=10**12))
    hops = 0
    done = trio.Event()
    msgs: list[Any] = []

    async def main() -> None:
        nonlocal hops
        clock_now = trio.current_time
        inbox: dict[str, trio.MemorySendChannel] = {}
        kicks: dict[str, trio.Event] = {}

        def ps_now() -> int:
            return int(clock_now() / PS)

        async def delay_line(rx: trio.MemoryReceiveChannel, far: Any) -> None:
            async for t_arrive, data in rx:
                await trio.sleep_until(t_arrive)
                deliver(far, data)

        def deliver(port: Any, data: bytes) -> None:
            if isinstance(port, Nic):
                port.ep.receive(ps_now(), data)
                kicks[port.name].set()
                if all(m.done for m in msgs):
                    done.set()
                return
            sw = port.switch
            out = sw.direct.get(data[30:34]) or sw.route(data, None)
            inbox[out.name].send_nowait(data)

        async def transmitter(port: Any, rx: trio.MemoryReceiveChannel | None,
                              line: trio.MemorySendChannel) -> None:
            nonlocal hops
            ch = port.channel
            while True:
                if rx is not None:
                    data = await rx.receive()
                else:  # a NIC pulls from its end point
                    now = ps_now()
                    data = port.ep.pop_control(now) or port.ep.pop_data(now)
                    if data is None:
                        kicks[port.name] = trio.Event()
                        await kicks[port.name].wait()
                        continue
                await trio.sleep(len(data) * ch.ppb * PS)
                hops += 1
                await line.send((clock_now() + ch.delay_ps * PS, data))

        async with trio.open_nursery() as n:
            for link in net.links:
                for ch_end, far in ((link.a, link.b), (link.b, link.a)):
                    port = net.ifaces[ch_end]
                    line_tx, line_rx = trio.open_memory_channel(float("inf"))
                    n.start_soon(delay_line, line_rx, net.ifaces[far])
                    if isinstance(port, Nic):
                        kicks[port.name] = trio.Event()
                        n.start_soon(transmitter, port, None, line_tx)
                    else:
                        q_tx, q_rx = trio.open_memory_channel(float("inf"))
                        inbox[port.name] = q_tx
                        n.start_soon(transmitter, port, q_rx, line_tx)
            await trio.testing.wait_all_tasks_blocked()
            for s, d in PERMUTATION:
                msgs.append(net.nics[s].ep.send_message(ps_now(), d, msg_bytes))
                kicks[f"h{s}"].set()
            t0 = time.perf_counter()
            await done.wait()
            wall = time.perf_counter() - t0
            n.cancel_scope.cancel()
        result.update(packet_hops=hops, wall_s=wall, packet_hops_per_s=hops / wall,
                      fct_tail_us=max(m.fct_ps for m in msgs) / 1e6)

    result: dict[str, Any] = {}
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=int, default=256 * 1024, help="message size")
    args = ap.parse_args()
    topo = {"kind": "fat_tree", "k": 4, "queue_bytes": 1 << 40, "ecn": False}
    measure(64 * 1024)
    rows = {
        "(a) trio task per port, MockClock": trio_tasks(args.bytes),
        "(b) event core (uet.fabric)": measure(args.bytes, topology=topo),
    }
    print(f"16-host k=4 permutation, {args.bytes} B messages")
    print(f"{'scheduler':40s} {'hops':>8s} {'wall s':>8s} {'hops/s':>10s} {'tail us':>9s}")
    for name, r in rows.items():
        print(f"{name:40s} {r['packet_hops']:8d} {r['wall_s']:8.3f} "
              f"{r['packet_hops_per_s']:10,.0f} {r['fct_tail_us']:9.1f}")


if __name__ == "__main__":
    main()
