/* A callable made of two: a compiled fast path tried first, and the general path it declines to
 * (by returning None). What bucketcore.dispatcher puts in front of a Dispatcher's offer, ack and
 * poll: the fast path is a bound method of the dispatcher's compiled core (a METH_FASTCALL |
 * METH_KEYWORDS builtin, called straight through its C function, as the interpreter would), the
 * general one the Python method with the public signature, which takes every other call and
 * raises every error. Both get the call's own arguments, whatever their number and keywords
 * (vectorcall, nothing copied). The object holds its two paths from its construction on and never
 * changes them, so any thread may call it.
 *
 * _hashing's short_then (short_then.h) is this with an arity gate (one positional argument, else
 * straight to the general path) and a bound first argument; the dispatcher's calls take zero to
 * three positional arguments, so that gate would send every one of them to the general path. */
#ifndef BUCKETCORE_FAST_THEN_H
#define BUCKETCORE_FAST_THEN_H

#include <Python.h>

/* a METH_FASTCALL | METH_KEYWORDS builtin's C function */
typedef PyObject *(*bc_fast_kw)(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

typedef struct {
    PyObject ob_base;
    PyObject *fast;
    PyObject *general;
    PyObject *dict; /* __name__, __doc__, __wrapped__ ... (functools.update_wrapper) */
    vectorcallfunc vectorcall;
    bc_fast_kw fast_c;   /* the fast path's C function when it is such a builtin, else NULL */
    PyObject *fast_self; /* and its self (borrowed: fast holds it) */
} bc_fast_then;

static PyObject *bc_fast_then_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    bc_fast_then *s = (bc_fast_then *)self;
    PyObject *result = s->fast_c != NULL ? s->fast_c(s->fast_self, args, PyVectorcall_NARGS(nargsf), kwnames)
                                         : PyObject_Vectorcall(s->fast, args, nargsf, kwnames);
    if (result != Py_None)
        return result; /* the fast path's result, or its error */
    Py_DECREF(result);
    return PyObject_Vectorcall(s->general, args, nargsf, kwnames);
}

static int bc_fast_then_traverse(PyObject *self, visitproc visit, void *arg)
{
    bc_fast_then *s = (bc_fast_then *)self;
    Py_VISIT(s->fast);
    Py_VISIT(s->general);
    Py_VISIT(s->dict);
    return 0;
}

static int bc_fast_then_clear(PyObject *self)
{
    bc_fast_then *s = (bc_fast_then *)self;
    s->fast_c = NULL;
    s->fast_self = NULL;
    Py_CLEAR(s->fast);
    Py_CLEAR(s->general);
    Py_CLEAR(s->dict);
    return 0;
}

static void bc_fast_then_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    bc_fast_then_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *bc_fast_then_repr(PyObject *self)
{
    bc_fast_then *s = (bc_fast_then *)self;
    return PyUnicode_FromFormat("<fast_then %R>", s->general);
}

static PyGetSetDef bc_fast_then_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject bc_fast_then_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_bucketcore._dispatcher.fast_then",
    .tp_basicsize = sizeof(bc_fast_then),
    .tp_dealloc = bc_fast_then_dealloc,
    .tp_vectorcall_offset = offsetof(bc_fast_then, vectorcall),
    .tp_repr = bc_fast_then_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A compiled fast path tried first, then the general path it declines to (returning None).",
    .tp_traverse = bc_fast_then_traverse,
    .tp_clear = bc_fast_then_clear,
    .tp_getset = bc_fast_then_getset,
    .tp_dictoffset = offsetof(bc_fast_then, dict),
};

static int bc_fast_then_ready(void)
{
    return PyType_Ready(&bc_fast_then_type);
}

/* A new fast_then of these paths; NULL with an error set. */
static PyObject *bc_fast_then_new(PyObject *fast, PyObject *general)
{
    if (!PyCallable_Check(fast) || !PyCallable_Check(general)) {
        PyErr_SetString(PyExc_TypeError, "fast_then takes two callables");
        return NULL;
    }
    bc_fast_then *s = PyObject_GC_New(bc_fast_then, &bc_fast_then_type);
    if (s == NULL)
        return NULL;
    Py_INCREF(fast);
    Py_INCREF(general);
    s->fast = fast;
    s->general = general;
    s->dict = NULL;
    s->vectorcall = bc_fast_then_call;
    s->fast_c = NULL;
    s->fast_self = NULL;
    if (PyCFunction_CheckExact(fast) &&
        (PyCFunction_GET_FLAGS(fast) & ~METH_COEXIST) == (METH_FASTCALL | METH_KEYWORDS)) {
        s->fast_c = (bc_fast_kw)(void (*)(void))PyCFunction_GET_FUNCTION(fast);
        s->fast_self = PyCFunction_GET_SELF(fast);
    }
    PyObject_GC_Track((PyObject *)s);
    return (PyObject *)s;
}

#endif
