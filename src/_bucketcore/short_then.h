/* A callable made of two: a C short path tried first, and the general path it declines to (by
 * returning None). What bucketcore.hashing composes its public murmur3_32 and hash_keys of: the
 * short path hashes the common call in C, the general one (a Python function with the public
 * signature and docstring) takes everything else and raises every error. Both get the call's own
 * arguments (vectorcall, nothing copied); a bound first argument, when given, is passed to the
 * short path before them. The object holds its two paths from its construction on and never
 * changes them, so any thread may call it. bc_short_function_new makes the same call a builtin
 * function (what the interpreter calls fastest), with a C body for a call of the keys alone. */
#ifndef BUCKETCORE_SHORT_THEN_H
#define BUCKETCORE_SHORT_THEN_H

#include <Python.h>

/* a METH_FASTCALL | METH_KEYWORDS builtin's C function (PyCFunctionFastWithKeywords from 3.13 on) */
typedef PyObject *(*bc_fastcall_kw)(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames);

/* a short path's C body for a call of the keys alone: (bound or None, keys) */
typedef PyObject *(*bc_keys_fn)(PyObject *bound, PyObject *keys);

/* The two paths and what calling them needs; set once, by bc_paths_init, and never changed. */
typedef struct {
    PyObject *short_path;
    PyObject *general;
    PyObject *bound; /* NULL: none */
    /* the short path's C function and its self when it is a builtin taking fastcall arguments and
     * keywords (a kernel's def): called directly, as the interpreter calls such a builtin */
    bc_fastcall_kw short_c;
    PyObject *short_self;
    /* the short path of a call of the keys alone (one positional argument, no keywords), taking
     * the bound argument (None for none) and the keys; NULL: none, the short path takes it */
    bc_keys_fn short_keys;
} bc_paths;

/* Fill p (zeroed) with these paths (bound: NULL or None for none); -1 with an error set. */
static int bc_paths_init(bc_paths *p, PyObject *short_path, PyObject *general, PyObject *bound)
{
    if (!PyCallable_Check(short_path) || !PyCallable_Check(general)) {
        PyErr_SetString(PyExc_TypeError, "short_then takes two callables");
        return -1;
    }
    Py_INCREF(short_path);
    Py_INCREF(general);
    p->short_path = short_path;
    p->general = general;
    p->bound = bound == Py_None ? NULL : bound;
    Py_XINCREF(p->bound);
    if (PyCFunction_CheckExact(short_path) &&
        (PyCFunction_GET_FLAGS(short_path) & ~METH_COEXIST) == (METH_FASTCALL | METH_KEYWORDS)) {
        p->short_c = (bc_fastcall_kw)(void (*)(void))PyCFunction_GET_FUNCTION(short_path);
        p->short_self = PyCFunction_GET_SELF(short_path); /* borrowed: short_path holds it */
    }
    return 0;
}

static int bc_paths_traverse(bc_paths *p, visitproc visit, void *arg)
{
    Py_VISIT(p->short_path);
    Py_VISIT(p->general);
    Py_VISIT(p->bound);
    return 0;
}

static void bc_paths_clear(bc_paths *p)
{
    p->short_c = NULL;
    p->short_self = NULL;
    Py_CLEAR(p->short_path);
    Py_CLEAR(p->general);
    Py_CLEAR(p->bound);
}

static inline PyObject *bc_paths_short_call(bc_paths *p, PyObject *const *args, Py_ssize_t nargs,
                                            PyObject *kwnames)
{
    if (p->short_c != NULL)
        return p->short_c(p->short_self, args, nargs, kwnames);
    return PyObject_Vectorcall(p->short_path, args, (size_t)nargs, kwnames);
}

#define BC_SHORT_THEN_STACK 8

/* The short path with the bound argument before the call's own: kept out of line, so that the
 * common call (no bound argument) has no stack array to set up. */
static Py_NO_INLINE PyObject *bc_paths_short_bound(bc_paths *p, PyObject *const *args, size_t nargsf,
                                                   PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *result;
    if (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) {
        /* the caller lets args[-1] be used: the bound argument goes there for the call */
        PyObject **slot = (PyObject **)args - 1, *saved = *slot;
        *slot = p->bound;
        result = bc_paths_short_call(p, slot, nargs + 1, kwnames);
        *slot = saved;
        return result;
    }
    PyObject *stack[BC_SHORT_THEN_STACK], **all = stack;
    if (total + 1 > BC_SHORT_THEN_STACK) {
        all = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
        if (all == NULL)
            return PyErr_NoMemory();
    }
    all[0] = p->bound;
    memcpy(all + 1, args, (size_t)total * sizeof(PyObject *));
    result = bc_paths_short_call(p, all, nargs + 1, kwnames);
    if (all != stack)
        PyMem_Free(all);
    return result;
}

/* The general path alone: a call of other than one positional argument (keys by keyword, or a
 * wrong call, whose error general names), or paths cleared by the collector in a cycle being
 * freed. */
static Py_NO_INLINE PyObject *bc_paths_general(bc_paths *p, PyObject *const *args, size_t nargsf,
                                               PyObject *kwnames)
{
    if (p->general == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "short_then: its paths were cleared");
        return NULL;
    }
    return PyObject_Vectorcall(p->general, args, nargsf, kwnames);
}

/* The call: the short path's result unless it is None, then the general path's. */
static inline PyObject *bc_paths_call(bc_paths *p, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || p->general == NULL)
        return bc_paths_general(p, args, nargsf, kwnames);
    PyObject *result;
    if (kwnames == NULL && p->short_keys != NULL)
        result = p->short_keys(p->bound != NULL ? p->bound : Py_None, args[0]);
    else if (p->bound == NULL)
        result = bc_paths_short_call(p, args, 1, kwnames);
    else
        result = bc_paths_short_bound(p, args, nargsf, kwnames);
    if (result != Py_None)
        return result; /* the short path's result, or its error */
    Py_DECREF(result);
    return bc_paths_general(p, args, nargsf, kwnames);
}

typedef struct {
    PyObject ob_base;
    bc_paths paths;
    PyObject *dict; /* __name__, __doc__, __wrapped__ ... (functools.update_wrapper) */
    vectorcallfunc vectorcall;
} bc_short_then;

static PyObject *bc_short_then_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return bc_paths_call(&((bc_short_then *)self)->paths, args, nargsf, kwnames);
}

static int bc_short_then_traverse(PyObject *self, visitproc visit, void *arg)
{
    bc_short_then *s = (bc_short_then *)self;
    Py_VISIT(s->dict);
    return bc_paths_traverse(&s->paths, visit, arg);
}

static int bc_short_then_clear(PyObject *self)
{
    bc_short_then *s = (bc_short_then *)self;
    bc_paths_clear(&s->paths);
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
    bc_short_then *s = PyObject_GC_New(bc_short_then, &bc_short_then_type);
    if (s == NULL)
        return NULL;
    memset(&s->paths, 0, sizeof s->paths);
    s->dict = NULL;
    s->vectorcall = bc_short_then_call;
    PyObject_GC_Track((PyObject *)s);
    if (bc_paths_init(&s->paths, short_path, general, bound) < 0) {
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}

/* The same two paths as a builtin function (METH_FASTCALL | METH_KEYWORDS, which the interpreter
 * calls straight through its C function), for a module's public functions: its self is a small
 * module object of its own (so the function pickles by reference, as its name in its __module__,
 * and __qualname__ is its name) whose state holds the paths and the function's PyMethodDef. */
typedef struct {
    bc_paths paths;
    PyMethodDef def;
    char *name; /* the def's ml_name and ml_doc, PyMem copies freed with the holder, which the */
    char *doc;  /* function holds and so outlives */
} bc_short_function;

static int bc_short_function_traverse(PyObject *holder, visitproc visit, void *arg)
{
    bc_short_function *f = PyModule_GetState(holder);
    return f == NULL ? 0 : bc_paths_traverse(&f->paths, visit, arg);
}

static int bc_short_function_clear(PyObject *holder)
{
    bc_short_function *f = PyModule_GetState(holder);
    if (f != NULL)
        bc_paths_clear(&f->paths);
    return 0;
}

static void bc_short_function_free(void *holder)
{
    bc_short_function *f = PyModule_GetState((PyObject *)holder);
    if (f == NULL)
        return;
    bc_paths_clear(&f->paths);
    PyMem_Free(f->name);
    PyMem_Free(f->doc);
    f->name = f->doc = NULL;
}

static struct PyModuleDef bc_short_function_holder = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_bucketcore._hashing.short_then_paths",
    .m_size = sizeof(bc_short_function),
    .m_traverse = bc_short_function_traverse,
    .m_clear = bc_short_function_clear,
    .m_free = bc_short_function_free,
};

static PyObject *bc_short_function_call(PyObject *holder, PyObject *const *args, Py_ssize_t nargs,
                                        PyObject *kwnames)
{
    bc_short_function *f = PyModule_GetState(holder);
    return bc_paths_call(&f->paths, args, (size_t)nargs, kwnames);
}

static char *bc_pymem_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = PyMem_Malloc(n);
    if (copy == NULL)
        PyErr_NoMemory();
    else
        memcpy(copy, s, n);
    return copy;
}

/* A new builtin function named name, of module (its __module__), with this doc (which may open
 * with a text signature: "name(...)\n--\n\n"), calling these paths; NULL with an error set. */
static PyObject *bc_short_function_new(PyObject *short_path, bc_keys_fn short_keys, PyObject *general,
                                       PyObject *bound, PyObject *name, PyObject *module, PyObject *doc)
{
    const char *name_text = PyUnicode_AsUTF8(name), *doc_text;
    if (name_text == NULL || (doc_text = PyUnicode_AsUTF8(doc)) == NULL)
        return NULL;
    PyObject *holder = PyModule_Create(&bc_short_function_holder), *fn = NULL;
    if (holder == NULL)
        return NULL;
    bc_short_function *f = PyModule_GetState(holder); /* zeroed by PyModule_Create */
    f->paths.short_keys = short_keys;
    if (bc_paths_init(&f->paths, short_path, general, bound) == 0 &&
        (f->name = bc_pymem_strdup(name_text)) != NULL && (f->doc = bc_pymem_strdup(doc_text)) != NULL) {
        f->def.ml_name = f->name;
        f->def.ml_meth = (PyCFunction)(void (*)(void))bc_short_function_call;
        f->def.ml_flags = METH_FASTCALL | METH_KEYWORDS;
        f->def.ml_doc = f->doc;
        fn = PyCFunction_NewEx(&f->def, holder, module);
    }
    Py_DECREF(holder); /* held by fn, when made */
    return fn;
}

#endif
