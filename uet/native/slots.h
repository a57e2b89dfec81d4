/* Reading and writing the __slots__ of Python objects from C by offset, for the C code
 * that works on the protocol objects and records in place (codec_core.c and the end
 * point's cores: recovery_core.c, sender_core.c, target_core.c, fep_core.c, ses_core.c).
 *
 * configure() of each core resolves, once, the offset of every slot it uses from the
 * class's member descriptors (a slot is a T_OBJECT_EX member); after that a field read is
 * one load, with no attribute lookup and no interpreted bytecode. A core only applies a
 * layout to an object whose type is exactly the configured class (Py_IS_TYPE), and hands
 * anything else to the Python reference. Everything here is static: each core is its own
 * extension module with its own copy. */
#ifndef UET_SLOTS_H
#define UET_SLOTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <structmember.h>

#include "method_cache.h"
#include "pyint.h"

#define M32 0xFFFFFFFFLL
#define HALF 0x80000000LL

typedef struct {
    PyTypeObject *type;
    int n;
    const char **names;
    Py_ssize_t off[32];
} Layout;

#define SLOTP(o, l, i) ((PyObject **)((char *)(o) + (l).off[i]))
#define SLOT(o, l, i) (*SLOTP(o, l, i))

/* the offsets of cls's slots names[0..n) */
static inline int layout(Layout *l, PyObject *cls, const char **names, int n) {
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "configure: a record class is expected");
        return -1;
    }
    if (n > (int)(sizeof l->off / sizeof l->off[0])) {
        PyErr_SetString(PyExc_ValueError, "configure: too many slots");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttrString(cls, names[i]);
        if (d == NULL)
            return -1;
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type) ||
            ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            PyErr_Format(PyExc_TypeError, "configure: %s.%s is not a slot",
                         ((PyTypeObject *)cls)->tp_name, names[i]);
            return -1;
        }
        l->off[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    Py_INCREF(cls);
    Py_XSETREF(l->type, (PyTypeObject *)cls);
    l->n = n;
    l->names = names;
    return 0;
}

static inline int unset(PyObject *o, const Layout *l, int i) {
    PyErr_Format(PyExc_AttributeError, "'%s' object has no attribute '%s'",
                 Py_TYPE(o)->tp_name, l->names[i]);
    return -1;
}

/* an int slot (a bool counts, as in Python arithmetic) */
static inline int get_i64(PyObject *o, const Layout *l, int i, int64_t *out) {
    PyObject *v = *(PyObject **)((char *)o + l->off[i]);
    if (v == NULL)
        return unset(o, l, i);
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s.%s: an int is expected, not %s",
                     Py_TYPE(o)->tp_name, l->names[i], Py_TYPE(v)->tp_name);
        return -1;
    }
    long long x = as_i64(v);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *out = x;
    return 0;
}

/* an int slot or None: 1 and *out, 0 for None */
static inline int get_opt(PyObject *o, const Layout *l, int i, int64_t *out) {
    PyObject *v = *(PyObject **)((char *)o + l->off[i]);
    if (v == Py_None)
        return 0;
    return get_i64(o, l, i, out) < 0 ? -1 : 1;
}

/* a slot's truth value */
static inline int truth(PyObject *o, const Layout *l, int i) {
    PyObject *v = *(PyObject **)((char *)o + l->off[i]);
    if (v == Py_True)
        return 1;
    if (v == Py_False || v == Py_None)
        return 0;
    if (v == NULL)
        return unset(o, l, i);
    return PyObject_IsTrue(v);
}

/* store a new reference (NULL: an error is set) */
static inline int put(PyObject *o, const Layout *l, int i, PyObject *v) {
    if (v == NULL)
        return -1;
    PyObject **p = (PyObject **)((char *)o + l->off[i]);
    PyObject *old = *p;
    *p = v;
    Py_XDECREF(old);
    return 0;
}

static inline int put_i64(PyObject *o, const Layout *l, int i, int64_t v) {
    return put(o, l, i, PyLong_FromLongLong(v));
}

static inline int put_bool(PyObject *o, const Layout *l, int i, int b) {
    return put(o, l, i, Py_NewRef(b ? Py_True : Py_False));
}

/* o.<field> += delta */
static inline int add_i64(PyObject *o, const Layout *l, int i, int64_t delta) {
    int64_t v;
    if (get_i64(o, l, i, &v) < 0)
        return -1;
    return put_i64(o, l, i, v + delta);
}

/* collections.Counter (looked up once per module; NULL if that failed). Counter defines
 * __delitem__ in Python, so its type's item assignment is the generic slot, which finds
 * dict's own __setitem__ and calls it through an argument tuple: ~1,000 instructions a
 * store, 10% of a run's instructions when every counter went that way. Its __setitem__ is
 * dict's, so PyDict_SetItem stores the same, directly. */
static PyTypeObject *counter_type = NULL;
static int counter_type_looked_up = 0;

/* whether o[key] = v is exactly dict's store (a dict, or a Counter) */
static inline int plain_dict_store(PyObject *o) {
    PyTypeObject *t = Py_TYPE(o);
    if (t == &PyDict_Type)
        return 1;
    if (!counter_type_looked_up) {
        counter_type_looked_up = 1;
        PyObject *mod = PyImport_ImportModule("collections");
        PyObject *c = mod ? PyObject_GetAttrString(mod, "Counter") : NULL;
        Py_XDECREF(mod);
        if (c == NULL)
            PyErr_Clear(); /* no Counter: every other mapping takes the generic store */
        else if (PyType_Check(c))
            counter_type = (PyTypeObject *)c; /* kept for the life of the module */
        else
            Py_DECREF(c);
    }
    return t == counter_type && counter_type != NULL;
}

/* counters[name] += n (a Counter: a missing key counts 0) */
static inline int count_n(PyObject *counters, PyObject *name, int64_t n) {
    if (counters == NULL) {
        PyErr_SetString(PyExc_AttributeError, "no counters");
        return -1;
    }
    PyObject *v;
    if (PyDict_Check(counters)) { /* Counter: the common case, without __missing__ */
        v = PyDict_GetItemWithError(counters, name);
        if (v == NULL && PyErr_Occurred())
            return -1;
        Py_XINCREF(v);
    } else {
        v = PyObject_GetItem(counters, name);
        if (v == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError))
                return -1;
            PyErr_Clear();
        }
    }
    PyObject *sum;
    int overflow = 1;
    long long x = 0, total;
    if (v != NULL && PyLong_CheckExact(v)) /* the usual int: add in C, one new int */
        x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (v == NULL) {
        sum = PyLong_FromLongLong(n);
    } else if (!overflow && !__builtin_add_overflow(x, (long long)n, &total)) {
        sum = PyLong_FromLongLong(total);
        Py_DECREF(v);
    } else {
        PyObject *d = PyLong_FromLongLong(n);
        sum = d ? PyNumber_Add(v, d) : NULL;
        Py_XDECREF(d);
        Py_DECREF(v);
    }
    if (sum == NULL)
        return -1;
    int rc = plain_dict_store(counters) ? PyDict_SetItem(counters, name, sum)
                                        : PyObject_SetItem(counters, name, sum);
    Py_DECREF(sum);
    return rc;
}

static inline int count(PyObject *counters, PyObject *name) { return count_n(counters, name, 1); }

/* a new object of a slots class with the given values, in the layout's order (new
 * references, taken even on failure) */
static inline PyObject *new_filled(const Layout *l, PyObject **v) {
    PyObject *o = l->type->tp_alloc(l->type, 0);
    if (o == NULL) {
        for (int i = 0; i < l->n; i++)
            Py_XDECREF(v[i]);
        return NULL;
    }
    for (int i = 0; i < l->n; i++)
        *SLOTP(o, *l, i) = v[i];
    return o;
}

/* o.<l->names[i]> (a new reference): at its offset when o is exactly the layout's class,
 * else looked up by name (a subclass may override the attribute) */
static inline PyObject *slot_attr(PyObject *o, const Layout *l, int i) {
    if (l->type != NULL && Py_IS_TYPE(o, l->type)) {
        PyObject *v = SLOT(o, *l, i);
        if (v == NULL) {
            unset(o, l, i);
            return NULL;
        }
        return Py_NewRef(v);
    }
    return PyObject_GetAttrString(o, l->names[i]);
}

/* o.<name> (a new reference) for objects of classes the core was not configured with:
 * where the class keeps name in a slot, read at its offset, found once per class and kept
 * while the class is unchanged (its version tag, as CPython's own attribute cache does; the
 * class is held so that its address is not reused); anything else by PyObject_GetAttr.
 * A data descriptor (the slot) wins over an instance dict, as in attribute lookup. */
typedef struct {
    PyTypeObject *type[4];
    unsigned int tag[4];
    Py_ssize_t off[4]; /* 0: not a slot */
    int next;
} SlotCache;

/* the offset of name's slot in o's class (0: not a slot), from the cache */
static inline Py_ssize_t cached_offset(PyObject *o, PyObject *name, SlotCache *c) {
    PyTypeObject *t = Py_TYPE(o);
    int i = 0;
    for (; i < 4; i++)
        if (c->type[i] == t)
            break;
    if (i == 4 || !(t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ||
        c->tag[i] != t->tp_version_tag) {
        PyObject *d = _PyType_Lookup(t, name); /* borrowed; assigns the version tag */
        if (i == 4) {
            i = c->next;
            c->next = (c->next + 1) % 4;
        }
        Py_XSETREF(c->type[i], (PyTypeObject *)Py_NewRef(t));
        c->tag[i] = (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? t->tp_version_tag : 0;
        c->off[i] = 0;
        if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type) &&
            ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX && c->tag[i] != 0)
            c->off[i] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    return c->off[i];
}

static inline PyObject *cached_attr(PyObject *o, PyObject *name, SlotCache *c) {
    Py_ssize_t off = cached_offset(o, name, c);
    if (off) {
        PyObject *v = *(PyObject **)((char *)o + off);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(o, name); /* not a slot, or unset (its AttributeError) */
}

/* o.<name> = v (0, -1), through the same cache */
static inline int cached_set(PyObject *o, PyObject *name, PyObject *v, SlotCache *c) {
    Py_ssize_t off = cached_offset(o, name, c);
    if (!off)
        return PyObject_SetAttr(o, name, v);
    PyObject **p = (PyObject **)((char *)o + off), *old = *p;
    *p = Py_NewRef(v);
    Py_XDECREF(old);
    return 0;
}

/* a new object of a slots dataclass, every field at its default (defaults: a tuple in
 * the layout's order, the dataclass fields' defaults) */
static inline PyObject *new_record(const Layout *l, PyObject *defaults) {
    PyObject *o = l->type->tp_alloc(l->type, 0);
    if (o == NULL)
        return NULL;
    for (int i = 0; i < l->n; i++)
        *SLOTP(o, *l, i) = Py_NewRef(PyTuple_GET_ITEM(defaults, i));
    return o;
}

/* the signed serial difference a - b of two 32-bit PSNs (uet.wire.records.psn_diff) */
static inline int64_t psn_sdiff(int64_t a, int64_t b) {
    int64_t d = (a - b) & M32;
    return d & HALF ? d - 0x100000000LL : d;
}

/* obj.name(*args, **kw): args[0] is obj, the last len(kwnames) are the keywords' values */
static inline PyObject *call(PyObject *name, PyObject **args, size_t n, PyObject *kwnames) {
    size_t npos = n - (kwnames ? (size_t)PyTuple_GET_SIZE(kwnames) : 0);
    return mc_call(name, args, npos, kwnames);
}

/* the same, the result dropped: 0, -1 */
static inline int call_drop(PyObject *name, PyObject **args, size_t n, PyObject *kwnames) {
    PyObject *r = call(name, args, n, kwnames);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* the first entry of a dict (next(iter(d)) and its value, borrowed): 1, or 0 when empty */
static inline int dict_first(PyObject *d, PyObject **key, PyObject **val) {
    Py_ssize_t pos = 0;
    return PyDict_Next(d, &pos, key, val);
}

static inline int is_int(PyObject *o) { return PyLong_CheckExact(o) || PyBool_Check(o); }

static inline int intern_str(PyObject **p, const char *s) {
    *p = PyUnicode_InternFromString(s);
    return *p == NULL;
}

/* a buffer of single bytes, one-dimensional and contiguous (what a memoryview of a bytes
 * object is, and what the cores take as a payload) */
static inline int byte_buffer(const Py_buffer *v) {
    return v->ndim == 1 && v->itemsize == 1 && v->shape != NULL && v->strides != NULL &&
           v->strides[0] == 1 && v->suboffsets == NULL;
}

/* a tuple of n interned names (new reference, NULL on error): the keyword names of a call,
 * which callees (C cores, and CPython for Python functions) match by identity first, and
 * by comparing text only when that fails (names made by Py_BuildValue("(s)") are not
 * interned: that comparison was ~1% of a run) */
static inline PyObject *names_tuple(int n, ...) {
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return NULL;
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        PyObject *s = PyUnicode_InternFromString(va_arg(ap, const char *));
        if (s == NULL) {
            va_end(ap);
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    va_end(ap);
    return t;
}

/* A module function as a method of a class (the NAME_method attributes below): bound like a
 * Python function on attribute access, and, being a method descriptor
 * (Py_TPFLAGS_METHOD_DESCRIPTOR), called unbound by method calls from C
 * (PyObject_VectorcallMethod) and from Python (LOAD_METHOD): the instance goes in as the
 * first argument, as the module function expects, with no bound-method object made per
 * call. (PyInstanceMethod made and freed one per call: ~2.5% of a run's instructions.) */
typedef struct {
    PyObject_HEAD
    PyObject *func;
    vectorcallfunc vectorcall;
} CoreMethod;

static PyObject *core_method_call(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    return PyObject_Vectorcall(((CoreMethod *)self)->func, args, nargsf, kwnames);
}

static PyObject *core_method_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static void core_method_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    Py_CLEAR(((CoreMethod *)self)->func);
    PyObject_GC_Del(self);
}

static int core_method_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((CoreMethod *)self)->func);
    return 0;
}

static PyObject *core_method_repr(PyObject *self) {
    return PyUnicode_FromFormat("<C method %R>", ((CoreMethod *)self)->func);
}

static PyObject *core_method_getattro(PyObject *self, PyObject *name) {
    /* __name__, __doc__, __qualname__ ... of the function */
    if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "__doc__") == 0)
        return PyObject_GetAttr(((CoreMethod *)self)->func, name);
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return r;
    PyErr_Clear();
    return PyObject_GetAttr(((CoreMethod *)self)->func, name);
}

static PyTypeObject CoreMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uet.native.core_method",
    .tp_basicsize = sizeof(CoreMethod),
    .tp_dealloc = core_method_dealloc,
    .tp_vectorcall_offset = offsetof(CoreMethod, vectorcall),
    .tp_repr = core_method_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = core_method_getattro,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A C core's function as a method: bound on attribute access like a function",
    .tp_traverse = core_method_traverse,
    .tp_descr_get = core_method_get,
};

/* Module attributes NAME_method: the module's functions NAME as CoreMethods, for the class
 * dictionaries whose methods a core replaces (0, -1) */
static inline int add_instance_methods(PyObject *m, const char *const *names, int n) {
    if (PyType_Ready(&CoreMethodType) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        PyObject *f = PyObject_GetAttrString(m, names[i]);
        CoreMethod *cm = f ? PyObject_GC_New(CoreMethod, &CoreMethodType) : NULL;
        if (cm == NULL) {
            Py_XDECREF(f);
            return -1;
        }
        cm->func = f;
        cm->vectorcall = core_method_call;
        PyObject_GC_Track(cm);
        PyObject *attr = PyUnicode_FromFormat("%s_method", names[i]);
        int rc = attr ? PyObject_SetAttr(m, attr, (PyObject *)cm) : -1;
        Py_XDECREF(attr);
        Py_DECREF(cm);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* A method-table entry point that takes keywords: a call with keyword arguments goes to
 * the Python reference as it is (the cores' fast paths take positional calls, which is how
 * the protocol code calls them); `impl` takes the positional ones. */
#define KW_ENTRY(name, impl, refvar)                                                         \
    static PyObject *name(PyObject *m, PyObject *const *a, Py_ssize_t n, PyObject *kw) {     \
        if (kw != NULL && PyTuple_GET_SIZE(kw)) {                                            \
            if (refvar == NULL) {                                                            \
                PyErr_SetString(PyExc_RuntimeError, "core not configured");                  \
                return NULL;                                                                 \
            }                                                                                \
            return PyObject_Vectorcall(refvar, a, n, kw);                                    \
        }                                                                                    \
        return impl(m, a, n);                                                                \
    }

#endif
