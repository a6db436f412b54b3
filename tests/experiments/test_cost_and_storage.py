"""Helpers of pca-cost (where FPL becomes the cheaper one) and qr-thm8
(Theorem 8's phase-one length, the offline rate)."""
import numpy as np

from streamfit.experiments.pca_cost import crossover, threads_in_use
from streamfit.experiments.qr_storage import offline_floor, theorem_switch


def test_crossover_is_where_fpl_stays_cheaper():
    sizes = (50, 100, 200, 500)
    assert crossover(sizes, [1, 1, 1, 1], [2, 2, 2, 2]) == (50, None)
    assert crossover(sizes, [1, 1, 1, 1], [0.5, 2, 0.5, 2]) == (500, 200)
    assert crossover(sizes, [1, 1, 1, 1], [0.5, 0.5, 2, 2]) == (200, 100)
    assert crossover(sizes, [1, 1, 1, 1], [2, 2, 2, 0.5]) == (None, 500)


def test_threads_are_named_with_their_counts():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        text = threads_in_use()
    assert "1 thread(s)" in text


def test_theorem_switch_is_where_the_certificate_reaches_8_gamma():
    # (1 - 0.01)^t * 20 gamma <= 8 gamma  <=>  t >= log(2.5) / -log(0.99) = 91.17
    assert theorem_switch(20.0, 1.0) == 92
    assert theorem_switch(20.0, 1.0, decay=0.1) == 9


def test_offline_floor_falls_like_one_over_sqrt_n():
    f = offline_floor(0.5, 100, [1000, 4000], 1.0)
    assert np.isclose(f[0] / f[1], 2.0)
