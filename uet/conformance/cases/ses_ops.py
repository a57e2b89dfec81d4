"""SES operations and their responses (ref 4)."""

from __future__ import annotations

from scapy.packet import Raw

from uet.ses import atomics as amo
from uet.wire.constants import (
    AtomicDatatype,
    AtomicOpcode,
    NextHeader,
    ReturnCode,
    RspList,
    RspOpcode,
    SesFlag,
    SesOpcode,
)
from uet.wire.layers import UETAtomicExt
from uet.wire.records import PdsRequest, SesMedium, SesStandard, psn_diff

from .. import packets as P
from ..peer import not_
from ..registry import case
from ..setup import pattern
from .common import (
    MTU,
    OK,
    DutFlow,
    check_bytes,
    opened,
    read_back,
    require,
    response,
    unique,
)

ACK_US = 1000
U64 = AtomicDatatype.UINT64


def _data_ack(pdc, psn, what=""):
    return pdc.ack_of(psn, fields={"ses.opcode": RspOpcode.RESPONSE_W_DATA,
                                   "ses.return_code": OK}, what=what)


def _fetch(pdc, aop, operand=b"", **kw):
    peer = pdc.peer
    msg = peer.ses.atomic(aop, U64, operand, offset=peer.scratch, fetching=True, **kw)
    rx = _data_ack(pdc, pdc.send(msg[0]), f"the FETCHING_ATOMIC {AtomicOpcode(aop).name} "
                   "response with the old value")
    if len(rx.data) != 8:
        peer.fail(f"a fetched UINT64 carries {len(rx.data)} bytes: {rx.describe()}")
    return int.from_bytes(rx.data, "big")


@case("SES-OP-001", "4.2, 4.5",
      "WRITE places the payload at buffer_offset of the region and is answered RESPONSE "
      "OK with modified_length = request_length")
def write(peer):
    pdc = opened(peer)
    data = unique(peer, 300)
    msg = peer.ses.write("rma", peer.scratch + 5, data)
    response(pdc, pdc.send(msg[0]), OK, ses__modified_length=300)
    check_bytes(peer, read_back(pdc, "rma", peer.scratch + 5, 300), data, "the WRITE")


@case("SES-OP-002", "4.5, 4.7",
      "A READ no longer than the ACK data limit is answered in its ACK: next_hdr RSP_DATA, "
      "RESPONSE_W_DATA OK, payload_length and the bytes, read_request_message_id = the "
      "READ's message ID")
def read_in_ack(peer):
    pdc = opened(peer)
    msg = peer.ses.read("readonly", 777, 1000)
    rx = pdc.ack_of(pdc.send(msg[0]),
                    fields={"next_hdr": NextHeader.RSP_DATA,
                            "ses.opcode": RspOpcode.RESPONSE_W_DATA, "ses.return_code": OK,
                            "ses.payload_length": 1000,
                            "ses.read_request_message_id": msg.msg_id},
                    what="the READ response (RSP_DATA) in the ACK")
    check_bytes(peer, rx.data, pattern(1000, 777), "READ of the read-only region")


@case("SES-OP-003", "4.3, 4.5",
      "A READ with the medium (32-byte) header is answered by RSP_DATA_SMALL whose "
      "original_request_psn is the request's PSN")
def read_medium(peer):
    pdc = opened(peer)
    r = peer.setup.region("readonly")
    hdr = peer.ses.medium(SesOpcode.READ, index=r.index, key=r.key, offset=64, length=100)
    psn = pdc.send(hdr)
    rx = pdc.ack_of(psn, fields={"next_hdr": NextHeader.RSP_DATA_SMALL,
                                 "ses.original_request_psn": psn,
                                 "ses.payload_length": 100},
                    what="RSP_DATA_SMALL naming the request's PSN")
    check_bytes(peer, rx.data, pattern(100, 64), "medium-header READ")


@case("SES-OP-004", "4.7",
      "A READ larger than the ACK data limit returns its data as requests on a PDC in the "
      "return direction (SES header RSP_DATA: the READ's message ID, message_offset, "
      "payload_length); the READ's last packet is answered RESPONSE OK for the whole length")
def read_return_direction(peer):
    n = 3
    flow = DutFlow(peer, n, region="readonly", offset=256)
    rxs = flow.begin()
    mid = flow.read_msg.msg_id
    for i, rx in enumerate(rxs):
        s = rx.ses
        require(peer, s.read_request_message_id == mid and s.payload_length == MTU,
                f"return packet {i}: {rx.describe()} (READ message ID {mid})")
        check_bytes(peer, rx.data, pattern(MTU, 256 + i * MTU), f"return packet {i}")
    response(flow.read_pdc, flow.read_psns[-1], OK, ses__modified_length=n * MTU,
             what="RESPONSE OK of the READ's last packet")
    flow.ack_all()


@case("SES-OP-005", "4.2, 4.7",
      "A multi-packet WRITE: packets that do not complete the message get no RESPONSE; the "
      "completing packet gets RESPONSE OK with modified_length = the whole message")
def multi_packet_write(peer):
    pdc = opened(peer)
    data = unique(peer, 3 * MTU - 100)
    msg = peer.ses.write("rma", peer.scratch, data)
    psns = pdc.send_msg(msg, ar_all=True)
    for p in psns[:-1]:
        pdc.ack_of(p, fields={"ses.opcode": not_(RspOpcode.RESPONSE)},
                   what=f"the ACK of non-final PSN {p} without RESPONSE")
    response(pdc, psns[-1], OK, ses__modified_length=len(data))
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, MTU), data[:MTU],
                "the first packet of the message")


@case("SES-OP-006", "4.5",
      "A SEND matching a posted receive is answered RESPONSE OK, list EXPECTED, "
      "modified_length = the bytes placed")
def send_expected(peer):
    pdc = opened(peer)
    msg = peer.ses.send("recv", unique(peer, 500))
    response(pdc, pdc.send(msg[0]), OK, ses__list=RspList.EXPECTED,
             ses__modified_length=500)


@case("SES-OP-007", "4.5",
      "A SEND for which no receive is posted is buffered as unexpected: RESPONSE OK, list "
      "OVERFLOW")
def send_unexpected(peer):
    pdc = opened(peer)
    msg = peer.ses.send("unexpected", unique(peer, 64))
    response(pdc, pdc.send(msg[0]), OK, ses__list=RspList.OVERFLOW)


@case("SES-OP-008", "4.2, 4.5",
      "A TAGGED_SEND whose match bits equal a posted tagged receive's tag is answered "
      "RESPONSE OK, list EXPECTED", caps=("tagging",))
def tagged_expected(peer):
    pdc = opened(peer)
    tag = peer.setup.resource("tagged").tag
    msg = peer.ses.send("tagged", unique(peer, 100), tag=tag)
    response(pdc, pdc.send(msg[0]), OK, ses__list=RspList.EXPECTED)


@case("SES-OP-009", "4.2, 4.5",
      "A TAGGED_SEND whose match bits match no posted receive goes to the unexpected list: "
      "RESPONSE OK, list OVERFLOW", caps=("tagging",))
def tagged_unexpected(peer):
    pdc = opened(peer)
    tag = peer.setup.resource("tagged").tag ^ 0xFFFF_0000
    msg = peer.ses.send("tagged", unique(peer, 100), tag=tag)
    response(pdc, pdc.send(msg[0]), OK, ses__list=RspList.OVERFLOW)


@case("SES-OP-010", "4.4",
      "FETCHING_ATOMIC SUM on a UINT64 returns the previous value (big-endian, RSP_DATA) "
      "and adds the operand: two fetches differ by the first operand")
def fetching_sum(peer):
    pdc = opened(peer)
    v0 = _fetch(pdc, AtomicOpcode.SUM, (5).to_bytes(8, "big"))
    v1 = _fetch(pdc, AtomicOpcode.SUM, (7).to_bytes(8, "big"))
    require(peer, v1 == (v0 + 5) % (1 << 64), f"SUM 5 then fetch: {v0} -> {v1}")


@case("SES-OP-011", "4.4",
      "CSWAP swaps only when the compare value equals memory: a CSWAP with a wrong compare "
      "value leaves memory, one with the right value stores the swap value (36-byte "
      "extension, request_length 32)")
def cswap(peer):
    pdc = opened(peer)
    zero = bytes(8)
    v0 = _fetch(pdc, AtomicOpcode.READ, zero)
    new = peer.rng.getrandbits(64)
    miss = peer.ses.atomic(AtomicOpcode.CSWAP, U64, offset=peer.scratch,
                           compare=(v0 + 1) % (1 << 64), swap=new)
    response(pdc, pdc.send(miss[0]), OK)
    require(peer, _fetch(pdc, AtomicOpcode.READ, zero) == v0,
            "memory changed by a CSWAP whose compare value did not match")
    hit = peer.ses.atomic(AtomicOpcode.CSWAP, U64, offset=peer.scratch, compare=v0, swap=new)
    response(pdc, pdc.send(hit[0]), OK)
    got = _fetch(pdc, AtomicOpcode.READ, zero)
    require(peer, got == new, f"after a matching CSWAP memory holds {got:#x}, not {new:#x}")


@case("SES-OP-012", "4.6",
      "NO_OP addressed to an existing resource is answered RESPONSE OK")
def no_op(peer):
    pdc = peer.pdc()
    response(pdc, pdc.send(peer.ses.no_op()[0]), OK, ses__modified_length=0)


@case("SES-OP-013", "4.6",
      "MSG_ERROR (same message ID) abandons a message in progress: it is answered OK and "
      "the message's last packet then completes nothing (no RESPONSE OK)")
def msg_error(peer):
    pdc = opened(peer)
    msg = peer.ses.send("recv", unique(peer, 2 * MTU))
    pdc.ack_of(pdc.send(msg[0], ar=True), fields={"ses.opcode": not_(RspOpcode.RESPONSE)})
    response(pdc, pdc.send(peer.ses.msg_error(msg.msg_id)[0]), OK,
             what="RESPONSE OK of MSG_ERROR")
    pdc.ack_of(pdc.send(msg[1]), fields={"ses.opcode": not_(RspOpcode.RESPONSE)},
               what="the ACK of the abandoned message's last packet, without RESPONSE")


@case("SES-OP-014", "4.3",
      "The small (20-byte) header addresses a region registered under key 0: a WRITE and "
      "a READ with it work (the READ answered RSP_DATA_SMALL)", caps=("opt_non_matching",))
def small_header(peer):
    pdc = opened(peer)
    r = peer.setup.region("small")
    off = peer.scratch % (r.size - 64)
    data = unique(peer, 48)
    w = peer.ses.small(SesOpcode.WRITE, index=r.index, offset=off, length=48) / Raw(load=data)
    response(pdc, pdc.send(w), OK)
    rd = peer.ses.small(SesOpcode.READ, index=r.index, offset=off, length=48)
    psn = pdc.send(rd)
    rx = pdc.ack_of(psn, fields={"next_hdr": NextHeader.RSP_DATA_SMALL})
    check_bytes(peer, rx.data, data, "small-header WRITE read back with a small READ")


@case("SES-OP-015", "4.1, 4.2",
      "Absolute addressing (REL = 0): buffer_offset is a virtual address against the "
      "region's base address")
def absolute_address(peer):
    r = peer.setup.region("rma")
    if not r.base_va:
        peer.fail("the setup's rma region has no base virtual address")
    pdc = opened(peer)
    data = unique(peer, 40)
    msg = peer.ses.write("rma", r.base_va + peer.scratch, data,
                         flags=int(SesFlag.SOM | SesFlag.EOM))
    response(pdc, pdc.send(msg[0]), OK)
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 40), data,
                "a WRITE with an absolute address, read back relative")


@case("SES-OP-016", "4.4, 4.7",
      "RENDEZVOUS_SEND: the target answers the eager part RESPONSE OK and reads the rest "
      "from the initiator with a READ naming the extension's index, key and offset, for "
      "request_length - eager_length bytes, sent as a one-packet message (SOM and EOM)",
      caps=("rendezvous",))
def rendezvous(peer):
    rest_len = 1500
    eager = unique(peer, 100)
    rest = unique(peer, rest_len)
    key, index, offset = 0x5EED_0001, 0x00A, 0x40
    pdc = opened(peer)
    msg = peer.ses.rendezvous("recv", eager, len(eager) + rest_len, read_key=key,
                              read_index=index, read_offset=offset)
    response(pdc, pdc.send(msg[0]), OK, what="RESPONSE OK of the rendezvous eager part")
    rx = peer.expect(PdsRequest, timeout_us=ACK_US * 5,
                     where=lambda r: isinstance(r.ses, (SesStandard, SesMedium))
                     and r.ses.opcode == SesOpcode.READ,
                     what="the target's READ of the rest")
    s = rx.ses
    got = (s.job_id, s.resource_index, s.memory_key, s.buffer_offset, s.request_length)
    want = (peer.setup.job_id, index, key, offset, rest_len)
    require(peer, got == want, f"the READ names (job, index, key, offset, length) {got}, "
            f"expected {want}: {rx.describe()}")
    whole = int(SesFlag.SOM | SesFlag.EOM)
    require(peer, s.flags & whole == whole, f"the READ is a one-packet message: SOM and EOM "
            f"set, got flags {s.flags:#x}: {rx.describe()}")
    my_id = peer.new_pdcid()
    if isinstance(s, SesStandard):
        body = P.rsp_data(rest, message_id=s.message_id, job_id=s.job_id)
    else:
        body = P.rsp_data_small(rest, job_id=s.job_id, request_psn=rx.pds.psn)
    peer.send(P.ack_cc(rx.pds.psn, rx.pds.psn, my_id, rx.pds.spdcid) / body,
              ev=rx.ev, dscp=peer.setup.dscp_control)
    peer.expect_nothing(PdsRequest, within_us=peer.setup.rto_us * 1.5,
                        fields={"psn": rx.pds.psn, "spdcid": rx.pds.spdcid},
                        what="the READ retransmitted although its data was delivered")


@case("SES-OP-017", "4.2, 4.6",
      "DEFERRABLE_SEND with no receive posted is deferred: answered NO_MATCH (the target "
      "will ask for a restart)", caps=("deferrable",))
def deferrable_no_match(peer):
    pdc = opened(peer)
    r = peer.setup.resource("unexpected")
    data = unique(peer, 64)
    hdr = peer.ses.std(SesOpcode.DEFERRABLE_SEND, index=r.index,
                       offset=peer.rng.getrandbits(31) << 32, length=len(data))
    response(pdc, pdc.send(hdr / Raw(load=data)), ReturnCode.NO_MATCH)


@case("SES-OP-018", "4.4, 4.6",
      "TSEND_ATOMIC with no matching tagged receive is answered NO_MATCH (atomics are "
      "never buffered)", caps=("tsend_atomic",))
def tsend_atomic_no_match(peer):
    pdc = opened(peer)
    r = peer.setup.resource("unexpected")
    hdr = peer.ses.std(SesOpcode.TSEND_ATOMIC, index=r.index, key=0xDEAD_BEEF, length=8)
    ext = UETAtomicExt(atomic_opcode=AtomicOpcode.SUM, atomic_datatype=U64,
                       semantic_control=0, rsvd=0)
    response(pdc, pdc.send(hdr / ext / Raw(load=(1).to_bytes(8, "big"))),
             ReturnCode.NO_MATCH)


@case("SES-OP-019", "4.2, 4.5",
      "A zero-length WRITE is answered RESPONSE OK with modified_length 0")
def zero_length_write(peer):
    pdc = opened(peer)
    response(pdc, pdc.send(peer.ses.write("rma", peer.scratch, b"")[0]), OK,
             ses__modified_length=0)


@case("SES-OP-020", "4.7, 3.10",
      "The packets of a multi-packet WRITE may arrive in any order over RUD: sent last "
      "packet first, the message is placed byte for byte and completed once")
def write_reversed(peer):
    pdc = opened(peer)
    data = unique(peer, 3 * MTU)
    msg = peer.ses.write("rma", peer.scratch, data)
    psns = [pdc.psn(1 + i) for i in range(3)]
    for i in (2, 1):
        pdc.send(msg[i], psn=psns[i], ar=True)
        pdc.ack_of(psns[i], fields={"ses.opcode": not_(RspOpcode.RESPONSE)},
                   what=f"the ACK of packet {i}, which does not complete the message")
    response(pdc, pdc.send(msg[0], psn=psns[0]), OK, ses__modified_length=3 * MTU,
             what="RESPONSE OK of the packet that completes the message")
    for i in range(3):
        check_bytes(peer, read_back(pdc, "rma", peer.scratch + i * MTU, MTU),
                    data[i * MTU:(i + 1) * MTU], f"packet {i} of the reversed WRITE")


@case("SES-OP-021", "4.7, 4.5",
      "A multi-packet SEND arriving out of order lands in one posted receive: the "
      "completing packet's RESPONSE says list EXPECTED and the whole length")
def send_reversed(peer):
    pdc = opened(peer)
    msg = peer.ses.send("recv", unique(peer, 2 * MTU + 10))
    p0, p1, p2 = pdc.psn(1), pdc.psn(2), pdc.psn(3)
    pdc.send(msg[2], psn=p2, ar=True)
    pdc.ack_of(p2, fields={"ses.opcode": not_(RspOpcode.RESPONSE)})
    pdc.send(msg[0], psn=p0, ar=True)
    pdc.ack_of(p0, fields={"ses.opcode": not_(RspOpcode.RESPONSE)})
    response(pdc, pdc.send(msg[1], psn=p1), OK, ses__list=RspList.EXPECTED,
             ses__modified_length=2 * MTU + 10)


@case("SES-OP-022", "4.3, 4.4, 4.5",
      "A FETCHING_ATOMIC with the medium header returns the old value in RSP_DATA_SMALL "
      "(original_request_psn = the request's PSN)")
def fetch_medium(peer):
    pdc = opened(peer)
    r = peer.setup.region("rma")
    ext = UETAtomicExt(atomic_opcode=AtomicOpcode.SUM, atomic_datatype=U64,
                       semantic_control=0, rsvd=0)
    hdr = peer.ses.medium(SesOpcode.FETCHING_ATOMIC, index=r.index, key=r.key,
                          offset=peer.scratch, length=8)
    psn = pdc.send(hdr / ext / Raw(load=(3).to_bytes(8, "big")))
    v0 = int.from_bytes(pdc.ack_of(psn, fields={"next_hdr": NextHeader.RSP_DATA_SMALL,
                                                "ses.original_request_psn": psn}).data, "big")
    psn = pdc.send(hdr / ext / Raw(load=(0).to_bytes(8, "big")))
    v1 = int.from_bytes(pdc.ack_of(psn, fields={"next_hdr": NextHeader.RSP_DATA_SMALL}).data,
                        "big")
    require(peer, v1 == (v0 + 3) % (1 << 64), f"medium FETCHING SUM 3: {v0} -> {v1}")


@case("SES-OP-023", "3.5, 4.5",
      "A SEND retransmitted after its message completed (its ACK was lost) is not placed "
      "again: the duplicate is acknowledged and the next SEND still finds a receive "
      "(list EXPECTED)")
def send_duplicate(peer):
    pdc = peer.pdc()
    pdc.auto_clear = False
    msg = peer.ses.send("recv", unique(peer, 100))
    psn = pdc.send(msg[0])
    first = response(pdc, psn, OK, ses__list=RspList.EXPECTED)
    pdc.send(msg[0], psn=psn, retx=True, syn=False)
    response(pdc, psn, OK, ses__message_id=first.ses.message_id,
             what="the stored RESPONSE for the duplicate SEND")
    nxt = peer.ses.send("recv", unique(peer, 100))
    response(pdc, pdc.send(nxt[0]), OK, ses__list=RspList.EXPECTED)


def _two_packet_write(peer):
    """An opened PDC, the 64 bytes of the scratch slot as they are, and a two-packet
    WRITE of 64 new bytes there (not sent)."""
    pdc = opened(peer)
    before = read_back(pdc, "rma", peer.scratch, 64)
    return pdc, before, peer.ses.write("rma", peer.scratch, unique(peer, 64), mtu=32)


@case("SES-OP-024", "4.6, 3.10",
      "A later packet of a message abandoned with MSG_ERROR is not executed: the second "
      "packet of a two-packet WRITE sent after the MSG_ERROR writes nothing (memory read "
      "back) and completes nothing")
def msg_error_later_packet(peer):
    pdc, before, msg = _two_packet_write(peer)
    pdc.ack_of(pdc.send(msg[0], ar=True), fields={"ses.opcode": not_(RspOpcode.RESPONSE)},
               what="the ACK of the first packet, without RESPONSE")
    response(pdc, pdc.send(peer.ses.msg_error(msg.msg_id)[0]), OK,
             what="RESPONSE OK of MSG_ERROR")
    pdc.ack_of(pdc.send(msg[1]), fields={"ses.opcode": not_(RspOpcode.RESPONSE)},
               what="the ACK of the abandoned message's last packet, without RESPONSE")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch + 32, 32), before[32:],
                "the bytes of the abandoned WRITE's packet sent after MSG_ERROR")


@case("SES-OP-025", "4.6, 3.10",
      "MSG_ERROR may overtake the message it abandons (RUD does not order packets): a "
      "packet of that message arriving after it is not executed (memory read back) and "
      "gets no RESPONSE OK")
def msg_error_overtaken(peer):
    pdc, before, msg = _two_packet_write(peer)
    pdc.ack_of(pdc.send(peer.ses.msg_error(msg.msg_id)[0]),
               what="the ACK of a MSG_ERROR for a message not seen yet")
    for i, pkt in enumerate(msg.packets):
        pdc.ack_of(pdc.send(pkt, ar=True), fields={"ses.opcode": not_(RspOpcode.RESPONSE)},
                   what=f"the ACK of packet {i} of the abandoned message, without RESPONSE")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 64), before,
                "memory after the packets of a message abandoned before they arrived")


def _atomic_retransmitted(peer, medium: bool):
    """A FETCHING_ATOMIC SUM whose ACK the initiator lost (nothing cleared), sent again
    with RETX: the stored response (the original old value) answers it, and memory shows
    the operand added once."""
    pdc = opened(peer)
    pdc.auto_clear = False
    x = 0x0101_0000_0000_0000 + peer.rng.getrandbits(32)
    operand = x.to_bytes(8, "big")
    if medium:
        r = peer.setup.region("rma")
        ext = UETAtomicExt(atomic_opcode=AtomicOpcode.SUM, atomic_datatype=U64,
                           semantic_control=0, rsvd=0)
        pkt = peer.ses.medium(SesOpcode.FETCHING_ATOMIC, index=r.index, key=r.key,
                              offset=peer.scratch, length=8) / ext / Raw(load=operand)
        fields = {"next_hdr": NextHeader.RSP_DATA_SMALL}
    else:
        pkt = peer.ses.atomic(AtomicOpcode.SUM, U64, operand, offset=peer.scratch,
                              fetching=True)[0]
        fields = {"ses.opcode": RspOpcode.RESPONSE_W_DATA, "ses.return_code": OK}
    psn = pdc.send(pkt)
    first = pdc.ack_of(psn, fields=fields, what="the fetched value of the atomic")
    pdc.send(pkt, psn=psn, retx=True)
    again = pdc.ack_of(psn, fields=fields,
                       what="the original fetched value answering the retransmission")
    require(peer, again.data == first.data,
            f"the retransmitted atomic returned {again.data.hex()}, the original "
            f"{first.data.hex()}: it was executed again")
    pdc.auto_clear = True
    v0 = int.from_bytes(first.data, "big")
    now = _fetch(pdc, AtomicOpcode.SUM, bytes(8))
    require(peer, now == (v0 + x) % (1 << 64),
            f"memory after a retransmitted SUM of {x:#x} on {v0:#x}: {now:#x} "
            f"(applied {'twice' if now == (v0 + 2 * x) % (1 << 64) else 'not once'})")


@case("SES-OP-026", "4.4, 3.5, 3.7",
      "A retransmitted FETCHING_ATOMIC (its ACK was lost) is applied exactly once: the "
      "retransmission is answered with the original fetched value and memory shows the "
      "operand added once")
def atomic_retransmitted(peer):
    _atomic_retransmitted(peer, medium=False)


@case("SES-OP-027", "4.3, 4.4, 3.5, 3.7",
      "The same with the medium header (no message ID, so only the PDS can recognise the "
      "duplicate): applied once, the original value returned in RSP_DATA_SMALL")
def atomic_retransmitted_medium(peer):
    _atomic_retransmitted(peer, medium=True)


@case("SES-OP-028", "4.4, 4.6",
      "LONG_DOUBLE atomics are IEEE binary128: a FETCHING_ATOMIC SUM of 1 on 2^100 returns "
      "2^100 (16 bytes, big-endian) and leaves 2^100 + 1 in memory, exactly (113 bits of "
      "precision; a binary64 or x87 long double would lose the 1)", caps=("long_double",))
def long_double_sum(peer):
    ld = AtomicDatatype.LONG_DOUBLE
    pdc = opened(peer)
    old = amo.encode(ld, 2 ** 100)
    response(pdc, pdc.send_msg(peer.ses.write("rma", peer.scratch,
                                              amo.swap_order(ld, old)))[-1], OK)
    psn = pdc.send_msg(peer.ses.atomic(AtomicOpcode.SUM, ld, amo.encode(ld, 1),
                                       offset=peer.scratch, fetching=True))[-1]
    rx = _data_ack(pdc, psn, what="the fetched LONG_DOUBLE")
    check_bytes(peer, rx.data, old, "the fetched value (2^100 in binary128)")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 16),
                amo.swap_order(ld, amo.encode(ld, 2 ** 100 + 1)),
                "memory after the SUM (2^100 + 1 in binary128, little-endian)")


@case("SES-OP-029", "4.1, 4.5, 3.7",
      "A WRITE with DC (delivery complete) set is acknowledged first with NO_RESPONSE (the "
      "early ACK: the data is placed, the completion follows) and then answered RESPONSE "
      "OK in a second ACK naming the same PSN, once the data is visible in host memory")
def dc_write(peer):
    pdc = opened(peer)
    data = unique(peer, 64)
    msg = peer.ses.write("rma", peer.scratch, data, extra_flags=int(SesFlag.DC))
    psn = pdc.send_msg(msg)[-1]
    early = pdc.ack_of(psn, fields={"ses.opcode": RspOpcode.NO_RESPONSE},
                       what="the early ACK of the DC WRITE (NO_RESPONSE)")
    require(peer, psn_diff(early.pds.cack_psn, psn) < 0,
            f"the early ACK covers PSN {psn} with its CACK {early.pds.cack_psn}: the "
            "packet still waits for its response")
    response(pdc, psn, OK, ses__modified_length=len(data),
             what="RESPONSE OK of the DC WRITE after the early ACK")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, len(data)), data,
                "the DC WRITE's data")
