"""The traffic seed apart from the fabric seed (issue 19 item 18): ``traffic.seed`` holds
the traffic (who sends to whom, the all-reduce data) while ``experiment.seed`` changes
the fabric's draws, so two such runs can be diffed packet for packet."""

from __future__ import annotations

from pathlib import Path

from uet.capture.diff import diff_captures, index_capture
from uet.experiments.config import parse_config
from uet.experiments.runner import Runner, run_experiment
from uet.experiments.traffic import build_workload, traffic_seed

QUIET = """
[output]
plots = false
timeseries = false
progress = false
"""

ALLREDUCE = """
[experiment]
seed = {seed}
[topology]
kind = "fat_tree"
[traffic]
pattern = "allreduce_ring"
hosts = [0, 5, 10, 15]
size = "32KiB"
{traffic_seed}
[capture]
ifaces = ["h0", "h5"]
"""


def _cfg(seed: int, tseed: int | None) -> dict:
    line = "" if tseed is None else f"seed = {tseed}"
    return parse_config(ALLREDUCE.format(seed=seed, traffic_seed=line) + QUIET)


def test_traffic_seed_defaults_to_the_experiment_seed() -> None:
    assert traffic_seed(_cfg(3, None)) == 3
    assert traffic_seed(_cfg(3, 9)) == 9
    perm = "[experiment]\nseed = {}\n[traffic]\npattern = \"permutation\"\n{}\n" + QUIET
    pairs = [[f.src, f.dst] for f in build_workload(parse_config(perm.format(1, "")))
             .flows]
    moved = [[f.src, f.dst] for f in build_workload(parse_config(perm.format(2, "")))
             .flows]
    held = [[f.src, f.dst] for f in build_workload(parse_config(perm.format(2, "seed = 1")))
            .flows]
    assert pairs != moved and pairs == held


def test_allreduce_data_follows_the_traffic_seed(tmp_path: Path) -> None:
    """The ranks' input buffers come from the traffic seed: with it fixed, another
    experiment.seed sends the same bytes (it sent other bytes before)."""
    def payloads(cfg: dict) -> list[bytes]:
        r = Runner(cfg, tmp_path)
        return [bytes(r.bytes_state.payload(f)) for f in r.wl.flows[:4]]

    base = payloads(_cfg(1, None))
    assert payloads(_cfg(2, 1)) == base
    assert payloads(_cfg(2, None)) != base


def test_runs_with_another_fabric_seed_and_the_same_traffic_diff_cleanly(tmp_path: Path
                                                                         ) -> None:
    """Two all-reduce runs, experiment.seed 1 and 2 with traffic.seed 1, no impairment:
    once normalized (PDC IDs, PSNs and EVs are the fabric's draws) every packet has its
    counterpart with the same payload; results.json says which traffic seed was used."""
    a = run_experiment(_cfg(1, 1), tmp_path / "a")
    b = run_experiment(_cfg(2, 1), tmp_path / "b")
    assert a["experiment"]["traffic_seed"] == b["experiment"]["traffic_seed"] == 1
    assert (a["experiment"]["seed"], b["experiment"]["seed"]) == (1, 2)
    assert a["collective"]["ok"] and b["collective"]["ok"]
    ca, cb = tmp_path / "a" / "capture.pcapng", tmp_path / "b" / "capture.pcapng"
    assert diff_captures(ca, cb).totals()["matched"] == 0  # exact keys: other PDC IDs
    res = diff_captures(ca, cb, mode="normalized")
    t = res.totals()
    assert t["matched"] > 100 and t["missing"] == t["added"] == 0
    assert not any(name == "payload.crc32" for name, _ in res.field_counts())
    c = run_experiment(_cfg(2, None), tmp_path / "c")  # the traffic follows: other data
    other = diff_captures(ca, tmp_path / "c" / "capture.pcapng", mode="normalized")
    data = [p for p in index_capture(ca)[0] if p.kind == "req" and p.fields["uet.payload_len"]]
    assert len(data) > 40
    assert dict(other.field_counts()).get("payload.crc32") == len(data)  # every data packet
    assert c["experiment"]["traffic_seed"] == 2
