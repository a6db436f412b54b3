"""Online PCA over the capped simplex: Matrix Exponentiated Gradient and matrix
Gradient Descent, the comparators of "PCA with Gaussian perturbations".

Both keep a parameter W_t in the convex hull of rank-k projections
{W symmetric, 0 <= W <= I, tr W = k}, gain tr(W_t X_t) in expectation, and play
a rank-k projection P_t sampled from W_t (E[P_t] = W_t). Every update needs the
eigendecomposition of the updated matrix. For vector instances that is a
rank-one change of the one already known, updated in O(n K^2) (K <= n the block
that deflation leaves: the secular equation by LAPACK dlaed4 and one dgemm,
against LAPACK dsyevd's ~4 n^3 and more), with a full dsyevd every
FULL_EVERY-th update to bound the drift; dense instances are decomposed afresh
(dsyevd) every trial. Either way O(n^3) at worst per trial, against FPL's
O(k n^2).

The state of a run is one compiled object, ``streamfit.kernels.CappedState``:
it owns the parameter's eigendecomposition, the instances' sum, its bit
generators and work space, and runs the trial loop (gains, update,
eigendecomposition, projection, sampling) without the GIL, committing a call
by making the copy it played on the live state.
"""
from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Literal

import numpy as np

from .._kernels._capped import CappedState
from .._validation import check_scalar, check_seed
from ..kernels.pca import mixture_decomposition, project_capped_simplex, systematic_sample
from ._common import _OnlinePCA, check_n_components, refuse_change

if TYPE_CHECKING:
    from .._typing import Float64Array, RandomStateLike

__all__ = ["MatrixEGPCA", "MatrixGDPCA", "project_capped_simplex", "mixture_decomposition",
           "systematic_sample"]

#: Vector instances: every FULL_EVERY-th update decomposes the updated matrix
#: afresh (LAPACK dsyevd, through the fallback chain) instead of updating the
#: decomposition by a rank-one step. The rank-one steps lose U's orthogonality
#: slowly (rounding of the n x K x K products, growing like sqrt(t)); the full
#: decomposition starts it afresh. Chosen by measurement
#: (benchmarks/test_pca_comparators.py, one BLAS thread): over 10^4 trials at
#: n = 100 with no refresh at all, max |U U^T - I| <= 4e-14 and W within
#: 2e-14 of dsyevd every trial (with a refresh every 200th: 7e-15, 7e-15), so
#: drift does not force a short period; the cost does: a refresh costs one
#: dsyevd trial, and GD's rank-one trials are ~50x cheaper than that (K ~ 30
#: at n = 500), so a period of 200 added ~35% to GD's mean trial, 1000 adds
#: ~5% (MEG, K ~ n: under 1%).
FULL_EVERY = 1000


# --- the estimators -------------------------------------------------------------

class _CappedSimplexPCA(_OnlinePCA):
    """MEG and GD: the estimator around a CappedState."""

    _STATE_TYPE = CappedState
    _algo: str | None = None
    # the eigen-solver chain's first routine (1 dsyevd, 0 dsyevr, 2 dsyev, 3
    # Jacobi): a class attribute tests override to run the later routines
    _eig_first = 1
    # vector instances: a full decomposition every _full_every-th update,
    # rank-one updates in between; 0 decomposes every update afresh with the
    # matrix stored (as dense instances always do): the benchmarks' baseline
    # and the tests' reference
    _full_every = FULL_EVERY

    def __init__(self, n_components: int = 1, *, eta: Literal["auto"] | float = "auto",
                 random_state: RandomStateLike = None) -> None:
        self.n_components = n_components
        self.eta = eta
        self.random_state = random_state

    def _new_state(self, n, kind, names):
        return CappedState(n, self.n_components, algo=self._algo, instances=kind,
                           eta=self.eta, random_state=self.random_state,
                           feature_names=names, full_every=self._full_every,
                           eig_first=self._eig_first)

    def _settings(self, state):
        # n_components, eta and random_state describe the run (MEG's epochs
        # and the regret bound follow one rate policy): refused when changed
        k = self.n_components
        if not (type(k) is int and k == state.k):
            if check_n_components(k, state.n) != state.k:
                refuse_change("n_components", state.k, k)
        if isinstance(self.eta, str):
            if self.eta != "auto":
                raise ValueError(f"eta must be 'auto' or a positive float, got {self.eta!r}")
        else:
            check_scalar(self.eta, "eta", low=0, low_open=True)
        if not (self.eta == state.eta and isinstance(self.eta, str) == isinstance(state.eta,
                                                                                   str)):
            refuse_change("eta", repr(state.eta), self.eta)
        if not state.same_random_state(self.random_state):
            check_seed(self.random_state)
            refuse_change("random_state", state.random_state_repr(), self.random_state)
        state.configure(full_every=self._full_every)

    # -- attributes --------------------------------------------------------------------
    def _captured(self, state, X):
        # the expected captured energy under W: sum_i x_i^T W x_i
        return state.captured(X)

    @property
    def parameter_eigenvalues_(self) -> Float64Array:
        """Eigenvalues of W, ascending: in [0, 1], summing to k."""
        return self._fitted().parameter_eigenvalues_

    def parameter_matrix(self) -> Float64Array:
        """W, the mixture of rank-k projections the next trial plays from (n x n)."""
        return self._fitted().parameter_matrix()

    @property
    def update_stats_(self) -> dict[str, int]:
        """Counters of the updates: ``full`` (decomposed afresh by the dsyevd
        chain: every update of dense instances; for vector ones every
        FULL_EVERY-th and any whose rank-one step failed), ``rank_one`` (by the
        rank-one update of the decomposition), ``rank_one_failed`` (rank-one
        steps whose secular solver failed and were redone in full),
        ``mean_block`` (the mean size K of the block the rank-one steps left
        after deflation: their cost is O(n K^2)) and ``eig_fallbacks`` (full
        decompositions that needed a routine after dsyevd)."""
        return self._fitted().update_stats_

    @property
    def realized_gain_(self) -> float:
        """Sum over trials of tr(P_t X_t) for the projections P_t actually sampled
        (cumulative_gain_ is its expectation, sum tr(W_t X_t))."""
        return self._fitted().realized_gain_

    @property
    def eta_(self) -> float:
        """The learning rate of the last update (0 before any)."""
        return self._fitted().eta_

    def sample_projection(self) -> Float64Array:
        """A rank-k projection P (n x n) drawn from W: E[P] = W. Draws from a
        generator of its own (seeded from random_state), so it never changes
        the projections the trials play.

        The draw is systematic sampling on W's eigenvalues (O(n), exact
        inclusion probabilities); :meth:`mixture_decomposition` gives the
        explicit mixture instead."""
        V = self._fitted().sample_projection_rows()
        return V.T @ V

    def mixture_decomposition(self) -> tuple[Float64Array, Float64Array]:
        """W as an explicit convex combination of rank-k projections
        (Warmuth & Kuzmin): ``weights`` (m,) summing to 1 and ``bases``
        (m, k, n) of orthonormal rows, with
        W = sum_j weights[j] bases[j].T @ bases[j], m <= n + 1."""
        state = self._fitted()
        U, w = state.eigenvectors_, state.parameter_eigenvalues_
        weights, subsets = mixture_decomposition(w, state.k)
        return weights, U[subsets]

    def _bound_args(self, n_trials):
        state = self._fitted()
        if n_trials is None:
            return state, state.n_trials_
        if isinstance(n_trials, bool) or not isinstance(n_trials, numbers.Integral):
            raise TypeError(f"n_trials must be an integer, got {n_trials!r}")
        if n_trials < 0:
            raise ValueError(f"n_trials must be >= 0, got {n_trials}")
        return state, int(n_trials)


class MatrixEGPCA(_CappedSimplexPCA):
    """Online PCA by Matrix Exponentiated Gradient with capping (Tsuda, Raetsch &
    Warmuth 2005; Warmuth & Kuzmin 2008), gain form.

    W_{t+1} = cap_k(exp(log W_t + eta X_t)): the exponentiated update, then the
    relative-entropy projection onto the capped simplex, which in W's eigenbasis
    caps the largest eigenvalues at 1 and rescales the rest to trace k. W_1 =
    (k/n) I. The kernel keeps log W and corrects it by a rank-(m < k) update
    after each eigendecomposition (LAPACK dsyevd, O(n^3) per trial). Trials play
    a projection sampled from W_t; ``cumulative_gain_`` is the expected gain
    sum tr(W_t X_t), ``realized_gain_`` the sampled one.

    Regret (relative entropy to W_1 is at most k ln(n/k); Golden-Thompson and
    e^x <= 1 + x + x^2 on [0, 1]): R_T <= k ln(n/k) / eta + eta B L^2 T when
    eta L <= 1, where L bounds the instances' eigenvalues (||x||^2 for vector
    instances) and B = 1 for vector instances (tr(W x x^T x x^T) <= L^2), B = k
    for dense ones. Tuned for T: eta = sqrt(k ln(n/k) / (B T)) / L and
    R_T <= 2 L sqrt(B k ln(n/k) T).

    Parameters
    ----------
    n_components : int, default 1
        k, the rank of the projections played (the default, 1, is online
        rank-one PCA: the top direction; any k <= n_features may be given).
    eta : "auto" or float, default "auto"
        A float is a fixed learning rate. "auto" needs no horizon: the doubling
        trick, with epochs [2^j, 2^(j+1)) that each start afresh at W = (k/n) I
        with eta = tilde_j / Lambda, tilde_j = min(1/2, sqrt(k ln(n/k) / (B 2^j))),
        Lambda the largest scale seen when the epoch started (or at its first
        non-zero instance). The rate stays fixed within a run: an instance of
        scale above 2 Lambda starts the epoch afresh at its scale instead (a
        rate that shrank with a growing scale would lose the guarantee, and a
        four-line stream shows it). Regret at most
        2 sum_j L (k ln(n/k) / tilde_j + tilde_j B len_j) + 2 B L, about 7 times
        the bound tuned for T and L (:meth:`regret_bound`). (A rate decaying
        like 1/sqrt(t) keeps no guarantee for mirror descent with an unbounded
        divergence either, which is why MEG restarts; GD does not.)
    random_state : None, int or numpy Generator
        Seeds the sampling of the played projections.

    Attributes
    ----------
    components_ : (k, n) array, the projection sampled for the next trial
    cumulative_gain_ : float, expected gain sum_t tr(W_t X_t)
    realized_gain_ : float, gain of the sampled projections
    best_gain_, regret_ : float, as for :class:`PerturbedLeaderPCA`
    parameter_eigenvalues_ : (n,) array, W's eigenvalues ascending
    n_trials_ : int
    eta_ : float, the last learning rate
    n_restarts_ : int, runs started afresh (doubling-trick epochs, scale jumps)
    update_stats_ : dict, how the updates were decomposed (rank-one or full)
    The state itself (the matrix -- log W for MEG, W for GD -- kept as its
    eigendecomposition, and for dense instances as the matrix too; the
    instances' sum; the counters and bit generators) is one compiled object,
    :class:`streamfit.kernels.CappedState`, pickled with the estimator; read
    W through ``parameter_matrix()`` and ``parameter_eigenvalues_``.

    Notes
    -----
    **Changing parameters mid-stream** (``set_params`` between calls):
    ``eta``, ``n_components`` and ``random_state`` describe the run itself
    (MEG's epochs and the regret bound follow one rate policy): the next call
    refuses a changed one with a ValueError naming it, leaving the state as it
    was; ``fit`` starts afresh with the new value.

    **Cost per trial.** With vector instances, W_t + eta x x^T (GD) and
    log W_t + eta x x^T (MEG) are rank-one changes of a known
    eigendecomposition, and the projections act on eigenvalues only: the
    kernel keeps that decomposition and updates it as one merge step of
    divide and conquer does (deflation, LAPACK dlaed4's secular equation,
    Gu-Eisenstat eigenvectors, one n x K x K product, K <= n the entries
    deflation keeps), O(n K^2) instead of a full dsyevd; every
    ``FULL_EVERY``-th update (1000) is a full dsyevd, which bounds rounding
    drift. Measured (one BLAS thread, n = 500, k = 10): MEG (K ~ n) ~3x and
    GD (K ~ 30: its clipped zero eigenvalues are tied, so they deflate) ~40x
    faster per trial than a dsyevd per trial. Dense instances are not rank-one
    changes: they keep a full dsyevd every trial. The decisions are those of
    a dsyevd per trial up to rounding (W to ~1e-14), except that within a
    group of tied eigenvalues any orthonormal basis is W's, and the sampled
    projection may then pick a different one.

    **Interrupts, failures, threads.** A call plays whole trials on copies of
    the state (O(n^2), against a trial's O(n^3)). Ctrl-C, or any signal
    handler that raises, stops it before the next trial, and the trials played
    are kept, the generator having moved on by exactly their uniforms (one per
    trial); one trial -- at most a full eigendecomposition, ~0.5 s at
    n = 1000 -- cannot be interrupted. Any other failure (no memory; an
    eigendecomposition every LAPACK routine and Jacobi refuse, which only a
    non-finite parameter makes happen) leaves the estimator as before the
    call. Calls from several threads take turns (a second one waits for the
    first to end). Decisions are bit-identical
    for the same seed at a fixed BLAS thread count; across counts, to LAPACK's
    rounding.

    Examples
    --------
    >>> from streamfit import MatrixEGPCA
    >>> from streamfit.simulate import make_spiked_stream
    >>> X = make_spiked_stream(400, 30, n_spikes=2, random_state=0)
    >>> meg = MatrixEGPCA(2, random_state=0).partial_fit(X)
    >>> meg.components_.shape, meg.n_trials_
    ((2, 30), 400)
    >>> w = meg.parameter_eigenvalues_
    >>> bool(w.min() >= 0 and w.max() <= 1 and abs(w.sum() - 2) < 1e-10)
    True
    >>> bool(0 < meg.regret_ < meg.regret_bound())
    True
    """

    _algo = "meg"

    @property
    def n_restarts_(self) -> int:
        """Runs started afresh with eta="auto", counting the one the next trial
        begins: the doubling trick's epochs (after T trials, the powers of two
        in [2, T + 1]) plus the restarts of an epoch when the scale more than
        doubled."""
        return int(self._fitted().n_restarts_)

    def regret_bound(self, n_trials: int | None = None) -> float:
        """The regret bound for this estimator's eta after ``n_trials`` (default:
        the trials so far), at the largest scale L seen so far: with a fixed
        eta, k ln(n/k) / eta + eta B L^2 T (a theorem while eta L <= 1.79,
        where e^x <= 1 + x + x^2; inf beyond); with "auto", the doubling
        trick's 2 sum_j L (k ln(n/k) / tilde_j + tilde_j B len_j) + 2 B L."""
        state, T = self._bound_args(n_trials)
        L, n, k = state.scale_, state.n, state.k
        B = 1.0 if state.instances == "vector" else float(k)
        if T == 0 or k == n or L == 0:
            return 0.0
        D = k * np.log(n / k)
        if not isinstance(state.eta, str):
            eta = float(state.eta) * L          # in units of the scale
            return float(L * (D / eta + eta * B * T)) if eta <= 1.79 else float("inf")
        total, j = 2.0 * B * L, 0
        while 2 ** j <= T:
            length = min(2 ** j, T - 2 ** j + 1)
            tilde = min(0.5, np.sqrt(D / (B * 2 ** j)))
            total += 2.0 * L * (D / tilde + tilde * B * length)
            j += 1
        return float(total)


class MatrixGDPCA(_CappedSimplexPCA):
    """Online PCA by matrix Gradient Descent over the capped simplex (Arora,
    Cotter & Srebro 2013; Nie, Kotlowski & Warmuth 2016).

    W_{t+1} = Pi(W_t + eta_t X_t): a gradient step, then the Frobenius
    projection onto the capped simplex, which in the eigenbasis of
    W_t + eta_t X_t is w_i = clip(mu_i - theta, 0, 1) with theta solved exactly
    from sum w = k. W_1 = (k/n) I. Each trial eigendecomposes (LAPACK dsyevd,
    O(n^3)) and rebuilds W from whichever is smaller: its support or the
    clipped directions. Trials play a projection sampled from W_t;
    ``cumulative_gain_`` is the expected gain, ``realized_gain_`` the sampled
    one.

    Regret (online gradient descent; the capped simplex has Frobenius diameter
    D = sqrt(2 min(k, n - k)), gradients ||X_t||_F <= G): with a fixed eta,
    R_T <= D^2 / (2 eta) + eta G^2 T / 2, tuned R_T <= D G sqrt(T) -- for unit
    vectors sqrt(2 k T), the optimal order for vector instances.

    Parameters
    ----------
    n_components : int, default 1
        k, the rank of the projections played (the default, 1, is online
        rank-one PCA: the top direction; any k <= n_features may be given).
    eta : "auto" or float, default "auto"
        A float is a fixed learning rate. "auto" needs no horizon: the decaying
        eta_t = D / (G_t sqrt(t)), G_t the largest ||X_s||_F so far, with
        R_T <= D G sqrt(T) / 2 + D G sum_t 1 / (2 sqrt(t)) <= 1.5 D G sqrt(T)
        (the diameter is bounded, so no restarts are needed).
    random_state : None, int or numpy Generator
        Seeds the sampling of the played projections.

    Attributes
    ----------
    As for :class:`MatrixEGPCA` (without ``n_restarts_``).

    Notes
    -----
    As for :class:`MatrixEGPCA`: a changed ``eta``, ``n_components`` or
    ``random_state`` is refused by the next call (ValueError naming it);
    interrupts keep the whole trials played.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit import MatrixGDPCA
    >>> from streamfit.simulate import make_ftl_adversary
    >>> X = make_ftl_adversary(2000, 10, n_components=2)
    >>> gd = MatrixGDPCA(2, random_state=0).partial_fit(X)
    >>> bool(gd.regret_ < gd.regret_bound())
    True
    >>> P = gd.sample_projection()         # a rank-2 projection drawn from W
    >>> bool(np.allclose(P @ P, P) and round(np.trace(P)) == 2)
    True
    """

    _algo = "gd"

    def regret_bound(self, n_trials: int | None = None) -> float:
        """The regret bound for this estimator's eta after ``n_trials`` (default:
        the trials so far), at the largest ||X_t||_F = G seen so far: with a
        fixed eta, D^2 / (2 eta) + eta G^2 T / 2; with "auto",
        D G sqrt(T) / 2 + (D G / 2) sum_t 1/sqrt(t) <= D G (1.5 sqrt(T) - 0.5)."""
        state, T = self._bound_args(n_trials)
        G, n, k = state.max_frob_, state.n, state.k
        D = np.sqrt(2.0 * min(k, n - k))
        if T == 0 or G == 0 or D == 0:
            return 0.0
        if not isinstance(state.eta, str):
            eta = float(state.eta)
            return float(D * D / (2 * eta) + eta * G * G * T / 2)
        # sum_{t <= T} t^(-1/2) <= 1 + integral_1^T t^(-1/2) dt = 2 sqrt(T) - 1
        return float(D * G * (1.5 * math.sqrt(T) - 0.5))
