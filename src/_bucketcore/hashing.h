/* The hashing kernel's own state and values (_hashing.pyx): the Murmur3 path every kernel hashes
 * by, and the numpy scalars of a single key's hashes. */
#ifndef BUCKETCORE_HASHING_H
#define BUCKETCORE_HASHING_H

#include <Python.h>
#include <stdint.h>
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>

/* The multi-lane path every kernel hashes by: BC_PATH_AUTO (0, the best this CPU has) unless
 * forced. Threads hashing without the GIL read it while set_path may write it: on a free-threaded
 * build both are atomic (relaxed: every path gives the same bits, so a call may take either). One
 * copy, in _hashing: the other kernels hash through its functions. */
static int bc_hash_path_value = 0;
#if defined(Py_GIL_DISABLED) && (defined(__GNUC__) || defined(__clang__))
#define bc_hash_path()      __atomic_load_n(&bc_hash_path_value, __ATOMIC_RELAXED)
#define bc_set_hash_path(v) __atomic_store_n(&bc_hash_path_value, (v), __ATOMIC_RELAXED)
#elif defined(Py_GIL_DISABLED)
#define bc_hash_path()      (*(volatile int *)&bc_hash_path_value)
#define bc_set_hash_path(v) ((void)(*(volatile int *)&bc_hash_path_value = (v)))
#else
#define bc_hash_path()      bc_hash_path_value
#define bc_set_hash_path(v) ((void)(bc_hash_path_value = (v)))
#endif

/* numpy scalars made as numpy's own scalar constructors make them (allocated, then the value set) */
static inline PyObject *bc_uint32_scalar(uint32_t v)
{
    PyObject *o = PyArrayScalar_New(UInt32);
    if (o != NULL)
        PyArrayScalar_ASSIGN(o, UInt32, v);
    return o;
}

static inline PyObject *bc_uint16_scalar(uint16_t v)
{
    PyObject *o = PyArrayScalar_New(UInt16);
    if (o != NULL)
        PyArrayScalar_ASSIGN(o, UInt16, v);
    return o;
}

#endif
