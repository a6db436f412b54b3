"""streamfit.kernels: the low-level API for other libraries.

Functions here take and return NumPy arrays and explicit state objects, with no
estimator around them: check the arguments once (shapes, dtypes, contiguity,
state layout), then run the compiled kernel. An out-of-memory or LAPACK
failure is an exception, never a silent wrong answer.

The API is versioned: ``API_VERSION`` changes when a signature or a state
layout changes incompatibly (a pickled state object records the version it was
made with).
"""
from . import pca, quantile
from .pca import *  # noqa: F401,F403
from .quantile import *  # noqa: F401,F403

# 2: the quantile state record gained inference's plug-in intercepts (and the
# schedule record its warm-start clock t0 the stop before): states pickled
# under 1 are refused with a layout error
# 3: the quantile state record gained x_wsum (the plug-in intercept, now the
# averaged fit's default, weights its mean row): states of 2 are refused
API_VERSION = 3

__all__ = ["API_VERSION", *pca.__all__, *quantile.__all__]
