/* The wire encoder's reads of the Python objects in an entry's lists (_wire.encode_entries),
 * without touching their reference counts: the caller holds them for the call. */
#ifndef BUCKETCORE_WIRE_OBJECTS_H
#define BUCKETCORE_WIRE_OBJECTS_H

#include <Python.h>

/* A bytes payload's data and size (the payload is borrowed from its entry's list for the length
 * of the call); 1 for another type. */
static inline int bc_bytes_payload(PyObject *o, const char **p, size_t *n)
{
    if (!Py_IS_TYPE(o, &PyBytes_Type))
        return 1;
    *p = PyBytes_AS_STRING(o);
    *n = (size_t)PyBytes_GET_SIZE(o);
    return 0;
}

/* UTF-8 of an exact str (cached by the str), NULL for another type or on error. */
static inline const char *bc_str_utf8(PyObject *o, size_t *n)
{
    Py_ssize_t size = 0;
    const char *p;
    if (!Py_IS_TYPE(o, &PyUnicode_Type))
        return NULL;
    p = PyUnicode_AsUTF8AndSize(o, &size);
    if (p == NULL) {
        PyErr_Clear();
        return NULL;
    }
    *n = (size_t)size;
    return p;
}

/* Ask for a payload object's first three cache lines (header and the start of its data) ahead
 * of its turn: the payloads of a batch lie scattered over the heap. */
static inline void bc_prefetch_object(const void *p)
{
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p);
    __builtin_prefetch((const char *)p + 64);
    __builtin_prefetch((const char *)p + 128);
#else
    (void)p;
#endif
}

/* Grow (or shrink) a bytes object this call created and nobody else holds. */
static inline int bc_bytes_resize(PyObject **b, Py_ssize_t n)
{
    return _PyBytes_Resize(b, n);
}

#endif
