# New numpy columns for the kernels' results, made by numpy's C API (no Python-level np.empty per
# column). Inline only: cimporting it imports no module.
cimport numpy as cnp


cdef inline cnp.ndarray empty_column(Py_ssize_t n, int typenum):
    """A new 1-D array of n items of the given numpy type number."""
    cdef cnp.npy_intp dim = n
    return cnp.PyArray_EMPTY(1, &dim, typenum, 0)
