"""Stimulus builders: UET packets crafted with the scapy layers of :mod:`uet.wire.layers`.

A stimulus is the UET part of a UDP datagram (what follows the UDP header): a PDS layer, an
optional SES layer (and extension), and payload. The builders here fill every field
explicitly from arguments, so a case reads like the packet it sends; anything can be
overridden afterwards (``pkt[UETPdsReq].flags = ...``) or replaced by raw bytes for
malformed input.

* PDS: :func:`request`, :func:`control`, :func:`ack`, :func:`ack_cc`, :func:`nack`,
  :func:`rudi`, :func:`uud`.
* SES: :class:`SesBuilder` (``write``, ``read``, ``send``, ``atomic``, ...) returns a
  :class:`Msg`, the SES layers of one message, segmented like a real initiator does
  (SOM/EOM, ``message_offset``, ``payload_length``, ``request_length``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from scapy.packet import Packet, Raw

from uet.wire.constants import (
    AtomicOpcode,
    CpFlag,
    PdsType,
    ReqFlag,
    ReturnCode,
    RspOpcode,
    SesFlag,
    SesOpcode,
)
from uet.wire.layers import (
    UETAtomicExt,
    UETCasExt,
    UETPdsAck,
    UETPdsAckCc,
    UETPdsCcReq,
    UETPdsCp,
    UETPdsNack,
    UETPdsReq,
    UETPdsRudi,
    UETPdsUud,
    UETRendezvousExt,
    UETSesMedium,
    UETSesRsp,
    UETSesRspData,
    UETSesRspDataSmall,
    UETSesSmall,
    UETSesStd,
)
from uet.wire.records import psn_add, psn_diff

from .setup import DutSetup

CAS_OPCODES = frozenset(range(AtomicOpcode.CSWAP, AtomicOpcode.CSWAP_GT + 1))
MTU = 4096


# ============================================================================ PDS


def request(psn: int, spdcid: int, *, dpdcid: int | None = None, start_psn: int | None = None,
            syn: bool = False, ar: bool = True, retx: bool = False, rod: bool = False,
            clear_psn: int | None = None, flags: int | None = None,
            next_hdr: int | None = None, use_rsv_pdc: int = 0,
            pdc_info_rsvd: int = 0, cc: bool = False, credit_target: int = 0) -> Packet:
    """A RUD (or ROD) request header. With ``syn`` the DPDCID field carries
    ``psn_offset = psn - start_psn``; otherwise ``dpdcid``. ``clear_psn`` defaults to
    ``start_psn - 1`` (nothing cleared). ``cc``: the congestion-controlled form (RUD_CC /
    ROD_CC, 16 bytes, with ``credit_target``)."""
    if flags is None:
        flags = ((ReqFlag.SYN if syn else 0) | (ReqFlag.AR if ar else 0)
                 | (ReqFlag.RETX if retx else 0))
    start = psn if start_psn is None else start_psn
    if clear_psn is None:
        clear_psn = psn_add(start, -1)
    off = psn_diff(clear_psn, psn)
    if not -32768 <= off <= 32767:
        off = -1
    kw = dict(type=PdsType.ROD_REQ if rod else PdsType.RUD_REQ, flags=int(flags),
              clear_psn_offset=off, psn=psn, spdcid=spdcid)
    if next_hdr is not None:
        kw["next_hdr"] = next_hdr
    if int(flags) & ReqFlag.SYN:
        kw.update(use_rsv_pdc=use_rsv_pdc, pdc_info_rsvd=pdc_info_rsvd,
                  psn_offset=psn_diff(psn, start) & 0xFFF)
    else:
        kw["dpdcid"] = dpdcid or 0
    if cc:
        kw["type"] = PdsType.ROD_CC_REQ if rod else PdsType.RUD_CC_REQ
        return UETPdsCcReq(**kw, ccc_id=0, credit_target=credit_target)
    return UETPdsReq(**kw)


def control(ctl_type: int, psn: int, spdcid: int, *, dpdcid: int | None = None,
            start_psn: int | None = None, syn: bool = False, ar: bool = False,
            retx: bool = False, rod: bool = False, payload: int = 0,
            probe_opaque: int = 0, flags: int | None = None) -> Packet:
    """A control packet (CP) of type ``ctl_type`` (ref. 2.7)."""
    if flags is None:
        flags = ((CpFlag.SYN if syn else 0) | (CpFlag.AR if ar else 0)
                 | (CpFlag.RETX if retx else 0) | (CpFlag.ISROD if rod else 0))
    kw = dict(ctl_type=ctl_type, flags=int(flags), probe_opaque=probe_opaque, psn=psn,
              spdcid=spdcid, ctl_payload=payload)
    if int(flags) & CpFlag.SYN:
        start = psn if start_psn is None else start_psn
        kw.update(use_rsv_pdc=0, pdc_info_rsvd=0, psn_offset=psn_diff(psn, start) & 0xFFF)
    else:
        kw["dpdcid"] = dpdcid or 0
    return UETPdsCp(**kw)


def ack(cack_psn: int, ack_psn: int, spdcid: int, dpdcid: int, *, flags: int = 0,
        next_hdr: int = 0) -> Packet:
    """A 12-byte ACK naming ``ack_psn`` with cumulative ``cack_psn`` (ref. 2.3)."""
    return UETPdsAck(next_hdr=next_hdr, flags=flags, ack_psn_offset=psn_diff(ack_psn, cack_psn),
                     cack_psn=cack_psn, spdcid=spdcid, dpdcid=dpdcid)


def ack_cc(cack_psn: int, ack_psn: int, spdcid: int, dpdcid: int, *, flags: int = 0,
           sack_base: int | None = None, sack_bitmap: int = 0, mpr: int = 1,
           next_hdr: int = 0) -> Packet:
    """A 32-byte ACK_CC with SACK bitmap (bit i = PSN base + i) and MPR (ref. 2.4)."""
    base = psn_add(cack_psn, 1) if sack_base is None else sack_base
    return UETPdsAckCc(next_hdr=next_hdr, flags=flags,
                       ack_psn_offset=psn_diff(ack_psn, cack_psn), cack_psn=cack_psn,
                       spdcid=spdcid, dpdcid=dpdcid, cc_type=0, cc_flags=0, mpr=mpr,
                       sack_psn_offset=psn_diff(base, cack_psn), sack_bitmap=sack_bitmap,
                       service_time=0, restore_cwnd=0, rcv_cwnd_pend=0, rcvd_bytes=0,
                       ooo_count=0)


def nack(code: int, psn: int, spdcid: int, dpdcid: int, *, payload: int = 0,
         flags: int = 0, vendor_code: int = 0) -> Packet:
    """A NACK with ``code`` for ``psn`` (ref. 2.6)."""
    return UETPdsNack(next_hdr=0, flags=flags, nack_code=code, vendor_code=vendor_code,
                      nack_psn=psn, spdcid=spdcid, dpdcid=dpdcid, nack_payload=payload)


def rudi(pkt_id: int, *, retx: bool = False, response: bool = False,
         flags: int | None = None) -> Packet:
    """A RUDI request (or response) header with ``pkt_id`` (ref. 2.8)."""
    return UETPdsRudi(type=PdsType.RUDI_RESP if response else PdsType.RUDI_REQ,
                      flags=(0x10 if retx else 0) if flags is None else flags, rsvd=0,
                      pkt_id=pkt_id)


def uud(flags: int = 0) -> Packet:
    """A UUD request header (ref. 2.9)."""
    return UETPdsUud(flags=flags, rsvd=0)


# ============================================================================ SES


def rsp(return_code: int, *, message_id: int = 0, job_id: int = 0, modified_length: int = 0,
        opcode: int = RspOpcode.RESPONSE, rsp_list: int = 0) -> Packet:
    """A 12-byte SES response header (RSP, ref. 4.5)."""
    return UETSesRsp(list=rsp_list, opcode=opcode, version=0, return_code=return_code,
                     message_id=message_id, ri_generation=0, job_id=job_id,
                     modified_length=modified_length)


def rsp_data(data: bytes, *, message_id: int, job_id: int, message_offset: int = 0,
             return_code: int = ReturnCode.OK) -> Packet:
    """RSP_DATA (20 bytes) + data: the answer to a READ with a standard header."""
    return UETSesRspData(list=0, opcode=RspOpcode.RESPONSE_W_DATA, version=0,
                         return_code=return_code, message_id=message_id, rsvd=0,
                         job_id=job_id, read_request_message_id=message_id, rsvd2=0,
                         payload_length=len(data), modified_length=len(data),
                         message_offset=message_offset) / Raw(load=data)


def rsp_data_small(data: bytes, *, job_id: int, request_psn: int,
                   return_code: int = ReturnCode.OK) -> Packet:
    """RSP_DATA_SMALL (12 bytes) + data: the answer to a READ with an optimized header."""
    return UETSesRspDataSmall(list=0, opcode=RspOpcode.RESPONSE_W_DATA, version=0,
                              return_code=return_code, rsvd=0, payload_length=len(data),
                              rsvd2=0, job_id=job_id, original_request_psn=request_psn) \
        / Raw(load=data)


@dataclass
class Msg:
    """The SES layers (with payload) of one message, one entry per packet."""

    packets: list[Packet]
    msg_id: int | None = None
    length: int = 0
    data: bytes = b""
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.packets)

    def __getitem__(self, i: int) -> Packet:
        return self.packets[i]


class SesBuilder:
    """SES request layers addressed to the setup's resources (ref. 4).

    ``region`` / ``resource`` are names from the :class:`~uet.conformance.setup.DutSetup`
    (``"rma"``, ``"readonly"``, ``"recv"`` ...); keyword arguments override any header field
    (``job_id``, ``memory_key``, ``resource_index``, ``ri_generation``, ``pid_on_fep``,
    ``flags`` ...), which is how cases address what does not exist.
    """

    def __init__(self, setup: DutSetup, initiator: int, first_msg_id: int = 1) -> None:
        self.setup = setup
        self.initiator = initiator & 0xFFFFFFFF
        self._ids = itertools.count(first_msg_id)

    def next_msg_id(self) -> int:
        return next(self._ids) & 0xFFFF

    # ------------------------------------------------------------------ raw headers
    def std(self, opcode: int, *, index: int = 0, key: int = 0, offset: int = 0,
            length: int = 0, msg_id: int | None = None, som: bool = True, eom: bool = True,
            message_offset: int = 0, payload_length: int = 0, header_data: int = 0,
            flags: int | None = None, extra_flags: int = 0, **fields) -> Packet:
        """A standard (44-byte) request header."""
        if flags is None:
            flags = ((SesFlag.SOM if som else 0) | (SesFlag.EOM if eom else 0)
                     | SesFlag.REL | extra_flags)
        kw = dict(rsvd0=0, opcode=opcode, version=0, flags=int(flags),
                  message_id=self.next_msg_id() if msg_id is None else msg_id,
                  ri_generation=0, job_id=self.setup.job_id, rsvd_pid=0,
                  pid_on_fep=self.setup.pid_on_fep, rsvd_ri=0, resource_index=index,
                  buffer_offset=offset, initiator=self.initiator, memory_key=key,
                  request_length=length)
        if int(flags) & SesFlag.SOM:
            kw["header_data"] = header_data
        else:
            kw.update(rsvd_len=0, payload_length=payload_length, message_offset=message_offset)
        kw.update(fields)
        return UETSesStd(**kw)

    def medium(self, opcode: int, *, index: int, key: int = 0, offset: int = 0,
               length: int = 0, extra_flags: int = 0, **fields) -> Packet:
        """A medium (32-byte) single-packet request header."""
        kw = dict(rsvd0=0, opcode=opcode, version=0,
                  flags=int(SesFlag.SOM | SesFlag.EOM | SesFlag.REL | extra_flags), rsvd_len=0,
                  request_length=length, ri_generation=0, job_id=self.setup.job_id,
                  rsvd_pid=0, pid_on_fep=self.setup.pid_on_fep, rsvd_ri=0,
                  resource_index=index, buffer_offset=offset, initiator=self.initiator,
                  memory_key=key)
        kw.update(fields)
        return UETSesMedium(**kw)

    def small(self, opcode: int, *, index: int, offset: int = 0, length: int = 0,
              **fields) -> Packet:
        """A small (20-byte) single-packet request header (a region under key 0)."""
        kw = dict(rsvd0=0, opcode=opcode, version=0,
                  flags=int(SesFlag.SOM | SesFlag.EOM | SesFlag.REL), rsvd_len=0,
                  request_length=length, ri_generation=0, job_id=self.setup.job_id,
                  rsvd_pid=0, pid_on_fep=self.setup.pid_on_fep, rsvd_ri=0,
                  resource_index=index, buffer_offset=offset)
        kw.update(fields)
        return UETSesSmall(**kw)

    # ------------------------------------------------------------------ messages
    def _segments(self, opcode: int, data: bytes, *, index: int, key: int, offset: int,
                  mtu: int, msg_id: int | None, length: int | None, extra_flags: int,
                  header_data: int, fields: dict) -> Msg:
        mid = self.next_msg_id() if msg_id is None else msg_id
        total = len(data) if length is None else length
        n = max(1, -(-len(data) // mtu))
        pkts = []
        for i in range(n):
            chunk = data[i * mtu:(i + 1) * mtu]
            hdr = self.std(opcode, index=index, key=key, offset=offset, length=total,
                           msg_id=mid, som=i == 0, eom=i == n - 1, message_offset=i * mtu,
                           payload_length=len(chunk), header_data=header_data,
                           extra_flags=extra_flags, **fields)
            pkts.append(hdr / Raw(load=chunk) if chunk else hdr)
        return Msg(pkts, mid, total, bytes(data))

    def write(self, region: str = "rma", offset: int = 0, data: bytes = b"", *,
              mtu: int = MTU, msg_id: int | None = None, length: int | None = None,
              extra_flags: int = 0, **fields) -> Msg:
        """RMA WRITE of ``data`` at ``offset`` in ``region`` (segmented at ``mtu``)."""
        r = self.setup.region(region)
        f = {"memory_key": r.key, "resource_index": r.index, **fields}
        index, key = f.pop("resource_index"), f.pop("memory_key")
        return self._segments(SesOpcode.WRITE, data, index=index, key=key, offset=offset,
                              mtu=mtu, msg_id=msg_id, length=length, extra_flags=extra_flags,
                              header_data=0, fields=f)

    def read(self, region: str = "rma", offset: int = 0, length: int = 64, *,
             mtu: int = MTU, msg_id: int | None = None, **fields) -> Msg:
        """RMA READ of ``length`` bytes: one request packet per ``mtu`` bytes asked for."""
        r = self.setup.region(region)
        f = {"memory_key": r.key, "resource_index": r.index, **fields}
        index, key = f.pop("resource_index"), f.pop("memory_key")
        mid = self.next_msg_id() if msg_id is None else msg_id
        n = max(1, -(-length // mtu))
        pkts = [self.std(SesOpcode.READ, index=index, key=key, offset=offset, length=length,
                         msg_id=mid, som=i == 0, eom=i == n - 1, message_offset=i * mtu,
                         payload_length=0, **f) for i in range(n)]
        return Msg(pkts, mid, length)

    def send(self, resource: str = "recv", data: bytes = b"", *, tag: int | None = None,
             opcode: int | None = None, mtu: int = MTU, msg_id: int | None = None,
             header_data: int = 0, **fields) -> Msg:
        """SEND (or TAGGED_SEND with ``tag`` as match bits) to a resource's receives."""
        r = self.setup.resource(resource)
        if opcode is None:
            opcode = SesOpcode.SEND if tag is None else SesOpcode.TAGGED_SEND
        f = {"resource_index": r.index, **fields}
        index = f.pop("resource_index")
        extra = SesFlag.HD if header_data else 0
        return self._segments(opcode, data, index=index, key=tag or 0, offset=0, mtu=mtu,
                              msg_id=msg_id, length=None, extra_flags=extra,
                              header_data=header_data, fields=f)

    def atomic(self, aop: int, datatype: int, operand: bytes = b"", *, region: str = "rma",
               offset: int = 0, fetching: bool = False, compare: int = 0, swap: int = 0,
               opcode: int | None = None, length: int | None = None, **fields) -> Msg:
        """ATOMIC / FETCHING_ATOMIC of one element: the 4-byte extension (or the 36-byte
        compare-and-swap one) then the operand as payload (ref. 4.4)."""
        r = self.setup.region(region)
        if opcode is None:
            opcode = SesOpcode.FETCHING_ATOMIC if fetching else SesOpcode.ATOMIC
        f = {"memory_key": r.key, "resource_index": r.index, **fields}
        index, key = f.pop("resource_index"), f.pop("memory_key")
        if aop in CAS_OPCODES:
            ext = UETCasExt(atomic_opcode=aop, atomic_datatype=datatype, semantic_control=0,
                            rsvd=0, compare_value=compare, swap_value=swap)
            n = 32 if length is None else length
        else:
            ext = UETAtomicExt(atomic_opcode=aop, atomic_datatype=datatype, semantic_control=0,
                               rsvd=0)
            n = len(operand) if length is None else length
        hdr = self.std(opcode, index=index, key=key, offset=offset, length=n, **f) / ext
        return Msg([hdr / Raw(load=operand) if operand else hdr], int(hdr.message_id), n)

    def no_op(self, resource_index: int | None = None, **fields) -> Msg:
        """NO_OP addressed to a resource index (the RMA region's by default)."""
        idx = self.setup.region("rma").index if resource_index is None else resource_index
        hdr = self.std(SesOpcode.NO_OP, index=idx, **fields)
        return Msg([hdr], int(hdr.message_id), 0)

    def msg_error(self, msg_id: int, resource: str = "recv", **fields) -> Msg:
        """MSG_ERROR abandoning message ``msg_id`` (same message ID, ref. 4.6)."""
        r = self.setup.resource(resource)
        hdr = self.std(SesOpcode.MSG_ERROR, index=r.index, msg_id=msg_id, **fields)
        return Msg([hdr], msg_id, 0)

    def rendezvous(self, resource: str, eager: bytes, total: int, *, read_key: int,
                   read_index: int, read_offset: int = 0, tag: int | None = None,
                   **fields) -> Msg:
        """RENDEZVOUS_SEND (TSEND with ``tag``): eager bytes plus the 24-byte extension that
        names where the target reads the rest (ref. 4.4)."""
        r = self.setup.resource(resource)
        op = SesOpcode.RENDEZVOUS_TSEND if tag is not None else SesOpcode.RENDEZVOUS_SEND
        hdr = self.std(op, index=r.index, key=tag or 0, length=total, **fields)
        ext = UETRendezvousExt(eager_length=len(eager), ri_generation=0,
                               pid_on_fep=self.setup.pid_on_fep, resource_index=read_index,
                               read_offset=read_offset, read_memory_key=read_key)
        stack = hdr / ext
        return Msg([stack / Raw(load=eager) if eager else stack], int(hdr.message_id), total)
