"""streamfit's Cython API: nogil primitives for other compiled libraries.

Each module here is a compiled extension whose ``.pxd`` declares the public
functions and types; a Cython module uses them with, for example,
``from streamfit.cython.eigen cimport EigWork, eig_work_init, eig_top``, as it
would ``scipy.linalg.cython_blas``. The calls go through function pointers
that Cython fetches when the using module is imported, so nothing is linked
against streamfit and no streamfit header is needed to compile (numpy's
headers are, for ``bitgen_t``).

``API_VERSION`` changes when a declaration's signature, a struct's layout or
a function's contract changes incompatibly. ``streamfit.cython.common``
declares the same number as a compile-time constant, so a module can check at
import that it runs against the API it was built for.

Examples
--------
>>> import streamfit.cython
>>> streamfit.cython.API_VERSION
2
"""
#: The version of the declarations (an int; ``common.pxd``'s ``API_VERSION`` is the
#: one a module was compiled against). 2 added ``streamfit.cython.linear`` (the
#: linear learner's state object driven from a compiled loop) and
#: ``common.raise_pending``.
API_VERSION = 2

__all__ = ["API_VERSION"]
