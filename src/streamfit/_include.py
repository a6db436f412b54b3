"""Where the Cython declarations of streamfit's nogil primitives live."""
import pathlib

__all__ = ["get_include"]


def get_include() -> str:
    """The directory to put on Cython's include path for ``cimport streamfit.cython``.

    streamfit's Cython API is the package :mod:`streamfit.cython`:
    ``from streamfit.cython.eigen cimport eig_top`` and its siblings
    ``common``, ``goe``, ``linear``, ``rank1``, ``simplex`` and ``topk``, whose ``.pxd``
    files ship inside the package. The directory returned holds the
    ``streamfit`` package (the ``site-packages`` directory of an installed
    wheel, ``src`` of a source checkout); Cython also finds the declarations
    on ``sys.path`` without it, except in an editable install. Nothing of it
    goes on the C compiler's include path: the functions are reached through
    function pointers fetched when the using module is imported, so a module
    needs only numpy's headers (``numpy.get_include()``, for ``bitgen_t``),
    and links against nothing of streamfit's.

    Examples
    --------
    >>> import pathlib, streamfit
    >>> api = pathlib.Path(streamfit.get_include()) / "streamfit" / "cython"
    >>> sorted(p.name for p in api.glob("*.pxd"))
    ['common.pxd', 'eigen.pxd', 'goe.pxd', 'linear.pxd', 'rank1.pxd', 'simplex.pxd', 'topk.pxd']

    A complete Cython module using the eigen-solver chain without the GIL
    (the Cython API page of the documentation has it with the GOE draw and
    the build flags; ``tests/kernels/test_cimport.py`` builds it)::

        import numpy as np
        from streamfit.cython.common cimport OK
        from streamfit.cython.eigen cimport (EIG_EVR, EigWork, eig_top, eig_work_free,
                                             eig_work_init)

        def top(double[:, ::1] A, int m):
            cdef int n = A.shape[0], code
            cdef EigWork ws
            w = np.empty(n); Z = np.empty((m, n)); B = np.empty((n, n))
            cdef double[::1] wv = w
            cdef double[:, ::1] zv = Z
            cdef double[:, ::1] bv = B
            with nogil:
                code = eig_work_init(&ws, n, m, False)
                if code == OK:
                    code = eig_top(&ws, EIG_EVR, n, &A[0, 0], n, 1.0, m, &wv[0],
                                   &zv[0, 0], n, &bv[0, 0], True)
                eig_work_free(&ws)
            return code, w[:m], Z
    """
    root = pathlib.Path(__file__).resolve().parents[1]
    if not (root / "streamfit" / "cython" / "common.pxd").is_file():
        raise FileNotFoundError("streamfit's .pxd files are not installed beside it")
    return str(root)
