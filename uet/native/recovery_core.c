/* The per-ACK and per-send work of an initiator PDC's loss recovery in C
 * (uet.pds.recovery.LossRecovery: on_ack, on_sent and RACK's scan), over the same Python
 * objects.
 *
 * The state stays where it is: in the __slots__ of LossRecovery, SentPacket, Rack and
 * RtoEstimator, which Python code reads and writes too. These functions read and write
 * those slots at the offsets their member descriptors give (looked up once, by
 * configure()), as the codec does for its records: no attribute lookup, no interpreted
 * bytecode, no frame per packet. Every write goes straight to the slot before any callback
 * runs, so the callbacks (released, unqueued, arm, rtt_sample, the SACK-count detector) see
 * what the Python code would have shown them. Arguments of another type (a subclass, a
 * record that is not PdsAck / PdsAckCc) go to the Python reference, which configure()
 * receives; tests/pds/test_recovery_core.py holds the two to the same state after every
 * operation of seeded random streams.
 */
#include "slots.h"

#define SACK_BITS 64

enum { P_PSN, P_NBYTES, P_SEND_TIME, P_PREV_SEND, P_RETRIES, P_ARRIVED, P_SEQ, P_EV,
       P_RETX_QUEUED, P_RELEASED, P_EVER_RETX, P_SUSPECT, P_IS_CLOSE, P_INFLIGHT, P_N };
static const char *PKT_NAMES[P_N] = {
    "psn", "nbytes", "send_time", "prev_send", "retries", "arrived", "seq", "ev",
    "retx_queued", "released", "ever_retx", "suspect", "is_close", "inflight"};

enum { R_OUTSTANDING, R_INFLIGHT_BYTES, R_KNOWN_ARRIVED, R_PEER_RCVD, R_PEER_RCVD_RAW,
       R_SENT_ORDER, R_SEQ, R_DETECTOR, R_RACK, R_RACK_AT, R_LAST_TX, R_LAST_EV,
       R_SACK_REACH, R_RTO, R_RTO_AT, R_MAX_CACK, R_COUNTERS, R_RELEASED, R_UNQUEUED,
       R_ARM, R_CFG, R_N };
static const char *REC_NAMES[R_N] = {
    "outstanding", "inflight_bytes", "known_arrived", "peer_rcvd", "peer_rcvd_raw",
    "sent_order", "seq", "detector", "rack", "rack_at", "last_tx", "last_ev", "sack_reach",
    "rto", "rto_at", "max_cack", "counters", "released", "unqueued", "arm", "cfg"};

enum { K_FIXED_WND, K_SEQ, K_RTT, K_MIN_RTT, K_MULTIPATH, K_SPURIOUS, K_CUR, K_PREV,
       K_BUCKET_END, K_N };
static const char *RACK_NAMES[K_N] = {"fixed_wnd", "seq", "rtt", "min_rtt", "multipath",
                                      "spurious", "_cur", "_prev", "_bucket_end"};

enum { T_BASE, T_ADAPTIVE, T_MIN_RTO, T_MAX_RTO, T_SRTT, T_RTTVAR, T_N };
static const char *RTO_NAMES[T_N] = {"base", "adaptive", "min_rto", "max_rto", "srtt",
                                     "rttvar"};

enum { D_N_, D_N };
static const char *DET_NAMES[D_N] = {"n"};

enum { A_CACK, A_N1 };
static const char *ACK_NAMES[A_N1] = {"cack_psn"};

enum { C_CACK, C_SACK_OFF, C_BITMAP, C_CC_TYPE, C_RCVD, C_N };
static const char *ACKCC_NAMES[C_N] = {"cack_psn", "sack_psn_offset", "sack_bitmap",
                                       "cc_type", "rcvd_bytes"};

static Layout L_PKT, L_REC, L_RACK, L_RTO, L_DET, L_ACK, L_ACKCC;
static PyObject *ref_on_ack, *ref_on_sent, *ref_rack_scan;  /* the Python reference */
static PyObject *ref_rtt_sample, *ref_detect_after_ack;
static PyObject *s_ooo_loss_threshold, *s_rack_lost, *s_detect_sack, *s_ooo_inference;
static PyObject *s_delivered, *s_rtt_sample, *s_rto_for, *s_popleft, *s_append,
    *s_retx_spurious;
static int64_t bucket_rtts;
static int configured;

/* ------------------------------------------------------------------ Rack */

typedef struct {
    int64_t fixed_wnd, seq, rtt, min_rtt, spurious, cur, prev, bucket_end;
    int has_min, multipath;
} RackState;

static int rack_load(PyObject *r, RackState *s) {
    int k;
    if (get_i64(r, &L_RACK, K_FIXED_WND, &s->fixed_wnd) < 0 ||
        get_i64(r, &L_RACK, K_SEQ, &s->seq) < 0 || get_i64(r, &L_RACK, K_RTT, &s->rtt) < 0 ||
        (k = get_opt(r, &L_RACK, K_MIN_RTT, &s->min_rtt)) < 0 ||
        get_i64(r, &L_RACK, K_SPURIOUS, &s->spurious) < 0 ||
        get_i64(r, &L_RACK, K_CUR, &s->cur) < 0 || get_i64(r, &L_RACK, K_PREV, &s->prev) < 0 ||
        get_i64(r, &L_RACK, K_BUCKET_END, &s->bucket_end) < 0)
        return -1;
    s->has_min = k;
    if (!k)
        s->min_rtt = 0;
    if ((s->multipath = truth(r, &L_RACK, K_MULTIPATH)) < 0)
        return -1;
    return 0;
}

/* write back the fields that changed */
static int rack_store(PyObject *r, const RackState *a, const RackState *b) {
#define ST(F, K) if (a->F != b->F && put_i64(r, &L_RACK, K, b->F) < 0) return -1
    ST(seq, K_SEQ);
    ST(rtt, K_RTT);
    ST(spurious, K_SPURIOUS);
    ST(cur, K_CUR);
    ST(prev, K_PREV);
    ST(bucket_end, K_BUCKET_END);
#undef ST
    if (b->has_min && (!a->has_min || a->min_rtt != b->min_rtt) &&
        put_i64(r, &L_RACK, K_MIN_RTT, b->min_rtt) < 0)
        return -1;
    return 0;
}

/* Rack._skew */
static void rack_skew(RackState *s, int64_t now, int64_t sample) {
    if (now >= s->bucket_end) {
        int64_t span = bucket_rtts * (s->min_rtt ? s->min_rtt : 1000000);
        s->prev = now < s->bucket_end + span ? s->cur : 0;
        s->cur = 0;
        s->bucket_end = now + span;
    }
    if (sample > s->cur)
        s->cur = sample;
}

/* Rack.delivered: 1 (True), 0 (False: the retransmission was spurious), -1 error */
static int rack_delivered(PyObject *r, int64_t now, int64_t seq, int64_t send_time,
                          int64_t prev_send, int retransmitted, int timely, int original) {
    RackState a, s;
    if (rack_load(r, &a) < 0)
        return -1;
    s = a;
    int64_t rtt = now - send_time;
    int result = 1;
    if (!timely) {
        if (seq > s.seq) {
            s.seq = seq;
            s.rtt = rtt;
        }
    } else if (retransmitted &&
               (original || (s.has_min && rtt < s.min_rtt - (s.min_rtt >> 2)))) {
        s.spurious += 1;
        if (s.seq)
            rack_skew(&s, now, now - prev_send - s.rtt);
        result = 0;
    } else {
        if (!retransmitted) {
            if (!s.has_min || rtt < s.min_rtt) {
                s.min_rtt = rtt;
                s.has_min = 1;
            }
            if (s.multipath && (rtt - s.min_rtt > s.cur || now >= s.bucket_end))
                rack_skew(&s, now, rtt - s.min_rtt);
        }
        if (seq > s.seq) {
            s.seq = seq;
            s.rtt = rtt;
        } else if (!retransmitted && s.seq &&
                   (rtt - s.rtt > s.cur || now >= s.bucket_end)) {
            rack_skew(&s, now, rtt - s.rtt);
        }
    }
    return rack_store(r, &a, &s) < 0 ? -1 : result;
}

/* Rack.reo_wnd */
static int64_t rack_reo_wnd(const RackState *s) {
    if (s->fixed_wnd)
        return s->fixed_wnd;
    int64_t skew = s->cur > s->prev ? s->cur : s->prev;
    int64_t base = s->min_rtt; /* None or 0: 0 */
    int64_t floor = s->multipath ? base + (base >> 1) : base >> 2;
    if (skew)
        skew += (skew >> 1) + (base >> 2);
    return skew > floor ? skew : floor;
}

/* ------------------------------------------------------------------ LossRecovery */

typedef struct {
    PyObject *rec, *now_obj;
    int64_t now;
    int64_t nbytes, npackets; /* newly */
} Ctx;

/* the SACK-count detector, if on (LossDetector.delivered) */
static int detector_delivered(PyObject *rec, PyObject *pkt, int always) {
    PyObject *det = SLOT(rec, L_REC, R_DETECTOR);
    if (det == NULL)
        return unset(rec, &L_REC, R_DETECTOR);
    if (!always) {
        int64_t n;
        if (!Py_IS_TYPE(det, L_DET.type)) {
            PyObject *v = PyObject_GetAttrString(det, "n");
            int t = v ? PyObject_IsTrue(v) : -1;
            Py_XDECREF(v);
            if (t <= 0)
                return t;
        } else {
            if (get_i64(det, &L_DET, D_N_, &n) < 0)
                return -1;
            if (!n)
                return 0;
        }
    }
    PyObject *seq = SLOT(pkt, L_PKT, P_SEQ);
    if (seq == NULL)
        return unset(pkt, &L_PKT, P_SEQ);
    PyObject *r = mc_call1(det, s_delivered, seq);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* pkt leaves the flight (LossRecovery._leave_flight) */
static int leave_flight(PyObject *rec, PyObject *pkt) {
    int inflight = truth(pkt, &L_PKT, P_INFLIGHT);
    if (inflight <= 0)
        return inflight;
    int64_t nb;
    if (put_bool(pkt, &L_PKT, P_INFLIGHT, 0) < 0 || get_i64(pkt, &L_PKT, P_NBYTES, &nb) < 0)
        return -1;
    return add_i64(rec, &L_REC, R_INFLIGHT_BYTES, -nb);
}

/* rack.delivered(now, pkt.seq, pkt.send_time, pkt.prev_send, suspect and not retx_queued,
 * timely, original) for a rack that is a Rack (else the method) */
static int pkt_rack_delivered(PyObject *rack, Ctx *c, PyObject *pkt, int timely,
                              int original) {
    int64_t seq, st, ps;
    int suspect, queued;
    if (get_i64(pkt, &L_PKT, P_SEQ, &seq) < 0 || get_i64(pkt, &L_PKT, P_SEND_TIME, &st) < 0 ||
        get_i64(pkt, &L_PKT, P_PREV_SEND, &ps) < 0 ||
        (suspect = truth(pkt, &L_PKT, P_SUSPECT)) < 0 ||
        (queued = truth(pkt, &L_PKT, P_RETX_QUEUED)) < 0)
        return -1;
    int resent = suspect && !queued;
    if (Py_IS_TYPE(rack, L_RACK.type))
        return rack_delivered(rack, c->now, seq, st, ps, resent, timely, original);
    PyObject *r = PyObject_CallMethod(rack, "delivered", "OLLLOOO", c->now_obj, (long long)seq,
                                      (long long)st, (long long)ps,
                                      resent ? Py_True : Py_False, timely ? Py_True : Py_False,
                                      original ? Py_True : Py_False);
    if (r == NULL)
        return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

/* LossRecovery._release */
static int release(Ctx *c, PyObject *pkt, int timely, int original) {
    PyObject *rec = c->rec;
    PyObject *out = SLOT(rec, L_REC, R_OUTSTANDING);
    PyObject *psn = SLOT(pkt, L_PKT, P_PSN);
    if (out == NULL)
        return unset(rec, &L_REC, R_OUTSTANDING);
    if (psn == NULL)
        return unset(pkt, &L_PKT, P_PSN);
    if (PyObject_DelItem(out, psn) < 0 || put_bool(pkt, &L_PKT, P_RELEASED, 1) < 0 ||
        leave_flight(rec, pkt) < 0)
        return -1;
    int queued = truth(pkt, &L_PKT, P_RETX_QUEUED);
    if (queued < 0)
        return -1;
    if (queued) {
        PyObject *cb = SLOT(rec, L_REC, R_UNQUEUED);
        if (cb == NULL)
            return unset(rec, &L_REC, R_UNQUEUED);
        PyObject *args[3] = {c->now_obj, pkt, Py_False};
        PyObject *r = PyObject_Vectorcall(cb, args, 3, NULL);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    int arrived = truth(pkt, &L_PKT, P_ARRIVED);
    if (arrived < 0)
        return -1;
    if (!arrived) {
        int64_t nb;
        if (get_i64(pkt, &L_PKT, P_NBYTES, &nb) < 0)
            return -1;
        c->nbytes += nb;
        c->npackets += 1;
        if (detector_delivered(rec, pkt, 0) < 0)
            return -1;
        PyObject *rack = SLOT(rec, L_REC, R_RACK);
        if (rack == NULL)
            return unset(rec, &L_REC, R_RACK);
        int is_close = truth(pkt, &L_PKT, P_IS_CLOSE);
        if (is_close < 0)
            return -1;
        if (rack != Py_None && !is_close) {
            int ok = pkt_rack_delivered(rack, c, pkt, timely, original);
            if (ok < 0)
                return -1;
            if (!ok && count(SLOT(rec, L_REC, R_COUNTERS), s_retx_spurious) < 0)
                return -1;
        }
    }
    PyObject *cb = SLOT(rec, L_REC, R_RELEASED);
    if (cb == NULL)
        return unset(rec, &L_REC, R_RELEASED);
    PyObject *args[3] = {c->now_obj, pkt, original ? Py_True : Py_False};
    PyObject *r = PyObject_Vectorcall(cb, args, 3, NULL);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* LossRecovery._arrived: an ACK named pkt early */
static int arrived_early(Ctx *c, PyObject *pkt) {
    PyObject *rec = c->rec;
    int64_t nb;
    if (put_bool(pkt, &L_PKT, P_ARRIVED, 1) < 0 || leave_flight(rec, pkt) < 0 ||
        get_i64(pkt, &L_PKT, P_NBYTES, &nb) < 0)
        return -1;
    c->nbytes += nb;
    c->npackets += 1;
    if (detector_delivered(rec, pkt, 1) < 0)
        return -1;
    PyObject *rack = SLOT(rec, L_REC, R_RACK);
    if (rack == NULL)
        return unset(rec, &L_REC, R_RACK);
    if (rack != Py_None && pkt_rack_delivered(rack, c, pkt, 1, 0) < 0)
        return -1;
    return 0;
}

/* LossRecovery._apply_sack: 1 and *sample, 0 without a sample, -1 error */
static int apply_sack(Ctx *c, int64_t base, uint64_t bm, int64_t cack, int64_t *sample) {
    PyObject *rec = c->rec;
    PyObject *out = SLOT(rec, L_REC, R_OUTSTANDING);
    PyObject *rack = SLOT(rec, L_REC, R_RACK);
    if (out == NULL)
        return unset(rec, &L_REC, R_OUTSTANDING);
    if (!PyDict_CheckExact(out)) {
        PyErr_SetString(PyExc_TypeError, "LossRecovery.outstanding: a dict is expected");
        return -1;
    }
    if (rack == NULL)
        return unset(rec, &L_REC, R_RACK);
    Py_INCREF(out);
    Py_INCREF(rack);
    int have = 0, rc = -1;
    while (bm) {
        int bit = __builtin_ctzll(bm);
        bm &= bm - 1;
        int64_t psn = (base + bit) & M32;
        int64_t d = (psn - cack) & M32;
        if (!d || d & HALF)
            continue;
        PyObject *key = PyLong_FromLongLong(psn);
        if (key == NULL)
            goto done;
        PyObject *pkt = PyDict_GetItemWithError(out, key);
        Py_XINCREF(pkt);
        Py_DECREF(key);
        if (pkt == NULL) {
            if (PyErr_Occurred())
                goto done;
            continue;
        }
        int arrived = truth(pkt, &L_PKT, P_ARRIVED);
        if (arrived) {
            Py_DECREF(pkt);
            if (arrived < 0)
                goto done;
            continue;
        }
        int64_t nb, st;
        int ever;
        if (put_bool(pkt, &L_PKT, P_ARRIVED, 1) < 0 || leave_flight(rec, pkt) < 0 ||
            get_i64(pkt, &L_PKT, P_NBYTES, &nb) < 0 ||
            detector_delivered(rec, pkt, 0) < 0 ||
            (ever = truth(pkt, &L_PKT, P_EVER_RETX)) < 0 ||
            get_i64(pkt, &L_PKT, P_SEND_TIME, &st) < 0) {
            Py_DECREF(pkt);
            goto done;
        }
        c->nbytes += nb;
        c->npackets += 1;
        if (!ever) {
            int64_t rtt = c->now - st;
            if (!have || rtt < *sample) {
                *sample = rtt;
                have = 1;
            }
        }
        if (rack != Py_None) {
            int ok = pkt_rack_delivered(rack, c, pkt, 1, 0);
            if (ok < 0 ||
                (!ok && count(SLOT(rec, L_REC, R_COUNTERS), s_retx_spurious) < 0)) {
                Py_DECREF(pkt);
                goto done;
            }
        }
        Py_DECREF(pkt);
    }
    rc = have;
done:
    Py_DECREF(out);
    Py_DECREF(rack);
    return rc;
}

/* the lowest outstanding PSN and its packet (new reference): 1, 0 when none, -1 error */
static int first_psn(PyObject *out, int64_t *psn, PyObject **val) {
    PyObject *k, *v;
    *val = NULL;
    if (!dict_first(out, &k, &v))
        return 0;
    long long x = as_i64(k);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *psn = x;
    *val = Py_NewRef(v);
    return 1;
}

/* LossRecovery._peer_rcvd */
static int peer_rcvd(PyObject *rec, int64_t raw) {
    int64_t last;
    int k = get_opt(rec, &L_REC, R_PEER_RCVD_RAW, &last);
    if (k < 0)
        return -1;
    if (!k)
        return put_i64(rec, &L_REC, R_PEER_RCVD_RAW, raw) < 0 ? -1
               : put_i64(rec, &L_REC, R_PEER_RCVD, raw);
    int64_t delta = (raw - last) & 0xFFFFFF;
    if (0 < delta && delta < 0x800000) {
        if (put_i64(rec, &L_REC, R_PEER_RCVD_RAW, raw) < 0)
            return -1;
        return add_i64(rec, &L_REC, R_PEER_RCVD, delta);
    }
    return 0;
}


/* an ACK_CC whose bitmap is an int of 64 bits (what the decoder makes); anything else goes
 * to the Python reference, which takes every set bit of any int */
static int bitmap_ok(PyObject *ack) {
    if (!Py_IS_TYPE(ack, L_ACKCC.type))
        return 1;
    PyObject *bm = SLOT(ack, L_ACKCC, C_BITMAP);
    if (bm == NULL || !PyLong_CheckExact(bm))
        return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(bm);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* on_ack(rec, now, ack, ack_psn, retx_flag, newly, early=False) -> rtt | None */
static PyObject *k_on_ack(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "recovery core not configured");
        return NULL;
    }
    if (nargs < 6 || nargs > 7 || !Py_IS_TYPE(args[0], L_REC.type) || !is_int(args[1]) ||
        !(Py_IS_TYPE(args[2], L_ACKCC.type) || Py_IS_TYPE(args[2], L_ACK.type)) ||
        !(args[3] == Py_None || is_int(args[3])) || !PyList_CheckExact(args[5]) ||
        PyList_GET_SIZE(args[5]) != 2 || !PyLong_CheckExact(PyList_GET_ITEM(args[5], 0)) ||
        !PyLong_CheckExact(PyList_GET_ITEM(args[5], 1)) || !bitmap_ok(args[2]) ||
        SLOT(args[0], L_REC, R_OUTSTANDING) == NULL ||
        !PyDict_CheckExact(SLOT(args[0], L_REC, R_OUTSTANDING)))
        return PyObject_Vectorcall(ref_on_ack, args, nargs, NULL);
    PyObject *rec = args[0], *ack = args[2], *newly = args[5];
    Ctx c = {rec, args[1], 0, 0, 0};
    int64_t cack, ack_psn = 0, max_cack, sample = 0, v;
    int retx_flag = PyObject_IsTrue(args[4]);
    int early = nargs > 6 ? PyObject_IsTrue(args[6]) : 0;
    int is_cc = Py_IS_TYPE(ack, L_ACKCC.type);
    if (retx_flag < 0 || early < 0)
        return NULL;
    if ((c.now = as_i64(args[1])) == -1 && PyErr_Occurred())
        return NULL;
    if (args[3] != Py_None && (ack_psn = as_i64(args[3])) == -1 && PyErr_Occurred())
        return NULL;
    if ((c.nbytes = as_i64(PyList_GET_ITEM(newly, 0))) == -1 && PyErr_Occurred())
        return NULL;
    if ((c.npackets = as_i64(PyList_GET_ITEM(newly, 1))) == -1 && PyErr_Occurred())
        return NULL;
    if (get_i64(ack, is_cc ? &L_ACKCC : &L_ACK, is_cc ? C_CACK : A_CACK, &cack) < 0)
        return NULL;
    PyObject *out = Py_NewRef(SLOT(rec, L_REC, R_OUTSTANDING)); /* a dict (checked) */
    PyObject *result = NULL;
    int have_rtt = 0;
    int64_t rtt = 0;
    if (args[3] != Py_None) {
        PyObject *pkt = PyDict_GetItemWithError(out, args[3]);
        Py_XINCREF(pkt);
        if (pkt == NULL && PyErr_Occurred())
            goto done;
        if (pkt != NULL) {
            int ever = truth(pkt, &L_PKT, P_EVER_RETX), rc = 0;
            int64_t st;
            if (ever < 0 || get_i64(pkt, &L_PKT, P_SEND_TIME, &st) < 0) {
                Py_DECREF(pkt);
                goto done;
            }
            if (!ever) {
                rtt = c.now - st;
                have_rtt = 1;
            }
            if (early) {
                int arrived = truth(pkt, &L_PKT, P_ARRIVED);
                int64_t d = (ack_psn - cack) & M32;
                if (arrived < 0)
                    rc = -1;
                else if (!arrived && d && !(d & HALF))
                    rc = arrived_early(&c, pkt);
            } else {
                rc = release(&c, pkt, 1, !retx_flag);
            }
            Py_DECREF(pkt);
            if (rc < 0)
                goto done;
        }
    }
    if (get_i64(rec, &L_REC, R_MAX_CACK, &max_cack) < 0)
        goto done;
    int64_t d = (cack - max_cack) & M32;
    if (d && d < HALF) {
        int64_t named = is_cc ? (max_cack + SACK_BITS) & M32 : cack;
        if (put_i64(rec, &L_REC, R_MAX_CACK, cack) < 0)
            goto done;
        max_cack = cack;
        for (;;) {
            int64_t psn;
            PyObject *pkt;
            int k = first_psn(out, &psn, &pkt);
            if (k < 0)
                goto done;
            if (!k)
                break;
            int64_t e = (psn - cack) & M32;
            if (e && e < HALF) {
                Py_DECREF(pkt);
                break;
            }
            int rc = release(&c, pkt, ((named - psn) & M32) < HALF, 0);
            Py_DECREF(pkt);
            if (rc < 0)
                goto done;
        }
    }
    int64_t reach;
    if (is_cc) {
        int64_t soff;
        if (get_i64(ack, &L_ACKCC, C_SACK_OFF, &soff) < 0)
            goto done;
        int64_t base = (cack + soff) & M32;
        PyObject *bmo = SLOT(ack, L_ACKCC, C_BITMAP);
        if (bmo == NULL) {
            unset(ack, &L_ACKCC, C_BITMAP);
            goto done;
        }
        int nonzero = PyObject_IsTrue(bmo);
        if (nonzero < 0)
            goto done;
        Py_ssize_t n_out = PyObject_Length(out);
        if (n_out < 0)
            goto done;
        if (nonzero && n_out) {
            uint64_t bm = PyLong_AsUnsignedLongLong(bmo); /* checked on entry */
            if (bm == (uint64_t)-1 && PyErr_Occurred())
                goto done;
            int k = apply_sack(&c, base, bm, cack, &sample);
            if (k < 0)
                goto done;
            if (!have_rtt && k) {
                PyObject *r = PyObject_CallMethod(rec, "rtt_sample", "OL", c.now_obj,
                                                  (long long)sample);
                if (r == NULL)
                    goto done;
                Py_DECREF(r);
            }
        }
        reach = (base + SACK_BITS - 1) & M32;
        if (get_i64(rec, &L_REC, R_MAX_CACK, &max_cack) < 0)
            goto done;
        if (((max_cack - reach) & M32) < HALF)
            reach = (max_cack + 1) & M32;
    } else {
        if (get_i64(rec, &L_REC, R_MAX_CACK, &max_cack) < 0)
            goto done;
        reach = (max_cack + 1) & M32;
    }
    if (get_i64(rec, &L_REC, R_SACK_REACH, &v) < 0)
        goto done;
    d = (reach - v) & M32;
    if (0 < d && d < HALF && put_i64(rec, &L_REC, R_SACK_REACH, reach) < 0)
        goto done;
    {
        PyObject *a = PyLong_FromLongLong(c.nbytes), *b = PyLong_FromLongLong(c.npackets);
        if (a == NULL || b == NULL) {
            Py_XDECREF(a);
            Py_XDECREF(b);
            goto done;
        }
        PyList_SetItem(newly, 0, a);
        PyList_SetItem(newly, 1, b);
    }
    if (add_i64(rec, &L_REC, R_KNOWN_ARRIVED, c.nbytes) < 0)
        goto done;
    if (is_cc) {
        int64_t cc_type, raw;
        if (get_i64(ack, &L_ACKCC, C_CC_TYPE, &cc_type) < 0)
            goto done;
        if (cc_type == 0) {
            if (get_i64(ack, &L_ACKCC, C_RCVD, &raw) < 0 || peer_rcvd(rec, raw) < 0)
                goto done;
            Py_ssize_t n_out = PyObject_Length(out);
            if (n_out < 0)
                goto done;
            if (!n_out) {
                PyObject *pr = SLOT(rec, L_REC, R_PEER_RCVD);
                if (pr == NULL) {
                    unset(rec, &L_REC, R_PEER_RCVD);
                    goto done;
                }
                if (put(rec, &L_REC, R_KNOWN_ARRIVED, Py_NewRef(pr)) < 0)
                    goto done;
            }
        }
    }
    result = have_rtt ? PyLong_FromLongLong(rtt) : Py_NewRef(Py_None);
done:
    Py_DECREF(out);
    return result;
}

/* rec.<slot> (rto_at / rack_at) = d and rec.arm(d), unless the slot holds an earlier time:
 * 0, -1 error */
static int arm_earlier(PyObject *rec, int slot, int64_t d) {
    int64_t at;
    int k = get_opt(rec, &L_REC, slot, &at);
    if (k < 0)
        return -1;
    if (k && d >= at)
        return 0;
    PyObject *dobj = PyLong_FromLongLong(d);
    if (dobj == NULL || put(rec, &L_REC, slot, Py_NewRef(dobj)) < 0) {
        Py_XDECREF(dobj);
        return -1;
    }
    PyObject *cb = SLOT(rec, L_REC, R_ARM);
    PyObject *r = cb ? PyObject_CallOneArg(cb, dobj) : NULL;
    Py_DECREF(dobj);
    if (r == NULL)
        return cb == NULL ? unset(rec, &L_REC, R_ARM) : -1;
    Py_DECREF(r);
    return 0;
}

/* on_sent(rec, now, pkt, retx, ev) */
static PyObject *k_on_sent(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "recovery core not configured");
        return NULL;
    }
    if (nargs != 5 || !Py_IS_TYPE(args[0], L_REC.type) || !is_int(args[1]) ||
        !Py_IS_TYPE(args[2], L_PKT.type) || !is_int(args[4]))
        return PyObject_Vectorcall(ref_on_sent, args, nargs, NULL);
    PyObject *rec = args[0], *pkt = args[2], *ev = args[4];
    int64_t now, seq, retries, d;
    int retx = PyObject_IsTrue(args[3]);
    if (retx < 0 || ((now = as_i64(args[1])) == -1 && PyErr_Occurred()))
        return NULL;
    if (retx && put_bool(pkt, &L_PKT, P_EVER_RETX, 1) < 0)
        return NULL;
    if (put(pkt, &L_PKT, P_SEND_TIME, Py_NewRef(args[1])) < 0)
        return NULL;
    int inflight = truth(pkt, &L_PKT, P_INFLIGHT);
    if (inflight < 0)
        return NULL;
    if (!inflight) {
        int64_t nb;
        if (put_bool(pkt, &L_PKT, P_INFLIGHT, 1) < 0 || get_i64(pkt, &L_PKT, P_NBYTES, &nb) < 0 ||
            add_i64(rec, &L_REC, R_INFLIGHT_BYTES, nb) < 0)
            return NULL;
    }
    if (put(pkt, &L_PKT, P_EV, Py_NewRef(ev)) < 0)
        return NULL;
    PyObject *last = SLOT(rec, L_REC, R_LAST_EV);
    PyObject *rack = SLOT(rec, L_REC, R_RACK);
    if (last == NULL || rack == NULL)
        return unset(rec, &L_REC, last == NULL ? R_LAST_EV : R_RACK), NULL;
    int same = last == Py_None ? 0 : PyObject_RichCompareBool(ev, last, Py_EQ);
    if (same < 0)
        return NULL;
    if (!same) {
        if (last != Py_None && rack != Py_None) {
            if (Py_IS_TYPE(rack, L_RACK.type)) {
                if (put_bool(rack, &L_RACK, K_MULTIPATH, 1) < 0)
                    return NULL;
            } else if (PyObject_SetAttrString(rack, "multipath", Py_True) < 0) {
                return NULL;
            }
        }
        if (put(rec, &L_REC, R_LAST_EV, Py_NewRef(ev)) < 0)
            return NULL;
    }
    if (get_i64(rec, &L_REC, R_SEQ, &seq) < 0)
        return NULL;
    seq += 1;
    PyObject *seqo = PyLong_FromLongLong(seq);
    if (seqo == NULL)
        return NULL;
    if (put(rec, &L_REC, R_SEQ, Py_NewRef(seqo)) < 0 || put(pkt, &L_PKT, P_SEQ, Py_NewRef(seqo)) < 0 ||
        put(rec, &L_REC, R_LAST_TX, Py_NewRef(args[1])) < 0) {
        Py_DECREF(seqo);
        return NULL;
    }
    int order = rack != Py_None;
    if (!order) {
        int64_t n;
        PyObject *det = SLOT(rec, L_REC, R_DETECTOR);
        if (det == NULL || !Py_IS_TYPE(det, L_DET.type)) {
            PyObject *v = det ? PyObject_GetAttrString(det, "n") : NULL;
            order = v ? PyObject_IsTrue(v) : -1;
            Py_XDECREF(v);
        } else if (get_i64(det, &L_DET, D_N_, &n) < 0) {
            order = -1;
        } else {
            order = n != 0;
        }
        if (order < 0) {
            if (det == NULL)
                unset(rec, &L_REC, R_DETECTOR);
            Py_DECREF(seqo);
            return NULL;
        }
    }
    if (order) {
        PyObject *so = SLOT(rec, L_REC, R_SENT_ORDER);
        PyObject *item = so ? PyTuple_Pack(2, seqo, pkt) : NULL;
        PyObject *r = item ? mc_call1(so, s_append, item) : NULL;
        Py_XDECREF(item);
        if (r == NULL) {
            if (so == NULL)
                unset(rec, &L_REC, R_SENT_ORDER);
            Py_DECREF(seqo);
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_DECREF(seqo);
    if (get_i64(pkt, &L_PKT, P_RETRIES, &retries) < 0)
        return NULL;
    PyObject *rto = SLOT(rec, L_REC, R_RTO);
    if (rto == NULL)
        return unset(rec, &L_REC, R_RTO), NULL;
    if (retries == 0 && Py_IS_TYPE(rto, L_RTO.type)) {
        int64_t base;
        if (get_i64(rto, &L_RTO, T_BASE, &base) < 0)
            return NULL;
        d = now + base;
    } else { /* backoff: Python's arithmetic (no overflow to care about) */
        PyObject *r = mc_call1(rto, s_rto_for, SLOT(pkt, L_PKT, P_RETRIES));
        if (r == NULL)
            return NULL;
        long long p = as_i64(r);
        Py_DECREF(r);
        if (p == -1 && PyErr_Occurred())
            return NULL;
        d = now + p;
    }
    if (arm_earlier(rec, R_RTO_AT, d) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* is a sent_order entry stale (resent since, arrived, released or queued)? */
static int stale(PyObject *item, int64_t *seq_out, PyObject **pkt_out) {
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_SetString(PyExc_TypeError, "sent_order: (seq, packet) pairs are expected");
        return -1;
    }
    PyObject *pkt = PyTuple_GET_ITEM(item, 1);
    if (!Py_IS_TYPE(pkt, L_PKT.type)) {
        PyErr_SetString(PyExc_TypeError, "sent_order: a SentPacket is expected");
        return -1;
    }
    long long seq = as_i64(PyTuple_GET_ITEM(item, 0));
    int64_t pseq;
    if ((seq == -1 && PyErr_Occurred()) || get_i64(pkt, &L_PKT, P_SEQ, &pseq) < 0)
        return -1;
    *seq_out = seq;
    *pkt_out = pkt;
    if (pseq != seq)
        return 1;
    int t;
    if ((t = truth(pkt, &L_PKT, P_ARRIVED)) != 0 || (t = truth(pkt, &L_PKT, P_RELEASED)) != 0 ||
        (t = truth(pkt, &L_PKT, P_RETX_QUEUED)) != 0)
        return t;
    return 0;
}

/* rack_scan(rec, now) -> [lost packets]: RACK's scan of LossRecovery.rack_detect (the
 * stale head dropped, the timer armed for the first packet not yet due) */
static PyObject *k_rack_scan(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "recovery core not configured");
        return NULL;
    }
    if (nargs != 2 || !Py_IS_TYPE(args[0], L_REC.type) || !is_int(args[1]))
        return PyObject_Vectorcall(ref_rack_scan, args, nargs, NULL);
    PyObject *rec = args[0];
    PyObject *rack = SLOT(rec, L_REC, R_RACK), *so = SLOT(rec, L_REC, R_SENT_ORDER);
    if (rack == NULL || so == NULL)
        return unset(rec, &L_REC, rack == NULL ? R_RACK : R_SENT_ORDER), NULL;
    if (rack != Py_None && !Py_IS_TYPE(rack, L_RACK.type))
        return PyObject_Vectorcall(ref_rack_scan, args, nargs, NULL);
    PyObject *lost = PyList_New(0);
    if (lost == NULL)
        return NULL;
    RackState s;
    if (rack == Py_None)
        return lost;
    if (rack_load(rack, &s) < 0)
        goto fail;
    if (!s.seq)
        return lost;
    int64_t now = as_i64(args[1]);
    if (now == -1 && PyErr_Occurred())
        goto fail;
    int64_t wnd = s.rtt + rack_reo_wnd(&s), reach, seq, due = 0;
    int arm = 0;
    if (get_i64(rec, &L_REC, R_SACK_REACH, &reach) < 0)
        goto fail;
    Py_INCREF(so);
    for (;;) { /* drop the stale head entries */
        Py_ssize_t n = PyObject_Length(so);
        if (n < 0)
            goto fail_so;
        if (!n)
            break;
        PyObject *item = PySequence_GetItem(so, 0), *pkt;
        if (item == NULL)
            goto fail_so;
        int t = stale(item, &seq, &pkt);
        Py_DECREF(item);
        if (t < 0)
            goto fail_so;
        if (!t)
            break;
        PyObject *r = mc_call0(so, s_popleft);
        if (r == NULL)
            goto fail_so;
        Py_DECREF(r);
    }
    PyObject *it = PyObject_GetIter(so), *item;
    if (it == NULL)
        goto fail_so;
    while ((item = PyIter_Next(it)) != NULL) {
        PyObject *pkt;
        int t = stale(item, &seq, &pkt);
        if (t < 0) {
            Py_DECREF(item);
            break;
        }
        if (seq >= s.seq) {
            Py_DECREF(item);
            break;
        }
        if (t) {
            Py_DECREF(item);
            continue;
        }
        int64_t psn, st;
        if (get_i64(pkt, &L_PKT, P_PSN, &psn) < 0 || get_i64(pkt, &L_PKT, P_SEND_TIME, &st) < 0) {
            Py_DECREF(item);
            break;
        }
        int64_t d = (psn - reach) & M32;
        if (d && d < HALF) {
            Py_DECREF(item);
            continue; /* beyond what the SACK bitmap could name */
        }
        if (st + wnd > now) {
            due = st + wnd;
            arm = 1;
            Py_DECREF(item);
            break;
        }
        int rc = PyList_Append(lost, pkt);
        Py_DECREF(item);
        if (rc < 0)
            break;
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        goto fail_so;
    Py_DECREF(so);
    if (arm && arm_earlier(rec, R_RACK_AT, due) < 0)
        goto fail;
    return lost;
fail_so:
    Py_DECREF(so);
fail:
    Py_DECREF(lost);
    return NULL;
}

/* configure(SentPacket, LossRecovery, Rack, RtoEstimator, LossDetector, PdsAck, PdsAckCc,
 *           on_ack, on_sent, rack_scan): the classes whose slots these functions use and
 * the Python reference for arguments of other types */
static PyObject *k_configure(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "configure takes 10 arguments");
        return NULL;
    }
    for (int i = 7; i < 10; i++)
        if (!PyCallable_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "configure: the references must be callable");
            return NULL;
        }
    PyObject *b = PyObject_GetAttrString(args[2], "BUCKET_RTTS");
    if (b == NULL)
        return NULL;
    long long br = as_i64(b);
    Py_DECREF(b);
    if (br == -1 && PyErr_Occurred())
        return NULL;
    if (layout(&L_PKT, args[0], PKT_NAMES, P_N) < 0 ||
        layout(&L_REC, args[1], REC_NAMES, R_N) < 0 ||
        layout(&L_RACK, args[2], RACK_NAMES, K_N) < 0 ||
        layout(&L_RTO, args[3], RTO_NAMES, T_N) < 0 ||
        layout(&L_DET, args[4], DET_NAMES, D_N) < 0 ||
        layout(&L_ACK, args[5], ACK_NAMES, A_N1) < 0 ||
        layout(&L_ACKCC, args[6], ACKCC_NAMES, C_N) < 0) {
        configured = 0;
        return NULL;
    }
    bucket_rtts = br;
    Py_XSETREF(ref_on_ack, Py_NewRef(args[7]));
    Py_XSETREF(ref_on_sent, Py_NewRef(args[8]));
    Py_XSETREF(ref_rack_scan, Py_NewRef(args[9]));
    configured = 1;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ after an ACK */

/* rtt_sample(rec, now, rtt): LossRecovery.rtt_sample with RtoEstimator.sample inline. The
 * case where the RTO shrinks while packets are outstanding (the first samples; the timer
 * moves) is the Python's, decided before anything changes. */
static PyObject *k_rtt_sample(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured || ref_rtt_sample == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "recovery core not configured");
        return NULL;
    }
    if (nargs != 3 || !Py_IS_TYPE(args[0], L_REC.type) || !PyLong_CheckExact(args[2]))
        return PyObject_Vectorcall(ref_rtt_sample, args, nargs, NULL);
    PyObject *rec = args[0], *rto = SLOT(rec, L_REC, R_RTO);
    PyObject *out = SLOT(rec, L_REC, R_OUTSTANDING);
    if (rto == NULL || out == NULL || !Py_IS_TYPE(rto, L_RTO.type) || !PyDict_CheckExact(out))
        return PyObject_Vectorcall(ref_rtt_sample, args, nargs, NULL);
    int adaptive = truth(rto, &L_RTO, T_ADAPTIVE);
    int64_t rtt = as_i64(args[2]), base, lo, hi, srtt, var;
    if (adaptive < 0 || (rtt == -1 && PyErr_Occurred()))
        return NULL;
    if (!adaptive || rtt < 0)
        Py_RETURN_NONE;
    PyObject *sv = SLOT(rto, L_RTO, T_SRTT);
    int first = sv == Py_None;
    if (get_i64(rto, &L_RTO, T_BASE, &base) < 0 || get_i64(rto, &L_RTO, T_MIN_RTO, &lo) < 0 ||
        get_i64(rto, &L_RTO, T_MAX_RTO, &hi) < 0 ||
        get_i64(rto, &L_RTO, T_RTTVAR, &var) < 0 ||
        (!first && get_i64(rto, &L_RTO, T_SRTT, &srtt) < 0))
        return NULL;
    /* the estimator's arithmetic: non-negative operands, so C's division is Python's //,
     * and below 2^58, so nothing overflows (else the Python's big ints) */
    if (rtt > (1LL << 58) || var < 0 || var > (1LL << 58) ||
        (!first && (srtt < 0 || srtt > (1LL << 58))))
        return PyObject_Vectorcall(ref_rtt_sample, args, nargs, NULL);
    if (first) {
        srtt = rtt;
        var = rtt / 2;
    } else {
        int64_t diff = srtt > rtt ? srtt - rtt : rtt - srtt;
        var = (3 * var + diff) / 4;
        srtt = (7 * srtt + rtt) / 8;
    }
    int64_t r = srtt + 4 * var, b = lo > r ? lo : r;
    b = hi < b ? hi : b;
    PyObject *key, *oldest = NULL;
    int64_t now = 0, sent, retries = -1;
    if (b < base && dict_first(out, &key, &oldest)) {
        /* the RTO shrank: the oldest packet's deadline may move earlier (checked first) */
        if (!Py_IS_TYPE(oldest, L_PKT.type) || !PyLong_CheckExact(args[1]))
            return PyObject_Vectorcall(ref_rtt_sample, args, nargs, NULL);
        if ((now = as_i64(args[1])) == -1 && PyErr_Occurred())
            return NULL;
        if (get_i64(oldest, &L_PKT, P_SEND_TIME, &sent) < 0 ||
            get_i64(oldest, &L_PKT, P_RETRIES, &retries) < 0)
            return NULL;
        Py_INCREF(oldest);
    } else {
        oldest = NULL;
    }
    if (put_i64(rto, &L_RTO, T_SRTT, srtt) < 0 || put_i64(rto, &L_RTO, T_RTTVAR, var) < 0 ||
        put_i64(rto, &L_RTO, T_BASE, b) < 0) {
        Py_XDECREF(oldest);
        return NULL;
    }
    if (oldest == NULL)
        Py_RETURN_NONE;
    int64_t wait = b; /* rto.rto_for(oldest.retries) */
    if (retries != 0) {
        PyObject *r = mc_call1(rto, s_rto_for, SLOT(oldest, L_PKT, P_RETRIES));
        long long w = r ? as_i64(r) : -1;
        Py_XDECREF(r);
        if (w == -1 && PyErr_Occurred()) {
            Py_DECREF(oldest);
            return NULL;
        }
        wait = w;
    }
    Py_DECREF(oldest);
    int64_t d = sent + wait > now ? sent + wait : now;
    if (arm_earlier(rec, R_RTO_AT, d) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* detect_after_ack(rec, now, ack, newly_packets, next_psn): LossRecovery.detect_after_ack:
 * RACK's scan here, its rare outcomes (lost packets, the SACK-count detector, the
 * out-of-order inference) as the Python's calls */
static PyObject *k_detect_after_ack(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured || ref_detect_after_ack == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "recovery core not configured");
        return NULL;
    }
    if (nargs != 5 || !Py_IS_TYPE(args[0], L_REC.type))
        return PyObject_Vectorcall(ref_detect_after_ack, args, nargs, NULL);
    PyObject *rec = args[0], *now = args[1], *ack = args[2];
    PyObject *rack = SLOT(rec, L_REC, R_RACK), *det = SLOT(rec, L_REC, R_DETECTOR);
    PyObject *cfg = SLOT(rec, L_REC, R_CFG);
    if (rack == NULL || det == NULL || cfg == NULL || !Py_IS_TYPE(det, L_DET.type) ||
        SLOT(det, L_DET, D_N_) == NULL)
        return PyObject_Vectorcall(ref_detect_after_ack, args, nargs, NULL);
    int newly = PyObject_IsTrue(args[3]);
    if (newly < 0)
        return NULL;
    if (rack != Py_None && newly) { /* rack_detect */
        PyObject *a[2] = {rec, now};
        PyObject *lost = k_rack_scan(mod, a, 2);
        if (lost == NULL)
            return NULL;
        int rc = 0;
        if (!PyList_CheckExact(lost) || PyList_GET_SIZE(lost)) {
            PyObject *b[3] = {rec, now, lost};
            rc = call_drop(s_rack_lost, b, 3, NULL);
        }
        Py_DECREF(lost);
        if (rc < 0)
            return NULL;
    }
    if (newly) { /* the SACK-count detector (read after the calls above, as in Python) */
        det = SLOT(rec, L_REC, R_DETECTOR);
        if (det == NULL)
            return unset(rec, &L_REC, R_DETECTOR), NULL;
        PyObject *n = slot_attr(det, &L_DET, D_N_);
        int on = n ? PyObject_IsTrue(n) : -1;
        Py_XDECREF(n);
        if (on < 0)
            return NULL;
        PyObject *b[2] = {rec, now};
        if (on && call_drop(s_detect_sack, b, 2, NULL) < 0)
            return NULL;
    }
    cfg = SLOT(rec, L_REC, R_CFG);
    if (cfg == NULL)
        return unset(rec, &L_REC, R_CFG), NULL;
    static SlotCache c_ooo; /* PdsConfig's slot */
    PyObject *thr = cached_attr(cfg, s_ooo_loss_threshold, &c_ooo);
    int ooo = thr ? PyObject_IsTrue(thr) : -1;
    Py_XDECREF(thr);
    if (ooo < 0)
        return NULL;
    if (ooo && Py_IS_TYPE(ack, L_ACKCC.type)) {
        PyObject *b[4] = {rec, now, ack, args[4]};
        if (call_drop(s_ooo_inference, b, 4, NULL) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

/* configure_ack(rtt_sample, detect_after_ack): their Python forms (after configure) */
static PyObject *k_configure_ack(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyCallable_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "configure_ack(rtt_sample, detect_after_ack)");
        return NULL;
    }
    Py_XSETREF(ref_rtt_sample, Py_NewRef(args[0]));
    Py_XSETREF(ref_detect_after_ack, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

KW_ENTRY(k_on_ack_kw, k_on_ack, ref_on_ack)
KW_ENTRY(k_rtt_sample_kw, k_rtt_sample, ref_rtt_sample)
KW_ENTRY(k_detect_after_ack_kw, k_detect_after_ack, ref_detect_after_ack)
KW_ENTRY(k_on_sent_kw, k_on_sent, ref_on_sent)
KW_ENTRY(k_rack_scan_kw, k_rack_scan, ref_rack_scan)

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))k_configure, METH_FASTCALL,
     "configure(SentPacket, LossRecovery, Rack, RtoEstimator, LossDetector, PdsAck, "
     "PdsAckCc, on_ack, on_sent, rack_scan): the classes and the Python reference"},
    {"on_ack", (PyCFunction)(void (*)(void))k_on_ack_kw, METH_FASTCALL | METH_KEYWORDS,
     "on_ack(rec, now, ack, ack_psn, retx_flag, newly, early=False): LossRecovery.on_ack"},
    {"on_sent", (PyCFunction)(void (*)(void))k_on_sent_kw, METH_FASTCALL | METH_KEYWORDS,
     "on_sent(rec, now, pkt, retx, ev): LossRecovery.on_sent"},
    {"rack_scan", (PyCFunction)(void (*)(void))k_rack_scan_kw, METH_FASTCALL | METH_KEYWORDS,
     "rack_scan(rec, now) -> [lost packets]: LossRecovery._rack_scan"},
    {"configure_ack", (PyCFunction)(void (*)(void))k_configure_ack, METH_FASTCALL,
     "configure_ack(rtt_sample, detect_after_ack): their Python forms"},
    {"rtt_sample", (PyCFunction)(void (*)(void))k_rtt_sample_kw, METH_FASTCALL | METH_KEYWORDS,
     "rtt_sample(rec, now, rtt): LossRecovery.rtt_sample"},
    {"detect_after_ack", (PyCFunction)(void (*)(void))k_detect_after_ack_kw,
     METH_FASTCALL | METH_KEYWORDS,
     "detect_after_ack(rec, now, ack, newly_packets, next_psn): LossRecovery.detect_after_ack"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_recovery_core",
                                    "LossRecovery's per-ACK and per-send work in C", -1,
                                    methods};

PyMODINIT_FUNC PyInit__recovery_core(void) {
    if (intern_str(&s_delivered, "delivered") || intern_str(&s_rtt_sample, "rtt_sample") ||
        intern_str(&s_rto_for, "rto_for") || intern_str(&s_popleft, "popleft") ||
        intern_str(&s_append, "append") || intern_str(&s_retx_spurious, "retx_spurious") ||
        intern_str(&s_ooo_loss_threshold, "ooo_loss_threshold") ||
        intern_str(&s_rack_lost, "_rack_lost") || intern_str(&s_detect_sack, "_detect_sack") ||
        intern_str(&s_ooo_inference, "_ooo_inference"))
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    static const char *const names[] = {"on_ack", "on_sent", "rack_scan", "rtt_sample",
                                        "detect_after_ack"};
    if (m == NULL || add_instance_methods(m, names, 5) < 0) {
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
