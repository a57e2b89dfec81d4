"""Mutation testing of the conformance catalogue: how many protocol bugs does it catch?

Each mutant in :data:`MUTANTS` is one small, named bug a real implementer could make (a
check left out, a boundary off by one, a flag not echoed, a packet at the wrong DSCP),
written as an exact text replacement in one file of the ``uet`` package. The harness copies
the package to a temporary directory, applies the replacement there (the production code is
never touched and has no hooks), and runs the whole catalogue against the mutated built-in
end point:

* in process (``uet.conformance.runner.run_cases`` with the in-process target, in a
  subprocess whose ``PYTHONPATH`` puts the copy first; it checks that it really imported
  the copy);
* for a subset (``udp=True``) also over real loopback UDP: two ``uet serve`` (HPC and AI
  Base) started *from the mutated copy*, tested by ``uet conformance`` of the unmodified
  package.

A mutant is *killed* when at least one case fails (or errors, or the run hangs past its
time limit). A replacement whose text is not found exactly once fails the whole run at
once (``PatchError``): when the code moves, the mutant must be rewritten, so the set stays
honest. The unmutated copy is run first and must pass every case.

``targets`` name the cases written for that bug (issue 22's new cases): the run fails if
one of them does not fail on its mutant, so "every new case fails on the bug it targets" is
checked, not claimed.

Usage::

    python benchmarks/conformance_mutants.py              # all, in process + UDP subset
    python benchmarks/conformance_mutants.py --no-udp -j 2
    python benchmarks/conformance_mutants.py --only pds.dup-above-gap ses.msg-error-no-history
    python benchmarks/conformance_mutants.py --list

Output: a table ``mutant | killed by | cases`` (killed by: ``in process``, ``udp`` or
both; cases: the failing case IDs), the new cases against their target mutants, and as last
line ``killed K of N mutants``. Runtime and the score are in docs/conformance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import py_compile
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "uet"
IN_PROCESS_TIMEOUT_S = 300.0
UDP_TIMEOUT_S = 300.0


class PatchError(RuntimeError):
    """A mutant's replacement text is not in its file exactly once (the code moved)."""


#: modules whose per-packet methods a C core replaces at import (uet.endpoint.cores): a
#: mutant of their Python form runs with UET_PURE_PYTHON=1, or the C form would run instead
#: (the C forms are held to the Python ones by tests/pds/test_c_cores.py and
#: tests/pds/test_recovery_core.py)
C_CORE_FILES = frozenset({"pds/recovery.py", "pds/initiator.py", "pds/target.py",
                          "pds/endpoint.py", "endpoint/fep.py", "ses/target.py"})


@dataclass(frozen=True)
class Mutant:
    """One bug: ``edits`` are (old, new) exact replacements in ``path`` (relative to the
    ``uet`` package); ``pure``: run with the pure-Python fast path (the mutant is in
    ``uet/native/pure.py``, or in a module a C core takes over, ``C_CORE_FILES``); ``udp``:
    also run over UDP; ``targets``: cases written to catch this bug (each must fail on
    it)."""

    name: str
    area: str
    path: str
    edits: tuple[tuple[str, str], ...]
    doc: str
    targets: tuple[str, ...] = ()
    udp: bool = False
    pure: bool = False


def _m(name: str, area: str, path: str, old: str, new: str, doc: str, **kw) -> Mutant:
    return Mutant(name, area, path, ((old, new),), doc, **kw)


# ---------------------------------------------------------------------------- the mutants
# Grouped by area. Keep each one small and plausible; say in ``doc`` what the bug is.

MUTANTS: list[Mutant] = [
    # --- the four rules the catalogue missed before issue 22 --------------------------
    _m("pds.dup-above-gap", "PDS", "pds/target.py",
       "            if r is NEW:\n                self._arrival(now, frame, in_order, ooo)",
       "            if r is NEW or r is DUPLICATE:\n"
       "                self._arrival(now, frame, in_order, ooo)",
       "RUD hands a duplicate of a PSN received above a gap (in the window) to the SES again",
       targets=("PDS-DUP-002", "PDS-DUP-003"), udp=True),
    _m("ses.msg-error-no-history", "SES", "ses/target.py",
       "            self._abort(state, Rc.CANCELLED)\n            self.reassembly.finish(key)",
       "            self._abort(state, Rc.CANCELLED)\n"
       "            self.reassembly.active.pop(key, None)",
       "MSG_ERROR drops the message but does not remember its ID: a later packet starts it "
       "again and its WRITE lands", targets=("SES-OP-024",), udp=True),
    _m("pds.invalid-syn-boundary", "PDS", "pds/endpoint.py",
       "        if pds.psn_offset >= cfg.mp_range:",
       "        if pds.psn_offset > cfg.mp_range:",
       "a SYN with psn_offset = MP_RANGE passes the open check: a target PDC is made, the "
       "SYN is then NACKed INVALID_SYN by it and the PDC is left behind",
       targets=("PDS-EST-008", "PDS-EST-022"), udp=True),
    _m("pds.cp-data-dscp", "PDS", "pds/context.py",
       "ev=cfg.control_ev, dscp=cfg.dscp_control,\n",
       "ev=cfg.control_ev, dscp=cfg.dscp_data,\n",
       "every control packet (CLEAR_REQ, CLOSE_REQ, CLOSE, ACK_REQ, CLEAR) leaves at the "
       "data DSCP and queues behind data",
       targets=("PDS-CP-012", "PDS-CP-013", "PDS-CP-014", "PDS-CP-015", "PDS-CP-016"),
       udp=True),
    # --- the weak cases issue 22 strengthened ----------------------------------------
    Mutant("pds.invalid-syn-after-open", "PDS", "pds/endpoint.py", (
        ("        if pds.psn_offset >= cfg.mp_range:\n"
         "            ctx.nack(now, frame, NackCode.INVALID_SYN, pds.psn, 0, pds.spdcid,\n"
         "                     why=\"SYN psn_offset beyond the receive window\")\n"
         "            return None\n", ""),
        ("        mgr.register_target(pdc)\n",
         "        mgr.register_target(pdc)\n"
         "        if pds.psn_offset >= cfg.mp_range:\n"
         "            ctx.nack(now, frame, NackCode.INVALID_SYN, pds.psn, pid, pds.spdcid,\n"
         "                     why=\"SYN psn_offset beyond the receive window\")\n"
         "            return None\n")),
        "the psn_offset check runs after the target PDC is registered: INVALID_SYN is sent "
        "but the PDC stays", targets=("PDS-EST-008", "PDS-EST-021")),
    _m("pds.noop-consumes-psn", "PDS", "pds/target.py",
       "        # NOOP (a keepalive: last_rx above restarts the idle timer): nothing else to do",
       "        elif ctl == CtlType.NOOP:\n            self.tracker.mark(cp.psn)",
       "a NOOP control packet marks the PSN it carries as received (like a CLOSE): the "
       "request later sent at that PSN is taken for a duplicate", targets=("PDS-CP-003",)),
    _m("pds.stored-dup-reexecuted", "PDS", "pds/target.py",
       "        if psn in self.rejected:  # the SES refused it before: this copy is new to it",
       "        if psn in self.rejected or psn in self.gtd:",
       "a duplicate whose response is stored (not cleared) is handed to the SES again "
       "instead of being answered from the store", targets=("SES-OP-026", "SES-OP-027")),
    _m("pds.target-cp-data-dscp", "PDS", "pds/target.py",
       "        self.ctx.send_cp(now, cp, self.peer_ip, self.sdi)",
       "        self.ctx.ctrl.append(Frame(pds=cp, src_ip=self.ctx.local_ip, "
       "dst_ip=self.peer_ip, ev=self.cfg.control_ev, dscp=self.cfg.dscp_data))",
       "the target's control packets (CLEAR_REQ, CLOSE_REQ) leave at the data DSCP",
       targets=("PDS-CP-012", "PDS-CP-013")),
    _m("pds.initiator-cp-data-dscp", "PDS", "pds/initiator.py",
       "        self.ctx.send_cp(now, cp, self.peer_ip, self.sdi)",
       "        self.ctx.ctrl.append(Frame(pds=cp, src_ip=self.ctx.local_ip, "
       "dst_ip=self.peer_ip, ev=self.cfg.control_ev, dscp=self.cfg.dscp_data))",
       "the initiator's control packets (CLOSE, ACK_REQ, CLEAR) leave at the data DSCP",
       targets=("PDS-CP-014", "PDS-CP-015", "PDS-CP-016")),
    # --- PDS: establishment, PDC identification --------------------------------------
    _m("pds.no-inv-dpdcid", "PDS", "pds/endpoint.py",
       "            ctx.nack(now, frame, NackCode.INV_DPDCID, hdr.psn, 0, hdr.spdcid,\n"
       "                     why=f\"unknown DPDCID {hdr.dpdcid}\")",
       "            pass",
       "a request naming an unknown DPDCID is dropped silently instead of NACKed", udp=True),
    _m("pds.no-spdcid-check", "PDS", "pds/endpoint.py",
       "        if pdc.peer_ip != frame.src_ip or pdc.peer_pdcid != hdr.spdcid:",
       "        if pdc.peer_ip != frame.src_ip:",
       "a non-SYN request is accepted whatever its SPDCID"),
    _m("pds.no-source-check", "PDS", "pds/endpoint.py",
       "        if pdc.peer_ip != frame.src_ip or pdc.peer_pdcid != hdr.spdcid:",
       "        if pdc.peer_pdcid != hdr.spdcid:",
       "a non-SYN request is accepted from any source address"),
    _m("pds.syn-start-unchecked", "PDS", "pds/target.py",
       "        if flags & SYN and psn_add(psn, -pds.psn_offset) != self.start_psn:",
       "        if False:",
       "a SYN naming another Start_PSN than the open PDC's is accepted"),
    _m("pds.mode-mismatch-ignored", "PDS", "pds/endpoint.py",
       "        if pdc.mode != mode:  # (a PDC just opened has the request's mode)",
       "        if False:",
       "a ROD SYN from the initiator PDC of an open RUD PDC joins it"),
    # --- PDS: windows, duplicates ----------------------------------------------------
    _m("pds.window-doubled", "PDS", "pds/target.py",
       "        self.tracker = PsnTracker(start_psn, cfg.mp_range)",
       "        self.tracker = PsnTracker(start_psn, cfg.mp_range * 2)",
       "the receive window is twice MP_RANGE: PSNs beyond it are accepted"),
    _m("pds.stale-dup-reexecuted", "PDS", "pds/target.py",
       "        if r is STALE:\n            if psn_diff(self.tracker.base, psn) > "
       "self.cfg.mp_range:",
       "        if r is STALE:\n            self._deliver(now, frame, psn)\n"
       "            return\n            if psn_diff(self.tracker.base, psn) > "
       "self.cfg.mp_range:",
       "a duplicate shifted out of the window is handed to the SES again"),
    _m("pds.prev-range-widened", "PDS", "pds/target.py",
       "            if psn_diff(self.tracker.base, psn) > self.cfg.mp_range:",
       "            if psn_diff(self.tracker.base, psn) > 4 * self.cfg.mp_range:",
       "PSNs older than the previous MP_RANGE get a DEFAULT_RESPONSE instead of "
       "PSN_OOR_WINDOW"),
    _m("pds.rod-as-rud", "PDS", "pds/target.py",
       "        if self.rob is None:  # RUD: each packet to the SES on arrival",
       "        if True:",
       "ROD packets are handed to the SES on arrival, out of order"),
    # --- PDS: ACKs -------------------------------------------------------------------
    _m("pds.ack-data-dscp", "PDS", "pds/ack.py",
       "                 ev=ev, dscp=cfg.dscp_control, tss=",
       "                 ev=ev, dscp=cfg.dscp_data, tss=",
       "ACKs leave at the data DSCP"),
    _m("pds.nack-data-dscp", "PDS", "pds/context.py",
       "        self.ctrl.append(Frame(pds=nack, src_ip=self.local_ip, dst_ip=dst_ip, ev=ev,\n"
       "                               dscp=self.cfg.dscp_control, tss=",
       "        self.ctrl.append(Frame(pds=nack, src_ip=self.local_ip, dst_ip=dst_ip, ev=ev,\n"
       "                               dscp=self.cfg.dscp_data, tss=",
       "NACKs leave at the data DSCP"),
    _m("pds.ack-ev-fixed", "PDS", "pds/ack.py",
       "                 ev=ev, dscp=cfg.dscp_control, tss=",
       "                 ev=cfg.control_ev, dscp=cfg.dscp_control, tss=",
       "ACKs leave from a fixed EV instead of the triggering packet's"),
    _m("pds.ack-retx-not-echoed", "PDS", "pds/target.py",
       "        aflags = (ACK_M if ce else 0) | (ACK_RETX if frame.pds.flags & RETX else 0)",
       "        aflags = ACK_M if ce else 0",
       "the ACK carrying the response of a retransmitted packet does not echo RETX",
       targets=("PDS-ACK-014",)),
    _m("pds.sack-base-off-by-one", "PDS", "pds/ack.py",
       "        base = psn_add(cack, 1) if sack_base is None else sack_base",
       "        base = psn_add(cack, 2) if sack_base is None else sack_base",
       "ACK_CC names a SACK base one PSN beyond the bitmap it carries"),
    _m("pds.ack-every-packet", "PDS", "pds/ack.py",
       "        if immediate or co.nbytes >= self.every_bytes:",
       "        if True:",
       "no ACK coalescing: every packet is acknowledged at once"),
    _m("pds.ack-timer-doubled", "PDS", "pds/ack.py",
       "            co.due = now + self.timer_ps",
       "            co.due = now + 2 * self.timer_ps",
       "the receiver ACK timer runs twice as long as configured"),
    _m("pds.mpr-wrong", "PDS", "pds/target.py",
       "        self.mpr = cfg.mp_range // 128",
       "        self.mpr = cfg.mp_range // 64",
       "ACK_CC advertises twice the receive window (mpr)"),
    # --- PDS: clear, close, control --------------------------------------------------
    _m("pds.cack-not-held", "PDS", "pds/target.py",
       "        if self.gtd or self.pending or self.rejected:",
       "        if self.pending or self.rejected:",
       "the CACK is not held below un-cleared guaranteed responses"),
    _m("pds.clear-ignored", "PDS", "pds/target.py",
       "            if st is ST_ESTABLISHED:\n                self.apply_clear(now, cp.payload)",
       "            pass",
       "a CLEAR control packet is ignored (stored responses stay)"),
    _m("pds.no-clear-req", "PDS", "pds/target.py",
       "                self.send_cp(now, CtlType.CLEAR_REQ, last, 0, last)",
       "                pass",
       "a target holding responses never sends CLEAR_REQ"),
    _m("pds.no-linger", "PDS", "pds/context.py",
       "        for old in self.mgr.start_linger(pdc, now + linger):",
       "        for old in self.mgr.start_linger(pdc, now):",
       "a closed PDC does not linger for MSL: late packets find nothing"),
    _m("pds.ack-req-unreceived-acked", "PDS", "pds/target.py",
       "            self._nack(now, frame, NackCode.PKT_NOT_RCVD, psn,\n"
       "                       why=\"ACK request for a PSN never received\")",
       "            self.acks.explicit_ack(psn, None, b\"\", frame.ev, aflags | ACK_RETX)",
       "an ACK_REQ for a PSN never received is answered by an ACK"),
    _m("pds.close-retx-flag", "PDS", "pds/initiator.py",
       "            self.send_cp(now, CtlType.CLOSE, pkt.psn, CpFlag.AR | CpFlag.RETX)",
       "            self.send_cp(now, CtlType.CLOSE, pkt.psn, CpFlag.AR)",
       "a retransmitted CLOSE does not carry RETX"),
    _m("pds.no-idle-close", "PDS", "pds/initiator.py",
       "        if self.cfg.close_idle_ps and self.idle_since is None:",
       "        if False:",
       "the initiator never closes an idle PDC"),
    # --- PDS: the initiator's retransmission -----------------------------------------
    _m("pds.rto-no-backoff", "PDS", "pds/retransmit.py",
       "        return min(self.base * self.backoff ** retries, max(self.max_rto, self.base))",
       "        return self.base",
       "no exponential RTO backoff"),
    _m("pds.nack-no-retransmit", "PDS", "pds/initiator.py",
       "            if pkt.is_close or not pkt.arrived:\n"
       "                rec.retransmit(now, pkt, \"nack.\" + name)",
       "            pass",
       "a NACK asking for a retransmission is ignored: the packet waits for its RTO"),
    _m("pds.window-beyond-peer", "PDS", "pds/initiator.py",
       "        if 0x80000000 > d > self.peer_range:",
       "        if 0x80000000 > d > 2 * self.peer_range:",
       "the initiator sends beyond max CACK + the peer's MP_RANGE",
       targets=("PDS-WIN-009",)),
    # --- RUDI and UUD ----------------------------------------------------------------
    _m("rudi.duplicate-reexecuted", "RUDI/UUD", "pds/rudi.py",
       "        if cached is not None:\n            self.cache.move_to_end(key)",
       "        if False:\n            self.cache.move_to_end(key)",
       "a duplicate RUDI request is executed again instead of answered from the cache",
       udp=True),
    _m("rudi.retx-flag-missing", "RUDI/UUD", "pds/rudi.py",
       "            self._send(frame, pds.pkt_id, cached[0], cached[1], m | RUDI_RETX)",
       "            self._send(frame, pds.pkt_id, cached[0], cached[1], m)",
       "a cached RUDI_RESP re-sent for a duplicate does not carry RETX"),
    _m("rudi.resp-data-dscp", "RUDI/UUD", "pds/rudi.py",
       "        dscp = cfg.dscp_data if data and cfg.ack_data_class == \"data\" else "
       "cfg.dscp_control",
       "        dscp = cfg.dscp_data",
       "RUDI responses without data (WRITE, NO_OP) leave at the data DSCP too"),
    _m("rudi.not-idempotent-allowed", "RUDI/UUD", "ses/target.py",
       "        if mode == _RUDI and not mr.idempotent_safe:\n"
       "            return self._error(key, req, Rc.OP_VIOLATION)",
       "",
       "a RUDI WRITE to memory not marked idempotent-safe is executed"),
    _m("rudi.send-allowed", "RUDI/UUD", "ses/target.py",
       "        if mode == _RUDI and op not in RUDI_OPCODES:",
       "        if False:",
       "non-idempotent operations (SEND) are accepted over RUDI"),
    _m("uud.trimmed-nacked", "RUDI/UUD", "pds/uud.py",
       "        ep.counters[\"dropped.uud_trimmed\"] += 1  # no reliability: nothing to ask for",
       "        ep.nack(now, frame, 1, 0, 0, 0, nt=True, why=\"trimmed\")  # 1: TRIMMED",
       "a trimmed UUD request is NACKed TRIMMED (UUD has nothing a NACK could name)",
       targets=("PDS-UUD-005",)),
    _m("uud.write-allowed", "RUDI/UUD", "ses/target.py",
       "        if (op == _DATAGRAM_SEND) != (mode == _UUD):",
       "        if op == _DATAGRAM_SEND and mode != _UUD:",
       "operations other than DATAGRAM_SEND are executed over UUD"),
    _m("uud.datagram-over-rud", "RUDI/UUD", "ses/target.py",
       "        if (op == _DATAGRAM_SEND) != (mode == _UUD):",
       "        if mode == _UUD and op != _DATAGRAM_SEND:",
       "DATAGRAM_SEND is accepted over RUD"),
    # --- SES -------------------------------------------------------------------------
    _m("ses.msg-error-unseen-ignored", "SES", "ses/target.py",
       "        elif key is not None:\n"
       "            self.reassembly.finish(key)  # late packets of that message are dropped",
       "        elif False:\n            pass",
       "a MSG_ERROR that overtook its message is forgotten: the message's packets then "
       "execute", targets=("SES-OP-025",)),
    _m("ses.no-job-check", "SES", "ses/memory.py",
       "        if pids is None:\n            return Rc.BAD_JOB_ID",
       "        if pids is None:\n            pids = next(iter(self._jobs.values()))",
       "requests naming a job the end point does not host are served as its own job's"),
    _m("ses.no-generation-check", "SES", "ses/memory.py",
       "        if res.generation != ri_generation:",
       "        if False:",
       "the resource index generation is not checked"),
    _m("ses.no-mkey-check", "SES", "ses/memory.py",
       "    if mr is None:\n        return Rc.BAD_MKEY",
       "    if mr is None:\n        mr = next(iter(res.regions.values()))",
       "an unknown memory key selects the resource's first region", udp=True),
    _m("ses.no-perm-check", "SES", "ses/memory.py",
       "    if not int(mr.perms) & int(perm):",
       "    if False:",
       "region permissions are not checked"),
    _m("ses.bounds-start-only", "SES", "ses/memory.py",
       "    if start < 0 or start + length > len(mr.buffer):",
       "    if start < 0 or start >= len(mr.buffer):",
       "only the start of an access is checked against the region (partial writes)"),
    _m("ses.ie-ignored", "SES", "ses/target.py",
       "        if check_ie and int(req.flags) & _IE:  # req.ie, without the call",
       "        if False:",
       "the IE (initiator error) flag is ignored"),
    _m("ses.sum-is-diff", "SES", "ses/atomics.py",
       "        elif opcode == Op.SUM:\n            new = old + x",
       "        elif opcode == Op.SUM:\n            new = old - x",
       "atomic SUM subtracts"),
    _m("ses.cswap-always", "SES", "ses/atomics.py",
       "        return bool(compare == current)",
       "        return True",
       "CSWAP swaps whatever the compare value"),
    _m("ses.unaligned-allowed", "SES", "ses/target.py",
       "        if (start + mr.base_va) % atomics.alignment(dt):",
       "        if False:",
       "atomics on unaligned addresses are executed"),
    _m("ses.complete-on-first-packet", "SES", "ses/reassembly.py",
       "        return self.packets > 0 and self.intervals.covered >= self.request_length",
       "        return self.packets > 0",
       "a multi-packet message completes on its first packet"),
    _m("ses.tag-ignored", "SES", "ses/matching.py",
       "        return not tagged or tag_matches(match_bits, self.tag, self.ignore)",
       "        return True",
       "tagged sends match any posted receive"),
    _m("ses.small-rsp-psn", "SES", "ses/target.py",
       "                                       original_request_psn=psn)",
       "                                       original_request_psn=(psn + 1) & 0xFFFFFFFF)",
       "RSP_DATA_SMALL names the wrong original_request_psn"),
    _m("ses.too-long-unchecked", "SES", "ses/target.py",
       "        if end > rlen or (key is None and end != rlen):\n"
       "            return self._error(key, req, Rc.TOO_LONG)",
       "",
       "a WRITE whose payload runs past its request_length is executed"),
    # --- profiles --------------------------------------------------------------------
    _m("profile.ai-base-rudi", "profiles", "profiles/ai-base.toml",
       'modes = ["RUD", "ROD"]', 'modes = ["RUD", "ROD", "RUDI"]',
       "AI Base accepts RUDI (an HPC mode)", udp=True),
    _m("profile.ai-base-diff", "profiles", "profiles/ai-base.toml",
       'opcodes = ["MIN", "MAX", "SUM",', 'opcodes = ["DIFF", "MIN", "MAX", "SUM",',
       "AI Base accepts the atomic DIFF"),
    _m("profile.ai-base-int8", "profiles", "profiles/ai-base.toml",
       'datatypes = ["INT32",', 'datatypes = ["INT8", "INT32",',
       "AI Base accepts INT8 atomics"),
    _m("profile.ai-base-deferrable", "profiles", "profiles/ai-base.toml",
       '"SEND", "MSG_ERROR"]', '"SEND", "MSG_ERROR", "DEFERRABLE_SEND", "DEFERRABLE_RTR"]',
       "AI Base accepts deferrable sends"),
    _m("profile.ops-ungated", "profiles", "ses/target.py",
       "        if op not in _OPCODES or op not in profile.operations or mode not in "
       "profile.modes:",
       "        if op not in _OPCODES:",
       "the SES serves every opcode and mode whatever its profile allows"),
    _m("profile.small-header-ungated", "profiles", "ses/target.py",
       "        if req.kind == _REQ_SMALL and not int(profile.fep_cap) & _OPT_NON_MATCHING:",
       "        if False:",
       "small headers are accepted by an end point that does not advertise them"),
    # --- CMS signalling --------------------------------------------------------------
    _m("cms.trimmed-not-nacked", "CMS", "pds/target.py",
       "        if dscp == cfg.dscp_trimmed or dscp == cfg.dscp_trimmed_lasthop:",
       "        if False:",
       "a trimmed packet (trimmed DSCP) is taken as whole instead of NACKed TRIMMED"),
    _m("cms.lasthop-as-trimmed", "CMS", "pds/target.py",
       "NackCode.TRIMMED_LASTHOP if lasthop else NackCode.TRIMMED,",
       "NackCode.TRIMMED,",
       "a packet trimmed at the last hop is NACKed TRIMMED, not TRIMMED_LASTHOP"),
    _m("cms.ack-ecn-echo-missing", "CMS", "pds/target.py",
       "        ce = frame.ecn == 3\n        aflags =",
       "        ce = False\n        aflags =",
       "the ACK carrying the response of a CE-marked request does not set M"),
    _m("cms.nack-ecn-echo-missing", "CMS", "pds/context.py",
       "        flags = (0x20 if frame.ecn == 3 else 0) | (frame.pds.flags & _RETX)",
       "        flags = frame.pds.flags & _RETX",
       "NACKs of CE-marked packets do not set M"),
    _m("cms.nack-ev-fixed", "CMS", "pds/context.py",
       "        self.nack_to(now, frame.src_ip, frame.ev, flags,",
       "        self.nack_to(now, frame.src_ip, self.cfg.control_ev, flags,",
       "NACKs leave from a fixed EV instead of the triggering packet's"),
    _m("cms.rudi-ecn-echo-missing", "CMS", "pds/rudi.py",
       "        m = RUDI_M if frame.ecn == 3 else 0",
       "        m = 0",
       "RUDI responses to CE-marked requests do not set M"),
    _m("cms.trimmed-nack-ignored", "CMS", "pds/initiator.py",
       "        if code in TRIM_NACKS and pkt.ever_retx and not nack.flags & ACK_RETX:",
       "        if code in TRIM_NACKS:",
       "the initiator ignores NACK TRIMMED (waits for the RTO instead of resending)"),
    # --- issue 20: the packet formats sent when the specification calls for them -----
    _m("pds.trimmed-ack-ignored", "PDS", "pds/target.py",
       "        if stored is None or self.state is not ST_ESTABLISHED:\n"
       "            ctx.counters[\"nack_rx_stale\"] += 1",
       "        if True:\n            ctx.counters[\"nack_rx_stale\"] += 1",
       "the target ignores NACK TRIMMED_ACK: the read data of a trimmed ACK comes only "
       "when the initiator's RTO sends the READ again", targets=("PDS-RNK-003",), udp=True),
    _m("pds.trimmed-ack-resend-no-retx", "PDS", "pds/target.py",
       "        aflags = ACK_RETX | (ACK_M if nack.flags & ACK_M else 0)",
       "        aflags = ACK_M if nack.flags & ACK_M else 0",
       "the ACK sent again after NACK TRIMMED_ACK does not carry RETX",
       targets=("PDS-RNK-003",)),
    _m("pds.trimmed-ack-not-nacked", "PDS", "pds/initiator.py",
       "                if pkt is not None and pkt.req is not None:\n"
       "                    self._trimmed_ack(now, frame, ack, ap)",
       "                if pkt is not None and pkt.req is not None:\n"
       "                    pass",
       "the initiator of a READ whose ACK (with the data) arrives trimmed waits for its RTO "
       "instead of NACKing TRIMMED_ACK", targets=("PDS-NAK-014",)),
    _m("pds.ack-data-control-class", "PDS", "pds/ack.py",
       "                     dst_ip=src.peer_ip, ev=ev, dscp=cfg.dscp_data, tss=",
       "                     dst_ip=src.peer_ip, ev=ev, dscp=cfg.dscp_control, tss=",
       "ACKs carrying read data leave at the control DSCP (never trimmed: TRIMMED_ACK "
       "cannot happen, and bulk data jumps the data queues)", targets=("PDS-ACK-015",)),
    _m("pds.no-ccc-check", "PDS", "pds/endpoint.py",
       "        if cc and not mgr.ccc_free():",
       "        if False:",
       "a congestion-controlled SYN opens a PDC when every CC context is taken",
       targets=("PDS-NAK-015",)),
    _m("pds.no-bitmap-check", "PDS", "pds/endpoint.py",
       "        if not pending and not mgr.bitmap_free():",
       "        if False:",
       "a SYN opens a PDC when every PSN-tracking bitmap is taken",
       targets=("PDS-NAK-016",)),
    _m("pds.gtd-room-unchecked", "PDS", "pds/target.py",
       "            if need and not mem.fits(need):",
       "            if False:",
       "a request is executed although its guaranteed response cannot be stored",
       targets=("PDS-NAK-017",)),
    _m("pds.ack-req-with-data-answered", "PDS", "pds/target.py",
       "            elif stored[1] and self.cfg.ack_data_class == \"data\":",
       "            elif False:",
       "an ACK_REQ for a READ whose ACK carries the data is answered with that ACK (bulk "
       "data sent as the answer to a control packet) instead of NACK ACK_WITH_DATA",
       targets=("PDS-NAK-018",)),
    _m("pds.reused-start-psn-taken", "PDS", "pds/endpoint.py",
       "        return psn_add(last, START_PSN_DISTANCE)\n    return None",
       "        return None\n    return None",
       "a SYN reusing a lingering PDC's key with a Start_PSN that late packets of the old "
       "PDC could hit is taken", targets=("PDS-NAK-019",)),
    _m("pds.credit-req-dropped", "PDS", "pds/target.py",
       "                self._nack(now, frame, NackCode.UNEXP_EVENT, cp.psn,\n"
       "                           why=\"CREDIT_REQ on a PDC without credit-based congestion "
       "control\")\n",
       "",
       "a CREDIT_REQ to a PDC without credit-based CC is dropped silently",
       targets=("PDS-NAK-020",)),
    _m("pds.negotiation-version-unchecked", "PDS", "pds/target.py",
       "        if caps.version != negotiation.VERSION:",
       "        if False:",
       "a NEGOTIATION of an unknown version is read as version 1",
       targets=("PDS-NAK-021",)),
    _m("pds.negotiation-unanswered", "PDS", "pds/target.py",
       "        if self.state is ST_ESTABLISHED:\n"
       "            self.send_cp(now, CtlType.NEGOTIATION, cp.psn, 0,",
       "        if False:\n"
       "            self.send_cp(now, CtlType.NEGOTIATION, cp.psn, 0,",
       "the target records the initiator's NEGOTIATION but never answers with its own",
       targets=("PDS-CP-017",), udp=True),
    _m("pds.negotiation-mpr-unscaled", "PDS", "pds/context.py",
       "            self.fep_cap, cfg.mp_range // 128, cfg.mtu_payload,",
       "            self.fep_cap, cfg.mp_range % 256, cfg.mtu_payload,",
       "the NEGOTIATION answer gives MP_RANGE in PSNs (truncated to 8 bits), not in units "
       "of 128 as ACK_CC's MPR", targets=("PDS-CP-017",)),
    _m("pds.noop-not-keepalive", "PDS", "pds/target.py",
       "        st = self.state\n        self.last_rx = now\n        if st is ST_PENDING:\n"
       "            self._nack(now, frame, NackCode.NEW_START_PSN, cp.psn,",
       "        st = self.state\n        if ctl != CtlType.NOOP:\n            self.last_rx = now\n"
       "        if st is ST_PENDING:\n"
       "            self._nack(now, frame, NackCode.NEW_START_PSN, cp.psn,",
       "NOOPs do not count as activity: an idle PDC kept alive by NOOPs is asked to close",
       targets=("PDS-CP-018",)),
    _m("pds.no-gap-nack", "PDS", "pds/target.py",
       "        if not in_order and self.gap_since is None and self.gap_after:",
       "        if False:",
       "with plain ACKs the target never NACKs a gap RCVR_INFER_LOSS (the initiator learns "
       "of the loss only from its RTO)", targets=("PDS-NAK-022",)),
    _m("pds.gap-renack-always", "PDS", "pds/target.py",
       "            if last is not None and now - last < renack:",
       "            if False:",
       "a missing PSN is NACKed RCVR_INFER_LOSS again at every gap delay, before its "
       "retransmission could have come", targets=("PDS-NAK-022",)),
    _m("pds.no-reclaim", "PDS", "pds/endpoint.py",
       "            self.counters[\"refused.target_pdcs\"] += 1\n"
       "            self._reclaim(now, None)\n",
       "            self.counters[\"refused.target_pdcs\"] += 1\n",
       "a full PDC table stays full: no idle PDC is asked to close (CLOSE_REQ)",
       targets=("PDS-CLS-012",)),
    _m("ses.dc-no-early-ack", "SES", "ses/target.py",
       "        if req.flags & _DC and type(rsp) is SesResponse and rsp.opcode == _RESPONSE \\\n",
       "        if False and rsp is not None and rsp.opcode == _RESPONSE \\\n",
       "DC is accepted and ignored: the WRITE is answered at once, before its data is "
       "visible, and no NO_RESPONSE is sent", targets=("SES-OP-029",), udp=True),
    _m("ses.fp-exceptions-ignored", "SES", "ses/target.py",
       "            if trapped is not None:\n                return _AMO_FP[trapped]",
       "            if False:\n                return _AMO_FP[trapped]",
       "floating-point exceptions never fail an atomic (no AMO_FP_* code, the result "
       "stored)", targets=("SES-RC-021", "SES-RC-022", "SES-RC-023", "SES-RC-024")),
    _m("ses.fp-overflow-as-underflow", "SES", "ses/target.py",
       "_AMO_FP = {\"NAN\": Rc.AMO_FP_NAN, \"OVERFLOW\": Rc.AMO_FP_OVERFLOW,\n"
       "           \"UNDERFLOW\": Rc.AMO_FP_UNDERFLOW,",
       "_AMO_FP = {\"NAN\": Rc.AMO_FP_NAN, \"OVERFLOW\": Rc.AMO_FP_UNDERFLOW,\n"
       "           \"UNDERFLOW\": Rc.AMO_FP_OVERFLOW,",
       "overflow and underflow swapped in the return codes",
       targets=("SES-RC-021", "SES-RC-024")),
    _m("ses.long-double-as-double", "SES", "ses/ieee.py",
       "BINARY128 = Fmt(\"binary128\", 15, 112)",
       "BINARY128 = Fmt(\"binary128\", 15, 52)",
       "LONG_DOUBLE computed with a binary64 significand (the x86 \"long double\" mistake, "
       "roughly): 2^100 + 1 rounds to 2^100", targets=("SES-OP-028",)),
    # --- cosmic-ray survivors on lines the catalogue runs (benchmarks/cosmic_ray_sample.py):
    # the meaningful ones, written as bugs, each with the case that now kills it --------
    _m("pds.spdcid-below-accepted", "PDS", "pds/endpoint.py",
       "        if pdc.peer_ip != frame.src_ip or pdc.peer_pdcid != hdr.spdcid:",
       "        if pdc.peer_ip != frame.src_ip or pdc.peer_pdcid < hdr.spdcid:",
       "a request or control packet whose SPDCID is below the PDC's passes the SPDCID "
       "check (it compares one way; requests and control packets share the check)",
       targets=("PDS-EST-004", "PDS-CP-009")),
    _m("pds.spdcid-above-accepted", "PDS", "pds/endpoint.py",
       "        if pdc.peer_ip != frame.src_ip or pdc.peer_pdcid != hdr.spdcid:",
       "        if pdc.peer_ip != frame.src_ip or pdc.peer_pdcid > hdr.spdcid:",
       "a request whose SPDCID is above the PDC's passes the SPDCID check",
       targets=("PDS-EST-004",)),
    _m("pds.ack-spdcid-one-way", "PDS", "pds/initiator.py",
       "        elif ack.spdcid != self.dpdcid:",
       "        elif ack.spdcid < self.dpdcid:",
       "the initiator takes an ACK from a foreign PDC whose SPDCID is below its peer's",
       targets=("PDS-RTX-010",)),
    _m("pds.ack-spdcid-unchecked", "PDS", "pds/initiator.py",
       "        elif ack.spdcid != self.dpdcid:",
       "        elif False:",
       "the initiator takes an established PDC's ACKs whatever their SPDCID",
       targets=("PDS-RTX-010",)),
    _m("pds.nack-spdcid-one-way", "PDS", "pds/initiator.py",
       "if self.dpdcid and nack.spdcid and nack.spdcid != self.dpdcid:",
       "if self.dpdcid and nack.spdcid and nack.spdcid < self.dpdcid:",
       "the initiator acts on a NACK from a foreign PDC whose SPDCID is below its peer's",
       targets=("PDS-RNK-032",)),
    _m("pds.cp-ack-retx-always", "PDS", "pds/target.py",
       "(ACK_RETX if cp.flags & CpFlag.RETX else 0)",
       "(ACK_RETX if cp.flags - CpFlag.RETX else 0)",
       "the ACK of a control packet has RETX set although the CP was not retransmitted "
       "(the flag test is a subtraction)", targets=("PDS-CLS-001",)),
    _m("cms.dscp-above-lasthop-trimmed", "CMS", "pds/target.py",
       "        if dscp == cfg.dscp_trimmed or dscp == cfg.dscp_trimmed_lasthop:",
       "        if dscp == cfg.dscp_trimmed or dscp >= cfg.dscp_trimmed_lasthop:",
       "any DSCP from the last-hop trimmed code point up is taken as trimmed",
       targets=("PDS-NAK-023",)),
    _m("ses.one-packet-no-som", "SES", "ses/headers.py",
       "    flags = base.flags | SesFlag.SOM | SesFlag.EOM",
       "    flags = (base.flags | SesFlag.EOM) & ~SesFlag.SOM",
       "the medium or small header of a one-packet message the device sends (its rendezvous "
       "READ) has EOM but not SOM, as if it were the last packet of a longer message",
       targets=("SES-OP-016",)),
    # --- TSS (issue 14): one mutant per rule the TSS cases check --------------------
    _m("tss.no-replay-check", "TSS", "tss/domain.py",
       "            if verdict is Replay.DUPLICATE:",
       "            if False:",
       "a replayed secured frame (the same epoch:TSC) is taken again",
       targets=("TSS-005",), udp=True),
    _m("tss.cleartext-accepted", "TSS", "tss/sublayer.py",
       "        if self.domains and not self.cfg.allow_cleartext:",
       "        if False:",
       "a secured end point takes cleartext UET", targets=("TSS-007",), udp=True),
    _m("tss.job-not-bound", "TSS", "tss/sublayer.py",
       "            return dom is not None and dom.cfg.job == job",
       "            return dom is not None",
       "a request sealed in a domain may name any job", targets=("TSS-009",), udp=True),
    Mutant("tss.epoch-unchecked", "TSS", "tss/domain.py",
           (("        if age < 0x8000 and age > cfg.max_epoch_lifetime:", "        if False:"),
            ("        if (epoch - self.join_epoch) & 0xFFFF >= 0x8000:", "        if False:")),
           "no epoch check at all: frames of an expired epoch are accepted",
           targets=("TSS-008",), udp=True),
    _m("tss.join-epoch-unchecked", "TSS", "tss/domain.py",
       "        if (epoch - self.join_epoch) & 0xFFFF >= 0x8000:",
       "        if False:",
       "frames from before the end point joined the domain are accepted (a replay recorded "
       "before a restart reaches the new, empty replay state)", targets=("TSS-008",),
       udp=True),
    _m("tss.no-threshold", "TSS", "tss/domain.py",
       "            if cfg.auth_fail_threshold and self.auth_failures > cfg.auth_fail_threshold",
       "            if False and self.auth_failures > cfg.auth_fail_threshold",
       "the authentication-failure threshold never disables the domain",
       targets=("TSS-011",)),
    _m("tss.floor-not-raised", "TSS", "pds/target.py",
       "            if psn_diff(nxt, floor) > 0:\n                floor = floors[self.sdi] = nxt",
       "            if False:\n                floor = floors[self.sdi] = nxt",
       "closing a secured PDC does not raise the SDI's Expected-PSN floor",
       targets=("TSS-010",), udp=True),
    _m("tss.header-not-authenticated", "TSS", "tss/header.py",
       "    return b\"\".join((ip_bytes(src_ip), ip_bytes(dst_ip), four, hdr))",
       "    return b\"\".join((ip_bytes(src_ip), ip_bytes(dst_ip), four))",
       "the TSS header is left out of the AAD (a changed header still authenticates)",
       targets=("TSS-003",), udp=True),
    # --- the native fast path's pure-Python twin (run with UET_PURE_PYTHON=1) ---------
    _m("native.tracker-dup-as-new", "PDS", "native/pure.py",
       "        if bits & bit:\n            return _DUPLICATE, False, self._ooo",
       "",
       "the PSN tracker reports a duplicate above a gap as new", pure=True,
       targets=("PDS-DUP-002", "PDS-DUP-003")),
    _m("native.tracker-window-edge", "PDS", "native/pure.py",
       "        if off >= self._window:\n            return _OUT_OF_WINDOW, False, self._ooo",
       "        if off > self._window:\n            return _OUT_OF_WINDOW, False, self._ooo",
       "the PSN tracker accepts base + MP_RANGE (one past the window)", pure=True),
]


# ---------------------------------------------------------------------------- applying

def apply_mutant(mutant: Mutant, pkg: Path) -> None:
    """Apply ``mutant`` to the package copy at ``pkg``; PatchError if the code moved."""
    path = pkg / mutant.path
    if not path.is_file():
        raise PatchError(f"mutant {mutant.name}: {mutant.path} does not exist any more")
    text = path.read_text()
    for old, new in mutant.edits:
        n = text.count(old)
        if n != 1:
            raise PatchError(f"mutant {mutant.name}: the text to replace occurs {n} times "
                             f"in uet/{mutant.path} (expected once; the code moved: rewrite "
                             f"the mutant):\n{old}")
        text = text.replace(old, new)
    path.write_text(text)
    if path.suffix == ".py":
        try:
            py_compile.compile(str(path), doraise=True)
        except py_compile.PyCompileError as exc:
            raise PatchError(f"mutant {mutant.name} does not compile: {exc.msg}") from None


def check_all_apply(mutants: Iterable[Mutant], package: Path = PACKAGE) -> None:
    """Every mutant applies to the current code (cheap: one copy of each touched file)."""
    with tempfile.TemporaryDirectory(prefix="uet-mut-check-") as tmp:
        for m in mutants:
            dst = Path(tmp) / m.name / "uet"
            (dst / m.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(package / m.path, dst / m.path)
            apply_mutant(m, dst)


def make_copy(mutant: Mutant | None, workdir: Path, package: Path = PACKAGE) -> Path:
    """A copy of the package under ``workdir`` (returned: the directory to put on
    ``PYTHONPATH``) with ``mutant`` applied (None: unmutated)."""
    dst = workdir / "uet"
    shutil.copytree(package, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if mutant is not None:
        apply_mutant(mutant, dst)
    return workdir


def _env(copy_root: Path | None, pure: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "UET_PURE_PYTHON")}
    if copy_root is not None:
        env["PYTHONPATH"] = str(copy_root)
    if pure:
        env["UET_PURE_PYTHON"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


# ---------------------------------------------------------------------------- running

_DRIVER = r"""
import json, os, sys
import uet
root = os.path.realpath(sys.argv[1])
where = os.path.realpath(uet.__file__)
if not where.startswith(root + os.sep):
    sys.exit(f"imported uet from {where}, not from the mutated copy under {root}")
from uet.conformance.registry import catalogue
from uet.conformance.runner import run_cases
from uet.conformance.targets import InProcessTarget
ids = set(sys.argv[2].split(",")) if len(sys.argv) > 2 and sys.argv[2] else None
cases = [c for c in catalogue() if ids is None or c.id in ids]
results = run_cases(cases, InProcessTarget())
print(json.dumps({"ran": len(results),
                  "bad": {r.id: [r.status, r.why.splitlines()[0] if r.why else ""]
                          for r in results if r.status not in ("pass", "not run")}}))
"""


@dataclass
class Outcome:
    """What one mutant did: the cases that failed in process / over UDP (id -> status,
    why), or the run's own failure (``timeout``, a crash)."""

    mutant: Mutant | None
    inprocess: dict[str, list[str]] = field(default_factory=dict)
    udp: dict[str, list[str]] | None = None
    problem: str = ""
    udp_problem: str = ""
    seconds: float = 0.0

    @property
    def name(self) -> str:
        return self.mutant.name if self.mutant is not None else "(unmutated)"

    @property
    def killed_inprocess(self) -> bool:
        return bool(self.inprocess) or bool(self.problem)

    @property
    def killed_udp(self) -> bool:
        return bool(self.udp) or bool(self.udp_problem)

    @property
    def killed(self) -> bool:
        return self.killed_inprocess or self.killed_udp


def run_inprocess(copy_root: Path, pure: bool, cases: Sequence[str] | None = None,
                  timeout: float = IN_PROCESS_TIMEOUT_S) -> tuple[dict, str]:
    """(failing cases, problem) of the catalogue run against the copy at ``copy_root``."""
    args = [sys.executable, "-c", _DRIVER, str(copy_root), ",".join(cases or ())]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                              cwd=copy_root, env=_env(copy_root, pure))
    except subprocess.TimeoutExpired:
        return {}, f"timeout after {timeout:.0f} s (the end point hung)"
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {}, f"the run crashed (exit {proc.returncode}): {tail}"
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return data["bad"], ""


class _Serve:
    """``uet serve`` from a package copy (None: the real package)."""

    def __init__(self, copy_root: Path | None, ip: str, pure: bool, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uet.cli", "serve", "--listen", f"{ip}:4793", "--json",
             *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            cwd=copy_root or ROOT, env=_env(copy_root, pure))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if not line:
                break
            if line.startswith("ready "):
                return
        self.stop()
        raise RuntimeError(f"uet serve on {ip} did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()


def udp_addresses(slot: int) -> tuple[str, str, str]:
    """(HPC server, AI Base server, peer /22) on loopback, per process and slot, away from
    the addresses the test suite uses."""
    third = (os.getpid() % 60 * 4 + slot) % 250
    return (f"127.87.{third}.1", f"127.87.{third}.2",
            f"127.{200 + slot % 50}.{os.getpid() % 60 * 4}.0/22")


def _report(report: Path, proc: subprocess.CompletedProcess) -> tuple[dict, str]:
    if not report.exists():
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {}, f"uet conformance wrote no report (exit {proc.returncode}): {tail}"
    data = json.loads(report.read_text())
    return ({r["id"]: [r["status"], (r.get("why") or "").splitlines()[0] if r.get("why")
                       else ""]
             for r in data["results"] if r["status"] not in ("pass", "not run")}, "")


def run_udp_tss(copy_root: Path | None, pure: bool, slot: int, workdir: Path,
                timeout: float = UDP_TIMEOUT_S) -> tuple[dict, str]:
    """(failing cases, problem) of the TSS cases (``uet conformance --tss -k TSS`` of the
    real package) against ``uet serve --tss well-known`` started from the copy."""
    hpc_ip, _, peer_net = udp_addresses(slot)
    tss_ip = hpc_ip.rsplit(".", 1)[0] + ".3"
    server = None
    try:
        server = _Serve(copy_root, tss_ip, pure, "--tss", "well-known")
        report = workdir / "udp-tss.json"
        proc = subprocess.run(
            [sys.executable, "-m", "uet.cli", "conformance", "--dut", f"udp:{tss_ip}:4793",
             "--tss", "-k", "TSS", "--peer-net", peer_net, "--json", str(report)],
            capture_output=True, text=True, timeout=timeout, cwd=workdir,
            env=_env(None, False))
    except subprocess.TimeoutExpired:
        return {}, f"timeout after {timeout:.0f} s"
    except RuntimeError as exc:
        return {}, str(exc)
    finally:
        if server is not None:
            server.stop()
    return _report(report, proc)


def run_udp(copy_root: Path | None, pure: bool, slot: int, workdir: Path,
            timeout: float = UDP_TIMEOUT_S, tss: bool = False) -> tuple[dict, str]:
    """(failing cases, problem) of ``uet conformance`` (the real package) against two
    ``uet serve`` started from the copy (None: from the real package); ``tss``: also the
    TSS cases against a secured ``uet serve`` (:func:`run_udp_tss`)."""
    if tss:
        bad, problem = run_udp_tss(copy_root, pure, slot, workdir, timeout)
        if problem:
            return bad, problem
        plain, problem = run_udp(copy_root, pure, slot, workdir, timeout)
        return {**plain, **bad}, problem
    hpc_ip, base_ip, peer_net = udp_addresses(slot)
    setup = workdir / "setup.json"
    servers: list[_Serve] = []
    try:
        servers.append(_Serve(copy_root, hpc_ip, pure, "--setup-out", str(setup)))
        servers.append(_Serve(copy_root, base_ip, pure, "--profile", "ai-base"))
        report = workdir / "udp.json"
        proc = subprocess.run(
            [sys.executable, "-m", "uet.cli", "conformance", "--dut", f"udp:{hpc_ip}:4793",
             "--dut", f"udp:{base_ip}:4793@ai-base", "--setup", str(setup), "--peer-net",
             peer_net, "--json", str(report), "--capture-dir", str(workdir / "caps")],
            capture_output=True, text=True, timeout=timeout, cwd=workdir,
            env=_env(None, False))
    except subprocess.TimeoutExpired:
        return {}, f"timeout after {timeout:.0f} s"
    except RuntimeError as exc:
        return {}, str(exc)
    finally:
        for s in servers:
            s.stop()
    return _report(report, proc)


def run_one(mutant: Mutant | None, slot: int, udp: bool,
            cases: Sequence[str] | None = None) -> Outcome:
    """Copy, mutate, run in process (and over UDP when asked)."""
    t0 = time.perf_counter()
    out = Outcome(mutant)
    pure = mutant is not None and (mutant.pure or mutant.path in C_CORE_FILES)
    with tempfile.TemporaryDirectory(prefix="uet-mutant-") as tmp:
        work = Path(tmp)
        copy_root = make_copy(mutant, work / "pkg")
        out.inprocess, out.problem = run_inprocess(copy_root, pure, cases)
        if udp:
            (work / "udp").mkdir()
            tss = mutant is None or mutant.area == "TSS"
            out.udp, out.udp_problem = run_udp(copy_root, pure, slot, work / "udp", tss=tss)
    out.seconds = time.perf_counter() - t0
    return out


def run_mutants(mutants: Sequence[Mutant], *, jobs: int = 2, udp: bool = True,
                cases: Sequence[str] | None = None) -> tuple[Outcome, list[Outcome]]:
    """The unmutated baseline, then every mutant (``jobs`` at a time). Raises PatchError
    before running anything if a mutant no longer applies."""
    check_all_apply(mutants)
    any_udp = udp and any(m.udp for m in mutants)
    baseline = run_one(None, 0, any_udp, cases)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_one, m, 1 + i % 40, udp and m.udp, cases)
                   for i, m in enumerate(mutants)]
        outcomes = [f.result() for f in futures]
    return baseline, outcomes


# ---------------------------------------------------------------------------- reporting

def _short(ids: Iterable[str], limit: int = 6) -> str:
    ids = sorted(ids)
    if len(ids) <= limit:
        return ", ".join(ids)
    return ", ".join(ids[:limit]) + f" (+{len(ids) - limit} more)"


def killed_by(o: Outcome) -> str:
    where = []
    if o.killed_inprocess:
        where.append("in process")
    if o.udp is not None or o.udp_problem:
        where.append("udp" if o.killed_udp else "(udp: survived)")
    return ", ".join(where) if o.killed else "SURVIVED"


def cases_text(o: Outcome) -> str:
    parts = []
    if o.problem:
        parts.append(o.problem)
    if o.inprocess:
        parts.append(_short(o.inprocess))
    if o.udp is not None:
        extra = set(o.udp) - set(o.inprocess)
        if o.udp_problem:
            parts.append(f"udp: {o.udp_problem}")
        elif extra:
            parts.append(f"udp also: {_short(extra)}")
        elif o.udp and not o.inprocess:
            parts.append(f"udp: {_short(o.udp)}")
    return "; ".join(parts) or "-"


def target_misses(outcomes: Sequence[Outcome]) -> list[tuple[str, str]]:
    """(case, mutant) pairs where a case written for a mutant did not fail on it."""
    miss = []
    for o in outcomes:
        m = o.mutant
        assert m is not None
        failed = set(o.inprocess) | set(o.udp or {})
        for case_id in m.targets:
            if case_id not in failed:
                miss.append((case_id, m.name))
    return miss


def table(outcomes: Sequence[Outcome]) -> list[str]:
    rows = [("mutant", "area", "killed by", "cases")]
    for o in outcomes:
        assert o.mutant is not None
        rows.append((o.name, o.mutant.area, killed_by(o), cases_text(o)))
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"| {r[0]:<{w[0]}} | {r[1]:<{w[1]}} | {r[2]:<{w[2]}} | {r[3]} |" for r in rows]
    lines.insert(1, f"|{'-' * (w[0] + 2)}|{'-' * (w[1] + 2)}|{'-' * (w[2] + 2)}|---|")
    return lines


def target_table(outcomes: Sequence[Outcome]) -> list[str]:
    lines = ["| new case | the bug it targets | fails on it |", "|---|---|---|"]
    for o in outcomes:
        assert o.mutant is not None
        failed = set(o.inprocess) | set(o.udp or {})
        for case_id in o.mutant.targets:
            where = []
            if case_id in o.inprocess:
                where.append("in process")
            if o.udp and case_id in o.udp:
                where.append("udp")
            lines.append(f"| {case_id} | {o.name} | "
                         f"{'yes (' + ', '.join(where) + ')' if case_id in failed else 'NO'} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-j", "--jobs", type=int, default=2, help="mutants run at once (2)")
    ap.add_argument("--no-udp", action="store_true", help="skip the UDP subset")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--json", metavar="FILE", help="write every outcome as JSON")
    args = ap.parse_args(argv)
    mutants = MUTANTS
    if args.only:
        names = {m.name for m in MUTANTS}
        unknown = sorted(set(args.only) - names)
        if unknown:
            ap.error(f"--only: no mutant named {', '.join(unknown)} (see --list)")
        mutants = [m for m in MUTANTS if m.name in set(args.only)]
    if args.list:
        for m in mutants:
            flags = " [udp]" if m.udp else ""
            print(f"{m.name:<32} {m.area:<9} uet/{m.path}: {m.doc}{flags}")
        print(f"{len(mutants)} mutants")
        return 0
    t0 = time.perf_counter()
    try:
        baseline, outcomes = run_mutants(mutants, jobs=args.jobs, udp=not args.no_udp)
    except PatchError as exc:
        print(f"conformance_mutants: {exc}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - t0
    if baseline.killed:
        print("the unmutated end point fails the catalogue, nothing to measure:",
              cases_text(baseline), file=sys.stderr)
        return 2
    for line in table(outcomes):
        print(line)
    print()
    misses = target_misses(outcomes)
    if any(o.mutant is not None and o.mutant.targets for o in outcomes):
        for line in target_table(outcomes):
            print(line)
        print()
    single = sorted(o.name for o in outcomes if len(set(o.inprocess) | set(o.udp or {})) == 1)
    if single:
        print(f"{len(single)} mutants are killed by exactly one case (a rule resting on one "
              f"case): {', '.join(single)}")
    udp_n = sum(1 for o in outcomes if o.udp is not None)
    print(f"baseline: every case passes in process"
          f"{' and over UDP against uet serve' if baseline.udp is not None else ''}; "
          f"{udp_n} mutants also run over UDP; jobs {args.jobs}; wall {wall:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps([
            {"mutant": o.name, "area": o.mutant.area if o.mutant else "", "killed": o.killed,
             "inprocess": o.inprocess, "udp": o.udp, "problem": o.problem,
             "udp_problem": o.udp_problem, "seconds": round(o.seconds, 1)}
            for o in outcomes], indent=1))
    if misses:
        for case_id, name in misses:
            print(f"new case {case_id} does not fail on its target mutant {name}",
                  file=sys.stderr)
    killed = sum(o.killed for o in outcomes)
    print(f"killed {killed} of {len(outcomes)} mutants")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
