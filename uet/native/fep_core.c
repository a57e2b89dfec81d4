/* A fabric end point's frame interface in C (uet.endpoint.fep.FabricEndpoint: receive,
 * pop_control, pop_data and next_deadline, the methods the fabric's NIC calls for every
 * frame), over the same Python objects.
 *
 * These are glue: decode a frame and hand it to the PDS's receive handler, then run the
 * PDS/SES pump; take the next frame of a class from the PDS and encode it; find the
 * earliest timer. In Python each frame went through four or five small methods; here it
 * is one C call that makes the same calls into the PDS, the SES and the codec, in the same
 * order. It reads the end point's, its PDS's and the frame's attributes at their slots'
 * offsets (configure gives the classes; slot_attr looks them up on any other class). The
 * common case only: a FabricEndpoint itself (a subclass may
 * override any step: it gets the Python), cleartext (no TSS), over UDP; a
 * frame the C decoder does not take, a frame that carries a TSS header, native-IP
 * encapsulation or anything unexpected goes to the Python reference before anything
 * has changed. tests/pds/test_c_cores.py runs fabric scenarios in both forms and compares
 * the captures byte for byte.
 */
#include "slots.h"
#include "records.h"

static PyObject *ref_receive, *ref_pop_control, *ref_pop_data, *ref_next_deadline;
static PyObject *c_decode, *c_encode, *py_encode, *heappop, *str_udp;
static PyTypeObject *pds_type; /* PdsEndpoint: its next_deadline is done here */
static PyTypeObject *fep_type;  /* FabricEndpoint itself: a subclass may override any step */
static int configured;
static PyObject *s_type, *s_receive, *s_rx_frames, *s_tx_data, *s_tx_control, *s_poll_transmit, *s_src_mac, *s_dst_mac, *s_encode, *s_heap, *s_armed, *s_deadline,
    *s_get;

static PyObject *getattr_or(PyObject *o, PyObject *name) { return PyObject_GetAttr(o, name); }

/* the SES end point's attributes read and written per frame, at their slots (slots.h) */
static SlotCache c_ses_deadline, c_ses_target, c_ses_now, c_ses_outq, c_ses_events;

/* a decoded frame's fields (uet.wire.records.Frame): at their offsets (configure) */
static Layout L_FRAME;
#define FRAME(o, i) slot_attr((o), &L_FRAME, (i))

/* the slots of FabricEndpoint and PdsEndpoint read per frame (configure) */
enum { FE_TSS, FE_COUNTERS, FE_PDS, FE_SES, FE_MAC, FE_PEER_MACS, FE_GATEWAY_MAC,
       FE_FRAME_ENCAP, FE_LATER, FE_AUDIT, FE_N };
static const char *FEP_NAMES[FE_N] = {"tss", "counters", "pds", "ses", "mac", "peer_macs",
                                      "gateway_mac", "_frame_encap", "_later", "audit"};
enum { PE_LOCAL_IP, PE_RX, PE_CTX, PE_EVENTS, PE_SEEN, PE_CTRL, PE_ACK_RING, PE_N };
static const char *PEP_NAMES[PE_N] = {"local_ip", "_rx", "ctx", "events", "_seen", "ctrl",
                                      "ack_ring"};
static Layout L_FEP, L_PEP;

#define FEP(o, i) slot_attr((o), &L_FEP, (i))
#define PEP(o, i) slot_attr((o), &L_PEP, (i))

/* counters[name] += 1 on an end point */
static int fep_count(PyObject *fep, PyObject *name) {
    PyObject *c = FEP(fep, FE_COUNTERS);
    if (c == NULL)
        return -1;
    int rc = count(c, name);
    Py_DECREF(c);
    return rc;
}

/* is the end point cleartext (tss None)? 1 yes, 0 no, -1 error */
static int cleartext(PyObject *fep) {
    PyObject *t = FEP(fep, FE_TSS);
    if (t == NULL)
        return -1;
    int clear = t == Py_None;
    Py_DECREF(t);
    return clear;
}

static PyObject *k_pump(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);

/* receive(fep, now, data) */
static PyObject *k_receive(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured || nargs != 3 || !Py_IS_TYPE(args[0], fep_type) ||
        !PyBytes_CheckExact(args[2]) || !is_int(args[1]))
        return configured ? PyObject_Vectorcall(ref_receive, args, nargs, NULL)
                          : (PyErr_SetString(PyExc_RuntimeError, "fep core not configured"),
                             NULL);
    PyObject *fep = args[0], *now = args[1], *data = args[2];
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(data);
    /* IPv4 without options, UDP, no TSS header (frame_is_secured's answer): the rest is
     * the reference's */
    if (n <= 42 || b[12] != 8 || b[13] || b[14] != 0x45 || b[23] != 17 || b[42] >> 3 == 1)
        return PyObject_Vectorcall(ref_receive, args, nargs, NULL);
    int clear = cleartext(fep);
    if (clear <= 0)
        return clear < 0 ? NULL : PyObject_Vectorcall(ref_receive, args, nargs, NULL);
    /* the payload as a view of the frame: the SES reads it only to keep it */
    PyObject *da[3] = {data, Py_None, Py_True};
    PyObject *frame = PyObject_Vectorcall(c_decode, da, 3, NULL);
    if (frame == NULL || frame == Py_None) {
        /* not the C decoder's (or an error it found): the reference decodes and reports */
        PyErr_Clear();
        Py_XDECREF(frame);
        return PyObject_Vectorcall(ref_receive, args, nargs, NULL);
    }
    PyObject *ftss = FRAME(frame, F_TSS), *pds = NULL, *hdr = NULL, *r;
    if (ftss == NULL)
        goto fail;
    int plain = ftss == Py_None;
    Py_DECREF(ftss);
    if (!plain) {
        Py_DECREF(frame);
        return PyObject_Vectorcall(ref_receive, args, nargs, NULL);
    }
    /* FabricEndpoint._receive */
    if (fep_count(fep, s_rx_frames) < 0 || (pds = FEP(fep, FE_PDS)) == NULL)
        goto fail;
    /* PdsEndpoint.receive: the handler of the PDS type, when the frame is for us */
    PyObject *dst = FRAME(frame, F_DST_IP), *local = PEP(pds, PE_LOCAL_IP);
    int mine = (dst && local) ? PyObject_RichCompareBool(dst, local, Py_EQ) : -1;
    Py_XDECREF(dst);
    Py_XDECREF(local);
    if (mine < 0)
        goto fail;
    PyObject *handler = NULL;
    if (mine) {
        PyObject *table = PEP(pds, PE_RX), *type;
        hdr = FRAME(frame, F_PDS);
        type = hdr ? getattr_or(hdr, s_type) : NULL;
        if (table == NULL || type == NULL) {
            Py_XDECREF(table);
            Py_XDECREF(type);
            goto fail;
        }
        handler = PyDict_CheckExact(table) ? PyDict_GetItemWithError(table, type) : NULL;
        Py_XINCREF(handler);
        Py_DECREF(table);
        Py_DECREF(type);
        if (handler == NULL && PyErr_Occurred())
            goto fail;
    }
    if (handler != NULL) {
        PyObject *a[3] = {now, frame, hdr};
        r = PyObject_Vectorcall(handler, a, 3, NULL);
        Py_DECREF(handler);
    } else { /* not for us, or an unknown type: PdsEndpoint.receive counts it */
        PyObject *a[3] = {pds, now, frame};
        r = mc_call(s_receive, a, 3, NULL);
    }
    if (r == NULL)
        goto fail;
    Py_DECREF(r);
    {
        PyObject *a[2] = {fep, now};
        if ((r = k_pump(mod, a, 2)) == NULL) /* FabricEndpoint.pump */
            goto fail;
        Py_DECREF(r);
    }
    Py_XDECREF(hdr);
    Py_DECREF(pds);
    Py_DECREF(frame);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(hdr);
    Py_XDECREF(pds);
    Py_DECREF(frame);
    return NULL;
}

/* FabricEndpoint._encode of a cleartext frame over UDP: the bytes (new reference) */
static PyObject *encode(PyObject *fep, PyObject *now, PyObject *frame) {
    PyObject *ftss = FRAME(frame, F_TSS);
    if (ftss == NULL)
        return NULL;
    int plain = ftss == Py_None;
    Py_DECREF(ftss);
    if (!plain) { /* a secured frame: the end point's own _encode seals it */
        PyObject *a[3] = {fep, now, frame};
        return mc_call(s_encode, a, 3, NULL);
    }
    PyObject *mac = FEP(fep, FE_MAC), *macs = FEP(fep, FE_PEER_MACS);
    PyObject *gw = FEP(fep, FE_GATEWAY_MAC), *dst = FRAME(frame, F_DST_IP);
    PyObject *dmac = NULL, *out = NULL;
    if (mac == NULL || macs == NULL || gw == NULL || dst == NULL)
        goto done;
    if (PyDict_CheckExact(macs)) {
        dmac = PyDict_GetItemWithError(macs, dst);
        if (dmac == NULL && PyErr_Occurred())
            goto done;
        dmac = Py_NewRef(dmac ? dmac : gw);
    } else {
        dmac = mc_call2(macs, s_get, dst, gw);
        if (dmac == NULL)
            goto done;
    }
    if (Py_IS_TYPE(frame, L_FRAME.type)) { /* the frame's MACs, at their slots */
        if (put(frame, &L_FRAME, F_SRC_MAC, Py_NewRef(mac)) < 0 ||
            put(frame, &L_FRAME, F_DST_MAC, Py_NewRef(dmac)) < 0)
            goto done;
    } else if (PyObject_SetAttr(frame, s_src_mac, mac) < 0 ||
               PyObject_SetAttr(frame, s_dst_mac, dmac) < 0)
        goto done;
    out = PyObject_CallOneArg(c_encode, frame);
    if (out == Py_None) {
        Py_CLEAR(out);
        out = PyObject_CallOneArg(py_encode, frame); /* encode_frame: every frame */
    }
done:
    Py_XDECREF(mac);
    Py_XDECREF(macs);
    Py_XDECREF(gw);
    Py_XDECREF(dst);
    Py_XDECREF(dmac);
    return out;
}

/* FabricEndpoint._pop */
static PyObject *pop(PyObject *fep, PyObject *now, int control, PyObject *counter) {
    PyObject *pds = FEP(fep, FE_PDS);
    if (pds == NULL)
        return NULL;
    for (;;) {
        PyObject *a[3] = {pds, now, control ? Py_True : Py_False};
        PyObject *frame = mc_call(s_poll_transmit, a, 3, NULL);
        if (frame == NULL || frame == Py_None) {
            Py_DECREF(pds);
            return frame;
        }
        PyObject *data = fep_count(fep, counter) < 0 ? NULL : encode(fep, now, frame);
        Py_DECREF(frame);
        if (data == NULL && PyErr_Occurred()) {
            Py_DECREF(pds);
            return NULL;
        }
        if (data != NULL && data != Py_None) {
            Py_DECREF(pds);
            return data;
        }
        Py_XDECREF(data); /* refused by its domain: counted there, the next one */
    }
}

/* the end point's encapsulation is UDP and it has no TSS: 1, else 0 (-1 error) */
static int plain_udp(PyObject *fep) {
    int clear = cleartext(fep);
    if (clear <= 0)
        return clear;
    PyObject *e = FEP(fep, FE_FRAME_ENCAP);
    if (e == NULL)
        return -1;
    int udp = PyObject_RichCompareBool(e, str_udp, Py_EQ);
    Py_DECREF(e);
    return udp;
}

/* pop_data(fep, now) */
static PyObject *k_pop_data(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured || nargs != 2 || !Py_IS_TYPE(args[0], fep_type))
        return configured ? PyObject_Vectorcall(ref_pop_data, args, nargs, NULL)
                          : (PyErr_SetString(PyExc_RuntimeError, "fep core not configured"),
                             NULL);
    int ok = plain_udp(args[0]);
    if (ok <= 0)
        return ok < 0 ? NULL : PyObject_Vectorcall(ref_pop_data, args, nargs, NULL);
    return pop(args[0], args[1], 0, s_tx_data);
}

/* PdsEndpoint.control_pending */
static int control_pending(PyObject *pds) {
    static const int names[3] = {PE_CTRL, PE_ACK_RING, PE_SEEN};
    for (int i = 0; i < 3; i++) {
        PyObject *v = PEP(pds, names[i]);
        if (v == NULL)
            return -1;
        int t = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (t)
            return t;
    }
    return 0;
}

/* pop_control(fep, now) */
static PyObject *k_pop_control(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured || nargs != 2 || !Py_IS_TYPE(args[0], fep_type))
        return configured ? PyObject_Vectorcall(ref_pop_control, args, nargs, NULL)
                          : (PyErr_SetString(PyExc_RuntimeError, "fep core not configured"),
                             NULL);
    /* most calls find no control work: answer that first, as the Python does */
    PyObject *pds = FEP(args[0], FE_PDS);
    int pending = pds ? control_pending(pds) : -1;
    Py_XDECREF(pds);
    if (pending <= 0)
        return pending < 0 ? NULL : Py_NewRef(Py_None);
    int ok = plain_udp(args[0]);
    if (ok <= 0)
        return ok < 0 ? NULL : PyObject_Vectorcall(ref_pop_control, args, nargs, NULL);
    return pop(args[0], args[1], 1, s_tx_control);
}

/* PdsEndpoint.next_deadline: the earliest armed timer (stale heap entries dropped) */
static PyObject *pds_deadline(PyObject *pds) {
    PyObject *ctx = PEP(pds, PE_CTX);
    static SlotCache heap_slot;
    PyObject *heap = ctx ? cached_attr(ctx, s_heap, &heap_slot) : NULL;
    Py_XDECREF(ctx);
    if (heap == NULL)
        return NULL;
    if (!PyList_CheckExact(heap)) {
        Py_DECREF(heap);
        PyErr_SetString(PyExc_TypeError, "the timer heap is not a list");
        return NULL;
    }
    while (PyList_GET_SIZE(heap)) {
        PyObject *top = PyList_GET_ITEM(heap, 0);
        if (!PyTuple_Check(top) || PyTuple_GET_SIZE(top) < 3) {
            Py_DECREF(heap);
            PyErr_SetString(PyExc_TypeError, "a timer heap entry is not (t, seq, obj)");
            return NULL;
        }
        PyObject *t = Py_NewRef(PyTuple_GET_ITEM(top, 0));
        static SlotCache armed_slot;
        PyObject *armed = cached_attr(PyTuple_GET_ITEM(top, 2), s_armed, &armed_slot);
        int same = armed ? PyObject_RichCompareBool(armed, t, Py_EQ) : -1;
        Py_XDECREF(armed);
        if (same) {
            Py_DECREF(heap);
            if (same < 0) {
                Py_DECREF(t);
                return NULL;
            }
            return t;
        }
        Py_DECREF(t);
        PyObject *r = PyObject_CallOneArg(heappop, heap);
        if (r == NULL) {
            Py_DECREF(heap);
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_DECREF(heap);
    Py_RETURN_NONE;
}

/* the smaller of two optional ints (new reference); the first wins a tie */
static PyObject *earlier(PyObject *d, PyObject *s) {
    if (s == Py_None)
        return Py_NewRef(d);
    if (d == Py_None)
        return Py_NewRef(s);
    int lt = PyObject_RichCompareBool(s, d, Py_LT);
    if (lt < 0)
        return NULL;
    return Py_NewRef(lt ? s : d);
}

/* next_deadline(fep) */
static PyObject *k_next_deadline(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured || nargs != 1 || !Py_IS_TYPE(args[0], fep_type))
        return configured ? PyObject_Vectorcall(ref_next_deadline, args, nargs, NULL)
                          : (PyErr_SetString(PyExc_RuntimeError, "fep core not configured"),
                             NULL);
    PyObject *fep = args[0];
    PyObject *pds = FEP(fep, FE_PDS), *ses = NULL, *later = NULL, *d = NULL, *s = NULL,
             *out = NULL;
    if (pds == NULL || (ses = FEP(fep, FE_SES)) == NULL ||
        (later = FEP(fep, FE_LATER)) == NULL)
        goto done;
    if (!PyList_CheckExact(later) || !Py_IS_TYPE(pds, pds_type)) {
        out = PyObject_Vectorcall(ref_next_deadline, args, nargs, NULL);
        goto done;
    }
    if ((d = pds_deadline(pds)) == NULL || (s = cached_attr(ses, s_deadline, &c_ses_deadline)) == NULL ||
        (out = earlier(d, s)) == NULL)
        goto done;
    if (PyList_GET_SIZE(later)) { /* delayed SES answers: (t, seq, token, reply) */
        PyObject *top = PyList_GET_ITEM(later, 0);
        if (!PyTuple_Check(top) || !PyTuple_GET_SIZE(top)) {
            Py_CLEAR(out);
            PyErr_SetString(PyExc_TypeError, "a delayed answer is not (t, ...)");
            goto done;
        }
        PyObject *o = earlier(out, PyTuple_GET_ITEM(top, 0));
        Py_DECREF(out);
        out = o;
    }
done:
    Py_XDECREF(pds);
    Py_XDECREF(ses);
    Py_XDECREF(later);
    Py_XDECREF(d);
    Py_XDECREF(s);
    return out;
}

/* configure(references, codec, PdsEndpoint, FabricEndpoint, Frame): references: receive,
 * pop_control, pop_data, next_deadline (the Python forms); codec: (C decode, C encode,
 * encode_frame, heappop) */
static PyObject *k_configure(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *r[4], *c[4];
    if (nargs != 5 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 4 ||
        !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != 4 || !PyType_Check(args[2]) ||
        !PyType_Check(args[3]) || !PyType_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "configure(references: 4-tuple, codec: 4-tuple, "
                                         "PdsEndpoint, FabricEndpoint, Frame)");
        return NULL;
    }
    for (int i = 0; i < 4; i++) {
        r[i] = PyTuple_GET_ITEM(args[0], i);
        c[i] = PyTuple_GET_ITEM(args[1], i);
        if (!PyCallable_Check(r[i]) || !PyCallable_Check(c[i])) {
            PyErr_SetString(PyExc_TypeError, "configure: callables are expected");
            return NULL;
        }
    }
    Py_XSETREF(ref_receive, Py_NewRef(r[0]));
    Py_XSETREF(ref_pop_control, Py_NewRef(r[1]));
    Py_XSETREF(ref_pop_data, Py_NewRef(r[2]));
    Py_XSETREF(ref_next_deadline, Py_NewRef(r[3]));
    Py_XSETREF(c_decode, Py_NewRef(c[0]));
    Py_XSETREF(c_encode, Py_NewRef(c[1]));
    Py_XSETREF(py_encode, Py_NewRef(c[2]));
    Py_XSETREF(heappop, Py_NewRef(c[3]));
    if (layout(&L_PEP, args[2], PEP_NAMES, PE_N) < 0 ||
        layout(&L_FEP, args[3], FEP_NAMES, FE_N) < 0 ||
        layout(&L_FRAME, args[4], FRAME_FIELDS, F_N) < 0)
        return NULL;
    Py_XSETREF(pds_type, (PyTypeObject *)Py_NewRef(args[2]));
    Py_XSETREF(fep_type, (PyTypeObject *)Py_NewRef(args[3]));
    configured = 1;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ delivery
 * FabricEndpoint.deliver (a delivered request to the SES target, its answer to the PDS)
 * and DeliveryAudit.see (the independent exactly-once check), for a cleartext end point
 * and a standard-header request; everything else is the Python's (configure_delivery). */

enum { AU_MAX_MESSAGES, AU_HISTORY, AU_MTU, AU_MESSAGES, AU_FINISHED, AU_DUPLICATES, AU_SEEN,
       AU_FLOW_OF, AU_FLOW_BYTES, AU_FLOW_DUPS, AU_N };
static const char *AUDIT_NAMES[AU_N] = {"max_messages", "history", "mtu_payload", "messages",
                                       "finished", "duplicates", "seen", "flow_of",
                                       "flow_bytes", "flow_dups"};
enum { SS_FLAGS, SS_OFFSET, SS_OPCODE, SS_REQUEST_LENGTH, SS_INITIATOR, SS_JOB_ID,
       SS_MESSAGE_ID, SS_N };
static const char *SESSTD_NAMES[SS_N] = {"flags", "message_offset", "opcode",
                                         "request_length", "initiator", "job_id",
                                         "message_id"};
enum { D_TOKEN, D_SRC_IP, D_PDC_ID, D_MODE, D_PSN, D_SES, D_EXT, D_PAYLOAD, D_N };
static const char *DELIVERED_NAMES[D_N] = {"token", "src_ip", "pdc_id", "mode", "psn", "ses",
                                           "ext", "payload"};
enum { Y_RESPONSE, Y_DATA, Y_NACK, Y_LATER, Y_N };
static const char *REPLY_NAMES[Y_N] = {"response", "data", "nack", "later"};
static Layout L_AUDIT, L_SESSTD, L_DELIVERED, L_REPLY;
static PyObject *ref_see, *ref_deliver, *zero;
static int64_t som_flag, read_opcode, bitmap_max;
static int delivery_configured;
static PyObject *s_target, *s_handle, *s_reject, *s_respond, *s_defer, *s_see;

/* a duplicate: duplicates += 1, and one to its flow's flow_dups */
static PyObject *audit_dup(PyObject *self, PyObject *flows, PyObject *src, PyObject *mid) {
    if (add_i64(self, &L_AUDIT, AU_DUPLICATES, 1) < 0)
        return NULL;
    if (flows != Py_None) {
        PyObject *k = PyTuple_Pack(2, src, mid);
        PyObject *fid = k ? PyDict_GetItemWithError(flows, k) : NULL;
        Py_XDECREF(k);
        if (fid == NULL && PyErr_Occurred())
            return NULL;
        if (fid != NULL && count_n(SLOT(self, L_AUDIT, AU_FLOW_DUPS), fid, 1) < 0)
            return NULL;
    }
    Py_RETURN_FALSE;
}

/* delete d's first key (the oldest: dicts keep insertion order) */
static int pop_first(PyObject *d) {
    PyObject *k, *v;
    if (!dict_first(d, &k, &v))
        return 0;
    Py_INCREF(k);
    int rc = PyDict_DelItem(d, k);
    Py_DECREF(k);
    return rc;
}

/* see(audit, src, ses, nbytes, conn=0) */
static PyObject *k_see(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!delivery_configured) {
        PyErr_SetString(PyExc_RuntimeError, "fep core: delivery not configured");
        return NULL;
    }
    if ((nargs != 4 && nargs != 5) || !Py_IS_TYPE(args[0], L_AUDIT.type) ||
        !Py_IS_TYPE(args[2], L_SESSTD.type) || !PyLong_CheckExact(args[3]) ||
        (nargs == 5 && !PyLong_CheckExact(args[4])))
        return PyObject_Vectorcall(ref_see, args, nargs, NULL);
    PyObject *self = args[0], *src = args[1], *ses = args[2];
    PyObject *conn = nargs == 5 ? args[4] : zero;
    PyObject *flows = SLOT(self, L_AUDIT, AU_FLOW_OF), *messages = SLOT(self, L_AUDIT, AU_MESSAGES);
    PyObject *finished = SLOT(self, L_AUDIT, AU_FINISHED);
    int64_t nbytes, mtu, maxm, hist, flags, moff, op, rlen, dummy;
    if ((nbytes = as_i64(args[3])) == -1 && PyErr_Occurred())
        return NULL;
    if (get_i64(self, &L_AUDIT, AU_MTU, &mtu) < 0 ||
        get_i64(self, &L_AUDIT, AU_MAX_MESSAGES, &maxm) < 0 ||
        get_i64(self, &L_AUDIT, AU_HISTORY, &hist) < 0 ||
        get_i64(self, &L_AUDIT, AU_SEEN, &dummy) < 0 ||
        get_i64(self, &L_AUDIT, AU_DUPLICATES, &dummy) < 0 ||
        get_i64(ses, &L_SESSTD, SS_FLAGS, &flags) < 0 ||
        get_i64(ses, &L_SESSTD, SS_OFFSET, &moff) < 0 ||
        get_i64(ses, &L_SESSTD, SS_OPCODE, &op) < 0 ||
        get_i64(ses, &L_SESSTD, SS_REQUEST_LENGTH, &rlen) < 0 ||
        SLOT(ses, L_SESSTD, SS_INITIATOR) == NULL || SLOT(ses, L_SESSTD, SS_JOB_ID) == NULL ||
        SLOT(ses, L_SESSTD, SS_MESSAGE_ID) == NULL)
        return PyErr_Occurred() ? NULL : PyObject_Vectorcall(ref_see, args, nargs, NULL);
    /* what the arithmetic below assumes (header fields are unsigned); else the Python */
    if (mtu <= 0 || moff < 0 || rlen < 0 || nbytes < 0 || !PyDict_CheckExact(messages) ||
        !PyDict_CheckExact(finished) || (flows != Py_None && !PyDict_CheckExact(flows)))
        return PyObject_Vectorcall(ref_see, args, nargs, NULL);
    PyObject *mid = SLOT(ses, L_SESSTD, SS_MESSAGE_ID);
    if (add_i64(self, &L_AUDIT, AU_SEEN, 1) < 0)
        return NULL;
    int64_t offset = flags & som_flag ? 0 : moff, size = nbytes;
    if (op == read_opcode) {
        int64_t left = rlen - offset;
        nbytes = left < mtu ? left : mtu;
        if (nbytes < 0)
            nbytes = 0;
    }
    PyObject *key = PyTuple_Pack(6, src, conn, SLOT(ses, L_SESSTD, SS_INITIATOR),
                                 SLOT(ses, L_SESSTD, SS_JOB_ID), mid,
                                 SLOT(ses, L_SESSTD, SS_OPCODE));
    if (key == NULL)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(messages, key), *r = NULL, *x = NULL;
    int isnew = entry == NULL;
    if (isnew) {
        if (PyErr_Occurred())
            goto done;
        int in = PyDict_Contains(finished, key);
        if (in) {
            r = in < 0 ? NULL : audit_dup(self, flows, src, mid);
            goto done;
        }
        if (PyDict_GET_SIZE(messages) >= maxm && pop_first(messages) < 0)
            goto done;
        int64_t span = rlen / mtu + 1;
        PyObject *bm = PyByteArray_FromStringAndSize(NULL, span <= bitmap_max ? (span + 7) >> 3 : 0);
        if (bm == NULL)
            goto done;
        memset(PyByteArray_AS_STRING(bm), 0, PyByteArray_GET_SIZE(bm));
        entry = PyList_New(3);
        if (entry == NULL) {
            Py_DECREF(bm);
            goto done;
        }
        PyList_SET_ITEM(entry, 0, bm);
        PyList_SET_ITEM(entry, 1, Py_NewRef(zero));
        PyList_SET_ITEM(entry, 2, Py_NewRef(Py_None));
    } else {
        Py_INCREF(entry);
    }
    if (!PyList_CheckExact(entry) || PyList_GET_SIZE(entry) != 3 ||
        !PyByteArray_CheckExact(PyList_GET_ITEM(entry, 0))) {
        PyErr_SetString(PyExc_TypeError, "DeliveryAudit: a malformed message entry");
        goto done;
    }
    int64_t q = offset / mtu, rem = offset % mtu;
    PyObject *bitmap = PyList_GET_ITEM(entry, 0);
    if (!rem && (q >> 3) < PyByteArray_GET_SIZE(bitmap)) {
        char *b = PyByteArray_AS_STRING(bitmap);
        char bit = (char)(1 << (q & 7));
        if (b[q >> 3] & bit) {
            r = audit_dup(self, flows, src, mid);
            goto done;
        }
        b[q >> 3] |= bit;
    } else {
        PyObject *others = PyList_GET_ITEM(entry, 2);
        if (others == Py_None) {
            if ((others = PySet_New(NULL)) == NULL)
                goto done;
            PyList_SetItem(entry, 2, others); /* steals; the old None is released */
        }
        if ((x = PyLong_FromLongLong(offset)) == NULL)
            goto done;
        int in = PySet_Contains(others, x);
        if (in) {
            r = in < 0 ? NULL : audit_dup(self, flows, src, mid);
            goto done;
        }
        if (PySet_Add(others, x) < 0)
            goto done;
    }
    if (flows != Py_None) {
        PyObject *k = PyTuple_Pack(2, src, mid);
        PyObject *fid = k ? PyDict_GetItemWithError(flows, k) : NULL;
        Py_XDECREF(k);
        if (fid == NULL && PyErr_Occurred())
            goto done;
        if (fid != NULL && count_n(SLOT(self, L_AUDIT, AU_FLOW_BYTES), fid, size) < 0)
            goto done;
    }
    int64_t got;
    PyObject *g = PyList_GET_ITEM(entry, 1);
    if (!PyLong_Check(g) || ((got = as_i64(g)) == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "DeliveryAudit: a malformed message entry");
        goto done;
    }
    got += nbytes;
    if (got >= rlen) {
        if (!isnew && PyDict_DelItem(messages, key) < 0)
            goto done;
        if (PyDict_SetItem(finished, key, Py_None) < 0 ||
            (PyDict_GET_SIZE(finished) > hist && pop_first(finished) < 0))
            goto done;
    } else {
        PyObject *go = PyLong_FromLongLong(got);
        if (go == NULL)
            goto done;
        PyList_SetItem(entry, 1, go);
        if (isnew && PyDict_SetItem(messages, key, entry) < 0)
            goto done;
    }
    r = Py_NewRef(Py_True);
done:
    Py_XDECREF(x);
    Py_XDECREF(entry);
    Py_DECREF(key);
    return r;
}

/* deliver(fep, now, ev) */
static PyObject *k_deliver(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!delivery_configured) {
        PyErr_SetString(PyExc_RuntimeError, "fep core: delivery not configured");
        return NULL;
    }
    if (nargs != 3 || !Py_IS_TYPE(args[0], fep_type) || !Py_IS_TYPE(args[2], L_DELIVERED.type))
        return PyObject_Vectorcall(ref_deliver, args, nargs, NULL);
    PyObject *fep = args[0], *now = args[1], *ev = args[2];
    PyObject *ses = SLOT(ev, L_DELIVERED, D_SES);
    if (ses == NULL || ses == Py_None)
        return PyObject_Vectorcall(ref_deliver, args, nargs, NULL);
    for (int i = 0; i < D_N; i++)
        if (SLOT(ev, L_DELIVERED, i) == NULL)
            return PyObject_Vectorcall(ref_deliver, args, nargs, NULL);
    int clear = cleartext(fep);
    if (clear <= 0)
        return clear < 0 ? NULL : PyObject_Vectorcall(ref_deliver, args, nargs, NULL);
    PyObject *sesep = NULL, *target = NULL, *reply = NULL, *pds = NULL, *r = NULL;
    if ((sesep = FEP(fep, FE_SES)) == NULL ||
        (target = cached_attr(sesep, s_target, &c_ses_target)) == NULL)
        goto done;
    {
        PyObject *a[10] = {target, SLOT(ev, L_DELIVERED, D_SRC_IP), ses,
                           SLOT(ev, L_DELIVERED, D_EXT), SLOT(ev, L_DELIVERED, D_PAYLOAD),
                           SLOT(ev, L_DELIVERED, D_MODE), SLOT(ev, L_DELIVERED, D_PSN),
                           SLOT(ev, L_DELIVERED, D_PDC_ID), now, Py_None};
        if ((reply = mc_call(s_handle, a, 10, NULL)) == NULL)
            goto done;
    }
    if (!Py_IS_TYPE(reply, L_REPLY.type)) {
        PyErr_Format(PyExc_TypeError, "Target.handle: a TargetReply is expected, not %s",
                     Py_TYPE(reply)->tp_name);
        goto done;
    }
    PyObject *nack = SLOT(reply, L_REPLY, Y_NACK);
    if (nack == NULL) {
        unset(reply, &L_REPLY, Y_NACK);
        goto done;
    }
    if (nack == Py_None) {
        /* a refused packet counts as never delivered: its retransmission is no duplicate */
        PyObject *audit = FEP(fep, FE_AUDIT), *res;
        Py_ssize_t n = PyObject_Length(SLOT(ev, L_DELIVERED, D_PAYLOAD));
        PyObject *nb = n < 0 ? NULL : PyLong_FromSsize_t(n);
        if (audit == NULL || nb == NULL) {
            Py_XDECREF(audit);
            Py_XDECREF(nb);
            goto done;
        }
        PyObject *a[5] = {audit, SLOT(ev, L_DELIVERED, D_SRC_IP), ses, nb,
                          SLOT(ev, L_DELIVERED, D_PDC_ID)};
        res = Py_IS_TYPE(audit, L_AUDIT.type) ? k_see(mod, a, 5)
                                               : mc_call(s_see, a, 5, NULL);
        Py_DECREF(audit);
        Py_DECREF(nb);
        if (res == NULL)
            goto done;
        Py_DECREF(res);
    }
    PyObject *token = SLOT(ev, L_DELIVERED, D_TOKEN);
    int want = PyObject_IsTrue(token);
    if (want <= 0) {
        r = want < 0 ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    if ((pds = FEP(fep, FE_PDS)) == NULL)
        goto done;
    if (nack != Py_None) {
        PyObject *a[4] = {pds, now, token, nack};
        if (call_drop(s_reject, a, 4, NULL) < 0)
            goto done;
    } else {
        PyObject *resp = SLOT(reply, L_REPLY, Y_RESPONSE), *data = SLOT(reply, L_REPLY, Y_DATA);
        PyObject *later = SLOT(reply, L_REPLY, Y_LATER);
        if (resp == NULL || data == NULL || later == NULL) {
            unset(reply, &L_REPLY, resp == NULL ? Y_RESPONSE : data == NULL ? Y_DATA : Y_LATER);
            goto done;
        }
        PyObject *a[5] = {pds, now, token, resp, data};
        if (call_drop(s_respond, a, 5, NULL) < 0)
            goto done;
        if (later != Py_None) { /* NO_RESPONSE now, the real response after a delay */
            PyObject *b[4] = {fep, now, token, reply};
            if (call_drop(s_defer, b, 4, NULL) < 0)
                goto done;
        }
    }
    r = Py_NewRef(Py_None);
done:
    Py_XDECREF(sesep);
    Py_XDECREF(target);
    Py_XDECREF(reply);
    Py_XDECREF(pds);
    return r;
}

/* ------------------------------------------------------------------ the pump
 * FabricEndpoint.pump: the PDS's events to the SES (a delivered request through deliver
 * above, every other event through _pump_event), the SES's packets and completions through
 * _pump_ses / _pump_done, until nothing moves; PdsEndpoint.next_event inline for the exact
 * class. */
static PyObject *ref_pump, *s_now, *s_events, *s_outq, *s_next_event, *s_pump_event,
    *s_pump_ses, *s_pump_done, *s_popleft, *s_append;

/* pds.next_event(): a new reference, None when empty */
static PyObject *next_event(PyObject *pds, PyObject *events) {
    if (!Py_IS_TYPE(pds, pds_type))
        return mc_call0(pds, s_next_event);
    int any = PyObject_IsTrue(events);
    if (any <= 0)
        return any < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *ev = mc_call0(events, s_popleft);
    if (ev == NULL || !Py_IS_TYPE(ev, L_DELIVERED.type))
        return ev;
    PyObject *token = SLOT(ev, L_DELIVERED, D_TOKEN);
    int t = token ? PyObject_IsTrue(token) : 0;
    if (t > 0) { /* its answer is settled at the next poll if nobody gives one */
        PyObject *seen = PEP(pds, PE_SEEN);
        int rc = -1;
        if (seen != NULL && PyList_CheckExact(seen)) {
            rc = PyList_Append(seen, token);
        } else if (seen != NULL) {
            PyObject *r = mc_call1(seen, s_append, token);
            rc = r ? 0 : -1;
            Py_XDECREF(r);
        }
        Py_XDECREF(seen);
        if (rc < 0) {
            Py_DECREF(ev);
            return NULL;
        }
    } else if (t < 0) {
        Py_DECREF(ev);
        return NULL;
    }
    return ev;
}

/* fep.<name>(now) is truthy: 1, 0, -1 */
static int call_truth(PyObject *fep, PyObject *name, PyObject *now) {
    PyObject *a[2] = {fep, now};
    PyObject *r = mc_call(name, a, 2, NULL);
    int t = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    return t;
}

static PyObject *k_deliver(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);

/* pump(fep, now) */
static PyObject *k_pump(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!delivery_configured) {
        PyErr_SetString(PyExc_RuntimeError, "fep core: delivery not configured");
        return NULL;
    }
    if (nargs != 2 || !Py_IS_TYPE(args[0], fep_type))
        return PyObject_Vectorcall(ref_pump, args, nargs, NULL);
    PyObject *fep = args[0], *now = args[1];
    PyObject *pds = NULL, *ses = NULL, *pev = NULL, *out = NULL, *done = NULL, *r = NULL;
    if ((pds = FEP(fep, FE_PDS)) == NULL || (ses = FEP(fep, FE_SES)) == NULL ||
        cached_set(ses, s_now, now, &c_ses_now) < 0 || (pev = PEP(pds, PE_EVENTS)) == NULL ||
        (out = cached_attr(ses, s_outq, &c_ses_outq)) == NULL || (done = cached_attr(ses, s_events, &c_ses_events)) == NULL)
        goto fail;
    for (;;) {
        int moved = 0, any = PyObject_IsTrue(pev);
        if (any < 0)
            goto fail;
        while (any) {
            PyObject *ev = next_event(pds, pev), *x;
            if (ev == NULL)
                goto fail;
            if (ev == Py_None) {
                Py_DECREF(ev);
                break;
            }
            moved = 1;
            if (Py_IS_TYPE(ev, L_DELIVERED.type)) {
                PyObject *a[3] = {fep, now, ev};
                x = k_deliver(mod, a, 3);
            } else {
                PyObject *a[3] = {fep, now, ev};
                x = mc_call(s_pump_event, a, 3, NULL);
            }
            Py_DECREF(ev);
            if (x == NULL)
                goto fail;
            Py_DECREF(x);
        }
        int t = PyObject_IsTrue(out);
        if (t > 0)
            t = call_truth(fep, s_pump_ses, now);
        if (t < 0)
            goto fail;
        moved |= t;
        t = PyObject_IsTrue(done);
        if (t > 0)
            t = call_truth(fep, s_pump_done, now);
        if (t < 0)
            goto fail;
        moved |= t;
        if (!moved)
            break;
    }
    r = Py_NewRef(Py_None);
fail:
    Py_XDECREF(pds);
    Py_XDECREF(ses);
    Py_XDECREF(pev);
    Py_XDECREF(out);
    Py_XDECREF(done);
    return r;
}

/* configure_delivery((deliver, see, pump), DeliveryAudit, SesStandard, RequestDelivered,
 *                    TargetReply, constants) */
static PyObject *k_configure_delivery(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 3 ||
        !PyDict_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "configure_delivery((deliver, see, pump), DeliveryAudit, "
                                         "SesStandard, RequestDelivered, TargetReply, constants)");
        return NULL;
    }
    delivery_configured = 0;
    static const char *names[] = {"som", "read", "bitmap_max"};
    int64_t v[3];
    for (int i = 0; i < 3; i++) {
        PyObject *o = PyDict_GetItemString(args[5], names[i]);
        if (o == NULL) {
            PyErr_Format(PyExc_ValueError, "configure_delivery: no constant '%s'", names[i]);
            return NULL;
        }
        if ((v[i] = as_i64(o)) == -1 && PyErr_Occurred())
            return NULL;
    }
    if (layout(&L_AUDIT, args[1], AUDIT_NAMES, AU_N) < 0 ||
        layout(&L_SESSTD, args[2], SESSTD_NAMES, SS_N) < 0 ||
        layout(&L_DELIVERED, args[3], DELIVERED_NAMES, D_N) < 0 ||
        layout(&L_REPLY, args[4], REPLY_NAMES, Y_N) < 0)
        return NULL;
    Py_XSETREF(ref_deliver, Py_NewRef(PyTuple_GET_ITEM(args[0], 0)));
    Py_XSETREF(ref_see, Py_NewRef(PyTuple_GET_ITEM(args[0], 1)));
    Py_XSETREF(ref_pump, Py_NewRef(PyTuple_GET_ITEM(args[0], 2)));
    som_flag = v[0];
    read_opcode = v[1];
    bitmap_max = v[2];
    delivery_configured = 1;
    Py_RETURN_NONE;
}

KW_ENTRY(k_receive_kw, k_receive, ref_receive)
KW_ENTRY(k_deliver_kw, k_deliver, ref_deliver)
KW_ENTRY(k_see_kw, k_see, ref_see)
KW_ENTRY(k_pump_kw, k_pump, ref_pump)
KW_ENTRY(k_pop_control_kw, k_pop_control, ref_pop_control)
KW_ENTRY(k_pop_data_kw, k_pop_data, ref_pop_data)
KW_ENTRY(k_next_deadline_kw, k_next_deadline, ref_next_deadline)

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))k_configure, METH_FASTCALL,
     "configure((receive, pop_control, pop_data, next_deadline), "
     "(c_decode, c_encode, encode_frame, heappop), PdsEndpoint, FabricEndpoint)"},
    {"receive", (PyCFunction)(void (*)(void))k_receive_kw, METH_FASTCALL | METH_KEYWORDS,
     "receive(fep, now, data): FabricEndpoint.receive"},
    {"pop_control", (PyCFunction)(void (*)(void))k_pop_control_kw, METH_FASTCALL | METH_KEYWORDS,
     "pop_control(fep, now): FabricEndpoint.pop_control"},
    {"pop_data", (PyCFunction)(void (*)(void))k_pop_data_kw, METH_FASTCALL | METH_KEYWORDS,
     "pop_data(fep, now): FabricEndpoint.pop_data"},
    {"next_deadline", (PyCFunction)(void (*)(void))k_next_deadline_kw, METH_FASTCALL | METH_KEYWORDS,
     "next_deadline(fep): FabricEndpoint.next_deadline"},
    {"configure_delivery", (PyCFunction)(void (*)(void))k_configure_delivery, METH_FASTCALL,
     "configure_delivery((deliver, see, pump), DeliveryAudit, SesStandard, RequestDelivered, "
     "TargetReply, constants)"},
    {"deliver", (PyCFunction)(void (*)(void))k_deliver_kw, METH_FASTCALL | METH_KEYWORDS,
     "deliver(fep, now, ev): FabricEndpoint.deliver"},
    {"pump", (PyCFunction)(void (*)(void))k_pump_kw, METH_FASTCALL | METH_KEYWORDS,
     "pump(fep, now): FabricEndpoint.pump"},
    {"see", (PyCFunction)(void (*)(void))k_see_kw, METH_FASTCALL | METH_KEYWORDS,
     "see(audit, src, ses, nbytes, conn=0): DeliveryAudit.see"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_fep_core",
                                    "A fabric end point's frame interface in C", -1, methods};

PyMODINIT_FUNC PyInit__fep_core(void) {
    if (intern_str(&s_type, "type") ||
        intern_str(&s_receive, "receive") || intern_str(&s_rx_frames, "rx_frames") ||
        intern_str(&s_tx_data, "tx_data") || intern_str(&s_tx_control, "tx_control") ||
        intern_str(&s_poll_transmit, "poll_transmit") || intern_str(&s_src_mac, "src_mac") ||
        intern_str(&s_dst_mac, "dst_mac") || intern_str(&s_encode, "_encode") ||
        intern_str(&s_heap, "heap") || intern_str(&s_armed, "_armed") ||
        intern_str(&s_deadline, "deadline") ||
        intern_str(&s_get, "get") ||
        intern_str(&str_udp, "udp") || intern_str(&s_target, "target") || intern_str(&s_handle, "handle") ||
        intern_str(&s_reject, "reject") || intern_str(&s_respond, "respond") ||
        intern_str(&s_defer, "_defer") || intern_str(&s_see, "see") ||
        intern_str(&s_now, "now") || intern_str(&s_events, "events") ||
        intern_str(&s_outq, "outq") || intern_str(&s_next_event, "next_event") ||
        intern_str(&s_pump_event, "_pump_event") || intern_str(&s_pump_ses, "_pump_ses") ||
        intern_str(&s_pump_done, "_pump_done") || intern_str(&s_popleft, "popleft") ||
        intern_str(&s_append, "append"))
        return NULL;
    if ((zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    static const char *const names[] = {"receive", "pop_control", "pop_data", "next_deadline",
                                        "deliver", "see", "pump"};
    if (m == NULL || add_instance_methods(m, names, 7) < 0) {
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
