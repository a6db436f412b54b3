"""Online PCA kernels: the estimators' state objects, GOE draws, a
warm-started top-k eigensolver, and the capped-simplex projections, mixture
decomposition and systematic sampling.

:class:`LeaderState` (Follow the (Perturbed) Leader), :class:`CappedState`
(MEG and GD) and :class:`DropoutState` are the compiled objects the
estimators themselves drive: a library's loop over their ``learn_one`` or
``learn`` costs what the estimator's does and gives its state bit for bit.
The other pieces are what :class:`streamfit.PerturbedLeaderPCA` and the
capped-simplex learners are built from, without an estimator around them:
each function checks its arguments once (shapes, dtypes, contiguity, state
layout), then runs the compiled kernel. An out-of-memory condition is a ``MemoryError``; the
eigen-solvers go down a chain of LAPACK routines (dsyevr, dsyevd, dsyev,
Jacobi; small matrices, n <= 6 b and n < 512, start at dsyevd, which is
cheaper there) that does not fail on a finite matrix.

Follow the Perturbed Leader's inner loop, with fixed noise N and sigma, is::

    N = goe(n, 1.0, rng)                         # one draw per run
    topk = TopK(n, k)
    topk.update(matrix=N, scale=sigma)           # S_1 = sigma N
    topk.solve()                                 # exact: the first decision
    for t, x in enumerate(stream, start=1):
        gain = np.sum((topk.vectors @ x) ** 2)   # play V_t, see x_t
        topk.update(vector=x)                    # S += x x^T
        topk.update(matrix=N, scale=(sqrt(t + 1) - sqrt(t)) * sigma)
        topk.solve(tol, hint=x, seed=t)          # warm-started from V_t

(``tests/kernels/test_pca_kernels.py`` runs it and gets PerturbedLeaderPCA's
projections.)
"""
from __future__ import annotations

import math

import numpy as np

from .._errors import ERR_NOMEM, raise_for
from .._kernels import _capped as _ck
from .._kernels import _pca_api as _api
from .._kernels._capped import CappedState
from .._kernels._dropout import DropoutState
from .._kernels._pca import LeaderState
from .._kernels._threads import call_holding, object_lock
from .._validation import (check_array as _array, check_bit_generator as _bit_generator,
                           check_integer as _int, check_k as _check_k,
                           check_nonempty_vector as _check_vector, check_real as _real)

__all__ = ["LeaderState", "CappedState", "DropoutState", "goe", "TopK",
           "default_block_size", "default_max_iter", "project_capped_simplex",
           "mixture_decomposition", "systematic_sample"]


def _aligned_square(n):
    # rows start on 64-byte boundaries when 8 divides n, so the GOE kernel
    # writes the mirrored triangle in whole cache lines
    buf = np.empty(n * n + 8)
    start = (-buf.ctypes.data % 64) // 8
    return buf[start:start + n * n].reshape(n, n)


# --- GOE -----------------------------------------------------------------------------

def goe(n, sigma=1.0, random_state=None, out=None):
    """A GOE matrix sigma (G + G^T)/2 with G_ij ~ N(0, 1).

    Only the n(n+1)/2 independent entries are drawn (diagonal N(0, sigma^2),
    off-diagonal N(0, sigma^2/2)), row by row along the lower triangle, with
    the ziggurat of ``numpy.random.Generator.standard_normal``; the matrix is
    exactly symmetric.

    Parameters
    ----------
    n : int >= 0
    sigma : float >= 0, default 1
    random_state : None, int, SeedSequence, numpy Generator or BitGenerator
        A Generator or BitGenerator is drawn from (under its lock), and its
        stream moves on by n(n+1)/2 normals.
    out : None or ndarray (n, n), float64, C-contiguous, writable
        Filled in place and returned.

    Returns
    -------
    ndarray of shape (n, n)

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.kernels import goe
    >>> rng = np.random.default_rng(0)
    >>> N = goe(4, 2.0, rng)
    >>> bool(np.array_equal(N, N.T))
    True
    >>> # the same 4 * 5 / 2 draws
    >>> z = np.random.default_rng(0).standard_normal(10)
    >>> bool(N[0, 0] == 2.0 * z[0]
    ...      and np.isclose(N[1, 0], 2.0 * z[1] / np.sqrt(2)))
    True
    """
    n = _int(n, "n", 0)
    sigma = _real(sigma, "sigma", 0)
    bitgen = _bit_generator(random_state)
    if out is None:
        out = _aligned_square(n)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (n, n)
              and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError(f"out must be a writable C-contiguous float64 array of shape "
                         f"({n}, {n})")
    # the generator's lock taken in compiled code: a KeyboardInterrupt on a
    # Python with-statement's exit line would leave it held for good
    call_holding(bitgen.lock, _api.goe, out, sigma, bitgen.capsule)
    return out


# --- top-k ------------------------------------------------------------------------------

def default_block_size(n, k):
    """The block TopK (and PerturbedLeaderPCA) solves with: a few vectors
    beyond k, min(n, k + max(5, k // 2)), so that a near-tie at lambda_k does
    not stall the captured objective.

    Examples
    --------
    >>> from streamfit.kernels import default_block_size
    >>> default_block_size(1000, 10), default_block_size(8, 5)
    (15, 8)
    """
    n = _int(n, "n", 1)
    k = _int(k, "k", 1, n)
    return min(n, k + max(5, k // 2))


def default_max_iter(n, b):
    """Krylov iterations per solve before it goes to LAPACK: about the flop
    ratio of a top-b dsyevr (tridiagonalisation, 4/3 n^3) to one iteration
    (the product S @ block, 2 n^2 b, plus QR, projection and rotations of the
    n x 3b basis, ~100 n b^2), within [3, 30]. At n = 1000, b = 15: 25 by the
    model, 24 by the clock.

    Examples
    --------
    >>> from streamfit.kernels import default_max_iter
    >>> default_max_iter(1000, 15), default_max_iter(50, 7)
    (25, 3)
    """
    n = _int(n, "n", 1)
    b = _int(b, "b", 1, n)
    ratio = (4 / 3 * n ** 3) / (2 * n * n * b + 100 * n * b * b)
    return int(min(30, max(3, round(ratio))))


# TopK's attributes, as pickled; Krylov iterations a solve may be asked for
_TOPK_FIELDS = {"n", "k", "block", "max_iter", "_S", "_V", "_values", "_state", "_bound"}
_MAX_ITER = _api.TOPK_MAX_ITER

# the largest |S| entry the cheap overflow check lets through without a
# trial on a copy (leaves room for the rounding of the fused updates)
_SAFE = 2.0 ** 1020


class TopK:
    """The top-k eigenpairs of a symmetric matrix that changes by low-rank
    terms between solves, warm-started from the previous solve.

    TopK holds the matrix S (n x n, symmetric; only its lower triangle is
    stored and updated) and a block V of b >= k orthonormal rows, the top-b
    eigenvector estimates. :meth:`update` adds a rank-one, rank-m or dense
    symmetric term; :meth:`solve` brings V up to date: exactly (the LAPACK
    chain dsyevr -> dsyevd -> dsyev -> Jacobi, from dsyevd when n <= 6 b and
    n < 512) on the first solve or with
    ``tol=0``, else by block Krylov (LOBPCG's Rayleigh-Ritz on [V, S V - V
    Theta, previous step]) from the previous V until its estimate of the
    objective gap lambda_{1:k}(S) - tr(V_k S V_k^T) is below ``tol``, going to
    LAPACK when that takes more than ``max_iter`` iterations (and, by a
    back-off that doubles while Krylov keeps failing, for the next few
    solves). A solve costs one product S @ block per iteration, O(n^2 b),
    against LAPACK's O(n^3): it pays when S moves little between solves.

    Pickles with its matrix, block and counters; resumes bit-identically.

    Parameters
    ----------
    n : int >= 1
    k : int in [1, n]
        The rank whose captured objective the solve targets.
    block : int in [k, n], optional
        b, default :func:`default_block_size`.
    max_iter : int >= 0, optional
        Default :func:`default_max_iter`.

    Attributes
    ----------
    values : ndarray (k,)
        The Ritz values of the last solve, descending (NaN before one).
    vectors : ndarray (k, n)
        Their vectors, orthonormal rows.
    stats : dict
        Counters: solves, products S @ block, fallbacks (Krylov solves that
        went to LAPACK), direct (solves sent to LAPACK by the back-off),
        eig_fallbacks (eigenproblems that needed a later LAPACK routine),
        kept (solves where every routine failed, a non-finite S: V kept),
        the last tolerance and estimated gap.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.kernels import TopK
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((200, 200)); A = (A + A.T) / 2
    >>> topk = TopK(200, 3)
    >>> topk.update(matrix=A)
    >>> values, vectors = topk.solve()          # exact, the first time
    >>> bool(np.allclose(values, np.linalg.eigvalsh(A)[::-1][:3]))
    True
    >>> x = rng.standard_normal(200)
    >>> topk.update(vector=x, scale=0.01)                     # A + 0.01 x x^T
    >>> values, vectors = topk.solve(1e-8)                    # warm-started Krylov
    >>> exact = np.linalg.eigvalsh(A + 0.01 * np.outer(x, x))[::-1][:3].sum()
    >>> bool(exact - values.sum() < 1e-8 and topk.stats["products"] > 0)
    True
    """

    def __init__(self, n, k, *, block=None, max_iter=None):
        self.n = _int(n, "n", 1)
        self.k = _int(k, "k", 1, self.n)
        self.block = (default_block_size(self.n, self.k) if block is None
                      else _int(block, "block", self.k, self.n))
        self.max_iter = (default_max_iter(self.n, self.block) if max_iter is None
                         else _int(max_iter, "max_iter", 0, _MAX_ITER))
        self._S = np.zeros((self.n, self.n))
        self._V = np.zeros((self.block, self.n))
        self._values = np.full(self.block, np.nan)
        self._state = np.zeros(1, _api.TOPK_STATE_DTYPE)
        # an upper bound on max |S| (lower triangle), grown by each update's
        # own bound, so that the overflow check costs no pass over S
        self._bound = 0.0

    def update(self, *, vector=None, rows=None, matrix=None, scale=1.0):
        """Add a symmetric term to S: ``scale * outer(vector, vector)``,
        ``scale * rows.T @ rows`` (rows (m, n)) or ``scale * matrix``
        (symmetric (n, n)); exactly one of the three.

        Parameters
        ----------
        vector : array-like (n,), optional
        rows : array-like (m, n), optional
        matrix : array-like (n, n), symmetric, optional
        scale : float, default 1

        Raises
        ------
        ValueError
            If the term is not finite, or if adding it would overflow S in
            float64 (S is then left as it was).

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit.kernels import TopK
        >>> topk = TopK(3, 1)
        >>> topk.update(rows=np.eye(3)[:2], scale=2.0)
        >>> topk.update(vector=[0.0, 0.0, 1.0])
        >>> topk.matrix.diagonal().tolist()
        [2.0, 2.0, 1.0]
        """
        return call_holding(object_lock(self), self._update, vector, rows, matrix, scale)

    def _check_arrays(self):
        # the sizes, the state record and the arrays beside it, as the
        # compiled kernels take them: attributes a caller may have set or
        # replaced (a few us a call)
        n = _int(self.n, "TopK's n", 1)
        k = _int(self.k, "TopK's k", 1, n)
        b = _int(self.block, "TopK's block", k, n)
        _int(self.max_iter, "TopK's max_iter", 0, _MAX_ITER)
        st = self._state
        if not (isinstance(st, np.ndarray) and st.dtype == _api.TOPK_STATE_DTYPE
                and st.shape == (1,)):
            raise ValueError("TopK's _state must be its one-record array of this version's "
                             "layout (a corrupted state?)")
        _api.check_topk_state(st)
        for name, shape in (("_S", (n, n)), ("_V", (b, n)), ("_values", (b,))):
            a = getattr(self, name)
            if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.shape == shape
                    and a.flags.c_contiguous and a.flags.writeable):
                raise ValueError(f"TopK's {name} must be a writable C-contiguous float64 "
                                 f"array of shape {shape}, got "
                                 f"{getattr(a, 'dtype', type(a).__name__)} of shape "
                                 f"{getattr(a, 'shape', None)} (a corrupted state?)")

    def _update(self, vector, rows, matrix, scale):
        self._check_arrays()
        given = [a is not None for a in (vector, rows, matrix)]
        if sum(given) != 1:
            raise ValueError("update needs exactly one of vector, rows and matrix")
        scale = _real(scale, "scale")
        if vector is not None:
            name, term = "vector", _array(vector, "vector", (self.n,))[None]
        elif rows is not None:
            name, term = "rows", _array(rows, "rows", (None, self.n))
        else:
            name = "matrix"
            term = _array(matrix, "matrix", (self.n, self.n), symmetric=True)
        with np.errstate(over="ignore"):
            # |scale x_i x_j| <= (|scale| max|x|) max|x|, as the kernel's fused
            # (scale x_i) x_j; summed over rows; |scale| max|A| for a matrix
            # (max and -min per row: no |term| copy, n x n for a matrix)
            big = (np.maximum(term.max(axis=1), -term.min(axis=1)) if term.size
                   else np.zeros(0))
            inc = (float(np.sum(abs(scale) * big * big)) if name != "matrix"
                   else abs(scale) * float(big.max(initial=0.0)))
        bound = self._bound
        apply = _api.sym_add if name == "matrix" else _api.sym_update
        if math.isfinite(bound + inc) and bound + inc <= _SAFE:
            apply(self._S, term, scale)
            self._bound = bound + inc
            return
        # the bound says it might overflow: try it on a copy, keep S if not
        S = self._S.copy()
        apply(S, term, scale)
        exact = self._max_abs(S)
        if not math.isfinite(exact):
            raise ValueError(f"update: scale * {name}'s term would overflow S (float64): "
                             f"max |S| is {self._max_abs(self._S):.3g}, the term's bound "
                             f"{inc:.3g}; rescale {name} or scale. S is unchanged.")
        self._S[...] = S
        self._bound = exact

    @staticmethod
    def _check_block(V, name):
        # Krylov starts from the previous solve's block and relies on its
        # rows being orthonormal: from a block edited to other finite values
        # it returns wrong values without an error. O(b^2 n), against the
        # O(n^2 b) of each iteration.
        if not (V.shape[0] and np.isfinite(V).all()):
            raise ValueError(f"{name} holds NaN or inf (a corrupted or foreign state?)")
        gap = float(np.abs(V @ V.T - np.eye(V.shape[0])).max())
        if not gap <= 1e-6:
            raise ValueError(f"{name}'s rows must be orthonormal (max |V V^T - I| = "
                             f"{gap:.3g}; a corrupted or foreign state?)")

    @staticmethod
    def _max_abs(S):
        with np.errstate(invalid="ignore"):
            return float(np.abs(np.tril(S)).max(initial=0.0))

    def solve(self, tol=0.0, *, hint=None, seed=None):
        """Bring the block up to date with S.

        Parameters
        ----------
        tol : float >= 0, default 0
            The objective gap the warm-started solve may leave; 0 (and the
            first solve, which has nothing to start from) solves exactly.
        hint : array-like (n,), optional
            A direction to add to the first Krylov iteration (FPL passes the
            trial's data x_t: a direction the leader may just have turned to).
        seed : int >= 0, optional
            Seeds the pseudo-random directions that replace residual
            directions at rounding level (default: the number of solves so far
            plus one, as PerturbedLeaderPCA's trial count).

        Returns
        -------
        values : ndarray (k,), descending
        vectors : ndarray (k, n), orthonormal rows
        """
        return call_holding(object_lock(self), self._solve, tol, hint, seed)

    def _solve(self, tol, hint, seed):
        self._check_arrays()
        tol = _real(tol, "tol", 0)
        if hint is not None:
            hint = _array(hint, "hint", (self.n,))
        st = self._state[0]
        seed = int(st["solves"]) + 1 if seed is None else _int(seed, "seed", 0)
        krylov = tol > 0 and st["solves"] > 0
        if krylov:
            self._check_block(self._V, "the block _V")
        code = _api.topk_solve(self._S, self._V, self._state, self._values, self.k,
                               self.max_iter, tol, hint, seed, krylov)
        raise_for(code, "TopK.solve")
        return self.values, self.vectors

    def __getstate__(self):
        # the state layout belongs to this API version (streamfit.kernels);
        # taken under the lock: a copy between two calls, never during one
        return call_holding(object_lock(self), self._getstate)

    def _getstate(self):
        from . import API_VERSION
        state = {key: (value.copy() if isinstance(value, np.ndarray) else value)
                 for key, value in self.__dict__.items() if key != "_lock"}
        return {**state, "api_version": API_VERSION}

    def __setstate__(self, state):
        from . import API_VERSION
        if not isinstance(state, dict):
            raise ValueError("the pickled TopK's state is not a dict (a corrupted or foreign "
                             "pickle?)")
        state = dict(state)
        version = state.pop("api_version", None)
        if version != API_VERSION:
            raise ValueError(f"this TopK was pickled with streamfit.kernels API version "
                             f"{version}, this streamfit has version {API_VERSION}")
        if set(state) - {"_bound"} != _TOPK_FIELDS - {"_bound"}:
            raise ValueError(f"the pickled TopK has fields {sorted(state)}, expected "
                             f"{sorted(_TOPK_FIELDS)} (a corrupted or foreign pickle?)")
        if state.get("_state") is None or state["_state"].dtype != _api.TOPK_STATE_DTYPE:
            raise ValueError("the pickled TopK's state does not have this version's layout")
        n = _int(state["n"], "the pickled TopK's n", 1)
        k = _int(state["k"], "the pickled TopK's k", 1, n)
        b = _int(state["block"], "the pickled TopK's block", k, n)
        _int(state["max_iter"], "the pickled TopK's max_iter", 0, _MAX_ITER)
        for name, shape in (("_S", (n, n)), ("_V", (b, n)), ("_values", (b,)),
                            ("_state", (1,))):
            a = state[name]
            if not isinstance(a, np.ndarray) or a.shape != shape or \
                    a.dtype != (np.float64 if name != "_state" else _api.TOPK_STATE_DTYPE):
                raise ValueError(f"the pickled TopK's {name} must be an array of shape "
                                 f"{shape}, got {getattr(a, 'shape', type(a).__name__)} "
                                 f"(a corrupted or foreign pickle?)")
        if not (np.isfinite(state["_S"]).all() and np.isfinite(state["_V"]).all()):
            raise ValueError("the pickled TopK's S or block holds NaN or inf (a corrupted or "
                             "foreign pickle?)")
        _api.check_topk_state(state["_state"])
        if state["_state"][0]["solves"] > 0:
            self._check_block(state["_V"], "the pickled TopK's block _V")
        # the overflow check's bound, from S itself: a pickle may lower it
        state["_bound"] = self._max_abs(state["_S"])
        state = {key: (value.copy() if isinstance(value, np.ndarray) else value)
                 for key, value in state.items()}
        self.__dict__.update(state)

    @property
    def values(self):
        return self._values[:self.k].copy()

    @property
    def vectors(self):
        return self._V[:self.k].copy()

    @property
    def matrix(self):
        """S, full and symmetric (a copy)."""
        low = np.tril(self._S)
        return low + np.tril(low, -1).T

    @property
    def stats(self):
        st = self._state[0]
        return {name: (float(st[name]) if st.dtype[name].kind == "f" else int(st[name]))
                for name in st.dtype.names}


# --- the capped simplex: projections, decomposition, sampling -----------------

def project_capped_simplex(v, k, *, divergence="euclidean"):
    """Project v onto the capped simplex {w : 0 <= w_i <= 1, sum w = k}.

    ``divergence="euclidean"`` (GD): the Euclidean projection
    w_i = clip(v_i - theta, 0, 1), with theta solved exactly from sum w = k by
    walking the sorted breakpoints {v_i, v_i - 1} of the piecewise linear
    sum (O(n log n)).

    ``divergence="entropy"`` (MEG): the relative-entropy projection of v >= 0
    (Warmuth & Kuzmin's capping), w_i = min(1, c v_i) with sum w = k: the
    largest entries are capped at 1 and the rest rescaled. v needs at least k
    positive entries.

    Applied to the eigenvalues of a symmetric matrix, these are the matrix
    projections (both divergences are unitarily invariant).

    Examples
    --------
    >>> from streamfit.kernels import project_capped_simplex
    >>> project_capped_simplex([0.2, 1.9, 0.5, 0.1], 2).round(3).tolist()
    [0.267, 1.0, 0.567, 0.167]
    >>> project_capped_simplex([1.0, 8.0, 2.0, 1.0], 2,
    ...                        divergence="entropy").tolist()
    [0.25, 1.0, 0.5, 0.25]
    """
    v = _check_vector(v, "v")
    k = _check_k(k, v.shape[0])
    order = np.argsort(v, kind="stable")
    sorted_v = np.ascontiguousarray(v[order])
    out = np.empty_like(sorted_v)
    if divergence == "euclidean":
        _ck.project_euclidean(sorted_v, k, out)
    elif divergence == "entropy":
        if sorted_v[0] < 0:
            raise ValueError("v must be non-negative for divergence='entropy'")
        if np.count_nonzero(sorted_v) < k:
            raise ValueError(f"v must have at least k = {k} positive entries for "
                             f"divergence='entropy', got {np.count_nonzero(sorted_v)}")
        with np.errstate(divide="ignore"):
            _ck.project_entropy(np.log(sorted_v), k, out)
    else:
        raise ValueError(f"divergence must be 'euclidean' or 'entropy', got {divergence!r}")
    w = np.empty_like(out)
    w[order] = out
    return w


def _check_capped(w, k, name="w"):
    w = _check_vector(w, name)
    k = _check_k(k, w.shape[0])
    tol = 1e-9 * max(k, 1)
    if w.min() < -tol or w.max() > 1 + tol:
        raise ValueError(f"{name} must lie in [0, 1], got entries in "
                         f"[{w.min():.3g}, {w.max():.3g}]")
    if abs(w.sum() - k) > tol:
        raise ValueError(f"{name} must sum to k = {k}, got {w.sum():.12g}")
    return np.clip(w, 0.0, 1.0), k


def mixture_decomposition(w, k):
    """Warmuth & Kuzmin's decomposition of a capped vector into k-subsets.

    For 0 <= w_i <= 1 with sum w = k, returns ``weights`` (m,) summing to 1 and
    ``subsets`` (m, k) of indices with sum_j weights[j] 1[subsets[j]] = w, with
    m <= n + 1 corners, in O(n^2). Each round takes the entries at the mean
    sum(w)/k, fills up to k with the largest others, and removes as much weight
    as keeps every entry below the new mean. Applied to the eigenvalues of W,
    W = sum_j weights[j] P_j with P_j the projection onto eigenvectors
    ``subsets[j]``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.kernels import mixture_decomposition
    >>> w = np.array([0.9, 0.6, 0.3, 0.2])
    >>> weights, subsets = mixture_decomposition(w, 2)
    >>> bool(np.isclose(weights.sum(), 1.0))
    True
    >>> cover = np.zeros(4)
    >>> for p, s in zip(weights, subsets):
    ...     cover[s] += p
    >>> bool(np.allclose(cover, w))
    True
    """
    w, k = _check_capped(w, k)
    order = np.ascontiguousarray(np.argsort(-w, kind="stable"), dtype=np.intp)
    n = w.shape[0]
    weights = np.empty(n + 2)
    subsets = np.empty((n + 2, k), dtype=np.intc)
    m = _ck.mixture(w, order, k, weights, subsets)
    if m < 0:       # pragma: no cover - allocation failure
        raise_for(ERR_NOMEM, "mixture_decomposition")
    subsets = subsets[:m].astype(np.intp)
    if (subsets < 0).any():     # pragma: no cover - w's mass is not k after all
        raise ValueError("w could not be decomposed: its entries do not sum to k")
    return weights[:m].copy(), subsets


def systematic_sample(w, k, *, size=None, random_state=None):
    """Sample k distinct indices with P(i is taken) = w_i, for 0 <= w_i <= 1 with
    sum w = k, by systematic sampling: one uniform u, then the points
    u, u + 1, ..., u + k - 1 fall in the intervals of the cumulative sums of w.
    O(n) per sample. Returns an int array (k,) or (size, k), indices ascending.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.kernels import systematic_sample
    >>> w = np.array([0.9, 0.6, 0.3, 0.2])
    >>> draws = systematic_sample(w, 2, size=20000, random_state=0)
    >>> draws.shape
    (20000, 2)
    >>> freq = np.bincount(draws.ravel(), minlength=4) / 20000
    >>> bool(np.abs(freq - w).max() < 0.02)
    True
    """
    w, k = _check_capped(w, k)
    if isinstance(random_state, np.random.Generator):
        rng = random_state
    else:
        rng = np.random.Generator(_bit_generator(random_state))
    if size is not None:
        size = _int(size, "size", 0)
    u = np.ascontiguousarray(rng.random(1 if size is None else size))
    out = np.empty((u.shape[0], k), dtype=np.intc)
    _ck.systematic(w, k, u, out)
    out = out.astype(np.intp)
    return out[0] if size is None else out
