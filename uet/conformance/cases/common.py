"""Steps the catalogue's cases share: responses, reading memory back, device-initiated flows.

Everything here only sends packets and checks what comes back, so it works against any
device the peer can reach.
"""

from __future__ import annotations

from typing import Any

from uet.wire.constants import CtlType, NextHeader, ReturnCode, RspOpcode
from uet.wire.records import PdsRequest, SesResponseData, psn_add, psn_diff

from .. import packets as P
from ..peer import ANY_ACK, ConformanceFailure, Peer, PeerPdc, Received, lacks_flags
from ..setup import pattern

OK = ReturnCode.OK
MTU = 4096


def rc_name(rc: int) -> str:
    try:
        return ReturnCode(rc).name
    except ValueError:
        return f"0x{rc:02x}"


def response(pdc: PeerPdc, psn: int, rc: int = OK, *, timeout_us: float | None = None,
             what: str = "", **fields: Any) -> Received:
    """The ACK of ``psn`` carrying an SES RESPONSE with return code ``rc``."""
    f = {"ses.opcode": RspOpcode.RESPONSE, "ses.return_code": rc}
    f.update({k.replace("__", "."): v for k, v in fields.items()})
    return pdc.ack_of(psn, fields=f, timeout_us=timeout_us,
                      what=what or f"the ACK of PSN {psn} with RESPONSE {rc_name(rc)}")


def request_ok(pdc: PeerPdc, msg: P.Msg, rc: int = OK, **fields: Any) -> Received:
    """Send a message and expect the RESPONSE of its last packet with ``rc``."""
    psns = pdc.send_msg(msg)
    return response(pdc, psns[-1], rc, **fields)


def opened(peer: Peer, *, rod: bool = False, start_psn: int | None = None) -> PeerPdc:
    """A PDC opened with a NO_OP (whose RESPONSE OK has arrived)."""
    pdc = peer.pdc(rod=rod, start_psn=start_psn)
    psns = pdc.send_msg(peer.ses.no_op())
    response(pdc, psns[-1], OK, what="the RESPONSE OK of the NO_OP opening the PDC")
    return pdc


def close_pdc(pdc: PeerPdc) -> None:
    """Close ``pdc`` (CLOSE with AR, its ACK): what a case holds at the device (a PDC,
    its stored responses, a table slot) is given back, so a device serving many cases
    (over UDP) starts the next one clean."""
    psn = pdc.control(CtlType.CLOSE, ar=True)
    pdc.ack_of(psn, what="the ACK of the CLOSE ending the case")


def quiet(peer: Peer) -> PeerPdc:
    """An opened PDC with nothing stored at the target (no CLEAR_REQ due soon), and
    whatever the CLEAR itself caused claimed: ready for "nothing comes back" checks."""
    pdc = opened(peer)
    pdc.control(CtlType.CLEAR, 0, payload=pdc.psn(0))
    peer.collect(within_us=1000)
    return pdc


def read_back(pdc: PeerPdc, region: str, offset: int, length: int) -> bytes:
    """Bytes of a region, read with one READ (``length`` <= the ACK data limit)."""
    peer = pdc.peer
    msg = peer.ses.read(region, offset, length)
    psn = pdc.send_msg(msg)[-1]
    rx = pdc.ack_of(psn, fields={"ses.opcode": RspOpcode.RESPONSE_W_DATA,
                                 "ses.return_code": OK},
                    what=f"the READ response of {length} bytes of {region}+{offset}")
    return rx.data


def write_ok(pdc: PeerPdc, region: str, offset: int, data: bytes) -> Received:
    """A WRITE answered RESPONSE OK."""
    return request_ok(pdc, pdc.peer.ses.write(region, offset, data))


def check_bytes(peer: Peer, got: bytes, want: bytes, what: str) -> None:
    if got != want:
        diff = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                    min(len(got), len(want)))
        peer.fail(f"{what}: {len(got)} bytes read back differ from the {len(want)} expected "
                  f"at byte {diff} (got {got[diff:diff + 8].hex()}, expected "
                  f"{want[diff:diff + 8].hex()})")


def unique(peer: Peer, n: int, salt: int = 0) -> bytes:
    """``n`` bytes unlikely to be in the device's memory already (seeded per case)."""
    return bytes(peer.rng.randrange(256) for _ in range(n))


def rma_pattern(length: int, offset: int) -> bytes:
    return pattern(length, offset)


class DutFlow:
    """The device as initiator: the peer READs more than fits in ACKs, so the device sends
    the data back as RSP_DATA requests on a PDC it opens towards the peer (ref. 4.7). The
    peer then plays the target of that PDC: ``ack`` / ``nack`` / ``control``."""

    def __init__(self, peer: Peer, npkts: int = 3, *, rod: bool = False,
                 region: str = "readonly", offset: int = 0) -> None:
        self.peer = peer
        self.npkts = npkts
        self.region = region
        self.offset = offset
        self.read_pdc = peer.pdc(rod=rod)
        self.my_id = peer.new_pdcid()
        self.dut_id: int | None = None
        self.start: int | None = None
        self.got: dict[int, Received] = {}
        self.my_ev = peer.pick_ev()

    # ------------------------------------------------------------------ the flow
    def begin(self, *, timeout_us: float | None = None) -> list[Received]:
        """Send the READ and collect the device's first transmission of every packet."""
        peer = self.peer
        msg = peer.ses.read(self.region, self.offset, self.npkts * MTU)
        self.read_msg = msg
        self.read_psns = self.read_pdc.send_msg(msg)
        out = []
        for i in range(self.npkts):
            rx = self.expect_data(i, timeout_us=timeout_us,
                                  what=f"data packet {i} of the READ's return flow")
            out.append(rx)
        return out

    def expect_data(self, i: int, *, timeout_us: float | None = None,
                    fields: dict | None = None, what: str = "") -> Received:
        """The device's request carrying slice ``i`` (message_offset i * 4096)."""
        f = {"ses.message_offset": i * MTU}
        f.update(fields or {})
        rx = self.peer.expect(
            PdsRequest, timeout_us=self.peer.ack_bound_us * 5 if timeout_us is None
            else timeout_us, fields=f,
            where=lambda r: isinstance(r.ses, SesResponseData),
            what=what or f"the device's request carrying bytes {i * MTU}.. of the READ")
        if self.dut_id is None:
            self.dut_id = rx.pds.spdcid
            if rx.pds.flags & 0x04:
                self.start = rx.pds.start_psn
        self.got.setdefault(i, rx)
        return rx

    def psn(self, i: int) -> int:
        return self.got[i].pds.psn

    # ------------------------------------------------------------------ answers
    def ack(self, psn: int, *, cack: int | None = None, flags: int = 0,
            sack_bitmap: int = 0, sack_base: int | None = None, mpr: int = 1,
            rsp: bool = False) -> None:
        """ACK_CC naming ``psn`` (CACK default: ``psn`` itself)."""
        pkt = P.ack_cc(psn if cack is None else cack, psn, self.my_id, self.dut_id,
                       flags=flags, sack_bitmap=sack_bitmap, sack_base=sack_base, mpr=mpr)
        self.peer.send(pkt, ev=self.my_ev, dscp=self.peer.setup.dscp_control)

    def ack_all(self) -> None:
        """ACK every data packet seen (CACK = the highest)."""
        last = max(self.got.values(), key=lambda r: psn_diff(r.pds.psn, self.got[0].pds.psn))
        self.ack(last.pds.psn)

    def nack(self, code: int, psn: int, *, payload: int = 0, flags: int = 0) -> int:
        """NACK ``psn`` of the device's PDC; returns the send time (ps)."""
        return self.peer.send(P.nack(code, psn, self.my_id, self.dut_id, payload=payload,
                                     flags=flags), ev=self.my_ev,
                              dscp=self.peer.setup.dscp_control)

    def control(self, ctl_type: int, psn: int = 0, *, payload: int = 0, ar: bool = False,
                rod: bool = False) -> None:
        self.peer.send(P.control(ctl_type, psn, self.my_id, dpdcid=self.dut_id, ar=ar,
                                 rod=rod, payload=payload),
                       ev=self.my_ev, dscp=self.peer.setup.dscp_control)

    def expect_retx(self, psn: int, *, timeout_us: float, what: str = "") -> Received:
        """A retransmission of data PSN ``psn`` (RETX and AR set)."""
        return self.peer.expect(PdsRequest, timeout_us=timeout_us,
                                fields={"psn": psn, "spdcid": self.dut_id},
                                where=lambda r: bool(r.pds.flags & 0x10),
                                what=what or f"the retransmission (RETX) of PSN {psn}")

    def expect_no_retx(self, psn: int, *, within_us: float, what: str = "") -> None:
        self.peer.expect_nothing(PdsRequest, within_us=within_us,
                                 fields={"psn": psn, "spdcid": self.dut_id},
                                 what=what or f"retransmission of PSN {psn}")


def other_pdcids(real: int) -> tuple[int, int]:
    """Two non-zero PDC IDs other than ``real``: the one below it and the one above (both
    above or both below at the ends of the 16-bit range). A check that compares IDs one
    way only lets one of the two through, so the ID-mismatch cases send both."""
    below = real - 1 if real > 1 else 0xFFFE
    above = real + 1 if real < 0xFFFF else real - 2
    return below, above


def first_syn_start(rx: Received) -> int:
    """Start_PSN of a SYN request = PSN - psn_offset."""
    return psn_add(rx.pds.psn, -rx.pds.psn_offset)


def require(peer: Peer, cond: bool, message: str) -> None:
    if not cond:
        raise ConformanceFailure(message)


__all__ = ["ANY_ACK", "DutFlow", "MTU", "NextHeader", "OK", "Received", "check_bytes",
           "first_syn_start", "lacks_flags", "opened", "other_pdcids", "read_back",
           "request_ok", "require", "response", "rc_name", "rma_pattern", "unique",
           "write_ok"]
