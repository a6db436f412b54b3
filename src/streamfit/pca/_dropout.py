"""Online PCA by Follow the Leader with dropout perturbations (van Erven,
Kotlowski & Warmuth, "Follow the Leader with Dropout Perturbations", COLT
2014), the open question of Kotlowski & Warmuth's "PCA with Gaussian
perturbations": does binomial (dropout) noise, which vanishes where the data
agree, reach the minimax regret O(sqrt(kT)) and adapt to easy streams?

Python validates and owns the state; ``streamfit._kernels._dropout`` runs the
lazy trial loop (play, gain, Bernoulli draw, update, top-k) without the GIL.
The exact fresh-dropout reference runs in Python (it is O(t n^2) a trial).
"""
from __future__ import annotations


from typing import TYPE_CHECKING, Literal

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._kernels._dropout import DropoutState
from .._validation import check_scalar, check_seed
from ._common import _OnlinePCA, check_n_components, refuse_change

if TYPE_CHECKING:
    from .._typing import Float64Array, RandomStateLike

__all__ = ["DropoutPCA"]


class DropoutPCA(_OnlinePCA):
    """Online PCA by Follow the Leader with dropout perturbations (van Erven,
    Kotlowski & Warmuth, COLT 2014).

    Each past instance is kept with probability p or dropped, independently;
    trial t plays the projection P_t onto the top-k eigenvectors of the kept
    sum S_t = sum_{s<t} b_s X_s, b_s ~ Bernoulli(p), then sees X_t (x_t x_t^T
    for rows of ``partial_fit``, a PSD matrix for ``partial_fit_dense``) and
    gains tr(P_t X_t). The perturbation is binomial: it has no scale to tune
    and vanishes where the data agree (the question Kotlowski & Warmuth leave
    open is whether it reaches the minimax O(sqrt(kT)) regret without FPL's
    n^{1/4}; ``streamfit.experiments`` experiment ``pca-dropout`` measures it).

    Parameters
    ----------
    n_components : int, default 1
        k, the rank of the projections played (the default, 1, is online
        rank-one PCA: the top direction; any k <= n_features may be given).
    p : float in (0, 1], default 0.5
        The probability of keeping an instance (p = 1 is Follow the Leader).
    resample : {"lazy", "fresh"}, default "lazy"
        "lazy": b_t is drawn once, when instance t arrives, and S_drop +=
        b_t X_t -- a rank-one (or dense) update and, when b_t = 1, a
        warm-started top-k solve: O(k n^2) a trial (a dropped instance costs
        only the gain and the comparator's O(n^2) update). "fresh": every
        trial redraws all of b_1..b_{t-1} and solves S from scratch, as the
        paper states the algorithm: O(t n^2) for the sum plus an O(n^3)
        LAPACK solve a trial, and a history of all rows (vector instances
        only; a reference for tests and small runs).
    solver : {"auto", "krylov", "exact"}, default "auto"
        The lazy top-k solver, as for :class:`PerturbedLeaderPCA`: "krylov"
        warm-starts block Krylov from the last leader (LAPACK fallback),
        "exact" calls LAPACK every solve, "auto" is Krylov when n >= 4 b
        (b = k + max(5, k // 2)). "fresh" always solves exactly.
    tol : float, default 0.01
        A Krylov solve stops when its estimate of the objective gap is below
        tol sqrt(k) L / (2 sqrt(t)) (dense: tol k L / (2 sqrt(t))), L the
        largest ||x||^2 (bound on ||X||_2) so far: the gaps add at most tol
        times sqrt(kT) L over the run.
    random_state : None, int or numpy Generator
        Seeds the dropout draws; the same seed gives the same decisions.

    Attributes
    ----------
    components_ : (k, n) array, the subspace the next trial plays
    cumulative_gain_, best_gain_, regret_ : float
        best_gain_ and regret_ compare with lambda_{1:k} of the sum of *all*
        instances (dropped ones included): one O(n^3) LAPACK call on first
        access after a call (then cached).
    n_trials_ : int
    kept_fraction_ : float, the fraction of instances in the lazy kept sum
        (fresh: in the last redraw)
    solver_stats_ : dict, the lazy top-k solver's counters (as FPL's)
    n_features_in_, feature_names_in_ : as scikit-learn's
    The state itself (the kept sum S (lazy), the sum C of all instances, the
    block of b >= k leader estimates, the rows seen so far ("fresh"), the
    counters and bit generator) is one compiled object,
    :class:`streamfit.kernels.DropoutState`, pickled with the estimator.

    Notes
    -----
    **Why lazy dropout is the algorithm, in expectation.** Against an
    oblivious adversary (X_1..X_T fixed in advance) the expected gain at trial
    t is E[tr(P(S_t) X_t)] with S_t = sum_{s<t} b_s X_s, and depends only on
    the joint law of (b_1, ..., b_{t-1}) at that trial: i.i.d. Bernoulli(p)
    both when they are redrawn every trial (fresh) and when each is drawn once
    and kept (lazy). The expected regret -- a sum over trials of these
    expectations minus a constant -- is therefore the same; only the
    correlation between trials differs (which matters against an adaptive
    adversary, who sees the lazy b's through past decisions). The same holds
    with any deterministic tie-breaking of the leader; the lazy Krylov solver
    breaks ties by its warm start and solves to ``tol``, so there the two
    agree up to that. ``tests/pca/test_dropout.py`` checks the expected loss
    per trial of the two against each other over seeds.

    **Ties and the first trial.** Before any instance is kept the leader is the
    first k coordinate axes (as Follow the Leader's).

    **As a scikit-learn transformer** and for **interrupts, failures and
    threads**, as :class:`PerturbedLeaderPCA`: a call plays whole trials, an
    interrupted one holds the trials played (the lazy kernel polls about once
    a millisecond; the fresh loop publishes after each whole trial), calls
    from several threads take turns.

    **Changing parameters mid-stream**: ``solver`` and ``tol`` take effect at
    the next call; ``n_components``, ``p``, ``resample`` and
    ``random_state`` describe the state and the draws already made: the next
    call refuses a changed one with a ValueError naming it, leaving the state
    as it was; ``fit`` starts afresh.

    **Reproducibility.** The same seed gives the same decisions bit for bit
    however the stream is split into calls, pickled and resumed, with the
    same BLAS library and thread count.

    Examples
    --------
    >>> from streamfit import DropoutPCA
    >>> from streamfit.simulate import make_spiked_stream
    >>> X = make_spiked_stream(2000, 50, n_spikes=3, random_state=0)   # ||x|| = 1
    >>> est = DropoutPCA(3, random_state=0)
    >>> est = est.partial_fit(X[:1000]).partial_fit(X[1000:])  # in blocks
    >>> est.components_.shape, est.n_trials_
    ((3, 50), 2000)
    >>> bool(0 <= est.regret_ < 0.1 * est.best_gain_)   # adapts like FTL
    True
    >>> round(est.kept_fraction_, 1)
    0.5
    """

    _STATE_TYPE = DropoutState
    # the eigen-solver chain's first routine (tests override it)
    _eig_first = 0

    def __init__(self, n_components: int = 1, *, p: float = 0.5,
                 resample: Literal["lazy", "fresh"] = "lazy",
                 solver: Literal["auto", "krylov", "exact"] = "auto", tol: float = 0.01,
                 random_state: RandomStateLike = None) -> None:
        self.n_components = n_components
        self.p = p
        self.resample = resample
        self.solver = solver
        self.tol = tol
        self.random_state = random_state

    def _new_state(self, n, kind, names):
        return DropoutState(n, self.n_components, p=self.p, resample=self.resample,
                            instances=kind, solver=self.solver, tol=self.tol,
                            random_state=self.random_state, feature_names=names,
                            eig_first=self._eig_first)

    def _settings(self, state):
        # n_components, p, resample and random_state describe the state and
        # the draws already made: refused when changed; solver and tol take
        # effect now
        k = self.n_components
        if not (type(k) is int and k == state.k):
            if check_n_components(k, state.n) != state.k:
                refuse_change("n_components", state.k, k)
        check_scalar(self.p, "p", low=0, high=1, low_open=True)
        if float(self.p) != state.p:
            refuse_change("p", repr(state.p), self.p)
        if self.resample != state.resample:
            if self.resample not in ("lazy", "fresh"):
                raise ValueError(f"resample must be one of ('lazy', 'fresh'), got "
                                 f"{self.resample!r}")
            refuse_change("resample", repr(state.resample), self.resample)
        if not state.same_random_state(self.random_state):
            check_seed(self.random_state)
            refuse_change("random_state", state.random_state_repr(), self.random_state)
        state.configure(solver=self.solver, tol=self.tol)

    # -- attributes -------------------------------------------------------------
    @property
    def kept_fraction_(self) -> float:
        """Fraction of instances in the kept sum (fresh: the last redraw's
        fraction of the instances before the last trial)."""
        return self._fitted().kept_fraction_

    @property
    def solver_stats_(self) -> dict[str, int]:
        """Lazy top-k solver counters (see :attr:`PerturbedLeaderPCA.solver_stats_`);
        one solve per kept instance."""
        return self._fitted().solver_stats_

    def dropout_matrix(self) -> Float64Array:
        """S = sum_{s<=t} b_s X_s, the kept sum whose top-k the next trial
        plays (lazy only: "fresh" redraws it every trial).

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit import DropoutPCA
        >>> X = np.eye(4)
        >>> est = DropoutPCA(1, random_state=0).partial_fit(X)
        >>> bool(np.trace(est.dropout_matrix()) == round(4 * est.kept_fraction_))
        True
        """
        return self._fitted().dropout_matrix()
