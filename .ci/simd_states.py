"""Fitted states for comparing two builds bit for bit (.ci/run, stage 5).

    python .ci/simd_states.py save DIR          # fit, write DIR/<name>.npy and DIR/paths.json
    python .ci/simd_states.py compare DIR1 DIR2 # every array equal bit for bit, or exit 1

The fits reach every loop of _dense.h (single, batch, averaged and
plug-in-intercept fits, float32 rows, several quantiles at once: the
multi-quantile pass), _skinny.h's panel kernels directly
(the dispatch and the portable kernels, shapes with every edge), and FPL
(its Krylov products). Run under `qemu-x86_64 -cpu <a CPU without FMA or
AVX-512>`, a vector build takes its "default" clones and portable panel
kernels -- the path a portable build must equal bit for bit; both builds
run under the same CPU model so that BLAS and LAPACK run the same code too.
"""
import json
import pathlib
import sys

import numpy as np


def fits():
    from streamfit import (OnlineLeastSquaresRegressor, OnlineQuantileRegressor,
                           PerturbedLeaderPCA)
    from streamfit.simulate import make_linear_stream, make_spiked_stream

    out = {}
    for d in (13, 100):
        X, y, _ = make_linear_stream(1500, d, random_state=d)
        cases = {
            "single": dict(),
            "average": dict(average=True),
            "batch": dict(mode="batch", batch_size=16),
            "multi": dict(tau=[0.1, 0.5, 0.9]),
            "multi_average": dict(tau=[0.25, 0.75], average=True),
        }
        for name, kw in cases.items():
            for dtype in (np.float64, np.float32):
                est = OnlineQuantileRegressor(**kw)
                Xd = X.astype(dtype)
                est.partial_fit(Xd[:700], y[:700]).partial_fit(Xd[700:], y[700:])
                key = f"qr_{name}_d{d}_{np.dtype(dtype).name}"
                out[key + "_coef"] = np.asarray(est.coef_)
                out[key + "_intercept"] = np.atleast_1d(est.intercept_)
                out[key + "_loss"] = np.atleast_1d(est.cumulative_loss_)
        ls = OnlineLeastSquaresRegressor().fit(X, y)
        out[f"ls_d{d}_coef"] = ls.coef_
    for n in (40, 400):
        X = make_spiked_stream(30, n, random_state=n)
        fpl = PerturbedLeaderPCA(3, random_state=0).partial_fit(X)
        out[f"fpl_n{n}_components"] = fpl.components_
        out[f"fpl_n{n}_gain"] = np.atleast_1d(fpl.cumulative_gain_)
    out.update(kernels())
    return out


def kernels():
    """_skinny.h's kernels and _dense.h's loops on fixed inputs (the _simd
    test entries; a build without them gives none)."""
    try:
        from streamfit._kernels import _simd
    except ImportError:
        return {}
    out = {}
    rng = np.random.default_rng(7)
    for w, m, k in [(1, 1, 1), (7, 3, 5), (13, 15, 37), (128, 15, 300), (130, 16, 41)]:
        for kind in ("tn", "nn"):
            rows_a, cols_a = (k, w) if kind == "tn" else (w, k)
            lda, ldb, ldc = rows_a + 3, k + 2, w + 1
            A = rng.standard_normal(lda * cols_a)
            B = rng.standard_normal(ldb * m)
            for path in ("auto", "portable"):
                C = rng.standard_normal(ldc * m)
                _simd.gemm(kind, w, m, k, 0.75, A, lda, B, ldb, C, ldc, path=path)
                out[f"gemm_{kind}_{w}_{m}_{k}_{path}"] = C
        A = rng.standard_normal((w + 2) * w)
        B = rng.standard_normal((w + 1) * m)
        C = np.zeros((w + 3) * m)
        _simd.symm_diag(w, m, 1.5, A, w + 2, B, w + 1, C, w + 3, path="portable")
        out[f"symm_diag_{w}_{m}"] = C
    for n in (0, 1, 7, 8, 9, 23, 100):
        x, w, z = (rng.standard_normal(n) for _ in range(3))
        out[f"dot_{n}"] = np.array(_simd.dot2(x, w))
        w2 = w.copy()
        out[f"axpy_dot2_{n}"] = np.array(_simd.axpy_dot2(-0.3, x, w2, z))
        out[f"axpy_dot2_w_{n}"] = w2
        wbar, xbar, wwbar = (rng.standard_normal(n) for _ in range(3))
        out[f"plug_in_{n}"] = np.array(_simd.plug_in_pass(0.2, 0.3, x, w, wbar, xbar, wwbar))
        out[f"plug_in_means_{n}"] = np.concatenate([wbar, xbar, wwbar])
        s = rng.standard_normal(n)
        _simd.row_update(s, 0.7, x, -1.3, z)
        out[f"row_update_{n}"] = s
    return out


def save(directory):
    try:
        from streamfit._kernels import _simd
        paths = _simd.paths()
    except ImportError:
        paths = {}
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    states = fits()
    for name, value in states.items():
        np.save(directory / f"{name}.npy", value)
    (directory / "paths.json").write_text(json.dumps(paths))
    print(f"{len(states)} arrays to {directory}; paths {paths}")


def compare(a, b):
    a, b = pathlib.Path(a), pathlib.Path(b)
    names = sorted(p.name for p in a.glob("*.npy"))
    other = sorted(p.name for p in b.glob("*.npy"))
    if names != other:
        print(f"different arrays: {sorted(set(names) ^ set(other))}")
        return 1
    bad = []
    for name in names:
        x, y = np.load(a / name), np.load(b / name)
        if x.shape != y.shape or x.tobytes() != y.tobytes():
            bad.append(name)
    print(f"{a} {json.loads((a / 'paths.json').read_text())}")
    print(f"{b} {json.loads((b / 'paths.json').read_text())}")
    print(f"{len(names) - len(bad)} of {len(names)} arrays bit-identical")
    for name in bad:
        print(f"  differs: {name}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "save":
        save(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
