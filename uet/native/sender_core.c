/* An initiator PDC's next new data packet in C (uet.pds.initiator.InitiatorPdc.poll_data
 * and _send for a first transmission), over the same Python objects.
 *
 * The common case only: an ESTABLISHED (or SYN: its first packets, with the SYN flag, no
 * DPDCID and their offset from the start PSN, at most max_syn_packets) cleartext PDC
 * without RCCC credit and with nothing waiting for retransmission. It checks the windows, asks the congestion control (Python:
 * can_send, choose_ev, window_full, on_send, in that order, as the Python does), takes the
 * next packet of the queue (SendMessage.head / pop: the SES makes it), gives it its PSN,
 * charges the transmit memory, tells the loss recovery (rec.on_sent) and builds the PDS
 * request header and the Frame by filling their slots (the dataclasses' defaults for every
 * field not set; neither has a __post_init__). Every other case (a retransmission,
 * a secured PDC, credit, the peer window, objects of other types) is the Python reference's,
 * called before anything has changed. tests/pds/test_c_cores.py runs the same traffic
 * through both and compares every frame and counter.
 */
#include "slots.h"
#include "records.h"

enum { I_STATE, I_CTX, I_PDC_ID, I_PEER_IP, I_SDI, I_CFG, I_DPDCID, I_NEXT_PSN, I_PEER_RANGE,
       I_QUEUE, I_REC, I_CC, I_CREDIT, I_FIXED_EV, I_PTYPE, I_LAST_PROGRESS, I_BLOCKED_AT,
       I_START_PSN, I_N };
static const char *PDC_NAMES[I_N] = {
    "state", "ctx", "pdc_id", "peer_ip", "sdi", "cfg", "dpdcid", "next_psn", "peer_range",
    "queue", "rec", "cc", "credit", "fixed_ev", "ptype", "last_progress", "blocked_at",
    "start_psn"};

enum { R_RETX, R_OUTSTANDING, R_MAX_CACK, R_INFLIGHT_BYTES, R_PEER_RCVD, R_KNOWN_ARRIVED,
       R_N };
static const char *REC_NAMES[R_N] = {"retx", "outstanding", "max_cack", "inflight_bytes",
                                     "peer_rcvd", "known_arrived"};

/* SentPacket, every slot (constructed here) */
enum { P_PSN, P_REQ, P_NBYTES, P_COST, P_SEND_TIME, P_PREV_SEND, P_RETRIES, P_ARRIVED, P_SEQ,
       P_EV, P_RETX_QUEUED, P_RELEASED, P_EVER_RETX, P_SUSPECT, P_IS_CLOSE, P_INFLIGHT, P_N };
static const char *PKT_NAMES[P_N] = {
    "psn", "req", "nbytes", "cost", "send_time", "prev_send", "retries", "arrived", "seq",
    "ev", "retx_queued", "released", "ever_retx", "suspect", "is_close", "inflight"};

enum { X_COUNTERS, X_TX_MEMORY, X_LOCAL_IP, X_N };
static const char *CTX_NAMES[X_N] = {"counters", "tx_memory", "local_ip"};

enum { MEM_USED, MEM_LIMIT, MEM_N };
static const char *MEM_NAMES[MEM_N] = {"used", "limit"};

enum { G_MAX_INFLIGHT, G_PROBE_AFTER, G_AR_EVERY, G_AR_BLOCKED, G_DSCP_DATA, G_ECN_CAPABLE,
       G_MAX_SYN, G_N };
static const char *CFG_NAMES[G_N] = {"max_inflight_packets", "probe_after_ps",
                                     "ar_every_packet", "ar_when_blocked", "dscp_data",
                                     "ecn_capable", "max_syn_packets"};

/* SendMessage, and the SES's OutMessage and Segmenter behind its next_part */
enum { M_COUNT, M_DST_IP, M_MODE, M_JOB_ID, M_TC, M_EXT, M_NEXT, M_HEAD, M_SDI, M_NBYTES,
       M_N };
static const char *MSG_NAMES[M_N] = {"count", "dst_ip", "mode", "job_id", "tc", "ext", "_next",
                                     "_head", "sdi", "nbytes"};
enum { O_TAKEN, O_COUNT, O_PARTS, O_OP_ID, O_ATTEMPT, O_N };
static const char *OUT_NAMES[O_N] = {"taken", "count", "parts", "op_id", "attempt"};
enum { Z_CARRY, Z_TOTAL, Z_MTU, Z_PAYLOAD, Z_COUNT, Z_LAST_OFF, Z_FIELDS, Z_COMMON,
       Z_HEADER_DATA, Z_FIRST_FLAGS, Z_MID_FLAGS, Z_RLEN, Z_ZERO_CHUNK, Z_N };
static const char *SEG_NAMES[Z_N] = {"carry", "total", "mtu", "payload", "count", "last_off",
                                     "fields", "common", "header_data", "first_flags",
                                     "mid_flags", "rlen", "zero_chunk"};
/* SesStandard, PacketRef and SendRequest: every field, in order */
enum { SS_N = 15 };
static const char *SES_NAMES[SS_N] = {
    "opcode", "version", "flags", "message_id", "ri_generation", "job_id", "pid_on_fep",
    "resource_index", "buffer_offset", "initiator", "memory_key", "header_data",
    "payload_length", "message_offset", "request_length"};
enum { PR_N = 3 };
static const char *REF_NAMES[PR_N] = {"op_id", "attempt", "index"};
enum { Q_DST_IP, Q_MODE, Q_JOB_ID, Q_TC, Q_SES, Q_EXT, Q_PAYLOAD, Q_MSG_REF, Q_EOM, Q_SDI,
       Q_N };
static const char *REQ_NAMES[Q_N] = {"dst_ip", "mode", "job_id", "tc", "ses", "ext",
                                     "payload", "msg_ref", "eom", "sdi"};

/* the PDS request header and the Frame: every field, in the dataclass's order */
enum { H_TYPE, H_NEXT_HDR, H_FLAGS, H_CPO, H_PSN, H_SPDCID, H_DPDCID, H_USE_RSV, H_PSN_OFFSET,
       H_CCC_ID, H_CREDIT_TARGET, H_N };
static const char *HDR_NAMES[H_N] = {"type", "next_hdr", "flags", "clear_psn_offset", "psn",
                                     "spdcid", "dpdcid", "use_rsv_pdc", "psn_offset",
                                     "ccc_id", "credit_target"};

static Layout L_PDC, L_REC, L_PKT, L_CTX, L_MEM, L_CFG, L_MSG, L_REQ, L_HDR, L_FRAME, L_OUT,
    L_SEG, L_SES, L_REF;
static PyObject *next_part_fn; /* OutMessage.next_part, the function (NULL: no SES segments
                                  * configured, see k_configure_segments) */
static int64_t ses_eom;
static PyObject *ref_poll_data, *st_established, *st_syn, *next_hdr, *hdr_defaults,
    *frame_defaults, *mac_src, *mac_dst;
static int64_t tx_overhead, ar_flag, rud_cc_req, syn_req_flag;
static int configured;
static PyObject *s_can_send, *s_choose_ev, *s_window_full, *s_on_send, *s_on_sent, *s_head,
    *s_pop, *s_popleft, *s_wait, *s_arm, *s_blocked_by_cc, *s_blocked_window,
    *s_blocked_memory, *s_blocked_syn, *s_tx_packets, *s_tx_bytes, *kw_can_send, *kw_window_full,
    *kw_on_send;

/* shared ints (pyint.h, memo_int): the sizes every packet carries, and a packet's index
 * and offset in its message (the same for every message of a size) */
#define SIZE_BITS 4
#define PLACE_BITS 11
static PyObject *size_ints[1 << SIZE_BITS], *index_ints[1 << PLACE_BITS],
    *offset_ints[1 << PLACE_BITS];

/* a new SentPacket(psn, req, nbytes, cost), as its __init__ makes it */
static PyObject *new_packet(PyObject *psn, PyObject *req, PyObject *nbytes, int64_t cost) {
    PyObject *o = L_PKT.type->tp_alloc(L_PKT.type, 0);
    PyObject *c = memo_int(size_ints, SIZE_BITS, cost);
    if (o == NULL || c == NULL) {
        Py_XDECREF(o);
        Py_XDECREF(c);
        return NULL;
    }
    PyObject *zero = PyLong_FromLong(0);
    PyObject *v[P_N] = {psn, req, nbytes, c, zero, zero, zero, Py_False, zero, zero,
                        Py_False, Py_False, Py_False, Py_False,
                        req == Py_None ? Py_True : Py_False, Py_False};
    for (int i = 0; i < P_N; i++)
        *SLOTP(o, L_PKT, i) = Py_NewRef(v[i]);
    Py_DECREF(c);
    Py_DECREF(zero);
    return o;
}

/* LossRecovery.cc_inflight */
static int cc_inflight(PyObject *rec, int64_t *out) {
    int64_t infl, peer, known;
    if (get_i64(rec, &L_REC, R_INFLIGHT_BYTES, &infl) < 0 ||
        get_i64(rec, &L_REC, R_PEER_RCVD, &peer) < 0 ||
        get_i64(rec, &L_REC, R_KNOWN_ARRIVED, &known) < 0)
        return -1;
    int64_t unseen = peer - known;
    *out = unseen <= 0 ? infl : (infl - unseen > 0 ? infl - unseen : 0);
    return 0;
}

/* the first PSN of the outstanding dict, or dflt */
static int first_or(PyObject *out, int64_t dflt, int64_t *psn) {
    PyObject *k, *v;
    if (!dict_first(out, &k, &v)) {
        *psn = dflt;
        return 0;
    }
    long long x = as_i64(k);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *psn = x;
    return 0;
}

static PyObject *ref(PyObject *const *args, Py_ssize_t nargs) {
    return PyObject_Vectorcall(ref_poll_data, args, nargs, NULL);
}

/* SendMessage.head (new reference): the next packet, made once; for a message of the
 * SES (OutMessage.next_part over a Segmenter of two packets or more) the packet is made
 * here as Segmenter.part makes it, else head() is called */
static PyObject *msg_head(PyObject *head) {
    PyObject *h = SLOT(head, L_MSG, M_HEAD), *nxt = SLOT(head, L_MSG, M_NEXT);
    if (h != NULL && h != Py_None)
        return Py_NewRef(h);
    PyObject *out = (nxt && PyMethod_Check(nxt) && PyMethod_GET_FUNCTION(nxt) == next_part_fn)
                        ? PyMethod_GET_SELF(nxt) : NULL;
    PyObject *parts = out && Py_IS_TYPE(out, L_OUT.type) ? SLOT(out, L_OUT, O_PARTS) : NULL;
    int64_t i, n, count, mtu, total, last_off, off, flags, plen = 0;
    int carry;
    if (parts == NULL || !Py_IS_TYPE(parts, L_SEG.type) ||
        get_i64(out, &L_OUT, O_TAKEN, &i) < 0 || get_i64(parts, &L_SEG, Z_COUNT, &n) < 0 ||
        get_i64(out, &L_OUT, O_COUNT, &count) < 0 || i >= n || n < 2 ||
        !PyTuple_Check(SLOT(parts, L_SEG, Z_FIELDS)) ||
        PyTuple_GET_SIZE(SLOT(parts, L_SEG, Z_FIELDS)) != 2 ||
        !PyTuple_Check(SLOT(parts, L_SEG, Z_COMMON)) ||
        PyTuple_GET_SIZE(SLOT(parts, L_SEG, Z_COMMON)) != 8) {
        PyErr_Clear(); /* anything unusual: the Python (it raises what it raises) */
        PyObject *a[1] = {head};
        return mc_call(s_head, a, 1, NULL);
    }
    if ((carry = truth(parts, &L_SEG, Z_CARRY)) < 0 || get_i64(parts, &L_SEG, Z_MTU, &mtu) < 0 ||
        get_i64(parts, &L_SEG, Z_TOTAL, &total) < 0 ||
        get_i64(parts, &L_SEG, Z_LAST_OFF, &last_off) < 0)
        return NULL;
    /* OutMessage.next_part */
    if (put_i64(out, &L_OUT, O_TAKEN, i + 1) < 0 || put_i64(out, &L_OUT, O_COUNT, count - 1) < 0)
        return NULL;
    /* Segmenter.part(i) */
    PyObject *payload = SLOT(parts, L_SEG, Z_PAYLOAD), *chunk, *hd;
    int64_t lo, hi;
    if (i == 0) { /* (a message of one packet never gets here: it is no OutMessage) */
        if (get_i64(parts, &L_SEG, Z_FIRST_FLAGS, &flags) < 0)
            return NULL;
        lo = 0;
        hi = mtu;
        off = 0;
        hd = SLOT(parts, L_SEG, Z_HEADER_DATA);
    } else {
        off = i * mtu;
        if (get_i64(parts, &L_SEG, Z_MID_FLAGS, &flags) < 0)
            return NULL;
        if (off == last_off) {
            flags |= ses_eom;
            hi = total;
        } else {
            hi = off + mtu;
        }
        lo = off;
        hd = NULL;
    }
    PyObject *zc = SLOT(parts, L_SEG, Z_ZERO_CHUNK);
    if (carry && zc != NULL && zc != Py_None && hi - lo == mtu) {
        chunk = Py_NewRef(zc); /* an all-zero payload's full packet: the shared zeros(mtu) */
        plen = mtu;
    } else if (carry) {
        chunk = PySequence_GetSlice(payload, lo, hi);
        if (chunk == NULL)
            return NULL;
        if (hd == NULL && (plen = PyObject_Length(chunk)) < 0) {
            Py_DECREF(chunk);
            return NULL;
        }
    } else {
        chunk = PyBytes_FromStringAndSize(NULL, 0);
        if (chunk == NULL)
            return NULL;
    }
    PyObject *fields = SLOT(parts, L_SEG, Z_FIELDS), *common = SLOT(parts, L_SEG, Z_COMMON);
    PyObject *sv[SS_N];
    sv[0] = Py_NewRef(PyTuple_GET_ITEM(fields, 0));
    sv[1] = Py_NewRef(PyTuple_GET_ITEM(fields, 1));
    sv[2] = PyLong_FromLongLong(flags);
    for (int k = 0; k < 8; k++)
        sv[3 + k] = Py_NewRef(PyTuple_GET_ITEM(common, k));
    sv[11] = hd != NULL ? Py_NewRef(hd) : PyLong_FromLong(0);
    sv[12] = memo_int(size_ints, SIZE_BITS, hd != NULL ? 0 : plen);
    sv[13] = memo_int(offset_ints, PLACE_BITS, hd != NULL ? 0 : off);
    sv[14] = Py_NewRef(SLOT(parts, L_SEG, Z_RLEN));
    for (int k = 0; k < SS_N; k++)
        if (sv[k] == NULL) {
            for (int j = 0; j < SS_N; j++)
                Py_XDECREF(sv[j]);
            Py_DECREF(chunk);
            return NULL;
        }
    PyObject *ses = new_filled(&L_SES, sv);
    PyObject *rv[PR_N] = {Py_NewRef(SLOT(out, L_OUT, O_OP_ID)),
                          Py_NewRef(SLOT(out, L_OUT, O_ATTEMPT)),
                          memo_int(index_ints, PLACE_BITS, i)};
    PyObject *ref = rv[2] ? new_filled(&L_REF, rv) : NULL;
    if (rv[2] == NULL) {
        Py_DECREF(rv[0]);
        Py_DECREF(rv[1]);
    }
    if (ses == NULL || ref == NULL) {
        Py_XDECREF(ses);
        Py_XDECREF(ref);
        Py_DECREF(chunk);
        return NULL;
    }
    /* SendMessage.head: the SendRequest, kept as the head */
    PyObject *qv[Q_N] = {Py_NewRef(SLOT(head, L_MSG, M_DST_IP)), Py_NewRef(SLOT(head, L_MSG, M_MODE)),
                         Py_NewRef(SLOT(head, L_MSG, M_JOB_ID)), Py_NewRef(SLOT(head, L_MSG, M_TC)),
                         ses, Py_NewRef(SLOT(head, L_MSG, M_EXT)), chunk, ref,
                         Py_NewRef(count - 1 ? Py_False : Py_True),
                         Py_NewRef(SLOT(head, L_MSG, M_SDI))};
    PyObject *req = new_filled(&L_REQ, qv);
    if (req == NULL || put(head, &L_MSG, M_HEAD, Py_NewRef(req)) < 0) {
        Py_XDECREF(req);
        return NULL;
    }
    return req;
}

/* InitiatorPdc._send of a first transmission: the Frame (new reference) */
static PyObject *send_new(PyObject *pdc, PyObject *now_obj, PyObject *pkt, PyObject *req,
                          PyObject *nbytes_obj, int64_t nbytes) {
    PyObject *rec = SLOT(pdc, L_PDC, I_REC), *cc = SLOT(pdc, L_PDC, I_CC);
    PyObject *cfg = SLOT(pdc, L_PDC, I_CFG), *ctx = SLOT(pdc, L_PDC, I_CTX);
    PyObject *ev = NULL, *r, *pds = NULL, *frame = NULL;
    PyObject *fixed = SLOT(pdc, L_PDC, I_FIXED_EV);
    if (fixed != Py_None) {
        ev = Py_NewRef(fixed);
    } else {
        PyObject *a[2] = {cc, now_obj};
        if ((ev = call(s_choose_ev, a, 2, NULL)) == NULL)
            return NULL;
    }
    int eom = truth(req, &L_REQ, Q_EOM), every, blocked;
    if (eom < 0 || (every = truth(cfg, &L_CFG, G_AR_EVERY)) < 0 ||
        (blocked = truth(cfg, &L_CFG, G_AR_BLOCKED)) < 0)
        goto fail;
    int64_t flags = (eom || every) ? ar_flag : 0, after, una, next_psn, psn;
    if (!flags && blocked) {
        Py_ssize_t q = PyObject_Length(SLOT(pdc, L_PDC, I_QUEUE));
        if (q < 0 || cc_inflight(rec, &after) < 0)
            goto fail;
        after += nbytes; /* a new packet is not in flight yet */
        if (!q) {
            flags = ar_flag;
        } else {
            PyObject *af = PyLong_FromLongLong(after);
            PyObject *a[3] = {cc, nbytes_obj, af};
            r = af ? call(s_window_full, a, 3, kw_window_full) : NULL;
            Py_XDECREF(af);
            if (r == NULL)
                goto fail;
            int full = PyObject_IsTrue(r);
            Py_DECREF(r);
            if (full < 0)
                goto fail;
            if (full)
                flags = ar_flag;
        }
    }
    if (get_i64(pdc, &L_PDC, I_NEXT_PSN, &next_psn) < 0 ||
        first_or(SLOT(rec, L_REC, R_OUTSTANDING), next_psn, &una) < 0 ||
        get_i64(pkt, &L_PKT, P_PSN, &psn) < 0)
        goto fail;
    int64_t cpo = (una - 1 - psn) & M32;
    if (cpo & HALF)
        cpo -= 0x100000000LL;
    PyObject *ses = SLOT(req, L_REQ, Q_SES);
    PyObject *nh = ses ? PyDict_GetItemWithError(next_hdr, (PyObject *)Py_TYPE(ses)) : NULL;
    if (nh == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, ses ? (PyObject *)Py_TYPE(ses) : Py_None);
        goto fail;
    }
    /* a SYN packet (the PDC not established yet): no DPDCID, its offset from the start */
    int syn = SLOT(pdc, L_PDC, I_STATE) == st_syn;
    int64_t start = 0;
    if (syn && get_i64(pdc, &L_PDC, I_START_PSN, &start) < 0)
        goto fail;
    if ((pds = new_record(&L_HDR, hdr_defaults)) == NULL ||
        put(pds, &L_HDR, H_TYPE, Py_NewRef(SLOT(pdc, L_PDC, I_PTYPE))) < 0 ||
        put(pds, &L_HDR, H_NEXT_HDR, Py_NewRef(nh)) < 0 ||
        put_i64(pds, &L_HDR, H_FLAGS, syn ? flags | syn_req_flag : flags) < 0 ||
        put_i64(pds, &L_HDR, H_CPO, cpo) < 0 ||
        put(pds, &L_HDR, H_PSN, Py_NewRef(SLOT(pkt, L_PKT, P_PSN))) < 0 ||
        put(pds, &L_HDR, H_SPDCID, Py_NewRef(SLOT(pdc, L_PDC, I_PDC_ID))) < 0 ||
        (syn ? put_i64(pds, &L_HDR, H_DPDCID, 0) < 0 ||
                   put_bool(pds, &L_HDR, H_USE_RSV, 0) < 0 ||
                   put_i64(pds, &L_HDR, H_PSN_OFFSET, psn_sdiff(psn, start)) < 0
             : put(pds, &L_HDR, H_DPDCID, Py_NewRef(SLOT(pdc, L_PDC, I_DPDCID))) < 0))
        goto fail;
    int64_t ptype;
    if (get_i64(pdc, &L_PDC, I_PTYPE, &ptype) < 0)
        goto fail;
    if (ptype >= rud_cc_req && put_i64(pds, &L_HDR, H_CREDIT_TARGET, 0) < 0)
        goto fail; /* no RCCC here (the reference sends credit) */
    {
        PyObject *a[5] = {rec, now_obj, pkt, Py_False, ev};
        if ((r = call(s_on_sent, a, 5, NULL)) == NULL)
            goto fail;
        Py_DECREF(r);
    }
    if (put(pdc, &L_PDC, I_BLOCKED_AT, Py_NewRef(Py_None)) < 0)
        goto fail;
    {
        PyObject *a[5] = {cc, now_obj, nbytes_obj, ev, Py_False};
        if ((r = call(s_on_send, a, 5, kw_on_send)) == NULL)
            goto fail;
        Py_DECREF(r);
    }
    PyObject *counters = SLOT(ctx, L_CTX, X_COUNTERS);
    if (count(counters, s_tx_packets) < 0 || count_n(counters, s_tx_bytes, nbytes) < 0)
        goto fail;
    int ecn = truth(cfg, &L_CFG, G_ECN_CAPABLE);
    if (ecn < 0 || (frame = new_record(&L_FRAME, frame_defaults)) == NULL)
        goto fail;
    PyObject *v[] = {pds, ses, SLOT(req, L_REQ, Q_EXT), SLOT(req, L_REQ, Q_PAYLOAD), mac_src,
                     mac_dst, SLOT(ctx, L_CTX, X_LOCAL_IP), SLOT(pdc, L_PDC, I_PEER_IP), ev,
                     SLOT(cfg, L_CFG, G_DSCP_DATA)};
    for (int i = 0; i < (int)(sizeof v / sizeof v[0]); i++) {
        if (v[i] == NULL) {
            PyErr_SetString(PyExc_AttributeError, "an unset slot");
            goto fail;
        }
        put(frame, &L_FRAME, i, Py_NewRef(v[i]));
    }
    if (put_i64(frame, &L_FRAME, F_ECN, ecn ? 2 : 0) < 0)
        goto fail;
    Py_DECREF(pds);
    Py_DECREF(ev);
    return frame;
fail:
    Py_XDECREF(frame);
    Py_XDECREF(pds);
    Py_XDECREF(ev);
    return NULL;
}

/* poll_data(pdc, now) -> Frame | None */
static PyObject *k_poll_data(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "sender core not configured");
        return NULL;
    }
    if (nargs != 2 || !Py_IS_TYPE(args[0], L_PDC.type) || !is_int(args[1]))
        return ref(args, nargs);
    PyObject *pdc = args[0], *now_obj = args[1];
    PyObject *rec = SLOT(pdc, L_PDC, I_REC), *queue = SLOT(pdc, L_PDC, I_QUEUE);
    PyObject *st = SLOT(pdc, L_PDC, I_STATE), *cfg = SLOT(pdc, L_PDC, I_CFG);
    PyObject *ctx = SLOT(pdc, L_PDC, I_CTX);
    if (rec == NULL || queue == NULL || st == NULL || cfg == NULL || ctx == NULL ||
        !Py_IS_TYPE(rec, L_REC.type) || !Py_IS_TYPE(cfg, L_CFG.type) ||
        !Py_IS_TYPE(ctx, L_CTX.type))
        return ref(args, nargs);
    PyObject *retx = SLOT(rec, L_REC, R_RETX), *out = SLOT(rec, L_REC, R_OUTSTANDING);
    PyObject *mem = SLOT(ctx, L_CTX, X_TX_MEMORY);
    if (retx == NULL || out == NULL || mem == NULL || !PyList_CheckExact(retx) ||
        PyList_GET_SIZE(retx) || !PyDict_CheckExact(out) || !Py_IS_TYPE(mem, L_MEM.type))
        return ref(args, nargs); /* a retransmission first, or odd objects */
    Py_ssize_t qn = PyObject_Length(queue);
    if (qn < 0)
        return NULL;
    if (!qn || !(st == st_established || st == st_syn))
        Py_RETURN_NONE;
    if (SLOT(pdc, L_PDC, I_SDI) != Py_None || SLOT(pdc, L_PDC, I_CREDIT) != Py_None)
        return ref(args, nargs);
    int syn = st == st_syn; /* the PDC's first packets, before an ACK established it */
    int64_t now, psn, una, max_inf, max_cack, peer_range;
    if ((now = as_i64(now_obj)) == -1 && PyErr_Occurred())
        return NULL;
    if (get_i64(pdc, &L_PDC, I_NEXT_PSN, &psn) < 0 || first_or(out, psn, &una) < 0 ||
        get_i64(cfg, &L_CFG, G_MAX_INFLIGHT, &max_inf) < 0 ||
        get_i64(rec, &L_REC, R_MAX_CACK, &max_cack) < 0 ||
        get_i64(pdc, &L_PDC, I_PEER_RANGE, &peer_range) < 0)
        return NULL;
    PyObject *counters = SLOT(ctx, L_CTX, X_COUNTERS);
    int64_t d = (psn - una) & M32;
    if (d < HALF && d >= max_inf) {
        if (count(counters, s_blocked_window) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    d = (psn - max_cack) & M32;
    if (d < HALF && d > peer_range)
        return ref(args, nargs); /* the peer window: CLEAR, PROBE */
    if (syn) { /* no more than max_syn_packets before the PDC is established */
        int64_t start, max_syn;
        if (get_i64(pdc, &L_PDC, I_START_PSN, &start) < 0 ||
            get_i64(cfg, &L_CFG, G_MAX_SYN, &max_syn) < 0)
            return NULL;
        if (psn_sdiff(psn, start) >= max_syn) {
            if (count(counters, s_blocked_syn) < 0)
                return NULL;
            Py_RETURN_NONE;
        }
    }
    PyObject *head = PySequence_GetItem(queue, 0), *req, *r;
    if (head == NULL)
        return NULL;
    int is_msg = Py_IS_TYPE(head, L_MSG.type);
    if (is_msg) {
        req = msg_head(head);
    } else {
        req = Py_NewRef(head);
    }
    if (req == NULL) {
        Py_DECREF(head);
        return NULL;
    }
    if (!Py_IS_TYPE(req, L_REQ.type)) {
        Py_DECREF(req);
        Py_DECREF(head);
        return ref(args, nargs); /* nothing changed yet (head() keeps what it made) */
    }
    PyObject *payload = SLOT(req, L_REQ, Q_PAYLOAD);
    Py_ssize_t nb = payload ? PyObject_Length(payload) : -1;
    PyObject *nbytes_obj = nb >= 0 ? memo_int(size_ints, SIZE_BITS, nb) : NULL, *pkt = NULL,
             *frame = NULL, *psn_obj = NULL;
    int64_t infl, used, limit;
    if (nbytes_obj == NULL || cc_inflight(rec, &infl) < 0)
        goto done;
    {
        PyObject *inf = PyLong_FromLongLong(infl);
        PyObject *a[4] = {SLOT(pdc, L_PDC, I_CC), now_obj, nbytes_obj, inf};
        r = inf ? call(s_can_send, a, 4, kw_can_send) : NULL;
        Py_XDECREF(inf);
        if (r == NULL)
            goto done;
        int ok = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (ok < 0)
            goto done;
        if (!ok) {
            PyObject *b[2] = {pdc, now_obj};
            if ((r = call(s_blocked_by_cc, b, 2, NULL)) == NULL)
                goto done;
            Py_DECREF(r);
            frame = Py_NewRef(Py_None);
            goto done;
        }
    }
    int64_t cost = nb + tx_overhead;
    if (get_i64(mem, &L_MEM, MEM_USED, &used) < 0 || get_i64(mem, &L_MEM, MEM_LIMIT, &limit) < 0)
        goto done;
    if (used + cost > limit && used) {
        PyObject *a[2] = {mem, pdc};
        if (count(counters, s_blocked_memory) < 0 || (r = call(s_wait, a, 2, NULL)) == NULL)
            goto done;
        Py_DECREF(r);
        frame = Py_NewRef(Py_None);
        goto done;
    }
    if (is_msg) {
        PyObject *h = SLOT(head, L_MSG, M_HEAD);
        PyObject *pl = h != NULL && Py_IS_TYPE(h, L_REQ.type) ? SLOT(h, L_REQ, Q_PAYLOAD) : NULL;
        int64_t cnt, nbm;
        Py_ssize_t plen = pl != NULL ? PyObject_Size(pl) : -2;
        if (plen == -1)
            goto done;
        if (plen >= 0) { /* SendMessage.pop: the packet msg_head made leaves the message */
            if (get_i64(head, &L_MSG, M_COUNT, &cnt) < 0 ||
                get_i64(head, &L_MSG, M_NBYTES, &nbm) < 0 ||
                put(head, &L_MSG, M_HEAD, Py_NewRef(Py_None)) < 0 ||
                put_i64(head, &L_MSG, M_COUNT, cnt - 1) < 0 ||
                put_i64(head, &L_MSG, M_NBYTES, nbm - plen) < 0)
                goto done;
        } else {
            PyObject *a[1] = {head};
            if ((r = call(s_pop, a, 1, NULL)) == NULL)
                goto done;
            Py_DECREF(r);
        }
        int more = truth(head, &L_MSG, M_COUNT);
        if (more < 0)
            goto done;
        if (!more) {
            PyObject *b[1] = {queue};
            if ((r = call(s_popleft, b, 1, NULL)) == NULL)
                goto done;
            Py_DECREF(r);
        }
    } else {
        PyObject *b[1] = {queue};
        if ((r = call(s_popleft, b, 1, NULL)) == NULL)
            goto done;
        Py_DECREF(r);
    }
    if ((psn_obj = PyLong_FromLongLong(psn)) == NULL ||
        put_i64(pdc, &L_PDC, I_NEXT_PSN, (psn + 1) & M32) < 0 ||
        (pkt = new_packet(psn_obj, req, nbytes_obj, cost)) == NULL ||
        PyDict_SetItem(out, psn_obj, pkt) < 0 || put_i64(mem, &L_MEM, MEM_USED, used + cost) < 0)
        goto done;
    if (PyDict_GET_SIZE(out) == 1) {
        int64_t probe;
        if (put(pdc, &L_PDC, I_LAST_PROGRESS, Py_NewRef(now_obj)) < 0 ||
            get_i64(cfg, &L_CFG, G_PROBE_AFTER, &probe) < 0)
            goto done;
        if (probe) {
            PyObject *t = PyLong_FromLongLong(now + probe);
            PyObject *a[3] = {ctx, pdc, t};
            r = t ? call(s_arm, a, 3, NULL) : NULL;
            Py_XDECREF(t);
            if (r == NULL)
                goto done;
            Py_DECREF(r);
        }
    }
    frame = send_new(pdc, now_obj, pkt, req, nbytes_obj, nb);
done:
    Py_XDECREF(psn_obj);
    Py_XDECREF(pkt);
    Py_XDECREF(nbytes_obj);
    Py_DECREF(req);
    Py_DECREF(head);
    return frame;
}

/* configure(InitiatorPdc, LossRecovery, SentPacket, PdcContext, MemoryAccount, PdsConfig,
 *           SendMessage, SendRequest, PdsRequest, Frame, constants, reference) */
static PyObject *k_configure(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 12 || !PyDict_Check(args[10]) || !PyCallable_Check(args[11])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure takes 10 classes, a dict of constants and the reference");
        return NULL;
    }
    configured = 0;
    PyObject *c = args[10];
#define GET(name) PyDict_GetItemString(c, name)
    PyObject *est = GET("established"), *syn = GET("syn"), *nh = GET("next_hdr"),
             *hd = GET("request_defaults"), *fd = GET("frame_defaults"), *ms = GET("mac_src"),
             *md = GET("mac_dst"), *tx = GET("tx_overhead"), *ar = GET("ar"),
             *cc = GET("rud_cc_req"), *sf = GET("syn_flag");
#undef GET
    if (!est || !syn || !nh || !PyDict_Check(nh) || !hd || !PyTuple_Check(hd) ||
        PyTuple_GET_SIZE(hd) != H_N || !fd || !PyTuple_Check(fd) ||
        PyTuple_GET_SIZE(fd) != F_N || !ms || !md || !tx || !ar || !cc || !sf) {
        PyErr_SetString(PyExc_ValueError, "configure: incomplete constants");
        return NULL;
    }
    long long txv = as_i64(tx), arv = as_i64(ar), ccv = as_i64(cc), sfv = as_i64(sf);
    if (PyErr_Occurred())
        return NULL;
    if (layout(&L_PDC, args[0], PDC_NAMES, I_N) < 0 ||
        layout(&L_REC, args[1], REC_NAMES, R_N) < 0 ||
        layout(&L_PKT, args[2], PKT_NAMES, P_N) < 0 ||
        layout(&L_CTX, args[3], CTX_NAMES, X_N) < 0 ||
        layout(&L_MEM, args[4], MEM_NAMES, MEM_N) < 0 ||
        layout(&L_CFG, args[5], CFG_NAMES, G_N) < 0 ||
        layout(&L_MSG, args[6], MSG_NAMES, M_N) < 0 ||
        layout(&L_REQ, args[7], REQ_NAMES, Q_N) < 0 ||
        layout(&L_HDR, args[8], HDR_NAMES, H_N) < 0 ||
        layout(&L_FRAME, args[9], FRAME_FIELDS, F_N) < 0)
        return NULL;
    Py_XSETREF(st_established, Py_NewRef(est));
    Py_XSETREF(st_syn, Py_NewRef(syn));
    Py_XSETREF(next_hdr, Py_NewRef(nh));
    Py_XSETREF(hdr_defaults, Py_NewRef(hd));
    Py_XSETREF(frame_defaults, Py_NewRef(fd));
    Py_XSETREF(mac_src, Py_NewRef(ms));
    Py_XSETREF(mac_dst, Py_NewRef(md));
    Py_XSETREF(ref_poll_data, Py_NewRef(args[11]));
    tx_overhead = txv;
    ar_flag = arv;
    rud_cc_req = ccv;
    syn_req_flag = sfv;
    configured = 1;
    Py_RETURN_NONE;
}

/* configure_segments(OutMessage, Segmenter, SesStandard, PacketRef, constants): how the
 * layer above makes a message's packets (uet.ses.segmentation hands its classes over when
 * it is imported, so the PDS names no SES class). Until then, and for any message of
 * another kind, head() is called (msg_head). */
static PyObject *k_configure_segments(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyDict_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_segments(OutMessage, Segmenter, SesStandard, PacketRef, "
                        "constants)");
        return NULL;
    }
    PyObject *np = PyDict_GetItemString(args[4], "next_part"),
             *se = PyDict_GetItemString(args[4], "ses_eom");
    if (np == NULL || se == NULL) {
        PyErr_SetString(PyExc_ValueError, "configure_segments: incomplete constants");
        return NULL;
    }
    long long sev = as_i64(se);
    if (PyErr_Occurred())
        return NULL;
    Py_CLEAR(next_part_fn); /* msg_head makes no segment while the layouts change */
    if (layout(&L_OUT, args[0], OUT_NAMES, O_N) < 0 ||
        layout(&L_SEG, args[1], SEG_NAMES, Z_N) < 0 ||
        layout(&L_SES, args[2], SES_NAMES, SS_N) < 0 ||
        layout(&L_REF, args[3], REF_NAMES, PR_N) < 0)
        return NULL;
    ses_eom = sev;
    next_part_fn = Py_NewRef(np);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ ACKs
 * InitiatorPdc.rx_ack for an ACK_CC of an ESTABLISHED cleartext PDC from its peer, naming
 * a packet (no probe answer), neither trimmed nor carrying an SES response, and
 * PdsEndpoint._rx_ack, which finds that PDC; the loss recovery (on_ack, rtt_sample,
 * detect_after_ack), the congestion control (on_ack with its AckFeedback, made here), the
 * REQ bits and _after_progress stay calls in the Python's order. Every other ACK is the
 * Python reference's, called before anything has changed. */
enum { K_FLAGS, K_ACK_PSN_OFFSET, K_CACK_PSN, K_SPDCID, K_DPDCID, K_MPR, K_N };
static const char *ACK_NAMES[K_N] = {"flags", "ack_psn_offset", "cack_psn", "spdcid", "dpdcid",
                                     "mpr"};
enum { FB_EV, FB_ECN, FB_BYTES, FB_PACKETS, FB_RTT, FB_INFLIGHT, FB_ACK_CC, FB_RETX, FB_N };
static const char *FB_NAMES[FB_N] = {"ev", "ecn_echo", "newly_acked_bytes",
                                     "newly_acked_packets", "rtt_sample", "in_flight_bytes",
                                     "ack_cc", "retx"};
enum { D_DSCP_TRIMMED, D_DSCP_TRIMMED_LASTHOP, D_N };
static const char *TRIM_NAMES[D_N] = {"dscp_trimmed", "dscp_trimmed_lasthop"};
static Layout L_ACK, L_FB, L_TRIM, L_EP;
static const char *EP_NAMES[1] = {"mgr"};
static PyObject *ref_rx_ack, *ref_rx_ack_dispatch, *st_closed, *endpoint_class;
static int64_t ack_p, ack_retx, ack_m, ack_req_mask;
static int ack_configured;
static PyObject *s_ack_rx, *s_on_ack, *s_rtt_sample, *s_detect_after_ack, *s_clear_requested,
    *s_close_request, *s_after_progress, *s_wake, *s_by_id, *kw_fb, *kw_from_cp;

static PyObject *rx_ack_ref(PyObject *const *args, Py_ssize_t nargs) {
    return PyObject_Vectorcall(ref_rx_ack, args, nargs, NULL);
}

/* rx_ack(pdc, now, frame, ack) */
static PyObject *k_rx_ack(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!ack_configured) {
        PyErr_SetString(PyExc_RuntimeError, "sender core: ACKs not configured");
        return NULL;
    }
    if (nargs != 4 || !Py_IS_TYPE(args[0], L_PDC.type) || !is_int(args[1]) ||
        !Py_IS_TYPE(args[2], L_FRAME.type) || !Py_IS_TYPE(args[3], L_ACK.type))
        return rx_ack_ref(args, nargs);
    PyObject *pdc = args[0], *now_obj = args[1], *frame = args[2], *ack = args[3];
    for (int i = 0; i < I_N; i++)
        if (SLOT(pdc, L_PDC, i) == NULL)
            return rx_ack_ref(args, nargs);
    for (int i = 0; i < K_N; i++)
        if (SLOT(ack, L_ACK, i) == NULL)
            return rx_ack_ref(args, nargs);
    if (SLOT(frame, L_FRAME, F_SES) == NULL || SLOT(frame, L_FRAME, F_SRC_IP) == NULL ||
        SLOT(frame, L_FRAME, F_EV) == NULL)
        return rx_ack_ref(args, nargs);
    PyObject *rec = SLOT(pdc, L_PDC, I_REC), *ctx = SLOT(pdc, L_PDC, I_CTX);
    PyObject *cfg = SLOT(pdc, L_PDC, I_CFG);
    if (SLOT(pdc, L_PDC, I_STATE) != st_established || SLOT(pdc, L_PDC, I_SDI) != Py_None ||
        !Py_IS_TYPE(rec, L_REC.type) || !Py_IS_TYPE(ctx, L_CTX.type) ||
        !Py_IS_TYPE(cfg, L_TRIM.type) || SLOT(frame, L_FRAME, F_SES) != Py_None)
        return rx_ack_ref(args, nargs);
    int same = PyObject_RichCompareBool(SLOT(frame, L_FRAME, F_SRC_IP),
                                        SLOT(pdc, L_PDC, I_PEER_IP), Py_EQ);
    if (same <= 0)
        return same < 0 ? NULL : rx_ack_ref(args, nargs);
    same = PyObject_RichCompareBool(SLOT(ack, L_ACK, K_SPDCID), SLOT(pdc, L_PDC, I_DPDCID), Py_EQ);
    if (same <= 0)
        return same < 0 ? NULL : rx_ack_ref(args, nargs);
    /* every slot read below before anything changes (peer_range and infl only to find a
     * bad slot now rather than after the counters moved) */
    int64_t now, cack, flags, apo, next_psn, dscp, t1, t2, max_cack, infl, peer_range;
    if ((now = as_i64(now_obj)) == -1 && PyErr_Occurred())
        return NULL;
    if (get_i64(ack, &L_ACK, K_CACK_PSN, &cack) < 0 || get_i64(ack, &L_ACK, K_FLAGS, &flags) < 0 ||
        get_i64(ack, &L_ACK, K_ACK_PSN_OFFSET, &apo) < 0 ||
        get_i64(pdc, &L_PDC, I_NEXT_PSN, &next_psn) < 0 ||
        get_i64(frame, &L_FRAME, F_DSCP, &dscp) < 0 ||
        get_i64(cfg, &L_TRIM, D_DSCP_TRIMMED, &t1) < 0 ||
        get_i64(cfg, &L_TRIM, D_DSCP_TRIMMED_LASTHOP, &t2) < 0 ||
        get_i64(rec, &L_REC, R_MAX_CACK, &max_cack) < 0 ||
        get_i64(pdc, &L_PDC, I_PEER_RANGE, &peer_range) < 0 || cc_inflight(rec, &infl) < 0 ||
        SLOT(ack, L_ACK, K_MPR) == NULL)
        return PyErr_Occurred() ? NULL : rx_ack_ref(args, nargs);
    int64_t d = (cack - next_psn + 1) & M32;
    if ((d && d < HALF) || flags & ack_p || dscp == t1 || dscp == t2)
        return rx_ack_ref(args, nargs); /* beyond next_psn, a probe answer, trimmed */
    /* ---- from here on as InitiatorPdc.rx_ack does */
    PyObject *counters = SLOT(ctx, L_CTX, X_COUNTERS), *r = NULL, *newly = NULL, *ap = NULL,
             *rtt = NULL, *fb = NULL;
    if (count(counters, s_ack_rx) < 0)
        return NULL;
    int fresh = ((cack - max_cack) & M32) < HALF, retx = (flags & ack_retx) != 0;
    if ((newly = PyList_New(2)) == NULL || (ap = PyLong_FromLongLong((cack + apo) & M32)) == NULL)
        goto done;
    PyList_SET_ITEM(newly, 0, PyLong_FromLong(0));
    PyList_SET_ITEM(newly, 1, PyLong_FromLong(0));
    {
        PyObject *a[7] = {rec, now_obj, ack, ap, retx ? Py_True : Py_False, newly, Py_False};
        if ((rtt = mc_call(s_on_ack, a, 7, NULL)) == NULL)
            goto done;
    }
    int64_t mpr;
    if (get_i64(ack, &L_ACK, K_MPR, &mpr) < 0)
        goto done;
    if (fresh && mpr && put_i64(pdc, &L_PDC, I_PEER_RANGE, mpr * 128) < 0)
        goto done;
    if (SLOT(pdc, L_PDC, I_STATE) == st_closed) { /* the CLOSE was acknowledged */
        r = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *nb = PyList_GET_ITEM(newly, 0), *np = PyList_GET_ITEM(newly, 1);
    int progressed = PyObject_IsTrue(np);
    if (progressed < 0 ||
        (progressed && put(pdc, &L_PDC, I_LAST_PROGRESS, Py_NewRef(now_obj)) < 0))
        goto done;
    if (rtt != Py_None) {
        PyObject *a[3] = {rec, now_obj, rtt};
        if (call_drop(s_rtt_sample, a, 3, NULL) < 0)
            goto done;
    }
    if (cc_inflight(rec, &infl) < 0)
        goto done;
    {
        PyObject *v[FB_N] = {Py_NewRef(SLOT(frame, L_FRAME, F_EV)),
                             Py_NewRef(flags & ack_m ? Py_True : Py_False), Py_NewRef(nb),
                             Py_NewRef(np), Py_NewRef(rtt), PyLong_FromLongLong(infl),
                             Py_NewRef(ack), Py_NewRef(retx ? Py_True : Py_False)};
        if (v[FB_INFLIGHT] == NULL) {
            for (int i = 0; i < FB_N; i++)
                Py_XDECREF(v[i]);
            goto done;
        }
        if ((fb = new_filled(&L_FB, v)) == NULL)
            goto done;
        PyObject *a[3] = {SLOT(pdc, L_PDC, I_CC), now_obj, fb};
        if (call_drop(s_on_ack, a, 3, kw_fb) < 0)
            goto done;
    }
    {
        PyObject *npsn = SLOT(pdc, L_PDC, I_NEXT_PSN);
        PyObject *a[5] = {rec, now_obj, ack, np, npsn};
        if (npsn == NULL || call_drop(s_detect_after_ack, a, 5, NULL) < 0)
            goto done;
    }
    int64_t req = (flags & ack_req_mask) >> 1;
    if (req == 1) {
        PyObject *a[3] = {pdc, now_obj, Py_False};
        if (call_drop(s_clear_requested, a, 3, kw_from_cp) < 0)
            goto done;
    } else if (req == 2) {
        PyObject *a[2] = {pdc, now_obj};
        if (call_drop(s_close_request, a, 2, NULL) < 0)
            goto done;
    }
    { /* _after_progress: its common case (packets outstanding or queued: wake the PDC's
       * sender if has_data_work) here, the rest (idle: keepalive, close) the Python's */
        PyObject *rec2 = SLOT(pdc, L_PDC, I_REC), *queue = SLOT(pdc, L_PDC, I_QUEUE);
        PyObject *outst = rec2 != NULL && Py_IS_TYPE(rec2, L_REC.type)
                              ? SLOT(rec2, L_REC, R_OUTSTANDING) : NULL;
        Py_ssize_t qn = outst != NULL && PyDict_CheckExact(outst) && queue != NULL
                            ? PyObject_Size(queue) : -2;
        if (qn == -1)
            goto done;
        if (qn >= 0 && (PyDict_GET_SIZE(outst) || qn)) {
            int retx = truth(rec2, &L_REC, R_RETX);
            if (retx < 0)
                goto done;
            PyObject *st = SLOT(pdc, L_PDC, I_STATE);
            if (retx || (qn && (st == st_established || st == st_syn))) {
                PyObject *a[2] = {SLOT(pdc, L_PDC, I_CTX), pdc};
                if (a[0] == NULL || call_drop(s_wake, a, 2, NULL) < 0)
                    goto done;
            }
        } else {
            PyObject *a[2] = {pdc, now_obj};
            if (call_drop(s_after_progress, a, 2, NULL) < 0)
                goto done;
        }
    }
    r = Py_NewRef(Py_None);
done:
    Py_XDECREF(newly);
    Py_XDECREF(ap);
    Py_XDECREF(rtt);
    Py_XDECREF(fb);
    return r;
}

/* rx_ack_dispatch(ep, now, frame, ack): PdsEndpoint._rx_ack, the initiator PDC the ACK names
 * (cleartext: frame_sdi None must equal the PDC's sdi) */
static PyObject *k_rx_ack_dispatch(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!ack_configured || endpoint_class == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "sender core: the ACK dispatch not configured");
        return NULL;
    }
    if (nargs != 4 || (PyObject *)Py_TYPE(args[0]) != endpoint_class ||
        !Py_IS_TYPE(args[2], L_FRAME.type) || !Py_IS_TYPE(args[3], L_ACK.type) ||
        SLOT(args[2], L_FRAME, F_TSS) != Py_None || SLOT(args[3], L_ACK, K_DPDCID) == NULL)
        return PyObject_Vectorcall(ref_rx_ack_dispatch, args, nargs, NULL);
    PyObject *mgr = slot_attr(args[0], &L_EP, 0); /* PdsEndpoint.mgr */
    PyObject *by_id = mgr ? PyObject_GetAttr(mgr, s_by_id) : NULL;
    Py_XDECREF(mgr);
    if (by_id == NULL)
        return NULL;
    PyObject *pdc = PyDict_Check(by_id)
                        ? PyDict_GetItemWithError(by_id, SLOT(args[3], L_ACK, K_DPDCID)) : NULL;
    Py_XINCREF(pdc);
    Py_DECREF(by_id);
    if (pdc == NULL || !Py_IS_TYPE(pdc, L_PDC.type) || SLOT(pdc, L_PDC, I_SDI) != Py_None) {
        Py_XDECREF(pdc);
        return PyErr_Occurred() ? NULL : PyObject_Vectorcall(ref_rx_ack_dispatch, args, nargs, NULL);
    }
    PyObject *a[4] = {pdc, args[1], args[2], args[3]};
    PyObject *r = k_rx_ack(mod, a, 4);
    Py_DECREF(pdc);
    return r;
}

/* configure_ack(rx_ack, PdsAckCc, AckFeedback, constants) (after configure) */
static PyObject *k_configure_ack(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyCallable_Check(args[0]) || !PyDict_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure_ack(rx_ack, PdsAckCc, AckFeedback, constants)");
        return NULL;
    }
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "configure_ack: configure first");
        return NULL;
    }
    ack_configured = 0;
    static const char *names[] = {"closed", "ack_p", "ack_retx", "ack_m", "ack_req_mask"};
    PyObject *v[5];
    for (int i = 0; i < 5; i++)
        if ((v[i] = PyDict_GetItemString(args[3], names[i])) == NULL) {
            PyErr_Format(PyExc_ValueError, "configure_ack: no constant '%s'", names[i]);
            return NULL;
        }
    int64_t iv[4];
    for (int i = 0; i < 4; i++)
        if ((iv[i] = as_i64(v[1 + i])) == -1 && PyErr_Occurred())
            return NULL;
    if (layout(&L_ACK, args[1], ACK_NAMES, K_N) < 0 ||
        layout(&L_FB, args[2], FB_NAMES, FB_N) < 0 ||
        layout(&L_TRIM, (PyObject *)L_CFG.type, TRIM_NAMES, D_N) < 0)
        return NULL;
    Py_XSETREF(ref_rx_ack, Py_NewRef(args[0]));
    Py_XSETREF(st_closed, Py_NewRef(v[0]));
    ack_p = iv[0];
    ack_retx = iv[1];
    ack_m = iv[2];
    ack_req_mask = iv[3];
    ack_configured = 1;
    Py_RETURN_NONE;
}

/* _released(pdc, now, pkt, original): InitiatorPdc._released, the recovery's callback for
 * each packet it releases: its transmit memory comes back (waiters woken by the Python's
 * wake_waiters); the CLOSE and PacketAcked reports are the Python's */
static PyObject *ref_released, *s_wake_waiters, *s_report_acked, *s_waiters;
static SlotCache c_waiters, c_report_acked;

static PyObject *k_released(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (ref_released == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "sender core not configured");
        return NULL;
    }
    if (!configured || nargs != 4 || !Py_IS_TYPE(args[0], L_PDC.type) ||
        !Py_IS_TYPE(args[2], L_PKT.type))
        return PyObject_Vectorcall(ref_released, args, nargs, NULL);
    PyObject *pdc = args[0], *pkt = args[2], *ctx = SLOT(pdc, L_PDC, I_CTX);
    if (ctx == NULL || !Py_IS_TYPE(ctx, L_CTX.type) || SLOT(pkt, L_PKT, P_REQ) == Py_None ||
        SLOT(pkt, L_PKT, P_REQ) == NULL)
        return PyObject_Vectorcall(ref_released, args, nargs, NULL); /* the CLOSE */
    PyObject *rep = cached_attr(ctx, s_report_acked, &c_report_acked);
    int report = rep ? PyObject_IsTrue(rep) : -1;
    Py_XDECREF(rep);
    if (report < 0)
        return NULL;
    PyObject *mem = SLOT(ctx, L_CTX, X_TX_MEMORY);
    if (report || mem == NULL || !Py_IS_TYPE(mem, L_MEM.type))
        return PyObject_Vectorcall(ref_released, args, nargs, NULL);
    int64_t used, cost;
    if (get_i64(mem, &L_MEM, MEM_USED, &used) < 0 || get_i64(pkt, &L_PKT, P_COST, &cost) < 0 ||
        put_i64(mem, &L_MEM, MEM_USED, used - cost) < 0)
        return NULL;
    PyObject *w = cached_attr(mem, s_waiters, &c_waiters);
    int wait = w ? PyObject_IsTrue(w) : -1;
    Py_XDECREF(w);
    if (wait < 0)
        return NULL;
    if (wait) {
        PyObject *a[1] = {mem};
        if (call_drop(s_wake_waiters, a, 1, NULL) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

/* keep the one callable argument as a core's reference (None), else TypeError(usage) */
static PyObject *keep_reference(PyObject **ref, PyObject *const *args, Py_ssize_t nargs,
                                const char *usage) {
    if (nargs != 1 || !PyCallable_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    Py_XSETREF(*ref, Py_NewRef(args[0]));
    Py_RETURN_NONE;
}

/* configure_released(_released): its Python form (after configure) */
static PyObject *k_configure_released(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    return keep_reference(&ref_released, args, nargs, "configure_released(_released)");
}

KW_ENTRY(k_released_kw, k_released, ref_released)

static PyObject *ref_has_data_work;

/* has_data_work(pdc) -> bool: InitiatorPdc.has_data_work (a retransmission queued, or
 * messages queued on an established or opening PDC), asked after every data packet the
 * PDC sends; the Python for a subclass or an unset slot */
static PyObject *k_has_data_work(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured || nargs != 1 || !Py_IS_TYPE(args[0], L_PDC.type))
        goto reference;
    PyObject *pdc = args[0], *rec = SLOT(pdc, L_PDC, I_REC);
    PyObject *queue = SLOT(pdc, L_PDC, I_QUEUE), *st = SLOT(pdc, L_PDC, I_STATE);
    if (rec == NULL || queue == NULL || st == NULL || !Py_IS_TYPE(rec, L_REC.type) ||
        SLOT(rec, L_REC, R_RETX) == NULL)
        goto reference;
    int t = PyObject_IsTrue(SLOT(rec, L_REC, R_RETX));
    if (t != 0)
        return t < 0 ? NULL : Py_NewRef(Py_True);
    if ((t = PyObject_IsTrue(queue)) < 0)
        return NULL;
    return Py_NewRef(t && (st == st_established || st == st_syn) ? Py_True : Py_False);
reference:
    if (ref_has_data_work == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "has_data_work: configure_work first");
        return NULL;
    }
    return PyObject_Vectorcall(ref_has_data_work, args, (size_t)nargs, NULL);
}

/* configure_work(has_data_work): its Python form (after configure) */
static PyObject *k_configure_work(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    return keep_reference(&ref_has_data_work, args, nargs, "configure_work(has_data_work)");
}

/* configure_ack_dispatch(_rx_ack, PdsEndpoint) (after configure_ack) */
static PyObject *k_configure_ack_dispatch(PyObject *mod, PyObject *const *args,
                                          Py_ssize_t nargs) {
    if (nargs != 2 || !PyCallable_Check(args[0]) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "configure_ack_dispatch(_rx_ack, PdsEndpoint)");
        return NULL;
    }
    if (!ack_configured) {
        PyErr_SetString(PyExc_RuntimeError, "configure_ack_dispatch: configure_ack first");
        return NULL;
    }
    if (layout(&L_EP, args[1], EP_NAMES, 1) < 0)
        return NULL;
    Py_XSETREF(ref_rx_ack_dispatch, Py_NewRef(args[0]));
    Py_XSETREF(endpoint_class, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

KW_ENTRY(k_poll_data_kw, k_poll_data, ref_poll_data)
KW_ENTRY(k_rx_ack_kw, k_rx_ack, ref_rx_ack)
KW_ENTRY(k_rx_ack_dispatch_kw, k_rx_ack_dispatch, ref_rx_ack_dispatch)

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))k_configure, METH_FASTCALL,
     "configure(InitiatorPdc, LossRecovery, SentPacket, PdcContext, MemoryAccount, "
     "PdsConfig, SendMessage, SendRequest, PdsRequest, Frame, constants, reference)"},
    {"configure_segments", (PyCFunction)(void (*)(void))k_configure_segments, METH_FASTCALL,
     "configure_segments(OutMessage, Segmenter, SesStandard, PacketRef, constants): the "
     "SES's message packets, made as Segmenter.part makes them"},
    {"poll_data", (PyCFunction)(void (*)(void))k_poll_data_kw, METH_FASTCALL | METH_KEYWORDS,
     "poll_data(pdc, now) -> Frame | None: InitiatorPdc.poll_data"},
    {"configure_ack", (PyCFunction)(void (*)(void))k_configure_ack, METH_FASTCALL,
     "configure_ack(rx_ack, PdsAckCc, AckFeedback, constants)"},
    {"configure_ack_dispatch", (PyCFunction)(void (*)(void))k_configure_ack_dispatch,
     METH_FASTCALL, "configure_ack_dispatch(_rx_ack, PdsEndpoint)"},
    {"rx_ack", (PyCFunction)(void (*)(void))k_rx_ack_kw, METH_FASTCALL | METH_KEYWORDS,
     "rx_ack(pdc, now, frame, ack): InitiatorPdc.rx_ack"},
    {"rx_ack_dispatch", (PyCFunction)(void (*)(void))k_rx_ack_dispatch_kw,
     METH_FASTCALL | METH_KEYWORDS, "rx_ack_dispatch(ep, now, frame, ack): PdsEndpoint._rx_ack"},
    {"configure_released", (PyCFunction)(void (*)(void))k_configure_released, METH_FASTCALL,
     "configure_released(_released): its Python form"},
    {"released", (PyCFunction)(void (*)(void))k_released_kw, METH_FASTCALL | METH_KEYWORDS,
     "released(pdc, now, pkt, original): InitiatorPdc._released"},
    {"configure_work", (PyCFunction)(void (*)(void))k_configure_work, METH_FASTCALL,
     "configure_work(has_data_work): its Python form"},
    {"has_data_work", (PyCFunction)(void (*)(void))k_has_data_work, METH_FASTCALL,
     "has_data_work(pdc) -> bool: InitiatorPdc.has_data_work"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_sender_core",
                                    "An initiator PDC's new data packets and its ACKs in C",
                                    -1, methods};

PyMODINIT_FUNC PyInit__sender_core(void) {
    if (intern_str(&s_can_send, "can_send") || intern_str(&s_choose_ev, "choose_ev") ||
        intern_str(&s_window_full, "window_full") ||
        intern_str(&s_blocked_syn, "blocked.syn") || intern_str(&s_on_send, "on_send") ||
        intern_str(&s_on_sent, "on_sent") || intern_str(&s_head, "head") ||
        intern_str(&s_pop, "pop") || intern_str(&s_popleft, "popleft") ||
        intern_str(&s_wait, "wait") || intern_str(&s_arm, "arm") ||
        intern_str(&s_blocked_by_cc, "_blocked_by_cc") ||
        intern_str(&s_blocked_window, "blocked.window") ||
        intern_str(&s_blocked_memory, "blocked.memory") ||
        intern_str(&s_tx_packets, "tx_packets") || intern_str(&s_tx_bytes, "tx_bytes") ||
        intern_str(&s_ack_rx, "ack_rx") || intern_str(&s_on_ack, "on_ack") ||
        intern_str(&s_rtt_sample, "rtt_sample") ||
        intern_str(&s_detect_after_ack, "detect_after_ack") ||
        intern_str(&s_clear_requested, "clear_requested") ||
        intern_str(&s_close_request, "close_request") ||
        intern_str(&s_after_progress, "_after_progress") || intern_str(&s_wake, "wake") ||
        intern_str(&s_wake_waiters, "wake_waiters") || intern_str(&s_waiters, "waiters") ||
        intern_str(&s_report_acked, "report_acked") ||
        intern_str(&s_by_id, "by_id") || (kw_fb = names_tuple(1, "fb")) == NULL ||
        (kw_from_cp = names_tuple(1, "from_cp")) == NULL)
        return NULL;
    kw_can_send = names_tuple(2, "nbytes", "in_flight");
    kw_window_full = names_tuple(2, "nbytes", "in_flight");
    kw_on_send = names_tuple(3, "nbytes", "ev", "retx");
    if (kw_can_send == NULL || kw_window_full == NULL || kw_on_send == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    static const char *const names[] = {"poll_data", "rx_ack", "rx_ack_dispatch", "released",
                                        "has_data_work"};
    if (m == NULL || add_instance_methods(m, names, 5) < 0) {
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
