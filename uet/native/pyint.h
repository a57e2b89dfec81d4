/* Python int -> C long long for the C cores. CPython 3.11's PyLong_AsLongLong converts an
 * int of more than one 30-bit digit through _PyLong_AsByteArray (~130 instructions), which
 * every picosecond time (2^30 ps is about a millisecond) takes; the overflow-checking variant
 * adds up the digits directly. Same contract as PyLong_AsLongLong: -1 with an exception set
 * on failure (OverflowError, or TypeError for what has no __index__). */
#ifndef UET_PYINT_H
#define UET_PYINT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static inline long long as_i64(PyObject *v) {
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "Python int too large to convert to C long long");
        return -1;
    }
    return x;
}

#endif
