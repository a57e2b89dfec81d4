"""How the emulator's cost grows with the fabric: whole ``uet run`` commands on fat trees of
16, 128 and 1,024 hosts (k = 4, 8, 16; 8,192 hosts is k = 32), one table.

Workload: every host sends one message to another (the seeded derangement of the
``permutation`` pattern, seed 13), sprayed over 128 EVs with NSCC and trimming, on the
htsim anchor fabric (``experiments/htsim/permutation-128ev.toml`` with
``--set topology.k=K --set traffic.pattern=permutation --set traffic.size=SIZE``).

Per run: the whole command's wall time, CPU time and peak RSS (the child process, as
``time`` would report them), events and packet-hops (frames put on links) per second of
the run itself (``results.json``: ``run.timing.run_s``) and per CPU second of it
(``run.timing.run_cpu_s``: what to compare on a shared machine; "vs first" divides by the first
size's), and tail FCT / ideal. With ``--htsim BINARY`` the
reference simulator runs the same permutation (written as its connection matrix) right
after each of ours, alternating, so the ratio holds on a loaded machine; its tail is
divided by the ideal in its own packet format. Medians over ``--runs``.

    python benchmarks/scale.py                          # 16 / 128 / 1,024 hosts, 2 MB
    python benchmarks/scale.py --hosts 16,128 --runs 3 --htsim PATH/TO/htsim_uec
    python benchmarks/scale.py --hosts 8192 --size 256KiB --runs 1
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENT = ROOT / "experiments" / "htsim" / "permutation-128ev.toml"
SEED = 13


def k_for(hosts: int) -> int:
    """Fat-tree arity for ``hosts`` (k^3 / 4 hosts)."""
    for k in range(2, 65, 2):
        if k ** 3 // 4 == hosts:
            return k
    raise SystemExit(f"--hosts: {hosts} is not a fat-tree size (16, 128, 1024, 8192, ...)")


def run_uet(k: int, size: str, out: Path, extra: list[str]) -> dict[str, Any]:
    """One whole ``uet run`` (in a fresh measuring process, so its peak RSS is its own)."""
    cmd = [sys.executable, "-m", "uet.cli", "run", str(EXPERIMENT), "--set",
           f"topology.k={k}", "--set", "traffic.pattern=permutation", "--set",
           f"traffic.size={size}", "--set", f"experiment.seed={SEED}", "--out", str(out)]
    for s in extra:
        cmd += ["--set", s]
    wall, rss, proc = _measured(cmd)
    if proc.returncode:
        raise SystemExit(f"uet run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    doc = json.loads((out / "results.json").read_text())
    run, summ = doc["run"], doc["summary"]
    timing = run.get("timing") or {}
    run_s = timing.get("run_s") or run["wall_time_s"]
    hops = run.get("packet_hops") or sum(c["tx_frames"] for c in doc["counters"]["link"].values())
    run_cpu = timing.get("run_cpu_s") or run_s
    return {"wall_s": wall, "cpu_s": _CPU[0], "rss_mb": rss, "run_s": run_s,
            "run_cpu_s": run_cpu, "hops_per_cpu_s": hops / run_cpu,
            "events": run["events"],
            "packet_hops": hops, "events_per_s": run["events"] / run_s,
            "hops_per_s": hops / run_s, "events_per_hop": run["events"] / hops,
            "tail_over_ideal": summ["fct_tail_over_ideal"], "completed": run["completed"]}


def _measured(cmd: list[str], cwd: Path = ROOT
              ) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall time and peak RSS of ``cmd`` measured by a fresh Python process that runs it
    in ``cwd`` (``RUSAGE_CHILDREN`` of that process is exactly the command's)."""
    probe = ("import json,resource,subprocess,sys,time;cmd=json.loads(sys.argv[1]);"
             "t=time.perf_counter();p=subprocess.run(cmd,capture_output=True,text=True);"
             "w=time.perf_counter()-t;"
             "u=resource.getrusage(resource.RUSAGE_CHILDREN);r=u.ru_maxrss/1024;"
             "c=u.ru_utime+u.ru_stime;"
             "print(json.dumps([w,r,c,p.returncode,p.stdout[-4000:],p.stderr[-4000:]]))")
    out = subprocess.run([sys.executable, "-c", probe, json.dumps(cmd)], capture_output=True,
                         text=True, check=True, cwd=cwd)
    wall, rss, cpu, rc, so, se = json.loads(out.stdout)
    _CPU[0] = cpu
    return wall, rss, subprocess.CompletedProcess(cmd, rc, so, se)


#: CPU seconds (user + system) of the last measured command
_CPU = [0.0]


def write_matrix(hosts: int, size: int, path: Path) -> list[Any]:
    """Our permutation as an htsim connection matrix; returns the flows."""
    from uet.experiments.htsim_cm import save_cm
    from uet.experiments.traffic import permutation

    wl = permutation(list(range(hosts)), size, hosts, seed=SEED)
    save_cm(wl, path)
    return wl.flows


def run_htsim(binary: str, cm: Path, flows: list[Any], k: int) -> dict[str, Any]:
    """The reference simulator on the same permutation: NSCC, 128 paths, seed 13."""
    from uet.experiments.ideal import TopologyModel, WireFormat, ideal_fcts

    cmd = [binary, "-tm", str(cm), "-sender_cc_only", "-paths", "128", "-seed", str(SEED),
           "-end", "100000"]
    wall, rss, proc = _measured(cmd, cwd=cm.parent)  # it writes idmap.txt, logout.dat
    if proc.returncode:
        raise SystemExit(f"htsim failed ({proc.returncode}): {proc.stderr[-2000:]}")
    finished = [float(m) for m in re.findall(r"finished at ([0-9.]+)", proc.stdout)]
    if len(finished) != len(flows):
        # the tail of stdout is kept; count from a full run when it was cut
        full = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=cm.parent)
        finished = [float(m) for m in re.findall(r"finished at ([0-9.]+)", full.stdout)]
    model = TopologyModel.from_config({"kind": "fat_tree", "k": k, "rate_gbps": 100,
                                       "delay_ns": 1000})
    ideal = max(ideal_fcts(flows, model, WireFormat.htsim()).values()) / 1e6
    return {"wall_s": wall, "cpu_s": _CPU[0], "rss_mb": rss,
            "tail_over_ideal": max(finished) / ideal,
            "flows_finished": len(finished)}


def median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default="16,128,1024", help="comma-separated fat-tree sizes")
    ap.add_argument("--size", default="2000000", help="message size (traffic.size)")
    ap.add_argument("--runs", type=int, default=1, help="runs per size (medians reported)")
    ap.add_argument("--htsim", metavar="BINARY", help="htsim_uec to run alternately")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="more settings for uet run")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    from uet.experiments.schema import parse_size

    size = parse_size(args.size)
    table = []
    with tempfile.TemporaryDirectory(prefix="uet-scale-") as tmp:
        for hosts in (int(h) for h in args.hosts.split(",")):
            k = k_for(hosts)
            cm = Path(tmp) / f"perm_{hosts}.cm"
            flows = write_matrix(hosts, size, cm) if args.htsim else []
            ours, ref = [], []
            for i in range(args.runs):
                ours.append(run_uet(k, str(size), Path(tmp) / f"uet-{hosts}-{i}", args.set))
                if args.htsim:
                    ref.append(run_htsim(args.htsim, cm, flows, k))
                print(f"hosts {hosts} run {i + 1}: {ours[-1]['wall_s']:.2f} s "
                      f"{ours[-1]['rss_mb']:.0f} MB", file=sys.stderr)
            row: dict[str, Any] = {"hosts": hosts, "k": k, "size": size, "runs": args.runs}
            for key in ("wall_s", "cpu_s", "rss_mb", "run_s", "run_cpu_s", "hops_per_cpu_s",
                        "events_per_s", "hops_per_s",
                        "events_per_hop", "tail_over_ideal"):
                row[key] = median(ours, key)
            row["packet_hops"] = ours[0]["packet_hops"]
            row["events"] = ours[0]["events"]
            if ref:
                for key in ("wall_s", "cpu_s", "rss_mb", "tail_over_ideal"):
                    row[f"htsim_{key}"] = median(ref, key)
                row["wall_ratio"] = statistics.median(
                    o["wall_s"] / r["wall_s"] for o, r in zip(ours, ref, strict=True))
            table.append(row)
    if args.json:
        print(json.dumps(table, indent=2))
        return 0
    base = table[0]["hops_per_cpu_s"]
    head = (f"{'hosts':>6} {'wall s':>8} {'cpu s':>7} {'RSS MB':>7} {'run s':>7} {'events/s':>9} "
            f"{'hops/s':>8} {'hops/cpu-s':>10} {'vs first':>8} {'ev/hop':>6} "
            f"{'tail/ideal':>10}")
    if args.htsim:
        head += (f" {'htsim s':>8} {'htsim cpu':>9} {'htsim MB':>8} {'htsim tail':>10} "
                 f"{'ratio':>6}")
    print(head)
    for r in table:
        line = (f"{r['hosts']:>6} {r['wall_s']:>8.2f} {r['cpu_s']:>7.2f} {r['rss_mb']:>7.0f} "
                f"{r['run_s']:>7.2f} "
                f"{r['events_per_s']:>9,.0f} {r['hops_per_s']:>8,.0f} "
                f"{r['hops_per_cpu_s']:>10,.0f} {r['hops_per_cpu_s'] / base:>8.2f} "
                f"{r['events_per_hop']:>6.2f} "
                f"{r['tail_over_ideal']:>10.3f}")
        if "htsim_wall_s" in r:
            line += (f" {r['htsim_wall_s']:>8.2f} {r['htsim_cpu_s']:>9.2f} "
                     f"{r['htsim_rss_mb']:>8.0f} "
                     f"{r['htsim_tail_over_ideal']:>10.3f} {r['wall_ratio']:>6.1f}")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
