"""Test helpers: a scripted end point that sends given frames and records what arrives, and
a way to start a live process and wait until it is ready."""

from __future__ import annotations

import subprocess
import sys
from collections import deque
from pathlib import Path

import trio

from uet.fabric.endpoint import HostContext
from uet.wire.codec import encode_frame
from uet.wire.constants import NextHeader, PdsType, SesOpcode
from uet.wire.records import Frame, PdsRequest, SesStandard


class ScriptEndpoint:
    """Sends ``frames`` (bytes) as fast as the NIC allows; records ``(now, data)`` received."""

    def __init__(self, ctx: HostContext) -> None:
        self.ctx = ctx
        self.out: deque[bytes] = deque()
        self.ctl: deque[bytes] = deque()
        self.got: list[tuple[int, bytes]] = []
        self.sent_at: list[int] = []

    def receive(self, now: int, data: bytes) -> None:
        self.got.append((now, data))

    def pop_control(self, now: int) -> bytes | None:
        return self.ctl.popleft() if self.ctl else None

    def pop_data(self, now: int) -> bytes | None:
        if self.out:
            self.sent_at.append(now)
            return self.out.popleft()
        return None

    def next_deadline(self) -> int | None:
        return None

    def handle_timer(self, now: int) -> None:
        pass


def data_frame(src: HostContext, dst: HostContext, *, psn: int = 0, ev: int = 0xC000,
               payload: int = 4052, dscp: int | None = None, ecn: int = 2) -> bytes:
    """A RUD request with a standard SES header: 98 B of headers + ``payload``."""
    req = PdsRequest(type=PdsType.RUD_REQ, next_hdr=NextHeader.REQ_STD, psn=psn, spdcid=1,
                     dpdcid=2)
    ses = SesStandard(opcode=SesOpcode.SEND, flags=0x3, request_length=payload)
    return encode_frame(Frame(req, ses, None, bytes(payload), src_mac=src.mac, dst_mac=dst.mac,
                              src_ip=src.ip, dst_ip=dst.ip, ev=ev,
                              dscp=src.qos.dscp_data if dscp is None else dscp, ecn=ecn))


def script_factory(ctx: HostContext) -> ScriptEndpoint:
    return ScriptEndpoint(ctx)


ROOT = Path(__file__).resolve().parents[2]


async def start_ready(*argv: str) -> subprocess.Popen:
    """Start ``python argv...``; returns once it printed its "ready udp:..." line."""
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        with trio.fail_after(30):
            while True:
                line = await trio.to_thread.run_sync(proc.stdout.readline)
                assert line, f"{argv} exited: {proc.communicate(timeout=5)[1]}"
                if line.startswith("ready udp:"):
                    return proc
    except BaseException:
        proc.kill()
        proc.wait(5)
        raise
