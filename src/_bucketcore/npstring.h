/* numpy 2's StringDType, read through numpy's own C API for it (NpyString_acquire_allocator,
 * NpyString_load, NpyString_release_allocator), so its packed layout (short strings inside the
 * item, longer ones in the array's arena) stays numpy's business. The API slots are called by
 * number: this module is built for numpy 1.x runtimes too, where the NpyString macros are not
 * defined; a StringDType array (dtype kind "T") only exists at runtime under numpy >= 2, where these
 * slots are the NpyString functions. */
#ifndef BUCKETCORE_NPSTRING_H
#define BUCKETCORE_NPSTRING_H

#include <Python.h>
#include <numpy/arrayobject.h>

typedef npy_static_string bc_npstr;
typedef npy_string_allocator bc_npstr_allocator;

/* Lock the descriptor's allocator (a mutex, no GIL needed) until bc_npstr_release. */
static inline bc_npstr_allocator *bc_npstr_acquire(void *descr)
{
    return (*(npy_string_allocator * (*)(const PyArray_StringDTypeObject *))
                PyArray_API[316])((const PyArray_StringDTypeObject *)descr);
}

/* Unpack one item: 0 a string (out->buf, out->size), 1 a missing item, -1 a corrupt one. */
static inline int bc_npstr_load(bc_npstr_allocator *a, const void *packed, bc_npstr *out)
{
    return (*(int (*)(npy_string_allocator *, const npy_packed_static_string *,
                      npy_static_string *))PyArray_API[313])(a, (const npy_packed_static_string *)packed,
                                                             out);
}

static inline void bc_npstr_release(bc_npstr_allocator *a)
{
    (*(void (*)(npy_string_allocator *))PyArray_API[318])(a);
}

#endif
