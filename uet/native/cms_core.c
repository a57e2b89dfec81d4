/* The sender's congestion control per ACK in C (uet.cms.nscc.Nscc.on_ack and
 * uet.cms.sender.CmsSender: on_ack, can_send, window_full, on_send), over the same
 * Python objects.
 *
 * NSCC's reaction to an ACK is a few dozen integer and float operations on one PDC's window
 * state; in Python it was a chain of eight small methods per ACK. Here Nscc.on_ack loads
 * the state from the object's slots into a C struct, runs the same steps in the same order
 * with the same arithmetic (Python's int and float operations, which are exact for the
 * magnitudes it admits: every int below 2**52 in absolute value, every float finite), and
 * writes back the fields that changed and the statistics it counted, in the order the
 * Python counts them. Anything else, an int too large, a float where an int was, a result
 * that is not finite, a subclass, goes to the Python reference before anything has changed.
 *
 * CmsSender's per-packet gates take the common case: no RCCC credit, no CCX window; the EV
 * selector stays Python but for MixedEv's recycling FIFO (a GOOD ACK's EV appended, the
 * next packet's taken from the front), worked here. tests/cms/test_cms_core.py holds the two
 * forms to the same state after every call on seeded streams of feedback. */
#include "slots.h"
#include "records.h"
#include <math.h>

static PyObject *ref_nscc_on_ack, *ref_on_ack, *ref_can_send, *ref_window_full, *ref_on_send;
static PyObject *fb_good, *fb_ecn; /* PathFeedback.GOOD, .ECN */
static PyTypeObject *mixed_type;  /* MixedEv: its recycling FIFO is worked here */
static PyTypeObject *bitmap_type; /* BitmapEv (optional): its common case is worked here */
static SlotCache c_recycled, c_index, c_xor, c_mask, c_n, c_upper, c_penalty, c_rng;
static PyObject *s_recycled, *s_append, *s_popleft, *s_next_ev, *ref_choose_ev;
static PyObject *s_index, *s_xor, *s_mask, *s_n, *s_upper, *s_penalty, *s_rng, *s_randrange;
static int64_t cc_nscc;            /* CcType.NSCC */
static int configured;
static PyObject *s_feedback, *s_on_ack, *s_nbytes, *s_in_flight, *s_retx, *s_ev, *s_fb;
static PyObject *st_names[10];
enum { ST_FAIR, ST_PROP, ST_FAST, ST_DEC_MULTI, ST_MULTI, ST_FULFILL, ST_DEC_QUICK,
       ST_QUICK, ST_DEC_RECEIVER, ST_RESTORE, ST_N };
static const char *ST_TEXT[ST_N] = {"fair_increase", "proportional_increase", "fast_increase",
                                    "dec_multi_bytes", "multiplicative_decrease", "fulfill",
                                    "dec_quick_bytes", "quick_adapt", "dec_receiver", "restore"};

enum { N_P, N_BASE_RTT, N_BDP, N_MAX_WND, N_CWND, N_AVG_DELAY, N_INC_BYTES, N_RECEIVED,
       N_ACHIEVED, N_IGNORED, N_TO_IGNORE, N_TRIGGER_QA, N_QA_END, N_FI_COUNT, N_INCREASING,
       N_LAST_DEC, N_LAST_ADJUST, N_IN_FLIGHT, N_OOO, N_CBP, N_RCVD_RAW, N_RCVD_TOTAL,
       N_CREDITED, N_STATS, N_N };
static const char *NS_NAMES[N_N] = {
    "p", "base_rtt", "bdp", "max_wnd", "cwnd", "avg_delay", "inc_bytes", "received_bytes",
    "achieved_bytes", "bytes_ignored", "bytes_to_ignore", "trigger_qa", "qa_endtime",
    "fi_count", "increasing", "last_dec_time", "last_adjust_time", "in_flight", "ooo_count",
    "cwnd_before_penalty", "rcvd_raw", "rcvd_total", "credited", "stats"};
enum { P_MTU, P_TARGET, P_ALPHA, P_FI, P_FI_SCALE, P_ETA, P_GAMMA, P_DELAY_ALPHA,
       P_QA_THRESHOLD, P_QA_GATE, P_QUICK_ADAPT, P_ADJUST_PERIOD, P_ADJUST_BYTES,
       P_FAST_DELAY, P_ADAPT_BASE, P_FIXED_MAX, P_LINK_RATE, P_OVERHEAD, P_NETWORK_RTT, P_N };
static const char *NP_NAMES[P_N] = {
    "mtu", "target_qdelay", "alpha", "fi", "fi_scale", "eta", "gamma", "delay_alpha",
    "qa_threshold", "qa_gate", "quick_adapt", "adjust_period", "adjust_bytes",
    "fast_increase_delay", "adapt_base_rtt", "fixed_max_wnd", "link_rate_bps", "overhead",
    "network_rtt"};
enum { C_NOW, C_SELECTOR, C_NSCC, C_CREDIT, C_CCX, C_WINDOW, C_REFUSED, C_WAIT_SINCE, C_N };
static const char *SND_NAMES[C_N] = {"now", "selector", "nscc", "credit", "ccx",
                                     "window_bytes", "refused_for_credit",
                                     "credit_wait_since"};
enum { B_EV, B_ECN, B_NEWLY, B_RTT, B_IN_FLIGHT, B_ACK_CC, B_N };
static const char *FB_NAMES[B_N] = {"ev", "ecn_echo", "newly_acked_bytes", "rtt_sample",
                                    "in_flight_bytes", "ack_cc"};
static Layout L_NS, L_NP, L_SND, L_FB, L_ACK;

/* the Python form of a call the core does not take (an error before configure) */
static PyObject *reference(PyObject *ref, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kw) {
    if (ref == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cms core not configured");
        return NULL;
    }
    return PyObject_Vectorcall(ref, args, nargs, kw);
}

#define BIG (1LL << 52) /* ints below this in size are exact as doubles and never overflow */

/* an exact int of at most 52 bits: 1 and *out; 0 anything else */
static int small(PyObject *v, int64_t *out) {
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    long long x = as_i64(v);
    if (x == -1 && PyErr_Occurred()) { /* too large: the Python's */
        PyErr_Clear();
        return 0;
    }
    if (x >= BIG || x <= -BIG)
        return 0;
    *out = x;
    return 1;
}

/* an int field (or None: *none = 1, when none is given) */
static int small_or_none(PyObject *v, int64_t *out, int *none) {
    *none = v == Py_None;
    if (*none) {
        *out = 0;
        return 1;
    }
    return small(v, out);
}

static int flt(PyObject *v, double *out) {
    if (v == NULL || !PyFloat_CheckExact(v))
        return 0;
    *out = PyFloat_AS_DOUBLE(v);
    return isfinite(*out);
}

static int boolean(PyObject *v, int *out) {
    if (v != Py_True && v != Py_False)
        return 0;
    *out = v == Py_True;
    return 1;
}

typedef struct {
    int64_t base_rtt, bdp, max_wnd, cwnd, received, achieved, ignored, to_ignore, qa_end,
        fi_count, last_dec, last_adjust, in_flight, ooo, cbp, rcvd_raw, rcvd_total, credited;
    double avg_delay, inc_bytes;
    int trigger_qa, increasing, qa_end_none, cbp_none;
} State;

typedef struct {
    int64_t mtu, target, qa_threshold, qa_gate, adjust_period, adjust_bytes, fast_delay,
        link_rate, overhead;
    double alpha, fi, fi_scale, eta, gamma, delay_alpha;
    int quick_adapt, adapt_base, fixed_max;
} Params;

typedef struct {
    int key[16];
    int64_t n[16];
    int count;
    int bad; /* a result left the exact range: the reference runs instead */
} Stats;

static void tally(Stats *s, int key, int64_t n) {
    if (s->count < 16) {
        s->key[s->count] = key;
        s->n[s->count++] = n;
    } else {
        s->bad = 1;
    }
}

/* int(x) of a float result: exact and in range, or the call goes to the reference */
static int64_t trunc_i(Stats *s, double x) {
    if (!isfinite(x) || x >= (double)BIG || x <= -(double)BIG) {
        s->bad = 1;
        return 0;
    }
    return (int64_t)x;
}

static int load_params(PyObject *p, Params *q) {
    if (p == NULL || !Py_IS_TYPE(p, L_NP.type))
        return 0;
#define GI(f, i) small(SLOT(p, L_NP, i), &q->f)
#define GF(f, i) flt(SLOT(p, L_NP, i), &q->f)
#define GB(f, i) boolean(SLOT(p, L_NP, i), &q->f)
    return GI(mtu, P_MTU) && GI(target, P_TARGET) && GI(qa_threshold, P_QA_THRESHOLD) &&
           GI(qa_gate, P_QA_GATE) && q->qa_gate >= 0 && q->qa_gate < 63 &&
           GI(adjust_period, P_ADJUST_PERIOD) && GI(adjust_bytes, P_ADJUST_BYTES) &&
           GI(fast_delay, P_FAST_DELAY) && GI(link_rate, P_LINK_RATE) &&
           GI(overhead, P_OVERHEAD) && GF(alpha, P_ALPHA) && GF(fi, P_FI) &&
           GF(fi_scale, P_FI_SCALE) && GF(eta, P_ETA) && GF(gamma, P_GAMMA) &&
           GF(delay_alpha, P_DELAY_ALPHA) && GB(quick_adapt, P_QUICK_ADAPT) &&
           GB(adapt_base, P_ADAPT_BASE) && GB(fixed_max, P_FIXED_MAX) && q->mtu > 0 &&
           q->mtu + q->overhead > 0;
#undef GI
#undef GF
#undef GB
}

static int load_state(PyObject *o, State *s) {
#define GI(f, i) small(SLOT(o, L_NS, i), &s->f)
    return GI(base_rtt, N_BASE_RTT) && GI(bdp, N_BDP) && GI(max_wnd, N_MAX_WND) &&
           GI(cwnd, N_CWND) && GI(received, N_RECEIVED) && GI(achieved, N_ACHIEVED) &&
           GI(ignored, N_IGNORED) && GI(to_ignore, N_TO_IGNORE) && GI(fi_count, N_FI_COUNT) &&
           GI(last_dec, N_LAST_DEC) && GI(last_adjust, N_LAST_ADJUST) &&
           GI(in_flight, N_IN_FLIGHT) && GI(ooo, N_OOO) && GI(rcvd_raw, N_RCVD_RAW) &&
           GI(rcvd_total, N_RCVD_TOTAL) && GI(credited, N_CREDITED) &&
           small_or_none(SLOT(o, L_NS, N_QA_END), &s->qa_end, &s->qa_end_none) &&
           small_or_none(SLOT(o, L_NS, N_CBP), &s->cbp, &s->cbp_none) &&
           flt(SLOT(o, L_NS, N_AVG_DELAY), &s->avg_delay) &&
           flt(SLOT(o, L_NS, N_INC_BYTES), &s->inc_bytes) &&
           boolean(SLOT(o, L_NS, N_TRIGGER_QA), &s->trigger_qa) &&
           boolean(SLOT(o, L_NS, N_INCREASING), &s->increasing) &&
           SLOT(o, L_NS, N_STATS) != NULL && PyDict_Check(SLOT(o, L_NS, N_STATS));
#undef GI
}

/* ------------------------------------------------------------------ NSCC's steps */

static void update_base_rtt(State *s, const Params *p, int64_t rtt) {
    if (p->adapt_base && rtt < s->base_rtt && rtt > 0) {
        s->base_rtt = rtt;
        __int128 wire = (__int128)p->link_rate * rtt / ((__int128)8 * 1000000000000LL);
        __int128 bdp = wire * p->mtu / (p->mtu + p->overhead);
        s->bdp = (int64_t)bdp;
        if (!p->fixed_max) {
            /* max(int(1.5 * bdp), mtu) */
            double x = 1.5 * (double)s->bdp;
            int64_t w = (int64_t)x;
            s->max_wnd = p->mtu > w ? p->mtu : w;
        }
    }
}

static void update_delay(State *s, const Params *p, int64_t rtt, int skip) {
    int64_t delay = rtt - s->base_rtt;
    double a = p->delay_alpha;
    if (!skip && delay > p->target)
        s->avg_delay = a * (double)s->base_rtt * 0.25 + (1.0 - a) * s->avg_delay;
    else
        s->avg_delay = a * (double)delay + (1.0 - a) * s->avg_delay;
}

/* the delay sample (Python: an int, or the float average: both exact as doubles here) */
static double sample(State *s, const Params *p, int has_rtt, int64_t rtt, int skip) {
    if (!has_rtt)
        return s->avg_delay;
    update_base_rtt(s, p, rtt);
    if (rtt >= s->base_rtt) {
        update_delay(s, p, rtt, skip);
        return (double)(rtt - s->base_rtt);
    }
    return s->avg_delay;
}

static int quick_adapt(State *s, const Params *p, Stats *st, int64_t now, int is_loss,
                       int skip, double delay) {
    if (!p->quick_adapt)
        return 0;
    int done = 0;
    if (s->ignored < s->to_ignore && skip) {
        done = 1;
    } else if (s->qa_end_none || now > s->qa_end) {
        if (!s->qa_end_none &&
            (s->trigger_qa || is_loss || delay > (double)p->qa_threshold) &&
            s->achieved < (s->max_wnd >> p->qa_gate)) {
            int64_t before = s->cwnd;
            s->cwnd = s->achieved > p->mtu ? s->achieved : p->mtu;
            tally(st, ST_DEC_QUICK, before - s->cwnd);
            tally(st, ST_QUICK, 1);
            s->to_ignore = s->in_flight;
            s->ignored = 0;
            s->trigger_qa = 0;
            done = 1;
        }
        s->achieved = 0;
        s->qa_end = now + s->base_rtt + p->target;
        s->qa_end_none = 0;
    }
    if (done) {
        s->inc_bytes = 0.0;
        s->received = 0;
    }
    return done;
}

static void bound(State *s, const Params *p) {
    if (s->cwnd < p->mtu)
        s->cwnd = p->mtu;
    if (s->cwnd > s->max_wnd)
        s->cwnd = s->max_wnd;
}

static void fast_increase(State *s, const Params *p, Stats *st, int64_t newly, double delay) {
    if (delay < (double)p->fast_delay) {
        s->fi_count += newly;
        if (s->fi_count > s->cwnd || s->increasing) {
            s->cwnd = trunc_i(st, (double)s->cwnd + (double)newly * p->fi_scale);
            s->increasing = 1;
            tally(st, ST_FAST, 1);
            return;
        }
    } else {
        s->fi_count = 0;
    }
    s->increasing = 0;
}

static void multiplicative_decrease(State *s, const Params *p, Stats *st, int64_t now) {
    s->increasing = 0;
    s->fi_count = 0;
    double avg = s->avg_delay;
    if (avg > (double)p->target && now - s->last_dec > s->base_rtt) {
        double f = 1.0 - p->gamma * (avg - (double)p->target) / avg;
        double factor = 0.5 > f ? 0.5 : f;
        int64_t before = s->cwnd, w = trunc_i(st, (double)s->cwnd * factor);
        s->cwnd = p->mtu > w ? p->mtu : w;
        s->last_dec = now;
        tally(st, ST_DEC_MULTI, before - s->cwnd);
        tally(st, ST_MULTI, 1);
    }
}

static void fulfill(State *s, const Params *p, Stats *st, int64_t now) {
    s->cwnd = trunc_i(st, (double)s->cwnd + s->inc_bytes / (double)s->cwnd);
    if (now - s->last_adjust >= p->adjust_period) {
        s->cwnd = trunc_i(st, (double)s->cwnd + p->eta);
        s->last_adjust = now;
    }
    s->inc_bytes = 0.0;
    s->received = 0;
    tally(st, ST_FULFILL, 1);
}

static void react(State *s, const Params *p, Stats *st, int64_t now, int skip, double delay,
                  int64_t newly) {
    if (quick_adapt(s, p, st, now, 0, skip, delay))
        return;
    double target = (double)p->target;
    if (!skip && delay >= target) {
        s->inc_bytes += p->fi * (double)newly;
        tally(st, ST_FAIR, 1);
    } else if (!skip) {
        fast_increase(s, p, st, newly, delay);
        if (!s->increasing) {
            s->inc_bytes += p->alpha * (double)newly * (target - delay);
            tally(st, ST_PROP, 1);
        }
    } else if (delay >= target) {
        multiplicative_decrease(s, p, st, now);
    }
    bound(s, p);
    if (s->received > p->adjust_bytes || now - s->last_adjust > p->adjust_period)
        fulfill(s, p, st, now);
    bound(s, p);
}

/* ------------------------------------------------------------------ writing back */

static int put_changed_i(PyObject *o, int i, int64_t was, int64_t now) {
    return was == now ? 0 : put_i64(o, &L_NS, i, now);
}

static int put_changed_opt(PyObject *o, int i, int was_none, int64_t was, int none,
                           int64_t now) {
    if (was_none == none && (none || was == now))
        return 0;
    return none ? put(o, &L_NS, i, Py_NewRef(Py_None)) : put_i64(o, &L_NS, i, now);
}

static int put_changed_f(PyObject *o, int i, double was, double now) {
    if (memcmp(&was, &now, sizeof now) == 0)
        return 0;
    return put(o, &L_NS, i, PyFloat_FromDouble(now));
}

static int store(PyObject *o, const State *a, const State *b, const Stats *st) {
#define I(f, i) put_changed_i(o, i, a->f, b->f) < 0
    if (I(base_rtt, N_BASE_RTT) || I(bdp, N_BDP) || I(max_wnd, N_MAX_WND) || I(cwnd, N_CWND) ||
        I(received, N_RECEIVED) || I(achieved, N_ACHIEVED) || I(ignored, N_IGNORED) ||
        I(to_ignore, N_TO_IGNORE) || I(fi_count, N_FI_COUNT) || I(last_dec, N_LAST_DEC) ||
        I(last_adjust, N_LAST_ADJUST) || I(in_flight, N_IN_FLIGHT) || I(ooo, N_OOO) ||
        I(rcvd_raw, N_RCVD_RAW) || I(rcvd_total, N_RCVD_TOTAL) || I(credited, N_CREDITED) ||
        put_changed_opt(o, N_QA_END, a->qa_end_none, a->qa_end, b->qa_end_none, b->qa_end) < 0 ||
        put_changed_opt(o, N_CBP, a->cbp_none, a->cbp, b->cbp_none, b->cbp) < 0 ||
        put_changed_f(o, N_AVG_DELAY, a->avg_delay, b->avg_delay) < 0 ||
        put_changed_f(o, N_INC_BYTES, a->inc_bytes, b->inc_bytes) < 0 ||
        (a->trigger_qa != b->trigger_qa && put_bool(o, &L_NS, N_TRIGGER_QA, b->trigger_qa) < 0) ||
        (a->increasing != b->increasing && put_bool(o, &L_NS, N_INCREASING, b->increasing) < 0))
        return -1;
#undef I
    PyObject *stats = SLOT(o, L_NS, N_STATS);
    for (int k = 0; k < st->count; k++)
        if (count_n(stats, st_names[st->key[k]], st->n[k]) < 0)
            return -1;
    return 0;
}

/* Nscc.on_ack in C: 1 done, 0 not the common case (nothing changed), -1 error */
static int nscc_on_ack(PyObject *o, int64_t now, PyObject *newly_o, PyObject *ecn_o,
                       PyObject *rtt_o, PyObject *in_flight_o, PyObject *ack) {
    State s, s0;
    Params p;
    Stats st = {.count = 0, .bad = 0};
    int64_t newly, rtt = 0, in_flight, raw = 0, ooo = 0, pend = 0;
    int has_rtt = rtt_o != Py_None, restore = 0;
    if (!Py_IS_TYPE(o, L_NS.type) || !load_state(o, &s) ||
        !load_params(SLOT(o, L_NS, N_P), &p) || !small(newly_o, &newly) ||
        (has_rtt && !small(rtt_o, &rtt)) || !small(in_flight_o, &in_flight))
        return 0;
    int skip = PyObject_IsTrue(ecn_o);
    if (skip < 0)
        return -1;
    int nscc_state = 0;
    if (ack != Py_None) {
        if (!Py_IS_TYPE(ack, L_ACK.type))
            return 0;
        PyObject *t = SLOT(ack, L_ACK, A_CC_TYPE), *r = SLOT(ack, L_ACK, A_RESTORE_CWND);
        int overflow = 0;
        long long type = 0;
        if (t == NULL || !PyLong_Check(t) || r == NULL) /* cc_type: an int or a CcType */
            return 0;
        type = PyLong_AsLongLongAndOverflow(t, &overflow);
        if (type == -1 && PyErr_Occurred())
            return -1;
        if (overflow || !small(SLOT(ack, L_ACK, A_OOO_COUNT), &ooo))
            return 0;
        nscc_state = type == cc_nscc;
        if (nscc_state) {
            if (!small(SLOT(ack, L_ACK, A_RCVD_BYTES), &raw) ||
                !small(SLOT(ack, L_ACK, A_RCV_CWND_PEND), &pend))
                return 0;
            if ((restore = PyObject_IsTrue(r)) < 0)
                return -1;
        }
    }
    s0 = s;
    s.in_flight = in_flight;
    if (nscc_state) {
        /* _received: the receiver's 24-bit count, unwrapped */
        int64_t delta = (raw - s.rcvd_raw) & 0xFFFFFF;
        if (0 < delta && delta < 0x800000) {
            s.rcvd_raw = raw;
            s.rcvd_total += delta;
        }
        int64_t got = s.rcvd_total - s.credited;
        if (got <= 0) {
            newly = 0;
        } else {
            s.credited = s.rcvd_total;
            newly = got;
        }
        /* _receiver_state */
        s.ooo = ooo;
        if (pend > 0 && newly > 0) {
            if (s.cbp_none) {
                s.cbp = s.cwnd;
                s.cbp_none = 0;
            }
            int64_t dec = newly * (pend < 127 ? pend : 127) / 127;
            s.cwnd = s.cwnd - dec > p.mtu ? s.cwnd - dec : p.mtu;
            tally(&st, ST_DEC_RECEIVER, dec);
        }
        if (restore && !s.cbp_none) {
            int64_t w = s.cwnd > s.cbp ? s.cwnd : s.cbp;
            s.cwnd = w < s.max_wnd ? w : s.max_wnd;
            s.cbp_none = 1;
            s.cbp = 0;
            tally(&st, ST_RESTORE, 1);
        }
    } else {
        s.credited += newly;
        if (ack != Py_None)
            s.ooo = ooo;
    }
    s.achieved += newly;
    s.received += newly;
    s.ignored += newly;
    double delay = sample(&s, &p, has_rtt, rtt, skip);
    react(&s, &p, &st, now, skip, delay, newly);
    if (st.bad)
        return 0;
    return store(o, &s0, &s, &st) < 0 ? -1 : 1;
}

/* on_ack(nscc, now, newly_acked, ecn, rtt_sample, in_flight, ack_cc=None): Nscc.on_ack */
static PyObject *k_nscc_on_ack(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kw) {
    int64_t now;
    if (!configured || (kw != NULL && PyTuple_GET_SIZE(kw)) || (nargs != 6 && nargs != 7) ||
        !small(args[1], &now))
        goto reference;
    int rc = nscc_on_ack(args[0], now, args[2], args[3], args[4], args[5],
                         nargs == 7 ? args[6] : Py_None);
    if (rc < 0)
        return NULL;
    if (rc > 0)
        Py_RETURN_NONE;
reference:
    return reference(ref_nscc_on_ack, args, nargs, kw);
}

/* ------------------------------------------------------------------ CmsSender */

/* the common case of a CmsSender: exactly the class, no credit, no CCX window */
static int plain_sender(PyObject *self) {
    return configured && Py_IS_TYPE(self, L_SND.type) && SLOT(self, L_SND, C_CREDIT) == Py_None &&
           SLOT(self, L_SND, C_CCX) == Py_None && SLOT(self, L_SND, C_NSCC) != NULL;
}

/* the keyword arguments of a call, in the order of names (NULL where absent): 1 if every
 * keyword is one of names and each positional count matches npos, else 0 */
static int keywords(PyObject *const *args, Py_ssize_t nargs, PyObject *kw, Py_ssize_t npos,
                    PyObject **names, int n, PyObject **out) {
    Py_ssize_t nkw = kw ? PyTuple_GET_SIZE(kw) : 0;
    if (nargs != npos)
        return 0;
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *k = PyTuple_GET_ITEM(kw, j);
        /* keyword names are interned: the same object first; comparing the text of every
         * name before the one that matches cost ~1% of a run */
        int i = 0;
        while (i < n && k != names[i])
            i++;
        if (i == n)
            for (i = 0; i < n && PyUnicode_Compare(k, names[i]) != 0; i++)
                ;
        if (i == n || out[i] != NULL)
            return 0;
        out[i] = args[nargs + j];
    }
    return 1;
}

/* on_ack(self, now, *, fb): CmsSender.on_ack */
static PyObject *k_on_ack(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kw) {
    PyObject *fb;
    int64_t now;
    if (!keywords(args, nargs, kw, 2, &s_fb, 1, &fb) || fb == NULL) /* fb: keyword-only */
        goto reference;
    PyObject *self = args[0];
    if (!plain_sender(self) || !Py_IS_TYPE(fb, L_FB.type) || !small(args[1], &now) ||
        SLOT(fb, L_FB, B_ECN) == NULL)
        goto reference;
    int ecn = PyObject_IsTrue(SLOT(fb, L_FB, B_ECN));
    if (ecn < 0)
        return NULL;
    if (put(self, &L_SND, C_NOW, Py_NewRef(args[1])) < 0)
        return NULL;
    {
        PyObject *sel = SLOT(self, L_SND, C_SELECTOR), *ev = SLOT(fb, L_FB, B_EV);
        if (sel == NULL || ev == NULL)
            return NULL;
        if (!ecn && Py_IS_TYPE(sel, mixed_type) && PyLong_CheckExact(ev)) {
            /* MixedEv.feedback of a GOOD ACK: the EV to the back of the recycling FIFO */
            long long e = as_i64(ev);
            PyObject *q = e == -1 && PyErr_Occurred() ? NULL
                                                      : cached_attr(sel, s_recycled, &c_recycled);
            PyObject *m = q ? PyLong_FromLongLong(e & 0xFFFF) : NULL;
            PyObject *a[2] = {q, m};
            int rc = m ? call_drop(s_append, a, 2, NULL) : -1;
            Py_XDECREF(q);
            Py_XDECREF(m);
            if (rc < 0)
                return NULL;
        } else {
            PyObject *a[4] = {sel, args[1], ev, ecn ? fb_ecn : fb_good};
            if (call_drop(s_feedback, a, 4, NULL) < 0)
                return NULL;
        }
    }
    PyObject *nscc = SLOT(self, L_SND, C_NSCC); /* read after the selector's call */
    if (nscc != NULL && nscc != Py_None) {
        PyObject *v[6] = {SLOT(fb, L_FB, B_NEWLY), SLOT(fb, L_FB, B_ECN), SLOT(fb, L_FB, B_RTT),
                          SLOT(fb, L_FB, B_IN_FLIGHT), SLOT(fb, L_FB, B_ACK_CC)};
        for (int i = 0; i < 5; i++)
            if (v[i] == NULL) {
                PyErr_SetString(PyExc_AttributeError, "AckFeedback: a field is unset");
                return NULL;
            }
        Py_INCREF(nscc);
        int rc = nscc_on_ack(nscc, now, v[0], v[1], v[2], v[3], v[4]);
        if (rc == 0) {
            PyObject *a[7] = {nscc, args[1], v[0], v[1], v[2], v[3], v[4]};
            rc = call_drop(s_on_ack, a, 7, NULL);
        }
        Py_DECREF(nscc);
        if (rc < 0)
            return NULL;
    }
    Py_RETURN_NONE;
reference:
    return reference(ref_on_ack, args, nargs, kw);
}

/* BitmapEv.next_ev (uet.cms.ev_selection) where the EV index reached carries no penalty,
 * the common case: 1 and *out (the EV); 0 where the Python must run (a penalised index:
 * its skipping loop; anything unusual), before any change; -1 on an error. The same steps
 * in the same order: the index moves on, and at the end of a round it restarts at 0 and
 * a new XOR mask is drawn from the selector's rng. */
static int bitmap_next(PyObject *sel, PyObject **out) {
    PyObject *const names[6] = {s_index, s_xor, s_mask, s_n, s_upper, s_penalty};
    SlotCache *const caches[6] = {&c_index, &c_xor, &c_mask, &c_n, &c_upper, &c_penalty};
    PyObject *o[6] = {NULL};
    int rc = 0;
    long long v[5];
    for (int i = 0; i < 6; i++) /* one at a time: no lookup with an error pending */
        if ((o[i] = cached_attr(sel, names[i], caches[i])) == NULL) {
            PyErr_Clear(); /* an attribute missing: the Python says so */
            goto done;
        }
    for (int i = 0; i < 5; i++)
        if (!PyLong_CheckExact(o[i]) || !small_i64(o[i], &v[i]) || v[i] < 0)
            goto done;
    long long index = v[0], low = (v[0] ^ v[1]) & v[2], n = v[3], upper = v[4];
    PyObject *pen = o[5];
    if (!PyList_CheckExact(pen) || low >= PyList_GET_SIZE(pen))
        goto done;
    PyObject *p = PyList_GET_ITEM(pen, low);
    if (!PyLong_CheckExact(p) || Py_SIZE(p) > 0) /* penalised (> 0), or not an int */
        goto done;
    index += 1;
    int wrap = index == n;
    PyObject *io = PyLong_FromLongLong(wrap ? 0 : index);
    if (io == NULL || cached_set(sel, s_index, io, &c_index) < 0) {
        Py_XDECREF(io);
        rc = -1;
        goto done;
    }
    Py_DECREF(io);
    if (wrap) { /* self.xor = self.rng.randrange(n) */
        PyObject *rng = cached_attr(sel, s_rng, &c_rng);
        PyObject *x = rng ? mc_call1(rng, s_randrange, o[3]) : NULL;
        Py_XDECREF(rng);
        if (x == NULL || cached_set(sel, s_xor, x, &c_xor) < 0) {
            Py_XDECREF(x);
            rc = -1;
            goto done;
        }
        Py_DECREF(x);
    }
    *out = PyLong_FromLongLong(upper | low);
    rc = *out == NULL ? -1 : 1;
done:
    for (int i = 0; i < 6; i++)
        Py_XDECREF(o[i]);
    return rc;
}

/* choose_ev(self, now): CmsSender.choose_ev; a MixedEv with recycled EVs takes the front
 * one here (MixedEv.next_ev), a MixedEv without and a BitmapEv take bitmap_next's common
 * case, any other case calls the selector's next_ev */
static PyObject *k_choose_ev(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kw) {
    if (!configured || (kw != NULL && PyTuple_GET_SIZE(kw)) || nargs != 2 ||
        !Py_IS_TYPE(args[0], L_SND.type))
        return reference(ref_choose_ev, args, nargs, kw);
    PyObject *self = args[0], *sel = SLOT(self, L_SND, C_SELECTOR);
    if (sel == NULL)
        return unset(self, &L_SND, C_SELECTOR), NULL;
    if (put(self, &L_SND, C_NOW, Py_NewRef(args[1])) < 0)
        return NULL;
    Py_INCREF(sel);
    PyObject *out = NULL;
    if (Py_IS_TYPE(sel, mixed_type)) {
        PyObject *q = cached_attr(sel, s_recycled, &c_recycled);
        Py_ssize_t n = q ? PyObject_Size(q) : -1;
        if (n > 0)
            out = mc_call0(q, s_popleft);
        Py_XDECREF(q);
        if (n < 0 || out != NULL || PyErr_Occurred()) {
            Py_DECREF(sel);
            return out;
        }
    }
    if (Py_IS_TYPE(sel, mixed_type) || (bitmap_type != NULL && Py_IS_TYPE(sel, bitmap_type))) {
        int rc = bitmap_next(sel, &out);
        if (rc != 0) {
            Py_DECREF(sel);
            return rc > 0 ? out : NULL;
        }
    }
    PyObject *a[2] = {sel, args[1]};
    out = mc_call(s_next_ev, a, 2, NULL);
    Py_DECREF(sel);
    return out;
}

/* the window of the sender's NSCC, or of the sender itself: 1 and *w, 0 not the common case */
static int window_of(PyObject *self, int64_t *w, int *nscc) {
    PyObject *n = SLOT(self, L_SND, C_NSCC);
    *nscc = n != Py_None;
    if (*nscc)
        return Py_IS_TYPE(n, L_NS.type) && small(SLOT(n, L_NS, N_CWND), w);
    return small(SLOT(self, L_SND, C_WINDOW), w);
}

/* can_send(self, now, *, nbytes, in_flight, retx=False): CmsSender.can_send */
static PyObject *k_can_send(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kw) {
    PyObject *names[3] = {s_nbytes, s_in_flight, s_retx}, *v[3];
    int64_t nbytes, in_flight, w;
    int nscc;
    if (!keywords(args, nargs, kw, 2, names, 3, v) || v[0] == NULL || v[1] == NULL ||
        !plain_sender(args[0]) || !small(v[0], &nbytes) || !small(v[1], &in_flight) ||
        !window_of(args[0], &w, &nscc))
        return reference(ref_can_send, args, nargs, kw);
    PyObject *self = args[0];
    if (put(self, &L_SND, C_NOW, Py_NewRef(args[1])) < 0 ||
        put(self, &L_SND, C_REFUSED, Py_NewRef(Py_False)) < 0 ||
        put(self, &L_SND, C_WAIT_SINCE, Py_NewRef(Py_None)) < 0)
        return NULL;
    int ok = nscc ? w >= in_flight + nbytes : (in_flight + nbytes <= w || in_flight == 0);
    return Py_NewRef(ok ? Py_True : Py_False);
}

/* window_full(self, *, nbytes, in_flight): CmsSender.window_full */
static PyObject *k_window_full(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kw) {
    PyObject *names[2] = {s_nbytes, s_in_flight}, *v[2];
    int64_t nbytes, in_flight, w;
    int nscc;
    if (!keywords(args, nargs, kw, 1, names, 2, v) || v[0] == NULL || v[1] == NULL ||
        !plain_sender(args[0]) || !small(v[0], &nbytes) || !small(v[1], &in_flight) ||
        !window_of(args[0], &w, &nscc))
        return reference(ref_window_full, args, nargs, kw);
    return Py_NewRef(in_flight + nbytes >= w ? Py_True : Py_False);
}

/* on_send(self, now, *, nbytes, ev, retx): CmsSender.on_send */
static PyObject *k_on_send(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kw) {
    PyObject *names[3] = {s_nbytes, s_ev, s_retx}, *v[3];
    int64_t nbytes, in_flight = 0;
    if (!keywords(args, nargs, kw, 2, names, 3, v) || v[0] == NULL || v[1] == NULL ||
        v[2] == NULL || !plain_sender(args[0]) || !small(v[0], &nbytes))
        return reference(ref_on_send, args, nargs, kw);
    PyObject *self = args[0], *n = SLOT(self, L_SND, C_NSCC);
    if (n != Py_None && (!Py_IS_TYPE(n, L_NS.type) || !small(SLOT(n, L_NS, N_IN_FLIGHT),
                                                             &in_flight)))
        return reference(ref_on_send, args, nargs, kw);
    if (put(self, &L_SND, C_NOW, Py_NewRef(args[1])) < 0)
        return NULL;
    if (n != Py_None && put_i64(n, &L_NS, N_IN_FLIGHT, in_flight + nbytes) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* configure(Nscc, NsccParams, CmsSender, AckFeedback, PdsAckCc, references, constants):
 * references: (Nscc.on_ack, on_ack, can_send, window_full, on_send) in Python; constants:
 * {"nscc": CcType.NSCC, "good": PathFeedback.GOOD, "ecn": PathFeedback.ECN} */
static PyObject *k_configure(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyTuple_Check(args[5]) || PyTuple_GET_SIZE(args[5]) != 5 ||
        !PyDict_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError, "configure(Nscc, NsccParams, CmsSender, AckFeedback, "
                                         "PdsAckCc, references: 5-tuple, constants: dict)");
        return NULL;
    }
    PyObject *nscc = PyDict_GetItemString(args[6], "nscc");
    PyObject *good = PyDict_GetItemString(args[6], "good");
    PyObject *ecn = PyDict_GetItemString(args[6], "ecn");
    if (nscc == NULL || good == NULL || ecn == NULL) {
        PyErr_SetString(PyExc_ValueError, "configure: constants nscc, good and ecn");
        return NULL;
    }
    long long v = as_i64(nscc);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    for (int i = 0; i < 5; i++)
        if (!PyCallable_Check(PyTuple_GET_ITEM(args[5], i))) {
            PyErr_SetString(PyExc_TypeError, "configure: callables are expected");
            return NULL;
        }
    if (layout(&L_NS, args[0], NS_NAMES, N_N) < 0 || layout(&L_NP, args[1], NP_NAMES, P_N) < 0 ||
        layout(&L_SND, args[2], SND_NAMES, C_N) < 0 || layout(&L_FB, args[3], FB_NAMES, B_N) < 0 ||
        layout(&L_ACK, args[4], ACK_CC_FIELDS, A_N) < 0)
        return NULL;
    Py_XSETREF(ref_nscc_on_ack, Py_NewRef(PyTuple_GET_ITEM(args[5], 0)));
    Py_XSETREF(ref_on_ack, Py_NewRef(PyTuple_GET_ITEM(args[5], 1)));
    Py_XSETREF(ref_can_send, Py_NewRef(PyTuple_GET_ITEM(args[5], 2)));
    Py_XSETREF(ref_window_full, Py_NewRef(PyTuple_GET_ITEM(args[5], 3)));
    Py_XSETREF(ref_on_send, Py_NewRef(PyTuple_GET_ITEM(args[5], 4)));
    Py_XSETREF(fb_good, Py_NewRef(good));
    Py_XSETREF(fb_ecn, Py_NewRef(ecn));
    PyObject *mixed = PyDict_GetItemString(args[6], "mixed");
    PyObject *choose = PyDict_GetItemString(args[6], "choose_ev");
    if (mixed == NULL || !PyType_Check(mixed) || choose == NULL || !PyCallable_Check(choose)) {
        PyErr_SetString(PyExc_ValueError, "configure: constants mixed (MixedEv) and choose_ev");
        return NULL;
    }
    Py_XSETREF(mixed_type, (PyTypeObject *)Py_NewRef(mixed));
    PyObject *bitmap = PyDict_GetItemString(args[6], "bitmap"); /* optional */
    if (bitmap != NULL && !PyType_Check(bitmap)) {
        PyErr_SetString(PyExc_ValueError, "configure: constant bitmap (BitmapEv)");
        return NULL;
    }
    Py_XSETREF(bitmap_type, (PyTypeObject *)Py_XNewRef(bitmap));
    Py_XSETREF(ref_choose_ev, Py_NewRef(choose));
    cc_nscc = v;
    configured = 1;
    Py_RETURN_NONE;
}

#define ENTRY(name, fn, doc) \
    {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS, doc}
static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))k_configure, METH_FASTCALL,
     "configure(Nscc, NsccParams, CmsSender, AckFeedback, PdsAckCc, references, constants)"},
    ENTRY("nscc_on_ack", k_nscc_on_ack,
          "nscc_on_ack(nscc, now, newly_acked, ecn, rtt_sample, in_flight, ack_cc=None)"),
    ENTRY("on_ack", k_on_ack, "on_ack(sender, now, *, fb): CmsSender.on_ack"),
    ENTRY("can_send", k_can_send,
          "can_send(sender, now, *, nbytes, in_flight, retx=False): CmsSender.can_send"),
    ENTRY("window_full", k_window_full,
          "window_full(sender, *, nbytes, in_flight): CmsSender.window_full"),
    ENTRY("on_send", k_on_send, "on_send(sender, now, *, nbytes, ev, retx): CmsSender.on_send"),
    ENTRY("choose_ev", k_choose_ev, "choose_ev(sender, now): CmsSender.choose_ev"),
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_cms_core",
                                    "The sender's congestion control per ACK in C", -1, methods};

PyMODINIT_FUNC PyInit__cms_core(void) {
    if (intern_str(&s_feedback, "feedback") || intern_str(&s_on_ack, "on_ack") ||
        intern_str(&s_nbytes, "nbytes") || intern_str(&s_in_flight, "in_flight") ||
        intern_str(&s_retx, "retx") || intern_str(&s_ev, "ev") || intern_str(&s_fb, "fb") ||
        intern_str(&s_recycled, "recycled") || intern_str(&s_append, "append") ||
        intern_str(&s_popleft, "popleft") || intern_str(&s_next_ev, "next_ev") ||
        intern_str(&s_index, "index") || intern_str(&s_xor, "xor") ||
        intern_str(&s_mask, "mask") || intern_str(&s_n, "n") || intern_str(&s_upper, "upper") ||
        intern_str(&s_penalty, "penalty") || intern_str(&s_rng, "rng") ||
        intern_str(&s_randrange, "randrange"))
        return NULL;
    for (int i = 0; i < ST_N; i++)
        if (intern_str(&st_names[i], ST_TEXT[i]))
            return NULL;
    PyObject *m = PyModule_Create(&moddef);
    static const char *const names[] = {"nscc_on_ack", "on_ack", "can_send", "window_full",
                                        "on_send", "choose_ev"};
    if (m == NULL || add_instance_methods(m, names, 6) < 0) {
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
