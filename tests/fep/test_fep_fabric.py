"""FabricEndpoint on a two-host back-to-back fabric: factory, profiles, frames on the cable."""

from __future__ import annotations

import random

import pytest

from uet.capture.pcapng import read_capture
from uet.endpoint.fep import SINK_INDEX, SINK_KEY, FabricEndpoint
from uet.profiles import ProfileError, builtin_profile
from uet.runtime.fabric import Fabric
from uet.ses import TargetAddr
from uet.ses.memory import Perm
from uet.wire.codec import decode_frame, encode_frame
from uet.wire.constants import ReturnCode as Rc
from uet.wire.constants import SesOpcode

B2B = {"kind": "back_to_back"}


async def test_factory_builds_each_host_from_its_profile_and_knows_the_peers(tmp_path):
    factory = FabricEndpoint.factory(profile="hpc", host_profiles={1: "ai-base"},
                                     pds_overrides={"ack_timer_ps": 3_000_000},
                                     cms_overrides={"ev_count": 8})
    async with Fabric(B2B, seed=4, endpoint_factory=factory) as fab:
        a, b = fab.endpoint(0), fab.endpoint(1)
        ips = {a.ip, b.ip}
        assert (a.profile.name, b.profile.name) == ("hpc", "ai-base")
        assert a.pds_config.ack_timer_ps == b.pds_config.ack_timer_ps == 3_000_000
        assert a.cms_config.ev_count == 8
        assert a.cms_config.link_rate_bps == 100 * 10**9
        assert a.pds_config.dscp_data == fab.net.qos.dscp_data  # trimmable data DSCP
        assert a.ses.initiator.peer_caps[b.ip] == builtin_profile("ai-base").fep_cap
        assert b.ses.initiator.peer_caps[a.ip] == builtin_profile("hpc").fep_cap
        assert (a.host_index, b.host_index) == (0, 1) and a.peer_ips[1] == b.ip
        # the HPC host may not tag-send to the AI Base one; the reverse WRITE works
        with pytest.raises(ProfileError, match="ai-base"):
            fab.submit(0, lambda ep, now: ep.call(now, "tagged_send",
                                                  ep.target(1), b"x", 3))
        mem = bytearray(64)
        a.ses.resources.add_region(a.job_id, 0, 2, 0x77, mem, Perm.WRITE)
        cap = fab.capture(tmp_path / "b2b.pcapng", ["h0"])
        op = fab.submit(1, lambda ep, now: ep.call(now, "write", ep.target(0, resource_index=2),
                                                   0x77, 8, b"fabric"))
        assert await fab.wait_until(lambda: op.done, 10**9)
        assert op.return_code == Rc.OK and mem[8:14] == b"fabric"
        await fab.sleep(50 * 10**6)
        cap.close()
    frames = list(read_capture(tmp_path / "b2b.pcapng"))
    assert len(frames) >= 2
    for cf in frames:
        f = decode_frame(cf.data, udp_port=None)
        assert encode_frame(f) == cf.data
        assert {f.src_ip, f.dst_ip} == ips
    reqs = [decode_frame(cf.data, udp_port=None) for cf in frames]
    assert any(f.ses is not None and getattr(f.ses, "opcode", None) == SesOpcode.WRITE
               for f in reqs)


async def test_bulk_messages_through_the_fabric_default_end_point():
    async with Fabric(B2B, seed=2) as fab:  # the default end point is the real FEP
        assert isinstance(fab.endpoint(0), FabricEndpoint)
        assert fab.endpoint(0).profile.name == "ai-base"
        msg = await fab.send(0, 1, 300_000, timeout_ps=10**10)
        assert msg.ok and msg.fct_ps > 300_000 * 80  # at least the serialisation at 100G
        assert len(fab.endpoint(1).sink) == 300_000  # grown to fit by fab.send
        st = fab.endpoint(1).stats
        assert st["fep.duplicates_delivered"] == 0 and st["pds.rx_packets"] == 74
        c = fab.counters()["endpoint"]["h0"]
        assert c["fep.ops_completed"] == 1 and c["pds.tx_packets"] >= 74


async def test_sink_region_of_a_host_is_reachable_by_read():
    async with Fabric(B2B, seed=3, endpoint_factory=FabricEndpoint.factory(
            sink_bytes=10_000)) as fab:
        sink = fab.endpoint(1).sink
        assert len(sink) == 10_000
        sink[:] = b"\xee" * 10_000
        w = fab.start_message(0, 1, 10_000)  # bulk write of zeros
        assert await fab.wait_until(lambda: w.done, 10**9) and w.ok
        assert sink == bytes(10_000)
        data = random.Random(1).randbytes(10_000)
        sink[:] = data
        tgt = TargetAddr(fab.endpoint(1).ip, 1, 0, SINK_INDEX)
        r = fab.submit(0, lambda ep, now: ep.call(now, "read", tgt, SINK_KEY, 0, 10_000))
        assert await fab.wait_until(lambda: r.done, 10**9)
        assert r.return_code == Rc.OK and bytes(r.data) == data
