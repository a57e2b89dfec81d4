"""The FEP core's ``DeliveryAudit.see`` and ``FabricEndpoint.pump`` (C) against their
Python forms.

The audit, op by op: two audits take the same seeded stream of delivered packets, one
through the class's method (the C form when the core is built) and one through
``AUDIT_REFERENCE["see"]``;
after every packet the answers and every slot of both audits must be equal. The streams mix
what an end point sees: packets in and out of order, copies, late copies of finished
messages, READs (their slice counts, not their bytes), unaligned offsets and offsets past
the end (the set), messages too long for a bitmap, several sources and connections, medium
headers (not audited), per-flow accounting on or off, and tables small enough that
``max_messages`` and ``history`` evict. The end-to-end comparison (deliver, the audit and
the SES target in a whole fabric, the pump) is tests/pds/test_c_cores.py; here the pump
also leaves a request it could not answer to the next poll.
"""

from __future__ import annotations

import random

import pytest

from uet.endpoint import fep
from uet.endpoint.fep import AUDIT_REFERENCE, DeliveryAudit
from uet.pds.events import RequestDelivered
from uet.wire.constants import DeliveryMode, SesFlag, SesOpcode
from uet.wire.records import SesMedium, SesStandard

NATIVE = fep.IMPLEMENTATION == "native"
SLOTS = DeliveryAudit.__slots__


def _state(a: DeliveryAudit) -> tuple:
    return tuple(
        {k: [bytes(e[0]), e[1], e[2]] for k, e in v.items()} if name == "messages"
        else list(v.items()) if isinstance(v, dict) else v
        for name, v in ((n, getattr(a, n)) for n in SLOTS))


def _stream(rng: random.Random, n: int, mtu: int) -> list[tuple]:
    """(src, ses, nbytes, conn or None) calls of an end point's deliveries."""
    sizes = [1, mtu - 1, mtu, mtu + 1, 3 * mtu, 5 * mtu + 17, 40 * mtu, mtu * (1 << 21)]
    live: list[tuple] = []  # (src, conn, mid, op, total, offsets)
    calls = []
    mid = 0
    for _ in range(n):
        if not live or rng.random() < 0.15:
            mid += 1
            op = rng.choice([SesOpcode.WRITE] * 4 + [SesOpcode.READ, SesOpcode.SEND])
            total = rng.choice(sizes)
            offs = list(range(0, min(total, 12 * mtu), mtu))
            if rng.random() < 0.2:  # unaligned and beyond-the-end offsets
                offs += [rng.randrange(1, mtu), total + mtu]
            rng.shuffle(offs)
            live.append((rng.choice(["10.0.0.1", "10.0.0.2"]), rng.choice([None, 0, 5]),
                         mid % 7 if rng.random() < 0.3 else mid, op, total, offs))
        src, conn, m, op, total, offs = item = rng.choice(live)
        if rng.random() < 0.05:
            calls.append((src, SesMedium(opcode=int(SesOpcode.WRITE), job_id=1), 8, conn))
            continue
        off = offs.pop() if offs and rng.random() < 0.85 else rng.choice(
            [0, mtu, 2 * mtu, total + mtu])  # a copy, or a late copy of a finished one
        if not offs:
            live.remove(item)
        flags = int(SesFlag.REL) | (int(SesFlag.SOM) if off == 0 else 0)
        nbytes = 0 if op == SesOpcode.READ else max(0, min(mtu, total - off))
        ses = SesStandard(opcode=int(op), flags=flags, message_id=m, job_id=rng.choice([1, 2]),
                          initiator=7, message_offset=off, request_length=total)
        calls.append((src, ses, nbytes, conn))
    return calls


@pytest.mark.skipif(not NATIVE, reason="the FEP core is off: nothing to compare")
@pytest.mark.parametrize("seed", range(12))
def test_audit_core_matches_the_python_op_by_op(seed):
    rng = random.Random(seed)
    mtu = rng.choice([4096, 1024, 100])
    kw = {"max_messages": rng.choice([3, 8, 65536]), "history": rng.choice([2, 5, 4096]),
          "mtu_payload": mtu}
    c, py = DeliveryAudit(**kw), DeliveryAudit(**kw)
    assert DeliveryAudit.see is not AUDIT_REFERENCE["see"]
    if seed % 2:
        for a in (c, py):
            flows = a.count_flows()
            for m in range(0, 400, 3):
                flows["10.0.0.1", m] = m * 10
            # counts that are not small ints: the sum leaves int64, is a float, or an
            # int subclass (the core adds in C only for plain ints that stay in range)
            a.flow_bytes.update({30: 2**63 - 2, 60: -(2**63), 90: 2**70, 120: 0.5,
                                 150: True})
    ref = AUDIT_REFERENCE["see"]
    dups = 0
    for i, (src, ses, nbytes, conn) in enumerate(_stream(rng, 900, mtu)):
        args = (src, ses, nbytes) if conn is None else (src, ses, nbytes, conn)
        got, want = c.see(*args), ref(py, *args)
        assert got is want, i
        assert _state(c) == _state(py), i
        dups += not want
    assert dups > 10 and c.seen > 500  # the stream reaches the duplicate paths
    if seed % 2:
        assert c.flow_bytes and c.flow_dups
        assert [type(c.flow_bytes[k]) for k in (30, 60, 90, 120, 150)] == [
            type(py.flow_bytes[k]) for k in (30, 60, 90, 120, 150)]


class _Recording(dict):
    """A counts mapping with its own item store (called by Python's ``+=`` and by the C
    cores' counting alike)."""

    def __init__(self) -> None:
        super().__init__()
        self.stores = 0

    def __missing__(self, key):
        return 0

    def __setitem__(self, key, value) -> None:
        self.stores += 1
        super().__setitem__(key, value)


@pytest.mark.parametrize("kind", ["Counter", "own store"])
def test_per_flow_counts_reach_every_mapping_as_python_stores_them(kind):
    """The cores store a Counter's counts straight into the dict (its item assignment is
    dict's; the generic path cost ~1,000 instructions a store); a mapping with its own
    ``__setitem__`` still gets every store through it, and both forms count the same."""
    from collections import Counter

    rng = random.Random(5)
    calls = _stream(rng, 400, 4096)
    audits = [DeliveryAudit(mtu_payload=4096), DeliveryAudit(mtu_payload=4096)]
    for a in audits:
        flows = a.count_flows()
        for m in range(400):
            flows["10.0.0.1", m] = flows["10.0.0.2", m] = m % 7
        if kind == "own store":
            a.flow_bytes, a.flow_dups = _Recording(), _Recording()
    c, py = audits
    ref = AUDIT_REFERENCE["see"]
    for src, ses, nbytes, conn in calls:
        args = (src, ses, nbytes) if conn is None else (src, ses, nbytes, conn)
        assert c.see(*args) is ref(py, *args)
    assert dict(c.flow_bytes) == dict(py.flow_bytes) and sum(c.flow_bytes.values()) > 0
    assert dict(c.flow_dups) == dict(py.flow_dups) and sum(c.flow_dups.values()) > 0
    if kind == "own store":
        assert c.flow_bytes.stores == py.flow_bytes.stores > 100
        assert c.flow_dups.stores == py.flow_dups.stores > 0
    else:
        assert type(c.flow_bytes) is Counter and type(c.flow_dups) is Counter


@pytest.mark.skipif(not NATIVE, reason="the FEP core is off: nothing to compare")
def test_audit_core_takes_keywords_and_odd_arguments_as_the_python():
    c, py = DeliveryAudit(), DeliveryAudit()
    ref = AUDIT_REFERENCE["see"]
    ses = SesStandard(opcode=int(SesOpcode.WRITE), flags=int(SesFlag.SOM), message_id=1,
                      request_length=8192)
    assert c.see("a", ses, 4096, conn=3) is ref(py, "a", ses, 4096, conn=3) is True
    assert c.see("a", ses, 4096, conn=3) is ref(py, "a", ses, 4096, conn=3) is False
    assert c.see("a", ses, True) is ref(py, "a", ses, True) is True  # a bool is an int
    assert _state(c) == _state(py)
    with pytest.raises(TypeError):
        c.see("a")


def _pump_a_request_without_ses() -> tuple:
    from fep_wire import pair

    _, b = pair("hpc")
    ev = RequestDelivered(7, "10.0.0.1", 0, DeliveryMode.RUD, 0, None, None, b"", False, None)
    b.pds.events.append(ev)
    b.pump(0)
    return list(b.pds._seen), b.counters["rx_request_without_ses"]


def test_the_pump_leaves_an_unanswered_request_to_the_poll_in_both_forms():
    """A delivered request the SES cannot take (no SES header) gets no answer from the
    pump: its token waits in the PDS's seen list, so the next poll settles it (the
    default response), whichever form the pump runs in."""
    from uet.endpoint import cores

    c = _pump_a_request_without_ses()
    with cores.python_forms():
        py = _pump_a_request_without_ses()
    assert c == py == ([7], 1)


def test_timer_entries_are_read_as_python_reads_them_even_when_their_class_changes():
    """The FEP core reads a timer entry's ``_armed`` at its slot, found once per class:
    a class whose ``_armed`` becomes a property afterwards is read through the property,
    in both forms (the core keys what it found on the class's version)."""
    from fep_wire import pair

    from uet.endpoint import cores

    def deadlines() -> list:
        class Timer:
            __slots__ = ("_armed",)

        _, b = pair("hpc")
        t = Timer()
        t._armed = 5
        heap = b.pds.ctx.heap
        heap.clear()
        heap.append((5, 0, t))
        got = [b.next_deadline()]
        Timer._armed = property(lambda self: 7)  # the slot is gone: a property now
        got.append(b.next_deadline())  # 5 != 7: a stale entry, dropped
        heap.append((7, 1, Timer()))
        got.append(b.next_deadline())
        return got

    c = deadlines()
    with cores.python_forms():
        py = deadlines()
    assert c == py == [5, None, 7]
