"""streamfit.kernels: the low-level API for other libraries.

Functions here take and return NumPy arrays and explicit state objects, with no
estimator around them: check the arguments once (shapes, dtypes, contiguity,
state layout), then run the compiled kernel. An out-of-memory or LAPACK
failure is an exception, never a silent wrong answer.

The API is versioned: ``API_VERSION`` changes when a signature or a state
layout changes incompatibly (a pickled state object records the version it was
made with).

Records a caller hands in are checked where they enter: every field of a state
or parameter record (a hand-edited one, or one from an edited pickle) against
the range the compiled kernels rely on -- counts and window fills as integers
in range, codes among their values, finite values where the arithmetic needs
them, consistent with the arrays beside it -- and refused with a ValueError
naming the field, before any of it is used (about 0.1 us a record). The
arrays beside the records are checked at each call too: the residual
window's filled values finite (one pass over at most ``window`` values),
a state's coefficient vectors float64 and finite, TopK's matrices of its
size (a few us a call) and, before a warm-started solve, its block's rows
orthonormal (O(b^2 n), below one Krylov iteration's O(n^2 b)).

Threads. The state objects (:class:`LinearState`,
:class:`StatisticalScheduleState`, :class:`TopK`, and the PCA families'
:class:`LeaderState`, :class:`CappedState`, :class:`DropoutState`) take one
call at a time:
calls from several threads on one object wait for each other (a lock per
object, taken and given back in compiled code, so that Ctrl-C cannot leave it
held), and none is lost or mixed with another; :func:`sgd` holds its
LinearState's lock, then its schedule's (always in that order). Pickling an
object takes its lock too, so a copy is made between two calls. The functions
on plain arrays (:func:`goe`, :func:`project_capped_simplex`,
:func:`mixture_decomposition`, :func:`systematic_sample`) keep no state: they
may run in several threads at once on arrays that no other thread writes
meanwhile; a numpy Generator or BitGenerator they draw from is held under its
own lock while they draw. A process forked while another thread held a lock
makes that lock afresh.
"""
from . import pca, quantile
from .pca import *  # noqa: F401,F403
from .quantile import *  # noqa: F401,F403

# (Versions: 2 added inference's plug-in intercepts and the warm-start clock t0
# to the quantile records, 3 the plug-in intercept's x_wsum, 4 the drift
# test's fields, 5 the state objects (the PCA families' LeaderState,
# CappedState, DropoutState); a state pickled under an older version is
# refused with a layout error.)
API_VERSION = 5

__all__ = ["API_VERSION", *pca.__all__, *quantile.__all__]
