"""streamfit.kernels: the low-level API for other libraries.

The learners' compiled state objects themselves -- the objects the
estimators drive -- so that a library's own loop costs what the estimator's
does: :class:`LinearSGD` and :class:`IntervalState` (online quantile and
least-squares regression, prediction intervals), and the online PCA
kernels. Functions here take and return NumPy arrays.

The API is versioned: ``API_VERSION`` changes when a signature or a state
layout changes incompatibly (a saved state records the format it was made
with, and a state of another format is refused with a clear error).

Everything that enters a state object is checked where it enters: rows
(shapes, dtypes, finiteness: NaN or inf refused naming the argument, the
state unchanged), settings (naming the setting), and a loaded state (every
field of ``from_state``'s dict and of an unpickled object, against the ranges
the compiled loops rely on: ValueError naming the field, nothing of it used).

Threads. A state object takes one call at a time: a second thread waits for
the first (its lock is taken and given back in compiled code, so Ctrl-C
cannot leave it held; a process forked while another thread held it makes it
afresh). The functions on plain arrays keep no state: they may run in several
threads at once on arrays that no other thread writes meanwhile; a numpy
Generator or BitGenerator they draw from is held under its own lock while
they draw.
"""
from . import pca, quantile
from .pca import *  # noqa: F401,F403
from .quantile import *  # noqa: F401,F403

# (Versions: 2 added inference's plug-in intercepts and the warm-start clock t0
# to the quantile records, 3 the plug-in intercept's x_wsum, 4 the drift
# test's fields, 5 the state objects themselves (LinearSGD, IntervalState)
# in place of LinearState, StatisticalScheduleState and sgd; a state saved
# under an older version is refused with a clear error.)
API_VERSION = 5

__all__ = ["API_VERSION", *pca.__all__, *quantile.__all__]
