# cython: language_level=3
"""The kernels' status codes (status.h) as Python values: ``bc_status`` and its members."""
