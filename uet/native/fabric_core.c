/* The fabric's per-frame path in C: switch ports, the transmitter of every port, channels.
 *
 * Base types of the Python classes in uet.fabric (port.py, switch.py, link.py), which keep
 * everything that is not per frame (PFC, trimming, taps' files, counters, reports):
 *
 *   PortCore       the transmitter: kick / _wake / _start (Port._start of port.py's
 *                  PyPortCore), the port's counters and pause table as members;
 *   SwitchPortCore a switch port: forwarding (on_frame: host route, ECMP hash, class),
 *                  the per-class FIFOs with their byte limits and high-water marks, ECN
 *                  marking at dequeue (switch.py's PySwitchPortCore);
 *   NicCore        a NIC's glue around its end point: receive, the transmit order
 *                  (held, control, data), the end point's timer event (nic.py's PyNicCore);
 *   ChannelCore    one direction of a cable: rate, delay, counters, far end;
 *   SwitchCore     a switch's forwarding tables as members (direct routes, ECMP cache, the
 *                  DSCP -> class table, IP protocol of native IP, the ECN generator).
 *
 * The Python classes of switch.py / nic.py / port.py / link.py (PySwitchPortCore, PyNicCore,
 * PyPortCore, PyChannelCore) are the reference: UET_PURE_PYTHON=1 runs them, and the same run gives the
 * same events in the same order, byte for byte (tests/fabric/test_fabric_core.py). Anything
 * out of the ordinary goes back to Python: a frame too short for its IP header, PAUSE
 * frames, unknown ethertypes, a route not cached yet, PFC accounting, a full queue
 * (trimming or drop), impaired channels, taps. Frames stay the bytes objects the NICs made;
 * an ECN mark makes a new one with CE set and the IPv4 checksum updated (RFC 1624).
 *
 * A frame arriving at a switch port or NIC, a transmitter waking up and a NIC's timer are
 * events of the C loop (EV_ARRIVE, EV_WAKE, EV_TIMER) run here without a Python call of
 * the fabric's own (the end point's methods are called, of course). With another loop (the Python one,
 * or any object with push(t, fn, arg) and now), the same pushes go through its push.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#include "event_core.h"
#include "method_cache.h"
#include "pyint.h"

#define NTC 8
enum { PORT_GENERIC = 0, PORT_SWITCH = 1, PORT_NIC = 2 };
#define UNLIMITED ((int64_t)1 << 62)

static PyObject *s_dequeue, *s_on_pause, *s_drop, *s_route, *s_overflow, *s_account,
    *s_release, *s_on_frame_py, *s_popleft, *s_on_frame, *s_wake, *s_tx, *s_rx, *s_now,
    *s_random, *s_ethertype, *s_no_route, *s_pfc_headroom, *s_enqueue, *s_next_deadline,
    *s_handle_timer, *s_pop_control, *s_pop_data, *s_append, *s_receive;

/* ------------------------------------------------------------------ types */

/* The fields a frame's hop reads and writes come first, together (at 1,024 hosts a port's
 * memory is cold when its next frame comes: the fewer cache lines a hop touches, the
 * fewer misses); what configuration, PFC and reports read comes after. */
typedef struct {
    PyObject_HEAD
    char kind; /* PORT_GENERIC, PORT_SWITCH (SwitchPortCore), PORT_NIC (NicCore) */
    char wake_pending;
    int64_t free_at, queued, tx_frames, tx_bytes, rx_frames, rx_bytes, pause_rx;
    PyObject *channel, *push, *taps, *mac_ctl, *paused_until, *loop;
    PyObject *name, *log, *mac, *pause_started, *paused_ps, *drops;
    int64_t pause_tx;
    PyObject *weakrefs;
} PortCore;

typedef struct {
    PyObject *data;
    PyObject *ingress;
} QItem;

typedef struct {
    QItem *buf;
    Py_ssize_t head, len, cap;
} Ring;

/* One traffic class of a switch port: what a frame of the class reads, side by side. */
typedef struct {
    Ring q;
    int64_t qbytes, limit, kmin, kmax, hwm;
} PortClass;

typedef struct {
    PortCore port;
    PyObject *switch_, *pfc_in;
    uint8_t nonempty; /* bit c: class c holds frames (the dequeue reads no empty class) */
    uint8_t prio[NTC];
    int nprio;
    int64_t ecn_marked;
    PortClass cls[NTC];
} SwitchPortCore;

typedef struct {
    PortCore port;
    PyObject *ep, *held, *tos_list, *on_change;
    int64_t held_n, held_hwm, timers, delivered, timer_at;
    char has_timer;
    int data_tc, control_tc;
    uint8_t tos_tc[256];
    uint8_t prio[NTC];
    int nprio;
} NicCore;

typedef struct {
    PyObject_HEAD
    PyObject *push, *rx, *rx_on_frame, *carry;
    int64_t rate_bps, ppb, delay_ps, tx_frames, tx_bytes;
    char clean, rx_native; /* rx_native: the far end is a SwitchPortCore or NicCore */
} ChannelCore;

/* A switch's table of IPv4 destinations already looked up (route_lookup): slot -> one of
 * the switch's distinct (direct, host-route) answers. */
typedef struct {
    uint32_t ip;
    uint16_t answer; /* index into the switch's answers */
    uint16_t used;
} RouteSlot;

typedef struct {
    PyObject *dval, *cands; /* borrowed from the tables (NULL: absent) */
} RouteAnswer;

typedef struct {
    PyObject_HEAD
    PyObject *direct, *cache, *rng, *tos_list, *routes;
    int ip_proto;
    unsigned long long ecmp_seed;
    uint8_t tos_tc[256];
    /* route_lookup's table: valid while direct and routes are the dicts it was filled from,
     * unchanged since (their version tags) */
    RouteSlot *rt;
    RouteAnswer *rt_answers;
    uint32_t rt_cap, rt_n, rt_nanswers, rt_acap;
    const void *rt_direct, *rt_routes;
    uint64_t rt_vdirect, rt_vroutes;
} SwitchCore;

/* The cyclic-GC pair of a type from the list of its object fields: T_traverse visits them
 * (then returns `more`, e.g. the base type's traverse), T_clear_own clears them. */
#define GC_VISIT_(f) Py_VISIT(self->f);
#define GC_CLEAR_(f) Py_CLEAR(self->f);
#define GC_FUNCS(T, FIELDS, more)                                                            \
    static int T##_traverse(T *self, visitproc visit, void *arg) {                           \
        FIELDS(GC_VISIT_)                                                                    \
        return (more);                                                                       \
    }                                                                                        \
    static int T##_clear_own(T *self) {                                                      \
        FIELDS(GC_CLEAR_)                                                                    \
        return 0;                                                                            \
    }

static PyTypeObject PortCoreType, SwitchPortCoreType, NicCoreType, ChannelCoreType, SwitchCoreType;

/* ------------------------------------------------------------------ helpers */

static inline int is_c_loop(PyObject *loop) {
    return loop != NULL && Py_IS_TYPE(loop, &EventLoopType);
}

static int loop_now(PyObject *loop, int64_t *out) {
    if (is_c_loop(loop)) {
        *out = ((EventLoop *)loop)->now;
        return 0;
    }
    if (loop == NULL) {
        PyErr_SetString(PyExc_AttributeError, "port has no event loop");
        return -1;
    }
    PyObject *v = PyObject_GetAttr(loop, s_now);
    if (v == NULL)
        return -1;
    long long t = as_i64(v);
    Py_DECREF(v);
    if (t == -1 && PyErr_Occurred())
        return -1;
    *out = t;
    return 0;
}

/* push(t, fn, arg) through a loop's Python interface */
static int py_push(PyObject *push, int64_t t, PyObject *fn, PyObject *arg) {
    if (push == NULL || push == Py_None) {
        PyErr_SetString(PyExc_AttributeError, "port has no push");
        return -1;
    }
    PyObject *pt = PyLong_FromLongLong(t);
    if (pt == NULL)
        return -1;
    PyObject *args[3] = {pt, fn, arg};
    PyObject *r = PyObject_Vectorcall(push, args, 3, NULL);
    Py_DECREF(pt);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int call_method_drop(PyObject *self, PyObject *reason, PyObject *data) {
    PyObject *r = mc_call2(self, s_drop, reason, data);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* o.name(a, b[, c]) with ints a, b: PFC accounting and the rare Python paths */
static PyObject *call_ints(PyObject *o, PyObject *name, PyObject *first, long long a,
                           long long b, PyObject *last) {
    PyObject *pa = PyLong_FromLongLong(a), *pb = PyLong_FromLongLong(b), *r = NULL;
    if (pa != NULL && pb != NULL) {
        PyObject *args[5]; /* o, [first,] pa, pb[, last] (as CallMethodObjArgs: to a NULL) */
        size_t n = 0;
        args[n++] = o;
        if (first != NULL)
            args[n++] = first;
        args[n++] = pa;
        args[n++] = pb;
        if (last != NULL)
            args[n++] = last;
        r = mc_call(name, args, n, NULL);
    }
    Py_XDECREF(pa);
    Py_XDECREF(pb);
    return r;
}

/* Call every tap(now, data, direction) (Port.taps: a list, usually empty). A list is walked
 * by index, as its iterator would (the size re-read each step, so a tap may change it),
 * without an iterator object per frame; any other iterable through its iterator. */
static int run_taps(PyObject *taps, int64_t now, PyObject *data, PyObject *direction) {
    if (taps == NULL || taps == Py_None)
        return 0;
    int list = PyList_CheckExact(taps);
    if (list && PyList_GET_SIZE(taps) == 0)
        return 0;
    PyObject *it = list ? NULL : PyObject_GetIter(taps);
    if (!list && it == NULL)
        return -1;
    PyObject *pt = PyLong_FromLongLong(now);
    if (pt == NULL) {
        Py_XDECREF(it);
        return -1;
    }
    Py_INCREF(taps);
    int rc = 0;
    for (Py_ssize_t i = 0;; i++) {
        PyObject *tap;
        if (list) {
            if (i >= PyList_GET_SIZE(taps))
                break;
            tap = Py_NewRef(PyList_GET_ITEM(taps, i));
        } else if ((tap = PyIter_Next(it)) == NULL) {
            rc = PyErr_Occurred() ? -1 : 0;
            break;
        }
        PyObject *args[3] = {pt, data, direction};
        PyObject *r = PyObject_Vectorcall(tap, args, 3, NULL);
        Py_DECREF(tap);
        if (r == NULL) {
            rc = -1;
            break;
        }
        Py_DECREF(r);
    }
    Py_DECREF(taps);
    Py_DECREF(pt);
    Py_XDECREF(it);
    return rc;
}

static inline int64_t ser_ps(int64_t n, int64_t rate_bps, int *err) {
    if (rate_bps <= 0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "channel rate must be positive");
        *err = 1;
        return 0;
    }
    __int128 bits_ps = (__int128)n * 8000000000000LL;
    return (int64_t)((bits_ps + rate_bps - 1) / rate_bps);
}

static int frame_len(PyObject *data, Py_ssize_t *n) {
    if (PyBytes_CheckExact(data)) {
        *n = PyBytes_GET_SIZE(data);
        return 0;
    }
    Py_ssize_t k = PyObject_Length(data);
    if (k < 0)
        return -1;
    *n = k;
    return 0;
}

/* A TOS byte -> traffic class table (256 entries in 0..7): kept as given in *keep and as
 * a C array for the per-frame path. */
static int set_tos_table(PyObject *v, uint8_t *table, PyObject **keep) {
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "tos_tc cannot be deleted");
        return -1;
    }
    PyObject *seq = PySequence_Fast(v, "tos_tc must be a sequence of 256 classes");
    if (seq == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != 256) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "tos_tc must have 256 entries");
        return -1;
    }
    uint8_t t[256];
    for (int i = 0; i < 256; i++) {
        long x = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (x < 0 || x >= NTC) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "tos_tc: class %ld not in 0..7", x);
            return -1;
        }
        t[i] = (uint8_t)x;
    }
    Py_DECREF(seq);
    memcpy(table, t, sizeof t);
    Py_INCREF(v);
    Py_XSETREF(*keep, v);
    return 0;
}

/* The classes in strict priority order, as a tuple. */
static PyObject *prio_tuple(const uint8_t *prio, int nprio) {
    PyObject *t = PyTuple_New(nprio);
    if (t == NULL)
        return NULL;
    for (int i = 0; i < nprio; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromLong(prio[i])); /* small ints: cannot fail */
    return t;
}

/* Classes in strict priority order (at most 8, each in 0..7). */
static int set_prio(PyObject *v, uint8_t *prio, int *nprio) {
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "prio cannot be deleted");
        return -1;
    }
    PyObject *seq = PySequence_Fast(v, "prio must be a sequence of traffic classes");
    if (seq == NULL)
        return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    if (k > NTC) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "prio: at most 8 traffic classes");
        return -1;
    }
    uint8_t pr[NTC];
    for (Py_ssize_t i = 0; i < k; i++) {
        long x = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (x < 0 || x >= NTC) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "prio: traffic class %ld not in 0..7", x);
            return -1;
        }
        pr[i] = (uint8_t)x;
    }
    Py_DECREF(seq);
    memcpy(prio, pr, sizeof pr);
    *nprio = (int)k;
    return 0;
}

/* ------------------------------------------------------------------ PortCore */

static PyObject *swport_dequeue(SwitchPortCore *sp, int64_t now);
static PyObject *nic_dequeue(NicCore *n, int64_t now);

static int push_wake(PortCore *p, int64_t t) {
    if (is_c_loop(p->loop))
        return ec_push((EventLoop *)p->loop, t, EV_WAKE, (PyObject *)p, Py_None);
    PyObject *m = PyObject_GetAttr((PyObject *)p, s_wake);
    if (m == NULL)
        return -1;
    int rc = py_push(p->push, t, m, Py_None);
    Py_DECREF(m);
    return rc;
}

static int push_arrival(PortCore *p, ChannelCore *ch, int64_t t, PyObject *data) {
    if (is_c_loop(p->loop)) {
        if (ch->rx_native)
            return ec_push((EventLoop *)p->loop, t, EV_ARRIVE, ch->rx, data);
        if (ch->rx_on_frame != NULL)
            return ec_push((EventLoop *)p->loop, t, EV_CALL, ch->rx_on_frame, data);
    }
    PyObject *m = ch->rx_on_frame;
    if (m != NULL)
        Py_INCREF(m);
    else if ((m = PyObject_GetAttr(ch->rx ? ch->rx : Py_None, s_on_frame)) == NULL)
        return -1;
    int rc = py_push(p->push, t, m, data);
    Py_DECREF(m);
    return rc;
}

static int mac_ctl_pending(PortCore *p) {
    if (p->mac_ctl == NULL || p->mac_ctl == Py_None)
        return 0;
    return PyObject_IsTrue(p->mac_ctl);
}

/* Port._start: put the next frame (PFC first) on the channel. */
static int port_start(PortCore *p, int64_t now) {
    PyObject *data;
    int ctl = mac_ctl_pending(p);
    if (ctl < 0)
        return -1;
    if (ctl) {
        data = mc_call0(p->mac_ctl, s_popleft);
        if (data == NULL)
            return -1;
        p->pause_tx++;
    } else {
        if (p->kind == PORT_SWITCH || p->kind == PORT_NIC) {
            data = p->kind == PORT_SWITCH ? swport_dequeue((SwitchPortCore *)p, now)
                                          : nic_dequeue((NicCore *)p, now);
            if (data == NULL)
                return PyErr_Occurred() ? -1 : 0;
        } else {
            PyObject *pt = PyLong_FromLongLong(now);
            if (pt == NULL)
                return -1;
            data = mc_call1((PyObject *)p, s_dequeue, pt);
            Py_DECREF(pt);
            if (data == NULL)
                return -1;
            if (data == Py_None) {
                Py_DECREF(data);
                return 0;
            }
        }
    }
    PyObject *cho = p->channel;
    if (cho == NULL || !PyObject_TypeCheck(cho, &ChannelCoreType)) {
        Py_DECREF(data);
        PyErr_SetString(PyExc_AttributeError, "port has no channel (not connected)");
        return -1;
    }
    ChannelCore *ch = (ChannelCore *)cho;
    Py_ssize_t n;
    if (frame_len(data, &n) < 0) {
        Py_DECREF(data);
        return -1;
    }
    int err = 0;
    int64_t end = now + (ch->ppb ? (int64_t)n * ch->ppb : ser_ps(n, ch->rate_bps, &err));
    if (err) {
        Py_DECREF(data);
        return -1;
    }
    p->free_at = end;
    p->tx_frames++;
    p->tx_bytes += n;
    if (run_taps(p->taps, now, data, s_tx) < 0) {
        Py_DECREF(data);
        return -1;
    }
    Py_INCREF(ch);
    int rc;
    if (ch->clean) {
        ch->tx_frames++;
        ch->tx_bytes += n;
        rc = push_arrival(p, ch, end + ch->delay_ps, data);
    } else if (ch->carry == NULL || ch->carry == Py_None) {
        PyErr_SetString(PyExc_AttributeError, "channel has no carry");
        rc = -1;
    } else {
        PyObject *t0 = PyLong_FromLongLong(now), *t1 = PyLong_FromLongLong(end);
        if (t0 == NULL || t1 == NULL) {
            rc = -1;
        } else {
            PyObject *args[3] = {data, t0, t1};
            PyObject *r = PyObject_Vectorcall(ch->carry, args, 3, NULL);
            rc = r == NULL ? -1 : 0;
            Py_XDECREF(r);
        }
        Py_XDECREF(t0);
        Py_XDECREF(t1);
    }
    Py_DECREF(ch);
    Py_DECREF(data);
    if (rc < 0)
        return -1;
    if (p->queued == 0) {
        ctl = mac_ctl_pending(p);
        if (ctl <= 0)
            return ctl;
    }
    p->wake_pending = 1;
    return push_wake(p, end);
}

static int port_kick(PortCore *p) {
    if (p->wake_pending)
        return 0;
    int64_t now;
    if (loop_now(p->loop, &now) < 0)
        return -1;
    if (now >= p->free_at)
        return port_start(p, now);
    p->wake_pending = 1;
    return push_wake(p, p->free_at);
}

static PyObject *PortCore_kick(PortCore *self, PyObject *Py_UNUSED(ignored)) {
    if (port_kick(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *PortCore_wake(PortCore *self, PyObject *Py_UNUSED(arg)) {
    int64_t now;
    self->wake_pending = 0;
    if (loop_now(self->loop, &now) < 0 || port_start(self, now) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *PortCore_start(PortCore *self, PyObject *arg) {
    long long now = as_i64(arg);
    if (now == -1 && PyErr_Occurred())
        return NULL;
    if (port_start(self, now) < 0)
        return NULL;
    Py_RETURN_NONE;
}

#define PORT_OBJS(X)                                                                          \
    X(name) X(loop) X(push) X(log) X(channel) X(mac) X(paused_until) X(pause_started)          \
        X(paused_ps) X(mac_ctl) X(drops) X(taps)

GC_FUNCS(PortCore, PORT_OBJS, 0)

static int SwitchPortCore_clear(SwitchPortCore *self);
static int NicCore_clear(NicCore *self);

static void PortCore_dealloc(PortCore *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->kind == PORT_SWITCH)
        SwitchPortCore_clear((SwitchPortCore *)self);
    else if (self->kind == PORT_NIC)
        NicCore_clear((NicCore *)self);
    else
        PortCore_clear_own(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define OBJ_MEMBER(T, f, doc) {#f, T_OBJECT, offsetof(T, f), 0, doc}
#define I64_MEMBER(T, f, doc) {#f, T_LONGLONG, offsetof(T, f), 0, doc}

static PyMemberDef PortCore_members[] = {
    OBJ_MEMBER(PortCore, name, "interface name"),
    OBJ_MEMBER(PortCore, loop, "the event core this port runs on"),
    OBJ_MEMBER(PortCore, push, "the loop's push(t, fn, arg)"),
    OBJ_MEMBER(PortCore, log, "the event log"),
    OBJ_MEMBER(PortCore, channel, "the outgoing channel (a ChannelCore)"),
    OBJ_MEMBER(PortCore, mac, "MAC address (6 bytes)"),
    OBJ_MEMBER(PortCore, paused_until, "per class: paused by the peer until (ps)"),
    OBJ_MEMBER(PortCore, pause_started, "per class: when the current pause began, or -1"),
    OBJ_MEMBER(PortCore, paused_ps, "per class: time paused so far (ps)"),
    OBJ_MEMBER(PortCore, mac_ctl, "PFC frames waiting to go before all traffic (deque)"),
    OBJ_MEMBER(PortCore, drops, "drops by reason (Counter)"),
    OBJ_MEMBER(PortCore, taps, "tap(now, frame, direction) callables"),
    I64_MEMBER(PortCore, free_at, "the transmitter is busy until (ps)"),
    I64_MEMBER(PortCore, tx_frames, "frames sent"),
    I64_MEMBER(PortCore, tx_bytes, "bytes sent"),
    I64_MEMBER(PortCore, rx_frames, "frames received"),
    I64_MEMBER(PortCore, rx_bytes, "bytes received"),
    I64_MEMBER(PortCore, pause_rx, "PFC frames received"),
    I64_MEMBER(PortCore, pause_tx, "PFC frames sent"),
    I64_MEMBER(PortCore, queued, "frames waiting (a NIC keeps 1: its end point may have more)"),
    {"wake_pending", T_BOOL, offsetof(PortCore, wake_pending), 0, "a wake-up is scheduled"},
    {NULL},
};

static PyMethodDef PortCore_methods[] = {
    {"kick", (PyCFunction)PortCore_kick, METH_NOARGS,
     "Start transmitting if idle; else make sure a wake-up is pending."},
    {"_wake", (PyCFunction)PortCore_wake, METH_O, "The transmitter's wake-up event."},
    {"_start", (PyCFunction)PortCore_start, METH_O, "_start(now): send the next frame."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PortCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "uet.native._event_core.PortCore",
    .tp_doc = "A port's transmitter in C (base of uet.fabric.port.Port's ports).",
    .tp_basicsize = sizeof(PortCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)PortCore_dealloc,
    .tp_traverse = (traverseproc)PortCore_traverse,
    .tp_clear = (inquiry)PortCore_clear_own,
    .tp_methods = PortCore_methods,
    .tp_members = PortCore_members,
    .tp_weaklistoffset = offsetof(PortCore, weakrefs),
};

/* ------------------------------------------------------------------ SwitchPortCore */

static int ring_push(Ring *r, PyObject *data, PyObject *ingress) {
    if (r->len == r->cap) {
        Py_ssize_t cap = r->cap ? r->cap * 2 : 16;
        QItem *b = PyMem_Malloc((size_t)cap * sizeof(QItem));
        if (b == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < r->len; i++)
            b[i] = r->buf[(r->head + i) % r->cap];
        PyMem_Free(r->buf);
        r->buf = b;
        r->head = 0;
        r->cap = cap;
    }
    QItem *it = &r->buf[(r->head + r->len) % r->cap];
    Py_INCREF(data);
    Py_INCREF(ingress);
    it->data = data;
    it->ingress = ingress;
    r->len++;
    return 0;
}

static QItem ring_pop(Ring *r) {
    QItem it = r->buf[r->head];
    r->head = (r->head + 1) % r->cap;
    r->len--;
    return it;
}

static int paused_until_of(PortCore *p, int tc, int64_t *out) {
    PyObject *pu = p->paused_until;
    /* only a PAUSE frame received (Port._on_pause, which counts pause_rx first) pauses a
     * class: a port that never got one reads no list */
    if (pu == NULL || pu == Py_None || p->pause_rx == 0) {
        *out = 0;
        return 0;
    }
    PyObject *v = PySequence_GetItem(pu, tc);
    if (v == NULL)
        return -1;
    long long x = as_i64(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *out = x;
    return 0;
}

static inline uint16_t csum_adjust(uint16_t csum, uint16_t old16, uint16_t new16) {
    uint32_t s = (uint32_t)(~csum & 0xFFFF) + (uint32_t)(~old16 & 0xFFFF) + new16;
    s = (s & 0xFFFF) + (s >> 16);
    s = (s & 0xFFFF) + (s >> 16);
    return (uint16_t)(~s & 0xFFFF);
}

/* codec.mark_ce on a queued frame: a new bytes object with CE set if the frame is ECT(0)
 * or ECT(1) (counted in ecn_marked); else the frame itself. Takes and returns a reference. */
static PyObject *mark_ce_frame(SwitchPortCore *sp, PyObject *data) {
    if (!PyBytes_CheckExact(data))
        return data;
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(data);
    if (n < 16)
        return data;
    int et = b[12] << 8 | b[13];
    if (et == 0x0800) {
        int ecn = b[15] & 3;
        if (ecn == 0 || ecn == 3 || n < 26)
            return data;
        PyObject *out = PyBytes_FromStringAndSize((const char *)b, n);
        Py_DECREF(data);
        if (out == NULL)
            return NULL;
        uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
        uint16_t old16 = (uint16_t)(o[14] << 8 | o[15]);
        uint8_t tos = (uint8_t)(o[15] | 3);
        uint16_t new16 = (uint16_t)((old16 & 0xFF00) | tos);
        o[15] = tos;
        uint16_t c = csum_adjust((uint16_t)(o[24] << 8 | o[25]), old16, new16);
        o[24] = (uint8_t)(c >> 8);
        o[25] = (uint8_t)(c & 0xFF);
        sp->ecn_marked++;
        return out;
    }
    if (et == 0x86DD) {
        int tc = (b[14] & 0x0F) << 4 | b[15] >> 4;
        int ecn = tc & 3;
        if (ecn == 0 || ecn == 3 || n < 18)
            return data;
        PyObject *out = PyBytes_FromStringAndSize((const char *)b, n);
        Py_DECREF(data);
        if (out == NULL)
            return NULL;
        uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
        int ntc = tc | 3;
        o[14] = (uint8_t)((o[14] & 0xF0) | (ntc >> 4));
        o[15] = (uint8_t)(((ntc & 0x0F) << 4) | (o[15] & 0x0F));
        sp->ecn_marked++;
        return out;
    }
    return data;
}

/* SwitchPort._dequeue: the next frame by strict priority over classes not paused, with
 * its ECN mark; NULL without an exception when nothing may go. */
static PyObject *swport_dequeue(SwitchPortCore *sp, int64_t now) {
    PortCore *p = &sp->port;
    int tc = -1;
    for (int i = 0; i < sp->nprio; i++) {
        int c = sp->prio[i];
        if (!(sp->nonempty >> c & 1))
            continue;
        int64_t pu;
        if (paused_until_of(p, c, &pu) < 0)
            return NULL;
        if (pu <= now) {
            tc = c;
            break;
        }
    }
    if (tc < 0)
        return NULL;
    PortClass *k = &sp->cls[tc];
    QItem it = ring_pop(&k->q);
    if (k->q.len == 0)
        sp->nonempty &= (uint8_t) ~(1u << tc);
    p->queued--;
    PyObject *data = it.data;
    Py_ssize_t n;
    if (frame_len(data, &n) < 0) {
        Py_DECREF(data);
        Py_DECREF(it.ingress);
        return NULL;
    }
    int64_t qb = k->qbytes;
    k->qbytes = qb - n;
    if (it.ingress != Py_None) {
        PyObject *r = call_ints(it.ingress, s_release, NULL, tc, n, NULL);
        if (r == NULL) {
            Py_DECREF(data);
            Py_DECREF(it.ingress);
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_DECREF(it.ingress);
    int64_t kmin = k->kmin;
    if (qb > kmin) {
        int64_t kmax = k->kmax;
        int mark = qb >= kmax;
        if (!mark) {
            SwitchCore *sw = (SwitchCore *)sp->switch_;
            if (sw == NULL || sw->rng == NULL) {
                Py_DECREF(data);
                PyErr_SetString(PyExc_AttributeError, "switch port has no switch generator");
                return NULL;
            }
            PyObject *r = mc_call0(sw->rng, s_random);
            if (r == NULL) {
                Py_DECREF(data);
                return NULL;
            }
            double x = PyFloat_AsDouble(r);
            Py_DECREF(r);
            if (x == -1.0 && PyErr_Occurred()) {
                Py_DECREF(data);
                return NULL;
            }
            mark = x * (double)(kmax - kmin) < (double)(qb - kmin);
        }
        if (mark)
            data = mark_ce_frame(sp, data);
    }
    return data;
}

/* Queue `data` in class tc (it fits: the caller checked), then start the transmitter. */
static int swport_admit(SwitchPortCore *sp, int tc, PyObject *data, PyObject *ingress,
                        int64_t qb) {
    PortCore *p = &sp->port;
    PortClass *k = &sp->cls[tc];
    k->qbytes = qb;
    if (qb > k->hwm)
        k->hwm = qb;
    if (ring_push(&k->q, data, ingress) < 0)
        return -1;
    sp->nonempty |= (uint8_t)(1u << tc);
    p->queued++;
    return port_kick(p);
}

static int swport_enqueue(SwitchPortCore *sp, PyObject *data, int tc, int tos,
                          PyObject *ingress) {
    if (tc < 0 || tc >= NTC) {
        PyErr_Format(PyExc_IndexError, "traffic class %d out of range", tc);
        return -1;
    }
    Py_ssize_t n;
    if (frame_len(data, &n) < 0)
        return -1;
    int64_t qb = sp->cls[tc].qbytes + n;
    if (ingress != Py_None) {
        PyObject *r = call_ints(ingress, s_account, NULL, tc, n, NULL);
        if (r == NULL)
            return -1;
        int ok = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (ok < 0)
            return -1;
        if (!ok)
            return call_method_drop((PyObject *)sp, s_pfc_headroom, data);
    } else if (qb > sp->cls[tc].limit) {
        PyObject *r = call_ints((PyObject *)sp, s_overflow, data, tc, tos, NULL);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        return 0;
    }
    return swport_admit(sp, tc, data, ingress, qb);
}

/* ------------------------------------------------------------------ ECMP (uet.fabric.ecmp) */

static inline uint64_t mix64(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static inline uint64_t be64(const uint8_t *p) {
    uint64_t x = 0;
    for (int i = 0; i < 8; i++)
        x = x << 8 | p[i];
    return x;
}

/* ecmp.hash_tuple: the addresses (src then dst, one big-endian integer) folded 64 bits at
 * a time from the low end, stopping when what is left is zero; then proto and ports. */
static uint64_t hash_tuple(uint64_t seed, const uint8_t *addrs, int len, int proto,
                           int sport, int dport) {
    int nw = len / 8, top = 0;
    uint64_t w[4];
    for (int i = 0; i < nw; i++) {
        w[i] = be64(addrs + len - 8 * (i + 1));
        if (w[i])
            top = i;
    }
    uint64_t h = seed;
    for (int i = 0; i <= top; i++)
        h = mix64(h ^ w[i]);
    return mix64(h ^ ((uint64_t)proto << 32 | (uint64_t)sport << 16 | (uint64_t)dport));
}

/* Switch.route for a UDP or native-IP frame whose 5-tuple sits at fixed offsets (IPv4
 * without options, IPv6): the port (new reference) or None; *handled = 0 leaves the frame
 * to Python. No cache: the hash costs less than a dictionary lookup here. */
static PyObject *c_route(SwitchCore *sw, const uint8_t *b, int v6, int proto, PyObject *cands,
                         int *handled) {
    *handled = 0;
    if (!(proto == 17 || proto == sw->ip_proto) || sw->routes == NULL ||
        !PyDict_CheckExact(sw->routes) || (!v6 && b[14] != 0x45))
        return NULL;
    if (cands == NULL) { /* no host route */
        *handled = 1;
        Py_RETURN_NONE;
    }
    if (!PyList_CheckExact(cands))
        return NULL;
    *handled = 1;
    Py_ssize_t m = PyList_GET_SIZE(cands);
    if (m == 0)
        Py_RETURN_NONE;
    PyObject *out;
    if (m == 1) {
        out = PyList_GET_ITEM(cands, 0);
    } else {
        const uint8_t *addrs = b + (v6 ? 22 : 26), *l4 = b + (v6 ? 54 : 34);
        int sport = l4[0] << 8 | l4[1], dport = proto == 17 ? (l4[2] << 8 | l4[3]) : 0;
        uint64_t h = hash_tuple(sw->ecmp_seed, addrs, v6 ? 32 : 8, proto, sport, dport);
        out = PyList_GET_ITEM(cands, (Py_ssize_t)(((h >> 32) * (uint64_t)m) >> 32));
    }
    Py_INCREF(out);
    return out;
}

/* A frame the C path leaves to the Python reference (SwitchPort._on_frame_py). */
static int on_frame_py(SwitchPortCore *sp, PyObject *data) {
    PyObject *r = mc_call1((PyObject *)sp, s_on_frame_py, data);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Each switch keeps a table of the IPv4 destinations it has looked up (open addressing,
 * 8 bytes a slot, at most half full) and the few distinct answers they share (a fat-tree
 * switch has one per down port and one for its uplinks): a hop otherwise makes a bytes key,
 * hashes it and compares it with each table's key, in two dicts of every destination (a
 * handful of cache lines, cold at 1,024 hosts). The table is used only while both dicts
 * are the ones it was filled from, unchanged since (CPython 3.11's dict version tags are
 * unique over all dicts and mutations, so a table that changed or was replaced never
 * matches), and then its borrowed answers are still the dicts' own values; otherwise it is
 * emptied and filled again. Only destinations the dicts hold are entered, so it never
 * holds more slots than twice their keys (a flood of unknown addresses adds nothing), and
 * a switch with more than 65,535 distinct answers looks the rest up in the dicts. Other
 * Python versions always use the dicts. */
#if PY_VERSION_HEX < 0x030C0000
#define DICT_TAG(d) (((PyDictObject *)(d))->ma_version_tag)
#define RT_HASH(ip) ((uint32_t)(((uint64_t)(ip) * 0x9E3779B97F4A7C15ULL) >> 32))

/* whether sw's table answers for its dicts as they are now; if not, empty it for them */
static int rt_current(SwitchCore *sw) {
    if (sw->rt_direct == (const void *)sw->direct && sw->rt_routes == (const void *)sw->routes &&
        sw->rt_vdirect == DICT_TAG(sw->direct) && sw->rt_vroutes == DICT_TAG(sw->routes))
        return 1;
    if (sw->rt != NULL)
        memset(sw->rt, 0, sw->rt_cap * sizeof(RouteSlot));
    sw->rt_n = 0;
    sw->rt_nanswers = 0;
    sw->rt_direct = sw->direct;
    sw->rt_routes = sw->routes;
    sw->rt_vdirect = DICT_TAG(sw->direct);
    sw->rt_vroutes = DICT_TAG(sw->routes);
    return 0;
}

static const RouteAnswer *rt_find(const SwitchCore *sw, uint32_t ip) {
    if (sw->rt_n == 0)
        return NULL;
    uint32_t mask = sw->rt_cap - 1;
    for (uint32_t i = RT_HASH(ip) & mask;; i = (i + 1) & mask) {
        const RouteSlot *e = &sw->rt[i];
        if (!e->used)
            return NULL;
        if (e->ip == ip)
            return &sw->rt_answers[e->answer];
    }
}

static void rt_put(RouteSlot *tab, uint32_t cap, uint32_t ip, uint16_t answer) {
    uint32_t mask = cap - 1, i = RT_HASH(ip) & mask;
    while (tab[i].used)
        i = (i + 1) & mask;
    tab[i].ip = ip;
    tab[i].answer = answer;
    tab[i].used = 1;
}

/* enter ip -> (dval, cands); nothing is entered when memory or answers run short (the
 * dicts still answer) */
static void rt_enter(SwitchCore *sw, uint32_t ip, PyObject *dval, PyObject *cands) {
    uint32_t a = 0;
    while (a < sw->rt_nanswers &&
           (sw->rt_answers[a].dval != dval || sw->rt_answers[a].cands != cands))
        a++;
    if (a == sw->rt_nanswers) {
        if (a >= 0xFFFF)
            return;
        if (a == sw->rt_acap) {
            uint32_t ncap = sw->rt_acap ? 2 * sw->rt_acap : 8;
            RouteAnswer *na = PyMem_Realloc(sw->rt_answers, ncap * sizeof(RouteAnswer));
            if (na == NULL)
                return;
            sw->rt_answers = na;
            sw->rt_acap = ncap;
        }
        sw->rt_answers[a].dval = dval;
        sw->rt_answers[a].cands = cands;
        sw->rt_nanswers++;
    }
    if (2 * (sw->rt_n + 1) > sw->rt_cap) {
        uint32_t ncap = sw->rt_cap ? 2 * sw->rt_cap : 64;
        RouteSlot *nt = PyMem_Calloc(ncap, sizeof(RouteSlot));
        if (nt == NULL)
            return;
        for (uint32_t i = 0; i < sw->rt_cap; i++)
            if (sw->rt[i].used)
                rt_put(nt, ncap, sw->rt[i].ip, sw->rt[i].answer);
        PyMem_Free(sw->rt);
        sw->rt = nt;
        sw->rt_cap = ncap;
    }
    rt_put(sw->rt, sw->rt_cap, ip, (uint16_t)a);
    sw->rt_n++;
}
#endif

/* the direct and host-route entries (borrowed, NULL when absent) of the destination at
 * dst (len bytes): 0, or -1 on error */
static int route_lookup(SwitchCore *sw, const uint8_t *dst, Py_ssize_t len, PyObject **dval,
                        PyObject **cands) {
    int routes = sw->routes != NULL && PyDict_CheckExact(sw->routes);
#if PY_VERSION_HEX < 0x030C0000
    int table = len == 4 && routes && PyDict_CheckExact(sw->direct);
    uint32_t ip = 0;
    if (table) {
        ip = (uint32_t)dst[0] << 24 | (uint32_t)dst[1] << 16 | (uint32_t)dst[2] << 8 | dst[3];
        if (rt_current(sw)) {
            const RouteAnswer *a = rt_find(sw, ip);
            if (a != NULL) {
                *dval = a->dval;
                *cands = a->cands;
                return 0;
            }
        }
    }
#endif
    PyObject *dkey = PyBytes_FromStringAndSize((const char *)dst, len);
    if (dkey == NULL)
        return -1;
    *dval = PyDict_GetItemWithError(sw->direct, dkey);
    *cands = NULL;
    if (*dval == NULL && PyErr_Occurred()) {
        Py_DECREF(dkey);
        return -1;
    }
    if (routes && (*cands = PyDict_GetItemWithError(sw->routes, dkey)) == NULL &&
        PyErr_Occurred()) {
        Py_DECREF(dkey);
        return -1;
    }
    Py_DECREF(dkey);
#if PY_VERSION_HEX < 0x030C0000
    /* (the lookups changed no dict: the table is still current) */
    if (table && (*dval != NULL || *cands != NULL))
        rt_enter(sw, ip, *dval, *cands);
#endif
    return 0;
}

static int swport_forward(SwitchPortCore *sp, SwitchCore *sw, PyObject *data, int64_t now);

/* SwitchPort.on_frame: forward a whole frame that arrived on this port. The switch is held
 * for the whole call (taps and route() are Python code that could swap it). */
static int swport_on_frame(SwitchPortCore *sp, PyObject *data, int64_t now) {
    SwitchCore *sw = (SwitchCore *)sp->switch_;
    if (!PyBytes_CheckExact(data) || sw == NULL || !PyDict_CheckExact(sw->direct) ||
        !PyDict_CheckExact(sw->cache))
        return on_frame_py(sp, data);
    Py_INCREF(sw);
    int rc = swport_forward(sp, sw, data, now);
    Py_DECREF(sw);
    return rc;
}

static int swport_forward(SwitchPortCore *sp, SwitchCore *sw, PyObject *data, int64_t now) {
    PortCore *p = &sp->port;
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(data);
    if (n < 14)
        return on_frame_py(sp, data);
    int et = b[12] << 8 | b[13];
    if ((et == 0x0800 && n < 38) || (et == 0x86DD && n < 58))
        return on_frame_py(sp, data);
    p->rx_frames++;
    p->rx_bytes += n;
    if (run_taps(p->taps, now, data, s_rx) < 0)
        return -1;
    if (!PyDict_CheckExact(sw->direct) || !PyDict_CheckExact(sw->cache)) {
        PyErr_SetString(PyExc_TypeError, "switch routes must stay dicts");
        return -1;
    }
    int tos, proto;
    Py_ssize_t dst_off, dst_len, key_off, key_len;
    if (et == 0x0800) {
        tos = b[15];
        dst_off = 30, dst_len = 4, proto = b[23], key_off = 26, key_len = 12;
    } else if (et == 0x86DD) {
        tos = (b[14] & 0x0F) << 4 | b[15] >> 4;
        dst_off = 38, dst_len = 16, proto = b[20], key_off = 22, key_len = 36;
    } else if (et == 0x8808) {
        PyObject *r = mc_call1((PyObject *)sp, s_on_pause, data);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        return 0;
    } else {
        return call_method_drop((PyObject *)sp, s_ethertype, data);
    }
    PyObject *out, *cands;
    if (route_lookup(sw, b + dst_off, dst_len, &out, &cands) < 0)
        return -1;
    if (out != NULL) {
        Py_INCREF(out);
    } else {
        int handled;
        out = c_route(sw, b, et == 0x86DD, proto, cands, &handled);
        if (out == NULL && PyErr_Occurred())
            return -1;
    }
    if (out == NULL) {
        PyObject *key = Py_None; /* the Python path's cache key: UDP without IP options */
        Py_INCREF(key);
        if (proto == 17 && (et == 0x86DD || b[14] == 0x45)) {
            Py_DECREF(key);
            key = PyBytes_FromStringAndSize((const char *)b + key_off, key_len);
            if (key == NULL)
                return -1;
            out = PyDict_GetItemWithError(sw->cache, key);
            if (out != NULL)
                Py_INCREF(out);
            else if (PyErr_Occurred()) {
                Py_DECREF(key);
                return -1;
            }
        }
        if (out == NULL)
            out = mc_call2((PyObject *)sw, s_route, data, key);
        Py_DECREF(key);
        if (out == NULL)
            return -1;
    }
    int rc;
    if (out == Py_None) {
        rc = call_method_drop((PyObject *)sp, s_no_route, data);
    } else {
        int tc = sw->tos_tc[tos];
        /* the PFC ingress accounting of this class (None: no lossless class on the port) */
        PyObject *ingress = sp->pfc_in != NULL && sp->pfc_in != Py_None
                                ? PySequence_GetItem(sp->pfc_in, tc)
                                : Py_NewRef(Py_None);
        if (ingress == NULL) {
            Py_DECREF(out);
            return -1;
        }
        if (PyObject_TypeCheck(out, &SwitchPortCoreType)) {
            rc = swport_enqueue((SwitchPortCore *)out, data, tc, tos, ingress);
        } else {
            PyObject *r = call_ints(out, s_enqueue, data, tc, tos, ingress);
            rc = r == NULL ? -1 : 0;
            Py_XDECREF(r);
        }
        Py_DECREF(ingress);
    }
    Py_DECREF(out);
    return rc;
}

static int nic_on_frame(NicCore *n, PyObject *data, int64_t now);
static int nic_on_timer(NicCore *n, int64_t now);

int fabric_dispatch(int kind, PyObject *fn, PyObject *arg, int64_t now) {
    if (kind == EV_ARRIVE) {
        if (((PortCore *)fn)->kind == PORT_NIC)
            return nic_on_frame((NicCore *)fn, arg, now);
        return swport_on_frame((SwitchPortCore *)fn, arg, now);
    }
    if (kind == EV_TIMER)
        return nic_on_timer((NicCore *)fn, now);
    if (kind == EV_WAKE) {
        PortCore *p = (PortCore *)fn;
        p->wake_pending = 0;
        return port_start(p, now);
    }
    PyErr_Format(PyExc_SystemError, "unknown event kind %d", kind);
    return -1;
}

static PyObject *SwitchPortCore_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    SwitchPortCore *self = (SwitchPortCore *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->port.kind = PORT_SWITCH;
    for (int i = 0; i < NTC; i++) {
        self->cls[i].limit = UNLIMITED;
        self->cls[i].kmin = UNLIMITED;
        self->cls[i].kmax = UNLIMITED;
    }
    return (PyObject *)self;
}

static int SwitchPortCore_traverse(SwitchPortCore *self, visitproc visit, void *arg) {
    Py_VISIT(self->switch_);
    Py_VISIT(self->pfc_in);
    for (int c = 0; c < NTC; c++) {
        Ring *r = &self->cls[c].q;
        for (Py_ssize_t i = 0; i < r->len; i++) {
            QItem *it = &r->buf[(r->head + i) % r->cap];
            Py_VISIT(it->data);
            Py_VISIT(it->ingress);
        }
    }
    return PortCore_traverse(&self->port, visit, arg);
}

static int SwitchPortCore_clear(SwitchPortCore *self) {
    Py_CLEAR(self->switch_);
    Py_CLEAR(self->pfc_in);
    self->nonempty = 0;
    for (int c = 0; c < NTC; c++) {
        Ring *r = &self->cls[c].q;
        while (r->len > 0) {
            QItem it = ring_pop(r);
            Py_DECREF(it.data);
            Py_DECREF(it.ingress);
        }
        PyMem_Free(r->buf);
        r->buf = NULL;
        r->cap = 0;
        r->head = 0;
    }
    return PortCore_clear_own(&self->port);
}

/* one int64 field of every class, as a list (off: the field's offset in PortClass) */
static PyObject *class_list(const SwitchPortCore *s, size_t off) {
    PyObject *l = PyList_New(NTC);
    if (l == NULL)
        return NULL;
    for (int i = 0; i < NTC; i++) {
        PyObject *x = PyLong_FromLongLong(*(const int64_t *)((const char *)&s->cls[i] + off));
        if (x == NULL) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, x);
    }
    return l;
}

static PyObject *SP_get_qbytes(SwitchPortCore *s, void *c) {
    return class_list(s, offsetof(PortClass, qbytes));
}
static PyObject *SP_get_qtotal(SwitchPortCore *s, void *c) {
    int64_t total = 0;
    for (int i = 0; i < NTC; i++)
        total += s->cls[i].qbytes;
    return PyLong_FromLongLong(total);
}
static PyObject *SP_get_limit(SwitchPortCore *s, void *c) {
    return class_list(s, offsetof(PortClass, limit));
}
static PyObject *SP_get_hwm(SwitchPortCore *s, void *c) {
    return class_list(s, offsetof(PortClass, hwm));
}
static PyObject *SP_get_kmin(SwitchPortCore *s, void *c) {
    return class_list(s, offsetof(PortClass, kmin));
}
static PyObject *SP_get_kmax(SwitchPortCore *s, void *c) {
    return class_list(s, offsetof(PortClass, kmax));
}

static PyObject *SP_get_prio(SwitchPortCore *s, void *c) { return prio_tuple(s->prio, s->nprio); }

static int SP_set_prio(SwitchPortCore *s, PyObject *v, void *c) {
    return set_prio(v, s->prio, &s->nprio);
}

static PyObject *SP_get_switch(SwitchPortCore *s, void *c) {
    PyObject *v = s->switch_ ? s->switch_ : Py_None;
    Py_INCREF(v);
    return v;
}

static int SP_set_switch(SwitchPortCore *s, PyObject *v, void *c) {
    if (v == NULL || !PyObject_TypeCheck(v, &SwitchCoreType)) {
        PyErr_SetString(PyExc_TypeError, "switch must be a SwitchCore (uet.fabric.switch.Switch)");
        return -1;
    }
    Py_INCREF(v);
    Py_XSETREF(s->switch_, v);
    return 0;
}

static int tc_arg(PyObject *o, int *tc) {
    long x = PyLong_AsLong(o);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (x < 0 || x >= NTC) {
        PyErr_Format(PyExc_IndexError, "traffic class %ld out of range", x);
        return -1;
    }
    *tc = (int)x;
    return 0;
}

static PyObject *SP_set_limit(SwitchPortCore *s, PyObject *const *args, Py_ssize_t nargs) {
    int tc;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_limit(tc, nbytes)");
        return NULL;
    }
    if (tc_arg(args[0], &tc) < 0)
        return NULL;
    long long v = as_i64(args[1]);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    s->cls[tc].limit = v;
    Py_RETURN_NONE;
}

static PyObject *SP_set_ecn(SwitchPortCore *s, PyObject *const *args, Py_ssize_t nargs) {
    int tc;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "set_ecn(tc, kmin, kmax)");
        return NULL;
    }
    if (tc_arg(args[0], &tc) < 0)
        return NULL;
    long long a = as_i64(args[1]);
    if (a == -1 && PyErr_Occurred())
        return NULL;
    long long b = as_i64(args[2]);
    if (b == -1 && PyErr_Occurred())
        return NULL;
    s->cls[tc].kmin = a;
    s->cls[tc].kmax = b;
    Py_RETURN_NONE;
}

static PyObject *SP_enqueue(SwitchPortCore *s, PyObject *const *args, Py_ssize_t nargs) {
    int tc, tos;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "enqueue(data, tc, tos, ingress)");
        return NULL;
    }
    if (tc_arg(args[1], &tc) < 0)
        return NULL;
    long t = PyLong_AsLong(args[2]);
    if (t == -1 && PyErr_Occurred())
        return NULL;
    tos = (int)t;
    if (swport_enqueue(s, args[0], tc, tos, args[3]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *SP_admit(SwitchPortCore *s, PyObject *const *args, Py_ssize_t nargs) {
    int tc;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_admit(tc, data, ingress)");
        return NULL;
    }
    if (tc_arg(args[0], &tc) < 0)
        return NULL;
    Py_ssize_t n;
    if (frame_len(args[1], &n) < 0)
        return NULL;
    if (swport_admit(s, tc, args[1], args[2], s->cls[tc].qbytes + n) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *SP_dequeue(SwitchPortCore *s, PyObject *arg) {
    long long now = as_i64(arg);
    if (now == -1 && PyErr_Occurred())
        return NULL;
    PyObject *d = swport_dequeue(s, now);
    if (d == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return d;
}

static PyObject *SP_on_frame(SwitchPortCore *s, PyObject *data) {
    int64_t now;
    if (loop_now(s->port.loop, &now) < 0 || swport_on_frame(s, data, now) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *SP_queue_len(SwitchPortCore *s, PyObject *arg) {
    int tc;
    if (tc_arg(arg, &tc) < 0)
        return NULL;
    return PyLong_FromSsize_t(s->cls[tc].q.len);
}

static PyGetSetDef SwitchPortCore_getset[] = {
    {"qbytes", (getter)SP_get_qbytes, NULL, "bytes queued per class (a copy)", NULL},
    {"qtotal", (getter)SP_get_qtotal, NULL, "bytes queued in every class together", NULL},
    {"limit", (getter)SP_get_limit, NULL, "byte limit per class (a copy; set_limit)", NULL},
    {"hwm", (getter)SP_get_hwm, NULL, "high-water mark per class, bytes (a copy)", NULL},
    {"kmin", (getter)SP_get_kmin, NULL, "ECN kmin per class (a copy; set_ecn)", NULL},
    {"kmax", (getter)SP_get_kmax, NULL, "ECN kmax per class (a copy; set_ecn)", NULL},
    {"prio", (getter)SP_get_prio, (setter)SP_set_prio, "classes in strict priority order",
     NULL},
    {"switch", (getter)SP_get_switch, (setter)SP_set_switch, "the switch of this port", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef SwitchPortCore_members[] = {
    OBJ_MEMBER(SwitchPortCore, pfc_in, "per class: the ingress port accounting PFC, or None; "
                                       "None: no lossless class"),
    I64_MEMBER(SwitchPortCore, ecn_marked, "frames marked CE at dequeue"),
    {NULL},
};

static PyMethodDef SwitchPortCore_methods[] = {
    {"on_frame", (PyCFunction)SP_on_frame, METH_O, "A whole frame arrived on this port."},
    {"enqueue", (PyCFunction)(void (*)(void))SP_enqueue, METH_FASTCALL,
     "enqueue(data, tc, tos, ingress): queue in class tc (trim or drop if it does not fit)."},
    {"_admit", (PyCFunction)(void (*)(void))SP_admit, METH_FASTCALL,
     "_admit(tc, data, ingress): queue a frame that fits, then kick the transmitter."},
    {"_dequeue", (PyCFunction)SP_dequeue, METH_O, "_dequeue(now): the next frame or None."},
    {"set_limit", (PyCFunction)(void (*)(void))SP_set_limit, METH_FASTCALL,
     "set_limit(tc, nbytes): byte limit of class tc."},
    {"set_ecn", (PyCFunction)(void (*)(void))SP_set_ecn, METH_FASTCALL,
     "set_ecn(tc, kmin, kmax): ECN thresholds of class tc."},
    {"queue_len", (PyCFunction)SP_queue_len, METH_O, "queue_len(tc): frames queued in tc."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SwitchPortCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "uet.native._event_core.SwitchPortCore",
    .tp_doc = "A switch port's forwarding and queues in C (base of uet.fabric.switch.SwitchPort).",
    .tp_basicsize = sizeof(SwitchPortCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_base = &PortCoreType,
    .tp_new = SwitchPortCore_new,
    .tp_dealloc = (destructor)PortCore_dealloc,
    .tp_traverse = (traverseproc)SwitchPortCore_traverse,
    .tp_clear = (inquiry)SwitchPortCore_clear,
    .tp_methods = SwitchPortCore_methods,
    .tp_members = SwitchPortCore_members,
    .tp_getset = SwitchPortCore_getset,
};

/* ------------------------------------------------------------------ NicCore */

/* Nic._retimer: one end-point timer event on the core, re-armed lazily. */
static int nic_push_timer(NicCore *n, int64_t t) {
    PortCore *p = &n->port;
    n->has_timer = 1;
    n->timer_at = t;
    if (is_c_loop(p->loop))
        return ec_push((EventLoop *)p->loop, t, EV_TIMER, (PyObject *)n, Py_None);
    PyObject *m = PyObject_GetAttrString((PyObject *)n, "_on_timer");
    if (m == NULL)
        return -1;
    int rc = py_push(p->push, t, m, Py_None);
    Py_DECREF(m);
    return rc;
}

/* ep.next_deadline(): 1 and *d, 0 for None, -1 on error */
static int nic_deadline(NicCore *n, int64_t *d) {
    if (n->ep == NULL) {
        PyErr_SetString(PyExc_AttributeError, "NIC has no end point");
        return -1;
    }
    PyObject *r = mc_call0(n->ep, s_next_deadline);
    if (r == NULL)
        return -1;
    if (r == Py_None) {
        Py_DECREF(r);
        return 0;
    }
    long long v = as_i64(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *d = v;
    return 1;
}

static int nic_retimer(NicCore *n) {
    int64_t d;
    int k = nic_deadline(n, &d);
    if (k <= 0)
        return k;
    if (!n->has_timer || d < n->timer_at) {
        int64_t now;
        if (loop_now(n->port.loop, &now) < 0)
            return -1;
        return nic_push_timer(n, d > now ? d : now);
    }
    return 0;
}

static int call_on_change(NicCore *n) {
    if (n->on_change == NULL || n->on_change == Py_None)
        return 0;
    PyObject *r = PyObject_CallOneArg(n->on_change, (PyObject *)n);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int call_ep_now(PyObject *ep, PyObject *name, int64_t now, PyObject **out) {
    *out = NULL;
    if (ep == NULL) {
        PyErr_SetString(PyExc_AttributeError, "NIC has no end point");
        return -1;
    }
    PyObject *pt = PyLong_FromLongLong(now);
    if (pt == NULL)
        return -1;
    *out = mc_call1(ep, name, pt);
    Py_DECREF(pt);
    return *out == NULL ? -1 : 0;
}

/* Nic._on_timer */
static int nic_on_timer(NicCore *n, int64_t now) {
    if (!n->has_timer || n->timer_at != now)
        return 0; /* superseded by an earlier timer */
    n->has_timer = 0;
    int64_t d;
    int k = nic_deadline(n, &d);
    if (k < 0)
        return -1;
    if (k && d <= now) {
        n->timers++;
        PyObject *r;
        if (call_ep_now(n->ep, s_handle_timer, now, &r) < 0)
            return -1;
        Py_DECREF(r);
        k = nic_deadline(n, &d);
        if (k < 0)
            return -1;
        if (k && d <= now && nic_push_timer(n, now + 1) < 0) /* an end point that spins */
            return -1;
        if (port_kick(&n->port) < 0 || call_on_change(n) < 0)
            return -1;
    }
    return nic_retimer(n);
}

/* the class of a frame the end point made (Nic._tc_of) */
static int nic_tc_of(NicCore *n, PyObject *data, int *tc) {
    if (!PyBytes_Check(data) || PyBytes_GET_SIZE(data) < 16) {
        PyErr_SetString(PyExc_IndexError, "frame too short for its IP header");
        return -1;
    }
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(data);
    int tos = (b[12] == 0x08 && b[13] == 0x00) ? b[15] : ((b[14] & 0x0F) << 4 | b[15] >> 4);
    *tc = n->tos_tc[tos];
    return 0;
}

/* Nic._dequeue: frames held by a pause first, then control, then data (each only if its
 * class is not paused); a frame of a paused class is held. */
static PyObject *nic_dequeue(NicCore *n, int64_t now) {
    PortCore *p = &n->port;
    int64_t pu;
    if (n->held_n) {
        for (int i = 0; i < n->nprio; i++) {
            int tc = n->prio[i];
            PyObject *dq = PySequence_GetItem(n->held, tc);
            if (dq == NULL)
                return NULL;
            Py_ssize_t len = PyObject_Length(dq);
            if (len < 0 || (len > 0 && paused_until_of(p, tc, &pu) < 0)) {
                Py_DECREF(dq);
                return NULL;
            }
            if (len > 0 && pu <= now) {
                n->held_n--;
                PyObject *data = mc_call0(dq, s_popleft);
                Py_DECREF(dq);
                return data;
            }
            Py_DECREF(dq);
        }
    }
    PyObject *data = NULL;
    for (;;) {
        data = NULL;
        if (paused_until_of(p, n->control_tc, &pu) < 0)
            return NULL;
        if (pu <= now && call_ep_now(n->ep, s_pop_control, now, &data) < 0)
            return NULL;
        if (data == Py_None)
            Py_CLEAR(data);
        if (data == NULL) {
            if (paused_until_of(p, n->data_tc, &pu) < 0)
                return NULL;
            if (pu <= now && call_ep_now(n->ep, s_pop_data, now, &data) < 0)
                return NULL;
            if (data == Py_None)
                Py_CLEAR(data);
        }
        if (data == NULL)
            break;
        int tc;
        if (nic_tc_of(n, data, &tc) < 0 || paused_until_of(p, tc, &pu) < 0) {
            Py_DECREF(data);
            return NULL;
        }
        if (pu <= now)
            break;
        PyObject *dq = PySequence_GetItem(n->held, tc);
        PyObject *r = dq ? mc_call1(dq, s_append, data) : NULL;
        Py_XDECREF(dq);
        Py_DECREF(data);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
        n->held_n++;
        if (n->held_n > n->held_hwm)
            n->held_hwm = n->held_n;
    }
    if (nic_retimer(n) < 0) {
        Py_XDECREF(data);
        return NULL;
    }
    return data;
}

/* Nic.on_frame: a whole frame arrived from the link. */
static int nic_on_frame(NicCore *n, PyObject *data, int64_t now) {
    PortCore *p = &n->port;
    if (!PyBytes_CheckExact(data)) {
        PyObject *r = mc_call1((PyObject *)n, s_on_frame_py, data);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        return 0;
    }
    Py_ssize_t len = PyBytes_GET_SIZE(data);
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(data);
    p->rx_frames++;
    p->rx_bytes += len;
    if (run_taps(p->taps, now, data, s_rx) < 0)
        return -1;
    if (len >= 14 && b[12] == 0x88 && b[13] == 0x08) {
        PyObject *r = mc_call1((PyObject *)n, s_on_pause, data);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        return 0;
    }
    n->delivered++;
    if (n->ep == NULL) {
        PyErr_SetString(PyExc_AttributeError, "NIC has no end point");
        return -1;
    }
    PyObject *pt = PyLong_FromLongLong(now);
    if (pt == NULL)
        return -1;
    PyObject *r = mc_call2(n->ep, s_receive, pt, data);
    Py_DECREF(pt);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    if (nic_retimer(n) < 0)
        return -1;
    if (!p->wake_pending && now >= p->free_at && port_start(p, now) < 0)
        return -1;
    return call_on_change(n);
}

static PyObject *NicCore_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    NicCore *self = (NicCore *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->port.kind = PORT_NIC;
    return (PyObject *)self;
}

#define NIC_OBJS(X) X(ep) X(held) X(tos_list) X(on_change)
GC_FUNCS(NicCore, NIC_OBJS, PortCore_traverse(&self->port, visit, arg))

static int NicCore_clear(NicCore *self) {
    NicCore_clear_own(self);
    return PortCore_clear_own(&self->port);
}

static PyObject *NIC_get_timer_at(NicCore *n, void *c) {
    if (!n->has_timer)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(n->timer_at);
}

static int NIC_set_timer_at(NicCore *n, PyObject *v, void *c) {
    if (v == NULL || v == Py_None) {
        n->has_timer = 0;
        return 0;
    }
    long long t = as_i64(v);
    if (t == -1 && PyErr_Occurred())
        return -1;
    n->has_timer = 1;
    n->timer_at = t;
    return 0;
}

static PyObject *NIC_get_tos(NicCore *n, void *c) {
    PyObject *v = n->tos_list ? n->tos_list : Py_None;
    Py_INCREF(v);
    return v;
}

static int NIC_set_tos(NicCore *n, PyObject *v, void *c) {
    return set_tos_table(v, n->tos_tc, &n->tos_list);
}

static PyObject *NIC_get_prio(NicCore *n, void *c) { return prio_tuple(n->prio, n->nprio); }

static int NIC_set_prio(NicCore *n, PyObject *v, void *c) {
    return set_prio(v, n->prio, &n->nprio);
}

static PyObject *NIC_on_frame(NicCore *n, PyObject *data) {
    int64_t now;
    if (loop_now(n->port.loop, &now) < 0 || nic_on_frame(n, data, now) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *NIC_dequeue(NicCore *n, PyObject *arg) {
    long long now = as_i64(arg);
    if (now == -1 && PyErr_Occurred())
        return NULL;
    PyObject *d = nic_dequeue(n, now);
    if (d == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return d;
}

static PyObject *NIC_retimer(NicCore *n, PyObject *Py_UNUSED(ignored)) {
    if (nic_retimer(n) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *NIC_on_timer(NicCore *n, PyObject *Py_UNUSED(arg)) {
    int64_t now;
    if (loop_now(n->port.loop, &now) < 0 || nic_on_timer(n, now) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyGetSetDef NicCore_getset[] = {
    {"timer_at", (getter)NIC_get_timer_at, (setter)NIC_set_timer_at,
     "time of the end point's timer event on the core, or None", NULL},
    {"tos_tc", (getter)NIC_get_tos, (setter)NIC_set_tos, "TOS byte -> traffic class", NULL},
    {"prio", (getter)NIC_get_prio, (setter)NIC_set_prio, "classes in strict priority order",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef NicCore_members[] = {
    OBJ_MEMBER(NicCore, ep, "the end point (uet.fabric.endpoint.FrameEndpoint)"),
    OBJ_MEMBER(NicCore, held, "per class: frames held while their class is paused (deques)"),
    OBJ_MEMBER(NicCore, on_change, "called with the NIC after it handled a frame or timer"),
    I64_MEMBER(NicCore, held_n, "frames held"),
    I64_MEMBER(NicCore, held_hwm, "most frames held at once"),
    I64_MEMBER(NicCore, timers, "end-point timer events run"),
    I64_MEMBER(NicCore, delivered, "frames handed to the end point"),
    {"data_tc", T_INT, offsetof(NicCore, data_tc), 0, "the data traffic class"},
    {"control_tc", T_INT, offsetof(NicCore, control_tc), 0, "the control traffic class"},
    {NULL},
};

static PyMethodDef NicCore_methods[] = {
    {"on_frame", (PyCFunction)NIC_on_frame, METH_O, "A whole frame arrived from the link."},
    {"_dequeue", (PyCFunction)NIC_dequeue, METH_O, "_dequeue(now): the next frame or None."},
    {"_retimer", (PyCFunction)NIC_retimer, METH_NOARGS,
     "Arm the end point's next deadline on the core if it is earlier."},
    {"_on_timer", (PyCFunction)NIC_on_timer, METH_O, "The end point's timer event."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject NicCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "uet.native._event_core.NicCore",
    .tp_doc = "A NIC's transmit and receive glue in C (base of uet.fabric.nic.Nic).",
    .tp_basicsize = sizeof(NicCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_base = &PortCoreType,
    .tp_new = NicCore_new,
    .tp_dealloc = (destructor)PortCore_dealloc,
    .tp_traverse = (traverseproc)NicCore_traverse,
    .tp_clear = (inquiry)NicCore_clear,
    .tp_methods = NicCore_methods,
    .tp_members = NicCore_members,
    .tp_getset = NicCore_getset,
};

/* ------------------------------------------------------------------ ChannelCore */

#define CHANNEL_OBJS(X) X(push) X(rx) X(rx_on_frame) X(carry)
GC_FUNCS(ChannelCore, CHANNEL_OBJS, 0)

static void ChannelCore_dealloc(ChannelCore *self) {
    PyObject_GC_UnTrack(self);
    ChannelCore_clear_own(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *CH_get_rx(ChannelCore *s, void *c) {
    PyObject *v = s->rx ? s->rx : Py_None;
    Py_INCREF(v);
    return v;
}

/* The far end; its on_frame is looked up once here (a switch port's runs in C). */
static int CH_set_rx(ChannelCore *s, PyObject *v, void *c) {
    if (v == NULL)
        v = Py_None;
    PyObject *m = NULL;
    if (v != Py_None) {
        m = PyObject_GetAttr(v, s_on_frame);
        if (m == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return -1;
            PyErr_Clear();
        }
    }
    Py_INCREF(v);
    Py_XSETREF(s->rx, v);
    Py_XSETREF(s->rx_on_frame, m);
    s->rx_native = (char)(v != Py_None && (PyObject_TypeCheck(v, &SwitchPortCoreType) ||
                                           PyObject_TypeCheck(v, &NicCoreType)));
    return 0;
}

static PyObject *CH_get_ppb(ChannelCore *s, void *c) {
    if (s->ppb)
        return PyLong_FromLongLong(s->ppb);
    Py_RETURN_NONE;
}

static int CH_set_ppb(ChannelCore *s, PyObject *v, void *c) {
    if (v == NULL || v == Py_None) {
        s->ppb = 0;
        return 0;
    }
    long long x = as_i64(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    s->ppb = x;
    return 0;
}

static PyGetSetDef ChannelCore_getset[] = {
    {"rx", (getter)CH_get_rx, (setter)CH_set_rx,
     "the far end: has on_frame(data) and rx_drop(reason, data)", NULL},
    {"ppb", (getter)CH_get_ppb, (setter)CH_set_ppb,
     "exact picoseconds per byte at rate_bps, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef ChannelCore_members[] = {
    OBJ_MEMBER(ChannelCore, push, "the transmitter's loop push(t, fn, arg)"),
    OBJ_MEMBER(ChannelCore, carry, "carry(data, t0, t1) for a channel that is not clean"),
    I64_MEMBER(ChannelCore, rate_bps, "serialisation rate, bits per second"),
    I64_MEMBER(ChannelCore, delay_ps, "propagation delay (ps)"),
    I64_MEMBER(ChannelCore, tx_frames, "frames put on this channel"),
    I64_MEMBER(ChannelCore, tx_bytes, "bytes put on this channel"),
    {"clean", T_BOOL, offsetof(ChannelCore, clean), 0,
     "up and without per-frame impairments: ports push the arrival themselves"},
    {NULL},
};

static PyTypeObject ChannelCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "uet.native._event_core.ChannelCore",
    .tp_doc = "One direction of a link in C (base of uet.fabric.link.Channel).",
    .tp_basicsize = sizeof(ChannelCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)ChannelCore_dealloc,
    .tp_traverse = (traverseproc)ChannelCore_traverse,
    .tp_clear = (inquiry)ChannelCore_clear_own,
    .tp_members = ChannelCore_members,
    .tp_getset = ChannelCore_getset,
};

/* ------------------------------------------------------------------ SwitchCore */

#define SWITCH_OBJS(X) X(direct) X(cache) X(rng) X(tos_list) X(routes)
GC_FUNCS(SwitchCore, SWITCH_OBJS, 0)

static void SwitchCore_dealloc(SwitchCore *self) {
    PyObject_GC_UnTrack(self);
    SwitchCore_clear_own(self);
    PyMem_Free(self->rt);
    PyMem_Free(self->rt_answers);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *SW_get_tos(SwitchCore *s, void *c) {
    PyObject *v = s->tos_list ? s->tos_list : Py_None;
    Py_INCREF(v);
    return v;
}

/* The DSCP/TOS byte -> traffic class table (256 entries in 0..7); kept as given and as a
 * C array for the forwarding path. */
static int SW_set_tos(SwitchCore *s, PyObject *v, void *c) {
    return set_tos_table(v, s->tos_tc, &s->tos_list);
}

/* route_lookup's table, for tests and reports: {"entries", "slots", "answers"} */
static PyObject *SW_get_route_table(SwitchCore *s, void *c) {
    return Py_BuildValue("{s:I,s:I,s:I}", "entries", (unsigned)s->rt_n, "slots",
                         (unsigned)s->rt_cap, "answers", (unsigned)s->rt_nanswers);
}

static PyGetSetDef SwitchCore_getset[] = {
    {"tos_tc", (getter)SW_get_tos, (setter)SW_set_tos, "TOS byte -> traffic class", NULL},
    {"route_table", (getter)SW_get_route_table, NULL,
     "the C path's table of IPv4 destinations looked up: entries, slots, distinct answers",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef SwitchCore_members[] = {
    OBJ_MEMBER(SwitchCore, direct, "destinations with a single next hop: packed IP -> port"),
    OBJ_MEMBER(SwitchCore, cache, "ECMP decisions by raw address + port bytes"),
    OBJ_MEMBER(SwitchCore, rng, "the switch's seeded generator (ECN marking)"),
    OBJ_MEMBER(SwitchCore, routes, "host routes: packed IP -> list of equal-cost ports"),
    {"ecmp_seed", T_ULONGLONG, offsetof(SwitchCore, ecmp_seed), 0,
     "64-bit seed of the ECMP hash (uet.fabric.ecmp)"},
    {"ip_proto", T_INT, offsetof(SwitchCore, ip_proto), 0,
     "IP protocol of native-IP UET (hashed and trimmed like UDP)"},
    {NULL},
};

static PyTypeObject SwitchCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "uet.native._event_core.SwitchCore",
    .tp_doc = "A switch's forwarding tables for the C path (base of uet.fabric.switch.Switch).",
    .tp_basicsize = sizeof(SwitchCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)SwitchCore_dealloc,
    .tp_traverse = (traverseproc)SwitchCore_traverse,
    .tp_clear = (inquiry)SwitchCore_clear_own,
    .tp_members = SwitchCore_members,
    .tp_getset = SwitchCore_getset,
};

/* ------------------------------------------------------------------ module */

static int intern(PyObject **slot, const char *s) {
    *slot = PyUnicode_InternFromString(s);
    return *slot == NULL ? -1 : 0;
}

/* call_method(obj, name, *args): obj.name(*args) as the cores call methods, through the
 * method cache (method_cache.h); for its tests */
static PyObject *py_call_method(PyObject *mod, PyObject *const *args, Py_ssize_t n) {
    if (n < 2 || n > 9 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "call_method(obj, name: str, *args) (up to 7 args)");
        return NULL;
    }
    PyObject *a[8];
    a[0] = args[0];
    for (Py_ssize_t i = 2; i < n; i++)
        a[i - 1] = args[i];
    return mc_call(args[1], a, (size_t)(n - 1), NULL);
}

/* method_cached(type, name) -> bool: the cache holds a usable entry for (type, name) */
static PyObject *py_method_cached(PyObject *mod, PyObject *const *args, Py_ssize_t n) {
    if (n != 2 || !PyType_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "method_cached(type, name: str)");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)args[0];
    return PyBool_FromLong(mc_hit(mc_slot(t, args[1]), t, args[1]));
}

static PyMethodDef fabric_module_methods[] = {
    {"call_method", (PyCFunction)(void (*)(void))py_call_method, METH_FASTCALL,
     "call_method(obj, name, *args): obj.name(*args) through the cores' method cache"},
    {"method_cached", (PyCFunction)(void (*)(void))py_method_cached, METH_FASTCALL,
     "method_cached(type, name) -> bool: the method cache holds (type, name)"},
    {NULL, NULL, 0, NULL}};

int fabric_core_init(PyObject *m) {
    if (PyModule_AddFunctions(m, fabric_module_methods) < 0)
        return -1;
    if (intern(&s_dequeue, "_dequeue") || intern(&s_on_pause, "_on_pause") ||
        intern(&s_drop, "_drop") || intern(&s_route, "route") ||
        intern(&s_overflow, "_overflow") || intern(&s_account, "_account") ||
        intern(&s_release, "_release") || intern(&s_on_frame_py, "_on_frame_py") ||
        intern(&s_popleft, "popleft") || intern(&s_on_frame, "on_frame") ||
        intern(&s_wake, "_wake") || intern(&s_tx, "tx") || intern(&s_rx, "rx") ||
        intern(&s_now, "now") || intern(&s_random, "random") ||
        intern(&s_ethertype, "ethertype") || intern(&s_no_route, "no_route") ||
        intern(&s_pfc_headroom, "pfc_headroom") || intern(&s_enqueue, "enqueue") ||
        intern(&s_next_deadline, "next_deadline") || intern(&s_handle_timer, "handle_timer") ||
        intern(&s_pop_control, "pop_control") || intern(&s_pop_data, "pop_data") ||
        intern(&s_append, "append") || intern(&s_receive, "receive"))
        return -1;
    PyTypeObject *types[] = {&PortCoreType, &SwitchPortCoreType, &NicCoreType,
                             &ChannelCoreType, &SwitchCoreType};
    const char *names[] = {"PortCore", "SwitchPortCore", "NicCore", "ChannelCore",
                           "SwitchCore"};
    for (int i = 0; i < 5; i++) {
        if (PyType_Ready(types[i]) < 0)
            return -1;
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            return -1;
        }
    }
    return 0;
}
