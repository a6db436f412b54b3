"""Where the Cython declarations of streamfit's nogil primitives live."""
import pathlib

__all__ = ["get_include"]


def get_include():
    """The directory holding streamfit's ``.pxd`` declarations (and the C
    headers they need), for Cython extensions that ``cimport`` its nogil
    primitives: the LAPACK eigen-solver chain that cannot fail on a finite
    symmetric matrix (``_eigen``), GOE rows from a numpy bit generator
    (``_goe``), the warm-started top-k block solver (``_topk``), the rank-one
    eigendecomposition update (``_rank1``), capped-simplex projections
    (``_simplex``), signal polling (``_work_poll``) and the BLAS/LAPACK wrappers
    (``_blas``). Put it on Cython's include path and on the C compiler's,
    with ``numpy.get_include()`` beside it; the declarations cimport scipy's
    ``cython_blas``/``cython_lapack``, so BLAS comes from scipy at import
    time. An extension that draws GOE noise also links numpy's static
    ``npyrandom`` library (``numpy/random/lib``).

    Examples
    --------
    >>> import pathlib, streamfit
    >>> sorted(p.name for p in pathlib.Path(streamfit.get_include()).glob("_eigen.pxd"))
    ['_eigen.pxd']

    A Cython module using the eigen-solver chain without the GIL::

        from _eigen cimport EigWork, eig_work_init, eig_work_free, eig_top, EIG_EVR

        def top(double[:, ::1] A, int m):
            cdef int n = A.shape[0]
            cdef EigWork ws
            w = np.empty(n); Z = np.empty((m, n)); B = np.empty((n, n))
            cdef double[::1] wv = w
            cdef double[:, ::1] zv = Z, bv = B
            with nogil:
                eig_work_init(&ws, n, m, False)
                code = eig_top(&ws, EIG_EVR, n, &A[0, 0], n, 1.0, m, &wv[0],
                               &zv[0, 0], n, &bv[0, 0], True)
                eig_work_free(&ws)
            return w[:m], Z
    """
    here = pathlib.Path(__file__).resolve().parent
    installed = here / "include"
    if installed.is_dir():
        return str(installed)
    # an editable install or a source checkout: the declarations' source
    source = here.parents[1] / "csrc"
    if source.is_dir():
        return str(source)
    raise FileNotFoundError("streamfit's .pxd files are not installed beside it")
