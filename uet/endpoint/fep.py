"""``FabricEndpoint``: one fabric end point (FEP), SES + PDS + CMS, speaking Ethernet frames.

Still sans-IO: the fabric's NIC (or a real UDP socket driver, or a conformance harness)
hands it received frames and asks it for frames to send; every call takes ``now`` in
integer picoseconds. This module is only glue: the SES decides what to send and how to
answer, the PDS how to deliver it, the CMS which path and how fast; the codec turns records
into bytes and back.

Application-facing operations take ``now`` first and return the SES
:class:`~uet.ses.initiator.Operation` (or receive) handle; the Trio API in
:mod:`uet.runtime.host` awaits them.
"""

from __future__ import annotations

import copy
import heapq
import random
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from uet.cms.api import CmsConfig
from uet.cms.factory import make_credit_scheduler, make_receiver, make_sender
from uet.endpoint.config import (
    as_profile,
    cms_config_from_profile,
    pds_config_from_profile,
    tss_defaults_from_profile,
)
from uet.endpoint.peers import PeerCaps, book
from uet.pds.config import PdsConfig
from uet.pds.endpoint import PdsEndpoint
from uet.pds.events import (
    MessageFailed,
    PdcClosed,
    PdcOpened,
    PeerNegotiated,
    RequestDelivered,
    ResponseReceived,
    SendMessage,
    SendRequest,
)
from uet.pds.invariants import progress_bound
from uet.profiles import Profile
from uet.ses.endpoint import SesEndpoint
from uet.ses.initiator import Operation
from uet.ses.memory import Perm
from uet.ses.messages import OpCompleted, OutMessage, RecvCompleted, TargetAddr, TargetReply
from uet.ses.segmentation import zeros
from uet.tss.config import TssConfig
from uet.tss.sublayer import TssSublayer, frame_is_secured, is_secured
from uet.wire.codec import decode_frame, decode_uet, encode_frame, encode_uet
from uet.wire.constants import (
    UET_DEFAULT_IP_PROTO,
    DeliveryMode,
    NackCode,
    ReturnCode,
    SesFlag,
    SesOpcode,
    enum_member,
)
from uet.wire.errors import DecodeError, EncodeError
from uet.wire.records import Frame, SesResponseData, SesResponseDataSmall, SesStandard

#: Resource index of the "sink" region every FEP exposes for bulk transfers (experiments).
SINK_INDEX = 0x7FF
#: Memory key of the sink region.
SINK_KEY = 0x5155_4E4B  # "QUNK"
#: encapsulations an end point speaks (ref 1.2, 1.3)
ENCAPS = ("udp", "native-ip")

_MISMATCH = -1  # _isolate: the packet was NACKed PDC_HDR_MISMATCH, nothing to deliver
_RSP_DATA_HEADERS = (SesResponseData, SesResponseDataSmall)

# plain ints for per-packet tests (an IntFlag "&" costs ~1 us)
_SOM = int(SesFlag.SOM)
_READ = int(SesOpcode.READ)
#: messages of up to this many packets keep their offsets in a bitmap (128 KiB at most)
_AUDIT_BITMAP_MAX = 1 << 20


class DeliveryAudit:
    """Independent check that no request packet reaches the SES twice.

    The PDS promises exactly-once delivery (RUD, ROD; RUDI answers duplicates from its response
    cache; UUD promises nothing, so a datagram the network duplicated counts); this counts any
    breach (``duplicates``) without trusting it. Standard-header packets are keyed by (source,
    target PDC, initiator, job, message ID, opcode) and the byte offset they cover (for READ
    requests: the slice they ask for). A message leaves the in-progress table once all its
    bytes were seen and goes to a FIFO of ``history`` finished keys, so a late copy of a
    finished message counts too. Medium and small headers carry no message ID and are not
    audited. State is bounded by ``max_messages`` + ``history``.
    """

    # slots: the FEP core (uet/native/fep_core.c) does ``see`` on them
    __slots__ = ("max_messages", "history", "mtu_payload", "messages", "finished",
                 "duplicates", "seen", "flow_of", "flow_bytes", "flow_dups")

    def __init__(self, max_messages: int = 65536, history: int = 4096,
                 mtu_payload: int = 4096) -> None:
        self.max_messages = max_messages
        self.history = history
        self.mtu_payload = mtu_payload
        self.messages: dict[tuple, list] = {}  # key -> [offset bitmap, bytes, other offsets]
        self.finished: dict[tuple, None] = {}
        self.duplicates = 0
        self.seen = 0
        #: per-flow accounting (:meth:`count_flows`, for experiments): (source IP, message
        #: ID) -> flow ID; None: off. With it, every packet seen counts its bytes to its
        #: flow (``flow_bytes``) or, a duplicate, one to ``flow_dups``.
        self.flow_of: dict[tuple[str, int], int] | None = None
        self.flow_bytes: Counter[int] = Counter()
        self.flow_dups: Counter[int] = Counter()

    def count_flows(self) -> dict[tuple[str, int], int]:
        """Switch the per-flow accounting on (from now, with empty counts); returns the
        ``flow_of`` table to fill: (source IP, message ID) -> flow ID."""
        self.flow_of = {}
        self.flow_bytes = Counter()
        self.flow_dups = Counter()
        return self.flow_of

    def see(self, src: str, ses: Any, nbytes: int, conn: int = 0) -> bool:
        """Record one delivered request packet (``conn``: the target PDC it came on, which
        scopes message IDs); returns False if it is a duplicate."""
        flows = self.flow_of
        if type(ses) is not SesStandard:
            if flows is not None:
                fid = flows.get((src, getattr(ses, "message_id", -1)))
                if fid is not None:
                    self.flow_bytes[fid] += nbytes
            return True
        self.seen += 1
        mid = ses.message_id
        offset = 0 if ses.flags & _SOM else ses.message_offset
        op = ses.opcode
        size = nbytes  # the flow counts the packet's bytes, the audit a READ's slice
        if op == _READ:
            nbytes = max(0, min(self.mtu_payload, ses.request_length - offset))
        key = (src, conn, ses.initiator, ses.job_id, mid, op)
        messages = self.messages
        # a key in progress is never in the finished FIFO (its packets are duplicates
        # there): that FIFO is only looked at for a key not in progress
        entry = messages.get(key)
        new = entry is None
        if new:
            if key in self.finished:
                return self._duplicate(flows, src, mid)
            if len(messages) >= self.max_messages:
                messages.pop(next(iter(messages)))
            # [offsets seen as a bitmap of offset // MTU (one bit per packet-aligned offset,
            # the usual case: a 2 MB message costs 62 bytes where a set of its 489 offsets
            # cost ~32 KiB, cold at a thousand hosts), bytes seen, other offsets or None]
            span = ses.request_length // self.mtu_payload + 1
            entry = [bytearray((span + 7) >> 3 if span <= _AUDIT_BITMAP_MAX else 0), 0, None]
        q, r = divmod(offset, self.mtu_payload)
        bitmap = entry[0]
        if not r and q >> 3 < len(bitmap):
            i = q >> 3
            bit = 1 << (q & 7)
            if bitmap[i] & bit:
                return self._duplicate(flows, src, mid)
            bitmap[i] |= bit
        else:
            others = entry[2]
            if others is None:
                others = entry[2] = set()
            if offset in others:
                return self._duplicate(flows, src, mid)
            others.add(offset)
        if flows is not None:
            fid = flows.get((src, mid))
            if fid is not None:
                self.flow_bytes[fid] += size
        got = entry[1] + nbytes
        if got >= ses.request_length:
            if not new:
                del messages[key]
            finished = self.finished
            finished[key] = None
            if len(finished) > self.history:
                finished.pop(next(iter(finished)))
        else:
            entry[1] = got  # updated in place: the entry keeps its place in the FIFO
            if new:
                messages[key] = entry
        return True

    def _duplicate(self, flows: dict[tuple[str, int], int] | None, src: str,
                   mid: int) -> bool:
        self.duplicates += 1
        if flows is not None:
            fid = flows.get((src, mid))
            if fid is not None:
                self.flow_dups[fid] += 1
        return False


class BulkMessage:
    """Handle of a bulk transfer started with :meth:`FabricEndpoint.send_message`."""

    __slots__ = ("op", "src", "dst", "size", "start_ps", "end_ps")

    def __init__(self, op: Operation, src: str, dst: str, size: int, start_ps: int) -> None:
        self.op = op
        self.src = src
        self.dst = dst
        self.size = size
        self.start_ps = start_ps
        self.end_ps: int | None = None

    @property
    def done(self) -> bool:
        return self.op.done

    @property
    def ok(self) -> bool:
        return self.op.done and self.op.return_code == 1

    @property
    def fct_ps(self) -> int | None:
        return None if self.end_ps is None else self.end_ps - self.start_ps


class FabricEndpoint:
    """SES + PDS + CMS of one end point behind a frame interface (the fabric's
    ``FrameEndpoint``: ``receive``, ``pop_control``, ``pop_data``, ``next_deadline``,
    ``handle_timer``)."""

    # what the FEP core (uet/native/fep_core.c) reads per frame, at fixed offsets; every
    # other attribute lives in the instance dict
    __slots__ = ("tss", "counters", "pds", "ses", "mac", "peer_macs", "gateway_mac",
                 "_frame_encap", "_later", "audit", "__dict__", "__weakref__")

    def __init__(self, *, ip: str, mac: str = "02:00:00:00:00:01",
                 profile: Profile | str = "ai-base",
                 pds: PdsConfig | None = None, cms: CmsConfig | None = None,
                 seed: int = 0, peers: dict[str, str] | None = None,
                 gateway_mac: str = "02:ff:00:00:00:01", job_id: int = 1,
                 pid_on_fep: int = 0, initiator_id: int | None = None,
                 mode: DeliveryMode | None = None, tc: int = 0,
                 log: Callable[..., None] | None = None,
                 sink_bytes: int = 0, sink_buffer: bytearray | None = None,
                 keep_completions: int = 0, encap: str = "udp",
                 ip_proto: int = UET_DEFAULT_IP_PROTO,
                 tss: TssConfig | dict[str, Any] | None = None) -> None:
        self.profile = as_profile(profile)
        if encap not in ENCAPS:
            raise ValueError(f"encap={encap!r}: allowed {', '.join(ENCAPS)}")
        if not 0 <= ip_proto <= 255 or ip_proto in (6, 17):
            raise ValueError(f"ip_proto={ip_proto!r}: allowed 0..255 except TCP (6) and "
                             "UDP (17)")
        #: 'udp' (UDP port 4793, the EV in the source port) or 'native-ip' (the 4-byte
        #: entropy header right after IP, protocol ``ip_proto``; ref 1.3)
        self.encap = encap
        self.ip_proto = ip_proto
        self._frame_encap = "ip" if encap == "native-ip" else "udp"
        self.ip = ip
        self.mac = mac
        self.gateway_mac = gateway_mac
        self.peer_macs: dict[str, str] = dict(peers or {})
        self.job_id = job_id
        self.tc = tc
        self.mode = (enum_member(DeliveryMode, mode, "mode") if mode is not None
                     else self.profile.default_mode)
        self.log_hook = log
        self.rng = random.Random(seed)
        self.pds_config = pds or pds_config_from_profile(self.profile)
        self.cms_config = cms or cms_config_from_profile(self.profile)
        cms_rng = random.Random(self.rng.getrandbits(64))
        credit = None
        if "rccc" in self.cms_config.algorithm:
            credit = make_credit_scheduler(self.cms_config)
        self.credit_scheduler = credit
        cms_cfg = self.cms_config
        self.pds = PdsEndpoint(
            self.pds_config, ip, random.Random(self.rng.getrandbits(64)),
            sender_cc=lambda m: make_sender(cms_cfg, cms_rng, ordered=m == DeliveryMode.ROD),
            receiver_cc=lambda key: make_receiver(cms_cfg, credit, key=key),
            credit_scheduler=credit, log=log, acked_events=False)
        self.pds.capabilities = int(self.profile.fep_cap)
        #: guaranteed responses due later (DC requests answered NO_RESPONSE first):
        #: a heap of (due ps, seq, token, reply); bounded by the PDS's open tokens
        self._later: list[tuple[int, int, int, Any]] = []
        self._later_seq = 0
        if initiator_id is None:
            initiator_id = _ip_id(ip)
        self.ses = SesEndpoint(self.profile, address=ip, initiator_id=initiator_id,
                               pid_on_fep=pid_on_fep)
        # a message's packets may legitimately be as far apart as the PDS takes to give up
        # on one of them: the SES waits at least that long before abandoning it
        self._pds_deadline = self.pds.next_deadline
        bound = progress_bound(self.pds_config)
        if self.ses.timeouts.reassembly_ps < bound:
            self.ses.timeouts.reassembly_ps = bound
        # resource index 0 of the end point's job and process always exists, so that sends
        # arriving before any receive is posted go to its unexpected list (not BAD_INDEX)
        self.ses.resources.register(job_id, pid_on_fep, 0)
        self.audit = DeliveryAudit(mtu_payload=self.profile.ses.mtu_payload)
        self.counters: Counter = Counter()
        # the Transport Security Sublayer and job isolation (docs/tss.md): secured frames
        # are opened before, and sealed after, the PDS; None without domains or a
        # job-sources table (cleartext UET, any job, as before)
        tss_cfg = tss if isinstance(tss, TssConfig) else TssConfig.from_dict(
            tss, defaults=tss_defaults_from_profile(self.profile))
        self.tss: TssSublayer | None = None
        if tss_cfg.enabled:
            self.tss = TssSublayer(tss_cfg, ip, log=log, trimmed_dscps=(
                self.pds_config.dscp_trimmed, self.pds_config.dscp_trimmed_lasthop))
        #: the latest ``keep_completions`` completion events (OpCompleted / RecvCompleted),
        #: for callers that poll; 0 (the default) keeps none, so a long-running end point
        #: (``uet serve``) does not hold every receive buffer it ever completed. Callers
        #: that want every completion set ``on_complete``.
        self.completions: deque = deque(maxlen=keep_completions)
        self.messages: list[BulkMessage] = []
        self._open_bulk: dict[int, BulkMessage] = {}
        self.on_complete: Callable[[Any], None] | None = None
        self.sink: bytearray | None = None
        if sink_buffer is not None:
            # a scratch buffer shared with other end points (``factory(shared_sink=True)``):
            # bulk data is checked, counted and audited, but not kept (a scratch region)
            self.sink = sink_buffer
            self._register_sink(store=False)
        if sink_bytes:
            self.expose_sink(sink_bytes)

    # ------------------------------------------------------------------ construction

    @classmethod
    def factory(cls, **kwargs: Any) -> Callable[[Any], FabricEndpoint]:
        """An ``endpoint_factory(ctx)`` for :class:`uet.runtime.fabric.Fabric`.

        Data is sent with the fabric's trimmable DSCP, and trimmed packets are recognised by
        the fabric's trimmed code points (``ctx.qos``). ``kwargs`` go to the constructor;
        ``pds_overrides`` / ``cms_overrides`` dicts adjust the profile's settings per fabric
        (the link rate is taken from the host link). ``shared_sink=True`` gives every end
        point the same sink buffer (``sink_bytes`` long, grown in place), registered as a
        scratch region (``MemoryRegion.store`` False): bulk WRITEs pass every SES check and
        are counted and audited as usual, but their bytes are not copied in, and memory no
        longer grows by ``sink_bytes`` per host (what an experiment that does not read the
        data back wants; a READ of it gives zeros). ``host_profiles`` maps host indices to
        a different profile than ``profile``; every end point knows every peer's
        ``fep_cap`` (as it would from the peer's UET address), so operations a peer's
        profile refuses fail at once at the initiator. ``tss`` (a :class:`TssConfig` or
        its dict) secures every host; ``host_tss`` maps host indices to their own; a
        domain's ``ssi = "auto"`` becomes the host index + 1 (every member its own SSI).
        """
        if kwargs.get("mode") is not None:  # "ROD" as well as DeliveryMode.ROD, checked now
            kwargs["mode"] = enum_member(DeliveryMode, kwargs["mode"], "mode")
        pds_over = dict(kwargs.pop("pds_overrides", None) or {})
        cms_over = dict(kwargs.pop("cms_overrides", None) or {})
        default = as_profile(kwargs.pop("profile", "ai-base"))
        shared = None
        if kwargs.pop("shared_sink", False):
            shared = bytearray(kwargs.pop("sink_bytes", 0))
        per_host = {int(i): as_profile(p)
                    for i, p in (kwargs.pop("host_profiles", None) or {}).items()}
        tss_default = kwargs.pop("tss", None)
        tss_hosts = {int(i): t for i, t in (kwargs.pop("host_tss", None) or {}).items()}
        for t in (tss_default, *tss_hosts.values()):  # a bad TSS key fails here, once
            _host_tss(t, 0)
        book_cache: dict[int, Any] = {}
        # configurations are checked once, here, so that a bad key fails before any host
        for prof in {id(p): p for p in (default, *per_host.values())}.values():
            pds_config_from_profile(prof, pds_over)
            cms_config_from_profile(prof, cms_over)

        # the configurations made so far, by profile and what the host adds: every host
        # gets its own copy of one (hosts of a fabric mostly share profile, QoS and rate)
        pds_made: dict[tuple[int, tuple[int, ...]], PdsConfig] = {}
        cms_made: dict[tuple[int, int], CmsConfig] = {}

        def make(ctx: Any) -> FabricEndpoint:
            profile = per_host.get(ctx.index, default)
            qos = ctx.qos
            fixed = {"dscp_data": qos.dscp_data, "dscp_control": qos.dscp_control,
                     "dscp_trimmed": qos.dscp_trimmed,
                     "dscp_trimmed_lasthop": qos.dscp_trimmed_lasthop}
            pkey = (id(profile), tuple(fixed.values()))
            made = pds_made.get(pkey)
            if made is None:
                made = pds_made[pkey] = pds_config_from_profile(profile, pds_over, **fixed)
            pds_cfg = copy.copy(made)
            ckey = (id(profile), ctx.rate_bps)
            cmade = cms_made.get(ckey)
            if cmade is None:
                cmade = cms_made[ckey] = cms_config_from_profile(
                    profile, cms_over, link_rate_bps=ctx.rate_bps)
            cms_cfg = copy.copy(cmade)
            if "extra" not in cms_over:  # a dict of its own, as a new CmsConfig has
                cms_cfg.extra = {}
            books = book(book_cache, ctx.peers,
                         lambda i: per_host.get(i, default).fep_cap)
            kw = dict(kwargs)
            if shared is not None:
                kw["sink_buffer"] = shared
            else:
                kw.setdefault("sink_bytes", 0)
            kw["tss"] = _host_tss(tss_hosts.get(ctx.index, tss_default), ctx.index)
            ep = cls(ip=ctx.ip, mac=ctx.mac, profile=profile, pds=pds_cfg, cms=cms_cfg,
                     seed=ctx.seed, gateway_mac=ctx.gateway_mac, log=_host_log(ctx), **kw)
            # the fabric's address book, shared by every end point (uet/endpoint/peers.py)
            ep.peer_macs = books.macs
            ep.ses.initiator.peer_caps = PeerCaps(books.caps, ctx.ip)
            ep.host_index = ctx.index
            ep.peer_ips = books.ips
            return ep

        return make

    def expose_sink(self, nbytes: int) -> None:
        """Register a writable region every peer may write bulk data into (experiments).

        Calling it again grows the region in place (it never shrinks)."""
        if self.sink is not None:
            if nbytes > len(self.sink):
                self.sink.extend(bytes(nbytes - len(self.sink)))
            return
        self.sink = bytearray(nbytes)
        self._register_sink()

    def _register_sink(self, store: bool = True) -> None:
        assert self.sink is not None
        self.ses.resources.add_region(self.job_id, self.ses.pid_on_fep, SINK_INDEX, SINK_KEY,
                                      self.sink, Perm.WRITE | Perm.READ, store=store)

    def ensure_sink(self, nbytes: int) -> None:
        """Make the sink hold at least ``nbytes`` (``Fabric.send`` calls it on the
        destination before a bulk transfer)."""
        if self.sink is None or len(self.sink) < nbytes:
            self.expose_sink(nbytes)

    # ------------------------------------------------------------------ FrameEndpoint

    def receive(self, now: int, data: bytes) -> None:
        """A frame arrived from the wire: decode it (TSS: authenticate and decrypt first),
        run the PDS, let the SES answer."""
        try:
            if len(data) > 42 and data[12] == 8 and not data[13] and data[14] == 0x45 \
                    and data[23] == 17:
                # IPv4 without options, UDP: frame_is_secured's answer, inline (per frame)
                secured = data[42] >> 3 == 1
            else:
                secured = frame_is_secured(data, ip_proto=self.ip_proto)
            if secured:
                if self.tss is None:
                    self._unsecured_tss(now)
                    return
                frame = self.tss.open_frame(now, data, self.ip_proto)
                if frame is None:
                    return  # refused by the TSS: counted and logged there
                self._receive(now, frame)
                return
            frame = decode_frame(data, udp_port=None, ip_proto=self.ip_proto)
        except DecodeError as exc:
            self._decode_error(now, exc)
            return
        self.receive_frame(now, frame)

    def receive_uet(self, now: int, payload: bytes, **fields: Any) -> bool:
        """The UET bytes of a datagram (what follows the UDP header; ``fields``: ``src_ip``,
        ``dst_ip``, ``ev`` (the source port), ``dscp``, ``ecn`` ... of the envelope);
        False when they do not decode (counted)."""
        try:
            if is_secured(payload):
                if self.tss is None:
                    self._unsecured_tss(now)
                    return True
                frame = self.tss.open_uet(now, payload, **fields)
                if frame is not None:
                    self._receive(now, frame)
                return True
            frame = decode_uet(payload, **fields)
        except DecodeError as exc:
            self._decode_error(now, exc)
            return False
        self.receive_frame(now, frame)
        return True

    def receive_frame(self, now: int, frame: Frame) -> None:
        """A decoded cleartext frame (drivers that decode themselves). A frame carrying a
        TSS header here was not authenticated: it is dropped (``receive`` and
        ``receive_uet`` open secured frames)."""
        if frame.tss is not None:
            self._unsecured_tss(now)
            return
        if self.tss is not None and not self.tss.accept_cleartext(now, frame):
            return
        self._receive(now, frame)

    def _receive(self, now: int, frame: Frame) -> None:
        self.counters["rx_frames"] += 1
        self.pds.receive(now, frame)
        self.pump(now)

    def _unsecured_tss(self, now: int) -> None:
        """A TSS frame where no domain can open it: never handed on as cleartext."""
        self.counters["rx_tss_without_domain"] += 1
        if self.log_hook is not None:
            self.log_hook(now, "tss_refused", direction="rx", reason="no_tss",
                          detail="TSS frame at an end point without secure domains")

    def _decode_error(self, now: int, exc: DecodeError) -> None:
        self.counters["rx_decode_error"] += 1
        self.counters[f"rx_decode_error.{exc.header}"] += 1
        if self.log_hook is not None:
            self.log_hook(now, "decode_error", error=str(exc))

    def pop_control(self, now: int) -> bytes | None:
        if not self.pds.control_pending():
            return None  # the NIC asks before every frame; most of the time there is none
        return self._pop(now, True, "tx_control")

    def pop_data(self, now: int) -> bytes | None:
        return self._pop(now, False, "tx_data")

    def _pop(self, now: int, control: bool, counter: str) -> bytes | None:
        """The next frame of a class as bytes (a frame its domain refuses to seal is
        counted there and skipped)."""
        poll = self.pds.poll_transmit
        while True:
            frame = poll(now, control)
            if frame is None:
                return None
            self.counters[counter] += 1
            data = self._encode(now, frame)
            if data is not None:
                return data

    def poll_frame(self, now: int) -> Frame | None:
        """Next frame as a record, control class first (for drivers without a NIC). A
        frame of a secured PDC comes with its ``tss`` marker: encode it with
        :meth:`poll_uet` (which seals it), never as cleartext."""
        frame = self.pds.poll_transmit(now, True)
        if frame is None:
            frame = self.pds.poll_transmit(now, False)
        if frame is not None:
            frame.src_mac = self.mac
            frame.dst_mac = self.peer_macs.get(frame.dst_ip, self.gateway_mac)
        return frame

    def poll_uet(self, now: int) -> tuple[Frame, bytes] | None:
        """Next frame and its UET bytes (what a UDP socket sends; sealed when the frame
        belongs to a secure domain), control class first."""
        while True:
            frame = self.poll_frame(now)
            if frame is None:
                return None
            if frame.tss is None:
                try:
                    return frame, encode_uet(frame)
                except EncodeError:
                    self.counters["tx_encode_error"] += 1
                    continue
            if self.tss is not None:
                data = self.tss.seal_uet(now, frame)
                if data is not None:
                    return frame, data

    def next_deadline(self) -> int | None:
        d = self._pds_deadline()  # the NIC asks after every frame: one bound call
        s = self.ses.deadline
        if s is not None and (d is None or s < d):
            d = s
        if self._later:
            t = self._later[0][0]
            if d is None or t < d:
                return t
        return d

    def handle_timer(self, now: int) -> None:
        self.pds.handle_timer(now)
        s = self.ses.deadline
        if s is not None and s <= now:
            self.ses.handle_timer(now)
        later = self._later
        while later and later[0][0] <= now:
            _, _, token, reply = heapq.heappop(later)
            self.counters["dc_responses"] += 1
            self.pds.respond(now, token, reply.response, reply.data)
        self.pump(now)

    def _encode(self, now: int, frame: Frame) -> bytes | None:
        frame.src_mac = self.mac
        frame.dst_mac = self.peer_macs.get(frame.dst_ip, self.gateway_mac)
        if self._frame_encap != "udp":
            frame.encap = self._frame_encap
            frame.ip_proto = self.ip_proto
        if frame.tss is None:
            return encode_frame(frame)
        if self.tss is None:  # cannot happen: only a domain marks frames
            self.counters["tx_tss_without_domain"] += 1
            return None
        return self.tss.seal_frame(now, frame)

    # ------------------------------------------------------------------ glue

    def pump(self, now: int) -> None:
        """Move events between PDS and SES until both are quiet."""
        pds, ses = self.pds, self.ses
        ses.now = now
        next_event = pds.next_event
        # the queues behind them: an empty one is not polled (this runs after every frame)
        pds_events, ses_out, ses_done = pds.events, ses.outq, ses.events
        while True:
            moved = False
            ev = next_event() if pds_events else None
            while ev is not None:
                moved = True
                # (no PacketAcked: nothing for the SES to do, so the PDS makes none)
                if type(ev) is RequestDelivered:
                    self.deliver(now, ev)
                else:
                    self._pump_event(now, ev)
                ev = next_event()
            if ses_out and self._pump_ses(now):
                moved = True
            if ses_done and self._pump_done(now):
                moved = True
            if not moved:
                return

    def _pump_event(self, now: int, ev: Any) -> None:
        """A PDS event other than a delivered request (the pump's)."""
        ses = self.ses
        t = type(ev)
        if t is ResponseReceived:
            ses.initiator.on_response(ev.msg_ref, ev.ses, ev.payload, now=now)
        elif t is MessageFailed:
            ses.initiator.on_failed(ev.msg_ref, ev.reason, now=now)
        elif t is PdcOpened:
            self.counters[f"pdc_opened.{ev.role}"] += 1
        elif t is PeerNegotiated:
            # what the peer's NEGOTIATION says beats the address book
            self.counters["peer_negotiated"] += 1
            if ev.fep_cap:
                ses.initiator.set_peer_cap(ev.peer_ip, ev.fep_cap)
        elif t is PdcClosed:
            self.counters[f"pdc_closed.{ev.role}"] += 1
            if ev.error:
                self.counters[f"pdc_closed_in_error.{ev.role}"] += 1
            if ev.role == "target":  # its messages in progress can never finish
                ses.target.connection_closed(now, ev.pdc_id)

    def _pump_ses(self, now: int) -> bool:
        """The SES's outgoing packets and messages to the PDS (the pump's); True if any."""
        pds, ses, tss = self.pds, self.ses, self.tss
        moved = False
        while (pkt := ses.poll_message()) is not None:
            moved = True
            sdi = tss.domain_for_job(pkt.job_id) if tss is not None else None
            if type(pkt) is OutMessage:  # a whole message: its packets made as sent
                pds.submit(now, SendMessage(pkt.dst, pkt.mode, pkt.job_id, pkt.tc, pkt.ext,
                                            pkt.count, pkt.nbytes, pkt.max_payload,
                                            pkt.next_part, sdi))
            else:
                pds.submit(now, SendRequest(pkt.dst, pkt.mode, pkt.job_id, pkt.tc,
                                            pkt.ses, pkt.ext, pkt.payload, pkt.msg_ref,
                                            pkt.eom, sdi))
        return moved

    def _pump_done(self, now: int) -> bool:
        """The SES's completions (the pump's); True if any."""
        moved = False
        while (done := self.ses.next_event()) is not None:
            moved = True
            self._completed(now, done)
        return moved

    def deliver(self, now: int, ev: RequestDelivered) -> None:
        """Hand one delivered request to the SES and its answer back to the PDS (the pump
        does this for every ``RequestDelivered``; tests may inject one bypassing the PDS,
        with ``token`` 0 when no answer is wanted)."""
        if ev.ses is None:
            self.counters["rx_request_without_ses"] += 1
            return
        refuse = None
        if self.tss is not None:
            refuse = self._isolate(now, ev)
            if refuse == _MISMATCH:
                return
        # positional (a keyword call costs more, per packet)
        reply = self.ses.target.handle(ev.src_ip, ev.ses, ev.ext, ev.payload, ev.mode,
                                       ev.psn, ev.pdc_id, now, refuse)
        if reply.nack is None:
            # a refused packet counts as never delivered: its retransmission is no duplicate
            self.audit.see(ev.src_ip, ev.ses, len(ev.payload), ev.pdc_id)
        if not ev.token:
            return
        if reply.nack is not None:
            self.pds.reject(now, ev.token, reply.nack)
            return
        self.pds.respond(now, ev.token, reply.response, reply.data)
        if reply.later is not None:  # NO_RESPONSE now, the real response after a delay
            self._defer(now, ev.token, reply)

    def _defer(self, now: int, token: int, reply: TargetReply) -> None:
        """Give the PDS ``reply.later`` for ``token`` ``reply.delay_ps`` from now."""
        self._later_seq += 1
        heapq.heappush(self._later, (now + reply.delay_ps, self._later_seq, token,
                                     reply.later))

    def _isolate(self, now: int, ev: RequestDelivered) -> int | None:
        """Job isolation (docs/tss.md): the job a request names must be the job of the
        secure domain it came in (cleartext: one the job-sources table allows its source
        address, never a secured job), else BAD_JOB_ID; and the job of the PDC it came on,
        else the packet is NACKed PDC_HDR_MISMATCH (a PDC carries one job) and dropped."""
        assert self.tss is not None
        job = getattr(ev.ses, "job_id", None)
        if job is None:
            return None
        if not self.tss.job_allowed(ev.src_ip, job, ev.sdi):
            self.counters["rx_job_refused"] += 1
            if self.log_hook is not None:
                self.log_hook(now, "job_refused", peer=ev.src_ip, job=job, sdi=ev.sdi,
                              code="BAD_JOB_ID")
            return int(ReturnCode.BAD_JOB_ID)
        pdc = self.pds.pdc(ev.pdc_id) if ev.pdc_id else None
        if pdc is not None and not isinstance(ev.ses, _RSP_DATA_HEADERS):
            if pdc.job is None:
                pdc.job = job
            elif pdc.job != job:
                self.counters["rx_job_switched"] += 1
                if self.log_hook is not None:
                    self.log_hook(now, "job_refused", peer=ev.src_ip, job=job, sdi=ev.sdi,
                                  pdc_id=ev.pdc_id, code="PDC_HDR_MISMATCH",
                                  pdc_job=pdc.job)
                if ev.token:
                    self.pds.reject(now, ev.token, NackCode.PDC_HDR_MISMATCH)
                return _MISMATCH
        return None

    def _completed(self, now: int, done: Any) -> None:
        self.completions.append(done)
        if type(done) is OpCompleted:
            bulk = self._open_bulk.pop(done.op.op_id, None)
            if bulk is not None:
                bulk.end_ps = now
            self.counters["ops_completed"] += 1
            if done.op.return_code != 1:
                self.counters["ops_failed"] += 1
        elif type(done) is RecvCompleted:
            self.counters["recvs_completed"] += 1
        if self.on_complete is not None:
            self.on_complete(done)

    # ------------------------------------------------------------------ application API

    def target(self, dst: str | int, *, job_id: int | None = None, pid_on_fep: int = 0,
               resource_index: int = 0, ri_generation: int = 0) -> TargetAddr:
        """The SES address of a resource at ``dst`` (IP, or host index in a fabric)."""
        if isinstance(dst, int):
            dst = self.peer_ips[dst]
        return TargetAddr(dst, self.job_id if job_id is None else job_id, pid_on_fep,
                          resource_index, ri_generation)

    def call(self, now: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run one SES initiator operation (``send``, ``write``, ``read``, ``atomic``, ...)
        and hand its packets to the PDS at once; returns the operation handle."""
        self.ses.now = now
        op = getattr(self.ses.initiator, method)(*args, **kwargs)
        self.pump(now)
        return op

    def post_recv(self, now: int, buf: bytearray | int, *, tag: int | None = None,
                  ignore: int = 0, resource_index: int = 0, job_id: int | None = None,
                  register: bool = False) -> Any:
        """Post a receive buffer (tagged when ``tag`` is given); returns the receive handle.

        ``register=True`` creates the resource index if it does not exist yet."""
        job = self.job_id if job_id is None else job_id
        self.ses.now = now
        if register:
            self.ses.resources.register(job, self.ses.pid_on_fep, resource_index)
        recv = self.ses.target.post_recv(job, self.ses.pid_on_fep, resource_index, buf,
                                         tag=tag, ignore=ignore)
        self.pump(now)
        return recv

    def cancel_recv(self, now: int, recv: Any) -> bool:
        """Withdraw a posted receive nothing matched yet (it completes CANCELLED)."""
        out = self.ses.target.cancel_recv(recv)
        self.pump(now)
        return out

    def send_message(self, now: int, dst: int | str, nbytes: int,
                     payload: bytes | None = None, *, offset: int = 0,
                     dc: bool = False) -> BulkMessage:
        """Bulk transfer of ``nbytes`` into the peer's sink region (RMA WRITE) at ``offset``.

        This is what experiments move: an RMA write needs no matching at the target, so
        throughput is limited only by the transport. The peer must have called
        :meth:`expose_sink` with at least ``offset + nbytes``; messages whose bytes are
        checked afterwards use distinct offsets so that they do not overwrite each other.
        ``dc``: delivery complete (the response waits for host memory, docs/ses.md).
        """
        tgt = self.target(dst, resource_index=SINK_INDEX)
        data = payload if payload is not None else zeros(nbytes)
        op = self.call(now, "write", tgt, SINK_KEY, offset, data, mode=self.mode, dc=dc)
        msg = BulkMessage(op, self.ip, tgt.dst, nbytes, now)
        self.messages.append(msg)
        if op.done:
            msg.end_ps = now
        else:
            self._open_bulk[op.op_id] = msg
        return msg

    # ------------------------------------------------------------------ reports

    @property
    def stats(self) -> dict[str, int]:
        """Flat counters of the end point (FEP, PDS, SES) for fabric reports."""
        out: dict[str, int] = {}
        for prefix, counter in (("fep", self.counters), ("pds", self.pds.counters),
                                ("ses", self.ses.counters)):
            for key, value in counter.items():
                out[f"{prefix}.{key}"] = value
        if self.tss is not None:
            for key, value in self.tss.stats.items():
                out[f"tss.{key}"] = value
        out["fep.duplicates_delivered"] = self.audit.duplicates
        return out

    def idle(self) -> bool:
        return self.pds.idle() and not self._open_bulk


def _ip_id(ip: str) -> int:
    """A 32-bit initiator ID derived from the address (stable across runs)."""
    import zlib

    return zlib.crc32(ip.encode()) & 0xFFFFFFFF


def _host_tss(cfg: Any, index: int) -> Any:
    """A host's TSS configuration: ``ssi = "auto"`` in a domain becomes ``index + 1``
    (a dict stays a dict: the end point fills in its profile's defaults)."""
    if cfg is None or isinstance(cfg, TssConfig):
        return cfg

    def fix(d: Any) -> Any:
        if isinstance(d, dict) and d.get("ssi") == "auto":
            return {**d, "ssi": index + 1}
        return d

    d = fix(dict(cfg))
    if isinstance(d.get("domains"), list):
        d["domains"] = [fix(dict(x)) if isinstance(x, dict) else x for x in d["domains"]]
    TssConfig.from_dict(d)  # a bad key fails now, naming it
    return d


def _host_log(ctx: Any) -> Callable[..., None] | None:
    log = getattr(ctx, "log", None)
    if log is None:
        return None
    name = ctx.name

    def hook(now: int, kind: str, **fields: Any) -> None:
        log(now, kind, host=name, **fields)

    return hook


#: the Python form of the frame interface the C core replaces (``uet.native._fep_core``):
#: the reference its tests hold it to, and what it calls for a secured end point, native-IP
#: encapsulation and any frame its decoder does not take
REFERENCE = {"receive": FabricEndpoint.receive, "pop_control": FabricEndpoint.pop_control,
             "pop_data": FabricEndpoint.pop_data,
             "next_deadline": FabricEndpoint.next_deadline,
             "deliver": FabricEndpoint.deliver, "pump": FabricEndpoint.pump}
#: the same for the audit (its ``see`` for a standard-header request)
AUDIT_REFERENCE = {"see": DeliveryAudit.see}


def _use_c_core() -> str:
    """Put the C forms of the frame interface in FabricEndpoint's class (not under
    ``UET_PURE_PYTHON=1``, nor when the extension or the C codec is missing); returns
    ``"native"`` or ``"python"``."""
    import heapq

    from uet.native._common import load_core
    from uet.wire import codec

    core = load_core("_fep_core")
    if core is None or codec._c_decode is None or codec._c_encode is None:
        return "python"
    core.configure((REFERENCE["receive"], REFERENCE["pop_control"], REFERENCE["pop_data"],
                    REFERENCE["next_deadline"]),
                   (codec._c_decode, codec._c_encode, encode_frame, heapq.heappop),
                   PdsEndpoint, FabricEndpoint, Frame)
    FabricEndpoint.receive = core.receive_method  # type: ignore[method-assign]
    FabricEndpoint.pop_control = core.pop_control_method  # type: ignore[method-assign]
    FabricEndpoint.pop_data = core.pop_data_method  # type: ignore[method-assign]
    FabricEndpoint.next_deadline = core.next_deadline_method  # type: ignore[method-assign]
    core.configure_delivery((REFERENCE["deliver"], AUDIT_REFERENCE["see"], REFERENCE["pump"]),
                            DeliveryAudit,
                            SesStandard, RequestDelivered, TargetReply,
                            {"som": _SOM, "read": _READ, "bitmap_max": _AUDIT_BITMAP_MAX})
    FabricEndpoint.deliver = core.deliver_method  # type: ignore[method-assign]
    FabricEndpoint.pump = core.pump_method  # type: ignore[method-assign]
    DeliveryAudit.see = core.see_method  # type: ignore[method-assign]
    return "native"


#: which form the frame interface runs in: "native" (C) or "python"
IMPLEMENTATION = _use_c_core()

__all__ = ["AUDIT_REFERENCE", "IMPLEMENTATION", "REFERENCE", "BulkMessage", "DeliveryAudit",
           "FabricEndpoint", "SINK_INDEX", "SINK_KEY", "SesOpcode"]
