/* The string options of the public calls, declared once: each one's values, in the order of the
 * kernels' codes (errors=: the replace flag; policy=: the grouping policy, POLICY_SHARED 0 and
 * POLICY_PER_BUCKET 1 of _grouping.pxd). bucketcore.validation reads the same tables (through
 * _status.OPTIONS) for its checks and messages, so a fast path that matches a value here and the
 * general path that checks it there accept the same values. */
#ifndef BUCKETCORE_OPTIONS_H
#define BUCKETCORE_OPTIONS_H

#include <Python.h>
#include <string.h>

static const char *const bc_errors_values[] = {"strict", "replace", NULL};
static const char *const bc_policy_values[] = {"shared", "per_bucket", NULL};

/* The index of value among values (a NULL-terminated table), or -1 when it is not a str equal to
 * one of them (the general path then raises the error). Every value is ASCII, so a str that is not
 * compact ASCII matches none; the characters are compared in place. Never sets a Python error. */
static inline int bc_option_code(PyObject *value, const char *const *values)
{
    if (value == NULL || !PyUnicode_CheckExact(value) || !PyUnicode_IS_COMPACT_ASCII(value))
        return -1;
    const char *text = (const char *)PyUnicode_DATA(value);
    size_t n = (size_t)PyUnicode_GET_LENGTH(value);
    for (int i = 0; values[i] != NULL; i++)
        if (strlen(values[i]) == n && memcmp(text, values[i], n) == 0)
            return i;
    return -1;
}

#endif
