"""htsim connection matrices: parse, write, round trip, triggers."""

from __future__ import annotations

import pytest

from uet.experiments import collectives, traffic
from uet.experiments.htsim_cm import CmFormatError, load_cm, parse_cm, save_cm, write_cm
from uet.experiments.workload import Flow, Workload

ANCHOR_PERM = ("13->6, 1->4, 6->0, 2->13, 10->5, 15->1, 8->14, 14->2, 5->15, 4->12, 12->11, "
               "0->8, 9->7, 7->9, 3->10, 11->3")


def _key(wl: Workload) -> list[tuple]:
    return [(f.id, f.src, f.dst, f.size, f.start_ps, tuple(sorted(f.depends_on)))
            for f in wl.flows]


def test_parse_anchor_files() -> None:
    one = parse_cm("Nodes 16\nConnections 1\n0->13 start 0 size 2000000\n").to_workload()
    assert _key(one) == [(1, 0, 13, 2_000_000, 0, ())]
    lines = "\n".join(f"{i}->15 start 0 size 2000000" for i in range(15))
    incast = parse_cm(f"Nodes 16\nConnections 15\n{lines}\n").to_workload()
    assert len(incast.flows) == 15 and {f.dst for f in incast.flows} == {15}
    pairs = [tuple(map(int, p.split("->"))) for p in ANCHOR_PERM.split(", ")]
    text = "Nodes 16\nConnections 16\n" + "\n".join(
        f"{s}->{d} start 0 size 2000000" for s, d in pairs)
    perm = parse_cm(text).to_workload()
    assert [(f.src, f.dst) for f in perm.flows] == pairs
    assert sorted(f.dst for f in perm.flows) == list(range(16))


def test_example_file_is_htsims_permutation() -> None:
    from pathlib import Path

    cm = load_cm(Path(__file__).resolve().parents[2] / "experiments" / "perm_16n_16c_2MB.cm")
    pairs = [tuple(map(int, p.split("->"))) for p in ANCHOR_PERM.split(", ")]
    assert cm.nodes == 16 and [(c.src, c.dst) for c in cm.connections] == pairs


def test_triggers_become_dependencies() -> None:
    text = """# a two-step exchange
Nodes 4
Connections 4
Triggers 2
0->1 id 1 start 0 size 100 recv_done_trigger 1
1->0 id 2 start 2.5 size 100 recv_done_trigger 1
2->3 id 3 trigger 1 size 50 send_done_trigger 2
3->2 id 4 trigger 2 size 50 prio 3
trigger id 1 barrier count 2
trigger id 2 oneshot
"""
    wl = parse_cm(text).to_workload()
    assert _key(wl) == [(1, 0, 1, 100, 0, ()), (2, 1, 0, 100, 2_500_000, ()),
                        (3, 2, 3, 50, 0, (1, 2)), (4, 3, 2, 50, 0, (3,))]


@pytest.mark.parametrize("wl", [
    traffic.permutation(list(range(16)), 2_000_000, 16, seed=3),
    traffic.incast(list(range(16)), 15, 2_000_000, 16, start_ps=1_000_123),
    traffic.all_to_all(list(range(6)), 1000, 6, schedule="pairwise"),
    collectives.allreduce_ring(list(range(8)), 1 << 20, 16),
    collectives.allreduce_butterfly(list(range(8)), 1 << 20, 8),
    collectives.allreduce_halving_doubling(list(range(16)), 1 << 20, 16),
], ids=lambda w: w.name)
def test_round_trip(wl: Workload, tmp_path) -> None:
    text = write_cm(wl)
    back = parse_cm(text).to_workload(hosts=wl.hosts)
    assert _key(back) == _key(wl)
    assert write_cm(back) == text
    path = save_cm(wl, tmp_path / "w.cm")
    assert _key(load_cm(path).to_workload()) == _key(wl)


def test_writer_format() -> None:
    text = write_cm(traffic.single(0, 13, 2_000_000, 16))
    assert text == "Nodes 16\nConnections 1\n0->13 start 0 size 2000000\n"
    text = write_cm(collectives.allreduce_butterfly([0, 1], 300, 2))
    assert "0->1 id 1 start 0 size 300 recv_done_trigger" not in text  # one step only
    text = write_cm(collectives.allreduce_butterfly([0, 1, 2, 3], 300, 4))
    assert "trigger id 1 barrier count 2" in text and "Triggers 2" in text
    assert "0->2 id 5 trigger 1 size 300" in text


def test_writer_refuses_what_htsim_cannot_express() -> None:
    shared = Workload("x", 3, [Flow(1, 0, 1, 10), Flow(2, 1, 2, 10), Flow(3, 2, 0, 10,
                                                                         depends_on=(1,)),
                               Flow(4, 2, 1, 10, depends_on=(1, 2))])
    with pytest.raises(ValueError, match="only one trigger"):
        write_cm(shared)
    timed = Workload("x", 2, [Flow(1, 0, 1, 10), Flow(2, 1, 0, 10, start_ps=5,
                                                     depends_on=(1,))])
    with pytest.raises(ValueError, match="start time"):
        write_cm(timed)


@pytest.mark.parametrize("text, match", [
    ("Connections 1\n0->1 start 0 size 1\n", "Nodes"),
    ("Nodes 2\nConnections 2\n0->1 start 0 size 1\n", "Connections 2"),
    ("Nodes 2\n0->1 size 1\n", "no start method"),
    ("Nodes 2\n0->1 start 0 size 1 colour red\n", "unknown token"),
    ("Nodes 2\n0->5 start 0 size 1\n", "outside Nodes"),
    ("Nodes 2\n0->1 start 0\n", "size"),
    ("Nodes 2\n0->1 id 0 start 0 size 1\n", "positive"),
    ("Nodes 2\n0->1 id 1 trigger 3 start 0 size 1\ntrigger id 3 oneshot\n", "both"),
    ("Nodes 2\n0->1 id 1 trigger 3 size 1\n", "not defined"),
    ("Nodes 2\n0->1 id 1 trigger 3 size 1\ntrigger id 3 oneshot\n", "never activated"),
    ("Nodes 3\n0->1 id 1 start 0 size 1 recv_done_trigger 3\n"
     "1->2 id 2 trigger 3 size 1\ntrigger id 3 barrier count 2\n", "count 2"),
    ("Nodes 2\nbanana\n", "unknown line"),
    ("Nodes 2\ntrigger id 1\n", "no type"),
])
def test_errors_name_the_line(text: str, match: str) -> None:
    with pytest.raises(CmFormatError, match=match):
        parse_cm(text).to_workload()
