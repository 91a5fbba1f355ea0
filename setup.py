"""Builds the Cython hot path ``ge_plugin._fastpath``.

Compiler directives are set once here, the way scikit-learn does it: bounds, wraparound, initialized and
none checks off, C division on. ``GE_PLUGIN_CYTHON_DEBUG=1`` turns the checks back on for debugging, and
``GE_PLUGIN_CYTHON_ANNOTATE=1`` writes the HTML annotation next to the .pyx. If the extension cannot be
built (no compiler), ``GE_PLUGIN_NO_EXTENSIONS=1`` installs the pure-Python twin only; the build says which
one it produced so CI logs show it.
"""

import os
import sys

from setuptools import Extension, setup

NO_EXTENSIONS = os.environ.get("GE_PLUGIN_NO_EXTENSIONS", "") not in ("", "0")
DEBUG = os.environ.get("GE_PLUGIN_CYTHON_DEBUG", "") not in ("", "0")
ANNOTATE = os.environ.get("GE_PLUGIN_CYTHON_ANNOTATE", "") not in ("", "0")

MIN_CYTHON = (3, 0)


def _extensions():
    if NO_EXTENSIONS:
        print("*** ge-plugin: GE_PLUGIN_NO_EXTENSIONS set: pure-Python fast path only ***", file=sys.stderr)
        return []
    import Cython
    from Cython.Build import cythonize

    version = tuple(int(part) for part in Cython.__version__.split(".")[:2])
    if version < MIN_CYTHON:
        raise RuntimeError(
            f"ge-plugin needs Cython >= {MIN_CYTHON[0]}.{MIN_CYTHON[1]}, found {Cython.__version__}"
        )
    import numpy

    directives = {
        "language_level": 3,
        "embedsignature": True,
        "boundscheck": DEBUG,
        "wraparound": DEBUG,
        "initializedcheck": DEBUG,
        "nonecheck": DEBUG,
        "cdivision": not DEBUG,
    }
    extension = Extension(
        "ge_plugin._fastpath",
        ["ge_plugin/_fastpath.pyx"],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"] if not DEBUG else ["-O0", "-g"],
    )
    mode = "debug (bounds checks on)" if DEBUG else "optimised"
    print(f"*** ge-plugin: building the compiled fast path, {mode} ***", file=sys.stderr)
    return cythonize([extension], compiler_directives=directives, annotate=ANNOTATE)


setup(ext_modules=_extensions())
