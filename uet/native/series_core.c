/* uet.native._event_core.ChangeCore: the run sampler's change-only series
 * (uet.experiments.timeseries.ChangeRecorder) in C.
 *
 * Why: a run samples every link direction's byte count and every switch port's queue
 * every few microseconds of virtual time, and most of them change between two samples: the
 * Python recorder's loop over the changed series (two or four array appends each) was
 * ~3-4% of a run's CPU at 128 and 1,024 hosts.
 *
 * What: the same rule, series by series. The first sample stores every value; a later
 * sample stores each value that differs from the series' previous one, preceded by the
 * previous sample's value when that point was not stored yet (so a step plot of the points
 * is exact); close() ends every series with the last sample unless it is stored. Points
 * are kept here (int64 times and values, 16 bytes a point, as Points' two arrays) until
 * take() hands a series' points over as two byte strings in array('q') layout and forgets
 * them (what to compare against stays: a later sample continues the same series). A
 * sample's values are all converted before anything changes: a value that is not an int
 * of 64 bits raises and leaves the recorder as it was. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "pyint.h"

#define NONE_STORED INT64_MIN /* a series' last stored time before its first point */

typedef struct {
    int64_t *t, *v;
    Py_ssize_t n, cap;
} Series;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;      /* number of series */
    Series *s;         /* the points not taken yet, per series */
    int64_t *last;     /* the previous sample's values */
    int64_t *stored;   /* per series: time of its last stored point (NONE_STORED) */
    int64_t *scratch;  /* a sample's values, converted */
    int64_t prev_t;    /* the previous sample's time */
    int have;          /* a sample was taken */
} ChangeCore;

static int push(Series *s, int64_t t, int64_t v) {
    if (s->n == s->cap) {
        Py_ssize_t cap = s->cap ? 2 * s->cap : 8;
        int64_t *nt = PyMem_Realloc(s->t, (size_t)cap * sizeof(int64_t));
        if (nt == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->t = nt;
        int64_t *nv = PyMem_Realloc(s->v, (size_t)cap * sizeof(int64_t));
        if (nv == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->v = nv;
        s->cap = cap;
    }
    s->t[s->n] = t;
    s->v[s->n] = v;
    s->n++;
    return 0;
}

static void forget(Series *s) {
    PyMem_Free(s->t);
    PyMem_Free(s->v);
    s->t = s->v = NULL;
    s->n = s->cap = 0;
}

static int CC_init(ChangeCore *self, PyObject *args, PyObject *kw) {
    Py_ssize_t n;
    static char *names[] = {"n", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n", names, &n))
        return -1;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "ChangeCore: the number of series is negative");
        return -1;
    }
    if (self->s != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ChangeCore: already initialised");
        return -1;
    }
    size_t k = (size_t)(n ? n : 1);
    self->s = PyMem_Calloc(k, sizeof(Series));
    self->last = PyMem_Calloc(k, sizeof(int64_t));
    self->stored = PyMem_Calloc(k, sizeof(int64_t));
    self->scratch = PyMem_Calloc(k, sizeof(int64_t));
    if (!self->s || !self->last || !self->stored || !self->scratch) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        self->stored[i] = NONE_STORED;
    self->n = n;
    return 0;
}

static void CC_dealloc(ChangeCore *self) {
    if (self->s != NULL)
        for (Py_ssize_t i = 0; i < self->n; i++)
            forget(&self->s[i]);
    PyMem_Free(self->s);
    PyMem_Free(self->last);
    PyMem_Free(self->stored);
    PyMem_Free(self->scratch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(ChangeCore *self) {
    if (self->s == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ChangeCore: not initialised");
        return 0;
    }
    return 1;
}

static int store(ChangeCore *self, Py_ssize_t i, int64_t t, int64_t v) {
    if (push(&self->s[i], t, v) < 0)
        return -1;
    self->stored[i] = t;
    return 0;
}

/* sample(now, values): values a list of n ints */
static PyObject *CC_sample(ChangeCore *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!ready(self))
        return NULL;
    if (nargs != 2 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "sample(now, values): values is a list");
        return NULL;
    }
    long long now = as_i64(args[0]);
    if (now == -1 && PyErr_Occurred())
        return NULL;
    PyObject *values = args[1];
    Py_ssize_t n = self->n;
    if (PyList_GET_SIZE(values) != n) {
        PyErr_Format(PyExc_ValueError, "sample: %zd values for %zd series",
                     PyList_GET_SIZE(values), n);
        return NULL;
    }
    int64_t *x = self->scratch;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = as_i64(PyList_GET_ITEM(values, i));
        if (v == -1 && PyErr_Occurred())
            return NULL;
        x[i] = v;
    }
    if (!self->have) {
        for (Py_ssize_t i = 0; i < n; i++)
            if (store(self, i, now, x[i]) < 0)
                return NULL;
    } else {
        int64_t prev = self->prev_t, *last = self->last;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (x[i] == last[i])
                continue;
            if (self->stored[i] != prev && store(self, i, prev, last[i]) < 0)
                return NULL; /* close the flat stretch */
            if (store(self, i, now, x[i]) < 0)
                return NULL;
        }
    }
    memcpy(self->last, x, (size_t)n * sizeof(int64_t));
    self->prev_t = now;
    self->have = 1;
    Py_RETURN_NONE;
}

static PyObject *CC_close(ChangeCore *self, PyObject *unused) {
    if (!ready(self))
        return NULL;
    if (self->have)
        for (Py_ssize_t i = 0; i < self->n; i++)
            if (self->stored[i] != self->prev_t && store(self, i, self->prev_t, self->last[i]) < 0)
                return NULL;
    Py_RETURN_NONE;
}

/* take(i) -> (times, values): series i's points not taken yet, as bytes in array('q')
 * layout (native int64), forgotten here */
static PyObject *CC_take(ChangeCore *self, PyObject *arg) {
    if (!ready(self))
        return NULL;
    Py_ssize_t i = PyNumber_AsSsize_t(arg, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || i >= self->n) {
        PyErr_SetString(PyExc_IndexError, "take: no such series");
        return NULL;
    }
    Series *s = &self->s[i];
    Py_ssize_t nb = s->n * (Py_ssize_t)sizeof(int64_t);
    PyObject *t = PyBytes_FromStringAndSize(s->n ? (const char *)s->t : NULL, nb);
    PyObject *v = t ? PyBytes_FromStringAndSize(s->n ? (const char *)s->v : NULL, nb) : NULL;
    PyObject *r = v ? PyTuple_Pack(2, t, v) : NULL;
    Py_XDECREF(t);
    Py_XDECREF(v);
    if (r != NULL)
        forget(s);
    return r;
}

static PyObject *CC_pending(ChangeCore *self, void *c) {
    if (!ready(self))
        return NULL;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < self->n; i++)
        k += self->s[i].n;
    return PyLong_FromSsize_t(k);
}

static PyObject *CC_len(ChangeCore *self, void *c) { return PyLong_FromSsize_t(self->n); }

static PyMethodDef CC_methods[] = {
    {"sample", (PyCFunction)(void (*)(void))CC_sample, METH_FASTCALL,
     "sample(now, values): one sample of every series (a list of ints, in order)"},
    {"close", (PyCFunction)CC_close, METH_NOARGS,
     "close(): end every series with the last sample, unless it is stored"},
    {"take", (PyCFunction)CC_take, METH_O,
     "take(i) -> (times, values): series i's points as array('q') bytes; forgotten here"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CC_getset[] = {
    {"pending", (getter)CC_pending, NULL, "points held, not taken yet", NULL},
    {"series", (getter)CC_len, NULL, "number of series", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ChangeCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uet.native._event_core.ChangeCore",
    .tp_basicsize = sizeof(ChangeCore),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ChangeCore(n): n integer series sampled together, stored where they change "
              "(uet.experiments.timeseries.ChangeRecorder)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)CC_init,
    .tp_dealloc = (destructor)CC_dealloc,
    .tp_methods = CC_methods,
    .tp_getset = CC_getset,
};

int series_core_init(PyObject *m) {
    if (PyType_Ready(&ChangeCoreType) < 0)
        return -1;
    Py_INCREF(&ChangeCoreType);
    if (PyModule_AddObject(m, "ChangeCore", (PyObject *)&ChangeCoreType) < 0) {
        Py_DECREF(&ChangeCoreType);
        return -1;
    }
    return 0;
}
