/* The SES target's WRITE packets in C (uet.ses.target.Target.handle for a packet that
 * continues a WRITE message already in reassembly), over the same Python objects.
 *
 * Most packets of a bulk WRITE are alike: the message is known, the resource and the memory
 * region resolve, the bytes are new. For those this does what handle -> _dispatch ->
 * _write -> _admit -> check_region -> Intervals did, on the same objects: the profile's
 * checks, the message key, the resource table lookups, the region's permission and bounds,
 * the covered-bytes intervals (Intervals' slots), the packet count, the copy into the
 * region (unless it is a scratch region) and, for the packet that completes the message,
 * Target._write_done (Python) for its response. Everything else (the first packet of a
 * message, a duplicate, a late packet of a finished message, any failing check, other
 * opcodes, headers and modes, DC, a refusal) goes to the Python reference before anything
 * has changed. tests/pds/test_c_cores.py compares fabric runs in both forms byte for byte.
 */
#include "slots.h"

enum { V_STARTS, V_ENDS, V_COVERED, V_N };
static const char *IV_NAMES[V_N] = {"_starts", "_ends", "covered"};

enum { M_REQUEST_LENGTH, M_INTERVALS, M_PACKETS, M_LAST, M_N };
static const char *MS_NAMES[M_N] = {"request_length", "intervals", "packets", "last"};

/* SesStandard */
enum { S_OPCODE, S_FLAGS, S_MESSAGE_ID, S_RI_GENERATION, S_JOB_ID, S_PID_ON_FEP,
       S_RESOURCE_INDEX, S_BUFFER_OFFSET, S_INITIATOR, S_MEMORY_KEY, S_MESSAGE_OFFSET,
       S_REQUEST_LENGTH, S_N };
static const char *SES_NAMES[S_N] = {
    "opcode", "flags", "message_id", "ri_generation", "job_id", "pid_on_fep",
    "resource_index", "buffer_offset", "initiator", "memory_key", "message_offset",
    "request_length"};

static Layout L_IV, L_MS, L_SES;
static PyTypeObject *target_type;
static PyObject *ref_handle, *mode_rud, *mode_rod, *reply_none;
static int64_t op_write, flag_som, flag_ie, flag_dc, flag_rel, perm_write;
static int configured;
static PyObject *s_ep, *s_profile, *s_operations, *s_modes, *s_ses, *s_max_message_size,
    *s_reassembly, *s_history, *s_active, *s_resources, *s_jobs, *s_generation, *s_enabled,
    *s_regions, *s_perms, *s_base_va, *s_buffer, *s_store, *s_conn, *s_now, *s_ep_now, *s_mode,
    *s_write_done;

static PyObject *ref(PyObject *const *args, Py_ssize_t nargs) {
    return PyObject_Vectorcall(ref_handle, args, nargs, NULL);
}

/* a.b.c... (new reference) */
/* the attributes read and written per packet, at their slots where the classes have them
 * (slots.h cached_attr: the offsets found once per class) */
static SlotCache c_ep, c_profile, c_operations, c_modes, c_reassembly, c_history, c_generation,
    c_enabled, c_regions, c_perms, c_base_va, c_buffer, c_active, c_store, c_conn, c_now,
    c_mode, c_ep_now, c_chain_ses[2], c_chain_res[2];

static PyObject *chain(PyObject *o, PyObject **names, int n, SlotCache *caches) {
    Py_INCREF(o);
    for (int i = 0; i < n && o != NULL; i++) {
        PyObject *next = cached_attr(o, names[i], &caches[i]);
        Py_DECREF(o);
        o = next;
    }
    return o;
}

/* d[key] for a dict (borrowed; NULL without an error: missing) */
static PyObject *dget(PyObject *d, PyObject *key) {
    if (!PyDict_Check(d))
        return NULL;
    return PyDict_GetItemWithError(d, key);
}

/* bisect.bisect_right (right) or bisect_left over a list of ints */
static int bisect(PyObject *list, int64_t x, int right, Py_ssize_t *out) {
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(list);
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        long long v = as_i64(PyList_GET_ITEM(list, mid));
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (right ? x < v : v >= x)
            hi = mid;
        else
            lo = mid + 1;
    }
    *out = lo;
    return 0;
}

static int list_int(PyObject *list, Py_ssize_t i, int64_t *out) {
    long long v = as_i64(PyList_GET_ITEM(list, i));
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* Intervals.contains: 1, 0, -1 error */
static int iv_contains(PyObject *iv, int64_t start, int64_t end) {
    PyObject *starts = SLOT(iv, L_IV, V_STARTS), *ends = SLOT(iv, L_IV, V_ENDS);
    if (end <= start)
        return 0;
    Py_ssize_t n = PyList_GET_SIZE(ends), i;
    int64_t last, e;
    if (!n)
        return 0;
    if (list_int(ends, n - 1, &last) < 0)
        return -1;
    if (start >= last)
        return 0;
    if (bisect(starts, start, 1, &i) < 0)
        return -1;
    i -= 1;
    if (i < 0)
        return 0;
    if (list_int(ends, i, &e) < 0)
        return -1;
    return e >= end;
}

/* list[i] = v (v: an int) */
static int set_int(PyObject *list, Py_ssize_t i, int64_t v) {
    PyObject *o = PyLong_FromLongLong(v);
    return o ? PyList_SetItem(list, i, o) : -1; /* steals o */
}

/* Intervals.add(start, end) (end > start): every case, as the Python does it */
static int iv_add(PyObject *iv, int64_t start, int64_t end) {
    PyObject *starts = SLOT(iv, L_IV, V_STARTS), *ends = SLOT(iv, L_IV, V_ENDS);
    Py_ssize_t n = PyList_GET_SIZE(ends), i, j;
    int64_t last, added;
    if (n && list_int(ends, n - 1, &last) < 0)
        return -1;
    if (n && start >= last) { /* at or after the last range: the usual case */
        if (start == last) {
            if (set_int(ends, n - 1, end) < 0)
                return -1;
        } else {
            PyObject *s = PyLong_FromLongLong(start), *e = PyLong_FromLongLong(end);
            int rc = (s && e) ? PyList_Append(starts, s) : -1;
            if (rc == 0)
                rc = PyList_Append(ends, e);
            Py_XDECREF(s);
            Py_XDECREF(e);
            if (rc < 0)
                return -1;
        }
        return add_i64(iv, &L_IV, V_COVERED, end - start);
    }
    if (bisect(ends, start, 0, &i) < 0 || bisect(starts, end, 1, &j) < 0)
        return -1;
    if (j == i + 1) { /* touches one range */
        int64_t s0, e0;
        if (list_int(starts, i, &s0) < 0 || list_int(ends, i, &e0) < 0)
            return -1;
        int64_t ns = s0 < start ? s0 : start, ne = e0 > end ? e0 : end;
        if (set_int(starts, i, ns) < 0 || set_int(ends, i, ne) < 0)
            return -1;
        added = (ne - ns) - (e0 - s0);
    } else {
        int64_t old = 0, a, b;
        for (Py_ssize_t k = i; k < j; k++) {
            if (list_int(starts, k, &a) < 0 || list_int(ends, k, &b) < 0)
                return -1;
            old += b - a;
        }
        if (i < j) {
            if (list_int(starts, i, &a) < 0 || list_int(ends, j - 1, &b) < 0)
                return -1;
            if (a < start)
                start = a;
            if (b > end)
                end = b;
        }
        PyObject *ls = Py_BuildValue("[L]", (long long)start);
        PyObject *le = Py_BuildValue("[L]", (long long)end);
        int rc = (ls && le) ? PyList_SetSlice(starts, i, j, ls) : -1;
        if (rc == 0)
            rc = PyList_SetSlice(ends, i, j, le);
        Py_XDECREF(ls);
        Py_XDECREF(le);
        if (rc < 0)
            return -1;
        added = (end - start) - old;
    }
    return add_i64(iv, &L_IV, V_COVERED, added);
}

/* a payload this core takes: bytes, or a one-dimensional memoryview of bytes (the view
 * an end point's receive path decodes, uet/native/codec_core.c) */
static int is_octets(PyObject *p) {
    if (PyBytes_CheckExact(p))
        return 1;
    if (!PyMemoryView_Check(p) || ((PyMemoryViewObject *)p)->flags & _Py_MEMORYVIEW_RELEASED)
        return 0; /* a released view: the Python raises, as bytes() of it does */
    return byte_buffer(PyMemoryView_GET_BUFFER(p));
}

/* handle(target, src, ses, ext, payload, mode, psn, conn, now, refuse) */
static PyObject *k_handle(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "ses core not configured");
        return NULL;
    }
    if (nargs != 10 || !Py_IS_TYPE(args[0], target_type) || !PyUnicode_CheckExact(args[1]) ||
        !Py_IS_TYPE(args[2], L_SES.type) || !is_octets(args[4]) ||
        !(args[5] == mode_rud || args[5] == mode_rod) || args[9] != Py_None ||
        !is_int(args[7]) || !is_int(args[8]))
        return ref(args, nargs);
    PyObject *target = args[0], *src = args[1], *ses = args[2], *payload = args[4];
    PyObject *mode = args[5], *conn = args[7], *now = args[8];
    int64_t op, flags, moff = 0, rlen, bo, memkey, gen, perms, base_va, start;
    if (get_i64(ses, &L_SES, S_OPCODE, &op) < 0 || get_i64(ses, &L_SES, S_FLAGS, &flags) < 0)
        return NULL;
    if (op != op_write || flags & (flag_ie | flag_dc))
        return ref(args, nargs);
    if (!(flags & flag_som) && get_i64(ses, &L_SES, S_MESSAGE_OFFSET, &moff) < 0)
        return NULL;
    if (get_i64(ses, &L_SES, S_REQUEST_LENGTH, &rlen) < 0 ||
        get_i64(ses, &L_SES, S_BUFFER_OFFSET, &bo) < 0 ||
        get_i64(ses, &L_SES, S_MEMORY_KEY, &memkey) < 0 ||
        get_i64(ses, &L_SES, S_RI_GENERATION, &gen) < 0)
        return NULL;
    Py_ssize_t plen = PyBytes_CheckExact(payload) ? PyBytes_GET_SIZE(payload)
                                                  : PyMemoryView_GET_BUFFER(payload)->len;
    int64_t end = moff + plen;
    if (!plen || end > rlen)
        return ref(args, nargs);
    PyObject *result = NULL, *key = NULL, *ep = NULL, *profile = NULL, *x = NULL,
             *reas = NULL, *state = NULL, *mr = NULL, *buffer = NULL;
    int t;
    /* _dispatch: what the profile allows */
    if ((ep = cached_attr(target, s_ep, &c_ep)) == NULL ||
        (profile = cached_attr(ep, s_profile, &c_profile)) == NULL)
        goto done;
    if ((x = cached_attr(profile, s_operations, &c_operations)) == NULL ||
        (t = PySequence_Contains(x, SLOT(ses, L_SES, S_OPCODE))) < 0)
        goto done;
    Py_CLEAR(x);
    if (!t)
        goto reference;
    if ((x = cached_attr(profile, s_modes, &c_modes)) == NULL || (t = PySequence_Contains(x, mode)) < 0)
        goto done;
    Py_CLEAR(x);
    if (!t)
        goto reference;
    {
        PyObject *names[2] = {s_ses, s_max_message_size};
        int64_t maxlen;
        if ((x = chain(profile, names, 2, c_chain_ses)) == NULL)
            goto done;
        maxlen = as_i64(x);
        Py_CLEAR(x);
        if (maxlen == -1 && PyErr_Occurred())
            goto done;
        if (rlen > maxlen)
            goto reference;
    }
    /* _admit: a message in progress, not finished; its resource */
    key = PyTuple_Pack(5, src, conn, SLOT(ses, L_SES, S_INITIATOR), SLOT(ses, L_SES, S_JOB_ID),
                       SLOT(ses, L_SES, S_MESSAGE_ID));
    if (key == NULL || (reas = cached_attr(target, s_reassembly, &c_reassembly)) == NULL)
        goto done;
    if ((x = cached_attr(reas, s_history, &c_history)) == NULL || (t = PySequence_Contains(x, key)) < 0)
        goto done;
    Py_CLEAR(x);
    if (t)
        goto reference; /* a late packet of a finished message */
    {
        PyObject *names[2] = {s_resources, s_jobs};
        if ((x = chain(ep, names, 2, c_chain_res)) == NULL)
            goto done;
        PyObject *pids = dget(x, SLOT(ses, L_SES, S_JOB_ID));
        PyObject *idx = pids ? dget(pids, SLOT(ses, L_SES, S_PID_ON_FEP)) : NULL;
        PyObject *res = idx ? dget(idx, SLOT(ses, L_SES, S_RESOURCE_INDEX)) : NULL;
        Py_XINCREF(res);
        Py_CLEAR(x);
        if (res == NULL) {
            if (PyErr_Occurred())
                goto done;
            goto reference; /* BAD_JOB_ID / BAD_PID / BAD_INDEX */
        }
        int64_t rgen;
        int enabled = -1;
        PyObject *g = cached_attr(res, s_generation, &c_generation), *en = NULL, *regions = NULL;
        if (g != NULL && (rgen = as_i64(g), !PyErr_Occurred()) &&
            (en = cached_attr(res, s_enabled, &c_enabled)) != NULL)
            enabled = PyObject_IsTrue(en);
        if (enabled > 0 && rgen == gen)
            regions = cached_attr(res, s_regions, &c_regions);
        Py_XDECREF(g);
        Py_XDECREF(en);
        Py_DECREF(res);
        if (PyErr_Occurred()) {
            Py_XDECREF(regions);
            goto done;
        }
        if (regions == NULL)
            goto reference; /* BAD_GENERATION / DISABLED */
        /* check_region: the key, the permission, the bounds */
        PyObject *mkey = SLOT(ses, L_SES, S_MEMORY_KEY);
        mr = dget(regions, mkey);
        Py_XINCREF(mr);
        Py_DECREF(regions);
        if (mr == NULL) {
            if (PyErr_Occurred())
                goto done;
            goto reference; /* BAD_MKEY */
        }
    }
    if ((x = cached_attr(mr, s_perms, &c_perms)) == NULL)
        goto done;
    perms = as_i64(x);
    Py_CLEAR(x);
    if (perms == -1 && PyErr_Occurred())
        goto done;
    if (!(perms & perm_write))
        goto reference;
    if (flags & flag_rel) {
        start = bo;
    } else {
        if ((x = cached_attr(mr, s_base_va, &c_base_va)) == NULL)
            goto done;
        base_va = as_i64(x);
        Py_CLEAR(x);
        if (base_va == -1 && PyErr_Occurred())
            goto done;
        start = bo - base_va;
    }
    if ((buffer = cached_attr(mr, s_buffer, &c_buffer)) == NULL)
        goto done;
    Py_ssize_t blen = PyObject_Length(buffer);
    if (blen < 0)
        goto done;
    if (start < 0 || start + rlen > blen)
        goto reference; /* BAD_ADDR */
    /* the message's reassembly state: known, and these bytes are new */
    if ((x = cached_attr(reas, s_active, &c_active)) == NULL)
        goto done;
    state = dget(x, key);
    Py_XINCREF(state);
    Py_CLEAR(x);
    if (state == NULL) {
        if (PyErr_Occurred())
            goto done;
        goto reference; /* its first packet here: the Python starts it */
    }
    if (!Py_IS_TYPE(state, L_MS.type))
        goto reference;
    PyObject *iv = SLOT(state, L_MS, M_INTERVALS);
    if (iv == NULL || !Py_IS_TYPE(iv, L_IV.type) || !PyList_CheckExact(SLOT(iv, L_IV, V_STARTS)) ||
        !PyList_CheckExact(SLOT(iv, L_IV, V_ENDS)))
        goto reference;
    if ((t = iv_contains(iv, moff, end)) < 0)
        goto done;
    if (t)
        goto reference; /* a duplicate */
    /* ---- from here on the packet is taken: Target.handle's context, then _write */
    if (cached_set(target, s_conn, conn, &c_conn) < 0 || cached_set(target, s_now, now, &c_now) < 0 ||
        cached_set(target, s_mode, mode, &c_mode) < 0 || cached_set(ep, s_ep_now, now, &c_ep_now) < 0)
        goto done;
    if (iv_add(iv, moff, end) < 0)
        goto done;
    if (add_i64(state, &L_MS, M_PACKETS, 1) < 0 ||
        put(state, &L_MS, M_LAST, Py_NewRef(now)) < 0)
        goto done;
    if ((x = cached_attr(mr, s_store, &c_store)) == NULL || (t = PyObject_IsTrue(x)) < 0)
        goto done;
    Py_CLEAR(x);
    if (t) {
        PyObject *lo = PyLong_FromLongLong(start + moff), *hi = PyLong_FromLongLong(start + end);
        PyObject *sl = (lo && hi) ? PySlice_New(lo, hi, NULL) : NULL;
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        int rc = sl ? PyObject_SetItem(buffer, sl, payload) : -1;
        Py_XDECREF(sl);
        if (rc < 0)
            goto done;
    }
    int64_t covered, need;
    if (get_i64(iv, &L_IV, V_COVERED, &covered) < 0 ||
        get_i64(state, &L_MS, M_REQUEST_LENGTH, &need) < 0)
        goto done;
    if (covered >= need) { /* the message is complete: its response (Python) */
        PyObject *a[4] = {target, key, ses, SLOT(ses, L_SES, S_REQUEST_LENGTH)};
        result = mc_call(s_write_done, a, 4, NULL);
    } else {
        result = Py_NewRef(reply_none);
    }
    goto done;
reference:
    result = ref(args, nargs);
done:
    Py_XDECREF(key);
    Py_XDECREF(ep);
    Py_XDECREF(profile);
    Py_XDECREF(x);
    Py_XDECREF(reas);
    Py_XDECREF(state);
    Py_XDECREF(mr);
    Py_XDECREF(buffer);
    return result;
}

/* configure(Target, Intervals, MessageState, SesStandard, constants, reference) */
static PyObject *k_configure(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyType_Check(args[0]) || !PyDict_Check(args[4]) ||
        !PyCallable_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "configure(Target, Intervals, MessageState, SesStandard, constants, "
                        "reference)");
        return NULL;
    }
    configured = 0;
    static const char *names[] = {"rud", "rod", "none", "write", "som", "ie", "dc", "rel",
                                  "perm_write"};
    PyObject *v[9];
    for (int i = 0; i < 9; i++)
        if ((v[i] = PyDict_GetItemString(args[4], names[i])) == NULL) {
            PyErr_Format(PyExc_ValueError, "configure: no constant '%s'", names[i]);
            return NULL;
        }
    int64_t iv[6];
    for (int i = 0; i < 6; i++)
        if ((iv[i] = as_i64(v[3 + i])) == -1 && PyErr_Occurred())
            return NULL;
    if (layout(&L_IV, args[1], IV_NAMES, V_N) < 0 || layout(&L_MS, args[2], MS_NAMES, M_N) < 0 ||
        layout(&L_SES, args[3], SES_NAMES, S_N) < 0)
        return NULL;
    Py_XSETREF(target_type, (PyTypeObject *)Py_NewRef(args[0]));
    Py_XSETREF(mode_rud, Py_NewRef(v[0]));
    Py_XSETREF(mode_rod, Py_NewRef(v[1]));
    Py_XSETREF(reply_none, Py_NewRef(v[2]));
    Py_XSETREF(ref_handle, Py_NewRef(args[5]));
    op_write = iv[0];
    flag_som = iv[1];
    flag_ie = iv[2];
    flag_dc = iv[3];
    flag_rel = iv[4];
    perm_write = iv[5];
    configured = 1;
    Py_RETURN_NONE;
}

KW_ENTRY(k_handle_kw, k_handle, ref_handle)

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))k_configure, METH_FASTCALL,
     "configure(Target, Intervals, MessageState, SesStandard, constants, reference)"},
    {"handle", (PyCFunction)(void (*)(void))k_handle_kw, METH_FASTCALL | METH_KEYWORDS,
     "handle(target, src, ses, ext, payload, mode, psn, conn, now, refuse): Target.handle"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_ses_core",
                                    "The SES target's WRITE packets in C", -1, methods};

PyMODINIT_FUNC PyInit__ses_core(void) {
    if (intern_str(&s_ep, "ep") || intern_str(&s_profile, "profile") ||
        intern_str(&s_operations, "operations") || intern_str(&s_modes, "modes") ||
        intern_str(&s_ses, "ses") || intern_str(&s_max_message_size, "max_message_size") ||
        intern_str(&s_reassembly, "reassembly") || intern_str(&s_history, "_history") ||
        intern_str(&s_active, "active") || intern_str(&s_resources, "resources") ||
        intern_str(&s_jobs, "_jobs") || intern_str(&s_generation, "generation") ||
        intern_str(&s_enabled, "enabled") || intern_str(&s_regions, "regions") ||
        intern_str(&s_perms, "perms") || intern_str(&s_base_va, "base_va") ||
        intern_str(&s_buffer, "buffer") || intern_str(&s_store, "store") ||
        intern_str(&s_conn, "_conn") || intern_str(&s_now, "_now") ||
        intern_str(&s_ep_now, "now") ||
        intern_str(&s_mode, "_mode") || intern_str(&s_write_done, "_write_done"))
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    static const char *const names[] = {"handle"};
    if (m == NULL || add_instance_methods(m, names, 1) < 0) {
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
