/* Method calls by name from the C cores (obj.name(*args)), with the method looked up once
 * per class.
 *
 * Why: PyObject_VectorcallMethod and the PyObject_CallMethod* helpers look the name up on
 * every call (the type's attribute cache, the descriptor checks, the instance dict's keys):
 * ~110 instructions a call, ~25 calls per packet, ~4% of a run. The interpreter itself
 * avoids that for LOAD_METHOD by specialising on the class's version tag; this does the
 * same for the cores.
 *
 * What: a small table per extension module (each core includes this header and keeps its
 * own copy), indexed by the class and the name, of the function found for them. An entry
 * is used only while the class's version tag is the one it was found under (any change to
 * the class or its bases gives it a new tag: the attribute cache's rule), and only for
 * classes where the lookup cannot depend on the instance: the generic attribute lookup and
 * no instance dict (__slots__ classes, built-in types such as deque and dict), and a
 * method-like descriptor (a function, a method descriptor: called with the instance as its
 * first argument, as PyObject_VectorcallMethod calls it). Anything else takes
 * PyObject_VectorcallMethod, with its errors. The entry holds its class and name, so
 * neither address is reused while it is kept; the function is held for the call only. */
#ifndef UET_METHOD_CACHE_H
#define UET_METHOD_CACHE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MC_SIZE 256 /* entries (a power of two) */

typedef struct {
    PyTypeObject *type;
    PyObject *name;
    unsigned int tag;
    PyObject *func; /* borrowed from the class: valid while the tag is */
} MethodEntry;

static MethodEntry mc_table[MC_SIZE];

static inline MethodEntry *mc_slot(PyTypeObject *t, PyObject *name) {
    uintptr_t h = ((uintptr_t)t >> 4) ^ ((uintptr_t)name >> 3) ^ ((uintptr_t)name >> 11);
    return &mc_table[h & (MC_SIZE - 1)];
}

/* the method-like function of name for t, or NULL where the generic call must be made */
static PyObject *mc_fill(MethodEntry *e, PyTypeObject *t, PyObject *name) {
    if (t->tp_getattro != PyObject_GenericGetAttr || t->tp_dictoffset != 0)
        return NULL;
#ifdef Py_TPFLAGS_MANAGED_DICT
    if (t->tp_flags & Py_TPFLAGS_MANAGED_DICT)
        return NULL;
#endif
    if (!PyUnicode_CheckExact(name))
        return NULL;
    PyObject *f = _PyType_Lookup(t, name); /* borrowed; assigns the version tag */
    if (f == NULL || !PyType_HasFeature(Py_TYPE(f), Py_TPFLAGS_METHOD_DESCRIPTOR) ||
        !PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG))
        return NULL;
    PyTypeObject *old_t = e->type;
    PyObject *old_n = e->name;
    e->type = (PyTypeObject *)Py_NewRef(t);
    e->name = Py_NewRef(name);
    e->tag = t->tp_version_tag;
    e->func = f;
    Py_XDECREF(old_t); /* after the entry is whole: a dealloc may call back in */
    Py_XDECREF(old_n);
    return f;
}

/* whether e holds (t, name) found under t's present version tag */
static inline int mc_hit(const MethodEntry *e, PyTypeObject *t, PyObject *name) {
    return e->type == t && e->name == name && e->tag == t->tp_version_tag &&
           PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG);
}

static inline PyObject *mc_find(PyTypeObject *t, PyObject *name) {
    MethodEntry *e = mc_slot(t, name);
    return mc_hit(e, t, name) ? e->func : mc_fill(e, t, name);
}

/* args[0].name(*args[1:]) with PyObject_VectorcallMethod's arguments and result */
static inline PyObject *mc_call(PyObject *name, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames) {
    PyObject *f = mc_find(Py_TYPE(args[0]), name);
    if (f == NULL)
        return PyObject_VectorcallMethod(name, args, nargsf, kwnames);
    Py_INCREF(f); /* the call may change the class */
    PyObject *r = PyObject_Vectorcall(f, args, nargsf, kwnames);
    Py_DECREF(f);
    return r;
}

/* obj.name() */
static inline PyObject *mc_call0(PyObject *obj, PyObject *name) {
    PyObject *a[1] = {obj};
    return mc_call(name, a, 1, NULL);
}

/* obj.name(arg) */
static inline PyObject *mc_call1(PyObject *obj, PyObject *name, PyObject *arg) {
    PyObject *a[2] = {obj, arg};
    return mc_call(name, a, 2, NULL);
}

/* obj.name(arg1, arg2) */
static inline PyObject *mc_call2(PyObject *obj, PyObject *name, PyObject *a1, PyObject *a2) {
    PyObject *a[3] = {obj, a1, a2};
    return mc_call(name, a, 3, NULL);
}

#endif
