/* uet.native._codec_core: the codec's two common frames in C.
 *
 * Almost every frame of an experiment is one of two: a RUD/ROD request (with or without
 * its CC word) carrying a standard SES header, or an ACK_CC with NSCC or credit state
 * (IPv4, UDP without checksum, no TSS, no trailer). uet.wire.codec packs and unpacks each
 * with one struct call (its _encode_fast / _decode_fast); this module does the same in C:
 *
 *   encode(frame) -> bytes or None     the frame's bytes, exactly _encode_fast's
 *   decode(data, udp_port) -> Frame or None
 *                                      the records, exactly _decode_fast's
 *
 * None means "not one of the two, or not sure": the caller goes on with the Python fast
 * path, which goes on with the general one (and raises what it always raised). So this
 * module never decides an error and never guesses: a value out of a field's range, a
 * field that is not an int, an address or MAC not in the codec's caches yet, anything
 * unusual gives None. tests/wire/test_codec_core.py holds both directions to the Python
 * fast path on random records and frames.
 *
 * The records are slots dataclasses; configure() finds each field's slot offset once,
 * so reading a field is a load and a decoded record is filled without calling its
 * Python __init__ (the generated __init__ only assigns the fields: no __post_init__).
 */

#include "slots.h"
#include "records.h"
#include <stddef.h>
#include <string.h>

/* ------------------------------------------------------------------ record layouts */

enum { R_TYPE, R_NEXT_HDR, R_FLAGS, R_CLEAR_PSN_OFFSET, R_PSN, R_SPDCID, R_DPDCID,
       R_USE_RSV_PDC, R_PSN_OFFSET, R_CCC_ID, R_CREDIT_TARGET, R_N };
static const char *REQ_FIELDS[R_N] = {
    "type", "next_hdr", "flags", "clear_psn_offset", "psn", "spdcid", "dpdcid",
    "use_rsv_pdc", "psn_offset", "ccc_id", "credit_target"};

enum { S_OPCODE, S_VERSION, S_FLAGS, S_MESSAGE_ID, S_RI_GENERATION, S_JOB_ID, S_PID_ON_FEP,
       S_RESOURCE_INDEX, S_BUFFER_OFFSET, S_INITIATOR, S_MEMORY_KEY, S_HEADER_DATA,
       S_PAYLOAD_LENGTH, S_MESSAGE_OFFSET, S_REQUEST_LENGTH, S_N };
static const char *SES_FIELDS[S_N] = {
    "opcode", "version", "flags", "message_id", "ri_generation", "job_id", "pid_on_fep",
    "resource_index", "buffer_offset", "initiator", "memory_key", "header_data",
    "payload_length", "message_offset", "request_length"};

static Layout L_FRAME, L_REQ, L_SES, L_ACK;
static PyObject *ip_pack, *mac_pack, *ip_text, *mac_text, *empty_bytes, *udp_str;
static long default_ip_proto;
/* SES opcodes followed by an extension header (bit per opcode) */
static uint64_t ext_ops;
static int configured;

/* ------------------------------------------------------------------ reading fields */

/* An int field in [lo, hi] (a bool or an int subclass counts as an int, as struct takes
 * them); 0 = not usable (no exception left). */
static int get_range(PyObject *o, long long lo, unsigned long long hi, unsigned long long *out) {
    if (o == NULL || !PyLong_Check(o))
        return 0;
    int overflow;
    long long v = i64_or_overflow(o, &overflow);
    if (overflow > 0 && lo >= 0) {
        PyErr_Clear();
        unsigned long long u = PyLong_AsUnsignedLongLong(o);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (u > hi)
            return 0;
        *out = u;
        return 1;
    }
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (v < lo || (v >= 0 && (unsigned long long)v > hi))
        return 0;
    *out = (unsigned long long)v;
    return 1;
}

/* An int field used under a mask (x & mask in Python: any int works, negative ones too). */
static int get_masked(PyObject *o, unsigned long long mask, unsigned long long *out) {
    if (o == NULL || !PyLong_Check(o))
        return 0;
    int overflow;
    long long v = i64_or_overflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0; /* huge values: the Python path */
    }
    *out = (unsigned long long)v & mask;
    return 1;
}

#define U(o, hi, dst)                                                                        \
    do {                                                                                     \
        unsigned long long _v;                                                               \
        if (!get_range((o), 0, (hi), &_v))                                                   \
            goto fallback;                                                                   \
        dst = _v;                                                                            \
    } while (0)
#define M(o, mask, dst)                                                                      \
    do {                                                                                     \
        unsigned long long _v;                                                               \
        if (!get_masked((o), (mask), &_v))                                                   \
            goto fallback;                                                                   \
        dst = _v;                                                                            \
    } while (0)
#define TRUTH(o, dst)                                                                        \
    do {                                                                                     \
        int _t = (o) == NULL ? -1 : PyObject_IsTrue(o);                                      \
        if (_t < 0) {                                                                        \
            PyErr_Clear();                                                                   \
            goto fallback;                                                                   \
        }                                                                                    \
        dst = _t;                                                                            \
    } while (0)

static inline void put16(uint8_t *p, uint64_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void put32(uint8_t *p, uint64_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void put64(uint8_t *p, uint64_t v) {
    put32(p, v >> 32);
    put32(p + 4, v & 0xFFFFFFFFu);
}
static inline uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static inline uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

/* a cached packed address or MAC of the right length (borrowed), else NULL */
static PyObject *cached(PyObject *cache, PyObject *key, Py_ssize_t len) {
    if (key == NULL || !PyUnicode_CheckExact(key))
        return NULL;
    PyObject *v = PyDict_GetItemWithError(cache, key);
    if (v == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyBytes_CheckExact(v) || PyBytes_GET_SIZE(v) != len)
        return NULL;
    return v;
}

static inline uint32_t wsum4(const uint8_t *a) { return get32(a) % 0xFFFF; }

/* ------------------------------------------------------------------ encode */

static PyObject *encode(PyObject *self, PyObject *frame) {
    if (!configured || !Py_IS_TYPE(frame, L_FRAME.type))
        Py_RETURN_NONE;
    PyObject *pds = SLOT(frame, L_FRAME, F_PDS);
    int is_req = pds != NULL && Py_IS_TYPE(pds, L_REQ.type);
    int is_ack = pds != NULL && Py_IS_TYPE(pds, L_ACK.type);
    if (!is_req && !is_ack)
        Py_RETURN_NONE;
    PyObject *src = cached(ip_pack, SLOT(frame, L_FRAME, F_SRC_IP), 4);
    PyObject *dst = cached(ip_pack, SLOT(frame, L_FRAME, F_DST_IP), 4);
    PyObject *dmac = cached(mac_pack, SLOT(frame, L_FRAME, F_DST_MAC), 6);
    PyObject *smac = cached(mac_pack, SLOT(frame, L_FRAME, F_SRC_MAC), 6);
    if (src == NULL || dst == NULL || dmac == NULL || smac == NULL)
        Py_RETURN_NONE;
    PyObject *tss = SLOT(frame, L_FRAME, F_TSS), *encap = SLOT(frame, L_FRAME, F_ENCAP);
    int trailer, ucs;
    Py_buffer pay = {0};
    int have_pay = 0;
    uint8_t hdr[102];
    Py_ssize_t hl;
    unsigned long long dscp, ecn, ipid, ttl, ev, dport;
    if (tss == NULL || tss != Py_None || encap == NULL || !PyUnicode_CheckExact(encap) ||
        PyUnicode_Compare(encap, udp_str) != 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    TRUTH(SLOT(frame, L_FRAME, F_TRAILER), trailer);
    TRUTH(SLOT(frame, L_FRAME, F_UDP_CHECKSUM), ucs);
    if (trailer || ucs)
        Py_RETURN_NONE;
    M(SLOT(frame, L_FRAME, F_DSCP), 0x3F, dscp);
    M(SLOT(frame, L_FRAME, F_ECN), 3, ecn);
    U(SLOT(frame, L_FRAME, F_IP_ID), 0xFFFF, ipid);
    U(SLOT(frame, L_FRAME, F_TTL), 0xFF, ttl);
    U(SLOT(frame, L_FRAME, F_EV), 0xFFFF, ev);
    U(SLOT(frame, L_FRAME, F_UDP_DPORT), 0xFFFF, dport);
    PyObject *payload = SLOT(frame, L_FRAME, F_PAYLOAD);
    if (payload == NULL || PyObject_GetBuffer(payload, &pay, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    have_pay = 1;
    unsigned long long tos = dscp << 2 | ecn;
    const uint8_t *s4 = (const uint8_t *)PyBytes_AS_STRING(src);
    const uint8_t *d4 = (const uint8_t *)PyBytes_AS_STRING(dst);
    uint64_t m = 0x8511 + tos + ipid + (ttl << 8) + wsum4(s4) + wsum4(d4);
    unsigned long long l4_len;
    memset(hdr, 0, sizeof hdr);
    if (is_req) {
        PyObject *h = SLOT(frame, L_FRAME, F_SES);
        PyObject *ext = SLOT(frame, L_FRAME, F_EXT);
        if (h == NULL || !Py_IS_TYPE(h, L_SES.type) || ext == NULL || ext != Py_None)
            goto fallback;
        unsigned long long t, nh, flags, word, last, sflags, tail, cpo_u, psn, spdcid;
        M(SLOT(pds, L_REQ, R_TYPE), ~0ULL, t);
        M(SLOT(pds, L_REQ, R_FLAGS), 0x7F, flags);
        M(SLOT(pds, L_REQ, R_NEXT_HDR), 0xF, nh);
        word = (t & 0x1F) << 11 | nh << 7 | flags;
        if (flags & 0x04) {
            int rsv;
            unsigned long long po;
            TRUTH(SLOT(pds, L_REQ, R_USE_RSV_PDC), rsv);
            M(SLOT(pds, L_REQ, R_PSN_OFFSET), 0xFFF, po);
            last = (rsv ? 0x8000 : 0) | po;
        } else {
            U(SLOT(pds, L_REQ, R_DPDCID), 0xFFFF, last);
        }
        unsigned long long op, ver, mid, rig, job, pid, ri, boff, init, mkey, rlen;
        M(SLOT(h, L_SES, S_FLAGS), 0x3F, sflags);
        if (sflags & 0x01) {
            U(SLOT(h, L_SES, S_HEADER_DATA), ~0ULL, tail);
        } else {
            unsigned long long pl, mo;
            M(SLOT(h, L_SES, S_PAYLOAD_LENGTH), 0x3FFF, pl);
            M(SLOT(h, L_SES, S_MESSAGE_OFFSET), 0xFFFFFFFF, mo);
            tail = pl << 32 | mo;
        }
        /* struct "h": a signed 16-bit clear_psn_offset */
        if (!get_range(SLOT(pds, L_REQ, R_CLEAR_PSN_OFFSET), -32768, 32767, &cpo_u))
            goto fallback;
        U(SLOT(pds, L_REQ, R_PSN), 0xFFFFFFFF, psn);
        U(SLOT(pds, L_REQ, R_SPDCID), 0xFFFF, spdcid);
        M(SLOT(h, L_SES, S_OPCODE), 0x3F, op);
        M(SLOT(h, L_SES, S_VERSION), 3, ver);
        U(SLOT(h, L_SES, S_MESSAGE_ID), 0xFFFF, mid);
        M(SLOT(h, L_SES, S_RI_GENERATION), 0xFF, rig);
        M(SLOT(h, L_SES, S_JOB_ID), 0xFFFFFF, job);
        M(SLOT(h, L_SES, S_PID_ON_FEP), 0xFFF, pid);
        M(SLOT(h, L_SES, S_RESOURCE_INDEX), 0xFFF, ri);
        U(SLOT(h, L_SES, S_BUFFER_OFFSET), ~0ULL, boff);
        U(SLOT(h, L_SES, S_INITIATOR), 0xFFFFFFFF, init);
        U(SLOT(h, L_SES, S_MEMORY_KEY), ~0ULL, mkey);
        U(SLOT(h, L_SES, S_REQUEST_LENGTH), 0xFFFFFFFF, rlen);
        int cc = t == 13 || t == 14;
        Py_ssize_t o = 42;
        put16(hdr + o, word);
        put16(hdr + o + 2, cpo_u & 0xFFFF);
        put32(hdr + o + 4, psn);
        put16(hdr + o + 8, spdcid);
        put16(hdr + o + 10, last);
        o += 12;
        if (cc) {
            unsigned long long ccc, ct;
            M(SLOT(pds, L_REQ, R_CCC_ID), 0xFF, ccc);
            M(SLOT(pds, L_REQ, R_CREDIT_TARGET), 0xFFFFFF, ct);
            put32(hdr + o, ccc << 24 | ct);
            o += 4;
        }
        hdr[o] = (uint8_t)op;
        hdr[o + 1] = (uint8_t)(ver << 6 | sflags);
        put16(hdr + o + 2, mid);
        put32(hdr + o + 4, rig << 24 | job);
        put16(hdr + o + 8, pid);
        put16(hdr + o + 10, ri);
        put64(hdr + o + 12, boff);
        put32(hdr + o + 20, init);
        put64(hdr + o + 24, mkey);
        put64(hdr + o + 32, tail);
        put32(hdr + o + 40, rlen);
        hl = o + 44;
        l4_len = (cc ? 68 : 64) + (unsigned long long)pay.len;
    } else {
        PyObject *ses = SLOT(frame, L_FRAME, F_SES), *ext = SLOT(frame, L_FRAME, F_EXT);
        unsigned long long t, flags, cc, nh, aoff_u, cack, spdcid, dpdcid, ccf, mpr, soff_u,
            bitmap, ooo;
        if (ses == NULL || ses != Py_None || ext == NULL || ext != Py_None)
            goto fallback;
        if (!get_range(SLOT(pds, L_ACK, A_TYPE), 8, 8, &t))
            goto fallback;
        M(SLOT(pds, L_ACK, A_FLAGS), 0x7F, flags);
        if (!get_range(SLOT(pds, L_ACK, A_CC_TYPE), 0, 1, &cc) || flags & 0x08)
            goto fallback; /* probe form (unsigned offset), other CC state */
        M(SLOT(pds, L_ACK, A_NEXT_HDR), 0xF, nh);
        if (!get_range(SLOT(pds, L_ACK, A_ACK_PSN_OFFSET), -32768, 32767, &aoff_u))
            goto fallback;
        U(SLOT(pds, L_ACK, A_CACK_PSN), 0xFFFFFFFF, cack);
        U(SLOT(pds, L_ACK, A_SPDCID), 0xFFFF, spdcid);
        U(SLOT(pds, L_ACK, A_DPDCID), 0xFFFF, dpdcid);
        M(SLOT(pds, L_ACK, A_CC_FLAGS), 0xF, ccf);
        U(SLOT(pds, L_ACK, A_MPR), 0xFF, mpr);
        if (!get_range(SLOT(pds, L_ACK, A_SACK_PSN_OFFSET), -32768, 32767, &soff_u))
            goto fallback;
        U(SLOT(pds, L_ACK, A_SACK_BITMAP), ~0ULL, bitmap);
        U(SLOT(pds, L_ACK, A_OOO_COUNT), 0xFFFF, ooo);
        put16(hdr + 42, 0x4000 | nh << 7 | flags);
        put16(hdr + 44, aoff_u & 0xFFFF);
        put32(hdr + 46, cack);
        put16(hdr + 50, spdcid);
        put16(hdr + 52, dpdcid);
        hdr[54] = (uint8_t)((cc ? 0x10 : 0) | ccf);
        hdr[55] = (uint8_t)mpr;
        put16(hdr + 56, soff_u & 0xFFFF);
        put64(hdr + 58, bitmap);
        if (cc == 0) {
            unsigned long long st, rcp, rb;
            int rc;
            U(SLOT(pds, L_ACK, A_SERVICE_TIME), 0xFFFF, st);
            TRUTH(SLOT(pds, L_ACK, A_RESTORE_CWND), rc);
            M(SLOT(pds, L_ACK, A_RCV_CWND_PEND), 0x7F, rcp);
            M(SLOT(pds, L_ACK, A_RCVD_BYTES), 0xFFFFFF, rb);
            put16(hdr + 66, st);
            put32(hdr + 68, (rc ? 0x80000000ULL : 0) | rcp << 24 | rb);
        } else {
            unsigned long long credit;
            M(SLOT(pds, L_ACK, A_CREDIT), 0xFFFFFF, credit);
            put32(hdr + 66, credit << 8);
            put16(hdr + 70, 0);
        }
        put16(hdr + 72, ooo);
        hl = 74;
        l4_len = 40 + (unsigned long long)pay.len;
    }
    if (l4_len > 0xFFEB)
        goto fallback;
    m = (m + l4_len + 20) % 0xFFFF;
    memcpy(hdr, PyBytes_AS_STRING(dmac), 6);
    memcpy(hdr + 6, PyBytes_AS_STRING(smac), 6);
    hdr[12] = 0x08;
    hdr[13] = 0x00;
    hdr[14] = 0x45;
    hdr[15] = (uint8_t)tos;
    put16(hdr + 16, 20 + l4_len);
    put16(hdr + 18, ipid);
    put16(hdr + 20, 0x4000);
    hdr[22] = (uint8_t)ttl;
    hdr[23] = 17;
    put16(hdr + 24, m ? 0xFFFF - m : 0);
    memcpy(hdr + 26, s4, 4);
    memcpy(hdr + 30, d4, 4);
    put16(hdr + 34, ev);
    put16(hdr + 36, dport);
    put16(hdr + 38, l4_len);
    put16(hdr + 40, 0);
    PyObject *out = PyBytes_FromStringAndSize(NULL, hl + pay.len);
    if (out != NULL) {
        memcpy(PyBytes_AS_STRING(out), hdr, (size_t)hl);
        if (pay.len)
            memcpy(PyBytes_AS_STRING(out) + hl, pay.buf, (size_t)pay.len);
    }
    PyBuffer_Release(&pay);
    return out;
fallback:
    if (have_pay)
        PyBuffer_Release(&pay);
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ decode */

/* Decoded header fields that repeat from packet to packet (a PDC's IDs; a message's ID,
 * length, key and buffer offset; a flow's job and initiator; the payload length and the
 * offset of a full packet) share one int per value while it stays in this direct-mapped
 * memo: an int fewer to make and to free per field and frame. PSNs, bitmaps and counts
 * change every frame and are made fresh. Ints are immutable, so sharing is invisible. */
#define FIELD_MEMO_BITS 10
static PyObject *field_memo[1 << FIELD_MEMO_BITS];

/* ints for v[0..n) (new references in vals), the fields of `shared` (bit i: field i)
 * from the memo */
static int fill_ints(PyObject **vals, const unsigned long long *v, int n, uint32_t shared) {
    for (int i = 0; i < n; i++) {
        vals[i] = (shared >> i & 1) && v[i] <= (unsigned long long)LLONG_MAX
                      ? memo_int(field_memo, FIELD_MEMO_BITS, (long long)v[i])
                      : PyLong_FromUnsignedLongLong(v[i]);
        if (vals[i] == NULL) {
            for (int j = 0; j < i; j++)
                Py_DECREF(vals[j]);
            return -1;
        }
    }
    return 0;
}

#define BIT(i) (1u << (i))
/* the request's: its sender's PDC ID (the DPDCID is made below, from the memo too) */
#define REQ_SHARED BIT(R_SPDCID)
/* the standard header's */
#define SES_SHARED                                                                          \
    (BIT(S_MESSAGE_ID) | BIT(S_JOB_ID) | BIT(S_BUFFER_OFFSET) | BIT(S_INITIATOR) |           \
     BIT(S_MEMORY_KEY) | BIT(S_HEADER_DATA) | BIT(S_PAYLOAD_LENGTH) | BIT(S_MESSAGE_OFFSET) | \
     BIT(S_REQUEST_LENGTH))
/* the ACK_CC's: both PDC IDs */
#define ACK_SHARED (BIT(A_SPDCID) | BIT(A_DPDCID))

/* A direct-mapped memo in front of the text caches (4 or 6 address bytes -> their text):
 * the mapping is a pure function of the bytes, so an entry stays right whatever happens to
 * the dicts; it saves a bytes object, its hash and a dict lookup per address per frame.
 * Entries hold references to the (immutable) strings; configure() empties it. */
#define MEMO_BITS 12
typedef struct {
    uint64_t key; /* the bytes, and their count in the top byte; 0: empty */
    PyObject *text;
} MemoEntry;
static MemoEntry text_memo[1 << MEMO_BITS];

static void memo_clear(void) {
    for (int i = 0; i < (1 << MEMO_BITS); i++) {
        Py_CLEAR(text_memo[i].text);
        text_memo[i].key = 0;
    }
}

static PyObject *text_of(PyObject *cache, const uint8_t *b, Py_ssize_t n) {
    uint64_t key = (uint64_t)n << 56;
    for (Py_ssize_t i = 0; i < n && n <= 7; i++)
        key |= (uint64_t)b[i] << (8 * i);
    MemoEntry *e = n <= 7 ? &text_memo[(key * 0x9E3779B97F4A7C15ULL) >> (64 - MEMO_BITS)] : NULL;
    if (e != NULL && e->key == key && e->text != NULL)
        return Py_NewRef(e->text);
    PyObject *k = PyBytes_FromStringAndSize((const char *)b, n);
    if (k == NULL)
        return NULL;
    PyObject *v = PyDict_GetItemWithError(cache, k);
    Py_DECREF(k);
    if (v == NULL || !PyUnicode_CheckExact(v))
        return NULL;
    if (e != NULL) {
        Py_XSETREF(e->text, Py_NewRef(v));
        e->key = key;
    }
    return Py_NewRef(v);
}

/* data[lo:hi] as a read-only memoryview of ``data`` (an exact bytes object), without
 * copying: the view is made over the whole object, then narrowed as a slice narrows it
 * (start, length and shape change; a byte buffer's contiguity does not). A bytes object
 * always exports such a buffer; were it not so, the payload is copied as without a view. */
static PyObject *view_of(PyObject *data, Py_ssize_t lo, Py_ssize_t hi) {
    PyObject *mv = PyMemoryView_FromObject(data);
    if (mv == NULL)
        return NULL;
    Py_buffer *v = PyMemoryView_GET_BUFFER(mv);
    if (!v->readonly || !byte_buffer(v)) {
        Py_DECREF(mv);
        return PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + lo, hi - lo);
    }
    v->buf = (char *)v->buf + lo;
    v->len = v->shape[0] = hi - lo;
    return mv;
}

static PyObject *decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode(data, udp_port, view=False)");
        return NULL;
    }
    int view = 0;
    if (nargs == 3 && (view = PyObject_IsTrue(args[2])) < 0)
        return NULL;
    if (!configured || !PyBytes_CheckExact(args[0]))
        Py_RETURN_NONE;
    long udp_port = -1;
    if (args[1] != Py_None) {
        udp_port = PyLong_AsLong(args[1]);
        if (udp_port == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    if (n < 74)
        Py_RETURN_NONE;
    uint32_t word = get16(b + 42), t = word >> 11, nh = word >> 7 & 0xF, flags = word & 0x7F;
    int is_req = nh == 3 && (t == 2 || t == 3 || t == 13 || t == 14);
    int is_ack = !is_req && t == 8 && nh == 0 && !(word & 0x08);
    Py_ssize_t hl;
    int cc = 0;
    if (is_req) {
        hl = t <= 3 ? 98 : 102;
    } else if (is_ack) {
        cc = b[54] >> 4;
        if (cc > 1)
            Py_RETURN_NONE;
        hl = 74;
    } else {
        Py_RETURN_NONE;
    }
    if (n < hl)
        Py_RETURN_NONE;
    /* Ethernet / IPv4 / UDP: the checks of _decode_fast */
    uint32_t tos = b[15], tot = get16(b + 16), ipid = get16(b + 18), frag = get16(b + 20),
             ttl = b[22], ck = get16(b + 24), sport = get16(b + 34), dport = get16(b + 36),
             ulen = get16(b + 38), ucsum = get16(b + 40);
    Py_ssize_t end = 14 + (Py_ssize_t)tot;
    uint64_t sum = 0x4511 + (uint64_t)tos + tot + ipid + frag + ((uint64_t)ttl << 8) + ck +
                   wsum4(b + 26) + wsum4(b + 30);
    if (b[12] != 0x08 || b[13] != 0x00 || b[14] != 0x45 || b[23] != 17 || ucsum ||
        ulen != tot - 20 || end < hl || end > n || frag & 0x3FFF ||
        (udp_port >= 0 && (long)dport != udp_port) || sum % 0xFFFF)
        Py_RETURN_NONE;
    PyObject *smac = text_of(mac_text, b + 6, 6), *dmac = text_of(mac_text, b, 6);
    PyObject *src = text_of(ip_text, b + 26, 4), *dst = text_of(ip_text, b + 30, 4);
    PyObject *pds = NULL, *ses = NULL;
    if (smac == NULL || dmac == NULL || src == NULL || dst == NULL) {
        if (PyErr_Occurred())
            goto error;
        goto none; /* a MAC or address the caches do not know yet: the Python path */
    }
    if (is_req) {
        const uint8_t *p = b + 42;
        uint32_t cpo_raw = get16(p + 2), psn = get32(p + 4), spdcid = get16(p + 8),
                 last = get16(p + 10), ccc = 0, credit = 0;
        const uint8_t *s = p + 12;
        if (t > 3) {
            uint32_t ccw = get32(s);
            ccc = ccw >> 24;
            credit = ccw & 0xFFFFFF;
            s += 4;
        }
        uint32_t op = s[0] & 0x3F, b1 = s[1];
        if (((uint64_t)1 << op) & ext_ops)
            goto none; /* an extension header follows (atomics, rendezvous): Python */
        PyObject *rv[R_N];
        unsigned long long iv[R_N] = {t, 3, flags, 0, psn, spdcid, 0, 0, 0, ccc, credit};
        if (fill_ints(rv, iv, R_N, REQ_SHARED) < 0)
            goto error;
        Py_SETREF(rv[R_CLEAR_PSN_OFFSET], PyLong_FromLong((int16_t)cpo_raw));
        if (flags & 0x04) {
            Py_SETREF(rv[R_USE_RSV_PDC], PyBool_FromLong(last >= 0x8000));
            Py_SETREF(rv[R_PSN_OFFSET], PyLong_FromLong(last & 0xFFF));
        } else {
            Py_SETREF(rv[R_DPDCID], memo_int(field_memo, FIELD_MEMO_BITS, last));
            Py_SETREF(rv[R_USE_RSV_PDC], PyBool_FromLong(0));
        }
        if (rv[R_CLEAR_PSN_OFFSET] == NULL || rv[R_PSN_OFFSET] == NULL || rv[R_DPDCID] == NULL) {
            for (int i = 0; i < R_N; i++)
                Py_XDECREF(rv[i]);
            goto error;
        }
        pds = new_filled(&L_REQ, rv);
        if (pds == NULL)
            goto error;
        uint64_t tail = get64(s + 32);
        uint32_t gj = get32(s + 4);
        unsigned long long sv[S_N] = {
            op, b1 >> 6, b1 & 0x3F, get16(s + 2), gj >> 24, gj & 0xFFFFFF, get16(s + 8) & 0xFFF,
            get16(s + 10) & 0xFFF, get64(s + 12), get32(s + 20), get64(s + 24),
            (b1 & 0x01) ? tail : 0, (b1 & 0x01) ? 0 : (tail >> 32 & 0x3FFF),
            (b1 & 0x01) ? 0 : (tail & 0xFFFFFFFF), get32(s + 40)};
        PyObject *svals[S_N];
        if (fill_ints(svals, sv, S_N, SES_SHARED) < 0)
            goto error;
        ses = new_filled(&L_SES, svals);
        if (ses == NULL)
            goto error;
    } else {
        const uint8_t *p = b + 42;
        PyObject *av[A_N];
        /* NSCC: service time (16 bits at 66), then the restore / pending / received word
         * at 68; credit: the 32-bit word at 66 is credit << 8 */
        uint32_t c = get32(b + 68);
        unsigned long long iv[A_N] = {
            8, 0, flags, 0, get32(p + 4), get16(p + 8), get16(p + 10), (unsigned)cc,
            b[54] & 0xF, b[55], 0, get64(b + 58), cc ? 0 : get16(b + 66), 0,
            cc ? 0 : (c >> 24 & 0x7F), cc ? 0 : (c & 0xFFFFFF), cc ? get32(b + 66) >> 8 : 0,
            get16(b + 72), 0, 0};
        if (fill_ints(av, iv, A_N, ACK_SHARED) < 0)
            goto error;
        Py_SETREF(av[A_ACK_PSN_OFFSET], PyLong_FromLong((int16_t)get16(p + 2)));
        Py_SETREF(av[A_SACK_PSN_OFFSET], PyLong_FromLong((int16_t)get16(b + 56)));
        Py_SETREF(av[A_RESTORE_CWND], PyBool_FromLong(!cc && c >= 0x80000000u));
        Py_INCREF(empty_bytes);
        Py_SETREF(av[A_CC_STATE_RAW], empty_bytes);
        Py_INCREF(empty_bytes);
        Py_SETREF(av[A_CCX_STATE], empty_bytes);
        if (av[A_ACK_PSN_OFFSET] == NULL || av[A_SACK_PSN_OFFSET] == NULL) {
            for (int i = 0; i < A_N; i++)
                Py_XDECREF(av[i]);
            goto error;
        }
        pds = new_filled(&L_ACK, av);
        if (pds == NULL)
            goto error;
        ses = Py_None;
        Py_INCREF(ses);
    }
    PyObject *fv[F_N];
    fv[F_PDS] = pds;
    fv[F_SES] = ses;
    fv[F_EXT] = Py_None;
    Py_INCREF(Py_None);
    /* an end point's receive path asks for a view: a data frame's payload is then read
     * only if its SES keeps the data (a scratch sink counts it), not copied out cold */
    fv[F_PAYLOAD] = view && end > hl ? view_of(args[0], hl, end)
                                     : PyBytes_FromStringAndSize((const char *)b + hl, end - hl);
    fv[F_SRC_MAC] = smac;
    fv[F_DST_MAC] = dmac;
    fv[F_SRC_IP] = src;
    fv[F_DST_IP] = dst;
    fv[F_EV] = PyLong_FromLong(sport);
    fv[F_DSCP] = PyLong_FromLong(tos >> 2);
    fv[F_ECN] = PyLong_FromLong(tos & 3);
    fv[F_TTL] = PyLong_FromLong(ttl);
    fv[F_IP_ID] = PyLong_FromLong(ipid);
    fv[F_UDP_DPORT] = PyLong_FromLong(dport);
    fv[F_UDP_CHECKSUM] = PyBool_FromLong(0);
    fv[F_ENCAP] = udp_str;
    Py_INCREF(udp_str);
    fv[F_IP_PROTO] = PyLong_FromLong(default_ip_proto);
    fv[F_TSS] = Py_None;
    Py_INCREF(Py_None);
    fv[F_TRAILER] = empty_bytes;
    Py_INCREF(empty_bytes);
    for (int i = 0; i < F_N; i++) {
        if (fv[i] == NULL) {
            for (int j = 0; j < F_N; j++)
                Py_XDECREF(fv[j]);
            return NULL;
        }
    }
    return new_filled(&L_FRAME, fv);
none:
    Py_XDECREF(smac);
    Py_XDECREF(dmac);
    Py_XDECREF(src);
    Py_XDECREF(dst);
    Py_RETURN_NONE;
error:
    Py_XDECREF(smac);
    Py_XDECREF(dmac);
    Py_XDECREF(src);
    Py_XDECREF(dst);
    Py_XDECREF(pds);
    Py_XDECREF(ses);
    return NULL;
}

/* ------------------------------------------------------------------ configure */

static PyObject *configure(PyObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"frame", "request", "ses", "ack_cc", "ip_pack", "mac_pack",
                             "ip_text", "mac_text", "ip_proto", "ext_ops", NULL};
    PyObject *fr, *rq, *se, *ak, *ipp, *macp, *ipt, *mact, *ops;
    long proto;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO!O!O!O!lO:configure", kwlist, &fr, &rq,
                                     &se, &ak, &PyDict_Type, &ipp, &PyDict_Type, &macp,
                                     &PyDict_Type, &ipt, &PyDict_Type, &mact, &proto, &ops))
        return NULL;
    configured = 0;
    uint64_t mask = 0;
    PyObject *it = PyObject_GetIter(ops);
    if (it == NULL)
        return NULL;
    PyObject *x;
    while ((x = PyIter_Next(it)) != NULL) {
        long op = PyLong_AsLong(x);
        Py_DECREF(x);
        if (op == -1 && PyErr_Occurred())
            break;
        if (op < 0 || op > 63) {
            PyErr_Format(PyExc_ValueError, "configure: SES opcode %ld not in 0..63", op);
            break;
        }
        mask |= (uint64_t)1 << op;
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    ext_ops = mask;
    if (layout(&L_FRAME, fr, FRAME_FIELDS, F_N) < 0 || layout(&L_REQ, rq, REQ_FIELDS, R_N) < 0 ||
        layout(&L_SES, se, SES_FIELDS, S_N) < 0 || layout(&L_ACK, ak, ACK_CC_FIELDS, A_N) < 0)
        return NULL;
    Py_INCREF(ipp);
    Py_XSETREF(ip_pack, ipp);
    Py_INCREF(macp);
    Py_XSETREF(mac_pack, macp);
    Py_INCREF(ipt);
    memo_clear(); /* new caches: the memo starts empty (its entries would still be right) */
    Py_XSETREF(ip_text, ipt);
    Py_INCREF(mact);
    Py_XSETREF(mac_text, mact);
    default_ip_proto = proto;
    configured = 1;
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- EvTally
 * A NIC tap (tap(now, frame, direction)) that adds the length of every transmitted UET
 * request (UDP to the given port over IPv4 without options or IPv6; a PDS type of the
 * given set) to counts[EV] (EV = the UDP source port). The port and the types come from
 * uet.experiments.signals, whose Python tap (EvLoad.py_tap) is the reference it must match
 * frame for frame; being a C callable, the fabric's C path calls it without entering the
 * interpreter. */
typedef struct {
    PyObject_HEAD
    PyObject *counts; /* dict (a Counter): EV -> bytes */
    vectorcallfunc vectorcall;
    uint32_t types;   /* bit t set: PDS type t is a request */
    int port;         /* the UET UDP port */
} EvTally;

static PyObject *tx_str;

static PyObject *evtally_call(PyObject *self, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames) {
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n != 3 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "EvTally(now, frame, direction): 3 positional "
                                         "arguments");
        return NULL;
    }
    PyObject *dir = args[2];
    if (dir != tx_str && !(PyUnicode_Check(dir) && PyUnicode_Compare(dir, tx_str) == 0)) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *data = args[1];
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "EvTally: the frame must be bytes");
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t len = PyBytes_GET_SIZE(data);
    Py_ssize_t udp;
    if (len < 24)
        Py_RETURN_NONE;
    if (b[12] == 8 && b[13] == 0 && b[14] == 0x45 && b[23] == 17)
        udp = 34;
    else if (b[12] == 0x86 && b[13] == 0xdd && b[20] == 17)
        udp = 54;
    else
        Py_RETURN_NONE;
    EvTally *t = (EvTally *)self;
    if (len <= udp + 8 || ((b[udp + 2] << 8) | b[udp + 3]) != t->port ||
        !(t->types >> (b[udp + 8] >> 3) & 1))
        Py_RETURN_NONE;
    PyObject *counts = t->counts;
    PyObject *key = PyLong_FromLong((b[udp] << 8) | b[udp + 1]);
    if (key == NULL)
        return NULL;
    PyObject *old = PyDict_GetItemWithError(counts, key); /* borrowed */
    PyObject *sum;
    if (old == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(key);
            return NULL;
        }
        sum = PyLong_FromSsize_t(len);
    } else {
        PyObject *add = PyLong_FromSsize_t(len);
        sum = add == NULL ? NULL : PyNumber_Add(old, add);
        Py_XDECREF(add);
    }
    int rc = sum == NULL ? -1 : PyDict_SetItem(counts, key, sum);
    Py_XDECREF(sum);
    Py_DECREF(key);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *evtally_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"counts", "port", "types", NULL};
    PyObject *counts, *types;
    int port;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!iO:EvTally", kwlist, &PyDict_Type,
                                     &counts, &port, &types))
        return NULL;
    if (port < 0 || port > 0xFFFF) {
        PyErr_Format(PyExc_ValueError, "EvTally: port %d not in 0..65535", port);
        return NULL;
    }
    uint32_t mask = 0;
    PyObject *it = PyObject_GetIter(types);
    if (it == NULL)
        return NULL;
    PyObject *x;
    while ((x = PyIter_Next(it)) != NULL) {
        long v = PyLong_AsLong(x);
        Py_DECREF(x);
        if (v == -1 && PyErr_Occurred())
            break;
        if (v < 0 || v > 31) {
            PyErr_Format(PyExc_ValueError, "EvTally: PDS type %ld not in 0..31", v);
            break;
        }
        mask |= (uint32_t)1 << v;
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    EvTally *t = (EvTally *)type->tp_alloc(type, 0);
    if (t == NULL)
        return NULL;
    Py_INCREF(counts);
    t->counts = counts;
    t->vectorcall = evtally_call;
    t->types = mask;
    t->port = port;
    return (PyObject *)t;
}

static int evtally_traverse(EvTally *t, visitproc visit, void *arg) {
    Py_VISIT(t->counts);
    return 0;
}

static int evtally_clear(EvTally *t) {
    Py_CLEAR(t->counts);
    return 0;
}

static void evtally_dealloc(EvTally *t) {
    PyObject_GC_UnTrack(t);
    evtally_clear(t);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyMemberDef evtally_members[] = {
    {"counts", T_OBJECT, offsetof(EvTally, counts), READONLY, "EV -> bytes (a dict)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject EvTallyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "uet.native._codec_core.EvTally",
    .tp_basicsize = sizeof(EvTally),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "EvTally(counts, port, types): a tap adding the length of each transmitted "
              "frame to UDP port `port` whose PDS type is in `types` to counts[EV].",
    .tp_new = evtally_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(EvTally, vectorcall),
    .tp_traverse = (traverseproc)evtally_traverse,
    .tp_clear = (inquiry)evtally_clear,
    .tp_dealloc = (destructor)evtally_dealloc,
    .tp_members = evtally_members,
};

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "configure(frame, request, ses, ack_cc, ip_pack, mac_pack, ip_text, mac_text, ip_proto,"
     " ext_ops): the record classes, the codec's address caches, the default native-IP"
     " protocol and the SES opcodes followed by an extension header."},
    {"encode", (PyCFunction)encode, METH_O,
     "encode(frame) -> bytes or None: the two common frames, as _encode_fast packs them."},
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "decode(data, udp_port, view=False) -> Frame or None: the two common frames, as "
     "_decode_fast unpacks them; view: the payload is a read-only memoryview of data (no "
     "copy) instead of bytes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_codec_core",
    "The codec's two common frames in C (uet.wire.codec).", -1, methods,
};

PyMODINIT_FUNC PyInit__codec_core(void) {
    empty_bytes = PyBytes_FromStringAndSize(NULL, 0);
    udp_str = PyUnicode_InternFromString("udp");
    tx_str = PyUnicode_InternFromString("tx");
    if (empty_bytes == NULL || udp_str == NULL || tx_str == NULL ||
        PyType_Ready(&EvTallyType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&EvTallyType);
    if (PyModule_AddObject(m, "EvTally", (PyObject *)&EvTallyType) < 0) {
        Py_DECREF(&EvTallyType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
