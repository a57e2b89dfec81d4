/* A target PDC's per-packet work in C, over the same Python objects:
 *
 * - a newly arrived RUD request (uet.pds.target.TargetPdc.rx_request with _arrival,
 *   _deliver and the ACK coalescing decision, AckScheduler.on_accepted) and
 *   PdsEndpoint._rx_request, which finds its PDC (by DPDCID, or by key for a SYN);
 * - the ACKs it sends: uet.pds.ack.build_ack, AckScheduler.next_ack and
 *   PdsEndpoint.poll_transmit (the control and data rings);
 * - the SES's answers without a semantic response (PdsEndpoint.respond, TargetPdc.on_respond)
 *   and the poll that settles the unanswered ones (_finalize_seen).
 *
 * The common case only: an ESTABLISHED RUD PDC, a request (a SYN naming the PDC's start
 * PSN too) that is not trimmed and finds receive memory well below its limit. The clear
 * (apply_clear) and the credit hook stay Python calls, made in the Python's order; the C
 * PSN tracker is called at its C entry points and NSCC's receiver state is kept on its
 * slots (any other tracker or receiver class is called as Python); the PDC's own
 * bookkeeping (counters, the respond token and its Pending entry, the RequestDelivered
 * event, the coalesced-ACK state, the ACK ring and the timer heap) is done here on the
 * slots. A PSN the tracker does not take as new goes to TargetPdc._rx_not_new (Python);
 * every other case to the Python reference, called before anything has changed.
 * tests/pds/test_c_cores.py runs the same traffic through both forms and compares every
 * frame and counter; test_ack_core.py holds build_ack to the Python on a PDC's states.
 */
#include "slots.h"
#include "records.h"

enum { T_STATE, T_CTX, T_PDC_ID, T_MODE, T_SDI, T_CFG, T_TRACKER, T_ROB, T_RECEIVER,
       T_CREDIT_MODE, T_PENDING, T_CLEAR_PSN, T_ACKS, T_IN_ACK_RING, T_LAST_RX, T_MAX_EOM,
       T_CCX, T_GTD_ROOM, T_GAP_AFTER, T_GAP_SINCE, T_ARMED, T_ROLE, T_PEER_IP, T_PEER_PDCID,
       T_START_PSN, T_GTD, T_N };
static const char *PDC_NAMES[T_N] = {
    "state", "ctx", "pdc_id", "mode", "sdi", "cfg", "tracker", "rob", "receiver",
    "credit_mode", "pending", "clear_psn", "acks", "in_ack_ring", "last_rx", "max_eom",
    "ccx", "gtd_room", "gap_after", "gap_since", "_armed", "role", "peer_ip", "peer_pdcid",
    "start_psn", "gtd"};

enum { X_COUNTERS, X_EMIT, X_RX_MEMORY, X_ACK_RING, X_HEAP, X_HEAP_SEQ, X_TOKENS,
       X_NEXT_TOKEN, X_N };
static const char *CTX_NAMES[X_N] = {"counters", "emit", "rx_memory", "ack_ring", "heap",
                                     "_heap_seq", "_tokens", "_next_token"};

enum { MEM_USED, MEM_LIMIT, MEM_N };
static const char *MEM_NAMES[MEM_N] = {"used", "limit"};

enum { G_DSCP_TRIMMED, G_DSCP_TRIMMED_LASTHOP, G_N };
static const char *CFG_NAMES[G_N] = {"dscp_trimmed", "dscp_trimmed_lasthop"};


enum { H_FLAGS, H_CPO, H_PSN, H_CREDIT_TARGET, H_TYPE, H_NEXT_HDR, H_SPDCID, H_DPDCID,
       H_PSN_OFFSET, H_N };
static const char *HDR_NAMES[H_N] = {"flags", "clear_psn_offset", "psn", "credit_target",
                                     "type", "next_hdr", "spdcid", "dpdcid", "psn_offset"};

/* AckScheduler and AckCoalescer */
enum { S_CTX, S_CO, S_EVERY_BYTES, S_TIMER_PS, S_N };
static const char *SCHED_NAMES[S_N] = {"ctx", "co", "every_bytes", "timer_ps"};
enum { C_PSN, C_EV, C_FLAGS, C_AR, C_NBYTES, C_NOW, C_DUE, C_OWED, C_N };
static const char *CO_NAMES[C_N] = {"psn", "ev", "flags", "ar", "nbytes", "now", "due",
                                    "owed"};

/* Pending and RequestDelivered: every field, in order */
enum { P_PDC, P_PSN, P_EV, P_FLAGS, P_SES, P_SRC_IP, P_SEEN, P_DEFERRED, P_SDI, P_N };
static const char *PENDING_NAMES[P_N] = {"pdc", "psn", "ev", "flags", "ses", "src_ip",
                                         "seen", "deferred", "sdi"};
enum { E_TOKEN, E_SRC_IP, E_PDC_ID, E_MODE, E_PSN, E_SES, E_EXT, E_PAYLOAD, E_ECN_CE, E_SDI,
       E_N };
static const char *EVENT_NAMES[E_N] = {"token", "src_ip", "pdc_id", "mode", "psn", "ses",
                                       "ext", "payload", "ecn_ce", "sdi"};

static Layout L_PDC, L_CTX, L_MEM, L_CFG, L_FRAME, L_HDR, L_SCHED, L_CO, L_PENDING, L_EVENT;
static PyObject *ref_rx_request, *st_established, *mark_new, *heappush, *eom_default;
static int64_t syn_flag, retx_flag, ar_flag, immediate_flags, eom_flag, ack_m, ack_retx,
    max_owed;
static int configured;
static PyObject *s_ooo_count, *s_apply_clear, *s_on_packet, *s_max_psn, *s_on_data, *s_credit_changed, *s_rx_not_new,
    *s_flags, *s_append, *s_rx_packets, *s_rx_bytes, *s_ack_ar_coalesced, *kw_on_data,
    *kw_ccx_on_data;

/* The C PSN tracker (uet.native.fast.PsnTracker), called at its one-argument entry points
 * (uetn_tk_on_packet, uetn_tk_max_psn: `tracker key | psn`) without its Python wrapper;
 * configure_tracker gives their addresses. Any other tracker class is called as Python. */
typedef int64_t (*tk_fn)(uint64_t);
typedef uint64_t (*tk_bits_fn)(uint64_t);
static tk_fn tk_on_packet, tk_max_psn, tk_cack;
static tk_bits_fn tk_ack_bitmap, tk_sack_bitmap;
enum { K_KEY, K_N };
static const char *TK_NAMES[K_N] = {"_k"};
static Layout L_TK;
static PyObject *mark_results[4];
static int64_t ooo_saturated;
static int tracker_configured;

/* NSCC's receiver (uet.cms.receiver.NsccReceiver): its on_data is done on its slots */
enum { R_RCVD_BYTES, R_OOO_COUNT, R_PENALTY, R_RESTORE, R_N };
static const char *RECV_NAMES[R_N] = {"rcvd_bytes", "ooo_count", "penalty", "restore"};
static Layout L_RECV;
static int receiver_configured;

/* NsccReceiver.on_data(now, nbytes=, ecn_ce=, credit_target=, in_order=, ooo_count=) with
 * ooo_count given: the 24-bit byte count and the 16-bit-capped out-of-order count */
static int nscc_on_data(PyObject *recv, int64_t nbytes, int64_t ooo) {
    int64_t rcvd;
    if (get_i64(recv, &L_RECV, R_RCVD_BYTES, &rcvd) < 0 ||
        put_i64(recv, &L_RECV, R_RCVD_BYTES, (rcvd + nbytes) & 0xFFFFFF) < 0)
        return -1;
    return put_i64(recv, &L_RECV, R_OOO_COUNT, ooo < 0xFFFF ? ooo : 0xFFFF);
}

static PyObject *ref(PyObject *const *args, Py_ssize_t nargs) {
    return PyObject_Vectorcall(ref_rx_request, args, nargs, NULL);
}

/* PdcContext.arm(obj, t): obj._armed, the (t, seq, obj) heap */
static int ctx_arm(PyObject *ctx, PyObject *obj, int64_t t) {
    int64_t armed;
    int k = get_opt(obj, &L_PDC, T_ARMED, &armed);
    if (k < 0)
        return -1;
    if (k && t >= armed)
        return 0;
    PyObject *tobj = PyLong_FromLongLong(t);
    if (tobj == NULL)
        return -1;
    if (put(obj, &L_PDC, T_ARMED, Py_NewRef(tobj)) < 0) {
        Py_DECREF(tobj);
        return -1;
    }
    PyObject *seq = PyIter_Next(SLOT(ctx, L_CTX, X_HEAP_SEQ));
    if (seq == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "timer sequence ended");
        Py_DECREF(tobj);
        return -1;
    }
    PyObject *item = PyTuple_Pack(3, tobj, seq, obj);
    Py_DECREF(tobj);
    Py_DECREF(seq);
    if (item == NULL)
        return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(heappush, SLOT(ctx, L_CTX, X_HEAP), item, NULL);
    Py_DECREF(item);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* PdcContext.want_ack(pdc) */
static int want_ack(PyObject *ctx, PyObject *pdc) {
    int in = truth(pdc, &L_PDC, T_IN_ACK_RING);
    if (in != 0)
        return in < 0 ? -1 : 0;
    if (put_bool(pdc, &L_PDC, T_IN_ACK_RING, 1) < 0)
        return -1;
    PyObject *a[2] = {SLOT(ctx, L_CTX, X_ACK_RING), pdc};
    return call_drop(s_append, a, 2, NULL);
}

/* AckScheduler.owe(psn, ev, flags) (psn: the coalescer's, maybe None) */
static int owe(PyObject *ctx, PyObject *co, PyObject *psn, PyObject *ev, PyObject *flags) {
    if (psn != Py_None) {
        PyObject *owed = SLOT(co, L_CO, C_OWED);
        Py_ssize_t n = PyObject_Length(owed);
        if (n < 0)
            return -1;
        if (n < max_owed) {
            PyObject *item = PyTuple_Pack(3, psn, ev, flags);
            if (item == NULL)
                return -1;
            PyObject *a[2] = {owed, item};
            int rc = call_drop(s_append, a, 2, NULL);
            Py_DECREF(item);
            return rc;
        }
    }
    return count(SLOT(ctx, L_CTX, X_COUNTERS), s_ack_ar_coalesced);
}

/* AckScheduler.on_accepted */
static int on_accepted(PyObject *sched, PyObject *pdc, int64_t now, PyObject *psn,
                       PyObject *ev, int64_t aflags, int ar, int64_t nbytes, int immediate) {
    PyObject *co = SLOT(sched, L_SCHED, S_CO), *ctx = SLOT(sched, L_SCHED, S_CTX);
    if (co == NULL || ctx == NULL || !Py_IS_TYPE(co, L_CO.type) ||
        !Py_IS_TYPE(ctx, L_CTX.type)) {
        PyErr_SetString(PyExc_TypeError, "AckScheduler: unexpected state");
        return -1;
    }
    int64_t cflags, cnb, every;
    PyObject *af = PyLong_FromLongLong(aflags);
    if (af == NULL || get_i64(co, &L_CO, C_FLAGS, &cflags) < 0)
        goto fail;
    if (!(cflags & ack_m)) { /* keep a CE trigger's PSN/EV for path attribution */
        int car = truth(co, &L_CO, C_AR);
        if (car < 0)
            goto fail;
        PyObject *cpsn = SLOT(co, L_CO, C_PSN);
        if (ar && car) {
            int same = PyObject_RichCompareBool(cpsn, psn, Py_EQ);
            if (same < 0)
                goto fail;
            if (!same && owe(ctx, co, cpsn, SLOT(co, L_CO, C_EV), SLOT(co, L_CO, C_FLAGS)) < 0)
                goto fail;
        }
        if (put(co, &L_CO, C_PSN, Py_NewRef(psn)) < 0 || put(co, &L_CO, C_EV, Py_NewRef(ev)) < 0 ||
            put(co, &L_CO, C_FLAGS, Py_NewRef(af)) < 0 || put_bool(co, &L_CO, C_AR, ar) < 0)
            goto fail;
    } else if (ar) {
        int same = PyObject_RichCompareBool(SLOT(co, L_CO, C_PSN), psn, Py_EQ);
        if (same < 0 || (!same && owe(ctx, co, psn, ev, af) < 0))
            goto fail;
    }
    if (get_i64(co, &L_CO, C_NBYTES, &cnb) < 0 || put_i64(co, &L_CO, C_NBYTES, cnb + nbytes) < 0 ||
        get_i64(sched, &L_SCHED, S_EVERY_BYTES, &every) < 0)
        goto fail;
    if (immediate || cnb + nbytes >= every) {
        int cnow = truth(co, &L_CO, C_NOW);
        if (cnow < 0)
            goto fail;
        if (!cnow && (put_bool(co, &L_CO, C_NOW, 1) < 0 || want_ack(ctx, pdc) < 0))
            goto fail;
    } else if (SLOT(co, L_CO, C_DUE) == Py_None) {
        int64_t timer;
        if (get_i64(sched, &L_SCHED, S_TIMER_PS, &timer) < 0 ||
            put_i64(co, &L_CO, C_DUE, now + timer) < 0 || ctx_arm(ctx, pdc, now + timer) < 0)
            goto fail;
    }
    Py_DECREF(af);
    return 0;
fail:
    Py_XDECREF(af);
    return -1;
}

/* rx_request(pdc, now, frame, pds) */
static PyObject *k_rx_request(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "target core not configured");
        return NULL;
    }
    if (nargs != 4 || !Py_IS_TYPE(args[0], L_PDC.type) || !is_int(args[1]) ||
        !Py_IS_TYPE(args[2], L_FRAME.type) || !Py_IS_TYPE(args[3], L_HDR.type))
        return ref(args, nargs);
    PyObject *pdc = args[0], *now_obj = args[1], *frame = args[2], *pds = args[3];
    PyObject *ctx = SLOT(pdc, L_PDC, T_CTX), *cfg = SLOT(pdc, L_PDC, T_CFG);
    PyObject *acks = SLOT(pdc, L_PDC, T_ACKS);
    if (SLOT(pdc, L_PDC, T_STATE) != st_established || ctx == NULL || cfg == NULL ||
        acks == NULL || !Py_IS_TYPE(ctx, L_CTX.type) || !Py_IS_TYPE(cfg, L_CFG.type) ||
        !Py_IS_TYPE(acks, L_SCHED.type) || SLOT(pdc, L_PDC, T_ROB) != Py_None)
        return ref(args, nargs);
    PyObject *mem = SLOT(ctx, L_CTX, X_RX_MEMORY);
    if (mem == NULL || !Py_IS_TYPE(mem, L_MEM.type))
        return ref(args, nargs);
    int64_t now, psn, flags, cpo, clear, dscp, t1, t2, used, room, limit;
    if ((now = as_i64(now_obj)) == -1 && PyErr_Occurred())
        return NULL;
    if (get_i64(pds, &L_HDR, H_PSN, &psn) < 0 || get_i64(pds, &L_HDR, H_FLAGS, &flags) < 0 ||
        get_i64(pds, &L_HDR, H_CPO, &cpo) < 0 ||
        get_i64(pdc, &L_PDC, T_CLEAR_PSN, &clear) < 0 ||
        get_i64(frame, &L_FRAME, F_DSCP, &dscp) < 0 ||
        get_i64(cfg, &L_CFG, G_DSCP_TRIMMED, &t1) < 0 ||
        get_i64(cfg, &L_CFG, G_DSCP_TRIMMED_LASTHOP, &t2) < 0 ||
        get_i64(mem, &L_MEM, MEM_USED, &used) < 0 || get_i64(mem, &L_MEM, MEM_LIMIT, &limit) < 0 ||
        get_i64(pdc, &L_PDC, T_GTD_ROOM, &room) < 0)
        return NULL;
    if (dscp == t1 || dscp == t2 || used + room > limit)
        return ref(args, nargs); /* trimmed, memory: the Python */
    if (flags & syn_flag) { /* a SYN must name the PDC's start (else the Python NACKs it) */
        int64_t off, start;
        if (get_i64(pds, &L_HDR, H_PSN_OFFSET, &off) < 0 ||
            get_i64(pdc, &L_PDC, T_START_PSN, &start) < 0)
            return NULL;
        if (((psn - off) & M32) != start)
            return ref(args, nargs);
    }
    if (put(pdc, &L_PDC, T_LAST_RX, Py_NewRef(now_obj)) < 0)
        return NULL;
    int64_t cl = (psn + cpo) & M32;
    PyObject *psn_obj = SLOT(pds, L_HDR, H_PSN), *tracker = SLOT(pdc, L_PDC, T_TRACKER);
    if (cl != clear) { /* the initiator's clear PSN moved: TargetPdc.apply_clear (it only
                        * frees memory, so the memory check above still holds) */
        PyObject *gtd = SLOT(pdc, L_PDC, T_GTD);
        int64_t k, mx = -1;
        if (gtd != NULL && PyDict_CheckExact(gtd) && !PyDict_GET_SIZE(gtd) &&
            tracker_configured && tracker != NULL && Py_IS_TYPE(tracker, L_TK.type)) {
            /* nothing guaranteed-delivered held: only the clear PSN moves (if it is ahead
             * and not beyond the highest PSN received) */
            if (get_i64(tracker, &L_TK, K_KEY, &k) < 0)
                return NULL;
            mx = tk_max_psn((uint64_t)k);
        }
        if (mx >= 0) {
            if (psn_sdiff(cl, clear) > 0 && psn_sdiff(cl, mx) <= 0 &&
                put_i64(pdc, &L_PDC, T_CLEAR_PSN, cl) < 0)
                return NULL;
        } else {
            PyObject *clo = PyLong_FromLongLong(cl);
            PyObject *b[3] = {pdc, now_obj, clo};
            if (clo == NULL || call_drop(s_apply_clear, b, 3, NULL) < 0) {
                Py_XDECREF(clo);
                return NULL;
            }
            Py_DECREF(clo);
        }
    }
    tracker = SLOT(pdc, L_PDC, T_TRACKER); /* (read again after the call, as before) */
    /* res: on_packet's (result, in_order, ooo_count), from the Python call or made here */
    PyObject *res = NULL;
    uint64_t tkey = 0;
    int direct = tracker_configured && Py_IS_TYPE(tracker, L_TK.type) && psn >= 0 &&
                 psn <= M32;
    if (direct) {
        int64_t k;
        if (get_i64(tracker, &L_TK, K_KEY, &k) < 0)
            return NULL;
        tkey = (uint64_t)k;
        int64_t v = tk_on_packet(tkey | (uint64_t)psn);
        if (v < 0) { /* not a live tracker's key: the wrapper's call says what it says */
            direct = 0;
        } else {
            PyObject *ooo_o = (v >> 3) == ooo_saturated ? PyObject_GetAttr(tracker, s_ooo_count)
                                                         : PyLong_FromLongLong(v >> 3);
            if (ooo_o == NULL)
                return NULL;
            res = PyTuple_Pack(3, mark_results[v & 3], (v & 4) ? Py_True : Py_False, ooo_o);
            Py_DECREF(ooo_o);
            if (res == NULL)
                return NULL;
        }
    }
    if (!direct) {
        PyObject *a[2] = {tracker, psn_obj};
        if ((res = call(s_on_packet, a, 2, NULL)) == NULL)
            return NULL;
        if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 3) {
            Py_DECREF(res);
            PyErr_SetString(PyExc_TypeError, "PsnTracker.on_packet: a 3-tuple is expected");
            return NULL;
        }
    }
    PyObject *r = PyTuple_GET_ITEM(res, 0), *in_order_o = PyTuple_GET_ITEM(res, 1),
             *ooo_o = PyTuple_GET_ITEM(res, 2);
    if (r != mark_new) {
        PyObject *b[6] = {pdc, now_obj, frame, pds, psn_obj, r};
        int rc = call_drop(s_rx_not_new, b, 6, NULL);
        Py_DECREF(res);
        if (rc < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    int in_order = PyObject_IsTrue(in_order_o);
    PyObject *ses = SLOT(frame, L_FRAME, F_SES), *payload = SLOT(frame, L_FRAME, F_PAYLOAD);
    PyObject *ev = SLOT(frame, L_FRAME, F_EV), *src_ip = SLOT(frame, L_FRAME, F_SRC_IP);
    PyObject *counters = SLOT(ctx, L_CTX, X_COUNTERS), *x = NULL, *nb_obj = NULL;
    int64_t ecn, max_psn;
    Py_ssize_t nbytes;
    if (in_order < 0 || ses == NULL || payload == NULL || ev == NULL || src_ip == NULL ||
        get_i64(frame, &L_FRAME, F_ECN, &ecn) < 0)
        goto fail;
    int ce = ecn == 3;
    /* ---- _arrival: whether the highest PSN ends a message, the CC, counters */
    if (direct) {
        max_psn = tk_max_psn(tkey);
    } else {
        x = PyObject_GetAttr(tracker, s_max_psn);
        if (x == NULL)
            goto fail;
        max_psn = as_i64(x);
        Py_CLEAR(x);
        if (max_psn == -1 && PyErr_Occurred())
            goto fail;
    }
    if (psn == max_psn) {
        x = PyObject_GetAttr(ses, s_flags);
        if (x == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                goto fail;
            PyErr_Clear();
            x = Py_NewRef(eom_default);
        }
        long long sf = as_i64(x);
        Py_CLEAR(x);
        if ((sf == -1 && PyErr_Occurred()) || put_bool(pdc, &L_PDC, T_MAX_EOM, (sf & eom_flag) != 0) < 0)
            goto fail;
    }
    if ((nbytes = PyObject_Length(payload)) < 0 || (nb_obj = PyLong_FromSsize_t(nbytes)) == NULL)
        goto fail;
    {
        PyObject *ct = SLOT(pds, L_HDR, H_CREDIT_TARGET), *recv = SLOT(pdc, L_PDC, T_RECEIVER);
        int overflow = 1;
        int64_t ooo = PyLong_CheckExact(ooo_o) ? PyLong_AsLongLongAndOverflow(ooo_o, &overflow)
                                               : -1;
        if (receiver_configured && recv != NULL && Py_IS_TYPE(recv, L_RECV.type) &&
            !overflow && ooo >= 0) {
            if (ct == NULL || nscc_on_data(recv, nbytes, ooo) < 0)
                goto fail;
        } else {
            PyObject *b[7] = {recv, now_obj, nb_obj, ce ? Py_True : Py_False, ct,
                              in_order ? Py_True : Py_False, ooo_o};
            if (ct == NULL || call_drop(s_on_data, b, 7, kw_on_data) < 0)
                goto fail;
        }
    }
    PyObject *ccx = SLOT(pdc, L_PDC, T_CCX);
    if (ccx != Py_None) {
        PyObject *b[4] = {ccx, now_obj, nb_obj, ce ? Py_True : Py_False};
        if (call_drop(s_on_data, b, 4, kw_ccx_on_data) < 0)
            goto fail;
    }
    if (!in_order && SLOT(pdc, L_PDC, T_GAP_SINCE) == Py_None) {
        int64_t gap;
        if (get_i64(pdc, &L_PDC, T_GAP_AFTER, &gap) < 0)
            goto fail;
        if (gap && (put(pdc, &L_PDC, T_GAP_SINCE, Py_NewRef(now_obj)) < 0 ||
                    ctx_arm(ctx, pdc, now + gap) < 0))
            goto fail;
    }
    if (count(counters, s_rx_packets) < 0 || count_n(counters, s_rx_bytes, nbytes) < 0)
        goto fail;
    int credit = truth(pdc, &L_PDC, T_CREDIT_MODE);
    if (credit < 0)
        goto fail;
    if (credit) {
        PyObject *cb = PyObject_GetAttr(ctx, s_credit_changed);
        PyObject *b[2] = {now_obj, pdc};
        PyObject *rr = cb ? PyObject_Vectorcall(cb, b, 2, NULL) : NULL;
        Py_XDECREF(cb);
        if (rr == NULL)
            goto fail;
        Py_DECREF(rr);
    }
    /* ---- _deliver: a respond token, its Pending entry, the RequestDelivered event */
    int64_t aflags = (ce ? ack_m : 0) | (flags & retx_flag ? ack_retx : 0), token;
    PyObject *af = PyLong_FromLongLong(aflags);
    if (af == NULL || get_i64(ctx, &L_CTX, X_NEXT_TOKEN, &token) < 0) {
        Py_XDECREF(af);
        goto fail;
    }
    PyObject *tok = PyLong_FromLongLong(token);
    if (tok == NULL || put_i64(ctx, &L_CTX, X_NEXT_TOKEN, token + 1) < 0) {
        Py_XDECREF(tok);
        Py_DECREF(af);
        goto fail;
    }
    PyObject *pv[P_N] = {Py_NewRef(pdc), Py_NewRef(psn_obj), Py_NewRef(ev), Py_NewRef(af),
                         Py_NewRef(ses), Py_NewRef(src_ip), Py_NewRef(Py_False),
                         Py_NewRef(Py_False), Py_NewRef(Py_None)};
    PyObject *entry = new_filled(&L_PENDING, pv);
    int rc = entry ? PyDict_SetItem(SLOT(ctx, L_CTX, X_TOKENS), tok, entry) : -1;
    Py_XDECREF(entry);
    if (rc == 0)
        rc = PyObject_SetItem(SLOT(pdc, L_PDC, T_PENDING), psn_obj, tok);
    if (rc < 0) {
        Py_DECREF(tok);
        Py_DECREF(af);
        goto fail;
    }
    PyObject *ext = SLOT(frame, L_FRAME, F_EXT), *sdi = SLOT(pdc, L_PDC, T_SDI);
    PyObject *ev_v[E_N] = {tok, Py_NewRef(src_ip), Py_NewRef(SLOT(pdc, L_PDC, T_PDC_ID)),
                           Py_NewRef(SLOT(pdc, L_PDC, T_MODE)), Py_NewRef(psn_obj),
                           Py_NewRef(ses), Py_NewRef(ext ? ext : Py_None), Py_NewRef(payload),
                           Py_NewRef(ce ? Py_True : Py_False), Py_NewRef(sdi ? sdi : Py_None)};
    PyObject *event = new_filled(&L_EVENT, ev_v);
    PyObject *rr = event ? PyObject_CallOneArg(SLOT(ctx, L_CTX, X_EMIT), event) : NULL;
    Py_XDECREF(event);
    if (rr == NULL) {
        Py_DECREF(af);
        goto fail;
    }
    Py_DECREF(rr);
    Py_DECREF(af);
    /* ---- the coalescing decision */
    if (on_accepted(acks, pdc, now, psn_obj, ev, aflags, (flags & ar_flag) != 0, nbytes,
                    (flags & immediate_flags) != 0 || ce) < 0)
        goto fail;
    Py_DECREF(nb_obj);
    Py_DECREF(res);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(nb_obj);
    Py_DECREF(res);
    return NULL;
}

/* ---- PdsEndpoint._rx_request: the target PDC a request names */

static PyObject *ref_dispatch, *request_next_hdrs, *role_target, *mode_rud, *mode_rod,
    *endpoint_class; /* PdsEndpoint itself: a subclass may override _named_target */
static int64_t rod_req, rod_cc_req;
static PyObject *s_tgt_by_key, *s_by_id;
static int dispatch_configured;

/* rx_dispatch(ep, now, frame, pds): a request of a PDC already established, named by its
 * DPDCID, from the PDC's peer, cleartext, in the PDC's mode: TargetPdc.rx_request (the C
 * form above); SYN, every mismatch (answered with a NACK) and other types: the Python */
/* the slots of PdsEndpoint read here (configure_dispatch) */
enum { PE_MGR, PE_SEEN, PE_CTRL, PE_ACK_RING, PE_RING, PE_TOKENS, PE_CTX, PE_N };
static const char *PEP_NAMES[PE_N] = {"mgr", "_seen", "ctrl", "ack_ring", "ring", "_tokens",
                                      "ctx"};
static Layout L_PEP;

#define pep(ep, i) slot_attr((ep), &L_PEP, (i))

/* PdsEndpoint._rx_request of a SYN request: the established cleartext target PDC its
 * (source, destination, SPDCID) key names, in its mode, takes it (rx_request); no PDC, a
 * lingering or other one (a new incarnation, NACKs) is the Python's */
static PyObject *syn_dispatch(PyObject *mod, PyObject *const *args, PyObject *mode) {
    PyObject *ep = args[0], *frame = args[2], *pds = args[3];
    PyObject *src = SLOT(frame, L_FRAME, F_SRC_IP), *dst = SLOT(frame, L_FRAME, F_DST_IP);
    PyObject *spdcid = SLOT(pds, L_HDR, H_SPDCID);
    if (src == NULL || dst == NULL || spdcid == NULL)
        return PyObject_Vectorcall(ref_dispatch, args, 4, NULL);
    PyObject *mgr = pep(ep, PE_MGR);
    PyObject *by_key = mgr ? PyObject_GetAttr(mgr, s_tgt_by_key) : NULL;
    Py_XDECREF(mgr);
    if (by_key == NULL)
        return NULL;
    PyObject *key = PyTuple_Pack(3, src, dst, spdcid), *pdc = NULL;
    if (key != NULL && PyDict_Check(by_key))
        pdc = PyDict_GetItemWithError(by_key, key);
    Py_XINCREF(pdc);
    Py_XDECREF(key);
    Py_DECREF(by_key);
    if (PyErr_Occurred()) {
        Py_XDECREF(pdc);
        return NULL;
    }
    if (pdc == NULL || !Py_IS_TYPE(pdc, L_PDC.type) ||
        SLOT(pdc, L_PDC, T_STATE) != st_established || SLOT(pdc, L_PDC, T_SDI) != Py_None ||
        SLOT(pdc, L_PDC, T_MODE) != mode) {
        Py_XDECREF(pdc);
        return PyObject_Vectorcall(ref_dispatch, args, 4, NULL);
    }
    PyObject *a[4] = {pdc, args[1], frame, pds};
    PyObject *r = k_rx_request(mod, a, 4);
    Py_DECREF(pdc);
    return r;
}

static PyObject *k_rx_dispatch(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!dispatch_configured || !configured) {
        PyErr_SetString(PyExc_RuntimeError, "target core dispatch not configured");
        return NULL;
    }
    if (nargs != 4 || (PyObject *)Py_TYPE(args[0]) != endpoint_class ||
        !Py_IS_TYPE(args[2], L_FRAME.type) || !Py_IS_TYPE(args[3], L_HDR.type))
        return PyObject_Vectorcall(ref_dispatch, args, nargs, NULL);
    PyObject *ep = args[0], *frame = args[2], *pds = args[3];
    int64_t type, flags;
    if (get_i64(pds, &L_HDR, H_TYPE, &type) < 0 || get_i64(pds, &L_HDR, H_FLAGS, &flags) < 0)
        return NULL;
    PyObject *mode = (type == rod_req || type == rod_cc_req) ? mode_rod : mode_rud;
    PyObject *nh = SLOT(pds, L_HDR, H_NEXT_HDR);
    int t = nh ? PySequence_Contains(request_next_hdrs, nh) : -1;
    if (t < 0)
        return NULL;
    if (!t || SLOT(frame, L_FRAME, F_TSS) != Py_None)
        return PyObject_Vectorcall(ref_dispatch, args, nargs, NULL);
    if (flags & syn_flag) /* by (source, destination, SPDCID): an open PDC, or the Python */
        return syn_dispatch(mod, args, mode);
    PyObject *mgr = pep(ep, PE_MGR);
    PyObject *by_id = mgr ? PyObject_GetAttr(mgr, s_by_id) : NULL;
    Py_XDECREF(mgr);
    if (by_id == NULL)
        return NULL;
    PyObject *pdc = PyDict_Check(by_id) ? PyDict_GetItemWithError(by_id, SLOT(pds, L_HDR, H_DPDCID))
                                        : NULL;
    Py_XINCREF(pdc);
    Py_DECREF(by_id);
    if (pdc == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return PyObject_Vectorcall(ref_dispatch, args, nargs, NULL); /* INV_DPDCID */
    }
    int ok = Py_IS_TYPE(pdc, L_PDC.type) && SLOT(pdc, L_PDC, T_SDI) == Py_None &&
             SLOT(pdc, L_PDC, T_MODE) == mode;
    PyObject *checks[3][2] = {{SLOT(pdc, L_PDC, T_ROLE), role_target},
                              {SLOT(pdc, L_PDC, T_PEER_IP), SLOT(frame, L_FRAME, F_SRC_IP)},
                              {SLOT(pdc, L_PDC, T_PEER_PDCID), SLOT(pds, L_HDR, H_SPDCID)}};
    for (int i = 0; ok && i < 3; i++) {
        if (checks[i][0] == NULL || checks[i][1] == NULL) {
            ok = 0;
            break;
        }
        ok = PyObject_RichCompareBool(checks[i][0], checks[i][1], Py_EQ);
        if (ok < 0) {
            Py_DECREF(pdc);
            return NULL;
        }
    }
    if (!ok) {
        Py_DECREF(pdc);
        return PyObject_Vectorcall(ref_dispatch, args, nargs, NULL); /* a NACK, or odd */
    }
    PyObject *a[4] = {pdc, args[1], frame, pds};
    PyObject *r = k_rx_request(mod, a, 4);
    Py_DECREF(pdc);
    return r;
}

/* configure_dispatch(reference, constants) (after configure) */
static PyObject *k_configure_dispatch(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyCallable_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "configure_dispatch(reference, constants)");
        return NULL;
    }
    static const char *names[] = {"request_next_hdrs", "target", "rud", "rod", "rod_req",
                                  "rod_cc_req", "endpoint_class"};
    PyObject *v[7];
    for (int i = 0; i < 7; i++)
        if ((v[i] = PyDict_GetItemString(args[1], names[i])) == NULL) {
            PyErr_Format(PyExc_ValueError, "configure_dispatch: no constant '%s'", names[i]);
            return NULL;
        }
    long long a = as_i64(v[4]), b = as_i64(v[5]);
    if (PyErr_Occurred())
        return NULL;
    if (layout(&L_PEP, v[6], PEP_NAMES, PE_N) < 0)
        return NULL;
    Py_XSETREF(ref_dispatch, Py_NewRef(args[0]));
    Py_XSETREF(request_next_hdrs, Py_NewRef(v[0]));
    Py_XSETREF(role_target, Py_NewRef(v[1]));
    Py_XSETREF(mode_rud, Py_NewRef(v[2]));
    Py_XSETREF(mode_rod, Py_NewRef(v[3]));
    Py_XSETREF(endpoint_class, Py_NewRef(v[6]));
    rod_req = a;
    rod_cc_req = b;
    dispatch_configured = 1;
    Py_RETURN_NONE;
}

/* configure(TargetPdc, PdcContext, MemoryAccount, PdsConfig, Frame, PdsRequest,
 *           AckScheduler, AckCoalescer, Pending, RequestDelivered, constants, reference) */
static PyObject *k_configure(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 12 || !PyDict_Check(args[10]) || !PyCallable_Check(args[11])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure takes 10 classes, a dict of constants and the reference");
        return NULL;
    }
    configured = 0;
    PyObject *c = args[10];
    static const char *names[] = {"established", "new", "heappush", "syn", "retx", "ar",
                                  "immediate", "eom", "ack_m", "ack_retx", "max_owed"};
    PyObject *v[11];
    for (int i = 0; i < 11; i++)
        if ((v[i] = PyDict_GetItemString(c, names[i])) == NULL) {
            PyErr_Format(PyExc_ValueError, "configure: no constant '%s'", names[i]);
            return NULL;
        }
    int64_t iv[8];
    for (int i = 0; i < 8; i++)
        if ((iv[i] = as_i64(v[3 + i])) == -1 && PyErr_Occurred())
            return NULL;
    if (layout(&L_PDC, args[0], PDC_NAMES, T_N) < 0 ||
        layout(&L_CTX, args[1], CTX_NAMES, X_N) < 0 ||
        layout(&L_MEM, args[2], MEM_NAMES, MEM_N) < 0 ||
        layout(&L_CFG, args[3], CFG_NAMES, G_N) < 0 ||
        layout(&L_FRAME, args[4], FRAME_FIELDS, F_N) < 0 ||
        layout(&L_HDR, args[5], HDR_NAMES, H_N) < 0 ||
        layout(&L_SCHED, args[6], SCHED_NAMES, S_N) < 0 ||
        layout(&L_CO, args[7], CO_NAMES, C_N) < 0 ||
        layout(&L_PENDING, args[8], PENDING_NAMES, P_N) < 0 ||
        layout(&L_EVENT, args[9], EVENT_NAMES, E_N) < 0)
        return NULL;
    Py_XSETREF(st_established, Py_NewRef(v[0]));
    Py_XSETREF(mark_new, Py_NewRef(v[1]));
    Py_XSETREF(heappush, Py_NewRef(v[2]));
    Py_XSETREF(eom_default, PyLong_FromLongLong(iv[4]));
    Py_XSETREF(ref_rx_request, Py_NewRef(args[11]));
    if (eom_default == NULL)
        return NULL;
    syn_flag = iv[0];
    retx_flag = iv[1];
    ar_flag = iv[2];
    immediate_flags = iv[3];
    eom_flag = iv[4];
    ack_m = iv[5];
    ack_retx = iv[6];
    max_owed = iv[7];
    configured = 1;
    Py_RETURN_NONE;
}

/* configure_tracker(PsnTracker, functions, results, saturated): the C tracker's class, the
 * addresses of its one-argument entry points by name (uetn_tk_on_packet, _max_psn, _cack,
 * _ack_bitmap, _sack_bitmap), MarkResult by value and the ooo_count that means "read the
 * real counter" */
static PyObject *k_configure_tracker(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyDict_Check(args[1]) || !PyTuple_Check(args[2]) ||
        PyTuple_GET_SIZE(args[2]) != 4 || !PyLong_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_tracker(PsnTracker, functions, results, saturated)");
        return NULL;
    }
    tracker_configured = 0;
    static const char *names[] = {"uetn_tk_on_packet", "uetn_tk_max_psn", "uetn_tk_cack",
                                  "uetn_tk_ack_bitmap", "uetn_tk_sack_bitmap"};
    void *f[5];
    for (int i = 0; i < 5; i++) {
        PyObject *o = PyDict_GetItemString(args[1], names[i]);
        if (o == NULL || !PyLong_Check(o)) {
            PyErr_Format(PyExc_ValueError, "configure_tracker: no address for %s", names[i]);
            return NULL;
        }
        if ((f[i] = PyLong_AsVoidPtr(o)) == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "configure_tracker: %s is null", names[i]);
            return NULL;
        }
    }
    int64_t sat = as_i64(args[3]);
    if (PyErr_Occurred() || layout(&L_TK, args[0], TK_NAMES, K_N) < 0)
        return NULL;
    for (int i = 0; i < 4; i++)
        Py_XSETREF(mark_results[i], Py_NewRef(PyTuple_GET_ITEM(args[2], i)));
    tk_on_packet = (tk_fn)f[0];
    tk_max_psn = (tk_fn)f[1];
    tk_cack = (tk_fn)f[2];
    tk_ack_bitmap = (tk_bits_fn)f[3];
    tk_sack_bitmap = (tk_bits_fn)f[4];
    ooo_saturated = sat;
    tracker_configured = 1;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ ACKs
 * uet.pds.ack.build_ack for the ACK a target PDC's coalescing or owed list sends: an
 * ACK_CC naming a PSN or the CACK, from an ESTABLISHED cleartext TargetPdc without CCX,
 * no SES header or data, no probe, the SACK from CACK + 1, with the C tracker. Every other
 * ACK (closed PDCs, probes, plain ACKs, ACK_CCX, read data, secured PDCs) is the Python's. */
enum { B_STATE, B_TRACKER, B_GTD, B_PENDING, B_REJECTED, B_CLOSE_REQUESTED, B_CCX, B_PDC_ID,
       B_PEER_PDCID, B_MPR, B_RECEIVER, B_SDI, B_PEER_IP, B_CACK_HELD, B_ROB, B_ACKS,
       B_IN_ACK_RING, B_N };
static const char *SRC_NAMES[B_N] = {"state", "tracker", "gtd", "pending", "rejected",
                                     "close_requested", "ccx", "pdc_id", "peer_pdcid", "mpr",
                                     "receiver", "sdi", "peer_ip", "cack_held", "rob", "acks",
                                     "in_ack_ring"};
enum { BX_CFG, BX_COUNTERS, BX_LOCAL_IP, BX_N };
static const char *ACTX_NAMES[BX_N] = {"cfg", "counters", "local_ip"};
enum { BG_ACK_TYPE, BG_DSCP_CONTROL, BG_N };
static const char *ACFG_NAMES[BG_N] = {"ack_type", "dscp_control"};
static Layout L_SRC, L_ACTX, L_ACFG, L_ACKCC;
static PyObject *ref_build_ack, *ack_cc_type, *ack_defaults, *nframe_defaults, *str_ack_cc,
    *nscc_cc_type, *s_fill_ack_cc, *s_ack_tx, *kw_ack, *py_zero, *py_one;
static int64_t req_close, req_clear;
static int ack_configured;

/* TargetPdc.held_cack(tcack) of an ESTABLISHED PDC: below every PSN still held (waiting for
 * the SES, a stored response, refused) */
static int held_cack(PyObject *src, int64_t *cack) {
    static const int held[3] = {B_GTD, B_PENDING, B_REJECTED};
    for (int i = 0; i < 3; i++) {
        PyObject *c = SLOT(src, L_SRC, held[i]), *it, *p;
        int any = PyObject_IsTrue(c);
        if (any <= 0) {
            if (any < 0)
                return -1;
            continue;
        }
        if ((it = PyObject_GetIter(c)) == NULL)
            return -1;
        while ((p = PyIter_Next(it)) != NULL) {
            int64_t v = as_i64(p);
            Py_DECREF(p);
            if (v == -1 && PyErr_Occurred())
                break;
            if (psn_sdiff(v, *cack) <= 0)
                *cack = (v - 1) & M32;
        }
        Py_DECREF(it);
        if (PyErr_Occurred())
            return -1;
    }
    return 0;
}

static PyObject *ref_ack(PyObject *const *args, Py_ssize_t nargs) {
    return PyObject_Vectorcall(ref_build_ack, args, nargs, NULL);
}

/* build_ack(ctx, src, now, ack_psn, flags, ev, ses, data, probe=None, sack_base=None) */
static PyObject *k_build_ack(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!ack_configured) {
        PyErr_SetString(PyExc_RuntimeError, "target core: ACKs not configured");
        return NULL;
    }
    if (nargs < 8 || nargs > 10 || (nargs >= 9 && args[8] != Py_None) ||
        (nargs == 10 && args[9] != Py_None))
        return ref_ack(args, nargs);
    PyObject *ctx = args[0], *src = args[1], *now = args[2], *ack_psn_o = args[3],
             *ev = args[5], *data = args[7];
    if (!Py_IS_TYPE(ctx, L_ACTX.type) || !Py_IS_TYPE(src, L_SRC.type) || args[6] != Py_None ||
        !PyBytes_CheckExact(data) || PyBytes_GET_SIZE(data) != 0 || !is_int(args[4]) ||
        (ack_psn_o != Py_None && !PyLong_CheckExact(ack_psn_o)) || !tracker_configured)
        return ref_ack(args, nargs);
    for (int i = 0; i < B_N; i++)
        if (SLOT(src, L_SRC, i) == NULL)
            return ref_ack(args, nargs);
    for (int i = 0; i < BX_N; i++)
        if (SLOT(ctx, L_ACTX, i) == NULL)
            return ref_ack(args, nargs);
    PyObject *cfg = SLOT(ctx, L_ACTX, BX_CFG), *tracker = SLOT(src, L_SRC, B_TRACKER);
    PyObject *recv = SLOT(src, L_SRC, B_RECEIVER);
    if (!Py_IS_TYPE(cfg, L_ACFG.type) || SLOT(cfg, L_ACFG, BG_ACK_TYPE) == NULL ||
        SLOT(cfg, L_ACFG, BG_DSCP_CONTROL) == NULL ||
        !PyUnicode_CheckExact(SLOT(cfg, L_ACFG, BG_ACK_TYPE)) ||
        PyUnicode_Compare(SLOT(cfg, L_ACFG, BG_ACK_TYPE), str_ack_cc) != 0 ||
        SLOT(src, L_SRC, B_STATE) != st_established || SLOT(src, L_SRC, B_CCX) != Py_None ||
        SLOT(src, L_SRC, B_SDI) != Py_None || !Py_IS_TYPE(tracker, L_TK.type))
        return ref_ack(args, nargs);
    int64_t flags, ack_psn = 0, k;
    if ((flags = as_i64(args[4])) == -1 && PyErr_Occurred())
        return NULL;
    if (ack_psn_o != Py_None && (ack_psn = as_i64(ack_psn_o)) == -1 && PyErr_Occurred())
        return NULL;
    if (get_i64(tracker, &L_TK, K_KEY, &k) < 0)
        return NULL;
    int64_t tcack = tk_cack((uint64_t)k);
    if (tcack < 0) /* not a live tracker's key */
        return ref_ack(args, nargs);
    uint64_t bm = tk_ack_bitmap((uint64_t)k);
    int64_t cack = tcack;
    if (held_cack(src, &cack) < 0)
        return NULL;
    if (ack_psn_o == Py_None)
        ack_psn = cack;
    int64_t off = psn_sdiff(ack_psn, cack);
    if (off < -32768 || off > 32767)
        off = 0;
    int creq = PyObject_IsTrue(SLOT(src, L_SRC, B_CLOSE_REQUESTED));
    int gtd = creq ? 0 : PyObject_IsTrue(SLOT(src, L_SRC, B_GTD));
    if (creq < 0 || gtd < 0)
        return NULL;
    flags |= creq ? req_close : (gtd ? req_clear : 0);
    int64_t base = (cack + 1) & M32;
    if (cack != tcack)
        bm = tk_sack_bitmap((uint64_t)k | (uint64_t)base);
    {
        PyObject *it = PyObject_GetIter(SLOT(src, L_SRC, B_REJECTED)), *p;
        if (it == NULL)
            return NULL;
        while ((p = PyIter_Next(it)) != NULL) {
            int64_t v = as_i64(p);
            Py_DECREF(p);
            if (v == -1 && PyErr_Occurred())
                break;
            int64_t d = psn_sdiff(v, base);
            if (d >= 0 && d < 64)
                bm &= ~((uint64_t)1 << d);
        }
        Py_DECREF(it);
        if (PyErr_Occurred())
            return NULL;
    }
    PyObject *hdr = new_record(&L_ACKCC, ack_defaults), *frame = NULL;
    if (hdr == NULL ||
        put(hdr, &L_ACKCC, A_TYPE, Py_NewRef(ack_cc_type)) < 0 ||
        put(hdr, &L_ACKCC, A_NEXT_HDR, Py_NewRef(py_zero)) < 0 ||
        put_i64(hdr, &L_ACKCC, A_FLAGS, flags) < 0 ||
        put_i64(hdr, &L_ACKCC, A_ACK_PSN_OFFSET, off) < 0 ||
        put_i64(hdr, &L_ACKCC, A_CACK_PSN, cack) < 0 ||
        put(hdr, &L_ACKCC, A_SPDCID, Py_NewRef(SLOT(src, L_SRC, B_PDC_ID))) < 0 ||
        put(hdr, &L_ACKCC, A_DPDCID, Py_NewRef(SLOT(src, L_SRC, B_PEER_PDCID))) < 0 ||
        put(hdr, &L_ACKCC, A_MPR, Py_NewRef(SLOT(src, L_SRC, B_MPR))) < 0 ||
        put(hdr, &L_ACKCC, A_SACK_PSN_OFFSET, Py_NewRef(py_one)) < 0 ||
        put(hdr, &L_ACKCC, A_SACK_BITMAP, PyLong_FromUnsignedLongLong(bm)) < 0)
        goto fail;
    /* the receiver's congestion state (NsccReceiver.fill_ack_cc, or the call) */
    if (receiver_configured && Py_IS_TYPE(recv, L_RECV.type)) {
        for (int i = 0; i < R_N; i++)
            if (SLOT(recv, L_RECV, i) == NULL) {
                unset(recv, &L_RECV, i);
                goto fail;
            }
        if (put(hdr, &L_ACKCC, A_CC_TYPE, Py_NewRef(nscc_cc_type)) < 0 ||
            put(hdr, &L_ACKCC, A_RCVD_BYTES, Py_NewRef(SLOT(recv, L_RECV, R_RCVD_BYTES))) < 0 ||
            put(hdr, &L_ACKCC, A_OOO_COUNT, Py_NewRef(SLOT(recv, L_RECV, R_OOO_COUNT))) < 0 ||
            put(hdr, &L_ACKCC, A_RCV_CWND_PEND, Py_NewRef(SLOT(recv, L_RECV, R_PENALTY))) < 0 ||
            put(hdr, &L_ACKCC, A_RESTORE_CWND, Py_NewRef(SLOT(recv, L_RECV, R_RESTORE))) < 0 ||
            put(hdr, &L_ACKCC, A_SERVICE_TIME, Py_NewRef(py_zero)) < 0 ||
            put_bool(recv, &L_RECV, R_RESTORE, 0) < 0)
            goto fail;
    } else {
        PyObject *b[3] = {recv, now, hdr};
        if (call_drop(s_fill_ack_cc, b, 3, kw_ack) < 0)
            goto fail;
    }
    if (put_bool(src, &L_SRC, B_CACK_HELD, cack != tcack) < 0 ||
        count(SLOT(ctx, L_ACTX, BX_COUNTERS), s_ack_tx) < 0)
        goto fail;
    if ((frame = new_record(&L_FRAME, nframe_defaults)) == NULL)
        goto fail;
    put(frame, &L_FRAME, F_PDS, hdr); /* the frame takes hdr */
    put(frame, &L_FRAME, F_PAYLOAD, Py_NewRef(data));
    put(frame, &L_FRAME, F_SRC_IP, Py_NewRef(SLOT(ctx, L_ACTX, BX_LOCAL_IP)));
    put(frame, &L_FRAME, F_DST_IP, Py_NewRef(SLOT(src, L_SRC, B_PEER_IP)));
    put(frame, &L_FRAME, F_EV, Py_NewRef(ev));
    put(frame, &L_FRAME, F_DSCP, Py_NewRef(SLOT(cfg, L_ACFG, BG_DSCP_CONTROL)));
    return frame;
fail:
    Py_XDECREF(hdr);
    Py_XDECREF(frame);
    return NULL;
}

/* ------------------------------------------------------------------ the control poll
 * AckScheduler.next_ack without explicit ACKs queued (the owed ACKs of AR packets, then the
 * coalesced one; explicit ones are the Python's) and PdsEndpoint.poll_transmit (the
 * end point's control and data rings), calling the C build_ack and next_ack directly for
 * an exact TargetPdc; every other object is called as Python. */
enum { SX_EXPLICIT, SX_N };
static const char *SCHX_NAMES[SX_N] = {"explicit"};
static Layout L_SCHX;
static PyObject *ref_next_ack, *ref_poll_transmit, *pds_endpoint_class, *st_t_freed,
    *empty_bytes;
static PyObject *s_popleft, *s_not_done, *s_next_ack, *s_freed, *s_in_ack_ring, *s_acks, *s_finalize_seen, *s_poll_data,
    *s_has_data_work, *s_in_ring, *s_explicit, *s_co, *s_now, *s_owed;
static int transmit_configured;
static int finalize_seen(PyObject *ep, PyObject *now, PyObject *seen);

/* psn in pdc.pending / gtd / rejected / rob (TargetPdc.not_done): 1, 0, -1 */
static int not_done(PyObject *src, PyObject *psn) {
    if (!Py_IS_TYPE(src, L_SRC.type)) {
        PyObject *a[2] = {src, psn};
        PyObject *r = mc_call(s_not_done, a, 2, NULL);
        int t = r ? PyObject_IsTrue(r) : -1;
        Py_XDECREF(r);
        return t;
    }
    static const int held[3] = {B_PENDING, B_GTD, B_REJECTED};
    for (int i = 0; i < 3; i++) {
        PyObject *c = SLOT(src, L_SRC, held[i]);
        if (c == NULL)
            return unset(src, &L_SRC, held[i]);
        int r = PySequence_Contains(c, psn);
        if (r)
            return r;
    }
    PyObject *rob = SLOT(src, L_SRC, B_ROB);
    if (rob == NULL)
        return unset(src, &L_SRC, B_ROB);
    return rob == Py_None ? 0 : PySequence_Contains(rob, psn);
}

/* whether next_ack below takes this scheduler (else its Python method) */
static int sched_plain(PyObject *sched) {
    if (!Py_IS_TYPE(sched, L_SCHED.type) || !Py_IS_TYPE(sched, L_SCHX.type))
        return 0;
    PyObject *co = SLOT(sched, L_SCHED, S_CO), *ex = SLOT(sched, L_SCHX, SX_EXPLICIT);
    if (co == NULL || ex == NULL || SLOT(sched, L_SCHED, S_CTX) == NULL ||
        !Py_IS_TYPE(co, L_CO.type))
        return 0;
    for (int i = 0; i < C_N; i++)
        if (SLOT(co, L_CO, i) == NULL)
            return 0;
    return PyObject_Length(ex) == 0;
}

/* AckScheduler.next_ack(sched, now, src) for a sched_plain scheduler */
static PyObject *next_ack_impl(PyObject *sched, PyObject *now, PyObject *src) {
    PyObject *co = SLOT(sched, L_SCHED, S_CO), *ctx = SLOT(sched, L_SCHED, S_CTX);
    PyObject *owed = SLOT(co, L_CO, C_OWED);
    for (;;) {
        int more = PyObject_IsTrue(owed);
        if (more <= 0) {
            if (more < 0)
                return NULL;
            break;
        }
        PyObject *item = mc_call0(owed, s_popleft);
        if (item == NULL)
            return NULL;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            Py_DECREF(item);
            PyErr_SetString(PyExc_TypeError, "AckCoalescer.owed: (psn, ev, flags) expected");
            return NULL;
        }
        PyObject *psn = PyTuple_GET_ITEM(item, 0);
        int nd = not_done(src, psn);
        if (nd == 0) {
            PyObject *a[8] = {ctx, src, now, psn, PyTuple_GET_ITEM(item, 2),
                              PyTuple_GET_ITEM(item, 1), Py_None, empty_bytes};
            PyObject *r = k_build_ack(NULL, a, 8);
            Py_DECREF(item);
            return r;
        }
        Py_DECREF(item);
        if (nd < 0)
            return NULL;
        /* not done yet or answered with its response: that ACK names it */
    }
    int cnow = truth(co, &L_CO, C_NOW);
    if (cnow < 0)
        return NULL;
    PyObject *psn = SLOT(co, L_CO, C_PSN);
    if (cnow && psn != Py_None) {
        Py_INCREF(psn);
        int nd = not_done(src, psn);
        PyObject *frame = NULL;
        if (nd >= 0) {
            PyObject *a[8] = {ctx, src, now, nd ? Py_None : psn, SLOT(co, L_CO, C_FLAGS),
                              SLOT(co, L_CO, C_EV), Py_None, empty_bytes};
            frame = k_build_ack(NULL, a, 8);
        }
        Py_DECREF(psn);
        if (frame == NULL)
            return NULL;
        /* AckCoalescer.clear */
        if (put(co, &L_CO, C_PSN, Py_NewRef(Py_None)) < 0 ||
            put(co, &L_CO, C_FLAGS, Py_NewRef(py_zero)) < 0 || put_bool(co, &L_CO, C_AR, 0) < 0 ||
            put(co, &L_CO, C_NBYTES, Py_NewRef(py_zero)) < 0 ||
            put_bool(co, &L_CO, C_NOW, 0) < 0 || put(co, &L_CO, C_DUE, Py_NewRef(Py_None)) < 0) {
            Py_DECREF(frame);
            return NULL;
        }
        return frame;
    }
    if (put_bool(co, &L_CO, C_NOW, 0) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* next_ack(sched, now, src) */
static PyObject *k_next_ack(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!transmit_configured) {
        PyErr_SetString(PyExc_RuntimeError, "target core: the control poll not configured");
        return NULL;
    }
    if (nargs != 3 || !sched_plain(args[0])) {
        if (PyErr_Occurred())
            return NULL;
        return PyObject_Vectorcall(ref_next_ack, args, nargs, NULL);
    }
    return next_ack_impl(args[0], args[1], args[2]);
}

static int set_false(PyObject *o, PyObject *name) { return PyObject_SetAttr(o, name, Py_False); }

/* an ACK is ready for the next control poll (AckScheduler.pending): 1, 0, -1 */
static int acks_pending(PyObject *pdc) {
    PyObject *acks = PyObject_GetAttr(pdc, s_acks), *x;
    if (acks == NULL)
        return -1;
    int r = -1;
    if ((x = PyObject_GetAttr(acks, s_explicit)) != NULL) {
        r = PyObject_IsTrue(x);
        Py_DECREF(x);
    }
    if (r == 0) {
        PyObject *co = PyObject_GetAttr(acks, s_co);
        r = -1;
        if (co != NULL && (x = PyObject_GetAttr(co, s_now)) != NULL) {
            r = PyObject_IsTrue(x);
            Py_DECREF(x);
            if (r == 0) {
                r = -1;
                if ((x = PyObject_GetAttr(co, s_owed)) != NULL) {
                    r = PyObject_IsTrue(x);
                    Py_DECREF(x);
                }
            }
        }
        Py_XDECREF(co);
    }
    Py_DECREF(acks);
    return r;
}

/* the next ACK of a PDC in the ACK ring (None if freed: `None if pdc.freed else
 * pdc.next_ack(now)`) */
static PyObject *ring_ack(PyObject *pdc, PyObject *now) {
    if (Py_IS_TYPE(pdc, L_SRC.type)) {
        PyObject *st = SLOT(pdc, L_SRC, B_STATE), *acks = SLOT(pdc, L_SRC, B_ACKS);
        if (st == NULL || acks == NULL)
            return PyErr_Format(PyExc_AttributeError, "TargetPdc: state or acks unset");
        if (st == st_t_freed)
            Py_RETURN_NONE;
        if (sched_plain(acks)) /* TargetPdc.next_ack: self.acks.next_ack(now, self) */
            return next_ack_impl(acks, now, pdc);
        if (PyErr_Occurred())
            return NULL;
        PyObject *a[3] = {acks, now, pdc};
        return mc_call(s_next_ack, a, 3, NULL);
    }
    PyObject *f = PyObject_GetAttr(pdc, s_freed);
    int freed = f ? PyObject_IsTrue(f) : -1;
    Py_XDECREF(f);
    if (freed)
        return freed < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *a[2] = {pdc, now};
    return mc_call(s_next_ack, a, 2, NULL);
}

/* poll_transmit(ep, now, control) */
static PyObject *k_poll_transmit(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!transmit_configured) {
        PyErr_SetString(PyExc_RuntimeError, "target core: the control poll not configured");
        return NULL;
    }
    if (nargs != 3 || (PyObject *)Py_TYPE(args[0]) != pds_endpoint_class)
        return PyObject_Vectorcall(ref_poll_transmit, args, nargs, NULL);
    PyObject *ep = args[0], *now = args[1], *q = NULL, *r = NULL;
    int control = PyObject_IsTrue(args[2]);
    if (control < 0 || (q = pep(ep, PE_SEEN)) == NULL)
        return NULL;
    int seen = PyObject_IsTrue(q);
    if (seen && (seen < 0 || finalize_seen(ep, now, q) < 0)) {
        Py_DECREF(q);
        return NULL;
    }
    Py_CLEAR(q);
    if (control) {
        if ((q = pep(ep, PE_CTRL)) == NULL)
            return NULL;
        int any = PyObject_IsTrue(q);
        if (any) {
            r = any < 0 ? NULL : mc_call0(q, s_popleft);
            Py_DECREF(q);
            return r;
        }
        Py_DECREF(q);
        if ((q = pep(ep, PE_ACK_RING)) == NULL)
            return NULL;
        for (;;) {
            int more = PyObject_IsTrue(q);
            if (more <= 0) {
                r = more < 0 ? NULL : Py_NewRef(Py_None);
                break;
            }
            PyObject *pdc = mc_call0(q, s_popleft);
            if (pdc == NULL)
                break;
            PyObject *frame = ring_ack(pdc, now);
            if (frame == NULL) {
                Py_DECREF(pdc);
                break;
            }
            if (frame == Py_None) {
                Py_DECREF(frame);
                int rc = set_false(pdc, s_in_ack_ring);
                Py_DECREF(pdc);
                if (rc < 0)
                    break;
                continue;
            }
            int pend = acks_pending(pdc), rc = -1;
            if (pend > 0) {
                PyObject *x = mc_call1(q, s_append, pdc);
                rc = x ? 0 : -1;
                Py_XDECREF(x);
            } else if (pend == 0) {
                rc = set_false(pdc, s_in_ack_ring);
            }
            Py_DECREF(pdc);
            if (rc < 0)
                Py_CLEAR(frame);
            r = frame;
            break;
        }
        Py_DECREF(q);
        return r;
    }
    if ((q = pep(ep, PE_RING)) == NULL)
        return NULL;
    Py_ssize_t n = PyObject_Length(q);
    r = n < 0 ? NULL : Py_NewRef(Py_None);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *sender = mc_call0(q, s_popleft), *frame = NULL;
        if (sender == NULL) {
            Py_CLEAR(r);
            break;
        }
        PyObject *a[2] = {sender, now};
        if ((frame = mc_call(s_poll_data, a, 2, NULL)) == NULL) {
            Py_DECREF(sender);
            Py_CLEAR(r);
            break;
        }
        if (frame != Py_None) {
            PyObject *w = mc_call0(sender, s_has_data_work), *x = NULL;
            int work = w ? PyObject_IsTrue(w) : -1, rc = -1;
            Py_XDECREF(w);
            if (work > 0) {
                x = mc_call1(q, s_append, sender);
                rc = x ? 0 : -1;
                Py_XDECREF(x);
            } else if (work == 0) {
                rc = set_false(sender, s_in_ring);
            }
            Py_DECREF(sender);
            Py_DECREF(r);
            r = rc < 0 ? (Py_DECREF(frame), NULL) : frame;
            break;
        }
        Py_DECREF(frame);
        int rc = set_false(sender, s_in_ring);
        Py_DECREF(sender);
        if (rc < 0) {
            Py_CLEAR(r);
            break;
        }
    }
    Py_DECREF(q);
    return r;
}

/* ------------------------------------------------------------------ answers
 * PdsEndpoint.respond with no semantic response (the SES's usual answer: the PDS sends the
 * default one) for a target PDC's token, and _finalize_seen (the poll that settles every
 * delivered request nobody answered). */
static PyObject *ref_respond, *s_deferred, *s_pdc, *s_finalize,
    *s_released_hold;

/* TargetPdc.on_respond(now, entry, None, data) of an exact TargetPdc: 1 (True), 0, -1 */
static int respond_none(PyObject *pdc, PyObject *entry) {
    PyObject *pending = SLOT(pdc, L_PDC, T_PENDING), *psn = SLOT(entry, L_PENDING, P_PSN);
    if (pending == NULL || psn == NULL || !PyDict_CheckExact(pending)) {
        PyErr_SetString(PyExc_TypeError, "TargetPdc.pending: a dict is expected");
        return -1;
    }
    PyObject *was = PyDict_GetItemWithError(pending, psn);
    if (was == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (PyDict_DelItem(pending, psn) < 0)
        return -1;
    PyObject *held = SLOT(pdc, L_SRC, B_CACK_HELD);
    int h = held ? PyObject_IsTrue(held) : -1;
    if (h > 0) { /* _released_hold: the CACK held below the packet moves */
        PyObject *a[1] = {pdc};
        return call_drop(s_released_hold, a, 1, NULL) < 0 ? -1 : 1;
    }
    return h < 0 ? -1 : 1;
}

/* respond(ep, now, token, response, data=b"") */
static PyObject *k_respond(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!transmit_configured) {
        PyErr_SetString(PyExc_RuntimeError, "target core: answers not configured");
        return NULL;
    }
    if ((nargs != 4 && nargs != 5) || (PyObject *)Py_TYPE(args[0]) != pds_endpoint_class ||
        args[3] != Py_None)
        return PyObject_Vectorcall(ref_respond, args, nargs, NULL);
    PyObject *ctx = pep(args[0], PE_CTX);
    if (ctx == NULL)
        return NULL;
    PyObject *tokens = Py_IS_TYPE(ctx, L_CTX.type) ? SLOT(ctx, L_CTX, X_TOKENS) : NULL;
    PyObject *entry = tokens && PyDict_CheckExact(tokens)
                          ? PyDict_GetItemWithError(tokens, args[2]) : NULL;
    if (entry == NULL || !Py_IS_TYPE(entry, L_PENDING.type) ||
        !Py_IS_TYPE(SLOT(entry, L_PENDING, P_PDC), L_PDC.type)) {
        Py_DECREF(ctx);
        return PyErr_Occurred() ? NULL : PyObject_Vectorcall(ref_respond, args, nargs, NULL);
    }
    Py_INCREF(entry); /* ctx.take_token(token) */
    int rc = PyDict_DelItem(tokens, args[2]);
    Py_DECREF(ctx);
    if (rc == 0)
        rc = respond_none(SLOT(entry, L_PENDING, P_PDC), entry);
    Py_DECREF(entry);
    if (rc < 0)
        return NULL;
    return Py_NewRef(rc ? Py_True : Py_False);
}

/* PdsEndpoint._finalize_seen(ep, now) for an exact PdsEndpoint: 0, -1 */
static int finalize_seen(PyObject *ep, PyObject *now, PyObject *seen) {
    PyObject *tokens = pep(ep, PE_TOKENS);
    if (tokens == NULL)
        return -1;
    int rc = 0;
    if (!PyList_CheckExact(seen) || !PyDict_CheckExact(tokens)) {
        PyObject *a[2] = {ep, now};
        rc = call_drop(s_finalize_seen, a, 2, NULL);
        Py_DECREF(tokens);
        return rc;
    }
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(seen); i++) {
        PyObject *token = PyList_GET_ITEM(seen, i);
        Py_INCREF(token);
        PyObject *entry = PyDict_GetItemWithError(tokens, token);
        if (entry == NULL) {
            rc = PyErr_Occurred() ? -1 : 0;
            Py_DECREF(token);
            continue;
        }
        Py_INCREF(entry);
        PyObject *d = PyObject_GetAttr(entry, s_deferred);
        int deferred = d ? PyObject_IsTrue(d) : -1;
        Py_XDECREF(d);
        if (deferred == 0) { /* NO_RESPONSE: answered later */
            rc = PyDict_DelItem(tokens, token);
            PyObject *pdc = rc == 0 ? PyObject_GetAttr(entry, s_pdc) : NULL;
            if (pdc != NULL) {
                PyObject *a[3] = {pdc, now, entry};
                rc = call_drop(s_finalize, a, 3, NULL);
                Py_DECREF(pdc);
            } else {
                rc = -1;
            }
        } else if (deferred < 0) {
            rc = -1;
        }
        Py_DECREF(entry);
        Py_DECREF(token);
    }
    Py_DECREF(tokens);
    if (rc == 0)
        rc = PyList_SetSlice(seen, 0, PyList_GET_SIZE(seen), NULL);
    return rc;
}

/* configure_transmit((next_ack, poll_transmit, respond), AckScheduler, PdsEndpoint,
 *                    freed) */
static PyObject *k_configure_transmit(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 3 ||
        !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "configure_transmit((next_ack, poll_transmit, "
                                         "respond), AckScheduler, PdsEndpoint, freed)");
        return NULL;
    }
    if (!configured || !ack_configured) {
        PyErr_SetString(PyExc_RuntimeError, "configure_transmit: configure and configure_ack "
                                            "first");
        return NULL;
    }
    transmit_configured = 0;
    if (layout(&L_SCHX, args[1], SCHX_NAMES, SX_N) < 0)
        return NULL;
    if ((PyObject *)L_SCHX.type != (PyObject *)L_SCHED.type) {
        PyErr_SetString(PyExc_TypeError, "configure_transmit: not configure's AckScheduler");
        return NULL;
    }
    Py_XSETREF(ref_next_ack, Py_NewRef(PyTuple_GET_ITEM(args[0], 0)));
    Py_XSETREF(ref_poll_transmit, Py_NewRef(PyTuple_GET_ITEM(args[0], 1)));
    Py_XSETREF(ref_respond, Py_NewRef(PyTuple_GET_ITEM(args[0], 2)));
    Py_XSETREF(pds_endpoint_class, Py_NewRef(args[2]));
    Py_XSETREF(st_t_freed, Py_NewRef(args[3]));
    transmit_configured = 1;
    Py_RETURN_NONE;
}

/* configure_ack(reference, TargetPdc, PdcContext, PdsConfig, PdsAckCc, Frame, constants) */
static PyObject *k_configure_ack(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyCallable_Check(args[0]) || !PyDict_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError, "configure_ack(reference, TargetPdc, PdcContext, "
                                         "PdsConfig, PdsAckCc, Frame, constants)");
        return NULL;
    }
    ack_configured = 0;
    static const char *names[] = {"ack_cc", "req_close", "req_clear", "ack_defaults",
                                  "frame_defaults", "nscc_cc_type"};
    PyObject *v[6];
    for (int i = 0; i < 6; i++)
        if ((v[i] = PyDict_GetItemString(args[6], names[i])) == NULL) {
            PyErr_Format(PyExc_ValueError, "configure_ack: no constant '%s'", names[i]);
            return NULL;
        }
    int64_t rc = as_i64(v[1]), rl = as_i64(v[2]);
    if (PyErr_Occurred())
        return NULL;
    if (layout(&L_SRC, args[1], SRC_NAMES, B_N) < 0 ||
        layout(&L_ACTX, args[2], ACTX_NAMES, BX_N) < 0 ||
        layout(&L_ACFG, args[3], ACFG_NAMES, BG_N) < 0 ||
        layout(&L_ACKCC, args[4], ACK_CC_FIELDS, A_N) < 0)
        return NULL;
    if ((PyObject *)L_FRAME.type != args[5]) {
        PyErr_SetString(PyExc_TypeError, "configure_ack: not configure's Frame");
        return NULL;
    }
    if (!PyTuple_Check(v[3]) || PyTuple_GET_SIZE(v[3]) != A_N || !PyTuple_Check(v[4]) ||
        PyTuple_GET_SIZE(v[4]) != F_N) {
        PyErr_SetString(PyExc_ValueError, "configure_ack: defaults of every field expected");
        return NULL;
    }
    Py_XSETREF(ref_build_ack, Py_NewRef(args[0]));
    Py_XSETREF(ack_cc_type, Py_NewRef(v[0]));
    Py_XSETREF(ack_defaults, Py_NewRef(v[3]));
    Py_XSETREF(nframe_defaults, Py_NewRef(v[4]));
    Py_XSETREF(nscc_cc_type, Py_NewRef(v[5]));
    req_close = rc;
    req_clear = rl;
    ack_configured = 1;
    Py_RETURN_NONE;
}

/* configure_receiver(NsccReceiver) */
static PyObject *k_configure_receiver(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "configure_receiver(NsccReceiver)");
        return NULL;
    }
    receiver_configured = 0;
    if (layout(&L_RECV, args[0], RECV_NAMES, R_N) < 0)
        return NULL;
    receiver_configured = 1;
    Py_RETURN_NONE;
}

KW_ENTRY(k_rx_request_kw, k_rx_request, ref_rx_request)
KW_ENTRY(k_build_ack_kw, k_build_ack, ref_build_ack)
KW_ENTRY(k_next_ack_kw, k_next_ack, ref_next_ack)
KW_ENTRY(k_poll_transmit_kw, k_poll_transmit, ref_poll_transmit)
KW_ENTRY(k_respond_kw, k_respond, ref_respond)
KW_ENTRY(k_rx_dispatch_kw, k_rx_dispatch, ref_dispatch)

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))k_configure, METH_FASTCALL,
     "configure(TargetPdc, PdcContext, MemoryAccount, PdsConfig, Frame, PdsRequest, "
     "AckScheduler, AckCoalescer, Pending, RequestDelivered, constants, reference)"},
    {"configure_tracker", (PyCFunction)(void (*)(void))k_configure_tracker, METH_FASTCALL,
     "configure_tracker(PsnTracker, functions, results, saturated)"},
    {"configure_ack", (PyCFunction)(void (*)(void))k_configure_ack, METH_FASTCALL,
     "configure_ack(reference, TargetPdc, PdcContext, PdsConfig, PdsAckCc, Frame, constants)"},
    {"build_ack", (PyCFunction)(void (*)(void))k_build_ack_kw, METH_FASTCALL | METH_KEYWORDS,
     "build_ack(ctx, src, now, ack_psn, flags, ev, ses, data, probe=None, sack_base=None)"},
    {"configure_transmit", (PyCFunction)(void (*)(void))k_configure_transmit, METH_FASTCALL,
     "configure_transmit((next_ack, poll_transmit, respond), AckScheduler, PdsEndpoint, "
     "freed)"},
    {"respond", (PyCFunction)(void (*)(void))k_respond_kw, METH_FASTCALL | METH_KEYWORDS,
     "respond(ep, now, token, response, data=b''): PdsEndpoint.respond"},
    {"next_ack", (PyCFunction)(void (*)(void))k_next_ack_kw, METH_FASTCALL | METH_KEYWORDS,
     "next_ack(sched, now, src): AckScheduler.next_ack"},
    {"poll_transmit", (PyCFunction)(void (*)(void))k_poll_transmit_kw,
     METH_FASTCALL | METH_KEYWORDS, "poll_transmit(ep, now, control): PdsEndpoint.poll_transmit"},
    {"configure_receiver", (PyCFunction)(void (*)(void))k_configure_receiver, METH_FASTCALL,
     "configure_receiver(NsccReceiver)"},
    {"configure_dispatch", (PyCFunction)(void (*)(void))k_configure_dispatch, METH_FASTCALL,
     "configure_dispatch(reference, constants): for rx_dispatch"},
    {"rx_dispatch", (PyCFunction)(void (*)(void))k_rx_dispatch_kw, METH_FASTCALL | METH_KEYWORDS,
     "rx_dispatch(ep, now, frame, pds): PdsEndpoint._rx_request"},
    {"rx_request", (PyCFunction)(void (*)(void))k_rx_request_kw, METH_FASTCALL | METH_KEYWORDS,
     "rx_request(pdc, now, frame, pds): TargetPdc.rx_request"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_target_core",
                                    "A target PDC's requests and ACKs in C", -1, methods};

PyMODINIT_FUNC PyInit__target_core(void) {
    if (intern_str(&s_apply_clear, "apply_clear") || intern_str(&s_on_packet, "on_packet") || intern_str(&s_max_psn, "max_psn") ||
        intern_str(&s_ooo_count, "ooo_count") ||
        intern_str(&s_on_data, "on_data") || intern_str(&s_credit_changed, "credit_changed") ||
        intern_str(&s_rx_not_new, "_rx_not_new") || intern_str(&s_flags, "flags") ||
        intern_str(&s_append, "append") || intern_str(&s_rx_packets, "rx_packets") ||
        intern_str(&s_rx_bytes, "rx_bytes") ||
        intern_str(&s_ack_ar_coalesced, "ack_ar_coalesced") || intern_str(&s_tgt_by_key, "tgt_by_key") ||
        intern_str(&s_by_id, "by_id"))
        return NULL;
    if (intern_str(&s_finalize, "finalize") || intern_str(&s_released_hold, "_released_hold") || intern_str(&s_deferred, "deferred") ||
        intern_str(&s_pdc, "pdc"))
        return NULL;
    if (intern_str(&s_popleft, "popleft") || intern_str(&s_not_done, "not_done") ||
        intern_str(&s_next_ack, "next_ack") || intern_str(&s_freed, "freed") ||
        intern_str(&s_in_ack_ring, "in_ack_ring") || intern_str(&s_acks, "acks") ||
        intern_str(&s_finalize_seen, "_finalize_seen") || intern_str(&s_poll_data, "poll_data") ||
        intern_str(&s_has_data_work, "has_data_work") || intern_str(&s_in_ring, "in_ring") ||
        intern_str(&s_explicit, "explicit") || intern_str(&s_co, "co") ||
        intern_str(&s_now, "now") || intern_str(&s_owed, "owed") ||
        (empty_bytes = PyBytes_FromStringAndSize("", 0)) == NULL)
        return NULL;
    if (intern_str(&str_ack_cc, "ack_cc") || intern_str(&s_fill_ack_cc, "fill_ack_cc") ||
        intern_str(&s_ack_tx, "ack_tx") || (kw_ack = names_tuple(1, "ack")) == NULL ||
        (py_zero = PyLong_FromLong(0)) == NULL || (py_one = PyLong_FromLong(1)) == NULL)
        return NULL;
    kw_on_data = names_tuple(5, "nbytes", "ecn_ce", "credit_target", "in_order", "ooo_count");
    kw_ccx_on_data = names_tuple(2, "nbytes", "ecn_ce");
    if (kw_on_data == NULL || kw_ccx_on_data == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    static const char *const names[] = {"rx_request", "rx_dispatch", "next_ack", "poll_transmit",
                                        "respond"};
    if (m == NULL || add_instance_methods(m, names, 5) < 0) {
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
