"""The operation mix of an experiment (``traffic.ops``): which SES operation each flow is.

``traffic.ops = {write = 0.5, read = 0.2, send = 0.2, atomic = 0.1}`` gives the flows of a
generated pattern (or an htsim connection matrix) their operations in these proportions
(largest remainder: of 10 flows exactly 5 WRITEs, 2 READs, 2 SENDs, 1 atomic), placed on
the flows by a shuffle seeded by the traffic seed: the same seed gives the same
operations. Without it every flow is a WRITE (what every experiment did before, byte for
byte). What each operation moves, flow ``src -> dst`` of ``size`` bytes:

==================  ========================================================================
operation           what the flow does
==================  ========================================================================
write               RMA WRITE of ``size`` bytes into ``dst``'s sink region
read                ``src`` READs ``size`` bytes of ``dst``'s sink (the data travels
                    ``dst -> src``: in ACKs up to the profile's ``ses.max_ack_data``, else as
                    requests in the return direction)
send                SEND into a receive ``dst`` posts for it (``traffic.recv_delay_us``)
tagged_send         TAGGED_SEND, the receive posted with the flow's tag (its id)
rendezvous_send     RENDEZVOUS_SEND: the eager part, then ``dst`` READs the rest
rendezvous_tsend    the tagged form
deferrable_send     DEFERRABLE_SEND: a message arriving before its receive is deferred and
                    restarted by the receiver (DEFERRABLE_RTR) once the receive is posted
deferrable_tsend    the tagged form
atomic              ATOMIC ``traffic.atomic_opcode`` on one ``traffic.atomic_datatype`` of
                    ``dst``'s atomic region (size: the datatype's)
fetching_atomic     FETCHING_ATOMIC: the old value comes back
tagged_atomic       TSEND_ATOMIC into a tagged receive of one element
tagged_fetching_    TSEND_FETCH_ATOMIC: the same, the old value comes back
atomic
datagram            DATAGRAM_SEND over UUD of ``min(size, MTU)`` bytes (one packet, no
                    reliability: done when sent)
no_op               NO_OP (size 0)
==================  ========================================================================

Checks (each a one-line error naming the key): unknown operations and bad weights (the
schema), an operation the profile does not allow (``traffic.ops.<op>``), operations other
than WRITE, READ and NO_OP over RUDI (idempotent only), an atomic datatype or opcode the
profile lacks, and the RoCE baseline (WRITEs only).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from uet.experiments.workload import Flow, Workload
from uet.wire.constants import AtomicDatatype, AtomicOpcode, SesOpcode

#: the SES opcodes each operation of the mix sends (the profile must allow them)
OPCODES: dict[str, tuple[SesOpcode, ...]] = {
    "write": (SesOpcode.WRITE,),
    "read": (SesOpcode.READ,),
    "send": (SesOpcode.SEND,),
    "tagged_send": (SesOpcode.TAGGED_SEND,),
    "rendezvous_send": (SesOpcode.RENDEZVOUS_SEND, SesOpcode.READ),
    "rendezvous_tsend": (SesOpcode.RENDEZVOUS_TSEND, SesOpcode.READ),
    "deferrable_send": (SesOpcode.DEFERRABLE_SEND, SesOpcode.DEFERRABLE_RTR),
    "deferrable_tsend": (SesOpcode.DEFERRABLE_TSEND, SesOpcode.DEFERRABLE_RTR),
    "atomic": (SesOpcode.ATOMIC,),
    "fetching_atomic": (SesOpcode.FETCHING_ATOMIC,),
    "tagged_atomic": (SesOpcode.TSEND_ATOMIC,),
    "tagged_fetching_atomic": (SesOpcode.TSEND_FETCH_ATOMIC,),
    "datagram": (SesOpcode.DATAGRAM_SEND,),
    "no_op": (SesOpcode.NO_OP,),
}
#: operations that need a receive posted at the destination, and whether it is tagged
RECEIVES = {"send": False, "tagged_send": True, "rendezvous_send": False,
            "rendezvous_tsend": True, "deferrable_send": False, "deferrable_tsend": True,
            "tagged_atomic": True, "tagged_fetching_atomic": True, "datagram": False}
ATOMICS = ("atomic", "fetching_atomic", "tagged_atomic", "tagged_fetching_atomic")
#: atomics into tagged receives (never buffered: their receive is posted at once)
TAGGED_ATOMICS = ("tagged_atomic", "tagged_fetching_atomic")
#: idempotent operations (all RUDI may carry, ref 3.10)
RUDI_OK = ("write", "read", "no_op")


def mix(config: dict[str, Any]) -> dict[str, float]:
    """The weights of the mix in effect (``{"write": 1.0}`` without ``traffic.ops``)."""
    ops = config["traffic"].get("ops") or {}
    out = {k: w for k, w in ops.items() if w > 0}
    return out or {"write": 1.0}


def check(config: dict[str, Any], src: Any) -> None:
    """Validate the mix against the stack, the mode and the profile (errors name
    ``traffic.ops.<op>``, ``traffic.atomic_*`` or the conflicting transport key)."""
    from uet.profiles import ProfileError, load_profile

    tr = config["traffic"]
    if not tr.get("ops"):
        return
    ops = mix(config)
    transport = config["transport"]
    if transport.get("stack", "uet") == "roce" and set(ops) != {"write"}:
        raise src.error(("traffic", "ops"), "the RoCE baseline runs WRITEs only",
                        allowed="{write = 1} or transport.stack = \"uet\"")
    from uet.experiments.validated import resolve_path
    from uet.profiles import BUILTIN_PROFILES

    name = transport["profile"]
    profile = load_profile(name if name in BUILTIN_PROFILES else str(resolve_path(config,
                                                                                  name)))
    mode = transport["mode"]
    for op in ops:
        if mode == "RUDI" and op not in RUDI_OK:
            raise src.error(("traffic", "ops", op), f"{op} over RUDI (transport.mode): RUDI "
                            "carries idempotent operations only", allowed=", ".join(RUDI_OK))
        for opcode in OPCODES[op]:
            if opcode not in profile.operations:
                raise src.error(("traffic", "ops", op), f"{SesOpcode(opcode).name} is not "
                                f"allowed by profile {profile.name}",
                                allowed=", ".join(sorted(o for o in OPCODES
                                                         if set(OPCODES[o])
                                                         <= profile.operations)))
        if op == "datagram" and "UUD" not in {m.name for m in profile.modes}:
            raise src.error(("traffic", "ops", op), f"profile {profile.name} has no UUD")
    if any(op in ATOMICS for op in ops):
        aop = AtomicOpcode[tr["atomic_opcode"]]
        dt = AtomicDatatype[tr["atomic_datatype"]]
        try:
            profile.check_operation(SesOpcode.ATOMIC, atomic=(aop, dt))
        except ProfileError as exc:
            key = "atomic_opcode" if "opcode" in exc.reason else "atomic_datatype"
            raise src.error(("traffic", key), exc.reason,
                            allowed=", ".join(sorted(
                                (d.name for d in profile.atomic_datatypes)
                                if key == "atomic_datatype"
                                else (o.name for o in profile.atomic_opcodes)))) from None
        from uet.ses import atomics

        if not atomics.is_supported(aop, dt):
            raise src.error(("traffic", "atomic_opcode"), f"{aop.name} is not defined for "
                            f"{dt.name}")


def element_size(config: dict[str, Any]) -> int:
    """Bytes of one element of ``traffic.atomic_datatype``."""
    from uet.ses import atomics

    return atomics.DATATYPES[AtomicDatatype[config["traffic"]["atomic_datatype"]]].size


def _shares(weights: dict[str, float], n: int) -> list[str]:
    """``n`` operations in the proportions of ``weights`` (largest remainder: each gets
    ``floor(n x share)`` and the largest remainders one more), in a fixed order."""
    total = sum(weights.values())
    exact = {k: n * w / total for k, w in weights.items()}
    counts = {k: int(v) for k, v in exact.items()}
    left = n - sum(counts.values())
    for k in sorted(exact, key=lambda k: (counts[k] - exact[k], list(weights).index(k)))[:left]:
        counts[k] += 1
    return [k for k in weights for _ in range(counts[k])]


def assign(workload: Workload, config: dict[str, Any], seed: int, mtu: int) -> Workload:
    """Give each flow its operation (seeded, flow-id order); sizes follow what the
    operation moves (an atomic: one element; a datagram: at most one packet; NO_OP: 0)."""
    if not config["traffic"].get("ops"):
        return workload
    weights = mix(config)
    names = list(weights)
    rng = random.Random(f"ops-{seed}")
    elem = element_size(config) if any(n in ATOMICS for n in names) else 0
    ordered = sorted(workload.flows, key=lambda f: f.id)
    chosen = _shares(weights, len(ordered))
    rng.shuffle(chosen)
    flows = []
    for f, op in zip(ordered, chosen, strict=True):
        size = f.size
        if op in ATOMICS:
            size = elem
        elif op == "datagram":
            size = min(size, mtu)
        elif op == "no_op":
            size = 0
        flows.append(replace(f, op=op, size=size))
    return Workload(workload.name, workload.hosts, flows, workload.collective,
                    dict(workload.meta, ops=dict(weights)))


def needs_receive(flow: Flow) -> bool:
    """Whether the flow's operation needs a receive at its destination."""
    return flow.op in RECEIVES


#: resource index and key of the region every host exposes for the mix's atomics
ATOMIC_INDEX = 0x7FE
#: memory key 0: a single-packet atomic between end points that both advertise
#: OPT_NON_MATCHING (learnt by NEGOTIATION) travels in the small header, which has no key
ATOMIC_KEY = 0
ATOMIC_SLOTS = 1024  # one 32-byte slot per flow id modulo this
#: resource index of the receives of datagrams (apart from the SENDs' index 0, so a lost
#: datagram's receive is never taken by a SEND)
DATAGRAM_INDEX = 0x7FD
US = 1_000_000


class OpRunner:
    """Starts a flow's operation on its source end point and posts the receive its
    destination needs (now, or ``traffic.recv_delay_us`` later). Used by the experiment
    runner when ``traffic.ops`` is set."""

    def __init__(self, runner: Any) -> None:
        from uet.ses.memory import Perm

        tr = runner.cfg["traffic"]
        self.runner = runner
        self.recv_delay_ps = round(tr.get("recv_delay_us", 0.0) * US)
        self.dc = bool(tr.get("dc", False))
        self.aop = AtomicOpcode[tr.get("atomic_opcode", "SUM")]
        self.adt = AtomicDatatype[tr.get("atomic_datatype", "UINT64")]
        flows = runner.wl.flows
        self.max_size = max((f.size for f in flows), default=0)
        if any(f.op in ATOMICS for f in flows):
            self.elem = element_size(runner.cfg)
            for ep in runner.eps:
                ep.ses.resources.add_region(ep.job_id, ep.ses.pid_on_fep, ATOMIC_INDEX,
                                            ATOMIC_KEY, bytearray(ATOMIC_SLOTS * 32),
                                            Perm.ATOMIC | Perm.READ | Perm.WRITE)

    def start(self, flow: Flow, ep: Any, now: int) -> Any:
        """Post the destination's receive if the operation needs one, then start the
        operation on ``ep`` (the source); returns the SES operation."""
        op = flow.op
        if op in RECEIVES:
            self._receive(flow, now)
        data = bytes(flow.size)
        mode = ep.mode
        dst = flow.dst
        if op == "read":
            from uet.endpoint.fep import SINK_INDEX, SINK_KEY

            return ep.call(now, "read", ep.target(dst, resource_index=SINK_INDEX), SINK_KEY,
                           0, flow.size, mode=mode)
        tgt = ep.target(dst)
        dc = self.dc
        if op == "send":
            return ep.call(now, "send", tgt, data, mode=mode, dc=dc)
        if op == "tagged_send":
            return ep.call(now, "tagged_send", tgt, data, flow.id, mode=mode, dc=dc)
        if op in ("rendezvous_send", "rendezvous_tsend"):
            tag = flow.id if op == "rendezvous_tsend" else None
            return ep.call(now, "rendezvous_send", tgt, data, match_bits=tag, mode=mode,
                           dc=dc)
        if op in ("deferrable_send", "deferrable_tsend"):
            tag = flow.id if op == "deferrable_tsend" else None
            return ep.call(now, "deferrable_send", tgt, data, match_bits=tag, mode=mode,
                           dc=dc)
        if op in ("atomic", "fetching_atomic"):
            return ep.call(now, "atomic", ep.target(dst, resource_index=ATOMIC_INDEX),
                           ATOMIC_KEY, (flow.id % ATOMIC_SLOTS) * 32, self.aop, self.adt, 1,
                           fetch=op == "fetching_atomic", mode=mode)
        if op in TAGGED_ATOMICS:
            return ep.call(now, "tagged_atomic", tgt, flow.id, self.aop, self.adt, 1,
                           fetch=op == "tagged_fetching_atomic", mode=mode)
        if op == "datagram":
            return ep.call(now, "datagram_send", ep.target(dst, resource_index=DATAGRAM_INDEX),
                           data)
        if op == "no_op":
            return ep.call(now, "no_op", tgt, mode=mode)
        raise AssertionError(op)  # pragma: no cover - the schema allows no other

    def _receive(self, flow: Flow, now: int) -> None:
        op = flow.op
        tagged = RECEIVES[op]
        index = DATAGRAM_INDEX if op == "datagram" else 0
        if op in TAGGED_ATOMICS:
            size = self.elem
        elif tagged or op == "datagram":
            size = flow.size
        else:  # untagged receives match any SEND of the host: room for the largest
            size = self.max_size
        runner = self.runner
        ep = runner.eps[flow.dst]

        def post(t: int) -> None:
            ep.post_recv(t, size, tag=flow.id if tagged else None, resource_index=index,
                         register=index != 0)
            runner.fab.host(flow.dst).poke()

        # an atomic into a tagged receive is never buffered: its receive comes first
        if self.recv_delay_ps and op not in TAGGED_ATOMICS:
            loop = runner.loop
            loop.at(now + self.recv_delay_ps, lambda _arg: post(loop.now))
        else:
            post(now)


__all__ = ["ATOMICS", "ATOMIC_INDEX", "ATOMIC_KEY", "DATAGRAM_INDEX", "OPCODES",
           "OpRunner", "RECEIVES", "RUDI_OK", "assign", "check", "element_size", "mix",
           "needs_receive"]
