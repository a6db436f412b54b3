"""Warnings streamfit's estimators emit (its errors are Python's own:
``ValueError``, ``TypeError``, ``MemoryError``, ...)."""
from __future__ import annotations

import os
import sys
import warnings

__all__ = ["WarmupWarning"]


class WarmupWarning(UserWarning):
    """A ``fit`` too short to leave the statistical schedule's warm-up.

    :class:`~streamfit.schedules.StatisticalSchedule` estimates the data's
    scale (and the first stepsize) from the first ``n_warmup`` rows (default
    50) before it takes its first step. A ``fit`` on fewer rows therefore
    learns nothing: ``coef_`` and ``intercept_`` stay at their start (zero,
    or ``coef_init``). The message names the rows seen and the rows needed;
    fit more rows, or pass ``StatisticalSchedule(n_warmup=...)`` (at least 5)
    for a shorter warm-up. ``partial_fit`` does not warn: a stream's first
    blocks are expected to fill the warm-up (``n_updates_`` counts the steps
    taken).

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.exceptions import WarmupWarning
    >>> X = np.random.default_rng(0).standard_normal((20, 3))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     est = OnlineQuantileRegressor().fit(X, X[:, 0])
    >>> [w.category.__name__ for w in caught], est.coef_.any()
    (['WarmupWarning'], np.False_)
    """


def _warn_if_warming_up(est, warm_up, n_updates, n_seen, after):
    """Warn (WarmupWarning) when a fit of n_seen rows under a statistical
    schedule took no step; its first step takes ``warm_up`` (n_warmup) +
    ``after`` rows. ``warm_up`` is 0 for other schedules (or a parameter
    record, read the same way: the low-rank learner's)."""
    if not isinstance(warm_up, int):
        # (imported here: this module loads without the compiled kernels)
        from .schedules import StatisticalSchedule
        warm_up = int(warm_up[0]["n_warmup"]) \
            if int(warm_up[0]["kind"]) == StatisticalSchedule._kind else 0
    if n_updates != 0 or n_seen == 0 or warm_up == 0:
        return
    need = warm_up + after
    name = type(est).__name__
    warnings.warn(WarmupWarning(
        f"{name}.fit saw {n_seen} rows, but the statistical schedule takes its first step "
        f"only after its warm-up of n_warmup={warm_up} rows (it estimates "
        f"the data's scale from them), at {need} rows here: nothing was learnt, the "
        f"coefficients are still their start. Fit at least {need} rows, or pass "
        f"schedule=StatisticalSchedule(n_warmup=m) (streamfit.schedules, m >= 5) for a "
        f"shorter warm-up"), stacklevel=_caller_level())


def _caller_level():
    """warnings.warn's stacklevel of the first frame outside streamfit."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level
