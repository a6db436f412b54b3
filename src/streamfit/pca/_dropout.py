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


import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._base import deferred_signals, serialized
from .._errors import raise_for
from .._kernels._threads import call_holding
from .._kernels import _dropout as _k
from .._kernels._linalg import eigh_top
from .._validation import check_random_state, check_scalar, check_seed
from ..kernels.pca import default_block_size, default_max_iter
from ._common import _OnlinePCA, _buffered_sum, _symmetric, _writable

__all__ = ["DropoutPCA"]

_SOLVERS = ("auto", "krylov", "exact")
_RESAMPLE = ("lazy", "fresh")
_KINDS = {"vector": _k.INSTANCE_VECTOR, "dense": _k.INSTANCE_DENSE}
# vector instances wait in a buffer of this many rows before one dsyrk adds
# them to the data's cumulative matrix C (as in the FPL kernel)
_ROW_BUFFER = 64


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
    state_, dropped_, cumulative_, rows_, block_, history_ :
        the state, pickled with the estimator: the state record, the kept sum
        S (lazy), the sum C of all instances, the rows not yet added to C, the
        block of b >= k leader estimates, and the rows seen so far ("fresh").

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

    _STATE_NAMES = ("state_", "dropped_", "cumulative_", "rows_", "block_", "history_",
                    "_fitted_p", "_fitted_resample")
    _TRANSIENT_ATTRS = ("_regret_cache", "_params_cache")
    _STATE_DTYPE = _k.STATE_DTYPE
    _LOADED_ARRAYS = ("dropped_", "cumulative_", "rows_", "block_", "history_")
    _LOADED_CHOICES = {"_fitted_resample": _RESAMPLE}
    _IN_PLACE = ("state_", "dropped_", "cumulative_", "rows_", "block_")
    # the eigen-solver chain's first routine (tests override it)
    _eig_first = 0

    def __init__(self, n_components=1, *, p=0.5, resample="lazy", solver="auto", tol=0.01,
                 random_state=None):
        self.n_components = n_components
        self.p = p
        self.resample = resample
        self.solver = solver
        self.tol = tol
        self.random_state = random_state

    # -- parameters -------------------------------------------------------------
    def _build_params(self, n, kind):
        k = self._check_n_components(n)
        check_scalar(self.p, "p", low=0, high=1, low_open=True)
        if self.resample not in _RESAMPLE:
            raise ValueError(f"resample must be one of {_RESAMPLE}, got {self.resample!r}")
        if self.solver not in _SOLVERS:
            raise ValueError(f"solver must be one of {_SOLVERS}, got {self.solver!r}")
        check_scalar(self.tol, "tol", low=0, low_open=True)
        check_seed(self.random_state)
        if self.resample == "fresh" and kind == "dense":
            raise ValueError("resample='fresh' keeps every instance to redraw them each "
                             "trial: vector instances only (partial_fit); use "
                             "resample='lazy' for dense ones")
        b = default_block_size(n, k)
        if self.solver == "krylov" and 2 * b > n:
            raise ValueError(f"solver='krylov' needs n_features >= 2 * (n_components + "
                             f"{b - k}) = {2 * b}, got {n}; use solver='auto' or 'exact'")
        krylov = self.solver == "krylov" or (self.solver == "auto" and 4 * b <= n)
        prm = np.zeros(1, _k.PARAMS_DTYPE)
        prm["kind"] = _KINDS[kind]
        prm["solver"] = _k.SOLVER_KRYLOV if krylov else _k.SOLVER_EXACT
        prm["k"], prm["b"], prm["maxiter"] = k, b, default_max_iter(n, b)
        prm["eig_first"] = self._eig_first
        prm["p"], prm["tol"] = float(self.p), float(self.tol)
        return prm

    def _params(self, n, kind):
        key = (n, kind, self.n_components, self.p, self.resample, self.solver, self.tol,
               self.random_state, self._eig_first)
        return self._cached_params(key, lambda: self._build_params(n, kind))

    def _prepare(self, n, kind, X_in=None):
        self._check_instance(n, kind, X_in)
        params = self._params(n, kind)
        if self._check_continues(int(params["k"][0])):
            if float(self.p) != self._fitted_p:
                raise ValueError(f"p changed from {self._fitted_p!r} to {self.p!r} since the "
                                 f"first call; fit() starts afresh")
            if self.resample != self._fitted_resample:
                raise ValueError(f"resample changed from {self._fitted_resample!r} to "
                                 f"{self.resample!r} since the first call; fit() starts "
                                 f"afresh")
        return params

    # -- state ------------------------------------------------------------------
    def _initialize(self, n, kind, params):
        """The first decision's state: nothing kept, the first k axes."""
        b = int(params["b"][0])
        lazy = self.resample == "lazy"
        V = np.zeros((b, n))
        V[np.arange(b), np.arange(b)] = 1.0
        return {"state_": np.zeros(1, _k.STATE_DTYPE),
                "dropped_": np.zeros((n, n) if lazy else (0, 0)),
                "cumulative_": np.zeros((n, n) if lazy else (0, 0)),
                "rows_": np.zeros((_ROW_BUFFER if lazy and kind == "vector" else 0, n)),
                "block_": V,
                "history_": np.zeros((0, n))}

    def _play(self, kind, data, params, X_in):
        X, scale, _ = data
        T, n = X.shape[0], X.shape[-1]
        fresh = not self.__sklearn_is_fitted__()
        if fresh:
            rng = check_random_state(self.random_state)
            arrays = self._initialize(n, kind, params)
            with deferred_signals():
                self.__dict__.update(arrays)
                self._rng = rng
                self._fitted_random_state = self.random_state
                self._fitted_p = float(self.p)
                self._fitted_resample = self.resample
                self.n_components_ = int(params["k"][0])
                self.instances_ = kind
                self._publish_features(X_in, n)
        else:
            for name in self._IN_PLACE:
                setattr(self, name, _writable(getattr(self, name)))
        if T == 0:
            return
        if self._fitted_resample == "fresh":
            self._play_fresh(X, scale, params)
            return
        if kind == "dense":
            X = X.reshape(T, n * n)
        rng = self._rng
        saved = rng.bit_generator.state if fresh else None
        # the with-statement compiled: a KeyboardInterrupt on a Python with's
        # exit line would leave the generator's lock held
        code, done, exc = call_holding(rng.bit_generator.lock, _k.run, X, scale, self.state_,
                                       params, self.dropped_, self.cumulative_, self.rows_,
                                       self.block_, rng.bit_generator.capsule)
        self._finish_call(code, done, exc, T, fresh, rng, saved)

    def _loaded_inconsistency(self):
        # "fresh" replays every earlier row: one per trial; "lazy" keeps none
        want = int(self.state_["t"][0]) if self._fitted_resample == "fresh" else 0
        if self.history_.shape[0] != want:
            return "history_", f"has {self.history_.shape[0]} rows, expected {want}"
        return None

    def _play_fresh(self, X, scale, params):
        """The paper's dropout: every trial redraws b_1..b_{t-1} and solves
        the kept sum exactly. Each trial's results are published together, so
        an interrupt leaves a whole number of trials."""
        k, p, first = int(params["k"][0]), float(params["p"][0]), int(params["eig_first"][0])
        rng = self._rng
        n = X.shape[1]
        H = np.concatenate([self.history_, np.zeros((X.shape[0], n))])
        t0 = int(self.state_["t"][0])
        axes = np.eye(k, n)

        def draw(t, before):
            before.append(rng.bit_generator.state)
            return rng.random(t) < p

        for i in range(X.shape[0]):
            t = t0 + i
            before = []
            try:
                # the lock taken in compiled code (see _play)
                kept = call_holding(rng.bit_generator.lock, draw, t, before)
                K = H[:t][kept]
                if K.shape[0] == 0:
                    V = axes
                else:
                    code, _, Z, _, _ = eigh_top(np.ascontiguousarray(K.T @ K), k, True, first)
                    raise_for(code, type(self).__name__)
                    V = Z[::-1]
                g = float(np.sum((V @ X[i]) ** 2))
                state = self.state_.copy()
                state["t"], state["gain"] = t + 1, state["gain"][0] + g
                state["kept"] = int(kept.sum())
                state["scale"] = max(float(state["scale"][0]), float(scale[i]))
                H[t] = X[i]
                with deferred_signals():
                    self.state_, self.history_ = state, H[:t + 1]
                    self.block_ = np.ascontiguousarray(V)
                    # published: a signal held back till here keeps the draws
                    before.clear()
            except BaseException:
                # nothing of this trial is kept, nor drawn
                if before:
                    rng.bit_generator.state = before[0]
                raise

    # -- attributes -------------------------------------------------------------
    @property
    @serialized
    def components_(self):
        """(k, n) orthonormal rows: the subspace the next trial plays (lazy);
        with resample="fresh", the last trial's leader (the next trial
        redraws)."""
        check_is_fitted(self)
        return self.block_[:self.n_components_].copy()

    @property
    @serialized
    def kept_fraction_(self):
        """Fraction of instances in the kept sum (fresh: the last redraw's
        fraction of the instances before the last trial)."""
        check_is_fitted(self)
        t = int(self.state_["t"][0])
        base = t if self._fitted_resample == "lazy" else t - 1
        return float(self.state_["kept"][0]) / base if base > 0 else 0.0

    @property
    def solver_stats_(self):
        """Lazy top-k solver counters (see :attr:`PerturbedLeaderPCA.solver_stats_`);
        one solve per kept instance."""
        return self._topk_stats()

    @serialized
    def cumulative_matrix(self):
        """sum_t X_t over every instance (dropped ones included): the
        comparator's matrix, full and symmetric."""
        check_is_fitted(self)
        if self._fitted_resample == "fresh":
            H = self.history_
            return H.T @ H
        return _buffered_sum(self.cumulative_, self.rows_, int(self.state_["pending"][0]))

    @serialized
    def dropout_matrix(self):
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
        check_is_fitted(self)
        if self._fitted_resample == "fresh":
            raise ValueError("resample='fresh' redraws the kept sum every trial: there "
                             "is no one dropout matrix")
        return _symmetric(self.dropped_)
