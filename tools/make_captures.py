#!/usr/bin/env python3
"""Write the reference captures in ``captures/``: small, deterministic, one per topic.

Every protocol exchange is a real run of the emulator (``uet.runtime.fabric.Fabric`` with the
real ``FabricEndpoint`` of a profile, seeded impairments, virtual time), tapped with
``fab.capture``; the header catalogue is written with the codec. Running the script twice
gives byte-identical files, and ``tests/capture/test_reference_captures.py`` checks that the
committed files are what the current code produces. docs/wireshark.md lists what each
capture shows and a display filter to try on it.

Usage:
    python tools/make_captures.py               # rewrite every capture in captures/
    python tools/make_captures.py rud_loss ...  # only these
    python tools/make_captures.py --check       # exit 1 if a committed file is stale
    python tools/make_captures.py --out DIR     # write elsewhere
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import re
import struct
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from uet.capture.pcapng import PcapngWriter, read_capture
from uet.endpoint.fep import SINK_INDEX, SINK_KEY, FabricEndpoint
from uet.fabric.clock import MS, US
from uet.native import ipv4_header_checksum
from uet.runtime.fabric import Fabric
from uet.ses.memory import Perm
from uet.wire.codec import decode_frame, encode_frame, trim_frame
from uet.wire.constants import (
    DSCP_DEFAULT_CONTROL,
    AtomicDatatype,
    AtomicOpcode,
    CtlType,
    DeliveryMode,
    NackCode,
    NextHeader,
    PdsType,
    ReturnCode,
    RspOpcode,
    SesOpcode,
)
from uet.wire.records import (
    AtomicExt,
    CasExt,
    Frame,
    PdsAck,
    PdsAckCc,
    PdsControl,
    PdsNack,
    PdsRequest,
    PdsRudi,
    PdsUud,
    RendezvousExt,
    SesMedium,
    SesResponse,
    SesResponseData,
    SesResponseDataSmall,
    SesSmall,
    SesStandard,
    TssHeader,
)

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "captures"

#: Two hosts, one 100 Gb/s cable of 1 µs: the smallest fabric (h0 = 10.0.0.2, h1 = 10.0.0.3).
BACK_TO_BACK = {"kind": "back_to_back"}
KIB = 1024


# --------------------------------------------------------------------------- fabric runs


def _fabric_capture(topology: dict, seed: int, factory: Callable[[Any], Any],
                    body: Callable[[Fabric], Awaitable[None]], ifaces: list[str]) -> bytes:
    """Run ``body`` on a fresh fabric in virtual time, tapping ``ifaces`` (what they send
    and receive); return the pcapng bytes."""
    buf = io.BytesIO()

    async def main() -> None:
        async with Fabric(topology, seed=seed, endpoint_factory=factory) as fab:
            fab.capture(buf, ifaces)
            await body(fab)

    trio.run(main)
    return buf.getvalue()


async def _wait(fab: Fabric, pred: Callable[[], bool], what: str,
                timeout_ps: int = 100 * MS) -> None:
    if not await fab.wait_until(pred, timeout_ps):
        raise RuntimeError(f"capture run: {what} did not happen within {timeout_ps} ps")


def _closed(fab: Fabric, host: int, role: str) -> int:
    return fab.endpoint(host).stats.get(f"fep.pdc_closed.{role}", 0)


async def _write(fab: Fabric, src: int, dst: int, nbytes: int,
                 mode: DeliveryMode | None = None) -> Any:
    """An RMA WRITE of ``nbytes`` into the peer's sink; waits for its completion."""
    def start(ep: FabricEndpoint, now: int) -> Any:
        return ep.call(now, "write", ep.target(dst, resource_index=SINK_INDEX), SINK_KEY, 0,
                       bytes(range(256)) * (nbytes // 256) + bytes(nbytes % 256),
                       mode=mode or ep.mode)

    op = fab.submit(src, start)
    await _wait(fab, lambda: op.done, f"WRITE {src}->{dst}")
    if op.return_code != ReturnCode.OK:
        raise RuntimeError(f"capture run: WRITE {src}->{dst} failed with {op.return_code}")
    return op


async def _until_closed(fab: Fabric, initiator: int, target: int, n: int = 1) -> None:
    """Wait for ``n`` PDCs to close at both ends (the initiator closes after 1 ms idle)."""
    await _wait(fab, lambda: _closed(fab, initiator, "initiator") >= n
                and _closed(fab, target, "target") >= n, "PDC close", 10 * MS)


def pdc_open_close() -> bytes:
    """A PDC opened by SYN requests, acknowledged, cleared, closed after 1 ms idle, and a
    second PDC between the same hosts after the first one closed."""
    async def body(fab: Fabric) -> None:
        await _write(fab, 0, 1, 6 * KIB)
        await _until_closed(fab, 0, 1)
        await _write(fab, 0, 1, 2 * KIB)
        await _until_closed(fab, 0, 1, 2)

    return _fabric_capture(BACK_TO_BACK, 11, FabricEndpoint.factory(sink_bytes=64 * KIB),
                           body, ["h0"])


def rud_loss() -> bytes:
    """RUD: a 48 KiB WRITE over a cable losing 25% of h0's frames, tapped at the receiver
    (h1): SACK bitmaps with holes, retransmissions (RETX|AR) of the lost ones, ACK_REQ for
    packets SACKed above a CACK held by the stored response when their timer fires, CLEAR,
    and the PDC closing. (Seed 2: with the PDS's time-based loss detection, the earlier
    seed 3 recovered everything before any timer fired, so it showed no ACK_REQ.)"""
    async def body(fab: Fabric) -> None:
        fab.net.impair("h0", {"loss": 0.25}, "tx")
        await _write(fab, 0, 1, 48 * KIB)
        await _until_closed(fab, 0, 1)

    return _fabric_capture(BACK_TO_BACK, 2, FabricEndpoint.factory(sink_bytes=64 * KIB),
                           body, ["h1"])


def rod_reorder() -> bytes:
    """ROD: a 32 KiB WRITE whose packets the cable reorders (40% held back 3 µs). The
    target keeps early packets in a reorder buffer of 2 packets (SACKed, delivered in PSN
    order once the gap fills) and NACKs ROD_OOO one that does not fit; it is resent."""
    async def body(fab: Fabric) -> None:
        fab.net.impair("h0", {"reorder": 0.4, "reorder_delay_ps": 3 * US}, "tx")
        await _write(fab, 0, 1, 32 * KIB, DeliveryMode.ROD)
        await _until_closed(fab, 0, 1)

    factory = FabricEndpoint.factory(sink_bytes=64 * KIB,
                                     pds_overrides={"rod_buffer_packets": 2})
    return _fabric_capture(BACK_TO_BACK, 2, factory, body, ["h1"])


def rudi() -> bytes:
    """RUDI (HPC profile): four single-packet WRITEs into an idempotent-safe region with
    30% loss on h0: per-packet IDs, one RUDI response each, retransmissions on timeout."""
    async def body(fab: Fabric) -> None:
        region = bytearray(16 * KIB)

        def expose(ep: FabricEndpoint, now: int) -> None:
            ep.ses.resources.add_region(ep.job_id, ep.ses.pid_on_fep, 1, 0x1D, region,
                                        Perm.WRITE, idempotent_safe=True)

        fab.submit(1, expose)
        fab.net.impair("h0", {"loss": 0.3}, "tx")
        ops = [fab.submit(0, lambda ep, now, i=i: ep.call(
            now, "write", ep.target(1, resource_index=1), 0x1D, i * 4 * KIB,
            bytes([i]) * 512, mode=DeliveryMode.RUDI)) for i in range(4)]
        await _wait(fab, lambda: all(op.done for op in ops), "RUDI writes")
        if any(op.return_code != ReturnCode.OK for op in ops):
            raise RuntimeError(f"RUDI writes failed: {[op.return_code for op in ops]}")

    return _fabric_capture(BACK_TO_BACK, 7, FabricEndpoint.factory(profile="hpc"), body,
                           ["h0"])


def uud() -> bytes:
    """UUD (AI Full profile): three DATAGRAM_SENDs tapped at the sender (h0) and at the
    receiver (h1): no PDC, no ACK, no retransmission of what the cable (30% loss) lost."""
    async def body(fab: Fabric) -> None:
        fab.net.impair("h0", {"loss": 0.3}, "tx")
        for _ in range(3):
            fab.submit(1, lambda ep, now: ep.post_recv(now, bytearray(64)))
        for i in range(3):
            fab.submit(0, lambda ep, now, i=i: ep.call(now, "datagram_send", ep.target(1),
                                                       b"datagram %d" % i))
        await fab.sleep(20 * US)

    return _fabric_capture(BACK_TO_BACK, 2, FabricEndpoint.factory(profile="ai-full"), body,
                           ["h0", "h1"])


def trim_nack() -> bytes:
    """Trimming: two hosts write 24 KiB each to a third through one switch with 8 KiB
    queues; the switch trims what does not fit (DSCP 14, last hop), the target NACKs
    TRIMMED_LASTHOP and the initiators retransmit."""
    topo = {"kind": "star", "hosts": 3, "queue_bytes": 8 * KIB, "control_queue_bytes": 64 * KIB}

    async def body(fab: Fabric) -> None:
        ops = [fab.submit(s, lambda ep, now: ep.call(
            now, "write", ep.target(2, resource_index=SINK_INDEX), SINK_KEY, 0,
            bytes(24 * KIB))) for s in (0, 1)]
        await _wait(fab, lambda: all(op.done for op in ops), "incast writes")

    return _fabric_capture(topo, 4, FabricEndpoint.factory(sink_bytes=64 * KIB), body,
                           ["h2"])


def pfc_pause() -> bytes:
    """PFC: the same incast on a lossless fabric (class 0, XOFF above 12 KB): the switch
    pauses the senders with 802.1Qbb frames and resumes them (quanta 0); nothing is lost."""
    topo = {"kind": "star", "hosts": 3, "trimming": False,
            "pfc": {"classes": [0], "xoff": 12000, "xon": 6000}}

    async def body(fab: Fabric) -> None:
        ops = [fab.submit(s, lambda ep, now: ep.call(
            now, "write", ep.target(2, resource_index=SINK_INDEX), SINK_KEY, 0,
            bytes(24 * KIB))) for s in (0, 1)]
        await _wait(fab, lambda: all(op.done for op in ops), "lossless incast writes")

    return _fabric_capture(topo, 6, FabricEndpoint.factory(sink_bytes=64 * KIB), body,
                           ["h0"])


def trimmed_ack() -> bytes:
    """Read data in ACKs, trimmed (HPC profile, a star with 8 KiB queues): h0 READs 4 KiB
    from each of five hosts at once; their ACKs carry the data in the data class, the
    switch trims what does not fit towards h0 (the last hop), h0 NACKs TRIMMED_ACK and the
    targets send those ACKs again (RETX). Then the same over RUDI: a trimmed RUDI response
    gets the NACK with NT set (its pkt_id, no PDC IDs) and is resent from the cache."""
    topo = {"kind": "star", "hosts": 6, "queue_bytes": 8 * KIB}

    async def body(fab: Fabric) -> None:
        for mode in (DeliveryMode.RUD, DeliveryMode.RUDI):
            ops = [fab.submit(0, lambda ep, now, d=d, m=mode: ep.call(
                now, "read", ep.target(d, resource_index=SINK_INDEX), SINK_KEY, 0, 4 * KIB,
                mode=m)) for d in range(1, 6)]
            await _wait(fab, lambda ops=ops: all(op.done for op in ops), f"{mode.name} reads")
            if any(op.return_code != ReturnCode.OK for op in ops):
                raise RuntimeError(f"reads failed: {[op.return_code for op in ops]}")

    def idempotent(ctx: Any) -> FabricEndpoint:
        ep = FabricEndpoint.factory(profile="hpc", sink_bytes=16 * KIB)(ctx)
        ep.ses.resources.get(ep.job_id, ep.ses.pid_on_fep, SINK_INDEX).regions[
            SINK_KEY].idempotent_safe = True  # RUDI may read it
        return ep

    return _fabric_capture(topo, 3, idempotent, body, ["h0"])


def ccx() -> bytes:
    """Extended congestion state (cms.ccx = "telemetry"): a 3:1 incast of 16 KiB WRITEs on
    a star with 12 KiB queues, tapped at the receiver. Its ACKs are ACK_CCX (the 8-byte
    telemetry after the ACK_CC state: CE share, interval, trims, bytes) and its NACKs of
    the trimmed packets NACK_CCX (the same at the time of the trim)."""
    topo = {"kind": "star", "hosts": 4, "queue_bytes": 12 * KIB}

    async def body(fab: Fabric) -> None:
        ops = [fab.submit(s, lambda ep, now: ep.call(
            now, "write", ep.target(3, resource_index=SINK_INDEX), SINK_KEY, 0,
            bytes(16 * KIB))) for s in range(3)]
        await _wait(fab, lambda: all(op.done for op in ops), "incast writes")

    factory = FabricEndpoint.factory(sink_bytes=64 * KIB, cms_overrides={"ccx": "telemetry"})
    return _fabric_capture(topo, 4, factory, body, ["h3"])


def negotiation() -> bytes:
    """NEGOTIATION at PDC open (pds.negotiation): the initiator's SYN-form NEGOTIATION
    (its fep_cap, MP_RANGE, payload size) goes before its first request, the target
    answers with its own; the PDC is kept open (close_idle_ps 0) with NOOP keepalives
    (pds.keepalive_ps 40 us) past the target's 100 us idle time, so no CLOSE_REQ comes;
    a second WRITE later uses the same PDC."""
    async def body(fab: Fabric) -> None:
        await _write(fab, 0, 1, 8 * KIB)
        await fab.sleep(150 * US)
        await _write(fab, 0, 1, 2 * KIB)
        await fab.sleep(50 * US)

    over = {"negotiation": True, "keepalive_ps": 40 * US, "close_idle_ps": 0,
            "target_idle_ps": 100 * US}
    factory = FabricEndpoint.factory(profile="ai-full", sink_bytes=64 * KIB,
                                     pds_overrides=over)
    return _fabric_capture(BACK_TO_BACK, 5, factory, body, ["h0"])


def native_ip() -> bytes:
    """UET directly over IP (encap native-ip, protocol 253): the 4-byte entropy header
    (the EV) right after IPv4, no UDP. A 24 KiB WRITE and a 6 KiB READ through a
    two-leaf fabric, sprayed over the spines by the EV, and the PDC's close."""
    topo = {"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 1}

    async def body(fab: Fabric) -> None:
        await _write(fab, 0, 1, 24 * KIB)
        op = fab.submit(0, lambda ep, now: ep.call(
            now, "read", ep.target(1, resource_index=SINK_INDEX), SINK_KEY, 0, 6 * KIB))
        await _wait(fab, lambda: op.done, "READ")
        await _until_closed(fab, 0, 1)

    factory = FabricEndpoint.factory(sink_bytes=64 * KIB, encap="native-ip")
    return _fabric_capture(topo, 6, factory, body, ["h0"])


def atomics_dc() -> bytes:
    """HPC semantics the specification defines codes for: a FETCHING_ATOMIC SUM of 2^100 on
    a LONG_DOUBLE holding 1 (IEEE binary128, 16-byte operand; 1 comes back, 2^100 + 1 is
    left, exactly), a FLOAT SUM that overflows (answered
    AMO_FP_OVERFLOW, memory unchanged), and a WRITE with DC (delivery complete) set:
    acknowledged at once with NO_RESPONSE, answered RESPONSE OK in a second ACK once the
    data is in host memory (ses.dc_latency_ns, 1 us)."""
    async def body(fab: Fabric) -> None:
        region = bytearray(64)  # memory holds values little-endian
        region[0:16] = bytes.fromhex("3fff" + "00" * 14)[::-1]  # 1.0 in binary128
        region[16:20] = struct.pack("<f", 3e38)

        def expose(ep: FabricEndpoint, now: int) -> None:
            ep.ses.resources.add_region(ep.job_id, ep.ses.pid_on_fep, 2, 0xA70, region,
                                        Perm.ATOMIC | Perm.READ | Perm.WRITE)

        fab.submit(1, expose)
        tgt = lambda ep: ep.target(1, resource_index=2)  # noqa: E731
        ops = [fab.submit(0, lambda ep, now: ep.call(
            now, "atomic", tgt(ep), 0xA70, 0, AtomicOpcode.SUM, AtomicDatatype.LONG_DOUBLE,
            2 ** 100, fetch=True)),
            fab.submit(0, lambda ep, now: ep.call(
                now, "atomic", tgt(ep), 0xA70, 16, AtomicOpcode.SUM, AtomicDatatype.FLOAT,
                3e38)),
            fab.submit(0, lambda ep, now: ep.call(
                now, "write", ep.target(1, resource_index=SINK_INDEX), SINK_KEY, 0,
                bytes(range(64)), dc=True))]
        await _wait(fab, lambda: all(op.done for op in ops), "atomics and the DC write")
        codes = [op.return_code for op in ops]
        if codes != [ReturnCode.OK, ReturnCode.AMO_FP_OVERFLOW, ReturnCode.OK]:
            raise RuntimeError(f"capture run: unexpected return codes {codes}")

    return _fabric_capture(BACK_TO_BACK, 8, FabricEndpoint.factory(profile="hpc",
                                                                   sink_bytes=4 * KIB),
                           body, ["h0"])


def nack_codes() -> bytes:
    """Every NACK code the end point can detect, each in the exchange that calls for it:
    the conformance cases that check them (docs/conformance.md), run in process against
    the built-in end point (virtual clock, deterministic), one capture interface per
    case."""
    from uet.conformance.capture import CaseCapture
    from uet.conformance.registry import catalogue
    from uet.conformance.targets import InProcessTarget

    codes = {int(c) for c in NackCode} - {0, 0x0C, 0xFD, 0xFE, 0xFF}
    target = InProcessTarget()
    picked = []
    for case in catalogue():
        want = [c for c in codes if re.search(rf"\b{NackCode(c).name}\b", case.rule)]
        if want and case.area in ("nacks", "establishment", "window", "close", "control"):
            picked.append(case)
            codes -= set(want)
    buf = io.BytesIO()
    with PcapngWriter(buf) as w:
        t0 = 0
        for i, case in enumerate(picked):
            cap = CaseCapture(case.id)
            with target.peer(case, i, cap) as peer:
                case.fn(peer)
            if_id = w.add_interface(case.id)
            last = 0
            for ts, data in cap.frames():
                w.write_packet(if_id, t0 + ts, data)
                last = max(last, ts)
            t0 += last + 1_000
    if codes:
        raise RuntimeError(f"no catalogue case shows NACK {sorted(codes)}")
    return buf.getvalue()


# --------------------------------------------------------------------------- codec


INI, TGT = "10.0.0.1", "10.0.0.2"
INI6, TGT6 = "fd00::1", "fd00::2"
MAC_I, MAC_T = "02:00:00:00:00:01", "02:00:00:00:00:02"
JOB = 0x2A
I_PDC, T_PDC, START = 5, 7, 1000  # RUD PDC: initiator / target PDC IDs, Start_PSN
R_PDC, RT_PDC, R_START = 6, 8, 2000  # ROD PDC
T_START = 5000  # the target's own PSN space (read responses in requests)
DATA = bytes(range(64))


def _i2t(pds: Any, ses: Any = None, ext: Any = None, payload: bytes = b"", *,
         dscp: int = 10, **kw: Any) -> Frame:
    """Initiator to target (data DSCP 10, as the fabric sends it)."""
    return Frame(pds=pds, ses=ses, ext=ext, payload=payload,
                 **{"src_ip": INI, "dst_ip": TGT, "src_mac": MAC_I, "dst_mac": MAC_T,
                    "dscp": dscp, "ev": 0x1234, **kw})


def _t2i(pds: Any, ses: Any = None, ext: Any = None, payload: bytes = b"", **kw: Any) -> Frame:
    """Target to initiator (control DSCP 46)."""
    return Frame(pds=pds, ses=ses, ext=ext, payload=payload, src_ip=TGT, dst_ip=INI,
                 src_mac=MAC_T, dst_mac=MAC_I, dscp=DSCP_DEFAULT_CONTROL,
                 **{"ev": 0x1234, **kw})


def _std(opcode: int, flags: int = 0x03, **kw: Any) -> SesStandard:
    return SesStandard(opcode=opcode, flags=flags, job_id=JOB, pid_on_fep=3,
                       initiator=0x0A000001, **kw)


def _req(psn: int, flags: int = 0, nh: int = NextHeader.REQ_STD, **kw: Any) -> PdsRequest:
    return PdsRequest(next_hdr=nh, flags=flags, clear_psn_offset=START - 1 - psn, psn=psn,
                      spdcid=I_PDC, dpdcid=T_PDC, **kw)


def _cp(ctl: int, psn: int = 0, payload: int = 0, flags: int = 0, **kw: Any) -> PdsControl:
    return PdsControl(ctl_type=ctl, flags=flags, psn=psn, spdcid=I_PDC, dpdcid=T_PDC,
                      payload=payload, **kw)


def _tcp(ctl: int, psn: int = 0, payload: int = 0, flags: int = 0) -> PdsControl:
    """A control packet from the target."""
    return PdsControl(ctl_type=ctl, flags=flags, psn=psn, spdcid=T_PDC, dpdcid=I_PDC,
                      payload=payload)


def _ack(cack: int, ack_psn: int, nh: int = NextHeader.NONE, flags: int = 0,
         **kw: Any) -> PdsAck:
    return PdsAck(next_hdr=nh, flags=flags, ack_psn_offset=ack_psn - cack, cack_psn=cack,
                  spdcid=T_PDC, dpdcid=I_PDC, **kw)


def _ack_cc(cack: int, ack_psn: int, nh: int = NextHeader.NONE, *, type: int = 8,
            flags: int = 0, bitmap: int = 0, **kw: Any) -> PdsAckCc:
    return PdsAckCc(type=type, next_hdr=nh, flags=flags, ack_psn_offset=ack_psn - cack,
                    cack_psn=cack, spdcid=T_PDC, dpdcid=I_PDC, mpr=1, sack_psn_offset=1,
                    sack_bitmap=bitmap, **kw)


def _rsp(msg: int, mod_len: int = 0, rc: int = ReturnCode.OK,
         opcode: int = RspOpcode.RESPONSE) -> SesResponse:
    return SesResponse(opcode=opcode, return_code=rc, message_id=msg, job_id=JOB,
                       modified_length=mod_len)


def header_frames() -> list[Frame | bytes]:
    """Every PDS type, control packet type and SES header (with each extension), over
    UDP/IPv4, UDP/IPv6, native IPv4/IPv6 and TSS, in a plausible order: a RUD PDC from
    10.0.0.1 (PDC 5) to 10.0.0.2 (PDC 7), a ROD PDC (6/8), RUDI and UUD."""
    f: list[Frame | bytes] = []
    add = f.append
    # --- RUD PDC: SYN request (standard header, SOM|EOM with header data) and its ACK_CC
    add(_i2t(PdsRequest(next_hdr=NextHeader.REQ_STD, flags=0x0C, clear_psn_offset=-1,
                        psn=START, spdcid=I_PDC, psn_offset=0),
             _std(SesOpcode.SEND, 0x07, message_id=1, header_data=0xFEED, request_length=64),
             payload=DATA))
    add(_t2i(_ack_cc(START, START, NextHeader.RSP, bitmap=0, service_time=12,
                     rcvd_bytes=64, ooo_count=0), _rsp(1, 64)))
    # two-packet WRITE: standard header SOM, then non-SOM with payload length and offset
    add(_i2t(_req(START + 1), _std(SesOpcode.WRITE, 0x01, message_id=2, buffer_offset=0x1000,
                                   memory_key=0xC0FFEE, request_length=128), payload=DATA))
    add(_i2t(_req(START + 2, 0x08), _std(SesOpcode.WRITE, 0x02, message_id=2,
                                          buffer_offset=0x1000, memory_key=0xC0FFEE,
                                          payload_length=64, message_offset=64,
                                          request_length=128), payload=DATA, ecn=3))
    # ACK_CC with ECN echo (M) and a SACK bitmap; plain ACK with an SES response
    add(_t2i(_ack_cc(START + 1, START + 2, NextHeader.RSP, flags=0x20, bitmap=0x1,
                     service_time=40, rcvd_bytes=128, ooo_count=1), _rsp(2, 128)))
    # READ request; read data in an ACK (RSP_DATA)
    add(_i2t(_req(START + 3, 0x08), _std(SesOpcode.READ, 0x03, message_id=3,
                                          buffer_offset=0x2000, memory_key=0xC0FFEE,
                                          request_length=64)))
    add(_t2i(_ack(START + 3, START + 3, NextHeader.RSP_DATA),
             SesResponseData(opcode=RspOpcode.RESPONSE_W_DATA, return_code=ReturnCode.OK,
                             message_id=3, job_id=JOB, read_request_message_id=3,
                             payload_length=64, modified_length=64), payload=DATA))
    # a long READ's data in a request of the target's own PSN space, ACKed by the initiator
    add(_t2i(PdsRequest(next_hdr=NextHeader.RSP_DATA, flags=0x08, clear_psn_offset=-1,
                        psn=T_START, spdcid=T_PDC, dpdcid=I_PDC),
             SesResponseData(opcode=RspOpcode.RESPONSE_W_DATA, return_code=ReturnCode.OK,
                             message_id=4, job_id=JOB, read_request_message_id=3,
                             payload_length=64, modified_length=64, message_offset=0),
             payload=DATA))
    add(_i2t(PdsAck(flags=0, ack_psn_offset=0, cack_psn=T_START, spdcid=I_PDC,
                    dpdcid=T_PDC), dscp=DSCP_DEFAULT_CONTROL))
    # fetching atomic (atomic extension) answered with RSP_DATA_SMALL in an ACK_CC (credit)
    add(_i2t(_req(START + 4, 0x08), _std(SesOpcode.FETCHING_ATOMIC, message_id=5,
                                          buffer_offset=0x40, memory_key=0xC0FFEE,
                                          request_length=8),
             AtomicExt(AtomicOpcode.SUM, AtomicDatatype.UINT64, 0x01),
             payload=(5).to_bytes(8, "big")))
    add(_t2i(_ack_cc(START + 4, START + 4, NextHeader.RSP_DATA_SMALL, cc_type=1,
                     bitmap=0, credit=0x4000, ooo_count=0),
             SesResponseDataSmall(opcode=RspOpcode.RESPONSE_W_DATA,
                                  return_code=ReturnCode.OK, payload_length=8, job_id=JOB,
                                  original_request_psn=START + 4),
             payload=(37).to_bytes(8, "big")))
    # compare-and-swap after a small header, answered in an ACK_CCX
    add(_i2t(_req(START + 5, 0x08, NextHeader.REQ_SMALL),
             SesSmall(opcode=SesOpcode.ATOMIC, flags=0x03, request_length=32, job_id=JOB,
                      pid_on_fep=3, buffer_offset=0x48),
             CasExt(AtomicOpcode.CSWAP, AtomicDatatype.UINT64, 0, 1, 2)))
    add(_t2i(_ack_cc(START + 5, START + 5, NextHeader.RSP, type=PdsType.ACK_CCX,
                     service_time=9, rcvd_bytes=32, ccx_state=bytes(range(1, 9))),
             _rsp(0, 0, opcode=RspOpcode.NO_RESPONSE)))
    # rendezvous send (24-byte extension), then a packet trimmed by a switch and its NACK
    add(_i2t(_req(START + 6, 0x08), _std(SesOpcode.RENDEZVOUS_SEND, message_id=6,
                                          request_length=1 << 20),
             RendezvousExt(64, 1, 3, 9, 0, 0x5EED), payload=DATA))
    write7 = _i2t(_req(START + 7, 0x08), _std(SesOpcode.WRITE, 0x03, message_id=7,
                                               memory_key=0xC0FFEE, request_length=64),
                  payload=DATA)
    add(trim_frame(encode_frame(write7), dscp=14))
    add(_t2i(PdsNack(nack_code=NackCode.TRIMMED_LASTHOP, nack_psn=START + 7, spdcid=T_PDC,
                     dpdcid=I_PDC)))
    write7.pds.flags |= 0x10  # its retransmission (RETX|AR)
    add(write7)
    add(_t2i(_ack(START + 7, START + 7, NextHeader.RSP, flags=0x10), _rsp(7, 64)))
    # CC request type (RUD_CC_REQ with a deferrable send) and a NACK_CCX
    add(_i2t(PdsRequest(type=PdsType.RUD_CC_REQ, next_hdr=NextHeader.REQ_STD, flags=0x08,
                        clear_psn_offset=START - 1 - (START + 8), psn=START + 8,
                        spdcid=I_PDC, dpdcid=T_PDC, ccc_id=3, credit_target=0x8000),
             _std(SesOpcode.DEFERRABLE_SEND, message_id=8, buffer_offset=0x1_0000_0002,
                  request_length=64), payload=DATA))
    add(_t2i(PdsNack(type=PdsType.NACK_CCX, nack_code=NackCode.RCVR_INFER_LOSS,
                     nack_psn=START + 8, spdcid=T_PDC, dpdcid=I_PDC, nccx_type=1,
                     nccx_state1=0x123, nccx_state2=0x456)))
    # native IPv4 (entropy header) and TSS (with and without the SSI) on the same PDC
    add(_i2t(_req(START + 9, 0x08, NextHeader.REQ_SMALL),
             SesSmall(opcode=SesOpcode.WRITE, flags=0x03, request_length=4, job_id=JOB,
                      pid_on_fep=3, resource_index=4), payload=b"ip!!", encap="ip",
             ev=0x0F0F))
    add(_i2t(_cp(CtlType.NOOP, 0), dscp=DSCP_DEFAULT_CONTROL, encap="ip", ev=0x4242,
             tss=TssHeader(sp=True, an=0, sdi=0x000123, ssi=0x0A000001, epoch=1, tsc=77)))
    add(_i2t(_req(START + 10, 0x08), _std(SesOpcode.SEND, message_id=10, request_length=16),
             payload=DATA[:16], encap="ip", ev=0x0F11,
             tss=TssHeader(sp=False, an=1, sdi=0x000123, epoch=1, tsc=78)))
    # every control packet type (the target sends CLEAR_REQ, CLOSE_REQ and CREDIT), the
    # probe answer, and the close
    last = START + 10
    ctl = {"dscp": DSCP_DEFAULT_CONTROL, "ev": 0x4242}
    add(_i2t(_cp(CtlType.NOOP), **ctl))
    add(_i2t(_cp(CtlType.ACK_REQ, START + 8), **ctl))
    add(_t2i(_ack_cc(last, START + 8, flags=0x10, bitmap=0, service_time=3), ev=0x4242))
    add(_t2i(_tcp(CtlType.CLEAR_REQ, last, last), ev=0x4242))
    add(_i2t(_cp(CtlType.CLEAR, 0, last), **ctl))
    add(_i2t(_cp(CtlType.PROBE, last + 1, last + 1, probe_opaque=0xBEEF), **ctl))
    add(_t2i(PdsAck(flags=0x08, ack_psn_offset=0xBEEF, cack_psn=last, spdcid=T_PDC,
                    dpdcid=I_PDC), ev=0x4242))  # probe answer: P set, the opaque echoed
    add(_i2t(_cp(CtlType.CREDIT_REQ, last + 1, 0x10000), **ctl))
    add(_t2i(_tcp(CtlType.CREDIT, last + 1, 0x8000), ev=0x4242))
    add(_i2t(_cp(CtlType.NEGOTIATION), **ctl))
    add(_t2i(_tcp(CtlType.CLOSE_REQ, last, 0, 0x08), ev=0x4242))
    add(_i2t(_cp(CtlType.CLOSE, last + 1, 0, 0x08), **ctl))
    # closing ACK in the reference provider's 16-byte EPSN form
    add(_t2i(_ack(last + 1, last + 1, flags=0x40, epsn=last + 2), ev=0x4242))
    # --- ROD PDC: SYN request with a medium header, ROD_CC request, NACK ROD_OOO
    add(_i2t(PdsRequest(type=PdsType.ROD_REQ, next_hdr=NextHeader.REQ_MEDIUM, flags=0x0C,
                        clear_psn_offset=-1, psn=R_START, spdcid=R_PDC, psn_offset=0),
             SesMedium(opcode=SesOpcode.TAGGED_SEND, flags=0x07, request_length=16,
                       job_id=JOB, pid_on_fep=3, resource_index=2,
                       buffer_offset=0x1122334455667788, initiator=0x0A000001,
                       memory_key=0xABCDEF), payload=b"tagged message!!", ev=77))
    add(_i2t(PdsRequest(type=PdsType.ROD_CC_REQ, next_hdr=NextHeader.REQ_STD, flags=0x0C,
                        clear_psn_offset=-2, psn=R_START + 2, spdcid=R_PDC, psn_offset=2,
                        ccc_id=1, credit_target=0x4000),
             _std(SesOpcode.SEND, 0x03, message_id=9, request_length=64), payload=DATA,
             ev=77))
    add(_t2i(PdsNack(nack_code=NackCode.ROD_OOO, nack_psn=R_START + 2, spdcid=RT_PDC,
                     dpdcid=R_PDC), ev=77))
    # --- RUDI: request (small header WRITE), response, and a RUDI NACK (NT)
    add(_i2t(PdsRudi(type=PdsType.RUDI_REQ, next_hdr=NextHeader.REQ_SMALL, pkt_id=0xBEEF),
             SesSmall(opcode=SesOpcode.WRITE, flags=0x03, request_length=8, job_id=JOB,
                      pid_on_fep=3, resource_index=4, buffer_offset=0x2000),
             payload=b"8 bytes!", ev=5))
    add(_t2i(PdsRudi(type=PdsType.RUDI_RESP, next_hdr=NextHeader.RSP, pkt_id=0xBEEF),
             _rsp(0, 8), ev=5))
    add(_i2t(PdsRudi(type=PdsType.RUDI_REQ, next_hdr=NextHeader.REQ_SMALL, pkt_id=0xBEF0),
             SesSmall(opcode=SesOpcode.WRITE, flags=0x03, request_length=8, job_id=JOB,
                      pid_on_fep=3, resource_index=4, buffer_offset=0x2008),
             payload=b"8 bytes!", ev=6))
    add(_t2i(PdsNack(flags=0x08, nack_code=NackCode.NO_RESOURCE, nack_psn=0xBEF0), ev=6))
    # --- UUD datagram with a medium header
    add(_i2t(PdsUud(next_hdr=NextHeader.REQ_MEDIUM),
             SesMedium(opcode=SesOpcode.DATAGRAM_SEND, flags=0x03, request_length=5,
                       job_id=JOB, pid_on_fep=3), payload=b"hello", ev=9))
    # --- IPv6 over UDP (checksum mandatory) and native IPv6, PDCs of their own
    six = {"src_ip": INI6, "dst_ip": TGT6}
    add(_i2t(PdsRequest(next_hdr=NextHeader.REQ_STD, flags=0x0C, clear_psn_offset=-1,
                        psn=9000, spdcid=1, psn_offset=0),
             _std(SesOpcode.SEND, message_id=1, request_length=4), payload=b"v6!!", **six))
    add(Frame(pds=PdsAckCc(cack_psn=9000, spdcid=2, dpdcid=1, mpr=1, sack_psn_offset=1),
              src_ip=TGT6, dst_ip=INI6, src_mac=MAC_T, dst_mac=MAC_I,
              dscp=DSCP_DEFAULT_CONTROL, ev=0x1234))
    add(_i2t(PdsRequest(next_hdr=NextHeader.REQ_STD, flags=0x0C, clear_psn_offset=-1,
                        psn=9100, spdcid=3, psn_offset=0),
             _std(SesOpcode.NO_OP, request_length=0), encap="ip", ev=0x0F10, **six))
    return f


def headers() -> bytes:
    """The header catalogue (:func:`header_frames`), one frame per microsecond."""
    buf = io.BytesIO()
    with PcapngWriter(buf) as w:
        if_id = w.add_interface("catalogue")
        for i, fr in enumerate(header_frames()):
            w.write_packet(if_id, 1_000 * (i + 1), fr if isinstance(fr, bytes)
                           else encode_frame(fr))
    return buf.getvalue()


# --------------------------------------------------------------------------- broken copy

#: (frame number, expert abbrev, severity, message regex) of :func:`broken_rud`.
Expectation = tuple[int, str, str, str]


def broken_rud_with_expectations() -> tuple[bytes, list[Expectation]]:
    """``rud_loss`` with eight frames damaged on purpose, and the expert info each must raise
    (every other frame stays clean). Frames are picked by kind, so the list follows the
    capture when the protocol's behaviour changes."""
    frames = list(read_capture(io.BytesIO(rud_loss())))
    kinds = [decode_frame(f.data) for f in frames]
    plain = [i for i, fr in enumerate(kinds)
             if fr.pds.type == PdsType.RUD_REQ and not fr.pds.flags & 0x04]
    acks = [i for i, fr in enumerate(kinds) if fr.pds.type == PdsType.ACK_CC]
    cps = [i for i, fr in enumerate(kinds) if fr.pds.type == PdsType.CP]
    data = [bytearray(f.data) for f in frames]
    uet = 42  # Ethernet 14 + IPv4 20 + UDP 8: the fabric sends UDP over IPv4
    out: list[Expectation] = []

    def expect(i: int, abbrev: str, severity: str, regex: str) -> None:
        out.append((i + 1, abbrev, severity, regex))

    i = plain[0]  # a reserved request flag
    data[i][uet + 1] |= 0x40
    expect(i, "uet.reserved_set", "warn", r"Reserved bits set in the PDS flags: 0x40")
    i = plain[1]  # an SES request opcode out of the table
    data[i][uet + 12] = 0x21
    expect(i, "uet.ses.unknown_opcode", "warn", r"Unknown SES request opcode 0x21")
    i = plain[2]  # SES version 1
    data[i][uet + 13] = 0x40 | data[i][uet + 13] & 0x3F
    expect(i, "uet.ses.unsupported_version", "warn", r"Unsupported SES version 1")
    i = plain[3]  # a UDP checksum that does not verify
    data[i][34 + 6:34 + 8] = b"\x12\x34"
    expect(i, "uet.udp_checksum.bad", "error", r"Bad UDP checksum 0x1234")
    i = plain[4]  # cut inside the standard SES header (IP and UDP lengths kept right)
    cut = data[i][:uet + 12 + 20]
    cut[16:18] = (len(cut) - 14).to_bytes(2, "big")
    cut[24:26] = b"\x00\x00"
    cut[24:26] = ipv4_header_checksum(bytes(cut[14:34])).to_bytes(2, "big")
    cut[38:40] = (len(cut) - 34).to_bytes(2, "big")
    data[i] = cut
    expect(i, "uet.ses.invalid_header", "error",
           r"SES STD header must be at least 44 bytes \(20 available\)")
    i = acks[0]  # reserved ACK_CC flag 0x40 (EPSN exists only on plain ACKs)
    data[i][uet + 1] |= 0x40
    expect(i, "uet.reserved_set", "warn", r"Reserved bits set in the PDS flags: 0x40")
    i = acks[1]  # PDS type 15, reserved
    data[i][uet] = 15 << 3 | data[i][uet] & 0x07
    expect(i, "uet.pds.unknown_type", "error", r"Unknown PDS type 15")
    i = cps[0]  # control packet type 12, unassigned
    word = int.from_bytes(data[i][uet:uet + 2], "big")
    data[i][uet:uet + 2] = (word & ~(0xF << 7) | 12 << 7).to_bytes(2, "big")
    expect(i, "uet.pds.unknown_ctl_type", "warn", r"Unknown control packet type 12")
    buf = io.BytesIO()
    with PcapngWriter(buf) as w:
        if_id = w.add_interface(frames[0].if_name)
        for f, d in zip(frames, data, strict=True):
            w.write_packet(if_id, f.ts_ns, bytes(d))
    return buf.getvalue(), out


def broken_rud() -> bytes:
    """:func:`rud_loss` with eight frames damaged on purpose (see
    :func:`broken_rud_with_expectations`)."""
    return broken_rud_with_expectations()[0]


def sample() -> bytes:
    """``captures/sample.pcapng`` of ``tools/make_sample_capture.py`` (the README's)."""
    spec = importlib.util.spec_from_file_location("make_sample_capture",
                                                  ROOT / "tools" / "make_sample_capture.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.sample_bytes()


#: the secure domain of tss.pcapng, written as captures/tss.keys: a published test key
#: (never use it for anything else), cluster mode with an SSI per host and implicit
#: rekeying every 4 frames, so the capture exercises per-source keys and the rekey boundary
TSS_DOMAIN = {"mode": "cluster", "sdi": 0x00_0101, "job": 1, "ssi": "auto",
              "rekey_mask": 0x4,
              "key": "75657420545353207265666572656e63652063617074757265206b6579212121"}


def tss() -> bytes:
    """A secured run (cluster mode): a 6 KiB WRITE and a 2 KiB READ on one PDC, its close
    with the EPSN closing ACK, then a second PDC that starts at the Expected PSN it was
    given. Every frame is encrypted: open it with captures/tss.keys (uet decode --keys,
    the dissector's preference uet.tss_keys)."""
    async def body(fab: Fabric) -> None:
        await _write(fab, 0, 1, 6 * KIB)

        def read(ep: FabricEndpoint, now: int) -> Any:
            return ep.call(now, "read", ep.target(1, resource_index=SINK_INDEX), SINK_KEY, 0,
                           2 * KIB)

        op = fab.submit(0, read)
        await _wait(fab, lambda: op.done, "READ 0->1")
        await _until_closed(fab, 0, 1)
        await _write(fab, 0, 1, 1 * KIB)
        await _until_closed(fab, 0, 1, 2)

    return _fabric_capture(BACK_TO_BACK, 14, FabricEndpoint.factory(sink_bytes=64 * KIB,
                                                                    tss=TSS_DOMAIN),
                           body, ["h0"])


def tss_keys() -> bytes:
    """captures/tss.keys: the key file of tss.pcapng."""
    from uet.tss.config import domain_from_dict, format_key_file

    dom = domain_from_dict({**TSS_DOMAIN, "ssi": 1})
    text = format_key_file([dom]).replace(f" ssi={dom.ssi}", "")
    return ("# captures/tss.keys: the published key of the reference capture tss.pcapng\n"
            + text).encode()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help=f"captures to write (default all: {', '.join(ALL)})")
    p.add_argument("--out", type=Path, default=CAPTURES, help="output folder")
    p.add_argument("--check", action="store_true",
                   help="compare with the files in the output folder instead of writing")
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in ALL]
    if unknown:
        p.error(f"unknown capture(s) {', '.join(unknown)}; known: {', '.join(ALL)}")
    stale = []
    for name in args.names or ALL:
        data = ALL[name]()
        path = args.out / (name if "." in name else f"{name}.pcapng")
        if args.check:
            if not path.exists() or path.read_bytes() != data:
                stale.append(path)
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if path.suffix == ".pcapng":
            print(f"wrote {path} ({sum(1 for _ in read_capture(path))} frames, "
                  f"{len(data)} bytes)")
        else:
            print(f"wrote {path} ({len(data)} bytes)")
    if stale:
        print("stale: " + ", ".join(map(str, stale)) + "; run python tools/make_captures.py",
              file=sys.stderr)
        return 1
    return 0


ALL: dict[str, Callable[[], bytes]] = {
    "headers": headers,
    "pdc_open_close": pdc_open_close,
    "rud_loss": rud_loss,
    "rod_reorder": rod_reorder,
    "rudi": rudi,
    "uud": uud,
    "trim_nack": trim_nack,
    "pfc_pause": pfc_pause,
    "trimmed_ack": trimmed_ack,
    "ccx": ccx,
    "negotiation": negotiation,
    "native_ip": native_ip,
    "atomics_dc": atomics_dc,
    "nack_codes": nack_codes,
    "broken_rud": broken_rud,
    "sample": sample,
    "tss": tss,
    "tss.keys": tss_keys,
}

if __name__ == "__main__":
    sys.exit(main())
