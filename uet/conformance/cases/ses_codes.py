"""SES return codes; job, key, index and permission protection (ref 4.6, 4.5).

A refused request must change nothing: every case that expects an error code reads the
memory it aimed at before and after.
"""

from __future__ import annotations

from uet.ses import atomics as amo
from uet.wire.constants import (
    AtomicDatatype,
    AtomicOpcode,
    ReturnCode,
    RspOpcode,
    SesFlag,
)

from ..registry import case
from .common import MTU, OK, check_bytes, opened, read_back, require, response, unique

Rc = ReturnCode
U64 = AtomicDatatype.UINT64


#: the first vendor-defined atomic datatype (ref 4.6: 0xE0-0xFE); no profile of ours has it
VENDOR_DATATYPE = 0xE0


def _refused(peer, msg, rc, *, region="rma", offset=None, length=32, what=""):
    """Send ``msg`` (a WRITE / atomic aimed at ``region`` + ``offset``) and expect RESPONSE
    ``rc`` with modified_length 0 and the memory unchanged."""
    pdc = opened(peer)
    offset = peer.scratch if offset is None else offset
    before = read_back(pdc, region, offset, length)
    psns = pdc.send_msg(msg)
    response(pdc, psns[0] if len(psns) > 1 else psns[-1], rc, ses__modified_length=0,
             what=what or f"RESPONSE {Rc(rc).name} with modified_length 0")
    for p in psns[1:]:
        pdc.ack_of(p, fields={"ses.return_code": lambda v: v in (None, Rc.NULL)},
                   what=f"the later packet {p} answered without another error response")
    check_bytes(peer, read_back(pdc, region, offset, length), before,
                f"memory after a request refused {Rc(rc).name}")
    return pdc


def _w(peer, n=32, **fields):
    return peer.ses.write("rma", peer.scratch, unique(peer, n), **fields)


@case("SES-RC-001", "4.6",
      "Job protection: a request naming a job the target does not host is answered "
      "BAD_JOB_ID and not executed")
def bad_job(peer):
    _refused(peer, _w(peer, job_id=(peer.setup.job_id + 1) & 0xFFFFFF or 1), Rc.BAD_JOB_ID)


@case("SES-RC-002", "4.6",
      "A request naming a PIDonFEP with no process in the job is answered BAD_PID and not "
      "executed")
def bad_pid(peer):
    _refused(peer, _w(peer, pid_on_fep=(peer.setup.pid_on_fep + 0x123) & 0xFFF), Rc.BAD_PID)


@case("SES-RC-003", "4.6",
      "Index protection: a request naming a resource index the process does not expose is "
      "answered BAD_INDEX and not executed")
def bad_index(peer):
    _refused(peer, _w(peer, resource_index=0xABC), Rc.BAD_INDEX)


@case("SES-RC-004", "4.6",
      "A request naming a resource index with a stale generation is answered "
      "BAD_GENERATION; with the current generation it succeeds")
def bad_generation(peer):
    r = peer.setup.resource("generation")
    pdc = opened(peer)
    response(pdc, pdc.send(peer.ses.no_op(resource_index=r.index,
                                          ri_generation=(r.generation + 1) & 0xFF)[0]),
             Rc.BAD_GENERATION)
    response(pdc, pdc.send(peer.ses.no_op(resource_index=r.index,
                                          ri_generation=r.generation)[0]), OK,
             what="RESPONSE OK with the current generation")


@case("SES-RC-005", "4.6",
      "A request to a disabled resource index is answered DISABLED")
def disabled(peer):
    r = peer.setup.resource("disabled")
    pdc = opened(peer)
    response(pdc, pdc.send(peer.ses.no_op(resource_index=r.index)[0]), Rc.DISABLED)


@case("SES-RC-006", "4.6",
      "Key protection: a WRITE with a memory key not registered on the index is answered "
      "BAD_MKEY and not executed")
def bad_key_write(peer):
    _refused(peer, _w(peer, memory_key=peer.setup.region("rma").key ^ 0xFF00FF), Rc.BAD_MKEY)


@case("SES-RC-007", "4.6",
      "Key protection on READ: a READ with a wrong memory key is answered BAD_MKEY and "
      "returns no data")
def bad_key_read(peer):
    pdc = opened(peer)
    msg = peer.ses.read("readonly", 0, 64, memory_key=peer.setup.region("readonly").key + 1)
    rx = response(pdc, pdc.send(msg[0]), Rc.BAD_MKEY)
    require(peer, not rx.data, f"{len(rx.data)} bytes of data with BAD_MKEY")


@case("SES-RC-008", "4.6",
      "A WRITE to a region without write permission is answered PERM_VIOLATION and not "
      "executed")
def write_read_only(peer):
    msg = peer.ses.write("readonly", 0, unique(peer, 32))
    _refused(peer, msg, Rc.PERM_VIOLATION, region="readonly", offset=0)


@case("SES-RC-009", "4.6",
      "A READ of a region without read permission is answered PERM_VIOLATION with no data")
def read_write_only(peer):
    pdc = opened(peer)
    rx = response(pdc, pdc.send(peer.ses.read("writeonly", 0, 64)[0]), Rc.PERM_VIOLATION)
    require(peer, not rx.data, f"{len(rx.data)} bytes of data with PERM_VIOLATION")


@case("SES-RC-010", "4.6",
      "An atomic on a region without atomic permission is answered PERM_VIOLATION and "
      "changes nothing")
def atomic_no_perm(peer):
    msg = peer.ses.atomic(AtomicOpcode.SUM, U64, (1).to_bytes(8, "big"), region="readonly",
                          offset=64)
    _refused(peer, msg, Rc.PERM_VIOLATION, region="readonly", offset=64, length=8)


@case("SES-RC-011", "4.6",
      "A WRITE reaching past the end of the region is answered BAD_ADDR and writes "
      "nothing, not even the bytes inside the region")
def bad_addr(peer):
    r = peer.setup.region("rma")
    off = r.size - 16
    msg = peer.ses.write("rma", off, unique(peer, 32))
    _refused(peer, msg, Rc.BAD_ADDR, offset=off, length=16)


@case("SES-RC-012", "4.6",
      "A multi-packet WRITE whose whole range does not fit the region is refused BAD_ADDR "
      "by its first packet and none of its packets writes anything")
def bad_addr_multi(peer):
    r = peer.setup.region("rma")
    off = r.size - MTU - 100
    msg = peer.ses.write("rma", off, unique(peer, 2 * MTU))
    _refused(peer, msg, Rc.BAD_ADDR, offset=off, length=MTU)


@case("SES-RC-013", "4.6",
      "A request whose payload runs past its request_length is answered TOO_LONG and not "
      "executed")
def too_long(peer):
    _refused(peer, _w(peer, 32, length=16), Rc.TOO_LONG)


@case("SES-RC-014", "4.1, 4.6",
      "A request with the IE (initiator error) flag is answered INITIATOR_ERR and not "
      "executed")
def initiator_error(peer):
    _refused(peer, _w(peer, extra_flags=int(SesFlag.IE)), Rc.INITIATOR_ERR)


@case("SES-RC-015", "4.6",
      "A request with a reserved opcode is answered UNSUPPORTED_OP")
def reserved_opcode(peer):
    pdc = opened(peer)
    hdr = peer.ses.std(0x2A, index=peer.setup.region("rma").index)
    response(pdc, pdc.send(hdr), Rc.UNSUPPORTED_OP)


@case("SES-RC-016", "4.4, 4.6",
      "An atomic on an address not aligned to its datatype is answered AMO_UNALIGNED and "
      "changes nothing")
def amo_unaligned(peer):
    msg = peer.ses.atomic(AtomicOpcode.SUM, U64, (1).to_bytes(8, "big"),
                          offset=peer.scratch + 4)
    _refused(peer, msg, Rc.AMO_UNALIGNED, offset=peer.scratch, length=16)


@case("SES-RC-017", "4.4, 4.6",
      "An atomic whose request_length is not its datatype's size is answered "
      "AMO_UNSUPPORTED_SIZE")
def amo_size(peer):
    msg = peer.ses.atomic(AtomicOpcode.SUM, U64, (1).to_bytes(4, "big"))
    _refused(peer, msg, Rc.AMO_UNSUPPORTED_SIZE, length=8)


@case("SES-RC-018", "4.4, 4.6",
      "An atomic with a datatype the end point does not support (one its profile lacks, "
      "else the vendor datatype 0xE0) is answered AMO_UNSUPPORTED_DT")
def amo_datatype(peer):
    dts = [d for d in AtomicDatatype if d not in peer.profile.atomic_datatypes]
    dt = dts[0] if dts else VENDOR_DATATYPE  # a profile with every defined datatype
    msg = peer.ses.atomic(AtomicOpcode.SUM, dt, bytes(16), length=16)
    _refused(peer, msg, Rc.AMO_UNSUPPORTED_DT, length=16)


@case("SES-RC-019", "4.4, 4.6",
      "An atomic opcode the end point does not support (e.g. INVAL) is answered "
      "AMO_UNSUPPORTED_OP")
def amo_opcode(peer):
    ops = [o for o in AtomicOpcode if o not in peer.profile.atomic_opcodes]
    if not ops:
        peer.fail(f"profile {peer.profile.name} supports every atomic opcode")
    msg = peer.ses.atomic(ops[-1], U64, (1).to_bytes(8, "big"))
    _refused(peer, msg, Rc.AMO_UNSUPPORTED_OP, length=8)


@case("SES-RC-020", "4.5",
      "An error response is a RESPONSE (opcode 1) in a 12-byte RSP header, never "
      "RESPONSE_W_DATA, even for a READ")
def error_is_plain_response(peer):
    pdc = opened(peer)
    msg = peer.ses.read("rma", 0, 16, job_id=(peer.setup.job_id ^ 0x5) or 1)
    rx = response(pdc, pdc.send(msg[0]), Rc.BAD_JOB_ID, next_hdr=4)
    require(peer, rx.ses.opcode == RspOpcode.RESPONSE, rx.describe())


def _fp_refused(peer, dt, aop, old: bytes, operand: bytes, rc):
    """Put ``old`` (big-endian) in the scratch slot, apply ``aop`` with ``operand``: the
    answer is ``rc`` and the memory still holds ``old`` (the failed atomic changed
    nothing)."""
    pdc = opened(peer)
    size = len(old)
    host = amo.swap_order(dt, old)  # memory holds values little-endian
    response(pdc, pdc.send_msg(peer.ses.write("rma", peer.scratch, host))[-1], OK,
             what="the WRITE of the atomic's old value")
    msg = peer.ses.atomic(aop, dt, operand, offset=peer.scratch)
    response(pdc, pdc.send_msg(msg)[-1], rc, ses__modified_length=0,
             what=f"RESPONSE {Rc(rc).name}")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, size), host,
                f"memory after an atomic refused {Rc(rc).name}")


@case("SES-RC-021", "4.4, 4.6",
      "A floating-point atomic whose result overflows (FLOAT SUM of 3e38 and 3e38) is "
      "answered AMO_FP_OVERFLOW and changes nothing (the profile fails on overflow)",
      caps=("float_atomics",))
def amo_fp_overflow(peer):
    f = AtomicDatatype.FLOAT
    _fp_refused(peer, f, AtomicOpcode.SUM, amo.encode(f, 3e38), amo.encode(f, 3e38),
                Rc.AMO_FP_OVERFLOW)


@case("SES-RC-022", "4.4, 4.6",
      "A floating-point atomic whose result is not a number (DOUBLE SUM of +inf and -inf) "
      "is answered AMO_FP_NAN and changes nothing", caps=("float_atomics",))
def amo_fp_nan(peer):
    d = AtomicDatatype.DOUBLE
    _fp_refused(peer, d, AtomicOpcode.SUM, amo.encode(d, float("inf")),
                amo.encode(d, float("-inf")), Rc.AMO_FP_NAN)


@case("SES-RC-023", "4.4, 4.6",
      "With inexact results failing (atomics.fp_exceptions = [INEXACT]), FLOAT SUM of 1 and "
      "2^-30 is answered AMO_FP_INEXACT; an exact sum (1.5 + 2.25) is not",
      profile_changes={"atomics.fp_exceptions": ["INEXACT"]}, caps=("float_atomics",))
def amo_fp_inexact(peer):
    f = AtomicDatatype.FLOAT
    _fp_refused(peer, f, AtomicOpcode.SUM, amo.encode(f, 1.0), amo.encode(f, 2.0 ** -30),
                Rc.AMO_FP_INEXACT)
    pdc = opened(peer)
    host = amo.swap_order(f, amo.encode(f, 1.5))
    response(pdc, pdc.send_msg(peer.ses.write("rma", peer.scratch, host))[-1], OK)
    response(pdc, pdc.send_msg(peer.ses.atomic(AtomicOpcode.SUM, f, amo.encode(f, 2.25),
                                               offset=peer.scratch))[-1], OK,
             what="RESPONSE OK of an exact FLOAT SUM")
    check_bytes(peer, read_back(pdc, "rma", peer.scratch, 4),
                amo.swap_order(f, amo.encode(f, 3.75)), "1.5 + 2.25 in memory")


@case("SES-RC-024", "4.4, 4.6",
      "With underflow failing (atomics.fp_exceptions = [UNDERFLOW]), DOUBLE PROD of 1e-300 "
      "and 1e-300 (below the smallest normal, inexact) is answered AMO_FP_UNDERFLOW",
      profile_changes={"atomics.fp_exceptions": ["UNDERFLOW"]}, caps=("float_atomics",))
def amo_fp_underflow(peer):
    d = AtomicDatatype.DOUBLE
    if AtomicOpcode.PROD not in peer.profile.atomic_opcodes:
        peer.fail(f"profile {peer.profile.name} has no atomic PROD")
    _fp_refused(peer, d, AtomicOpcode.PROD, amo.encode(d, 1e-300), amo.encode(d, 1e-300),
                Rc.AMO_FP_UNDERFLOW)
