"""Online PCA by Follow the Perturbed Leader with Gaussian (GOE) noise, and
Follow the Leader.

The state of a run is one compiled object, ``streamfit._kernels._pca.LeaderState``
(``streamfit.kernels.LeaderState``): it owns the matrices, the block of
eigenvector estimates and its bit generator, and runs the whole trial loop
(play, gain, update, top-k) without the GIL, stopping, on a signal, only
between two trials. The estimators here are scikit-learn's conventions
around it.
"""
from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Literal

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._kernels._pca import LeaderState
from .._validation import check_random_state, check_scalar, check_seed
from ..kernels.pca import goe
from ._common import _OnlinePCA, check_n_components, refuse_change

if TYPE_CHECKING:
    from .._typing import Float64Array, RandomStateLike

__all__ = ["PerturbedLeaderPCA", "FollowTheLeaderPCA", "goe_matrix", "regret_bound",
           "auto_sigma"]

_NOISES = ("fixed", "random_walk", "independent")


def goe_matrix(n, sigma=1.0, random_state=None):
    """A GOE matrix N = (G + G^T)/2 with G_ij ~ N(0, sigma^2).

    Only the n(n+1)/2 independent entries are drawn (diagonal N(0, sigma^2),
    off-diagonal N(0, sigma^2/2)), row by row along the lower triangle, with
    the ziggurat of ``numpy.random.Generator.standard_normal`` from the given
    generator's bit generator; the matrix is then symmetrised in place. (The
    same draw as :func:`streamfit.kernels.goe`.)

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.pca import goe_matrix
    >>> N = goe_matrix(500, sigma=2.0, random_state=0)
    >>> bool(np.array_equal(N, N.T))
    True
    >>> round(float(np.var(N[np.tril_indices(500, -1)])), 1)      # sigma^2 / 2
    2.0
    """
    check_scalar(n, "n", kind=numbers.Integral, low=0)
    check_scalar(sigma, "sigma", low=0)
    return goe(int(n), float(sigma), check_random_state(check_seed(random_state)))


def auto_sigma(n_features, n_components, *, instances="vector", scale=1.0, max_trace_sq=None):
    """The sigma that minimises the regret bound
    R <= r sqrt(2 T M / (pi sigma^2)) + sqrt(2) k sqrt(n T sigma^2).

    This is the paper's final bound with its noise term corrected: the paper
    bounds E lambda_{1:k}(N) by k sigma sqrt(n), below the GOE's semicircle
    edge (lambda_1(N) -> sqrt(2) sigma sqrt(n) for N = (G + G^T)/2,
    G_ij ~ N(0, sigma^2)). What holds at every n is
    E lambda_{1:k}(N) <= k E lambda_1(N) <= sqrt(2) k sigma sqrt(n), by the
    Sudakov-Fernique inequality (Vershynin, *High-Dimensional Probability*,
    2018, Sections 7.2-7.3: for A = sqrt(2) N / sigma compare X_u = u'Au with
    Y_u = 2 g'u over unit u, so E lambda_1(A) <= 2 E||g|| <= 2 sqrt(n)). The
    minimiser is 2^(-1/4) times the paper's sigma.

    ``instances="vector"``: x_t x_t^T with ||x_t||^2 <= scale (r = scale, M = scale^2),
    sigma^2 = scale^2 / (k sqrt(pi n)).
    ``instances="dense"``: PSD X_t with ||X_t||_2 <= scale and tr(X_t^2) <= max_trace_sq
    (default n scale^2, the paper's worst case), r = k scale,
    sigma^2 = scale sqrt(M / (pi n)).

    Computed without forming scale^2 (no overflow at any representable
    scale); 1 <= n_components <= n_features.

    Examples
    --------
    >>> from streamfit.pca import auto_sigma
    >>> round(auto_sigma(100, 4), 4)       # (1 / (4 sqrt(100 pi))) ** 0.5
    0.1188
    >>> round(auto_sigma(100, 4, instances="dense"), 4)  # pi ** -0.25
    0.7511
    """
    A, E, b = _bound_terms(n_features, n_components, instances, scale, max_trace_sq)
    return math.ldexp(math.sqrt(A / b), E // 2)


def regret_bound(n_trials, n_features, n_components, sigma, *, instances="vector",
                 scale=1.0, max_trace_sq=None):
    """The regret bound a sqrt(T) / sigma + b sqrt(T) sigma for a given sigma,
    b = sqrt(2) k sqrt(n) (see :func:`auto_sigma` for the terms, and for the
    sqrt(2) the paper's k sqrt(n) lacks: E lambda_1(N) <= sqrt(2) sigma sqrt(n)
    by Sudakov-Fernique); at the auto sigma it is 2 sqrt(a b T), 2^(1/4)
    times the paper's.

    Examples
    --------
    >>> from streamfit.pca import auto_sigma, regret_bound
    >>> s = auto_sigma(100, 4)
    >>> # 2 (4/pi)^(1/4) sqrt(k) n^(1/4) sqrt(T)
    >>> round(regret_bound(10_000, 100, 4, s))
    1344
    >>> regret_bound(10_000, 100, 4, 2 * s) > regret_bound(10_000, 100, 4, s)
    True
    """
    check_scalar(n_trials, "n_trials", low=0)
    check_scalar(sigma, "sigma", low=0, low_open=True)
    A, E, b = _bound_terms(n_features, n_components, instances, scale, max_trace_sq)
    # a / sigma with a = A 2^E, in a range where neither factor overflows
    a_over_sigma = math.ldexp(A / math.ldexp(float(sigma), -(E // 2)), E // 2)
    return float(math.sqrt(n_trials) * (a_over_sigma + b * sigma))


def _bound_terms(n, k, instances, scale, max_trace_sq):
    """The bound's data term a = A 2^E (E even: a itself over- or underflows
    at extreme scales) and b = sqrt(2) k sqrt(n) (Sudakov-Fernique, see
    :func:`auto_sigma`)."""
    check_scalar(n, "n_features", kind=numbers.Integral, low=1)
    check_scalar(k, "n_components", kind=numbers.Integral, low=1)
    if k > n:
        raise ValueError(f"n_components must be in [1, n_features] = [1, {n}], got {k}")
    check_scalar(scale, "scale", low=0, low_open=True)
    ms, es = math.frexp(float(scale))
    if instances == "vector":
        A, E = ms * ms * math.sqrt(2 / math.pi), 2 * es
    elif instances == "dense":
        if max_trace_sq is None:
            # M = n scale^2: sqrt(M) = sqrt(n) scale
            mf, ef = math.frexp(math.sqrt(n) * ms)
            ef += es
        else:
            check_scalar(max_trace_sq, "max_trace_sq", low=0, low_open=True)
            mm, em = math.frexp(float(max_trace_sq))
            if em % 2:
                mm, em = 2 * mm, em - 1
            mf, ef = math.sqrt(mm), em // 2
        A, E = k * ms * mf * math.sqrt(2 / math.pi), es + ef
        if E % 2:
            A, E = 2 * A, E - 1
    else:
        raise ValueError(f"instances must be 'vector' or 'dense', got {instances!r}")
    return A, E, math.sqrt(2.0) * k * math.sqrt(n)


class _LeaderPCA(_OnlinePCA):
    """Follow the (Perturbed) Leader: the estimator around a LeaderState."""

    _STATE_TYPE = LeaderState
    _FLOAT32_ROWS = True
    # the eigen-solver chain's first routine (0 by size: dsyevd at n <= 6 b,
    # else dsyevr; 1 dsyevd, 2 dsyev, 3 Jacobi): a class attribute tests
    # override to run the later routines
    _eig_first = 0
    _noise = "none"

    def _new_state(self, n, kind, names):
        return LeaderState(n, self.n_components, instances=kind, noise=self._noise,
                           sigma=getattr(self, "sigma", "auto"), solver=self.solver,
                           tol=self.tol, n_jobs=self.n_jobs,
                           random_state=getattr(self, "random_state", None),
                           feature_names=names, eig_first=self._eig_first)

    def _settings(self, state):
        # n_components (and FPL's noise, random_state) describe the state:
        # refused when changed; sigma, solver, tol and n_jobs take effect now
        k = self.n_components
        if not (type(k) is int and k == state.k):
            if check_n_components(k, state.n) != state.k:
                refuse_change("n_components", state.k, k)
        state.configure(sigma=getattr(self, "sigma", "auto"), solver=self.solver,
                        tol=self.tol, n_jobs=self.n_jobs)

    # -- attributes -------------------------------------------------------------
    @property
    def sigma_(self) -> float:
        """The noise scale the next decision uses (0 for Follow the Leader)."""
        return self._fitted().sigma_

    @property
    def gap_tolerance_(self) -> float:
        """The objective-gap tolerance of the last top-k solve."""
        return self._fitted().gap_tolerance_

    @property
    def solver_stats_(self) -> dict[str, int]:
        """Top-k solver counters: solves (one per trial), products S @ block,
        fallbacks (Krylov solves that ran out of iterations and went to LAPACK),
        direct (solves sent straight to LAPACK after fallbacks: a back-off that
        doubles while Krylov keeps failing), eig_fallbacks (eigenproblems that
        needed a routine after the chain's first: dsyevd or dsyevr, dsyev or Jacobi), kept
        (solves where every routine failed -- only a non-finite matrix does
        that -- so the previous decision was played again), the last estimated
        gap and the largest estimated gap / tolerance."""
        return self._fitted().solver_stats_

    def perturbed_matrix(self) -> Float64Array:
        """S = X_<t + N_t, the matrix whose top-k eigenvectors are played next."""
        return self._fitted().perturbed_matrix()


class PerturbedLeaderPCA(_LeaderPCA):
    """Online PCA by Follow the Perturbed Leader with Gaussian (GOE) noise
    (Kotlowski & Warmuth).

    At trial t it plays the projection P_t onto the top-k eigenvectors of
    S_t = X_<t + sqrt(t) N, N = (G + G^T)/2, G_ij ~ N(0, sigma^2), then sees X_t
    (x_t x_t^T for rows of ``partial_fit``, a PSD matrix for ``partial_fit_dense``)
    and gains tr(P_t X_t). Regret O(n^{1/4} sqrt(k T)) for vector instances and
    O(k sqrt(n T)) for dense ones; a trial costs O(k n^2): a rank-one (dsyr) or
    dense update, O(n^2) noise work, and a warm-started block Krylov top-k solve.

    Parameters
    ----------
    n_components : int, default 1
        k, the rank of the projections played (the default, 1, is online
        rank-one PCA: the top direction; any k <= n_features may be given).
    sigma : "auto" or float, default "auto"
        Noise scale. "auto" minimises the paper's final bound with its GOE term
        corrected (:func:`~streamfit.pca.auto_sigma`: E lambda_1(N) <= sqrt(2) sigma sqrt(n) by
        the Sudakov-Fernique inequality, where the paper has sigma sqrt(n)),
        R <= r sqrt(2 T M / (pi sigma^2)) + sqrt(2) k sqrt(n T sigma^2), scaled to
        the data seen so far: for vector instances sigma^2 = L^2 / (k sqrt(pi n))
        with L = max ||x_s||^2 (the paper's r = 1, M = 1 when ||x|| <= 1); for dense
        ones sigma^2 = Lambda sqrt(M / (pi n)) with M = max tr(X_s^2) and
        Lambda = max min(||X_s||_F, max row sum |X_s|), an upper bound on the
        eigenvalues (1 / sqrt(pi) when eigenvalues <= 1 and M = n). Both are
        2^(-1/4) times the paper's sigma.
        The scale at trial t uses trials before t only, so rescaling the data by
        c rescales sigma by c (vector: c^2 for x -> c x) and leaves every decision
        unchanged. The first trial plays the top-k of a unit GOE draw: a uniformly
        random subspace, whatever the scale.
    noise : {"fixed", "random_walk", "independent"}, default "fixed"
        "fixed": one N per run (the paper; against oblivious adversaries);
        S_{t+1} = S_t + X_t + (sqrt(t+1) sigma_{t+1} - sqrt(t) sigma_t) N is kept
        incrementally. "random_walk": a fresh GOE increment each trial, with the
        same marginal sqrt(t) sigma N. "independent": a fresh sqrt(t) N each trial
        (for adaptive adversaries); both draw n(n+1)/2 normals per trial.
    solver : {"auto", "krylov", "exact"}, default "auto"
        "krylov": warm-started block Krylov (block b = k + max(5, k // 2); LOBPCG's
        Rayleigh-Ritz on [V, S V - V Theta, previous step]) with a LAPACK fallback
        when it has not converged after about as many products as a LAPACK solve
        costs; "exact": LAPACK every trial (dsyevd's whole spectrum at n <= 6 b,
        where it is the faster, else dsyevr's top b); "auto": Krylov when n >= 4 b,
        else exact, and always exact with independent noise (its top-k jumps
        every trial, so a warm start costs more than it saves).
    tol : float, default 0.01
        The Krylov solve stops when its estimate of the objective gap
        lambda_{1:k}(S_t) - tr(V^T S_t V) is below tol * c / (2 sqrt(t)), where
        R_T <= c sqrt(T) is the (corrected) bound at the sigma in use: the gaps then
        add at most tol times the bound over the run (Lemma 1 with an approximate
        leader). The estimate extrapolates the last two objective increases.
    random_state : None, int or numpy Generator
        Seeds the noise; the same seed gives the same decisions.
    n_jobs : None or int, default None
        OpenMP threads of the trial loop at n >= 768 (see Threads below), as
        scikit-learn counts them: None and -1 the OpenMP runtime's count
        (``OMP_NUM_THREADS``, threadpoolctl's ``threadpool_limits``) capped
        at the cores this process may use; -k all but k - 1 of them; k > 0
        that many. The decisions are the same for every value.

    Attributes
    ----------
    components_ : (k, n) array, the subspace the next trial plays
    cumulative_gain_, best_gain_, regret_ : float
        best_gain_ and regret_ need lambda_{1:k} of the cumulative matrix: one
        O(n^3) LAPACK call on first access after a call (then cached).
    n_trials_ : int
    sigma_ : float, the noise scale of the next decision
    solver_stats_ : dict, Krylov iterations, fallbacks and gap estimates
    n_features_in_, feature_names_in_ : as scikit-learn's (names from a DataFrame)
    The state itself (S, N, the data's sum C, the block of b >= k eigenvector
    estimates, the counters, the bit generator) is one compiled object,
    :class:`streamfit.kernels.LeaderState`, pickled with the estimator.

    Notes
    -----
    **As a scikit-learn transformer**, ``fit`` starts afresh and plays every
    row as a trial; ``transform`` projects on ``components_`` (uncentered, as
    the gain is), ``inverse_transform`` maps back, ``score`` is the fraction of
    a block's energy ``components_`` captures.

    **Changing parameters mid-stream** (``set_params`` between calls):
    ``sigma``, ``solver`` and ``tol`` take effect at the next call -- a new
    sigma sets the noise to sqrt(t) sigma N from the next decision on (fixed
    noise rescales its N, the random walk adds an increment or shrinks the walk
    so far, independent noise draws at the new scale), and the regret bound is
    then the one of the sigmas used. ``n_components``, ``noise`` and
    ``random_state`` describe the state itself: the next call refuses a
    changed one with a ValueError naming it, leaving the state as it was;
    ``fit`` starts afresh with the new value.

    **Interrupts, failures, threads.** A call plays whole trials. Ctrl-C (or
    any signal handler that raises) stops it before the next trial -- the
    kernel polls about once a millisecond, so within a millisecond plus one
    trial (~6 ms at n = 1000, k = 10); one LAPACK solve cannot be interrupted
    (the first decision, a Krylov fallback or solver="exact": ~0.1 s at
    n = 1000, ~10 s at n = 4000) -- and the estimator holds the trials played,
    consistent in every field; the exception's note says how many. An
    interrupted ``fit`` leaves the previous fit. S and C are updated in place;
    nothing else can fail mid-call (a solve whose every eigen-solver fails,
    which only a non-finite S makes happen, replays the last decision and
    counts in solver_stats_["kept"]). Calls from several threads take turns;
    none is lost.

    **Threads.** At n >= 768 a trial's two O(n^2) parts run on ``n_jobs``
    OpenMP threads (Cython's ``prange``, as scikit-learn's kernels): the
    update of S (x x^T and the noise in one pass over S, in row panels of
    equal area) and the Krylov products S @ block (fixed panels of 128
    rows, each two off-diagonal products and its diagonal block on the
    stored triangle, by streamfit's own kernels: no BLAS runs inside a
    parallel region). Every panel is written by one thread and computed the
    same way whichever thread takes it, so the decisions do not depend on
    the thread count or on the machine's load. Below n = 768 the loop stays
    on one thread: there a second one costs more to wake than it saves. Above
    it each call picks, trial by trial, between its threads and one by their
    measured times (another process on a core makes one thread faster). The
    OpenMP runtime is the one threadpoolctl lists and limits
    (``threadpool_limits(1, user_api="openmp")``). The rest of a trial (QR,
    small eigenproblems, the exact solves) calls LAPACK on the caller's
    thread, with the BLAS thread count the caller set: the library never
    changes it. OpenBLAS's own threads keep spinning for about 0.1 s after a
    call that used them (the first decision's LAPACK solve, a fallback, or any
    BLAS call of the caller's) and take the cores the OpenMP team needs
    meanwhile: trials in that window run at about n_jobs=1 speed. Calls that
    mix the two freely can run under ``threadpool_limits(1, user_api="blas")``.
    A process forked after its OpenMP threads started runs the loop on one
    thread (libgomp's threads do not survive fork).

    **Reproducibility.** The same seed gives the same decisions bit for bit
    however the stream is split into calls, pickled and resumed, at every
    power-of-two rescaling of the data, and whatever ``n_jobs`` -- with the
    same BLAS library and BLAS thread count: LAPACK's exact solves (the first
    decision, fallbacks, ``solver="exact"``) follow the BLAS threads the
    caller set, whose sums can round differently on another count; exact
    solves then agree to rounding, and warm-started ones within their
    tolerance.

    Examples
    --------
    >>> from streamfit import PerturbedLeaderPCA
    >>> from streamfit.pca import regret_bound
    >>> from streamfit.simulate import make_spiked_stream
    >>> X = make_spiked_stream(2000, 50, n_spikes=3, random_state=0)   # ||x|| = 1
    >>> fpl = PerturbedLeaderPCA(3, random_state=0)
    >>> fpl = fpl.partial_fit(X[:1000]).partial_fit(X[1000:])  # in blocks
    >>> fpl.components_.shape, fpl.n_trials_
    ((3, 50), 2000)
    >>> bool(0 < fpl.regret_ < regret_bound(2000, 50, 3, fpl.sigma_))
    True
    """

    def __init__(self, n_components: int = 1, *, sigma: Literal["auto"] | float = "auto",
                 noise: Literal["fixed", "random_walk", "independent"] = "fixed",
                 solver: Literal["auto", "krylov", "exact"] = "auto", tol: float = 0.01,
                 random_state: RandomStateLike = None, n_jobs: int | None = None) -> None:
        self.n_components = n_components
        self.sigma = sigma
        self.noise = noise
        self.solver = solver
        self.tol = tol
        self.random_state = random_state
        self.n_jobs = n_jobs

    @property
    def _noise(self):
        if not isinstance(self.noise, str) or self.noise not in _NOISES:
            raise ValueError(f"noise must be one of {_NOISES}, got {self.noise!r}")
        return self.noise

    def _settings(self, state):
        if self.noise != state.noise:
            refuse_change("noise", repr(state.noise), self._noise)
        if not state.same_random_state(self.random_state):
            check_seed(self.random_state)
            refuse_change("random_state", state.random_state_repr(), self.random_state)
        super()._settings(state)


class FollowTheLeaderPCA(_LeaderPCA):
    """Online PCA by Follow the Leader: play the top-k eigenvectors of X_<t.

    The paper's deterministic baseline (FPL with sigma = 0). Good on i.i.d.
    streams; an adversary can force regret linear in T (see
    :func:`streamfit.simulate.make_ftl_adversary`). Same solver, attributes and
    methods as :class:`PerturbedLeaderPCA`; the Krylov tolerance uses the bound
    of the "auto" sigma. The first trial plays the first k coordinate axes.

    Parameters
    ----------
    n_components : int, default 1
        k, the rank of the projections played (the default, 1, is online
        rank-one PCA: the top direction; any k <= n_features may be given).
    solver : {"auto", "krylov", "exact"}, default "auto"
        As for :class:`PerturbedLeaderPCA`.
    tol : float, default 0.01
        As for :class:`PerturbedLeaderPCA`, with c the bound's constant at the
        "auto" sigma.
    n_jobs : None or int, default None
        As for :class:`PerturbedLeaderPCA`.

    Notes
    -----
    As for :class:`PerturbedLeaderPCA`: ``solver`` and ``tol`` take effect at
    the next call; a changed ``n_components`` is refused by the next call
    (ValueError naming it). FTL draws nothing and keeps no separate data
    matrix: S is the data's sum.

    Examples
    --------
    >>> from streamfit import FollowTheLeaderPCA
    >>> from streamfit.simulate import make_ftl_adversary
    >>> X = make_ftl_adversary(3000, 10, n_components=2)
    >>> ftl = FollowTheLeaderPCA(2).partial_fit(X)
    >>> round(ftl.regret_ / ftl.n_trials_, 2)   # k / n a trial: linear regret
    0.2
    """

    _noise = "none"

    def __init__(self, n_components: int = 1, *,
                 solver: Literal["auto", "krylov", "exact"] = "auto", tol: float = 0.01,
                 n_jobs: int | None = None) -> None:
        self.n_components = n_components
        self.solver = solver
        self.tol = tol
        self.n_jobs = n_jobs
