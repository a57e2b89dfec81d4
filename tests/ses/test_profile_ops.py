"""Every operation is accepted or refused per profile, as the TOML files say: at the
initiator (ProfileError, at once) and at the target (UNSUPPORTED_OP / AMO_UNSUPPORTED_*)."""

from __future__ import annotations

import tomllib

import pytest
from ses_harness import JOB, KEY, PID, RI, addr, pair, region

from uet.profiles import BUILTIN_PROFILES, ProfileError, profiles_dir
from uet.ses import SesEndpoint, SesError
from uet.ses import atomics as amo
from uet.wire.constants import AtomicDatatype as Dt
from uet.wire.constants import AtomicOpcode as Aop
from uet.wire.constants import DeliveryMode, SesFlag, SesOpcode
from uet.wire.constants import ReturnCode as Rc
from uet.wire.records import AtomicExt, RendezvousExt, SesStandard

TOML = {name: tomllib.loads((profiles_dir() / f"{name}.toml").read_text())
        for name in BUILTIN_PROFILES}
OPS = [(name, op) for name in BUILTIN_PROFILES for op in SesOpcode]
ATOMICS = [(name, aop, dt) for name in BUILTIN_PROFILES for aop in Aop for dt in Dt]
MODES = [(name, mode) for name in BUILTIN_PROFILES for mode in DeliveryMode]


def allowed(name: str, op: SesOpcode) -> bool:
    return op.name in TOML[name]["operations"]["allowed"]


def invoke(ep: SesEndpoint, op: SesOpcode, tgt) -> object:
    i = ep.initiator
    calls = {
        SesOpcode.NO_OP: lambda: i.no_op(tgt),
        SesOpcode.WRITE: lambda: i.write(tgt, KEY, 0, b"x"),
        SesOpcode.READ: lambda: i.read(tgt, KEY, 0, 1),
        SesOpcode.ATOMIC: lambda: i.atomic(tgt, KEY, 0, Aop.SUM, Dt.UINT64, 1),
        SesOpcode.FETCHING_ATOMIC: lambda: i.atomic(tgt, KEY, 0, Aop.SUM, Dt.UINT64, 1,
                                                    fetch=True),
        SesOpcode.SEND: lambda: i.send(tgt, b"x"),
        SesOpcode.RENDEZVOUS_SEND: lambda: i.rendezvous_send(tgt, b"x" * 9000),
        SesOpcode.DATAGRAM_SEND: lambda: i.datagram_send(tgt, b"x"),
        SesOpcode.DEFERRABLE_SEND: lambda: i.deferrable_send(tgt, b"x"),
        SesOpcode.TAGGED_SEND: lambda: i.tagged_send(tgt, b"x", 1),
        SesOpcode.RENDEZVOUS_TSEND: lambda: i.rendezvous_send(tgt, b"x" * 9000, match_bits=1),
        SesOpcode.DEFERRABLE_TSEND: lambda: i.deferrable_send(tgt, b"x", match_bits=1),
        SesOpcode.TSEND_ATOMIC: lambda: i.tagged_atomic(tgt, 1, Aop.SUM, Dt.UINT64, 1),
        SesOpcode.TSEND_FETCH_ATOMIC: lambda: i.tagged_atomic(tgt, 1, Aop.SUM, Dt.UINT64, 1,
                                                              fetch=True),
        SesOpcode.MSG_ERROR: lambda: i.msg_error(i.write(tgt, KEY, 0, b"x" * 9000)),
    }
    return calls[op]()


@pytest.mark.parametrize("name,op", [(n, o) for n, o in OPS if o != SesOpcode.DEFERRABLE_RTR],
                         ids=[f"{n}-{o.name}" for n, o in OPS if o != SesOpcode.DEFERRABLE_RTR])
def test_initiator_accepts_or_refuses_at_once(name, op):
    a = SesEndpoint(name, address="10.0.0.1")
    tgt = addr(SesEndpoint(name, address="10.0.0.2"))
    if allowed(name, op):
        assert invoke(a, op, tgt) is not None
        assert a.outq
    else:
        with pytest.raises(ProfileError) as exc:
            invoke(a, op, tgt)
        assert op.name in str(exc.value) and name in str(exc.value)
        assert not a.outq  # nothing was sent


def _request(op: SesOpcode) -> tuple[SesStandard, object, bytes]:
    hdr = SesStandard(opcode=op, flags=SesFlag.SOM | SesFlag.EOM | SesFlag.REL, message_id=7,
                      initiator=1, job_id=JOB, pid_on_fep=PID, resource_index=RI,
                      memory_key=KEY, request_length=8)
    ext, payload = None, bytes(8)
    if op in (SesOpcode.ATOMIC, SesOpcode.FETCHING_ATOMIC, SesOpcode.TSEND_ATOMIC,
              SesOpcode.TSEND_FETCH_ATOMIC):
        ext = AtomicExt(Aop.SUM, Dt.UINT64)
    if op in (SesOpcode.RENDEZVOUS_SEND, SesOpcode.RENDEZVOUS_TSEND):
        ext = RendezvousExt(eager_length=8)
    if op == SesOpcode.READ:
        payload = b""
    return hdr, ext, payload


@pytest.mark.parametrize("name,op", OPS, ids=[f"{n}-{o.name}" for n, o in OPS])
def test_target_answers_unsupported_op(name, op):
    b = SesEndpoint(name, address="10.0.0.2")
    region(b, 64)
    hdr, ext, payload = _request(op)
    mode = DeliveryMode.UUD if op == SesOpcode.DATAGRAM_SEND else DeliveryMode.RUD
    if mode not in b.profile.modes:
        mode = DeliveryMode.RUD  # a datagram arriving over RUD is refused as well
    reply = b.target.handle("10.0.0.1", hdr, ext, payload, mode=mode)
    refused = b.counters["rc.UNSUPPORTED_OP"] == 1
    assert refused == (not allowed(name, op)), reply
    if reply.response is not None:
        assert (reply.response.return_code == Rc.UNSUPPORTED_OP) == refused


@pytest.mark.parametrize("name,mode", MODES, ids=[f"{n}-{m.name}" for n, m in MODES])
def test_delivery_modes(name, mode):
    a = SesEndpoint(name, address="10.0.0.1")
    b = SesEndpoint(name, address="10.0.0.2")
    ok = mode.name in TOML[name]["delivery"]["modes"]
    op = SesOpcode.DATAGRAM_SEND if mode == DeliveryMode.UUD else SesOpcode.WRITE
    call = (lambda: a.initiator.datagram_send(addr(b), b"x")) if op == SesOpcode.DATAGRAM_SEND \
        else (lambda: a.initiator.write(addr(b), KEY, 0, b"x", mode=mode))
    if ok:
        call()
    else:
        with pytest.raises(ProfileError, match=name):
            call()
        region(b, 64)
        hdr, ext, payload = _request(op)
        b.target.handle("10.0.0.1", hdr, ext, payload, mode=mode)
        assert b.counters["rc.UNSUPPORTED_OP"] == 1


@pytest.mark.parametrize("name,aop,dt", ATOMICS,
                         ids=[f"{n}-{a.name}-{d.name}" for n, a, d in ATOMICS])
def test_atomic_sets(name, aop, dt):
    a = SesEndpoint(name, address="10.0.0.1")
    b = SesEndpoint(name, address="10.0.0.2")
    ok_op = aop.name in TOML[name]["atomics"]["opcodes"]
    ok_dt = dt.name in TOML[name]["atomics"]["datatypes"]
    operand = bytes(32) if dt in (Dt.LONG_DOUBLE, Dt.LONG_DOUBLE_COMPLEX) else 0
    call = lambda: a.initiator.atomic(addr(b), KEY, 0, aop, dt, operand,  # noqa: E731
                                      compare=operand, mask=operand)
    if ok_op and ok_dt and aop in amo.CAS_OPS and amo.DATATYPES[dt].size > 16:
        with pytest.raises(SesError, match="16 bytes"):  # no room in the CAS fields
            call()
    elif ok_op and ok_dt:
        call()
    else:
        with pytest.raises(ProfileError, match="atomic"):
            call()
        # the same request reaching a target anyway
        region(b, 64)
        hdr, _, _ = _request(SesOpcode.ATOMIC)
        reply = b.target.handle("10.0.0.1", hdr, AtomicExt(aop, dt), bytes(8))
        want = Rc.AMO_UNSUPPORTED_OP if not ok_op else Rc.AMO_UNSUPPORTED_DT
        assert reply.response.return_code == want


@pytest.mark.parametrize("peer", BUILTIN_PROFILES)
def test_peer_profile_refuses_at_once(peer):
    a, b, loop = pair("hpc", peer)
    for op in SesOpcode:
        if op == SesOpcode.DEFERRABLE_RTR:
            continue
        if allowed(peer, op):
            invoke(a, op, addr(b))
        else:
            with pytest.raises(ProfileError, match="peer"):
                invoke(a, op, addr(b))


def test_profile_error_names_operation_and_profile():
    a, b, loop = pair("ai-base")
    with pytest.raises(ProfileError) as exc:
        a.initiator.tagged_send(addr(b), b"x", 5)
    assert exc.value.operation == "TAGGED_SEND" and exc.value.profile == "ai-base"
    assert "operations.allowed" in str(exc.value)
