"""PDS configuration: every timer, window and limit of the Packet Delivery Sublayer.

Defaults follow the sources of ``docs/references.md`` (topics 3 and 10):
the UEC reference provider's values (MP_RANGE 128, RTO 5 ms, 5 retries, New_PDC_Time and
Close_REQ_Time 1000 ms, DSCP 0 / 46, control EV 0x4242) and htsim's (ACK every 16 KiB,
100 us minimum RTO for the adaptive estimator). Where the reference is silent the choice is
documented in ``docs/pds.md``. All times are integer picoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from uet.errors import ConfigError

PS_PER_US = 1_000_000
PS_PER_MS = 1_000_000_000

ACK_TYPES = ("ack", "ack_cc")
START_PSN_MODES = ("initiator", "target")
SECURE_START_MODES = ("expected_0rtt", "random_1rtt")
ACK_DATA_CLASSES = ("data", "control")


class PdsConfigError(ConfigError):
    """A bad PdsConfig value; the message names the key and the allowed values."""


@dataclass(slots=True)
class PdsConfig:
    """Settings of one end point's PDS (profiles and experiments set them)."""

    # ---- windows and sizes
    #: receive window per PDC in PSNs (MP_RANGE); advertised in ACK_CC as mpr = mp_range/128
    mp_range: int = 128
    #: sender: most un-acknowledged packets per PDC (its own tracking bitmap)
    max_inflight_packets: int = 128
    #: sender: most packets sent in SYN state (psn_offset is 12 bits)
    max_syn_packets: int = 4096
    #: largest payload of a request or of the response data carried in an ACK / RUDI_RESP
    mtu_payload: int = 4096

    # ---- acknowledgement
    #: 'ack_cc' (ACK_CC with SACK bitmap, MPR and CC state) or 'ack' (plain 12-byte ACK)
    ack_type: str = "ack_cc"
    #: coalescing: an ACK at least every this many accepted payload bytes (htsim: 16 KiB)
    ack_every_bytes: int = 16384
    #: receiver ACK timer: an accepted packet is acknowledged within this time
    ack_timer_ps: int = 2 * PS_PER_US
    #: initiator sets AR on every packet (per-packet ACK mode), not only on EOM packets
    ar_every_packet: bool = False
    #: traffic class of ACKs and RUDI responses that carry read data: 'data' (the data DSCP,
    #: trimmable like any bulk payload, so a congested switch trims them and the initiator
    #: NACKs TRIMMED_ACK) or 'control' (the control DSCP, never trimmed)
    ack_data_class: str = "data"
    #: receiver gap NACK (RCVR_INFER_LOSS, ref 2.6): a PSN still missing this long after a
    #: later one arrived is NACKed (0: off; -1: 4 x ack_timer_ps with plain ACKs, off with
    #: ACK_CC, whose SACK bitmap already shows the initiator every gap)
    gap_nack_ps: int = -1
    #: initiator also sets AR on a packet after which the CC window / credit has no room for
    #: another full packet, or that empties the PDC's queue (htsim's sender: a blocked
    #: sender asks for the ACK that unblocks it, so window-limited flows get per-packet ACKs)
    ar_when_blocked: bool = True

    # ---- retransmission
    #: RTO (fixed), or the initial RTO when ``rto_adaptive``
    rto_ps: int = 5 * PS_PER_MS
    #: estimate the RTO from RTT samples (srtt + 4 rttvar, clamped to [min_rto, max_rto])
    rto_adaptive: bool = False
    min_rto_ps: int = 100 * PS_PER_US
    max_rto_ps: int = 1000 * PS_PER_MS
    #: RTO multiplier per retransmission of the same packet (exponential backoff)
    rto_backoff: int = 2
    #: retransmissions of one packet before the PDC closes in error
    max_retries: int = 5
    #: time-based loss detection from SACKs (RACK, RFC 8985 ideas): a packet is lost when a
    #: packet sent after it arrived and that packet's RTT plus a reordering window passed
    #: since it was sent; reorder tolerant, so sprayed packets are not resent spuriously
    rack: bool = True
    #: RACK reordering window (0: adaptive, from min_rtt / 4 up to the reordering seen)
    rack_reo_wnd_ps: int = 0
    #: a packet not SACKed while this many packets sent after it were is lost (0: off;
    #: the classic 3-duplicate rule: sprayed packets arrive out of order by design, so it
    #: resends packets that are merely on a slower path)
    sack_dupthresh: int = 0
    #: loss inference from the ACK_CC ooo_count (ref. 3.8): enter recovery when ooo_count
    #: reaches this many packets (0: off; -1: htsim's SLEEK threshold from the CC window,
    #: max(min(1.5 cwnd, max window), 5 MTU) / MTU)
    ooo_loss_threshold: int = 0
    #: send a PROBE CP when packets are outstanding and nothing was ACKed for this long (0: off)
    probe_after_ps: int = 0

    # ---- establishment, clear and close
    #: who picks Start_PSN: 'initiator' (0-RTT, default) or 'target' (the target answers the
    #: first SYN with NACK NEW_START_PSN carrying its own random Start_PSN; 1-RTT)
    start_psn_mode: str = "initiator"
    #: Start_PSN for every new PDC instead of a random one (tests, conformance, wraparound)
    fixed_start_psn: int | None = None
    #: secured PDCs (TSS): 'expected_0rtt' (the target keeps an Expected-PSN floor per SDI,
    #: NACKs NEW_START_PSN below it, raises it at each close and returns it in the closing
    #: ACK) or 'random_1rtt' (the target always picks the Start_PSN: 1 RTT) (ref. 3.2)
    secure_start_psn: str = "expected_0rtt"
    #: a secured PDC closes before its PSN reaches Start_PSN + this (ref. 3.2: 2^31); a
    #: smaller value only for tests
    secure_psn_range: int = 1 << 31
    #: target PDCs waiting for a SYN with their new Start_PSN are reaped after this
    new_pdc_time_ps: int = 1000 * PS_PER_MS
    #: initiator sends CLOSE after its PDC has been idle (all ACKed) this long (0: never)
    close_idle_ps: int = 1 * PS_PER_MS
    #: target sends CLOSE_REQ after hearing nothing on a PDC for this long (0: never)
    target_idle_ps: int = 100 * PS_PER_MS
    #: target closes in error if no CLOSE arrives this long after its CLOSE_REQ
    close_req_time_ps: int = 1000 * PS_PER_MS
    #: initiator sends a NOOP control packet after this long without sending anything on an
    #: open, idle PDC, so the target's idle timer does not ask it to close (0: never; for
    #: PDCs kept open with close_idle_ps = 0 or longer than the target's target_idle_ps)
    keepalive_ps: int = 0
    #: exchange NEGOTIATION control packets when a PDC opens: the initiator's SYN-form
    #: NEGOTIATION carries its capabilities (fep_cap, MP_RANGE, payload size, CCX), the
    #: target answers with its own (docs/pds.md, "NEGOTIATION")
    negotiation: bool = False
    #: target sends CLEAR_REQ when stored responses wait this long without a clear (0: never)
    clear_req_ps: int = 1 * PS_PER_MS
    #: closed PDCs linger this long (answer duplicates, resend the close ACK), IDs not reused
    msl_ps: int = 10 * PS_PER_MS

    # ---- limits
    max_initiator_pdcs: int = 1024
    max_target_pdcs: int = 1024
    #: target PDCs one source address may hold (0: only max_target_pdcs): a single peer
    #: opening PDC after PDC (a SYN flood) cannot take every slot from the others
    max_target_pdcs_per_source: int = 256
    #: target PDCs opened by congestion-controlled requests (RUD_CC / ROD_CC, CREDIT_REQ)
    #: hold a congestion-control context; at most this many at once (0: one per target
    #: PDC, no separate limit); beyond it a new one is NACKed NO_CCC_AVAIL
    max_cc_contexts: int = 0
    #: PSN-tracking bitmaps of established target PDCs (PENDING and lingering PDCs hold
    #: none); at most this many at once (0: one per target PDC); beyond it NO_BITMAP
    max_rx_bitmaps: int = 0
    #: closed PDCs kept lingering; beyond it the oldest is freed early
    max_lingering_pdcs: int = 1024
    #: bytes of un-acknowledged request packets held by initiator PDCs (and RUDI)
    max_tx_memory_bytes: int = 64 << 20
    #: bytes of stored responses, ROD reorder buffers and the RUDI response cache
    max_rx_memory_bytes: int = 64 << 20
    #: ROD reorder buffer per PDC: packets (0: mp_range) and bytes (0: unlimited)
    rod_buffer_packets: int = 0
    rod_buffer_bytes: int = 0
    #: ROD PDCs may spray (one EV per packet from the CC); default: one EV per PDC
    rod_multi_ev: bool = False
    #: RUDI: remembered responses (duplicates answered from it) and outstanding requests
    rudi_cache_entries: int = 4096
    rudi_max_outstanding: int = 1024
    #: RUDI: a remembered response is dropped after this long (a later duplicate is
    #: delivered again, which RUDI's idempotent operations allow)
    rudi_cache_ps: int = 1000 * PS_PER_MS

    # ---- marking
    dscp_data: int = 0
    dscp_control: int = 46
    #: DSCPs a switch writes into trimmed packets (uet.fabric.qos defaults): a request
    #: arriving with one is NACKed TRIMMED / TRIMMED_LASTHOP (-1: not used)
    dscp_trimmed: int = 12
    dscp_trimmed_lasthop: int = 14
    control_ev: int = 0x4242
    #: send requests ECN-capable (ECT(0)) so switches can mark CE
    ecn_capable: bool = True
    #: send RUD_CC_REQ / ROD_CC_REQ (types 13/14) carrying credit_target (RCCC)
    cc_requests: bool = False

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise PdsConfigError naming the first bad key and its allowed values."""
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", int) and (not isinstance(value, int) or isinstance(value, bool)):
                raise PdsConfigError(f"pds.{f.name}: must be an integer, got {value!r}")
            if f.type in ("bool", bool) and not isinstance(value, bool):
                raise PdsConfigError(f"pds.{f.name}: must be true or false, got {value!r}")
        if self.mp_range % 128 or not 128 <= self.mp_range <= 255 * 128:
            raise PdsConfigError(
                f"pds.mp_range: must be a multiple of 128 in [128, 32640], got {self.mp_range}")
        if not 1 <= self.max_inflight_packets <= 32767:
            raise PdsConfigError("pds.max_inflight_packets: must be in [1, 32767], got "
                                 f"{self.max_inflight_packets}")
        if not 1 <= self.max_syn_packets <= 4096:
            raise PdsConfigError(
                f"pds.max_syn_packets: must be in [1, 4096], got {self.max_syn_packets}")
        if not 1 <= self.mtu_payload <= 16383:
            raise PdsConfigError(
                f"pds.mtu_payload: must be in [1, 16383] bytes, got {self.mtu_payload}")
        if self.ack_type not in ACK_TYPES:
            raise PdsConfigError(
                f"pds.ack_type: must be one of {', '.join(ACK_TYPES)}, got {self.ack_type!r}")
        if self.secure_start_psn not in SECURE_START_MODES:
            raise PdsConfigError(f"pds.secure_start_psn: must be one of "
                                 f"{', '.join(SECURE_START_MODES)}, got "
                                 f"{self.secure_start_psn!r}")
        if isinstance(self.secure_psn_range, bool) or not isinstance(
                self.secure_psn_range, int) or not 16 <= self.secure_psn_range <= 1 << 31:
            raise PdsConfigError("pds.secure_psn_range: must be an integer in [16, 2**31], "
                                 f"got {self.secure_psn_range!r}")
        if self.ack_data_class not in ACK_DATA_CLASSES:
            raise PdsConfigError(f"pds.ack_data_class: must be one of "
                                 f"{', '.join(ACK_DATA_CLASSES)}, got {self.ack_data_class!r}")
        if self.gap_nack_ps < -1:
            raise PdsConfigError("pds.gap_nack_ps: allowed 0 (off), -1 (auto: on with plain "
                                 f"ACKs) or a time in ps, got {self.gap_nack_ps}")
        if self.start_psn_mode not in START_PSN_MODES:
            raise PdsConfigError(f"pds.start_psn_mode: must be one of "
                                 f"{', '.join(START_PSN_MODES)}, got {self.start_psn_mode!r}")
        positive = ("ack_every_bytes", "ack_timer_ps", "rto_ps", "min_rto_ps", "max_rto_ps",
                    "rto_backoff", "new_pdc_time_ps", "close_req_time_ps", "msl_ps",
                    "max_initiator_pdcs", "max_target_pdcs", "max_lingering_pdcs",
                    "max_tx_memory_bytes", "max_rx_memory_bytes", "rudi_cache_entries",
                    "rudi_max_outstanding", "rudi_cache_ps")
        for name in positive:
            if getattr(self, name) <= 0:
                raise PdsConfigError(f"pds.{name}: must be > 0, got {getattr(self, name)}")
        if self.ooo_loss_threshold < -1:
            raise PdsConfigError("pds.ooo_loss_threshold: allowed 0 (off), -1 (from the CC "
                                 f"window) or a packet count, got {self.ooo_loss_threshold}")
        non_negative = ("max_retries", "sack_dupthresh", "rack_reo_wnd_ps", "probe_after_ps",
                        "close_idle_ps", "target_idle_ps", "clear_req_ps",
                        "rod_buffer_packets", "rod_buffer_bytes", "max_target_pdcs_per_source",
                        "keepalive_ps", "max_cc_contexts", "max_rx_bitmaps")
        for name in non_negative:
            if getattr(self, name) < 0:
                raise PdsConfigError(f"pds.{name}: must be >= 0, got {getattr(self, name)}")
        if self.min_rto_ps > self.max_rto_ps:
            raise PdsConfigError(f"pds.min_rto_ps: must be <= max_rto_ps ({self.max_rto_ps}), "
                                 f"got {self.min_rto_ps}")
        if self.max_initiator_pdcs + self.max_target_pdcs + self.max_lingering_pdcs > 65535:
            raise PdsConfigError("pds.max_initiator_pdcs + max_target_pdcs + "
                                 "max_lingering_pdcs: must be <= 65535 (16-bit PDC IDs, 0 "
                                 "reserved)")
        for name in ("dscp_data", "dscp_control"):
            if not 0 <= getattr(self, name) <= 63:
                raise PdsConfigError(f"pds.{name}: must be in [0, 63], got {getattr(self, name)}")
        for name in ("dscp_trimmed", "dscp_trimmed_lasthop"):
            if not -1 <= getattr(self, name) <= 63:
                raise PdsConfigError(
                    f"pds.{name}: must be in [0, 63] or -1 (off), got {getattr(self, name)}")
            if getattr(self, name) == self.dscp_data:
                raise PdsConfigError(f"pds.{name}: must differ from dscp_data "
                                     f"({self.dscp_data}), got {getattr(self, name)}")
        if not 0 <= self.control_ev <= 0xFFFF:
            raise PdsConfigError(f"pds.control_ev: must be in [0, 65535], got {self.control_ev}")
        if self.fixed_start_psn is not None and (
                isinstance(self.fixed_start_psn, bool) or not isinstance(self.fixed_start_psn, int)
                or not 0 <= self.fixed_start_psn <= 0xFFFFFFFF):
            raise PdsConfigError("pds.fixed_start_psn: must be null or an integer in "
                                 f"[0, 2**32 - 1], got {self.fixed_start_psn!r}")

    def retry_span_ps(self) -> int:
        """Longest time one packet may keep being retransmitted after its first send: the
        RTO (``max_rto_ps`` when adaptive) with backoff, each capped at ``max_rto_ps``,
        over ``max_retries`` retransmissions. A peer with the same settings may still
        retransmit a request this long after it first sent it, so a target that closed a
        PDC without the initiator's CLOSE keeps it this long (see ``error_linger_ps``)."""
        base = self.max_rto_ps if self.rto_adaptive else self.rto_ps
        cap = max(self.max_rto_ps, base)
        return sum(min(base * self.rto_backoff ** r, cap) for r in range(self.max_retries + 1))

    def error_linger_ps(self) -> int:
        """How long a target PDC closed in error lingers: at least ``msl_ps`` and at least
        the initiator's :meth:`retry_span_ps` (plus one ``max_rto_ps`` of transit). The
        initiator never heard the close, so it may still retransmit its first packets with
        SYN; a target that forgot the PDC sooner would open a new one for them and deliver
        them a second time."""
        return max(self.msl_ps, self.retry_span_ps() + self.max_rto_ps)

    @property
    def gap_nack_after(self) -> int:
        """The receiver gap NACK delay in effect (0: off), ``gap_nack_ps`` resolved."""
        if self.gap_nack_ps >= 0:
            return self.gap_nack_ps
        return 4 * self.ack_timer_ps if self.ack_type == "ack" else 0

    @classmethod
    def from_dict(cls, data: dict) -> PdsConfig:
        """Build from a mapping (a profile's ``[pds]`` table); unknown keys are errors."""
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise PdsConfigError(
                    f"pds.{key}: unknown key; allowed keys: {', '.join(sorted(known))}")
        return cls(**data)
