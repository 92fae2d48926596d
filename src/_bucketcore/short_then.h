/* A callable made of two: a C short path tried first, and the general path it declines to (by
 * returning None). What bucketcore.hashing composes its public murmur3_32 and hash_keys of: the
 * short path hashes the common call in C, the general one (a Python function with the public
 * signature and docstring) takes everything else and raises every error. Both get the call's own
 * arguments (vectorcall, nothing copied); a bound first argument, when given, is passed to the
 * short path before them. The object holds its two paths from its construction on and never
 * changes them, so any thread may call it. */
#ifndef BUCKETCORE_SHORT_THEN_H
#define BUCKETCORE_SHORT_THEN_H

#include <Python.h>

/* a METH_FASTCALL | METH_KEYWORDS builtin's C function (PyCFunctionFastWithKeywords from 3.13 on) */
typedef PyObject *(*bc_fastcall_kw)(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames);

typedef struct {
    PyObject ob_base;
    PyObject *short_path;
    PyObject *general;
    PyObject *bound; /* NULL: none */
    PyObject *dict;  /* __name__, __doc__, __wrapped__ ... (functools.update_wrapper) */
    vectorcallfunc vectorcall;
    /* the short path's C function and its self when it is a builtin taking fastcall arguments and
     * keywords (a kernel's def): called directly, as the interpreter calls such a builtin */
    bc_fastcall_kw short_c;
    PyObject *short_self;
} bc_short_then;

static inline PyObject *bc_short_then_vectorcall(bc_short_then *s, PyObject *const *args, Py_ssize_t nargs,
                                                 PyObject *kwnames)
{
    if (s->short_c != NULL)
        return s->short_c(s->short_self, args, nargs, kwnames);
    return PyObject_Vectorcall(s->short_path, args, (size_t)nargs, kwnames);
}

#define BC_SHORT_THEN_STACK 8

static PyObject *bc_short_then_short(bc_short_then *s, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (s->bound == NULL)
        return bc_short_then_vectorcall(s, args, nargs, kwnames);
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *result;
    if (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) {
        /* the caller lets args[-1] be used: the bound argument goes there for the call */
        PyObject **slot = (PyObject **)args - 1, *saved = *slot;
        *slot = s->bound;
        result = bc_short_then_vectorcall(s, slot, nargs + 1, kwnames);
        *slot = saved;
        return result;
    }
    PyObject *stack[BC_SHORT_THEN_STACK], **all = stack;
    if (total + 1 > BC_SHORT_THEN_STACK) {
        all = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
        if (all == NULL)
            return PyErr_NoMemory();
    }
    all[0] = s->bound;
    memcpy(all + 1, args, (size_t)total * sizeof(PyObject *));
    result = bc_short_then_vectorcall(s, all, nargs + 1, kwnames);
    if (all != stack)
        PyMem_Free(all);
    return result;
}

static PyObject *bc_short_then_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    bc_short_then *s = (bc_short_then *)self;
    if (PyVectorcall_NARGS(nargsf) != 1) /* keys by keyword, or a wrong call: general names it */
        return PyObject_Vectorcall(s->general, args, nargsf, kwnames);
    PyObject *result = bc_short_then_short(s, args, nargsf, kwnames);
    if (result != Py_None)
        return result; /* the short path's result, or its error */
    Py_DECREF(result);
    return PyObject_Vectorcall(s->general, args, nargsf, kwnames);
}

static int bc_short_then_traverse(PyObject *self, visitproc visit, void *arg)
{
    bc_short_then *s = (bc_short_then *)self;
    Py_VISIT(s->short_path);
    Py_VISIT(s->general);
    Py_VISIT(s->bound);
    Py_VISIT(s->dict);
    return 0;
}

static int bc_short_then_clear(PyObject *self)
{
    bc_short_then *s = (bc_short_then *)self;
    Py_CLEAR(s->short_path);
    Py_CLEAR(s->general);
    Py_CLEAR(s->bound);
    Py_CLEAR(s->dict);
    return 0;
}

static void bc_short_then_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    bc_short_then_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *bc_short_then_repr(PyObject *self)
{
    PyObject *name = PyObject_GetAttrString(self, "__qualname__");
    PyObject *r;
    if (name == NULL) {
        PyErr_Clear();
        return PyUnicode_FromString("<short_then>");
    }
    r = PyUnicode_FromFormat("<function %S>", name);
    Py_DECREF(name);
    return r;
}

/* pickled by reference, as a function is: its __qualname__ in its __module__ (update_wrapper's) */
static PyObject *bc_short_then_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyMethodDef bc_short_then_methods[] = {
    {"__reduce__", bc_short_then_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef bc_short_then_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject bc_short_then_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_bucketcore._hashing.short_then",
    .tp_basicsize = sizeof(bc_short_then),
    .tp_dealloc = bc_short_then_dealloc,
    .tp_vectorcall_offset = offsetof(bc_short_then, vectorcall),
    .tp_repr = bc_short_then_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A short path tried first, then the general path it declines to (returning None).",
    .tp_traverse = bc_short_then_traverse,
    .tp_clear = bc_short_then_clear,
    .tp_methods = bc_short_then_methods,
    .tp_getset = bc_short_then_getset,
    .tp_dictoffset = offsetof(bc_short_then, dict),
};

static int bc_short_then_ready(void)
{
    return PyType_Ready(&bc_short_then_type);
}

/* A new short_then of these paths (bound: NULL or None for none); NULL with an error set. */
static PyObject *bc_short_then_new(PyObject *short_path, PyObject *general, PyObject *bound)
{
    if (!PyCallable_Check(short_path) || !PyCallable_Check(general)) {
        PyErr_SetString(PyExc_TypeError, "short_then takes two callables");
        return NULL;
    }
    bc_short_then *s = PyObject_GC_New(bc_short_then, &bc_short_then_type);
    if (s == NULL)
        return NULL;
    Py_INCREF(short_path);
    Py_INCREF(general);
    s->short_path = short_path;
    s->general = general;
    s->bound = bound == Py_None ? NULL : bound;
    Py_XINCREF(s->bound);
    s->dict = NULL;
    s->vectorcall = bc_short_then_call;
    s->short_c = NULL;
    s->short_self = NULL;
    if (PyCFunction_CheckExact(short_path) &&
        (PyCFunction_GET_FLAGS(short_path) & ~METH_COEXIST) == (METH_FASTCALL | METH_KEYWORDS)) {
        s->short_c = (bc_fastcall_kw)(void (*)(void))PyCFunction_GET_FUNCTION(short_path);
        s->short_self = PyCFunction_GET_SELF(short_path); /* borrowed: short_path holds it */
    }
    PyObject_GC_Track((PyObject *)s);
    return (PyObject *)s;
}

#endif
