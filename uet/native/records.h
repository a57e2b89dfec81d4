/* The wire records the C code reads or builds in full (uet.wire.records: Frame, PdsAckCc),
 * their fields in dataclass order, for the cores that include this file (the codec, the
 * sender, target and FEP cores); each keeps its own Layout of them, which configure() fills from
 * the classes (layout() fails on a name that is not a slot of the class). */
#ifndef UET_RECORDS_H
#define UET_RECORDS_H

enum { F_PDS, F_SES, F_EXT, F_PAYLOAD, F_SRC_MAC, F_DST_MAC, F_SRC_IP, F_DST_IP, F_EV,
       F_DSCP, F_ECN, F_TTL, F_IP_ID, F_UDP_DPORT, F_UDP_CHECKSUM, F_ENCAP, F_IP_PROTO,
       F_TSS, F_TRAILER, F_N };
__attribute__((unused)) static const char *FRAME_FIELDS[F_N] = {
    "pds", "ses", "ext", "payload", "src_mac", "dst_mac", "src_ip", "dst_ip", "ev", "dscp",
    "ecn", "ttl", "ip_id", "udp_dport", "udp_checksum", "encap", "ip_proto", "tss", "trailer"};

enum { A_TYPE, A_NEXT_HDR, A_FLAGS, A_ACK_PSN_OFFSET, A_CACK_PSN, A_SPDCID, A_DPDCID,
       A_CC_TYPE, A_CC_FLAGS, A_MPR, A_SACK_PSN_OFFSET, A_SACK_BITMAP, A_SERVICE_TIME,
       A_RESTORE_CWND, A_RCV_CWND_PEND, A_RCVD_BYTES, A_CREDIT, A_OOO_COUNT, A_CC_STATE_RAW,
       A_CCX_STATE, A_N };
__attribute__((unused)) static const char *ACK_CC_FIELDS[A_N] = {
    "type", "next_hdr", "flags", "ack_psn_offset", "cack_psn", "spdcid", "dpdcid", "cc_type",
    "cc_flags", "mpr", "sack_psn_offset", "sack_bitmap", "service_time", "restore_cwnd",
    "rcv_cwnd_pend", "rcvd_bytes", "credit", "ooo_count", "cc_state_raw", "ccx_state"};

#endif
