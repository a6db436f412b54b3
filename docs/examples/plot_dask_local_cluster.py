"""
Quantile regression on a Dask LocalCluster
==========================================

:func:`~streamfit.dask.parallel_quantile_fit` fits one averaged online
quantile regression per partition of a Dask array, where the partition lives,
and combines them by their size-weighted mean; ``rounds=2`` restarts every
partition from that mean once, continuing each partition's clock. The workers
of a :class:`~distributed.LocalCluster` are processes, so a script must start
the cluster under ``if __name__ == "__main__":`` (without it, each worker
would start a cluster of its own: ``RuntimeError: Nanny failed to start``).
"""
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster

from streamfit import OnlineQuantileRegressor
from streamfit.dask import parallel_quantile_fit
from streamfit.simulate import make_linear_stream


def relative_error(coef, beta):
    return np.linalg.norm(coef - beta) / np.linalg.norm(beta)


def main():
    X, y, beta = make_linear_stream(200_000, 20, tau=0.5, random_state=0)
    # 8 partitions
    Xd, yd = da.from_array(X, chunks=25_000), da.from_array(y, chunks=25_000)
    # the same stream, fitted in one process
    single = OnlineQuantileRegressor(0.5, average=True).fit(X, y)
    errors = {"one process": relative_error(single.coef_, beta)}
    with LocalCluster(n_workers=2, threads_per_worker=1,
                      dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        for rounds in (1, 2, 3):
            fit = parallel_quantile_fit(Xd, yd, 0.5, rounds=rounds,
                                        client=client)
            errors[f"{rounds} round(s)"] = relative_error(fit.coef_, beta)
    print("partition sizes:", fit.partition_sizes_)
    for name, error in errors.items():
        print(f"{name:12s} relative error {error:.2e}")

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(list(errors), list(errors.values()),
           color=["0.5", "C0", "C0", "C0"])
    ax.set(ylabel="relative error of coef_", title="8 partitions on 2 workers")
    fig.tight_layout()
    plt.show()


if __name__ == "__main__":
    main()
