# The string options' tables (options.h), for the kernels' fast paths: bc_option_code is the one
# check of an errors= or policy= value in C, against the values bucketcore.validation checks too.
cdef extern from "options.h":
    const char *const *bc_errors_values
    const char *const *bc_policy_values
    int bc_option_code(object value, const char *const *values)
