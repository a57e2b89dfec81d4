/* uet.native._event_core: the fabric's discrete-event core in C.
 *
 * EventLoop runs callbacks fn(arg) in (time, scheduling order), exactly as the pure-Python
 * uet.fabric.scheduler.PyEventLoop does (tests/fabric/test_scheduler.py runs both against
 * one heap). Events are 32-byte structs {t, seq, fn, arg}, with no tuple and no
 * Python-level loop per event, in two queues:
 *
 * - the ring (from RING_MIN_PENDING pending events on): the near future, RING_N buckets
 *   of 2**RING_SHIFT ps (4.19 us in all) from the bucket of the last event run; a bucket
 *   keeps its events in (t, seq) order in one array (appending, mostly: a new event is
 *   the latest of its time), and a bit per bucket says which hold any, so the earliest
 *   is found by a count of trailing zeros. A frame's arrival and a transmitter's wake-up
 *   (a link delay and a frame time ahead) land here: a push or a pop costs the same
 *   whatever the number of pending events, and touches one bucket instead of a path
 *   through a binary heap (tens of thousands of events, ~16 levels, several MB at 1,024
 *   hosts);
 * - the heap: everything else (all of it while few are pending, timers further out,
 *   times before the ring's start, and an event that would go before more than
 *   RING_MOVES_MAX others of its bucket), one binary heap ordered by (t, seq).
 *
 * Each step runs the earlier of the two queues' first events: the order is (t, seq)
 * exactly, as with one heap. Times are signed 64-bit picoseconds (2**63 ps is about 107
 * days); a time beyond that raises OverflowError.
 *
 * The loop holds strong references to every pending fn and arg and takes part in the
 * cyclic garbage collector (ports and NICs hold the loop, its events hold their bound
 * methods).
 *
 * Besides fn(arg) events, the loop runs the fabric's per-frame events without a Python
 * call: a frame arriving at a switch port and a port's transmitter waking up
 * (fabric_core.c, EV_ARRIVE / EV_WAKE in event_core.h).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "event_core.h"
#include "pyint.h"

static inline int before(const Event *a, const Event *b) {
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

_Static_assert(sizeof(Event) == 32, "two events to a 64-byte cache line");

/* the ring: RING_N buckets of 2**RING_SHIFT ps (256 ps: 16,384 of them span 4.19 us, a
 * link delay and a frame time at 100 Gb/s with room to spare). With 1,024-ps buckets a
 * 1,024-host fabric's synchronised frames put hundreds of distinct times into one bucket
 * (a push moved 0.75 events, and 10% went on to the heap); with 256 ps, 0.001 and none. */
#define RING_SHIFT 8
#define RING_BITS 14
#define RING_N ((Py_ssize_t)1 << RING_BITS)
#define RING_MASK (RING_N - 1)
#define RING_WORDS (RING_N / 64)

/* A bucket's first RING_INLINE places are its own slice of one array (the slab), bucket
 * after bucket: as time goes on, pushes (a link delay ahead) and pops (now) walk two
 * fronts through consecutive memory, which the caches' prefetchers follow. A bucket that
 * needs more moves to an array of its own until it empties. */
#define RING_INLINE 4

static inline Event *own_slice(const EventLoop *self, Py_ssize_t b) {
    return self->slab + b * RING_INLINE;
}

static int ring_alloc(EventLoop *self) {
    self->ring = PyMem_Calloc((size_t)RING_N, sizeof(Bucket));
    self->occupied = PyMem_Calloc((size_t)RING_WORDS, sizeof(uint64_t));
    /* 64-byte aligned (two events a line): the block is kept in slab_mem to free */
    self->slab_mem = PyMem_Malloc((size_t)(RING_N * RING_INLINE) * sizeof(Event) + 64);
    if (self->ring == NULL || self->occupied == NULL || self->slab_mem == NULL) {
        PyMem_Free(self->ring);
        PyMem_Free(self->occupied);
        PyMem_Free(self->slab_mem);
        self->ring = NULL;
        self->occupied = NULL;
        self->slab_mem = NULL;
        PyErr_NoMemory();
        return -1;
    }
    self->slab = (Event *)(((uintptr_t)self->slab_mem + 63) & ~(uintptr_t)63);
    for (Py_ssize_t b = 0; b < RING_N; b++) {
        self->ring[b].ev = own_slice(self, b);
        self->ring[b].cap = RING_INLINE;
    }
    return 0;
}

/* the ring is used from this many pending events on: below it the heap (at most 128 KB)
 * stays in the caches, and the ring's buckets, a line or two an event spread over 2 MB,
 * would only add misses (16 hosts: 34.2 -> 39.0 L2 misses a hop in the cache model);
 * above it the heap's lower levels are cold (1,024 hosts: 110.7 -> 105.2 L2 misses and
 * 11,240 -> 10,669 instructions a hop, with the ring) */
#define RING_MIN_PENDING 4096

/* an event that would go before more than this many of its bucket's goes to the heap
 * instead: a push costs at most this many moves, even into a crowded bucket filled out
 * of order (either queue may hold any event: a step takes the earlier of the two) */
#define RING_MOVES_MAX 32

/* Put e in bucket b, after every event of it that comes before e: 0; 1: not put (it
 * comes before RING_MOVES_MAX of them); -1: no memory. */
static int ring_put(EventLoop *self, Py_ssize_t b, Event e) {
    Bucket *k = &self->ring[b];
    int32_t i = k->n;
    while (i > k->head && before(&e, &k->ev[i - 1]))
        if (k->n - --i > RING_MOVES_MAX)
            return 1;
    if (k->n == k->cap) {
        if (k->head > 0) { /* room at the front: slide the events there */
            memmove(k->ev, k->ev + k->head, (size_t)(k->n - k->head) * sizeof(Event));
            i -= k->head;
            k->n -= k->head;
            k->head = 0;
        } else {
            if (k->cap > INT32_MAX / 2) {
                PyErr_NoMemory();
                return -1;
            }
            int32_t cap = k->cap * 2;
            int own = k->ev == own_slice(self, b);
            Event *ev = own ? PyMem_Malloc((size_t)cap * sizeof(Event))
                            : PyMem_Realloc(k->ev, (size_t)cap * sizeof(Event));
            if (ev == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            if (own)
                memcpy(ev, k->ev, (size_t)k->n * sizeof(Event));
            k->ev = ev;
            k->cap = cap;
        }
    }
    memmove(k->ev + i + 1, k->ev + i, (size_t)(k->n - i) * sizeof(Event));
    k->ev[i] = e;
    if (k->n++ == k->head)
        self->occupied[b >> 6] |= (uint64_t)1 << (b & 63);
    self->ring_n++;
    return 0;
}

/* The ring's earliest bucket that holds an event, or -1: the first bit set from the
 * base's bucket on, round the ring (the buckets before it in the array come later). */
static inline Py_ssize_t ring_first(const EventLoop *self) {
    if (self->ring_n == 0)
        return -1;
    Py_ssize_t i = (Py_ssize_t)(self->base & RING_MASK), w = i >> 6;
    uint64_t bits = self->occupied[w] & (~(uint64_t)0 << (i & 63));
    while (bits == 0) {
        w = (w + 1) & (RING_WORDS - 1);
        bits = self->occupied[w];
    }
    return w * 64 + __builtin_ctzll(bits);
}

/* The ring starts at the bucket of time t (every pending event is at t or after it). */
static inline void ring_start_at(EventLoop *self, int64_t t) {
    if ((t >> RING_SHIFT) > self->base)
        self->base = t >> RING_SHIFT;
}

/* Remove bucket b's first event into *out. */
static inline void ring_take(EventLoop *self, Py_ssize_t b, Event *out) {
    Bucket *k = &self->ring[b];
    *out = k->ev[k->head++];
    if (k->head == k->n) {
        k->head = k->n = 0;
        if (k->ev != own_slice(self, b)) { /* back to its slice of the slab */
            PyMem_Free(k->ev);
            k->ev = own_slice(self, b);
            k->cap = RING_INLINE;
        }
        self->occupied[b >> 6] &= ~((uint64_t)1 << (b & 63));
    }
    self->ring_n--;
}

/* The earliest pending event (NULL: none); *bucket: its ring bucket, or -1 (the heap's). */
static inline Event *earliest(EventLoop *self, Py_ssize_t *bucket) {
    Py_ssize_t b = ring_first(self);
    *bucket = -1;
    if (b >= 0) {
        Event *r = &self->ring[b].ev[self->ring[b].head];
        if (self->n == 0 || before(r, &self->heap[0])) {
            *bucket = b;
            return r;
        }
    }
    return self->n ? &self->heap[0] : NULL;
}

/* The heap's array starts 32 bytes (one event) past a 64-byte boundary, so the two
 * children of every event (2i + 1, 2i + 2) share one cache line: a pop's walk down, one
 * level per step, then reads one line a level instead of two. (It matters when the heap
 * is deep: below RING_MIN_PENDING it is small, above it the ring takes the near future.) */
static int grow(EventLoop *self) {
    Py_ssize_t cap = self->cap ? self->cap * 2 : 1024;
    void *mem = PyMem_Malloc((size_t)cap * sizeof(Event) + 96);
    if (mem == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Event *h = (Event *)((((uintptr_t)mem + 63) & ~(uintptr_t)63) + sizeof(Event));
    if (self->n)
        memcpy(h, self->heap, (size_t)self->n * sizeof(Event));
    PyMem_Free(self->heap_mem);
    self->heap_mem = mem;
    self->heap = h;
    self->cap = cap;
    return 0;
}

/* Put e in the hole at i, moving the later events above it down (i: the heap's new last
 * place on a push, the leaf the hole reached on a pop). */
static inline void sift_up(Event *h, Py_ssize_t i, Event e) {
    while (i > 0) {
        Py_ssize_t p = (i - 1) >> 1;
        if (!before(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

/* Insert (t, fn, arg) of dispatch `kind` (EV_CALL: fn(arg); the others: fabric_core.c)
 * with the next sequence number; takes new references. The kind sits in the two low bits
 * of seq, below the counter, so the order by (t, seq) is the order of scheduling. */
int ec_push(EventLoop *self, int64_t t, int kind, PyObject *fn, PyObject *arg) {
    Event e = {t, (self->seq << 2) | (uint64_t)kind, fn, arg};
    int64_t a = t >> RING_SHIFT; /* its bucket, counted from time 0 */
    int rc = 1;
    if (a >= self->base && a - self->base < RING_N &&
        self->n + self->ring_n >= RING_MIN_PENDING &&
        ((self->ring == NULL && ring_alloc(self) < 0) ||
         (rc = ring_put(self, a & RING_MASK, e)) < 0))
        return -1;
    if (rc) { /* few pending, not in the ring's span, or out of order in a crowded bucket */
        if (self->n == self->cap && grow(self) < 0)
            return -1;
        sift_up(self->heap, self->n++, e);
    }
    self->seq++;
    Py_INCREF(fn);
    Py_INCREF(arg);
    return 0;
}

/* Remove the earliest event into *out (its references now belong to the caller). */
static void heap_pop(EventLoop *self, Event *out) {
    Event *h = self->heap;
    *out = h[0];
    Py_ssize_t n = --self->n;
    if (n == 0)
        return;
    /* Floyd's bottom-up sift: the hole at the root goes down to a leaf along the earlier
     * child (one comparison a level), then the last event, which came from the bottom and
     * mostly belongs near it, goes up from there. The classic sift-down compares twice a
     * level (the children, then the last event against the earlier one), and the second
     * comparison's branch is the hard one to predict. Any heap order pops the same
     * sequence: (time, sequence number) is a total order. */
    Event last = h[n];
    Py_ssize_t i = 0, c;
    while ((c = 2 * i + 1) < n) {
        if (c + 1 < n && before(&h[c + 1], &h[c]))
            c++;
        h[i] = h[c];
        i = c;
    }
    sift_up(h, i, last);
}

static int as_time(PyObject *o, int64_t *out) {
    long long v = as_i64(o);
    if (v == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_OverflowError,
                            "event time beyond the 64-bit picosecond range");
        }
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* ------------------------------------------------------------------ type slots */

static int EventLoop_init(EventLoop *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":EventLoop", kwlist))
        return -1;
    return 0;
}

static int EventLoop_traverse(EventLoop *self, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < self->n; i++) {
        Py_VISIT(self->heap[i].fn);
        Py_VISIT(self->heap[i].arg);
    }
    for (Py_ssize_t b = 0; self->ring_n && b < RING_N; b++) {
        Bucket *k = &self->ring[b];
        for (int32_t i = k->head; i < k->n; i++) {
            Py_VISIT(k->ev[i].fn);
            Py_VISIT(k->ev[i].arg);
        }
    }
    return 0;
}

/* Drop every pending event. The queues are emptied before any reference is released
 * (a release may run code that looks at the loop). */
static int EventLoop_clear(EventLoop *self) {
    Py_ssize_t n = self->n;
    Event *h = self->heap;
    self->n = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_CLEAR(h[i].fn);
        Py_CLEAR(h[i].arg);
    }
    while (self->ring_n) {
        Event e;
        ring_take(self, ring_first(self), &e);
        Py_DECREF(e.fn);
        Py_DECREF(e.arg);
    }
    return 0;
}

static void EventLoop_dealloc(EventLoop *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    EventLoop_clear(self);
    PyMem_Free(self->heap_mem);
    if (self->ring != NULL) { /* empty now (clear): every bucket is back in the slab */
        PyMem_Free(self->ring);
        PyMem_Free(self->occupied);
        PyMem_Free(self->slab_mem);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t EventLoop_len(EventLoop *self) { return self->n + self->ring_n; }

/* ------------------------------------------------------------------ methods */

static PyObject *EventLoop_push(EventLoop *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "push(t, fn, arg) takes 3 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    int64_t t;
    if (as_time(args[0], &t) < 0 || ec_push(self, t, EV_CALL, args[1], args[2]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *EventLoop_at(EventLoop *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "at(t, fn, arg=None)");
        return NULL;
    }
    int64_t t;
    if (as_time(args[0], &t) < 0)
        return NULL;
    if (t < self->now)
        t = self->now;
    if (ec_push(self, t, EV_CALL, args[1], nargs == 3 ? args[2] : Py_None) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *EventLoop_after(EventLoop *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "after(dt, fn, arg=None)");
        return NULL;
    }
    int64_t dt;
    if (as_time(args[0], &dt) < 0)
        return NULL;
    if (dt < 0)
        dt = 0;
    if (ec_push(self, self->now + dt, EV_CALL, args[1], nargs == 3 ? args[2] : Py_None) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *EventLoop_pusher(EventLoop *self, PyObject *Py_UNUSED(ignored)) {
    return PyObject_GetAttrString((PyObject *)self, "push");
}

static PyObject *EventLoop_next_time(EventLoop *self, PyObject *Py_UNUSED(ignored)) {
    Py_ssize_t b;
    Event *e = earliest(self, &b);
    if (e == NULL)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(e->t);
}

static PyObject *EventLoop_stop(EventLoop *self, PyObject *Py_UNUSED(ignored)) {
    self->stop = 1;
    Py_RETURN_NONE;
}

static PyObject *EventLoop_run(EventLoop *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"until", NULL};
    PyObject *until = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:run", kwlist, &until))
        return NULL;
    int64_t limit = INT64_MAX;
    if (until != Py_None) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(until, &overflow);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (overflow > 0)
            limit = INT64_MAX;
        else if (overflow < 0)
            limit = INT64_MIN;
        else
            limit = (int64_t)v;
    }
    self->stop = 0;
    int64_t n = 0;
    Event e, *first;
    Py_ssize_t b;
    while ((first = earliest(self, &b)) != NULL && first->t <= limit) {
        if (b >= 0)
            ring_take(self, b, &e);
        else
            heap_pop(self, &e);
        /* every pending event is at or after the one run (an event pushed into the past
         * went to the heap, and runs next) */
        ring_start_at(self, e.t);
        self->now = e.t;
        int kind = (int)(e.seq & 3);
        int rc;
        if (kind == EV_CALL) {
            PyObject *r = PyObject_CallOneArg(e.fn, e.arg);
            rc = r == NULL ? -1 : 0;
            Py_XDECREF(r);
        } else {
            rc = fabric_dispatch(kind, e.fn, e.arg, e.t);
        }
        Py_DECREF(e.fn);
        Py_DECREF(e.arg);
        if (rc < 0) {
            self->events += n;
            return NULL;
        }
        n++;
        if (self->stop)
            break;
    }
    self->events += n;
    return PyLong_FromLongLong(n);
}

static PyObject *EventLoop_advance(EventLoop *self, PyObject *arg) {
    int64_t t;
    if (as_time(arg, &t) < 0)
        return NULL;
    Py_ssize_t b;
    Event *first = earliest(self, &b);
    if (first != NULL && first->t < t) {
        PyErr_SetString(PyExc_RuntimeError, "advance past a pending event");
        return NULL;
    }
    if (t > self->now)
        self->now = t;
    ring_start_at(self, t); /* nothing is pending before t */
    Py_RETURN_NONE;
}

static PyMethodDef EventLoop_methods[] = {
    {"push", (PyCFunction)(void (*)(void))EventLoop_push, METH_FASTCALL,
     "push(t, fn, arg): schedule fn(arg) at t (no past-time clamp: t >= now)."},
    {"at", (PyCFunction)(void (*)(void))EventLoop_at, METH_FASTCALL,
     "at(t, fn, arg=None): run fn(arg) at time t (ps); a time in the past runs at now."},
    {"after", (PyCFunction)(void (*)(void))EventLoop_after, METH_FASTCALL,
     "after(dt, fn, arg=None): run fn(arg) dt picoseconds from now."},
    {"pusher", (PyCFunction)EventLoop_pusher, METH_NOARGS,
     "The fast push(t, fn, arg) for hot paths."},
    {"next_time", (PyCFunction)EventLoop_next_time, METH_NOARGS,
     "Time of the earliest pending event, or None."},
    {"stop", (PyCFunction)EventLoop_stop, METH_NOARGS,
     "Make the running run() return after the current event."},
    {"run", (PyCFunction)(void (*)(void))EventLoop_run, METH_VARARGS | METH_KEYWORDS,
     "run(until=None) -> count: run events with time <= until (all if None) or until "
     "stop(); now is left at the last event's time."},
    {"advance", (PyCFunction)EventLoop_advance, METH_O,
     "advance(t): move now forward to t (no events may be pending before it)."},
    {NULL, NULL, 0, NULL},
};

static PyObject *EventLoop_get_now(EventLoop *self, void *c) {
    return PyLong_FromLongLong(self->now);
}

static int EventLoop_set_now(EventLoop *self, PyObject *v, void *c) {
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "now cannot be deleted");
        return -1;
    }
    return as_time(v, &self->now);
}

static PyObject *EventLoop_get_events(EventLoop *self, void *c) {
    return PyLong_FromLongLong(self->events);
}

static int EventLoop_set_events(EventLoop *self, PyObject *v, void *c) {
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "events cannot be deleted");
        return -1;
    }
    return as_time(v, &self->events);
}

static PyGetSetDef EventLoop_getset[] = {
    {"now", (getter)EventLoop_get_now, (setter)EventLoop_set_now,
     "time (ps) of the event being run (of the last one after a run)", NULL},
    {"events", (getter)EventLoop_get_events, (setter)EventLoop_set_events,
     "events run so far", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods EventLoop_as_sequence = {
    .sq_length = (lenfunc)EventLoop_len,
};

PyTypeObject EventLoopType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "uet.native._event_core.EventLoop",
    .tp_doc = "Integer-picosecond event queue (C). now is the time of the event being run.",
    .tp_basicsize = sizeof(EventLoop),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)EventLoop_init,
    .tp_dealloc = (destructor)EventLoop_dealloc,
    .tp_traverse = (traverseproc)EventLoop_traverse,
    .tp_clear = (inquiry)EventLoop_clear,
    .tp_methods = EventLoop_methods,
    .tp_getset = EventLoop_getset,
    .tp_as_sequence = &EventLoop_as_sequence,
    .tp_weaklistoffset = offsetof(EventLoop, weakrefs),
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_event_core",
    "The fabric's discrete-event core in C (uet.fabric.scheduler).", -1, NULL,
};

PyMODINIT_FUNC PyInit__event_core(void) {
    if (PyType_Ready(&EventLoopType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&EventLoopType);
    if (PyModule_AddIntConstant(m, "RING_SHIFT", RING_SHIFT) < 0 ||
        PyModule_AddIntConstant(m, "RING_MIN_PENDING", RING_MIN_PENDING) < 0 ||
        PyModule_AddIntConstant(m, "RING_BUCKETS", (long)RING_N) < 0) {
        Py_DECREF(&EventLoopType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddObject(m, "EventLoop", (PyObject *)&EventLoopType) < 0) {
        Py_DECREF(&EventLoopType);
        Py_DECREF(m);
        return NULL;
    }
    if (fabric_core_init(m) < 0 || series_core_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
