"""The experiment file schema: every key with its type, default, allowed values and doc.

One declarative table drives both validation (:mod:`uet.experiments.config`) and the key
reference in ``docs/experiments.md`` (:func:`doc_table`; a test keeps the two equal).

Tables: ``[experiment]``, ``[topology]`` (+ ``topology.pfc``), ``[[impairments]]`` (+
``impairments.gilbert``), ``[transport]``, ``[transport.cms]`` (explicit keys plus any other
:class:`uet.cms.api.CmsConfig` field), ``[transport.pds]`` (any
:class:`uet.pds.config.PdsConfig` field), ``[transport.roce]`` (any
:class:`uet.roce.config.RoceConfig` field), ``[traffic]``, ``[capture]``, ``[output]``,
``[versus]`` (the runs of ``uet versus``).
Topology key names are those of :mod:`uet.fabric.topology`, impairment keys those of
:class:`uet.fabric.impairments.Impairments`, CMS keys those of ``CmsConfig``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

#: key types: int, float, bool, str, enum, size (bytes: int or "2MB"/"1MiB"), int_list,
#: str_list, pairs ([[src, dst], ...]), intervals ([[t_down_ps, t_up_ps?], ...]),
#: globs (a string or a list of strings), table (a sub-table), bool_or_table, weights (a
#: table of name -> number >= 0, the names in ``choices``).
TYPES = ("int", "float", "bool", "str", "enum", "size", "int_list", "str_list", "pairs",
         "intervals", "globs", "table", "bool_or_table", "weights")

TOPOLOGY_KINDS = ("back_to_back", "star", "leaf_spine", "fat_tree")
DELIVERY_MODES = ("RUD", "ROD", "RUDI", "UUD")
EV_SELECTORS = ("fixed", "oblivious", "bitmap", "reps", "mixed")
CC_ALGORITHMS = ("none", "nscc", "rccc", "nscc+rccc")
PATTERNS = ("single", "permutation", "incast", "outcast", "all_to_all", "allreduce_ring",
            "allreduce_butterfly", "allreduce_halving_doubling", "cm_file")
LINK_CLASSES = ("all", "host", "switch", "tor_agg", "agg_core", "leaf_spine")
DIRECTIONS = ("both", "up", "down")
SCHEDULES = ("simultaneous", "pairwise")
PICKS = ("first", "random")
STACKS = ("uet", "roce")
ENCAPS = ("udp", "native-ip")
#: operations of the operation mix (uet.experiments.ops)
OPERATIONS = ("write", "read", "send", "tagged_send", "atomic", "fetching_atomic",
              "tagged_atomic", "tagged_fetching_atomic", "rendezvous_send",
              "rendezvous_tsend", "deferrable_send", "deferrable_tsend", "datagram", "no_op")
ATOMIC_OPS = ("MIN", "MAX", "SUM", "DIFF", "PROD", "LOR", "LAND", "BOR", "BAND", "LXOR",
              "BXOR", "READ", "WRITE")
ATOMIC_DATATYPES = ("INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64",
                    "INT128", "UINT128", "FLOAT", "DOUBLE", "FLOAT_COMPLEX", "DOUBLE_COMPLEX",
                    "LONG_DOUBLE", "LONG_DOUBLE_COMPLEX", "BF16", "FP16")

IFACE_RE = r"h\d+|[a-z_]+\d+\.p\d+"
LINK_RE = rf"(?:{IFACE_RE})(?:<->(?:{IFACE_RE}))?"


@dataclass(frozen=True, slots=True)
class Key:
    """One key: how it is checked, its default (None: absent) and what it means."""

    type: str
    default: Any
    doc: str
    choices: tuple[Any, ...] = ()
    lo: float | None = None
    hi: float | None = None
    unit: str = ""
    #: applies only when a sibling key has one of these values: ("kind", ("fat_tree",))
    when: tuple[str, tuple[str, ...]] | None = None
    power_of_two: bool = False
    pattern: str | None = None  # str / str_list items must match this regex
    table: str | None = None  # sub-table name for 'table' / 'bool_or_table'

    def allowed(self) -> str:
        """Human-readable allowed values (used in errors and the doc table)."""
        t = self.type
        if t == "enum":
            return "one of " + ", ".join(f"{c}" for c in self.choices)
        if t == "bool":
            return "true or false"
        if t == "tss":
            return ("a table: mode = \"off\"; or a secure domain (mode, sdi, key, job and "
                    "the optional keys of docs/tss.md); or domains = [...]; or key_file")
        if t in ("int", "float", "size", "int_list"):
            what = {"int": "an integer", "float": "a number", "size": "a size in bytes "
                    "(integer, or a string such as \"1MiB\", \"2MB\", \"64KiB\")",
                    "int_list": "a list of integers"}[t]
            if self.power_of_two:
                what = "a power of two"
            rng = _range_text(self.lo, self.hi)
            return f"{what}{' ' + rng if rng else ''}"
        if t == "str":
            return "a string" + (f" matching {self.pattern}" if self.pattern else "")
        if t == "str_list":
            return "a list of strings" + (f" matching {self.pattern}" if self.pattern else "")
        if t == "pairs":
            return "a list of [src, dst] host pairs"
        if t == "intervals":
            return "a list of [t_down_ps] or [t_down_ps, t_up_ps]"
        if t == "globs":
            return "a link/interface name pattern or a list of them (fnmatch: * ?)"
        if t == "table":
            return f"a table (keys in [{self.table}])"
        if t == "bool_or_table":
            return f"false, true or a table (keys in [{self.table}])"
        if t == "weights":
            return "a table of weights >= 0 of " + ", ".join(self.choices)
        raise AssertionError(t)  # pragma: no cover - schema bug


def _range_text(lo: float | None, hi: float | None) -> str:
    def fmt(v: float) -> str:
        return f"{v:g}" if isinstance(v, float) else str(v)

    if lo is not None and hi is not None:
        return f"in [{fmt(lo)}, {fmt(hi)}]"
    if lo is not None:
        return f">= {fmt(lo)}"
    if hi is not None:
        return f"<= {fmt(hi)}"
    return ""


@dataclass(frozen=True, slots=True)
class Table:
    """A TOML table (``array``: an array of tables ``[[name]]``)."""

    name: str
    doc: str
    keys: dict[str, Key]
    array: bool = False
    #: 'cms' / 'pds': other keys are checked against that dataclass's fields
    open: str | None = None
    open_doc: str = ""
    nested: bool = False  # lives inside another table (not a top-level section)
    #: left out of the resolved config unless the file (or a --set) names it, so adding
    #: the table changed no existing run's results.json
    optional: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


_K = Key

EXPERIMENT = Table("experiment", "What the run is called, its seed and its limits.", {
    "name": _K("str", "experiment", "name shown in reports and results.json"),
    "description": _K("str", "", "free text, copied to results.json"),
    "seed": _K("int", 1, "seed of every random choice: the fabric (ECMP hashes, switches), "
               "the impairments (unless impairments.seed), the end points (PDC IDs, "
               "Start_PSNs, EVs) and, unless traffic.seed is set, the traffic; same seed "
               "and config give the same results", lo=0),
    "time_limit_us": _K("float", 100_000.0, "stop when virtual time reaches this "
                        "(unfinished flows are reported as such)", lo=0.001, unit="µs"),
    "wall_limit_s": _K("float", 0.0, "stop after this much wall-clock time (0: no limit)",
                       lo=0.0, unit="s"),
    "drain": _K("bool", True, "after the last delivery, run on (within time_limit_us) until "
                "every PDC has closed, so that closes are counted and captured"),
})

_ON_FT = ("kind", ("fat_tree",))
_ON_LS = ("kind", ("leaf_spine",))
_ON_STAR = ("kind", ("star",))

TOPOLOGY = Table("topology", "The fabric: shape, links, queues, ECN, trimming, PFC "
                 "(names as in uet.fabric.topology).", {
    "kind": _K("enum", "fat_tree", "topology shape; hosts are numbered as htsim does",
               TOPOLOGY_KINDS),
    "k": _K("int", 4, "fat-tree arity, an even number (k=4: 16 hosts, k=8: 128)", lo=2,
            hi=64, when=_ON_FT),
    "hosts": _K("int", 4, "hosts on the one switch", lo=1, hi=64000, when=_ON_STAR),
    "leaves": _K("int", 4, "leaf switches", lo=1, hi=1024, when=_ON_LS),
    "spines": _K("int", 2, "spine switches", lo=1, hi=1024, when=_ON_LS),
    "hosts_per_leaf": _K("int", 4, "hosts under each leaf", lo=1, hi=1024, when=_ON_LS),
    "oversubscription": _K("float", 1.0, "host bandwidth / uplink bandwidth per leaf "
                           "(sets the uplink rate unless uplink_gbps is given)",
                           lo=0.01, hi=1024.0, when=_ON_LS),
    "uplink_gbps": _K("float", None, "leaf-spine link rate (default: from oversubscription)",
                      lo=0.001, unit="Gb/s", when=_ON_LS),
    "rate_gbps": _K("float", 100.0, "link rate of every link (host and switch links)",
                    lo=0.001, hi=100_000.0, unit="Gb/s"),
    "delay_ns": _K("float", 1000.0, "one-way propagation latency of every link", lo=0.0,
                   unit="ns"),
    "queue_bytes": _K("size", 178_450, "data-class queue per switch port (1 BDP at "
                      "100 Gb/s, 14.02 µs RTT)", lo=1, unit="B"),
    "control_queue_bytes": _K("size", None, "control-class queue per port (default: "
                              "queue_bytes)", lo=1, unit="B"),
    "ecn": _K("bool", True, "switches mark ECN-CE between ecn_kmin and ecn_kmax"),
    "ecn_kmin": _K("size", 37_350, "queue bytes where marking starts (0.2 BDP)", lo=0,
                   unit="B"),
    "ecn_kmax": _K("size", 145_250, "queue bytes where every packet is marked (0.8 BDP)",
                   lo=0, unit="B"),
    "trimming": _K("bool", True, "switches trim packets that do not fit to their headers "
                   "(instead of dropping); also the default of transport.cms.trimming"),
    "pfc": _K("bool_or_table", False, "priority flow control: false, true (defaults) or "
              "a table of topology.pfc keys", table="topology.pfc"),
    "ipv6": _K("bool", False, "hosts use IPv6 addresses (fd00::...) instead of IPv4"),
    "reroute_us": _K("float", None, "routing convergence: this long after a link goes down "
                     "or up, switches recompute shortest-path ECMP routes over the links up "
                     "(default: fixed up/down routes; senders get around dead links by EV "
                     "choice only)", lo=0.0, unit="µs"),
})

PFC = Table("topology.pfc", "PFC settings (uet.fabric.pfc.PfcConfig).", {
    "classes": _K("int_list", [0], "lossless traffic classes", lo=0, hi=7),
    "xoff": _K("size", 60_000, "bytes buffered per ingress port and class before XOFF",
               lo=1, unit="B"),
    "xon": _K("size", 30_000, "bytes at which XON is sent (<= xoff)", lo=0, unit="B"),
    "headroom": _K("size", None, "bytes accepted after XOFF (default: 2 x rate x delay "
                   "+ 2 MTU + a pause frame)", lo=0, unit="B"),
    "quanta": _K("int", 0xFFFF, "pause time in quanta of 512 bit times", lo=1, hi=0xFFFF),
    "mtu": _K("size", 9216, "largest frame, for the headroom", lo=64, unit="B"),
}, nested=True)

IMPAIRMENTS = Table("impairments", "Impairments on links, one [[impairments]] table per "
                    "selection (keys as in uet.fabric.impairments.Impairments).", {
    "match": _K("globs", None, "links to impair: fnmatch patterns tried on the link name "
                "(\"agg0.p2<->core0.p0\") and on each end's interface name (\"h3\", "
                "\"core0.p0\"); give match, class or both (both: links matching both)"),
    "class": _K("enum", None, "a class of links: host (host to its switch), switch "
                "(between switches), tor_agg, agg_core, leaf_spine, all", LINK_CLASSES),
    "direction": _K("enum", "both", "which way: up (from the host side towards the core), "
                    "down, or both", DIRECTIONS),
    "loss": _K("float", 0.0, "Bernoulli loss probability per frame", lo=0.0, hi=1.0),
    "gilbert": _K("table", None, "bursty loss (Gilbert-Elliott), a table of "
                  "impairments.gilbert keys", table="impairments.gilbert"),
    "corrupt": _K("float", 0.0, "probability that a frame gets corrupt_bits flipped "
                  "(dropped by the receiver's FCS check)", lo=0.0, hi=1.0),
    "corrupt_bits": _K("int", 1, "bits flipped in a corrupted frame", lo=1, hi=64),
    "ber": _K("float", 0.0, "bit error rate (instead of corrupt)", lo=0.0, hi=1.0),
    "duplicate": _K("float", 0.0, "probability that a frame is delivered twice", lo=0.0,
                    hi=1.0),
    "jitter_ps": _K("int", 0, "extra delay per frame, uniform in [0, jitter_ps] "
                    "(reorders frames)", lo=0, unit="ps"),
    "reorder": _K("float", 0.0, "probability that a frame is held back by "
                  "reorder_delay_ps", lo=0.0, hi=1.0),
    "reorder_delay_ps": _K("int", 0, "hold-back delay of a reordered frame", lo=0,
                           unit="ps"),
    "rate_gbps": _K("float", None, "degraded rate of the selected links", lo=0.001,
                    unit="Gb/s"),
    "rate_factor": _K("float", None, "degraded rate as a fraction of the nominal rate "
                      "(0.25: htsim's \"25% speed\")", lo=0.0001, hi=1.0),
    "queue_factor": _K("float", None, "scale the queue limits and ECN thresholds of the "
                       "switch port sending in the selected direction (htsim scales a "
                       "degraded link's buffer with its speed: queue_factor = rate_factor)",
                       lo=0.0001, hi=1.0),
    "down": _K("intervals", [], "times the links are down: [[t_down_ps, t_up_ps], ...] "
               "([t_down_ps] alone: stays down)", unit="ps"),
    "seed": _K("int", None, "seed of these links' random draws (default: derived from "
               "experiment.seed and the link name)", lo=0),
}, array=True)

GILBERT = Table("impairments.gilbert", "Gilbert-Elliott two-state loss.", {
    "p_gb": _K("float", 0.01, "good -> bad transition probability per frame", lo=0.0,
               hi=1.0),
    "p_bg": _K("float", 0.3, "bad -> good transition probability per frame", lo=0.0,
               hi=1.0),
    "loss_good": _K("float", 0.0, "loss probability in the good state", lo=0.0, hi=1.0),
    "loss_bad": _K("float", 1.0, "loss probability in the bad state", lo=0.0, hi=1.0),
}, nested=True)

TRANSPORT = Table("transport", "The end points: UET (profile and delivery mode, "
                  "congestion control in [transport.cms], PDS settings in "
                  "[transport.pds]) or the RoCEv2 baseline ([transport.roce]).", {
    "stack": _K("enum", "uet", "which transport the hosts run: uet (SES + PDS + CMS) or "
                "roce (RoCEv2 RC: go-back-N, DCQCN, per-QP ECMP; docs/roce.md); the fabric "
                "and the workload are the same", STACKS),
    "profile": _K("str", "ai-base", "built-in profile (ai-base, ai-full, hpc) or a path "
                  "to a profile TOML file"),
    "mode": _K("enum", "RUD", "PDS delivery mode of the traffic (must be allowed by the "
               "profile)", DELIVERY_MODES),
    "encap": _K("enum", "udp", "encapsulation: udp (UDP port 4793, the EV in the source "
                "port) or native-ip (the 4-byte entropy header right after IP, protocol "
                "ip_proto); switches hash and trim both", ENCAPS),
    "ip_proto": _K("int", 253, "IP protocol of native-ip (RFC 3692 experimental 253 by "
                   "default; not 6 or 17)", lo=0, hi=255, when=("encap", ("native-ip",))),
    "cms": _K("table", {}, "congestion management, a table of transport.cms keys",
              table="transport.cms"),
    "pds": _K("table", {}, "PDS overrides, a table of transport.pds keys",
              table="transport.pds"),
    "roce": _K("table", {}, "RoCEv2 settings (stack = roce), a table of transport.roce keys",
               table="transport.roce"),
    "tss": _K("tss", {}, "transport security (docs/tss.md): {mode = \"off\"} (the "
              "default), one secure domain {mode = \"direct\" | \"cluster\" | "
              "\"server\", sdi, key, job, ...} carrying the traffic's job, "
              "{domains = [...]}, or {key_file = PATH}; ssi = \"auto\" gives every host its "
              "own SSI"),
})

CMS = Table("transport.cms", "Congestion management (uet.cms.api.CmsConfig); "
            "link_rate_bps and base_rtt_ps default to values derived from the topology, "
            "trimming to topology.trimming.", {
    "ev_selector": _K("enum", "profile", "how each packet's entropy value (path) is "
                      "chosen: fixed (per-flow ECMP), oblivious (sprayed), bitmap, reps, "
                      "mixed (htsim's default: recycle, else bitmap); profile: the "
                      "profile's cms.ev_selector",
                      EV_SELECTORS + ("profile",)),
    "ev_count": _K("int", 128, "entropy values a PDC sprays over", lo=1, hi=65536,
                   power_of_two=True),
    "algorithm": _K("enum", "profile", "congestion control (must be allowed by the "
                    "profile); profile: the profile's cms.default", CC_ALGORITHMS + ("profile",)),
}, open="cms", open_doc="any other CmsConfig field (see docs/cms.md), e.g. "
   "max_window_bytes, target_qdelay_ps, reps_buffer_size", nested=True)

PDS = Table("transport.pds", "PDS settings (uet.pds.config.PdsConfig).", {},
            open="pds", open_doc="any PdsConfig field (see docs/pds.md), e.g. rto_ps, "
            "ack_every_bytes, mp_range, max_retries", nested=True)

ROCE = Table("transport.roce", "The RoCEv2 baseline (uet.roce.config.RoceConfig; "
             "used when transport.stack = \"roce\").", {}, open="roce",
             open_doc="any RoceConfig field (see docs/roce.md), e.g. qps_per_flow, irn, mtu, "
             "timeout, ack_coalesce, and the table dcqcn (DcqcnConfig fields: enabled, g, "
             "rate_timer_us, rai_mbps, cnp_interval_us, ...)", nested=True)

_ALLREDUCE = ("allreduce_ring", "allreduce_butterfly", "allreduce_halving_doubling")
_GENERATED = tuple(p for p in PATTERNS if p != "cm_file")
_NON_COLLECTIVE = tuple(p for p in PATTERNS if p not in _ALLREDUCE)

TRAFFIC = Table("traffic", "The workload: a generated pattern or an htsim connection-"
                "matrix file.", {
    "pattern": _K("enum", "permutation", "what to send (see \"Traffic patterns\")",
                  PATTERNS),
    "size": _K("size", 1 << 20, "bytes per message; for all-reduce the buffer size per "
               "rank", lo=1, unit="B", when=("pattern", _GENERATED)),
    "hosts": _K("int_list", [], "participating hosts (empty: all hosts)", lo=0,
                when=("pattern", _GENERATED)),
    "src": _K("int", 0, "sender (single, outcast)", lo=0,
              when=("pattern", ("single", "outcast"))),
    "dst": _K("int", -1, "receiver (single, incast); -1: the last participating host",
              lo=-1, when=("pattern", ("single", "incast"))),
    "degree": _K("int", 0, "senders of an incast / receivers of an outcast (0: every "
                 "other participating host)", lo=0, when=("pattern", ("incast", "outcast"))),
    "pick": _K("enum", "first", "which hosts join an incast/outcast of smaller degree: "
               "the first ones in host order or a seeded random choice", PICKS,
               when=("pattern", ("incast", "outcast"))),
    "pairs": _K("pairs", [], "explicit permutation [[src, dst], ...] instead of a seeded "
                "derangement", when=("pattern", ("permutation",))),
    "schedule": _K("enum", "simultaneous", "all_to_all: every flow at once, or pairwise "
                   "exchange steps (step j: rank r sends to r+j once its step j-1 message "
                   "was delivered)", SCHEDULES, when=("pattern", ("all_to_all",))),
    "start_us": _K("float", 0.0, "start time of the flows that depend on no other flow",
                   lo=0.0, unit="µs", when=("pattern", _GENERATED)),
    "seed": _K("int", -1, "seed of the traffic: the hosts a permutation, incast or outcast "
               "picks and the all-reduce data (-1: experiment.seed); set it to vary "
               "experiment.seed with the same traffic (see \"Seeds\")",
               lo=-1, when=("pattern", _GENERATED)),
    "file": _K("str", "", "htsim connection-matrix file (relative to the experiment "
               "file)", when=("pattern", ("cm_file",))),
    "victims": _K("int_list", [], "flow ids reported apart as victim flows "
                  "(summary.victim_*: e.g. a flow sharing a link an incast pauses)", lo=0),
    "ops": _K("weights", {}, "the operation mix: a table of operation -> weight, each flow "
              "draws its operation from it (seeded by the traffic seed; see \"Operation "
              "mix\"); empty: every flow is a WRITE", OPERATIONS,
              when=("pattern", _NON_COLLECTIVE)),
    "recv_delay_us": _K("float", 0.0, "two-sided operations: the receiver posts its receive "
                        "this long after the flow starts (0: before the message leaves), "
                        "so messages arrive unexpected, deferrable sends are restarted and "
                        "rendezvous pulls wait", lo=0.0, unit="µs",
                        when=("pattern", _NON_COLLECTIVE)),
    "dc": _K("bool", False, "set DC (delivery complete) on WRITE and SEND family "
             "operations: the target answers NO_RESPONSE at once and its response after "
             "the profile's ses.dc_latency_ns", when=("pattern", _NON_COLLECTIVE)),
    "atomic_opcode": _K("enum", "SUM", "atomic operation of the atomic operations of the "
                        "mix", ATOMIC_OPS, when=("pattern", _NON_COLLECTIVE)),
    "atomic_datatype": _K("enum", "UINT64", "datatype of the atomic operations of the mix "
                          "(must be allowed by the profile)", ATOMIC_DATATYPES,
                          when=("pattern", _NON_COLLECTIVE)),
})

CAPTURE = Table("capture", "pcapng taps (one file holding every tap).", {
    "ifaces": _K("str_list", [], "interfaces to tap, tx and rx (\"h0\", \"tor0.p2\")",
                 pattern=IFACE_RE),
    "links": _K("str_list", [], "links to tap, both directions (\"h0<->tor0.p0\" or an "
                "interface on the link)", pattern=LINK_RE),
    "snaplen": _K("int", 0, "bytes kept per frame (0: whole frames)", lo=0, hi=65535,
                  unit="B"),
    "file": _K("str", "capture.pcapng", "file name under the output directory",
               pattern=r"[^/\\]+\.pcapng"),
})

#: the plots ``uet run`` can write, one PNG each (uet.experiments.plots)
PLOT_KINDS = ("fct_cdf", "link_utilisation", "queues", "cwnd", "paths")

OUTPUT = Table("output", "What is written besides results.json.", {
    "plots": _K("bool", True, "write PNG plots (FCT CDF, link utilisation, queues, cwnd, "
                "paths)"),
    "plot_kinds": _K("str_list", list(PLOT_KINDS), "which plots \"plots\" writes (of "
                     + ", ".join(PLOT_KINDS) + "); the sampler records only the series "
                     "they draw when timeseries is false",
                     pattern="|".join(PLOT_KINDS)),
    "event_log": _K("bool", False, "write the structured event log (events.jsonl)"),
    "log_level": _K("enum", "off", "print the structured event log on the terminal (stderr) "
                    "as the run goes: error (failed flows, PDCs closed in error, links down), "
                    "warning (+ drops, trims, NACKs, retransmissions, pauses), info (+ flow "
                    "and PDC life cycle), debug (every event)",
                    ("off", "error", "warning", "info", "debug")),
    "progress": _K("bool", True, "show a progress bar while running"),
    "sample_interval_us": _K("float", 2.0, "sampling period of link utilisation and "
                             "queue occupancy", lo=0.001, unit="µs"),
    "plot_ports": _K("int", 4, "busiest ports shown in the queue plot", lo=1, hi=64),
    "plot_flows": _K("int", 4, "flows shown in the congestion-window plot", lo=1, hi=64),
    "timeseries": _K("bool", True, "write the sampled time series (timeseries.json)"),
})

LIVE = Table("live", "Live mode (uet run --live): the same fabric models in real time, "
             "NICs and switches as Trio tasks exchanging real frames (docs/fabric.md).", {
    "enabled": _K("bool", False, "run in real time (what --live sets) instead of virtual "
                  "time"),
    "dilation": _K("float", None, "emulated time runs this many times slower than real "
                   "time (100 Gb/s at 1000: 100 Mb/s of real bytes); default: chosen by a "
                   "0.1 s calibration of this machine", lo=1.0),
    "backend": _K("enum", "udp", "the cables: udp (VXLAN over UDP 4789 on loopback, any "
                  "user) or veth (veth pairs in a network namespace, AF_PACKET; root)",
                  ("udp", "veth")),
    "address_block": _K("str", None, "the /16 of 127.0.0.0/8 for host and cable addresses "
                        "(default: from the process id)", pattern=r"127\.\d+\.\d+\.\d+/\d+"),
}, optional=True)

VERSUS = Table("versus", "What uet versus runs: the variants compared side by side.", {
    "variants": _K("str_list", ["uet: transport.stack=uet", "roce: transport.stack=roce"],
                   "one run per entry, \"label: key=value; key=value\" (--set syntax); "
                   "every run has the same seed, fabric and workload, changed only by its "
                   "own keys", pattern=r"\s*[A-Za-z0-9_.+-]+\s*:.*"),
})

#: every table by name, top-level sections first in file order
TABLES: dict[str, Table] = {t.name: t for t in (
    EXPERIMENT, TOPOLOGY, PFC, IMPAIRMENTS, GILBERT, TRANSPORT, CMS, PDS, ROCE, TRAFFIC,
    CAPTURE, OUTPUT, LIVE, VERSUS)}
SECTIONS: tuple[str, ...] = tuple(t.name for t in TABLES.values() if not t.nested)

# ----------------------------------------------------------------------------- sizes

_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def parse_size(value: int | str) -> int:
    """Bytes from an int or a string like ``"2MB"`` (10**6) or ``"1MiB"`` (2**20)."""
    if isinstance(value, bool):
        raise ValueError("not a size")
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        raise ValueError("not a size")
    m = _SIZE_RE.fullmatch(value)
    if not m:
        raise ValueError(f"cannot read {value!r} as a size")
    number, unit = m.group(1), (m.group(2) or "B").lower()
    scaled = float(number) * _SIZE_UNITS[unit]
    if scaled != int(scaled):
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(scaled)


# ----------------------------------------------------------------------------- docs

def _default_text(key: Key) -> str:
    d = key.default
    if d is None:
        return "(none)"
    if isinstance(d, bool):
        return "true" if d else "false"
    if isinstance(d, str):
        return f'"{d}"'
    if isinstance(d, float) and d == int(d):
        return f"{d:g}" if abs(d) < 1e6 else str(int(d))
    if isinstance(d, list | dict):
        return str(d).replace("'", '"') if d else ("[]" if isinstance(d, list) else "{}")
    return str(d)


def doc_table() -> str:
    """The Markdown key reference of ``docs/experiments.md`` (generated from the schema)."""
    lines = ["| key | type | default | allowed | unit | meaning |",
             "|---|---|---|---|---|---|"]
    for table in TABLES.values():
        prefix = f"[[{table.name}]]" if table.array else f"[{table.name}]"
        lines.append(f"| **{prefix}** | | | | | {table.doc} |")
        for name, key in table.keys.items():
            doc = key.doc
            if key.when is not None:
                sib, vals = key.when
                doc += f" (only when {sib} is {' / '.join(vals)})"
            allowed = key.allowed().replace("|", "\\|")
            lines.append(f"| `{table.name}.{name}` | {key.type} | {_default_text(key)} | "
                         f"{allowed} | {key.unit} | {doc} |")
        if table.open:
            lines.append(f"| `{table.name}.<field>` | | | | | {table.open_doc} |")
    return "\n".join(lines) + "\n"
