"""Build the compiled kernels of bucketcore: one extension per ``src/_bucketcore/*.pyx``."""

import os
import sys
from glob import glob

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

if sys.platform == "win32":
    compile_args = ["/O2"]
else:
    compile_args = ["-O3", "-fno-strict-aliasing", "-Wno-unused-function"]

# Development aid: BUCKETCORE_EXTENSIONS=_hashing,_layout builds only those kernels in place.
only = {name for name in os.environ.get("BUCKETCORE_EXTENSIONS", "").split(",") if name}

extensions = [
    Extension(
        "_bucketcore." + os.path.splitext(os.path.basename(path))[0],
        [path],
        include_dirs=["src/_bucketcore", np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=compile_args,
    )
    for path in sorted(glob(os.path.join("src", "_bucketcore", "*.pyx")))
    if not only or os.path.splitext(os.path.basename(path))[0] in only
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
        },
    )
)
