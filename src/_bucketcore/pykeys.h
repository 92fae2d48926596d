/* Describe a Python key object as a bc_key without creating any object (needs the GIL).
 * Keys: str (its UTF-8), bytes, bytearray and C-contiguous memoryview (their bytes). Missing keys
 * (keyless): None, a float NaN (pandas' missing value in object columns) and pandas.NA. */
#ifndef BUCKETCORE_PYKEYS_H
#define BUCKETCORE_PYKEYS_H

#include <Python.h>
#include <math.h>
#include <string.h>
#include "keys.h"

#if defined(_MSC_VER) && !defined(__clang__)
#define BC_NOINLINE __declspec(noinline)
#else
#define BC_NOINLINE __attribute__((noinline))
#endif

/* Whether o is pandas.NA: an object of the type pandas names NAType ("NAType", or
 * "pandas._libs.missing.NAType" before pandas 3). Only asked of objects that are no key type, so
 * it costs nothing on keys; bucketcore never imports pandas to compare with its singleton. */
static inline int bc_is_pandas_na(PyObject *o)
{
    const char *name = Py_TYPE(o)->tp_name;
    size_t n = strlen(name);
    return n >= 6 && strcmp(name + n - 6, "NAType") == 0 && (n == 6 || name[n - 7] == '.');
}

static inline void bc_key_none(bc_key *k)
{
    k->data = NULL;
    k->len = 0;
    k->kind = BC_KEY_NONE;
}

/* BC_OK: described; BC_ERR_KEY_TYPE: not a key type; BC_ERR_KEY_BUFFER: a memoryview that is
 * released or not C-contiguous; BC_ERR_KEY_TOO_LONG: longer than
 * BC_KEY_MAX_BYTES; BC_ERR_NEEDS_GIL: a legacy str that is not ready and may_ready is 0 (readying
 * it writes to it: that needs the GIL; only before Python 3.12); -1: Python error set. Without may_ready this
 * only reads the object, so a thread without the GIL may call it while the GIL holder runs no Python code. */
/* bc_describe_key_as for everything but an exact compact-ASCII str: out of line, so the usual key
 * keeps the describing loop small. */
static BC_NOINLINE int bc_describe_other_key(PyObject *o, bc_key *k, int may_ready)
{
    if (PyUnicode_Check(o)) {
#if PY_VERSION_HEX < 0x030C0000
        if (!PyUnicode_IS_READY(o)) {
            if (!may_ready)
                return BC_ERR_NEEDS_GIL;
            if (PyUnicode_READY(o) < 0)
                return -1;
        }
#endif
        Py_ssize_t units = PyUnicode_GET_LENGTH(o);
        if (PyUnicode_IS_ASCII(o))
            k->kind = BC_KEY_BYTES;
        else {
            int kind = PyUnicode_KIND(o);
            k->kind = kind == PyUnicode_1BYTE_KIND   ? BC_KEY_UCS1
                      : kind == PyUnicode_2BYTE_KIND ? BC_KEY_UCS2
                                                     : BC_KEY_UCS4;
        }
        if (bc_key_too_long(k->kind, (uint64_t)units))
            return BC_ERR_KEY_TOO_LONG;
        k->data = PyUnicode_DATA(o);
        k->len = (uint32_t)units;
        return BC_OK;
    }
    if (PyBytes_Check(o)) {
        if ((uint64_t)PyBytes_GET_SIZE(o) > BC_KEY_MAX_BYTES)
            return BC_ERR_KEY_TOO_LONG;
        k->data = PyBytes_AS_STRING(o);
        k->len = (uint32_t)PyBytes_GET_SIZE(o);
        k->kind = BC_KEY_BYTES;
        return BC_OK;
    }
    if (o == Py_None) {
        bc_key_none(k);
        return BC_OK;
    }
    if (PyFloat_Check(o)) {
        if (!isnan(PyFloat_AS_DOUBLE(o)))
            return BC_ERR_KEY_TYPE;
        bc_key_none(k);
        return BC_OK;
    }
    if (PyByteArray_Check(o)) {
        if ((uint64_t)PyByteArray_GET_SIZE(o) > BC_KEY_MAX_BYTES)
            return BC_ERR_KEY_TOO_LONG;
        k->data = PyByteArray_AS_STRING(o);
        k->len = (uint32_t)PyByteArray_GET_SIZE(o);
        k->kind = BC_KEY_BYTES;
        return BC_OK;
    }
    if (PyMemoryView_Check(o)) {
        const Py_buffer *b = PyMemoryView_GET_BUFFER(o);
        if ((((PyMemoryViewObject *)o)->flags & _Py_MEMORYVIEW_RELEASED) || !PyBuffer_IsContiguous(b, 'C'))
            return BC_ERR_KEY_BUFFER;
        if ((uint64_t)b->len > BC_KEY_MAX_BYTES)
            return BC_ERR_KEY_TOO_LONG;
        k->data = b->buf;
        k->len = (uint32_t)b->len;
        k->kind = BC_KEY_BYTES;
        return BC_OK;
    }
    if (bc_is_pandas_na(o)) {
        bc_key_none(k);
        return BC_OK;
    }
    return BC_ERR_KEY_TYPE;
}

static inline int bc_describe_key_as(PyObject *o, bc_key *k, int may_ready)
{
    /* The common key: an exact, compact ASCII str, whose chars are its UTF-8 bytes. */
    if (PyUnicode_CheckExact(o) && PyUnicode_IS_COMPACT_ASCII(o)) {
        Py_ssize_t units = PyUnicode_GET_LENGTH(o);
        if ((uint64_t)units > BC_KEY_MAX_BYTES)
            return BC_ERR_KEY_TOO_LONG;
        k->data = (const void *)(((PyASCIIObject *)o) + 1);
        k->len = (uint32_t)units;
        k->kind = BC_KEY_BYTES;
        return BC_OK;
    }
    return bc_describe_other_key(o, k, may_ready);
}

static inline int bc_describe_key(PyObject *o, bc_key *k)
{
    return bc_describe_key_as(o, k, 1);
}

/* Keys this long or shorter are encoded on the stack by bc_hash_scalar (longer ones in a heap buffer). */
#define BC_SCALAR_STACK_BYTES 256

/* bc_hash_scalar for everything but an exact compact-ASCII str or exact bytes: a str of any other
 * form (non-ASCII: its UTF-8, encoded here) or a subclass of str or bytes. Out of line, so the
 * usual key keeps the scalar call small. */
static BC_NOINLINE int bc_hash_other_scalar(PyObject *o, int replace, uint32_t *out)
{
    bc_key k;
    if (!PyUnicode_Check(o) && !PyBytes_Check(o))
        return BC_ERR_KEY_TYPE;
    int rc = bc_describe_other_key(o, &k, 1);
    if (rc != BC_OK)
        return rc;
    if (k.kind == BC_KEY_BYTES) {
        *out = bc_murmur3_32(k.data, (size_t)k.len);
        return BC_OK;
    }
    uint8_t stack[BC_SCALAR_STACK_BYTES];
    size_t bound = bc_utf8_bound(&k), len = 0;
    uint8_t *buf = bound <= sizeof stack ? stack : (uint8_t *)malloc(bound);
    if (buf == NULL)
        return BC_ERR_NOMEM;
    rc = bc_encode_utf8(&k, replace, buf, &len);
    if (rc == BC_OK)
        *out = bc_murmur3_32(buf, len);
    if (buf != stack)
        free(buf);
    return rc;
}

/* The raw hash of one scalar key without any column machinery (needs the GIL): an exact
 * compact-ASCII str is hashed straight from its characters and a bytes object straight from its
 * buffer; another str is encoded to UTF-8 first (surrogates as bc_encode_units does them).
 * BC_OK and *out; BC_ERR_KEY_TYPE for an object that is neither str nor bytes (the caller takes
 * its general path: a column, or a clear error); otherwise the key's status (BC_ERR_SURROGATE,
 * BC_ERR_KEY_TOO_LONG, BC_ERR_NOMEM) and *out untouched. */
static inline int bc_hash_scalar(PyObject *o, int replace, uint32_t *out)
{
    if (PyUnicode_CheckExact(o) && PyUnicode_IS_COMPACT_ASCII(o)) {
        Py_ssize_t units = PyUnicode_GET_LENGTH(o);
        if ((uint64_t)units > BC_KEY_MAX_BYTES)
            return BC_ERR_KEY_TOO_LONG;
        *out = bc_murmur3_32((const void *)(((PyASCIIObject *)o) + 1), (size_t)units);
        return BC_OK;
    }
    if (PyBytes_CheckExact(o)) {
        if ((uint64_t)PyBytes_GET_SIZE(o) > BC_KEY_MAX_BYTES)
            return BC_ERR_KEY_TOO_LONG;
        *out = bc_murmur3_32(PyBytes_AS_STRING(o), (size_t)PyBytes_GET_SIZE(o));
        return BC_OK;
    }
    return bc_hash_other_scalar(o, replace, out);
}

/* Hold an item that is not an exact str or bytes into *slot: a bytearray or memoryview through a
 * memoryview export of it (so it cannot be resized or released while a thread without the GIL
 * reads its bytes; *o becomes the export), anything else as it is. A released memoryview cannot be
 * exported and is held as it is (describing refuses it). -1: Python error set, nothing held. Out
 * of line: the describing loop stays a leaf for the usual keys. */
static BC_NOINLINE int bc_hold_item(PyObject **o, void **slot)
{
    if (PyByteArray_Check(*o) || PyMemoryView_Check(*o)) {
        PyObject *export_ = PyMemoryView_FromObject(*o);
        if (export_ != NULL) {
            *slot = (void *)export_;
            *o = export_;
            return 0;
        }
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyErr_Clear();
    }
    Py_INCREF(*o);
    *slot = (void *)*o;
    return 0;
}

/* Hold o into *slot and describe it (the describing loop's out-of-line case: anything but an exact
 * compact-ASCII str). *held_it: whether o is held now (a hold fails only with a Python error: -1). */
static BC_NOINLINE int bc_hold_and_describe(PyObject *o, bc_key *k, void **slot, int may_ready, int *held_it)
{
    *held_it = 0;
    /* a str or bytes is held as it is, without the buffer-type tests */
    if (PyUnicode_CheckExact(o) || PyBytes_CheckExact(o)) {
        Py_INCREF(o);
        *slot = (void *)o;
    } else if (bc_hold_item(&o, slot) < 0) {
        return -1;
    }
    *held_it = 1;
    return bc_describe_key_as(o, k, may_ready);
}

/* Whether o is an exact, compact ASCII str short enough to hash: the usual key, whose chars are
 * its UTF-8 bytes. */
static inline int bc_is_plain_ascii(PyObject *o)
{
    return PyUnicode_CheckExact(o) && PyUnicode_IS_COMPACT_ASCII(o) &&
           (uint64_t)PyUnicode_GET_LENGTH(o) <= BC_KEY_MAX_BYTES;
}

/* bc_describe_objects of items[0..n) held into held[]: the usual key (an exact compact-ASCII str)
 * is held and described in line, anything else out of line. */
static inline int bc_describe_held_items(PyObject *const *items, size_t n, bc_key *keys, void **held,
                                         size_t *nheld, size_t *at, int *plain, int may_ready)
{
    int all_bytes = 1;
    for (size_t j = 0; j < n; j++) {
        PyObject *o = items[j];
        if (bc_is_plain_ascii(o)) {
            Py_INCREF(o);
            held[j] = (void *)o;
            keys[j].data = (const void *)(((PyASCIIObject *)o) + 1);
            keys[j].len = (uint32_t)PyUnicode_GET_LENGTH(o);
            keys[j].kind = BC_KEY_BYTES;
            continue;
        }
        int held_it;
        int rc = bc_hold_and_describe(o, &keys[j], &held[j], may_ready, &held_it);
        if (rc != BC_OK) {
            *nheld = held_it ? j + 1 : j;
            *at = j;
            *plain = 0;
            return rc;
        }
        all_bytes &= keys[j].kind == BC_KEY_BYTES;
    }
    *nheld = n;
    *plain = all_bytes;
    return BC_OK;
}

/* Describe n items, each held (INCREF) into held[] so a list changed by another thread while the
 * GIL is released cannot free a key under the kernel (a bytearray or memoryview item is held through
 * a new memoryview of it instead: its buffer export keeps another thread from resizing or releasing
 * the bytes meanwhile; the key is described from that export) (held NULL: the caller keeps the GIL until
 * the keys are hashed, so nothing can change the column and nothing is held). The items are items[0..n), or
 * when items is NULL the object pointers at base + j * stride (a field of a structured array may leave them
 * unaligned). Returns BC_OK, or the bc_describe_key_as status of the item at *at (held too). *nheld
 * is the number held; *plain is whether every key is bytes (nothing to encode, no None). */
static inline int bc_describe_objects(PyObject *const *items, const char *base, Py_ssize_t stride, size_t n,
                                      bc_key *keys, void **held, size_t *nheld, size_t *at, int *plain,
                                      int may_ready)
{
    if (items && held)
        return bc_describe_held_items(items, n, keys, held, nheld, at, plain, may_ready);
    int all_bytes = 1;
    for (size_t j = 0; j < n; j++) {
        PyObject *o;
        if (items)
            o = items[j];
        else
            memcpy(&o, base + (Py_ssize_t)j * stride, sizeof o);
        int rc;
        if (held) {
            int held_it;
            rc = bc_hold_and_describe(o, &keys[j], &held[j], may_ready, &held_it);
            if (rc != BC_OK) {
                *nheld = held_it ? j + 1 : j;
                *at = j;
                *plain = 0;
                return rc;
            }
        } else {
            rc = bc_describe_key_as(o, &keys[j], may_ready);
            if (rc != BC_OK) {
                *nheld = 0;
                *at = j;
                *plain = 0;
                return rc;
            }
        }
        all_bytes &= keys[j].kind == BC_KEY_BYTES;
    }
    *nheld = held ? n : 0;
    *plain = all_bytes;
    return BC_OK;
}

/* Drop the n items bc_describe_objects held (GIL required). */
static inline void bc_release_held(void **held, size_t n)
{
    for (size_t j = 0; j < n; j++)
        Py_DECREF((PyObject *)held[j]);
}

/* Whether this is a free-threaded CPython build (no GIL to keep other threads out).
 * BC_TEST_FREE_THREADED_PATHS (a C define, for testing) takes the free-threaded paths under the GIL
 * too, so that their results can be checked on an interpreter with the GIL (docs/hardening.md). */
#ifndef BC_FREE_THREADED
#if defined(Py_GIL_DISABLED) || defined(BC_TEST_FREE_THREADED_PATHS)
#define BC_FREE_THREADED 1
#else
#define BC_FREE_THREADED 0
#endif
#endif

/* Strong references to n items (items[0..n), or the object pointers at base + j * stride) stored
 * into out[0..n): only Py_INCREF, nothing that could let a critical section go (free-threaded
 * builds take a list's items this way inside its critical section). A NULL slot of an object array
 * (numpy reads it as None) is taken as None. */
static inline void bc_take_items(PyObject *const *items, const char *base, Py_ssize_t stride, Py_ssize_t n,
                                 PyObject **out)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *o;
        if (items)
            o = items[j];
        else
            memcpy(&o, base + j * stride, sizeof o);
        if (o == NULL)
            o = Py_None;
        Py_INCREF(o);
        out[j] = o;
    }
}

/* A pinned tuple's bytearray and memoryview items replaced by memoryview exports of them (as
 * bc_hold_item holds them), so no thread can resize or release their bytes while the pinned view is
 * read; -1 with a Python error set. */
static inline int bc_export_buffer_items(PyObject *tuple)
{
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(tuple); j++) {
        PyObject *o = PyTuple_GET_ITEM(tuple, j), *held = o;
        void *slot;
        if (!PyByteArray_Check(o) && !PyMemoryView_Check(o))
            continue;
        if (bc_hold_item(&held, &slot) < 0)
            return -1;
        PyTuple_SET_ITEM(tuple, j, (PyObject *)slot);
        Py_DECREF(o);
    }
    return 0;
}

#endif
