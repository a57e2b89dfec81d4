"""Every packet format on the wire of ordinary experiments (issue 20): a small matrix of
runs through ``run_experiment``, every host tapped, every frame of the captures decoded.
Each PDS type, control type (and the SYN form), NACK code the end point can detect, SES
request opcode, response opcode and response header must occur at least once, or be
listed below with the reason it cannot occur between two correct end points (and the
conformance case that provokes it instead, docs/conformance.md). docs/coverage.md,
"Formats on the wire", has the same table."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from uet.capture.pcapng import read_capture
from uet.experiments.config import parse_config
from uet.experiments.runner import run_experiment
from uet.experiments.schema import OPERATIONS
from uet.wire.codec import decode_frame
from uet.wire.constants import CtlType, NackCode, PdsType, RspOpcode, SesOpcode
from uet.wire.records import (
    PdsAck,
    PdsAckCc,
    SesMedium,
    SesResponse,
    SesResponseData,
    SesResponseDataSmall,
    SesSmall,
    SesStandard,
)

BASE = """\
[experiment]
name = "matrix"
seed = 3
time_limit_us = 20000
[topology]
kind = "star"
hosts = 5
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

#: a profile whose READs of up to 16 KiB ride in ACKs, whose reassembly table holds one
#: message and whose DC responses wait 8 ms (longer than the 5 ms RTO)
PROFILE = """\
[profile]
name = "hpc-matrix"
extends = "hpc"
[ses]
max_ack_data = 16383
reassembly_max_messages = 1
dc_latency_ns = 8000000
"""

ALL_OPS = "traffic.ops={" + ", ".join(f"{op} = 1" for op in OPERATIONS) + "}"
FAT = ['topology.kind="fat_tree"', "topology.k=4"]

#: name -> (--set items, hosts); "@profile" in an item is the matrix profile's path
MATRIX: dict[str, tuple[list[str], int]] = {
    # every operation, receives posted late, DC, NEGOTIATION at PDC open, LONG_DOUBLE
    "mix": ([ALL_OPS, "traffic.recv_delay_us=4", "traffic.dc=true",
             "transport.pds.negotiation=true", 'traffic.atomic_datatype="LONG_DOUBLE"'], 5),
    # trimmed ACKs carrying read data
    "read-trim": (['traffic.pattern="outcast"', "traffic.src=0", "traffic.size=4096",
                   "traffic.ops={read = 1}", "topology.queue_bytes=8192",
                   "topology.hosts=6"], 6),
    # CCX telemetry, trims in the middle of a fat tree and at the last hop
    "ccx-trims": ([*FAT, 'traffic.pattern="permutation"', "traffic.size=65536",
                   "topology.queue_bytes=8192", 'transport.cms.ccx="telemetry"'], 16),
    # RCCC over ROD with reordering: CC requests, credit, ROD_OOO
    "rod-rccc": (['transport.mode="ROD"', 'transport.cms.algorithm="nscc+rccc"',
                  "transport.pds.rod_buffer_packets=2", 'traffic.pattern="permutation"',
                  'impairments=[{match = "h*", reorder = 0.3, reorder_delay_ps = 3000000}]',
                  "traffic.size=65536"], 5),
    "rud-rccc": (['transport.cms.algorithm="nscc+rccc"', 'traffic.pattern="permutation"',
                  "traffic.size=65536"], 5),
    # RUDI trimmed: the NT NACK
    "rudi": (['transport.mode="RUDI"', 'traffic.pattern="incast"', "traffic.size=8192",
              "topology.queue_bytes=8192", "topology.hosts=8",
              "traffic.ops={write = 1, read = 1, no_op = 1}"], 8),
    # resource limits at the target
    "pdc-table": (['traffic.pattern="incast"', "topology.hosts=6",
                   "transport.pds.max_target_pdcs=2", "transport.pds.rto_ps=50000000"], 6),
    "cc-contexts": (['traffic.pattern="incast"', "topology.hosts=6",
                     "transport.pds.max_cc_contexts=2", "transport.pds.cc_requests=true",
                     "transport.pds.rto_ps=50000000"], 6),
    "bitmaps": (['traffic.pattern="incast"', "topology.hosts=6",
                 "transport.pds.max_rx_bitmaps=2", "transport.pds.rto_ps=50000000"], 6),
    "gtd-room": (['traffic.pattern="incast"', "topology.hosts=6", "traffic.size=4096",
                  "transport.pds.max_rx_memory_bytes=48", "transport.pds.rto_ps=50000000"],
                 6),
    "rx-memory": (['traffic.pattern="incast"', "topology.hosts=6", "traffic.size=16384",
                   "transport.pds.max_rx_memory_bytes=32", "transport.pds.rto_ps=50000000"],
                  6),
    "rod-memory": (['transport.mode="ROD"', 'traffic.pattern="incast"', "topology.hosts=6",
                    "transport.pds.max_rx_memory_bytes=4000", "transport.pds.rto_ps=50000000",
                    'impairments=[{match = "h*", reorder = 0.3, reorder_delay_ps = 3000000}]'],
                   6),
    "gtd-unstored": (['traffic.pattern="permutation"', "traffic.size=4096",
                      "transport.pds.max_rx_memory_bytes=1",
                      'impairments=[{match = "h*", duplicate = 0.3}]'], 5),
    # the matrix profile: READ data lost in ACKs, one reassembly slot, slow DC
    "ack-data-loss": (['transport.profile="@profile"', 'traffic.pattern="outcast"',
                       "traffic.src=0", "traffic.size=12288", "traffic.ops={read = 1}",
                       'impairments=[{match = "h0", direction = "down", loss = 0.15}]'], 5),
    "ses-slots": (['transport.profile="@profile"', 'traffic.pattern="incast"',
                   "traffic.size=32768"], 5),
    "slow-dc": (['transport.profile="@profile"', 'traffic.pattern="permutation"',
                 "traffic.size=4096", "traffic.dc=true"], 4),
    # PDS settings that change the packets
    "plain-ack": (['transport.pds.ack_type="ack"', "transport.pds.rack=false",
                   'impairments=[{match = "h1", loss = 0.05}]',
                   'traffic.pattern="permutation"', "traffic.size=65536"], 5),
    "target-start": (['transport.pds.start_psn_mode="target"',
                      'traffic.pattern="permutation"'], 5),
    "probe": (["transport.pds.probe_after_ps=20000000",
               'impairments=[{match = "h1", loss = 0.1}]', 'traffic.pattern="permutation"',
               "traffic.size=65536"], 5),
    "stale-dups": (['traffic.pattern="single"', "traffic.size=2097152",
                    'impairments=[{match = "h0", duplicate = 0.05, reorder = 0.05, '
                    "reorder_delay_ps = 300000000}]"], 2),
    "keepalive": (["transport.pds.keepalive_ps=20000000", "transport.pds.close_idle_ps=0",
                   "transport.pds.target_idle_ps=60000000", 'traffic.pattern="permutation"',
                   "experiment.time_limit_us=200"], 4),
    "native-ip": (['transport.encap="native-ip"', *FAT, 'traffic.pattern="permutation"',
                   "traffic.size=65536"], 16),
}

#: what two correct end points never send each other, why, and the conformance case that
#: makes the built-in end point send it (to a scripted peer) instead
NOT_APPLICABLE: dict[str, str] = {
    "pds.TSS": "TSS headers belong to secured PDCs (issue 14)",
    "nack.INV_DPDCID": "a peer naming a PDC this end point never had (PDS-EST-003)",
    "nack.PDC_HDR_MISMATCH": "a peer sending from another address / SPDCID than its PDC's "
                             "(PDS-EST-005)",
    "nack.CLOSING": "a request after the close PSN of a PDC the initiator itself closed "
                    "(PDS-NAK-005)",
    "nack.CLOSING_IN_ERR": "an initiator silent past the target's Close_REQ_Time, then "
                           "sending again (PDS-NAK-006)",
    "nack.PKT_NOT_RCVD": "an ACK_REQ for a PSN never sent: initiators ask only for packets "
                         "their SACK showed arrived (PDS-NAK-003)",
    "nack.INVALID_SYN": "a SYN naming another Start_PSN than its PDC's (PDS-EST-009)",
    "nack.PDC_MODE_MISMATCH": "a ROD request on a RUD PDC (PDS-EST-007)",
    "nack.UNEXP_EVENT": "a CREDIT_REQ to a peer without credit-based CC, or an unknown "
                        "NEGOTIATION version; the matrix's hosts share one configuration "
                        "(PDS-NAK-020, PDS-NAK-021)",
}


def _expected() -> set[str]:
    out = {f"pds.{t.name}" for t in PdsType if t not in (PdsType.RESERVED,)}
    out |= {f"cp.{c.name}" for c in CtlType} | {"cp.SYN_FORM", "ack.P"}
    out |= {f"nack.{c.name}" for c in NackCode
            if c not in (NackCode.NONE, NackCode.RESERVED_0C, NackCode.EXP_NACK_NORMAL,
                         NackCode.EXP_NACK_ERR, NackCode.EXP_NACK_FATAL)}
    out |= {"nack.NT"}
    out |= {f"ses.{o.name}" for o in SesOpcode}
    out |= {f"rsp.{o.name}" for o in RspOpcode}
    out |= {"hdr.RSP", "hdr.RSP_DATA", "hdr.RSP_DATA_SMALL", "hdr.RSP_DATA_REQUEST",
            "hdr.STANDARD", "hdr.MEDIUM", "hdr.SMALL", "encap.ip"}
    return out


def _seen(path: Path, ip_proto: int = 253) -> Counter:
    c: Counter = Counter()
    for cf in read_capture(path):
        f = decode_frame(cf.data, udp_port=None, ip_proto=ip_proto)
        p = f.pds
        c[f"pds.{PdsType(p.type).name}"] += 1
        if p.type == PdsType.CP:
            c[f"cp.{CtlType(p.ctl_type).name}"] += 1
            if p.flags & 0x04:
                c["cp.SYN_FORM"] += 1
        if p.type in (PdsType.NACK, PdsType.NACK_CCX):
            c[f"nack.{NackCode(p.nack_code).name}"] += 1
            if p.flags & 0x08:
                c["nack.NT"] += 1
        if isinstance(p, PdsAck | PdsAckCc) and p.flags & 0x08:
            c["ack.P"] += 1
        s = f.ses
        if isinstance(s, SesStandard | SesMedium | SesSmall):
            c[f"ses.{SesOpcode(s.opcode).name}"] += 1
            c[{SesStandard: "hdr.STANDARD", SesMedium: "hdr.MEDIUM",
               SesSmall: "hdr.SMALL"}[type(s)]] += 1
        elif s is not None:
            c[f"rsp.{RspOpcode(s.opcode).name}"] += 1
            c[{SesResponse: "hdr.RSP", SesResponseData: "hdr.RSP_DATA",
               SesResponseDataSmall: "hdr.RSP_DATA_SMALL"}[type(s)]] += 1
            if p.type in (PdsType.RUD_REQ, PdsType.ROD_REQ):
                c["hdr.RSP_DATA_REQUEST"] += 1  # read data in the return direction
        if f.encap == "ip":
            c["encap.ip"] += 1
    return c


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> dict[str, Counter]:
    root = tmp_path_factory.mktemp("matrix")
    profile = root / "hpc-matrix.toml"
    profile.write_text(PROFILE)
    out = {}
    for name, (sets, hosts) in MATRIX.items():
        items = [s.replace("@profile", str(profile)) for s in sets]
        ifaces = ", ".join(f'"h{i}"' for i in range(hosts))
        cfg = parse_config(BASE, name, [*items, f"capture.ifaces=[{ifaces}]"])
        res = run_experiment(cfg, root / name)
        assert res["run"]["stop_reason"] in ("done", "stalled"), (name, res["run"])
        out[name] = _seen(root / name / "capture.pcapng")
        out[name]["_flows_failed"] = sum(1 for f in res["flows"] if f.get("error"))
    return out


def test_every_format_occurs_or_is_listed_as_not_applicable(matrix):
    where: dict[str, list[str]] = defaultdict(list)
    for name, seen in matrix.items():
        for key, n in seen.items():
            if n and not key.startswith("_"):
                where[key].append(name)
    expected = _expected()
    missing = sorted(k for k in expected - set(where) if k not in NOT_APPLICABLE)
    assert not missing, f"never on the wire: {missing}"
    # the list of exceptions is honest: none of them occurred after all
    occurred = sorted(k for k in NOT_APPLICABLE if k in where)
    assert not occurred, f"listed as not applicable but seen: {occurred} in " \
                         f"{[where[k] for k in occurred]}"
    assert set(NOT_APPLICABLE) <= expected


def test_the_runs_show_what_they_are_for(matrix):
    """Each run's point, so that a change in behaviour shows here, not only as a missing
    format somewhere."""
    m = matrix
    assert m["read-trim"]["nack.TRIMMED_ACK"] and m["rudi"]["nack.NT"]
    assert m["ccx-trims"]["pds.NACK_CCX"] == m["ccx-trims"]["nack.TRIMMED"] \
        + m["ccx-trims"]["nack.TRIMMED_LASTHOP"]
    assert not m["ccx-trims"]["pds.ACK_CC"] and m["ccx-trims"]["pds.ACK_CCX"]
    assert m["mix"]["cp.NEGOTIATION"] and m["mix"]["rsp.NO_RESPONSE"]
    assert m["mix"]["ses.DEFERRABLE_RTR"] and m["mix"]["pds.UUD_REQ"]
    assert m["pdc-table"]["nack.NO_PDC_AVAIL"] and m["pdc-table"]["cp.CLOSE_REQ"]
    assert m["plain-ack"]["nack.RCVR_INFER_LOSS"] and not m["plain-ack"]["pds.ACK_CC"]
    assert m["native-ip"]["encap.ip"] == sum(v for k, v in m["native-ip"].items()
                                             if k.startswith("pds."))
    assert m["keepalive"]["cp.NOOP"] and not m["keepalive"]["cp.CLOSE_REQ"]
    assert m["slow-dc"]["nack.RCVD_SES_PROCG"] and m["ack-data-loss"]["nack.ACK_WITH_DATA"]
    # failures are failures of the configured limits, never of the ordinary runs
    for name in ("mix", "read-trim", "ccx-trims", "rudi", "native-ip", "probe", "plain-ack"):
        assert m[name]["_flows_failed"] == 0, name
