"""The shared address book: one table per fabric, each end point's capability view its
own to change."""

from __future__ import annotations

import pytest

from uet.endpoint.peers import PeerCaps, book
from uet.runtime.fabric import Fabric


def test_peer_caps_overlay_the_shared_table() -> None:
    shared = {"10.0.0.2": 1, "10.0.0.3": 2, "10.0.0.4": 3}
    a, b = PeerCaps(shared, "10.0.0.2"), PeerCaps(shared, "10.0.0.3")
    assert a.get("10.0.0.2") is None and "10.0.0.2" not in a  # no entry for itself
    assert a["10.0.0.3"] == 2 and a.get("10.0.0.4") == 3 and len(a) == 2
    with pytest.raises(KeyError):
        a["10.0.0.2"]
    del a["10.0.0.3"]
    assert a.get("10.0.0.3") is None and "10.0.0.3" not in a
    with pytest.raises(KeyError):
        del a["10.0.0.3"]
    a["10.0.0.3"] = 7
    a["10.9.9.9"] = 8
    assert a["10.0.0.3"] == 7 and a.get("10.9.9.9") == 8
    assert dict(a.items()) == {"10.0.0.3": 7, "10.0.0.4": 3, "10.9.9.9": 8}
    # neither the shared table nor another end point's view changed
    assert shared == {"10.0.0.2": 1, "10.0.0.3": 2, "10.0.0.4": 3}
    assert b["10.0.0.2"] == 1 and b.get("10.9.9.9") is None and sorted(b) == [
        "10.0.0.2", "10.0.0.4"]


def test_one_book_per_fabric() -> None:
    peers = {0: ("10.0.0.2", "m0"), 1: ("10.0.0.3", "m1")}
    cache: dict = {}
    one = book(cache, peers, lambda i: 10 + i)
    assert book(cache, peers, lambda i: 0) is one
    assert one.macs == {"10.0.0.2": "m0", "10.0.0.3": "m1"}
    assert one.ips == {0: "10.0.0.2", 1: "10.0.0.3"} and one.caps["10.0.0.3"] == 11


def test_fabric_end_points_share_the_tables() -> None:
    fab = Fabric({"kind": "fat_tree", "k": 4}, host_profiles={3: "hpc"})
    eps = [fab.endpoint(i) for i in range(16)]
    assert len({id(ep.peer_macs) for ep in eps}) == 1
    assert len({id(ep.peer_ips) for ep in eps}) == 1
    assert len({id(fab.net.hosts[i].peers) for i in range(16)}) == 1
    hpc = eps[3].profile.fep_cap
    assert eps[0].ses.initiator.peer_caps[eps[3].ip] == hpc
    assert eps[3].ip not in eps[3].ses.initiator.peer_caps
    assert eps[0].peer_macs[eps[5].ip] == fab.net.hosts[5].mac
