/* Python int -> C long long for the C cores. CPython 3.11's PyLong_AsLongLong converts an
 * int of more than one 30-bit digit through _PyLong_AsByteArray (~130 instructions), which
 * every picosecond time (2^30 ps is about a millisecond) takes. Here an exact int of one or
 * two digits (below 2^60) is read from its digits inline (3.11's layout; later versions
 * changed it and take the API), anything else goes through the overflow-checking variant,
 * which adds up the digits. Same contract as PyLong_AsLongLong: -1 with an exception set on
 * failure (OverflowError, or TypeError for what has no __index__). */
#ifndef UET_PYINT_H
#define UET_PYINT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* 1 and *out = v's value where v is an int (int subclasses too: IntEnum and IntFlag
 * members, bool) of at most two digits, read inline; else 0 (nothing set). An int
 * subclass keeps the int's digits, and the API reads them without calling __index__. */
static inline int small_i64(PyObject *v, long long *out) {
#if PY_VERSION_HEX < 0x030C0000 /* 3.11's int layout: a signed digit count, 30-bit digits */
    if (PyLong_Check(v)) {
        const digit *d = ((PyLongObject *)v)->ob_digit;
        switch (Py_SIZE(v)) {
        case 0:
            *out = 0;
            return 1;
        case 1:
            *out = (long long)d[0];
            return 1;
        case -1:
            *out = -(long long)d[0];
            return 1;
        case 2:
            *out = (long long)d[0] | ((long long)d[1] << PyLong_SHIFT);
            return 1;
        case -2:
            *out = -((long long)d[0] | ((long long)d[1] << PyLong_SHIFT));
            return 1;
        default:
            break;
        }
    }
#endif
    (void)v;
    (void)out;
    return 0;
}

/* v's value as PyLong_AsLongLongAndOverflow gives it (*overflow: -1, 0, 1), read inline
 * for ints of at most two digits */
static inline long long i64_or_overflow(PyObject *v, int *overflow) {
    long long x;
    *overflow = 0;
    if (small_i64(v, &x))
        return x;
    return PyLong_AsLongLongAndOverflow(v, overflow);
}

static inline long long as_i64(PyObject *v) {
    int overflow;
    long long x = i64_or_overflow(v, &overflow);
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "Python int too large to convert to C long long");
        return -1;
    }
    return x;
}

/* A Python int for v (a new reference), shared with earlier calls for the same value while
 * it stays in `memo` (1 << bits slots, direct-mapped by value; each module keeps its own
 * tables). For per-packet fields that take a bounded set of values (payload and frame
 * sizes, a packet's index and offset in its message): a packet in flight then holds a
 * shared int instead of one of its own, an object less to make, to read cold when its ACK
 * comes and to free. Ints are immutable, so sharing is invisible. */
static inline PyObject *memo_int(PyObject **memo, int bits, long long v) {
    size_t i = (size_t)(((unsigned long long)v * 0x9E3779B97F4A7C15ULL) >> (64 - bits));
    PyObject *o = memo[i];
    if (o != NULL && as_i64(o) == v)
        return Py_NewRef(o);
    PyObject *n = PyLong_FromLongLong(v);
    if (n == NULL)
        return NULL;
    Py_XSETREF(memo[i], Py_NewRef(n));
    return n;
}

#endif
