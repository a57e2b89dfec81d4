"""The fabric's two event cores side by side: CPU time per event, by number of pending events.

Every event reschedules itself 1-600 ns ahead (about a link delay plus a serialisation, as
in a busy fabric), so the queue holds a steady ``pending`` events; the time per event
includes the Python callback. Medians of ``--runs``. The C core is
``uet.native._event_core`` (docs/fabric.md "Scheduler"); without it only the Python one runs.

    python benchmarks/event_core.py
    python benchmarks/event_core.py --pending 100,35000 --events 1000000 --runs 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from uet.fabric.scheduler import NativeEventLoop, PyEventLoop


def per_event_ns(core: Any, pending: int, events: int, seed: int = 1) -> float:
    """CPU ns per event of ``core`` holding ``pending`` events, over ``events`` events."""
    loop = core()
    push = loop.pusher()
    rnd = random.Random(seed)
    delays = [rnd.randrange(1_000, 600_000) for _ in range(4096)]
    done = [0]

    def tick(_: object) -> None:
        done[0] += 1
        push(loop.now + delays[done[0] & 4095], tick, None)
        if done[0] >= events:
            loop.stop()

    for _ in range(pending):
        push(rnd.randrange(0, 600_000), tick, None)
    t = time.process_time()
    loop.run()
    return (time.process_time() - t) / events * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pending", default="100,3000,35000,300000",
                    help="comma-separated queue depths")
    ap.add_argument("--events", type=int, default=400_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    cores = [("python", PyEventLoop)] + ([("c", NativeEventLoop)] if NativeEventLoop else [])
    print("| pending | " + " | ".join(f"{n} ns/event" for n, _ in cores) + " | ratio |")
    print("|---" * (len(cores) + 2) + "|")
    for p in (int(x) for x in args.pending.split(",")):
        med = [statistics.median(per_event_ns(c, p, args.events) for _ in range(args.runs))
               for _, c in cores]
        ratio = f"{med[0] / med[1]:.1f}x" if len(med) == 2 else "-"
        print(f"| {p:,} | " + " | ".join(f"{m:.0f}" for m in med) + f" | {ratio} |")


if __name__ == "__main__":
    main()
