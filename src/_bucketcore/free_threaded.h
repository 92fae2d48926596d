/* Whether this build of CPython runs without the GIL (free-threaded): a kernel then takes the
 * locks, exports and copies that the GIL makes unneeded otherwise. */
#ifndef BUCKETCORE_FREE_THREADED_H
#define BUCKETCORE_FREE_THREADED_H

#include <Python.h>

#ifdef Py_GIL_DISABLED
#define BC_FREE_THREADED 1
#else
#define BC_FREE_THREADED 0
#endif

#endif
