"""Online PCA by Follow the Perturbed Leader with Gaussian (GOE) noise, and
Follow the Leader.

Python validates and owns the state; ``streamfit._kernels._pca`` runs the whole
trial loop (play, gain, update, top-k) without the GIL.
"""
from __future__ import annotations

import numbers

import numpy as np

from .._kernels import _pca as _k
from .._validation import check_fitted, check_random_state, check_scalar, check_seed
from ._common import _OnlinePCA, _symmetric

__all__ = ["PerturbedLeaderPCA", "FollowTheLeaderPCA", "goe_matrix", "regret_bound",
           "auto_sigma"]

_STATE = {name: i for i, name in enumerate(_k.STATE_FIELDS)}
_NOISE = {"fixed": _k.NOISE_FIXED, "random_walk": _k.NOISE_RANDOM_WALK,
          "independent": _k.NOISE_INDEPENDENT}
_SOLVERS = ("auto", "krylov", "exact")
_KINDS = {"vector": _k.INSTANCE_VECTOR, "dense": _k.INSTANCE_DENSE}

def _max_iter(n, b):
    """Krylov iterations per solve before it falls back to LAPACK: about the
    flop ratio of a top-b dsyevr (tridiagonalisation, 4/3 n^3) to one LOBPCG
    iteration (the product S @ block, 2 n^2 b, plus QR, projection and
    rotations of the n x 3b basis, ~80 n b^2 at BLAS-2 speeds, counted as
    100 n b^2), within [3, 30]. At n = 1000, b = 15: 25 by the model, 24 by
    the clock (85 ms for dsyevr, 3.5 ms an iteration)."""
    ratio = (4 / 3 * n ** 3) / (2 * n * n * b + 100 * n * b * b)
    return int(min(30, max(3, round(ratio))))


def _block_size(n, k):
    # a few vectors beyond k, so that a near-tie at lambda_k does not stall the
    # captured objective (ALGORITHMS.md: block 15 for k = 10)
    return min(n, k + max(5, k // 2))


def goe_matrix(n, sigma=1.0, random_state=None):
    """A GOE matrix N = (G + G^T)/2 with G_ij ~ N(0, sigma^2).

    Only the n(n+1)/2 independent entries are drawn (diagonal N(0, sigma^2),
    off-diagonal N(0, sigma^2/2)), row by row along the lower triangle, with
    the ziggurat of ``numpy.random.Generator.standard_normal`` from the given
    generator's bit generator; the matrix is then symmetrised in place.

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
    rng = check_random_state(random_state)
    n = int(n)
    # rows start on 64-byte boundaries (when 8 divides n), so the kernel can
    # write the mirrored triangle in whole cache lines
    buf = np.empty(n * n + 8)
    start = (-buf.ctypes.data % 64) // 8
    out = buf[start:start + n * n].reshape(n, n)
    with rng.bit_generator.lock:
        _k.goe(out, float(sigma), rng.bit_generator.capsule)
    return out


def auto_sigma(n_features, n_components, *, instances="vector", scale=1.0, max_trace_sq=None):
    """The sigma that minimises the paper's final bound
    R <= r sqrt(2 T M / (pi sigma^2)) + k sqrt(n T sigma^2).

    ``instances="vector"``: x_t x_t^T with ||x_t||^2 <= scale (r = scale, M = scale^2),
    sigma^2 = scale^2 sqrt(2/pi) / (k sqrt(n)).
    ``instances="dense"``: PSD X_t with ||X_t||_2 <= scale and tr(X_t^2) <= max_trace_sq
    (default n scale^2, the paper's worst case), r = k scale,
    sigma^2 = scale sqrt(2 M / pi) / sqrt(n).

    Examples
    --------
    >>> from streamfit.pca import auto_sigma
    >>> round(auto_sigma(100, 4), 4)                     # (sqrt(2/pi) / 40) ** 0.5
    0.1412
    >>> round(auto_sigma(100, 4, instances="dense"), 4)  # (2/pi) ** 0.25
    0.8932
    """
    a, b = _bound_terms(n_features, n_components, instances, scale, max_trace_sq)
    return float(np.sqrt(a / b))


def regret_bound(n_trials, n_features, n_components, sigma, *, instances="vector",
                 scale=1.0, max_trace_sq=None):
    """The paper's regret bound a sqrt(T) / sigma + b sqrt(T) sigma for a given sigma
    (see :func:`auto_sigma` for the terms); at the auto sigma it is 2 sqrt(a b T).

    Examples
    --------
    >>> from streamfit.pca import auto_sigma, regret_bound
    >>> s = auto_sigma(100, 4)
    >>> round(regret_bound(10_000, 100, 4, s))     # 2 (2/pi)^(1/4) sqrt(k) n^(1/4) sqrt(T)
    1130
    >>> regret_bound(10_000, 100, 4, 2 * s) > regret_bound(10_000, 100, 4, s)
    True
    """
    a, b = _bound_terms(n_features, n_components, instances, scale, max_trace_sq)
    return float(np.sqrt(n_trials) * (a / sigma + b * sigma))


def _bound_terms(n, k, instances, scale, max_trace_sq):
    if instances == "vector":
        a = scale * scale * np.sqrt(2 / np.pi)
    elif instances == "dense":
        m = n * scale * scale if max_trace_sq is None else max_trace_sq
        a = k * scale * np.sqrt(2 * m / np.pi)
    else:
        raise ValueError(f"instances must be 'vector' or 'dense', got {instances!r}")
    return a, k * np.sqrt(n)


class _LeaderPCA(_OnlinePCA):
    """State handling shared by Follow the (Perturbed) Leader."""

    _noise_code = _k.NOISE_FIXED
    _STATE = _STATE
    _STATE_NAMES = ("state_", "perturbed_", "noise_", "cumulative_", "block_",
                    "n_features_in_", "n_components_", "instances_", "_fitted_noise",
                    "_rng", "_regret_cache")

    # -- parameters -------------------------------------------------------------
    def _check_params(self, n):
        k = self._check_n_components(n)
        if self.solver not in _SOLVERS:
            raise ValueError(f"solver must be one of {_SOLVERS}, got {self.solver!r}")
        check_scalar(self.tol, "tol", low=0, low_open=True)
        b = _block_size(n, k)
        if self.solver == "krylov" and 2 * b > n:
            raise ValueError(f"solver='krylov' needs n_features >= 2 * (n_components + "
                             f"{b - k}) = {2 * b}, got {n}; use solver='auto' or 'exact'")
        # "auto": Krylov when the block is small against n -- except with
        # independent noise, whose top-k jumps every trial, so that a warm start
        # costs more than it saves (measured at n = 500 and 1000)
        use_krylov = self.solver == "krylov" or (
            self.solver == "auto" and 4 * b <= n and self._noise_code != _k.NOISE_INDEPENDENT)
        return k, b, (_k.SOLVER_KRYLOV if use_krylov else _k.SOLVER_EXACT)

    def _sigma_params(self):
        return 0.0, 0.0             # (auto, value): overridden by FPL

    def _params(self, n, kind):
        k, b, solver = self._check_params(n)
        auto, value = self._sigma_params()
        return np.array([_KINDS[kind], self._noise_code, solver, auto, value, self.tol,
                         _max_iter(n, b), k], dtype=np.float64)

    # -- state ------------------------------------------------------------------
    def _initialize(self, n, kind, params):
        noise = self._noise_code
        k = int(params[7])
        b = _block_size(n, k)
        rng = check_random_state(getattr(self, "random_state", None))
        state = np.zeros(len(_k.STATE_FIELDS))
        S = np.zeros((n, n))
        N = np.zeros((n, n)) if noise == _k.NOISE_FIXED else np.zeros((0, 0))
        keep_c = noise in (_k.NOISE_RANDOM_WALK, _k.NOISE_INDEPENDENT)
        C = np.zeros((n, n)) if keep_c else np.zeros((0, 0))
        V = np.zeros((b, n))
        with rng.bit_generator.lock:
            saved = rng.bit_generator.state
            code = _k.initialize(state, params, S, N, C, V, rng.bit_generator.capsule)
            if code != _k.OK:
                rng.bit_generator.state = saved
        self._raise_for(code, fresh=True)
        self._rng = rng
        self.n_features_in_ = n
        self.n_components_ = k
        self.instances_ = kind
        self._fitted_noise = noise
        self.state_ = state
        self.perturbed_ = S
        self.noise_ = N
        self.cumulative_ = C
        self.block_ = V

    def _raise_for(self, code, fresh=False):
        if code == _k.OK:
            return
        if code == _k.ERR_NOMEM:
            raise MemoryError("the PCA kernel could not allocate its work space; "
                              "the estimator was left as it was before this call")
        if not fresh:
            # S and C are updated in place (copying them per call would cost as
            # much as a trial); a LAPACK failure mid-call leaves them ahead of the
            # rest of the state, so the estimator starts over rather than lie
            self._forget()
        raise RuntimeError(f"LAPACK failed in the top-k solve (code {code}); the partial "
                           f"update was discarded and the estimator reset (a failed fit "
                           f"keeps the previous fit)")

    def _prepare(self, n, kind):
        """Check the call against the parameters and the fitted state; return the
        kernel's parameter vector."""
        params = self._params(n, kind)
        if not self._check_continues(n, kind, int(params[7])):
            return params
        if self._noise_code != self._fitted_noise:
            raise ValueError("noise changed since the first call; refit a new estimator")
        return params

    def _run(self, kind, args, params):
        n = args[0].shape[-1]
        if not hasattr(self, "state_"):
            self._initialize(n, kind, params)
        if args[0].shape[0] == 0:
            return self
        # S and C are updated in place (made writable first: a read-only memory
        # map from joblib, say); the small state is updated on copies, taken
        # under the generator's lock like the rest of the call, and swapped in
        # on success
        for name in ("perturbed_", "cumulative_"):
            if not getattr(self, name).flags.writeable:
                setattr(self, name, getattr(self, name).copy())
        rng = self._rng
        if kind == "vector":
            X, scale = args
            trsq = scale        # unused: the vector bound needs ||x||^2 only
        else:
            Xs, scale, trsq = args
            X = Xs.reshape(Xs.shape[0], n * n)
        with rng.bit_generator.lock:
            state = self.state_.copy()
            V = self.block_.copy()
            code = _k.run(X, scale, trsq, state, params, self.perturbed_, self.noise_,
                          self.cumulative_, V, rng.bit_generator.capsule)
        self._raise_for(code)
        self.state_, self.block_ = state, V
        return self

    @property
    def components_(self):
        """(k, n) orthonormal rows: the subspace the next trial plays."""
        check_fitted(self, "state_")
        return self.block_[:self.n_components_].copy()

    @property
    def sigma_(self):
        """The noise scale the next decision uses (0 for Follow the Leader)."""
        return self._scalar("sigma")

    @property
    def gap_tolerance_(self):
        """The objective-gap tolerance of the last top-k solve."""
        return self._scalar("tol")

    @property
    def solver_stats_(self):
        """Top-k solver counters: solves (one per trial), products S @ block,
        fallbacks (Krylov solves that ran out of iterations and went to LAPACK),
        direct (solves sent straight to LAPACK after fallbacks: a back-off that
        doubles while Krylov keeps failing), the last estimated gap and the
        largest estimated gap / tolerance."""
        check_fitted(self, "state_")
        s = self.state_
        return {"solves": int(s[_STATE["solves"]]), "products": int(s[_STATE["products"]]),
                "fallbacks": int(s[_STATE["fallbacks"]]), "direct": int(s[_STATE["direct"]]),
                "last_gap": float(s[_STATE["gap"]]),
                "max_gap_ratio": float(s[_STATE["max_gap_ratio"]])}

    def cumulative_matrix(self):
        """sum_t X_t, the unperturbed cumulative instance matrix (full, symmetric)."""
        check_fitted(self, "state_")
        # by the noise fitted, not the (possibly since changed) parameter
        if self._fitted_noise == _k.NOISE_FIXED:
            return _symmetric(self.perturbed_ - self.state_[_STATE["s"]] * self.noise_)
        if self._fitted_noise == _k.NOISE_NONE:
            return _symmetric(self.perturbed_)
        return _symmetric(self.cumulative_)

    def perturbed_matrix(self):
        """S = X_<t + N_t, the matrix whose top-k eigenvectors are played next."""
        check_fitted(self, "state_")
        return _symmetric(self.perturbed_)

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
    n_components : int
        k, the rank of the projections played.
    sigma : "auto" or float, default "auto"
        Noise scale. "auto" minimises the paper's final bound
        R <= r sqrt(2 T M / (pi sigma^2)) + k sqrt(n T sigma^2), scaled to the
        data seen so far: for vector instances sigma^2 = L^2 sqrt(2/pi) / (k sqrt n)
        with L = max ||x_s||^2 (the paper's r = 1, M = 1 when ||x|| <= 1); for dense
        ones sigma^2 = Lambda sqrt(2 M / pi) / sqrt(n) with M = max tr(X_s^2) and
        Lambda = max min(||X_s||_F, max row sum |X_s|), an upper bound on the
        eigenvalues (the paper's sqrt(2/pi) when eigenvalues <= 1 and M = n).
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
        costs; "exact": LAPACK dsyevr every trial; "auto": Krylov when n >= 4 b,
        else exact, and always exact with independent noise (its top-k jumps
        every trial, so a warm start costs more than it saves).
    tol : float, default 0.01
        The Krylov solve stops when its estimate of the objective gap
        lambda_{1:k}(S_t) - tr(V^T S_t V) is below tol * c / (2 sqrt(t)), where
        R_T <= c sqrt(T) is the paper's bound at the sigma in use: the gaps then
        add at most tol times the bound over the run (Lemma 1 with an approximate
        leader). The estimate extrapolates the last two objective increases.
    random_state : None, int or numpy Generator
        Seeds the noise; the same seed gives the same decisions.

    Attributes
    ----------
    components_ : (k, n) array, the subspace the next trial plays
    cumulative_gain_, best_gain_, regret_ : float
        best_gain_ and regret_ need lambda_{1:k} of the cumulative matrix: one
        O(n^3) LAPACK call on first access after a call (then cached).
    n_trials_ : int
    sigma_ : float, the noise scale of the next decision
    solver_stats_ : dict, Krylov iterations, fallbacks and gap estimates

    Examples
    --------
    >>> from streamfit import PerturbedLeaderPCA
    >>> from streamfit.pca import regret_bound
    >>> from streamfit.simulate import make_spiked_stream
    >>> X = make_spiked_stream(2000, 50, n_spikes=3, random_state=0)   # ||x|| = 1
    >>> fpl = PerturbedLeaderPCA(3, random_state=0)
    >>> fpl = fpl.partial_fit(X[:1000]).partial_fit(X[1000:])           # a stream in blocks
    >>> fpl.components_.shape, fpl.n_trials_
    ((3, 50), 2000)
    >>> bool(0 < fpl.regret_ < regret_bound(2000, 50, 3, fpl.sigma_))
    True
    """

    def __init__(self, n_components, *, sigma="auto", noise="fixed", solver="auto",
                 tol=0.01, random_state=None):
        self.n_components = n_components
        self.sigma = sigma
        self.noise = noise
        self.solver = solver
        self.tol = tol
        self.random_state = random_state

    @property
    def _noise_code(self):
        if self.noise not in _NOISE:
            raise ValueError(f"noise must be one of {tuple(_NOISE)}, got {self.noise!r}")
        return _NOISE[self.noise]

    def _check_params(self, n):
        self._noise_code  # noqa: B018 - validates noise before it is used
        out = super()._check_params(n)
        self._sigma_params()
        check_seed(self.random_state)
        return out

    def _sigma_params(self):
        if isinstance(self.sigma, str):
            if self.sigma != "auto":
                raise ValueError(f"sigma must be 'auto' or a positive float, got {self.sigma!r}")
            return 1.0, 0.0
        check_scalar(self.sigma, "sigma", low=0, low_open=True)
        return 0.0, float(self.sigma)


class FollowTheLeaderPCA(_LeaderPCA):
    """Online PCA by Follow the Leader: play the top-k eigenvectors of X_<t.

    The paper's deterministic baseline (FPL with sigma = 0). Good on i.i.d.
    streams; an adversary can force regret linear in T (see
    :func:`streamfit.simulate.make_ftl_adversary`). Same solver, attributes and
    methods as :class:`PerturbedLeaderPCA`; the Krylov tolerance uses the bound
    of the "auto" sigma. The first trial plays the first k coordinate axes.

    Parameters
    ----------
    n_components : int
        k, the rank of the projections played.
    solver : {"auto", "krylov", "exact"}, default "auto"
        As for :class:`PerturbedLeaderPCA`.
    tol : float, default 0.01
        As for :class:`PerturbedLeaderPCA`, with c the bound's constant at the
        "auto" sigma.

    Examples
    --------
    >>> from streamfit import FollowTheLeaderPCA
    >>> from streamfit.simulate import make_ftl_adversary
    >>> X = make_ftl_adversary(3000, 10, n_components=2)
    >>> ftl = FollowTheLeaderPCA(2).partial_fit(X)
    >>> round(ftl.regret_ / ftl.n_trials_, 2)       # k / n per trial: linear regret
    0.2
    """

    _noise_code = _k.NOISE_NONE

    def __init__(self, n_components, *, solver="auto", tol=0.01):
        self.n_components = n_components
        self.solver = solver
        self.tol = tol
