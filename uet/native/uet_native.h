/*
 * uet_native: C fast path of uet.native (checksums, CRC-32C, PSN tracker, ROD reorder buffer).
 *
 * The Python-facing wrappers live in uet/native/fast.py; the reference semantics are those
 * of uet/native/pure.py.  Every function validates its own arguments: no input makes it
 * read or write outside the buffers it is given.
 */
#ifndef UET_NATIVE_H
#define UET_NATIVE_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ status codes */
#define UETN_ERR_SHORT (-1)     /* buffer too short */
#define UETN_ERR_IHL (-2)       /* IPv4 IHL < 5 */
#define UETN_ERR_IHL_LEN (-3)   /* buffer shorter than IHL * 4 */
#define UETN_ERR_ADDR (-4)      /* address of the wrong length */
#define UETN_ERR_LONG (-5)      /* buffer too long */
#define UETN_ERR_RANGE (-6)     /* integer argument out of range */
#define UETN_ERR_WINDOW (-7)    /* PSN at or beyond the tracker window */
#define UETN_ERR_CAPACITY (-8)  /* output array too small */
#define UETN_ERR_NOMEM (-9)     /* allocation failed */
#define UETN_ERR_KEY (-10)      /* the key names no tracker */

/* ------------------------------------------------------------------ checksums (RFC 1071) */
/* Folded, uncomplemented one's-complement sum of data (big-endian 16-bit words, odd byte
 * padded with zero) plus initial: 0 only if everything is 0.  */
uint32_t uetn_ones_sum(const char *data, size_t len, uint32_t initial);
/* ~uetn_ones_sum(...) & 0xFFFF: the value to store in a checksum field. */
uint32_t uetn_internet_checksum(const char *data, size_t len, uint32_t initial);
/* IPv4 header checksum (bytes 10-11 taken as zero), or UETN_ERR_SHORT/IHL/IHL_LEN. */
int32_t uetn_ipv4_header_checksum(const char *hdr, size_t len);
/* UDP checksum with pseudo-header; 0 is returned as 0xFFFF; or UETN_ERR_ADDR/SHORT/LONG. */
int32_t uetn_udp_checksum_ipv4(const char *src, size_t src_len, const char *dst,
                               size_t dst_len, const char *udp, size_t udp_len);
int32_t uetn_udp_checksum_ipv6(const char *src, size_t src_len, const char *dst,
                               size_t dst_len, const char *udp, size_t udp_len);
/* Checksum code paths: the best the CPU has is chosen by uetn_init. */
#define UETN_CSUM_PORTABLE 0 /* 64-bit words, any CPU */
#define UETN_CSUM_SSE2 1     /* x86-64 */
#define UETN_CSUM_AVX2 2     /* x86-64 with AVX2 */
int uetn_checksum_path(void);
/* uetn_ones_sum through the given path (a path the CPU lacks falls back to the best below). */
uint32_t uetn_ones_sum_path(int path, const char *data, size_t len, uint32_t initial);
/* RFC 1624 eqn. 3, or UETN_ERR_RANGE if an argument exceeds 0xFFFF. */
int32_t uetn_checksum_adjust(uint32_t csum, uint32_t old16, uint32_t new16);

/* ------------------------------------------------------------------ CRC-32C */
uint32_t uetn_crc32c(const char *data, size_t len, uint32_t crc);
uint32_t uetn_crc32c_slicing8(const char *data, size_t len, uint32_t crc);
uint32_t uetn_crc32c_sse42(const char *data, size_t len, uint32_t crc); /* slicing8 if absent */
/* 1 if uetn_crc32c uses the SSE4.2 crc32 instruction, 0 for slicing-by-8. */
int uetn_crc32c_uses_sse42(void);
/* Build tables and probe the CPU; called once when the module is imported. */
void uetn_init(void);

/* ------------------------------------------------------------------ PSN tracker */
typedef struct uetn_tracker {
    uint32_t base;           /* cack_psn + 1: first PSN not received */
    uint32_t window;         /* MP_RANGE, 128..65536 */
    uint32_t max_psn;        /* highest PSN received, or cack_psn */
    uint32_t head;           /* ring bit index of base */
    uint64_t ooo_count;
    uint64_t received_count;
    uint32_t ring_mask;      /* ring size in bits - 1 (a power of two >= window) */
    uint32_t nwords;         /* ring size in 64-bit words */
    uint64_t *bits;          /* ring bit (head + i) & ring_mask: PSN base + i received */
    uint32_t slot;           /* registry slot: the key is slot << 32 */
    uint32_t out_cap;        /* window + 64 once out is allocated */
    uint32_t *out;           /* bulk results (uetn_tracker_outbuf), NULL until first needed */
} uetn_tracker;

#define UETN_MARK_NEW 0
#define UETN_MARK_DUPLICATE 1
#define UETN_MARK_STALE 2
#define UETN_MARK_OUT_OF_WINDOW 3

uetn_tracker *uetn_tracker_new(uint32_t start_psn, uint32_t window); /* NULL: bad window/OOM */
void uetn_tracker_free(uetn_tracker *t);
/* The tracker's key: slot << 32.  (key | psn) names the tracker and a PSN in one argument. */
uint64_t uetn_tracker_key(const uetn_tracker *t);
/* The tracker's own uint32_t[window + 64] for bulk results (allocated on the first call;
 * NULL if that fails). */
uint32_t *uetn_tracker_outbuf(uetn_tracker *t);
void uetn_tracker_reset(uetn_tracker *t, uint32_t start_psn);
int uetn_tracker_mark(uetn_tracker *t, uint32_t psn);
int uetn_tracker_is_received(const uetn_tracker *t, uint32_t psn);
uint64_t uetn_tracker_sack_bitmap(const uetn_tracker *t, uint32_t base);
/* Count of newly marked PSNs written to out (needs cap >= window), or UETN_ERR_WINDOW. */
int64_t uetn_tracker_mark_cumulative(uetn_tracker *t, uint32_t psn, uint32_t *out, size_t cap);
/* Count of newly marked PSNs written to out (needs cap >= 64). */
int64_t uetn_tracker_mark_bitmap(uetn_tracker *t, uint32_t base, uint64_t bitmap,
                                 uint32_t *out, size_t cap);
/* The first (at most limit) un-received PSNs in [base, end], end clipped to the window;
 * needs cap >= min(limit, window). */
int64_t uetn_tracker_missing(const uetn_tracker *t, uint32_t end, uint32_t limit,
                             uint32_t *out, size_t cap);
/* Received PSNs among [start, start + n), n <= 65536; UETN_ERR_RANGE otherwise. */
int64_t uetn_tracker_count_received_in(const uetn_tracker *t, uint32_t start, uint32_t n);

/* Combined per-packet / per-ACK operations (one Python -> C crossing each). */
/* What uetn_tracker_mark(psn) would return, without marking. */
int uetn_tracker_classify(const uetn_tracker *t, uint32_t psn);
/* Mark psn: result | (1 << 2 if it was the window base and NEW) | (ooo_count << 3), the
 * ooo_count saturated at UETN_OOO_SATURATED (the wrapper then reads the field). */
#define UETN_OOO_SATURATED (((uint64_t)1 << 60) - 1)
int64_t uetn_tracker_on_packet(uetn_tracker *t, uint32_t psn);
/* The SACK bitmap from base = cack_psn + 1. */
uint64_t uetn_tracker_ack_bitmap(const uetn_tracker *t);
/* mark_cumulative(cack) then mark_bitmap(sack_base, bitmap): count of newly marked PSNs
 * written to out in that order (needs cap >= window + 64), or UETN_ERR_WINDOW (nothing
 * changed) if cack is beyond the window. */
int64_t uetn_tracker_apply_ack(uetn_tracker *t, uint32_t cack, uint32_t sack_base,
                               uint64_t bitmap, uint32_t *out, size_t cap);
/* mark() each of psns[0..n) in order; returns how many were NEW. */
int64_t uetn_tracker_mark_many(uetn_tracker *t, const uint32_t *psns, size_t n);

/* The per-packet operations by key (uetn_tracker_key(t) | psn): one integer argument.
 * UETN_ERR_KEY (0 for the bitmaps) if the key names no tracker. */
int uetn_tk_mark(uint64_t key);
int uetn_tk_classify(uint64_t key);
int uetn_tk_is_received(uint64_t key);
int64_t uetn_tk_on_packet(uint64_t key);
uint64_t uetn_tk_sack_bitmap(uint64_t key);   /* psn = the bitmap's base */
int64_t uetn_tk_cack(uint64_t key);           /* cack_psn (the PSN bits are ignored) */
int64_t uetn_tk_max_psn(uint64_t key);        /* max_psn (the PSN bits are ignored) */
uint64_t uetn_tk_ack_bitmap(uint64_t key);    /* the SACK bitmap from cack_psn + 1 */
/* mark_cumulative(psn), written to the tracker's outbuf (UETN_ERR_CAPACITY if it was not
 * allocated yet): also apply_ack of an ACK without SACK bits. */
int64_t uetn_tk_mark_cumulative(uint64_t key);
/* apply_ack with psn = cack, written to the tracker's outbuf (UETN_ERR_CAPACITY if it was
 * not allocated yet). */
int64_t uetn_tk_apply_ack(uint64_t key, uint32_t sack_base, uint64_t bitmap);

/* ------------------------------------------------------------------ ROD reorder buffer */
/* Items are opaque handles chosen here (small integers, reused once released); the Python
 * wrapper keeps the objects in a list indexed by handle. */
typedef struct uetn_rob {
    uint32_t next_psn;
    uint32_t items;
    uint64_t bytes;
    uint64_t max_bytes;
    uint32_t max_items;
    uint32_t max_distance;
    uint32_t cap;            /* ring slots, a power of two */
    uint32_t max_cap;        /* smallest power of two >= max_distance */
    uint32_t head;           /* ring index of next_psn */
    uint32_t *slot;          /* handle + 1, or 0 for an empty slot */
    uint32_t *size;          /* nbytes of the item in the slot */
    uint32_t handles;        /* handles 0 .. handles-1 have been given out */
    uint32_t nfree;          /* released handles on the free stack */
    uint32_t free_cap;
    uint32_t *free_stack;
} uetn_rob;

/* uetn_rob_insert results (InsertResult values, negated) */
#define UETN_INS_DUPLICATE 1
#define UETN_INS_FULL 2
#define UETN_INS_STALE 3
#define UETN_INS_OUT_OF_RANGE 4

#define UETN_ROB_MAX_DISTANCE (1u << 20)
#define UETN_ROB_MAX_BYTES ((uint64_t)1 << 63)

uetn_rob *uetn_rob_new(uint32_t max_items, uint64_t max_bytes, uint32_t next_psn,
                       uint32_t max_distance); /* NULL: bad arguments or OOM */
void uetn_rob_free(uetn_rob *r);
/* Stored: (handle << 1) | (psn == next_psn).  Not stored: -UETN_INS_* or UETN_ERR_NOMEM. */
int64_t uetn_rob_insert(uetn_rob *r, uint32_t psn, uint32_t nbytes);
int uetn_rob_contains(const uetn_rob *r, uint32_t psn);
/* Release the item for next_psn: its handle | (1 << 32 if next_psn + 1 is held too), or -1. */
int64_t uetn_rob_pop_one(uetn_rob *r);
/* Handles of the in-order run from next_psn (at most cap), advancing next_psn. */
int64_t uetn_rob_pop_ready(uetn_rob *r, uint32_t *out, size_t cap);
/* Drop every item (all handles become free) and restart at next_psn; returns the count. */
int64_t uetn_rob_reset(uetn_rob *r, uint32_t next_psn);

#endif /* UET_NATIVE_H */
