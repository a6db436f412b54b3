"""Input handling of the online linear estimators: arrays as the kernels take
them (C-contiguous float64 pass through untouched: one-row calls are how
many users feed a stream), weights, feature names, and buffers that could
never exist refused up front."""
from __future__ import annotations

import numbers
import os
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.validation import validate_data

from .._validation import check_matrix, check_scalar, check_vector

__all__ = ["as_matrix", "as_float64", "is_float32_matrix", "as_target", "as_weights",
           "feature_names", "check_memory"]


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
