"""The EV socket pool on real loopback sockets: EV as source port, TOS both ways, the LRU
bound and the fallback (addresses 127.61.N.2x, N from the process ID: see test_udp)."""

from __future__ import annotations

import os
import socket

import pytest
import trio

from uet.runtime.sockets import EvSocketPool

PORT = 4793
NET = f"127.61.{os.getpid() % 250 + 1}"


async def test_ev_is_the_source_port_and_tos_travels() -> None:
    a, b = EvSocketPool(f"{NET}.20", PORT), EvSocketPool(f"{NET}.21", PORT)
    a.open()
    b.open()
    try:
        sent = [(b"one", 6001, 46 << 2), (b"two", 6002, 10 << 2 | 2), (b"three", 6001, 3)]
        for payload, ev, tos in sent:
            assert await a.send(payload, f"{NET}.21", ev, tos)
        got = []
        with trio.fail_after(5):
            for _ in sent:
                got.append(await b.receive())
        assert got == [(p, f"{NET}.20", ev, tos) for p, ev, tos in sent]
        assert a.ev_ports == [6002, 6001]  # least recently used first
        assert (a.counters["tx_datagrams"], b.counters["rx_datagrams"]) == (3, 3)
        assert a.counters["tx_bytes"] == 11 and a.counters["ev_fallback"] == 0
        # the listening port as EV needs no socket of its own
        assert await a.send(b"x", f"{NET}.21", PORT, 0)
        assert (await b.receive())[2] == PORT and a.ev_ports == [6002, 6001]
    finally:
        a.close()
        b.close()


async def test_pool_bound_and_fallback() -> None:
    pool = EvSocketPool(f"{NET}.22", PORT, max_ev_sockets=2)
    peer = EvSocketPool(f"{NET}.23", PORT)
    busy = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    busy.bind((f"{NET}.22", 7003))  # someone else holds that port
    pool.open()
    peer.open()
    try:
        for ev in (7001, 7002, 7001, 7004):  # 7002 is the least recently used at 7004
            assert await pool.send(b"d", f"{NET}.23", ev)
        assert pool.ev_ports == [7001, 7004]
        assert pool.counters["ev_socket_recycled"] == 1
        assert await pool.send(b"d", f"{NET}.23", 7003)  # cannot bind: listening socket
        assert await pool.send(b"d", f"{NET}.23", 0)  # port 0 is no EV a socket can fix
        assert pool.counters["ev_fallback"] == 2 and pool.ev_ports == [7001, 7004]
        ports = []
        with trio.fail_after(5):
            for _ in range(6):
                ports.append((await peer.receive())[2])
        assert ports == [7001, 7002, 7001, 7004, PORT, PORT]
    finally:
        busy.close()
        pool.close()
        peer.close()
    assert pool.ev_ports == []


async def test_bad_arguments_and_busy_address() -> None:
    with pytest.raises(ValueError, match="max_ev_sockets"):
        EvSocketPool(f"{NET}.24", max_ev_sockets=-1)
    first = EvSocketPool(f"{NET}.24", PORT)
    first.open()
    try:
        with pytest.raises(OSError):
            EvSocketPool(f"{NET}.24", PORT).open()
    finally:
        first.close()
