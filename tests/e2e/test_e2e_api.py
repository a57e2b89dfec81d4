"""The Trio API surface: Fabric(profile=...), hosts by index / IP, handles, timeouts, errors."""

from __future__ import annotations

import pytest
from e2e_net import check_clean, lossy_fabric, lossy_topology, payload

from uet.bench.traffic_endpoint import factory as traffic
from uet.endpoint.fep import FabricEndpoint
from uet.profiles import ProfileConfigError
from uet.runtime.fabric import Fabric
from uet.runtime.host import Host, OperationTimeout, PendingOp, PendingRecv
from uet.ses import SesError
from uet.wire.constants import ReturnCode as Rc

US = 10**6


def test_fabric_arguments_are_checked():
    topo = lossy_topology(3)
    with pytest.raises(ValueError, match="either endpoint_factory or profile"):
        Fabric(topo, profile="hpc", endpoint_factory=FabricEndpoint.factory())
    with pytest.raises(ValueError, match=r"endpoint_options\.profile: pass it as the Fabric's"):
        Fabric(topo, endpoint_options={"profile": "hpc"})
    with pytest.raises(ValueError, match=r"host_profiles names host\(s\) \[5\]; the topology "
                                         r"has hosts 0\.\.2"):
        Fabric(topo, profile="hpc", host_profiles={5: "ai-base"})
    with pytest.raises(ProfileConfigError, match=r"hcp: no such profile file \(built-in"):
        Fabric(topo, profile="hcp")
    with pytest.raises(TypeError, match="unexpected keyword argument 'sink'"):
        Fabric(topo, endpoint_options={"sink": 1})


async def test_hosts_by_index_ip_and_object():
    async with Fabric(lossy_topology(3), profile="ai-full", seed=1,
                      endpoint_options={"sink_bytes": 4096,
                                        "pds_overrides": {"ack_timer_ps": 5 * US}}) as fab:
        h1 = fab.hosts[1]
        assert isinstance(h1, Host) and fab.ep(1) is h1 and fab.ep(h1.ip) is h1
        assert fab.host_index_of(h1) == 1 and fab.host_ip(2) == fab.net.hosts[2].ip
        assert h1.fep is fab.endpoint(1) and h1.profile.name == "ai-full"
        assert len(h1.fep.sink) == 4096 and h1.fep.pds_config.ack_timer_ps == 5 * US
        with pytest.raises(ValueError, match="no host has IP '10.9.9.9'"):
            fab.ep("10.9.9.9")
        with pytest.raises(ValueError, match=r"no host 3; the fabric has hosts 0\.\.2"):
            fab.ep(0).write(3, 1, 0, b"x")
        with pytest.raises(TypeError, match="a host is an index, an IP or a Host"):
            fab.ep(0).write(1.0, 1, 0, b"x")
        mem = bytearray(10)
        h1.register(mem, key=1)
        for dst in (1, h1.ip, h1):
            await fab.ep(0).write(dst, 1, 0, str(dst)[:10].encode())
        assert mem.startswith(b"<Host 1 h1")
        async with Fabric(lossy_topology(2), profile="hpc") as other:
            with pytest.raises(ValueError, match="belongs to another fabric"):
                other.ep(0).send(h1, b"x")


async def test_traffic_end_points_have_no_operation_api():
    async with Fabric({"kind": "back_to_back"}, endpoint_factory=traffic()) as fab:
        with pytest.raises(TypeError, match="runs TrafficEndpoint, not a uet.endpoint.fep"):
            fab.ep(0).send(1, b"x")


async def test_handles_results_timeouts_and_argument_errors():
    async with lossy_fabric("hpc", seed=2) as fab:
        a, b = fab.ep(0), fab.ep(1)
        recv = b.post_recv(bytearray(100), tag=4)
        assert isinstance(recv, PendingRecv) and "posted" in repr(recv)
        with pytest.raises(RuntimeError, match="still pending"):
            recv.result()
        with pytest.raises(OperationTimeout, match=r"tagged receive #1 on h1 not complete "
                                                   r"after 50000000 ps") as err:
            await recv.wait(50 * US)
        assert err.value.timeout_ps == 50 * US and not recv.done
        s = a.send(1, b"late", tag=4)
        assert isinstance(s, PendingOp) and s.op.opcode.name == "TAGGED_SEND"
        assert (await recv).data == b"late" and (await s).return_code == Rc.OK
        assert (await recv).data == b"late"  # awaiting again gives the same result
        # failures: an exception by default, a result carrying the code on request
        h = a.write(1, 0xDEAD, 0, b"x")
        res = await h.wait(check=False)
        assert res.return_code == Rc.BAD_MKEY
        with pytest.raises(SesError, match="WRITE: BAD_MKEY") as e:
            h.result()
        assert e.value.return_code == Rc.BAD_MKEY
        # a host-wide default timeout applies to handles created afterwards
        a.timeout_ps = 10 * US
        with pytest.raises(OperationTimeout, match="RENDEZVOUS_SEND"):
            await a.send(1, payload(20_000, 1), rendezvous=True)  # nobody receives it
        # arguments
        with pytest.raises(ValueError, match="rendezvous and deferrable exclude"):
            a.send(1, b"x", rendezvous=True, deferrable=True)
        with pytest.raises(ValueError, match="mode='XYZ': allowed RUD, ROD, RUDI, UUD"):
            a.write(1, 1, 0, b"x", mode="XYZ")
        with pytest.raises(ValueError, match="datatype='float128'"):
            a.atomic(1, 1, 0, "SUM", "float128", 1)
        with pytest.raises(TypeError, match="bytearray or a writable memoryview"):
            b.register(b"immutable", key=9)
        with pytest.raises(ValueError, match="letters r"):
            b.register(bytearray(4), key=9, perms="rx")
        b.register(bytearray(4), key=9)
        with pytest.raises(ValueError, match="already registered"):
            b.register(bytearray(4), key=9)
        with pytest.raises(TypeError, match="post_recv: buffer"):
            b.post_recv(b"immutable")
        check_clean(fab, min_lost=0)


async def test_memoryviews_work_as_buffers():
    async with lossy_fabric("ai-base", seed=3) as fab:
        a, b = fab.ep(0), fab.ep(1)
        backing = bytearray(200)
        view = memoryview(backing)[50:150]
        b.register(view, key=3, index=1)
        await a.write(1, 3, 10, b"viewed", index=1)
        assert backing[60:66] == b"viewed"
        rbacking = bytearray(100)
        r = b.post_recv(memoryview(rbacking)[20:])
        await a.send(1, b"into a view")
        assert (await r).data == b"into a view" and rbacking[20:31] == b"into a view"


async def test_open_index_gives_early_sends_a_queue():
    async with lossy_fabric("ai-base", seed=4) as fab:
        a, b = fab.ep(0), fab.ep(1)
        with pytest.raises(SesError, match="BAD_INDEX"):
            await a.send(1, b"early", index=9)
        assert b.open_index(9) == 0 and b.generation(9) == 0
        assert (await a.send(1, b"early", index=9)).list == 1  # OVERFLOW: queued
        assert (await b.post_recv(16, index=9)).data == b"early"
        with pytest.raises(KeyError, match="no resource index 8"):
            b.generation(8)
