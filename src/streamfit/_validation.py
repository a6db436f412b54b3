"""Input checks, done once in Python so that kernels can assume clean input.

The one place where arguments are checked: the estimators' data (arrays as
the kernels take them, weights, feature names), their parameters, random
states, ``n_jobs``, and the arguments of the kernel API (``streamfit.kernels``,
which imports nothing above this module). Each error names the argument and
what was expected.
"""
from __future__ import annotations

import functools
import math
import numbers
import os
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.validation import validate_data

__all__ = ["InputTypeError", "check_matrix", "check_vector", "check_n_features", "check_fitted", "check_seed",
           "check_scalar", "check_random_state", "as_matrix", "as_float64", "is_float32_matrix",
           "as_target", "as_weights", "feature_names", "check_memory", "check_integer",
           "check_real", "check_array", "check_bit_generator", "check_k", "check_nonempty_vector",
           "is_sparse", "as_csr"]


class InputTypeError(TypeError, ValueError):
    """Input of a type streamfit refuses. A TypeError, and a ValueError too,
    as scikit-learn's checks expect for complex data."""


def _object_as_real(arr, name):
    # An object array of real numbers (scikit-learn accepts those) as
    # float64; anything else in it (strings included) is refused, naming it.
    for index, value in np.ndenumerate(arr):
        if not isinstance(value, numbers.Real):
            if isinstance(value, (str, bytes)):
                why = "strings are not converted"
            else:
                try:
                    float(value)
                    why = "not a real number"
                except (TypeError, ValueError) as exc:
                    why = f"float() refuses it too: {exc}"
            raise InputTypeError(f"{name} must hold real numbers, got an object array with a "
                                 f"{type(value).__name__} at {index} ({why})")
    return arr.astype(np.float64)


def _check_real_array(a, name):
    """``a`` as an ndarray of real numbers (bool, integer or float, or an
    object array of real numbers), refusing what would otherwise convert
    silently: masked arrays (the mask would be dropped), sparse matrices,
    timedelta/datetime, complex, strings, other objects."""
    if isinstance(a, np.ma.MaskedArray):
        raise TypeError(f"{name} is a masked array; streamfit does not handle missing "
                        f"values: drop or impute the masked entries first")
    if hasattr(a, "toarray") and hasattr(a, "nnz"):
        raise TypeError(f"{name} is a sparse matrix; streamfit needs dense data "
                        f"(call .toarray() if it fits in memory)")
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError, OverflowError) as exc:
        # (only conversion errors: anything else, e.g. a timer's TimeoutError
        # raised by a signal handler meanwhile, propagates as it is)
        raise TypeError(f"{name} must be array-like, got {type(a).__name__}: {exc}") from exc
    kind = arr.dtype.kind
    if kind == "O":
        return _object_as_real(arr, name)
    if kind not in "biuf":
        what = {"m": "timedelta64", "M": "datetime64",
                "c": "complex: Complex data not supported"}.get(kind, str(arr.dtype))
        raise InputTypeError(f"{name} must hold real numbers, got dtype {arr.dtype} ({what})")
    return arr


def _as_float64(a, name):
    arr = _check_real_array(a, name)
    # One conversion: float32, integers, read-only and strided inputs all end
    # up as a C-contiguous float64 array the kernels can take.
    return np.ascontiguousarray(arr, dtype=np.float64)


def _check_finite(arr, name):
    if not np.isfinite(arr).all():
        bad = "NaN" if np.isnan(arr).any() else "inf"
        raise ValueError(f"{name} contains {bad}; every value must be finite")


def check_matrix(X, name="X", *, min_rows=0, finite=True):
    """Return X as a C-contiguous float64 array of shape (n, d), checked finite
    unless ``finite=False`` (for callers whose kernel checks as it reads)."""
    arr = _as_float64(X, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional (n_samples, n_features), "
                         f"got an array of shape {arr.shape}. Reshape your data: "
                         f"array.reshape(-1, 1) for a single feature, array.reshape(1, -1) "
                         f"for a single sample")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} must have at least one feature, got shape {arr.shape}: "
                         f"0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if arr.shape[0] < min_rows:
        raise ValueError(f"{name} must have at least {min_rows} rows, got {arr.shape[0]}")
    if finite:
        _check_finite(arr, name)
    return arr


def check_vector(y, n, name="y", *, finite=True):
    """Return y as a float64 vector of length n (with n None: of any length
    but 0), checked finite unless ``finite=False``."""
    arr = _as_float64(y, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = np.ascontiguousarray(arr[:, 0])
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {arr.shape}")
    if n is None and arr.shape[0] == 0:
        raise ValueError(f"{name} must not be empty")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} values but X has {n} rows")
    if finite:
        _check_finite(arr, name)
    return arr


def check_n_features(est, n, name="X"):
    """n (the features of the data called with) must match a fitted estimator's."""
    expected = getattr(est, "n_features_in_", None)
    if expected is not None and n != expected:
        raise ValueError(f"{name} has {n} features, but {type(est).__name__} "
                         f"was fitted with {expected} features")


def check_fitted(est, attr):
    if not hasattr(est, attr):
        raise AttributeError(f"This {type(est).__name__} instance is not fitted yet: "
                             f"call partial_fit or fit before using it")


def check_scalar(value, name, *, kind=numbers.Real, low=None, high=None,
                 low_open=False, high_open=False, allow_none=False):
    """Check a parameter; the error names it and the range it must be in."""
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} must be a {'integer' if kind is numbers.Integral else 'real number'}"
                        f", got {value!r}")
    try:
        finite = math.isfinite(value)
    except OverflowError:       # an int beyond float64's range (np.isfinite: a TypeError)
        finite = False
    if not finite:
        raise ValueError(f"{name} must be finite (within float64's range), got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value!r}")
    return value


def check_seed(random_state):
    """random_state must be None, a non-negative int seed, a SeedSequence or a
    Generator (checked without building a generator); the error names it."""
    if (isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool)
            and random_state < 0):
        raise ValueError(f"random_state must be None, a non-negative int or a numpy "
                         f"Generator, got {random_state!r}")
    if not (random_state is None
            or isinstance(random_state, (np.random.Generator, np.random.SeedSequence))
            or (isinstance(random_state, numbers.Integral)
                and not isinstance(random_state, bool))):
        raise TypeError(f"random_state must be None, an int or a numpy Generator, "
                        f"got {random_state!r}")
    return random_state


def check_random_state(random_state):
    """A numpy Generator from None, an int seed, a SeedSequence or a Generator."""
    if isinstance(check_seed(random_state), np.random.Generator):
        return random_state
    return np.random.default_rng(random_state)


def check_n_jobs(n_jobs):
    """n_jobs must be None or a non-zero int (joblib's convention: -1 all
    cores, -k all but k - 1); the error names it."""
    if n_jobs is None:
        return n_jobs
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be None or an int, got {n_jobs!r}")
    if n_jobs == 0:
        raise ValueError("n_jobs must be None or a non-zero int, got 0")
    return n_jobs


@functools.lru_cache(maxsize=1)
def _cores():
    # joblib's count of the cores this process may use (affinity, cgroups;
    # no warning in a daemon process, unlike effective_n_jobs): ~50 us a
    # call, so once per process rather than once per partial_fit
    import joblib

    return max(1, joblib.cpu_count())


# a positive n_jobs is taken as given (oversubscribing the cores if asked),
# up to this many threads
_MAX_THREADS = 256


def effective_n_threads(n_jobs):
    """The OpenMP threads a kernel asked for ``n_jobs`` (checked) runs on,
    as scikit-learn counts them (``sklearn.utils._openmp_helpers.
    _openmp_effective_n_threads``): None the OpenMP runtime's count for this
    thread (``OMP_NUM_THREADS``, ``threadpoolctl.threadpool_limits``), capped
    at the cores this process may use unless OMP_NUM_THREADS asks for more;
    -1 the same; -k all but k - 1 of them; k > 0 that many (at most 256).
    In a process forked after this one's OpenMP threads started, 1: the
    OpenMP runtime's threads do not survive fork (libgomp would wait for
    them forever).

    Examples
    --------
    >>> from streamfit._validation import effective_n_threads
    >>> effective_n_threads(1), effective_n_threads(3)
    (1, 3)
    >>> from threadpoolctl import threadpool_limits
    >>> with threadpool_limits(1, user_api="openmp"):
    ...     effective_n_threads(None)
    1
    """
    from ._kernels._threads import openmp_forked, openmp_max_threads, openmp_started

    n_jobs = check_n_jobs(n_jobs)
    if openmp_forked():
        return 1
    if n_jobs is not None and n_jobs > 0:
        threads = min(n_jobs, _MAX_THREADS)
    else:
        most = openmp_max_threads()
        if os.environ.get("OMP_NUM_THREADS") is None:
            most = min(most, _cores())
        threads = most if n_jobs is None else max(1, most + n_jobs + 1)
    openmp_started(threads)
    return threads


# --- estimator input: arrays as the kernels take them ---------------------------
# (C-contiguous float64 passes through untouched: one-row calls are how many
# users feed a stream), weights, feature names, and buffers that could never
# exist refused up front.

def physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):     # pragma: no cover - not POSIX
        return None


def check_memory(nbytes, name, value, what):
    # refuse up front what could never be allocated, naming the parameter
    total = physical_memory()
    if total is not None and nbytes > total:
        raise ValueError(f"{name}={value!r} needs {what} of {nbytes / 2**30:.3g} GiB, more "
                         f"than this machine's memory ({total / 2**30:.3g} GiB)")


class _NameProbe(BaseEstimator):
    """Receives feature_names_in_ from scikit-learn's own check, so that a
    call that fails later leaves the estimator untouched."""


def feature_names(X):
    if type(X) is np.ndarray or isinstance(X, (list, tuple)):
        return None
    probe = _NameProbe()
    validate_data(probe, X, skip_check_array=True, ensure_2d=False)
    return getattr(probe, "feature_names_in_", None)


def fitted_feature_names(est, names):
    """``feature_names_in_`` of a fitted estimator whose state holds
    ``names`` (None: it learnt from data without feature names, and, as in
    scikit-learn, it then has no such attribute)."""
    if names is None:
        raise AttributeError(f"{type(est).__name__} was not fitted on data with feature "
                             f"names (a DataFrame with string column names)")
    return np.asarray(names, dtype=object)


def as_matrix(X, float32=False):
    # C-contiguous float64 (n, d) arrays pass as they are: single-row calls
    # are how many users feed a stream, and they should cost little
    if type(X) is np.ndarray and X.dtype == np.float64 and X.ndim == 2 and \
            X.flags.c_contiguous and X.shape[1] > 0:
        return X
    if float32 and is_float32_matrix(X):
        # (for a kernel that reads float32 rows as they are: a float64 copy
        # would double a long stream's memory traffic; a strided or Fortran-
        # ordered one is copied to C order, still float32)
        return np.ascontiguousarray(X)
    return check_matrix(X, "X", finite=False)


def is_float32_matrix(X):
    """A float32 (n, d >= 1) ndarray (a subclass too, e.g. np.memmap; not a
    masked array, whose mask would be lost)."""
    return isinstance(X, np.ndarray) and not isinstance(X, np.ma.MaskedArray) and \
        X.dtype == np.float32 and X.ndim == 2 and X.shape[1] > 0


def as_float64(X):
    """X (from as_matrix) as C-contiguous float64: the kernels that read
    float64 rows only (one conversion, as check_matrix makes)."""
    return X if X.dtype == np.float64 else np.ascontiguousarray(X, dtype=np.float64)


def is_sparse(X):
    """A scipy.sparse matrix or array."""
    if type(X) is np.ndarray or isinstance(X, (list, tuple, dict)):
        return False
    from scipy.sparse import issparse

    return issparse(X)


def as_csr(X, name="X"):
    """A scipy.sparse matrix or array as the CSR rows the state objects read:
    float64 values, 32-bit column indices (the caller's matrix is never
    changed: converted ones are copies).

    Any format converts (``.tocsr()``: COO's repeated entries add up);
    integer, boolean and float32 values become float64; complex values are
    refused. 64-bit indices (which scipy makes for large matrices, and for
    ones built from int64 coordinates) become 32-bit when every column and
    the number of non-zeros fit, else are refused naming ``name``. A row's
    columns out of order (what scipy's products and sums often leave) are
    sorted, in a copy. Repeated columns, negative ones, NaN and inf are left
    to the state object, which refuses them naming ``name``.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from streamfit._validation import as_csr
    >>> rows, cols = np.array([0, 1]), np.array([2, 0])
    >>> X = sp.coo_array((np.ones(2, np.float32), (rows, cols)), shape=(2, 3))
    >>> C = as_csr(X)
    >>> C.format, C.dtype, C.indices.dtype
    ('csr', dtype('float64'), dtype('int32'))
    """
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional (n_samples, n_features), got a sparse "
                         f"array of shape {X.shape}")
    if X.format != "csr":
        X = X.tocsr()
    kind = X.dtype.kind
    if kind not in "biuf":
        raise InputTypeError(f"{name} must hold real numbers, got a sparse matrix of dtype "
                             f"{X.dtype}" + (" (Complex data not supported)" if kind == "c"
                                             else ""))
    if X.dtype != np.float64:
        X = X.astype(np.float64)
    if X.indices.dtype != np.int32 or X.indptr.dtype != np.int32:
        limit = np.iinfo(np.int32).max
        if X.shape[1] > limit or X.indices.shape[0] > limit:
            raise ValueError(f"{name} has 64-bit indices that do not fit in 32 bits "
                             f"({X.shape[1]} columns, {X.indices.shape[0]} stored values): "
                             "the sparse kernels read 32-bit columns; pass smaller blocks "
                             "of rows (at most 2^31 - 1 values each)")
        X = X.copy()
        X.indices = X.indices.astype(np.int32)
        X.indptr = X.indptr.astype(np.int32)
    if not X.has_sorted_indices:
        X = X.sorted_indices()
    return X


def as_target(y, n, name):
    if y is None:
        raise ValueError(f"{name} requires y to be passed, but the target y is None")
    if type(y) is np.ndarray and y.dtype == np.float64 and y.ndim == 1 and \
            y.flags.c_contiguous and y.shape[0] == n:
        return y
    if getattr(y, "ndim", 1) == 2 and getattr(y, "shape", (0, 0))[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected. Please "
                      "change the shape of y to (n_samples,), for example using ravel().",
                      DataConversionWarning, stacklevel=4)
    return check_vector(y, n, "y", finite=False)


def as_weights(sample_weight, n):
    if sample_weight is None:
        return None
    if isinstance(sample_weight, numbers.Real) and not isinstance(sample_weight, bool):
        check_scalar(sample_weight, "sample_weight", low=0)
        return None if sample_weight == 1 else np.full(n, float(sample_weight))
    sw = check_vector(sample_weight, n, "sample_weight")
    if (sw < 0).any():
        raise ValueError(f"sample_weight must be non-negative, got {sw[sw < 0][0]!r} at row "
                         f"{int(np.argmax(sw < 0))}")
    return sw


# --- the kernel API's arguments (streamfit.kernels) --------------------------------

def check_integer(value, name, low, high=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        where = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {'in ' if high is not None else ''}{where}, "
                         f"got {value}")
    return int(value)


def check_real(value, name, low=None, low_open=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    return value


def check_array(a, name, shape, *, symmetric=False):
    """a as a C-contiguous float64 array of the given shape (None: any
    length), finite (and symmetric); the error names the argument."""
    if isinstance(a, np.ma.MaskedArray) or (hasattr(a, "toarray") and hasattr(a, "nnz")):
        raise TypeError(f"{name} must be a dense array, got {type(a).__name__}")
    arr = np.asarray(a)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if arr.ndim != len(shape) or any(s is not None and d != s for d, s in zip(arr.shape, shape)):
        want = "(" + ", ".join("m" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf; every value must be finite")
    if symmetric and not np.array_equal(arr, arr.T):
        gap = float(np.abs(arr - arr.T).max())
        if gap > 1e-12 * float(np.abs(arr).max()):
            raise ValueError(f"{name} must be symmetric (max |A - A^T| = {gap:.3g})")
    return arr


def check_bit_generator(random_state, name="random_state"):
    """The numpy BitGenerator behind None, an int seed, a SeedSequence, a
    Generator or a BitGenerator (drawn from directly: its stream moves on)."""
    if isinstance(random_state, np.random.BitGenerator):
        return random_state
    if isinstance(random_state, np.random.Generator):
        return random_state.bit_generator
    if random_state is None or isinstance(random_state, np.random.SeedSequence) or (
            isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool)
            and random_state >= 0):
        return np.random.default_rng(random_state).bit_generator
    raise TypeError(f"{name} must be None, a non-negative int, a SeedSequence, a numpy "
                    f"Generator or BitGenerator, got {random_state!r}")


def check_k(k, n, name="k"):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {k!r}")
    if not 1 <= k <= n:
        raise ValueError(f"{name} must be in [1, {n}] (the length of the vector), got {k}")
    return int(k)


def check_nonempty_vector(v, name):
    v = check_array(v, name, (None,))
    if v.shape[0] == 0:
        raise ValueError(f"{name} must not be empty")
    return v
