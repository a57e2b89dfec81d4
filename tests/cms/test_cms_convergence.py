"""Closed-loop self-checks: NSCC / RCCC driven through the public API by a tiny
deterministic packet loop (``cms_minisim``: one bottleneck FIFO with RED ECN and
trimming, one ACK per packet). No fabric, no PDS."""

import pytest
from cms_minisim import PS_PER_S, MiniNet

from uet.cms import CmsConfig
from uet.cms.nscc import bdp_bytes

MS = 1_000_000_000
US = 1_000_000


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def test_nscc_single_flow_ramps_to_bdp_and_fills_the_link():
    # start from one packet; the sender NIC is twice as fast as the bottleneck, so a
    # too-large window would show up as queue
    cfg = CmsConfig(algorithm="nscc", ev_selector="oblivious", initial_window_bytes=4096)
    bdp = bdp_bytes(cfg)
    net = MiniNet(cfg, 1, sender_speedup=2).run(2 * MS)
    f = net.flows[0]
    reached = next(t for t, c in f.cwnd_log if c >= bdp)
    assert reached < 300 * US  # fast + proportional increase: ~15 RTTs
    assert net.throughput(0, MS // 2, 2 * MS) > 0.99
    assert bdp <= f.cc.cwnd <= 1.5 * bdp
    # the window above one BDP sits in the queue, below the target delay (0.75 RTT)
    late = [q for t, q in net.queue_log if t > MS // 2]
    assert max(late) < 0.75 * bdp
    assert net.trims == 0


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("gap", [0, MS // 2])
def test_nscc_flows_share_one_bottleneck(n, gap):
    cfg = CmsConfig(algorithm="nscc", ev_selector="oblivious")
    end = 5 * MS
    net = MiniNet(cfg, n, start_gap=gap, seed=n).run(end)
    shares = [net.throughput(i, 3 * MS, end) for i in range(n)]
    assert sum(shares) > 0.97  # the link stays full
    assert jain(shares) > 0.9  # NSCC's AIMD converges slowly (small MD steps)
    assert min(shares) > 0.6 / n  # nobody starved, late starters included
    bdp = bdp_bytes(cfg)
    assert sum(f.cc.cwnd for f in net.flows) < 3 * bdp  # windows settle near 1 BDP total


def test_nscc_is_deterministic():
    cfg = CmsConfig(algorithm="nscc", ev_selector="bitmap")
    a = MiniNet(cfg, 3, seed=5).run(MS)
    b = MiniNet(cfg, 3, seed=5).run(MS)
    assert [f.acked_log for f in a.flows] == [f.acked_log for f in b.flows]


@pytest.mark.parametrize("algorithm", ["rccc", "nscc+rccc"])
def test_rccc_incast_shares_the_receiver_link(algorithm):
    cfg = CmsConfig(algorithm=algorithm, ev_selector="oblivious")
    net = MiniNet(cfg, 4).run(2 * MS)
    shares = [net.throughput(i, MS, 2 * MS) for i in range(4)]
    assert all(abs(s - 0.99 / 4) < 0.01 for s in shares)  # equal, paced at 0.99
    # the speculative first RTT overshoots (trims); after that the paced credit
    # (0.99 x link) only lets the standing queue drain: no more trims, no growth
    assert net.trims > 0 and max(net.trim_times) < 50 * US
    q100 = max(q for t, q in net.queue_log if 100 * US <= t < 110 * US)
    assert max(q for t, q in net.queue_log if t > 110 * US) <= q100


@pytest.mark.parametrize("algorithm", ["nscc", "rccc"])
def test_incast_completes_near_ideal(algorithm):
    """htsim's 15:1 incast of 2 MB flows: the last flow ends within a few % of the
    receiver link's ideal (htsim: NSCC 1.012, RCCC 1.007)."""
    cfg = CmsConfig(algorithm=algorithm, ev_selector="oblivious")
    n, size = 15, 2_000_000
    net = MiniNet(cfg, n, size=size).run(50 * MS)
    finish = [f.finish for f in net.flows]
    assert all(t is not None for t in finish)
    rate = (
        cfg.link_rate_bps
        / 8
        / PS_PER_S
        * cfg.mtu_payload
        / (cfg.mtu_payload + cfg.pkt_overhead_bytes)
    )
    ideal = n * size / rate
    assert max(finish) / ideal < 1.03
    assert net.trims > 0  # the first RTT overshoots and is trimmed, then recovers
