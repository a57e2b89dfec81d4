/* Shared between event_core.c (the event loop) and fabric_core.c (switch ports, ports and
 * channels whose per-frame path runs in C): the event struct, the loop, its push, and the
 * dispatch of the fabric's own event kinds. */
#ifndef UET_EVENT_CORE_H
#define UET_EVENT_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* What the run loop does with an event: EV_CALL calls fn(arg); the others are the fabric's
 * per-frame events, run in C by fabric_dispatch (fn is the port, arg the frame or None):
 * a frame arriving at a switch port or NIC, a transmitter waking up, a NIC's end-point
 * timer. */
enum { EV_CALL = 0, EV_ARRIVE = 1, EV_WAKE = 2, EV_TIMER = 3 };

typedef struct {
    int64_t t;
    uint64_t seq; /* scheduling counter << 2 | kind */
    PyObject *fn;
    PyObject *arg;
} Event;

/* One bucket of the near-future ring (event_core.c): its events in (t, seq) order in
 * ev[head..n). */
typedef struct {
    Event *ev;
    int32_t head, n, cap;
} Bucket;

typedef struct {
    PyObject_HEAD
    Event *heap;    /* 32 bytes past a 64-byte boundary: siblings share a cache line */
    void *heap_mem; /* the block it lies in (what is freed) */
    Py_ssize_t n;   /* events in the heap */
    Py_ssize_t cap;
    Bucket *ring;   /* the near future: RING_N buckets of 2**RING_SHIFT ps (event_core.c) */
    uint64_t *occupied; /* a bit per bucket: not empty */
    Event *slab;    /* every bucket's first places, bucket after bucket (event_core.c) */
    void *slab_mem; /* the block it lies in (what is freed) */
    int64_t base;   /* the ring's first bucket (t >> RING_SHIFT of the last event run) */
    Py_ssize_t ring_n; /* events in the ring */
    uint64_t seq;
    int64_t now;
    int64_t events;
    int stop;
    PyObject *weakrefs;
} EventLoop;

extern PyTypeObject EventLoopType;

/* Schedule an event (new references to fn and arg are taken); -1 with an exception set. */
int ec_push(EventLoop *loop, int64_t t, int kind, PyObject *fn, PyObject *arg);

/* Run one fabric event of `kind` at time `now`; -1 with an exception set. */
int fabric_dispatch(int kind, PyObject *fn, PyObject *arg, int64_t now);

/* Add the fabric types to the module; -1 on error. */
int fabric_core_init(PyObject *module);

/* Add the sampler's ChangeCore (series_core.c) to the module; -1 on error. */
int series_core_init(PyObject *module);

#endif
