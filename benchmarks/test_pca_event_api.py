"""Online PCA one event at a time: learn_one / transform_one, one-row
partial_fit / transform, the state object's own calls and the river adapter
on dicts, against the same step written in NumPy and timed in the same run.

A consumer loop or a river pipeline feeds the learner one row at a time;
there a trial costs its exact top-k solve (n = 10: dsyevd on the 10 x 10
perturbed matrix) plus the call around it. The baseline is that trial in
NumPy -- the gain ||V x||^2 on the current basis, the rank-one update of the
cumulative matrix, then ``numpy.linalg.eigh`` of the perturbed matrix for the
next top-k -- so a ratio below 1 means our call costs less than the
arithmetic of one trial done with NumPy's own eigensolver. (river 0.26 has no
online PCA to compare with.) Contenders run in interleaved rounds (round r
rotates their order by r, so a change of load hits all alike); the figures
are medians of CPU time per row (``time.process_time``: single-threaded code
on a shared machine). One BLAS thread; the NumPy reference too.

- ``test_fpl_event_api``: PerturbedLeaderPCA (n = 10, k = 2) learn_one,
  partial_fit on a one-row array, the state object's learn_one
  (``est._state``, what ``streamfit.kernels.LeaderState`` hands a library),
  transform_one and transform on a one-row array; the river adapter's
  learn_one + transform_one on dicts. learn_one is also put against the
  least a Python loop does with a row (C += x x^T in NumPy).
- ``test_pca_families_learn_one``: learn_one of FTL, dropout, MEG and GD at
  the same size, against the same NumPy trial (a yardstick of the cost of a
  row at this size, not the families' own algorithms).

    pytest benchmarks/test_pca_event_api.py -s                  # timed
    pytest benchmarks/test_pca_event_api.py --benchmark-disable # smoke

The table prints in the terminal summary and (timed runs) goes to
.benchmarks/pca_event_api.txt; ratios are in each benchmark's extra_info.
"""
from __future__ import annotations

import numpy as np
import pytest

from streamfit import (DropoutPCA, FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA,
                       PerturbedLeaderPCA)

from ._timing import cpu_medians, record_ratios

N, K = 10, 2
TIMED = {"rows": 5_000, "rounds": 7}
SMOKE = {"rows": 200, "rounds": 2}
# issue 39's floor for FPL's learn_one at n = 10, k = 2, us a row: reported
# beside the measurement, not asserted (the machine is shared)
FLOOR_FPL_LEARN_ONE = 10.0


def _stream(rows, seed):
    # a spiked stream (decreasing scales), plus 200 rows to start the
    # estimators past their first decision, as a deployed learner is
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((rows + 200, N)) * np.linspace(3.0, 0.5, N)
    return [Z[i].copy() for i in range(rows)], Z[rows:]


def numpy_trial(zrows, seed=0):
    """The loop of FPL trials written in NumPy (fixed noise): gain on the
    current basis, C += x x^T, the next basis the top-k eigenvectors of
    C + sqrt(t + 1) N by numpy.linalg.eigh."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((N, N))
    noise = (noise + noise.T) / np.sqrt(2.0)
    C = np.zeros((N, N))
    V = np.eye(N)[:K]

    def run():
        nonlocal V
        gain = 0.0
        for t, z in enumerate(zrows):
            gain += float(np.sum((V @ z) ** 2))
            C.__iadd__(np.outer(z, z))
            V = np.linalg.eigh(C + np.sqrt(t + 1.0) * noise)[1][:, -K:].T
        return gain
    return run


@pytest.fixture(scope="module")
def table():
    return {}


@pytest.fixture(scope="module", autouse=True)
def pca_event_report(table, publish_table):
    yield
    if not table:
        return
    lines = [f"Online PCA one event at a time (n = {N}, k = {K}): CPU us a row (median of "
             f"interleaved rounds); the NumPy trial in the same run", "",
             f"{'call':<44}{'us/row':>9}{'numpy':>9}{'/ numpy':>9}"]
    for name, (ours, base) in table.items():
        lines.append(f"{name:<44}{ours:>9.2f}{base:>9.2f}{ours / base:>9.2f}")
    lines.append(f"\n(issue 39's floor for FPL learn_one: <= {FLOOR_FPL_LEARN_ONE:.0f} us)")
    publish_table("\n".join(lines), "pca_event_api.txt")


@pytest.mark.benchmark(group="pca event api")
def test_fpl_event_api(benchmark, sizes, table):
    n = sizes["rows"]
    zrows, warm = _stream(n, 3)
    ones = [z[None] for z in zrows]

    def fitted():
        return PerturbedLeaderPCA(n_components=K, random_state=0).fit(warm)

    lo, pf, tr, st = fitted(), fitted(), fitted(), fitted()._state.copy()
    tr_V = tr.components_
    C = np.zeros((N, N))
    contenders = {
        "learn_one": lambda: [lo.learn_one(z) for z in zrows],
        "partial_fit 1 row": lambda: [pf.partial_fit(x) for x in ones],
        "state learn_one": lambda: [st.learn_one(z) for z in zrows],
        "transform_one": lambda: [tr.transform_one(z) for z in zrows],
        "transform 1 row": lambda: [tr.transform(x) for x in ones],
        "numpy trial": numpy_trial(zrows),
        "numpy V @ x": lambda: [tr_V @ z for z in zrows],
        # the least a Python loop does with a row: C += x x^T alone
        "numpy outer-product row": lambda: [C.__iadd__(np.outer(z, z)) for z in zrows],
    }
    river = None
    try:
        import river  # noqa: F401  (the adapter needs river's base classes)

        from streamfit.river import PerturbedLeaderPCA as RiverPCA
    except ImportError:
        pass
    else:
        keys = [f"x{j}" for j in range(N)]
        dicts = [dict(zip(keys, z.tolist())) for z in zrows]
        river = RiverPCA(n_components=K, seed=0)
        for z in warm:
            river.learn_one(dict(zip(keys, z.tolist())))

        def adapter():
            for x in dicts:
                river.transform_one(x)
                river.learn_one(x)
        contenders["adapter transform_one+learn_one"] = adapter

    # the one-row paths play the same trials as a block of the same rows
    check = fitted()
    for z in zrows[:20]:
        check.learn_one(z)
    np.testing.assert_array_equal(check.components_, fitted().partial_fit(
        np.array(zrows[:20])).components_)

    med = cpu_medians(sizes["rounds"], contenders)
    benchmark.pedantic(contenders["learn_one"], rounds=1, iterations=1)
    us = {name: v / n * 1e6 for name, v in med.items()}
    base = us["numpy trial"]
    for name in ("learn_one", "partial_fit 1 row", "state learn_one",
                 "adapter transform_one+learn_one"):
        if name in us:
            table[f"FPL {name}"] = (us[name], base)
    for name in ("transform_one", "transform 1 row"):
        table[f"FPL {name} (vs numpy V @ x)"] = (us[name], us["numpy V @ x"])
    table["FPL learn_one (vs numpy outer-product row)"] = (us["learn_one"],
                                                          us["numpy outer-product row"])
    record_ratios(benchmark, {
        "ratio_speedup_learn_one_vs_numpy_trial": base / us["learn_one"],
        "ratio_speedup_partial_fit_one_row_vs_numpy_trial": base / us["partial_fit 1 row"],
        "ratio_time_learn_one_over_state": us["learn_one"] / us["state learn_one"],
        "ratio_time_partial_fit_one_row_over_learn_one":
            us["partial_fit 1 row"] / us["learn_one"],
        "ratio_time_transform_one_over_numpy_matvec": us["transform_one"] / us["numpy V @ x"],
        "ratio_time_learn_one_over_floor": us["learn_one"] / FLOOR_FPL_LEARN_ONE,
        "ratio_time_learn_one_over_numpy_row": us["learn_one"] / us["numpy outer-product row"],
        "ratio_speedup_adapter_vs_numpy_trial":
            None if river is None else base / us["adapter transform_one+learn_one"]})


FAMILIES = {"FTL": lambda: FollowTheLeaderPCA(K),
            "dropout": lambda: DropoutPCA(K, random_state=0),
            "MEG": lambda: MatrixEGPCA(K, random_state=0),
            "GD": lambda: MatrixGDPCA(K, random_state=0)}


@pytest.mark.benchmark(group="pca event api")
def test_pca_families_learn_one(benchmark, sizes, table):
    n = sizes["rows"]
    zrows, warm = _stream(n, 4)
    ests = {name: make().fit(warm) for name, make in FAMILIES.items()}
    contenders = {name: (lambda e=e: [e.learn_one(z) for z in zrows])
                  for name, e in ests.items()}
    contenders["numpy trial"] = numpy_trial(zrows)
    med = cpu_medians(sizes["rounds"], contenders)
    benchmark.pedantic(contenders["MEG"], rounds=1, iterations=1)
    us = {name: v / n * 1e6 for name, v in med.items()}
    base = us["numpy trial"]
    for name in FAMILIES:
        table[f"{name} learn_one"] = (us[name], base)
    record_ratios(benchmark, {f"ratio_speedup_{name.lower()}_learn_one_vs_numpy_trial":
                              base / us[name] for name in FAMILIES})
