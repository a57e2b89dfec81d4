"""The operation mix (``traffic.ops``) and the encapsulation (``transport.encap``) of an
experiment: validation with one-line errors naming the key, exact proportions with a seeded
placement, every operation ending in a real run, native-IP frames on the wire."""

from __future__ import annotations

from collections import Counter

import pytest

from uet.capture.pcapng import read_capture
from uet.experiments.config import ConfigError, parse_config
from uet.experiments.runner import run_experiment
from uet.experiments.schema import OPERATIONS
from uet.experiments.traffic import build_workload
from uet.wire.codec import decode_frame

BASE = """\
[experiment]
name = "ops"
seed = 5
[topology]
kind = "star"
hosts = 4
[transport]
profile = "hpc"
[traffic]
pattern = "all_to_all"
size = "16KiB"
[output]
plots = false
progress = false
timeseries = false
"""


def cfg(*sets: str) -> dict:
    return parse_config(BASE, "<ops>", sets)


@pytest.mark.parametrize("sets,key,words", [
    (["traffic.ops.wrte=1"], "traffic.ops.wrte", "unknown operation 'wrte'"),
    (["traffic.ops.read=-1"], "traffic.ops.read", "bad weight -1"),
    (["traffic.ops.read=\"x\""], "traffic.ops.read", "bad weight 'x'"),
    (["traffic.ops={read = 0, write = 0}"], "traffic.ops", "every weight is 0"),
    (["transport.profile=\"ai-base\"", "traffic.ops.tagged_send=1"], "traffic.ops.tagged_send",
     "TAGGED_SEND is not allowed by profile ai-base"),
    (["transport.mode=\"RUDI\"", "traffic.ops.send=1"], "traffic.ops.send",
     "send over RUDI"),
    (["traffic.ops.atomic=1", "traffic.atomic_datatype=\"LONG_DOUBLE\"",
      "transport.profile=\"ai-full\""], "traffic.atomic_datatype",
     "atomic datatype LONG_DOUBLE not in atomics.datatypes"),
    (["traffic.ops.atomic=1", "traffic.atomic_opcode=\"BXOR\"",
      "traffic.atomic_datatype=\"FLOAT\""], "traffic.atomic_opcode", "BXOR is not defined"),
    (["transport.stack=\"roce\"", "traffic.ops.read=1"], "traffic.ops", "WRITEs only"),
    (["transport.encap=\"native-ip\"", "transport.ip_proto=17"], "transport.ip_proto",
     "17 is UDP"),
    (["transport.encap=\"ipv4\""], "transport.encap", "one of udp, native-ip"),
])
def test_bad_mix_is_a_one_line_error_naming_the_key(sets, key, words):
    with pytest.raises(ConfigError) as err:
        cfg(*sets)
    text = str(err.value)
    assert key in text and words in text and "\n" not in text.strip(), text


def test_the_mix_does_not_apply_to_all_reduces():
    text = BASE.replace('pattern = "all_to_all"', 'pattern = "allreduce_ring"\nops = {read = 1}')
    with pytest.raises(ConfigError, match="traffic.ops.*applies only when traffic.pattern"):
        parse_config(text, "<ops>")


def test_proportions_are_exact_and_the_placement_is_seeded():
    mix = "traffic.ops={write = 0.5, read = 0.25, send = 0.25}"
    wl = build_workload(cfg(mix))  # 4 hosts all-to-all: 12 flows
    assert Counter(f.op for f in wl.flows) == {"write": 6, "read": 3, "send": 3}
    again = build_workload(cfg(mix))
    assert [f.op for f in wl.flows] == [f.op for f in again.flows]
    other = build_workload(cfg(mix, "traffic.seed=99"))
    assert [f.op for f in other.flows] != [f.op for f in wl.flows]
    plain = build_workload(cfg())
    assert {f.op for f in plain.flows} == {"write"}
    assert wl.flows[0].to_dict().get("op", "write") == wl.flows[0].op


def test_every_operation_completes_in_a_run(tmp_path):
    """All 13 operations (one flow each at least: 4 hosts x 5 all-to-all = 20 flows),
    receives posted late, over a lossy link: every flow ends, none failed."""
    mix = "traffic.ops={" + ", ".join(f"{op} = 1" for op in OPERATIONS) + "}"
    c = cfg(mix, "topology.hosts=5", "traffic.recv_delay_us=4",
            "traffic.atomic_datatype=\"LONG_DOUBLE\"",
            "impairments=[{match = \"h1\", loss = 0.02}]")
    res = run_experiment(c, tmp_path)
    ops = Counter(f["op"] for f in res["flows"])
    assert set(ops) == set(OPERATIONS)
    bad = [(f["op"], f.get("error")) for f in res["flows"]
           if f.get("error") or f["end_ps"] is None]
    assert not bad and res["run"]["stop_reason"] == "done"
    assert all(f["size"] == 16 for f in res["flows"] if "atomic" in f["op"])  # binary128
    assert all(f["size"] == 0 for f in res["flows"] if f["op"] == "no_op")


def test_native_ip_run_sends_entropy_headers_and_sprays(tmp_path):
    c = cfg("transport.encap=\"native-ip\"", "transport.ip_proto=200",
            "topology.kind=\"fat_tree\"", "topology.k=4", "traffic.pattern=\"permutation\"",
            "traffic.size=\"256KiB\"", "capture.ifaces=[\"h0\"]")
    res = run_experiment(c, tmp_path)
    assert res["run"]["stop_reason"] == "done"
    frames = [decode_frame(cf.data, ip_proto=200) for cf in read_capture(
        tmp_path / "capture.pcapng")]
    assert frames and all(f.encap == "ip" and f.ip_proto == 200 for f in frames)
    evs = {f.ev for f in frames if f.pds.type == 2 and f.src_ip == "10.0.0.2"}
    assert len(evs) > 8  # sprayed over many paths by the entropy value
    udp = run_experiment(cfg("topology.kind=\"fat_tree\"", "topology.k=4",
                             "traffic.pattern=\"permutation\"", "traffic.size=\"256KiB\""),
                         None)
    assert udp["summary"]["messages_delivered"] == res["summary"]["messages_delivered"]
    # a full data frame: Ethernet 14 + IPv4 20 + entropy 4 + PDS 12 + SES 44 + 4096
    # (UDP's is 4 bytes longer: 4194)
    sizes = {len(cf.data) for cf in read_capture(tmp_path / "capture.pcapng")}
    assert max(sizes) == 4190
