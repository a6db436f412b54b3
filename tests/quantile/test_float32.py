"""float32 streams: in mode "single" with one tau the kernel
reads float32 rows as they are, widens each exactly in the pass that reads it
and runs the float64 arithmetic on it, so every result must be bit-identical to
the same rows given as float64, whatever the chunking of the stream into
calls, the weights, the schedule or the options; and no float64 copy of the
block may be made. Several taus read float32 rows alike. The modes that still
convert once are checked against the same reference."""
import pickle
import signal
import tracemalloc

import numpy as np
import pytest

from streamfit import OnlineLeastSquaresRegressor, OnlineQuantileRegressor
from streamfit.kernels import LinearSGD
from streamfit.schedules import ConstantSchedule, InverseTimeSchedule, StatisticalSchedule
from streamfit.simulate import make_linear_stream

from ._cases import SqrtSchedule, state_bytes, stopped_at


def short():
    # a short warm-up and window: a few hundred rows reach every phase
    return StatisticalSchedule(n_warmup=20, window=32)


SETTINGS = {
    "default": lambda: OnlineQuantileRegressor(0.3),
    "short-averaged": lambda: OnlineQuantileRegressor(0.7, schedule=short(), average=True),
    "inference": lambda: OnlineQuantileRegressor(0.5, schedule=short(), average=True,
                                                 inference=True),
    "scale-online": lambda: OnlineQuantileRegressor(0.5, schedule=short(), scale="online"),
    "constant-no-intercept": lambda: OnlineQuantileRegressor(
        0.5, schedule=ConstantSchedule(0.01), fit_intercept=False),
    "inverse-time": lambda: OnlineQuantileRegressor(0.4, schedule=InverseTimeSchedule(2.0)),
    "user-schedule": lambda: OnlineQuantileRegressor(0.5, schedule=SqrtSchedule()),
    "least-squares": lambda: OnlineLeastSquaresRegressor(schedule=short(), average=True),
}
# d: 1 (all tail), 13 (a chunk and a tail of 5), 100 (tail 4), 600 (no tail)
# of the dense loops' 8-value chunks; every tail length below
DIMS = (1, 13, 100, 600)
CHUNKINGS = {
    "one-call": lambda n: [0, n],
    "uneven": lambda n: [0, 1, 2, 7, 40, 41, 160, 161, 333, n],
    "rows": lambda n: list(range(0, 60)) + [n],
}


def stream(n, d, seed):
    X, y, _ = make_linear_stream(n, d, tau=0.5, random_state=seed)
    X32 = (X * 0.7).astype(np.float32)
    return X32, X32.astype(np.float64), y


def weights(n, seed):
    w = np.random.default_rng(seed).exponential(size=n)
    w[::7] = 0.0                                # rows left out, mid-chunk too
    return w


def assert_bit_identical(got, ref):
    assert got.coef_.tobytes() == ref.coef_.tobytes()
    assert np.float64(got.intercept_).tobytes() == np.float64(ref.intercept_).tobytes()
    assert state_bytes(got) == state_bytes(ref)


def feed(est, X, y, bounds, sw=None):
    for a, b in zip(bounds[:-1], bounds[1:]):
        est.partial_fit(X[a:b], y[a:b], sample_weight=None if sw is None else sw[a:b])
    return est


@pytest.mark.parametrize("chunking", sorted(CHUNKINGS))
@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_float32_rows_give_the_state_of_their_float64_values(setting, d, chunking):
    n = 500
    X32, X64, y = stream(n, d, seed=d)
    bounds = CHUNKINGS[chunking](n)
    got = feed(SETTINGS[setting](), X32, y, bounds)
    ref = feed(SETTINGS[setting](), X64, y, bounds)
    assert got.n_samples_seen_ == n
    assert_bit_identical(got, ref)
    # and the float64 result does not depend on the chunking either
    assert_bit_identical(got, SETTINGS[setting]().fit(X64, y))


@pytest.mark.parametrize("d", range(1, 18))
@pytest.mark.parametrize("setting", ["default", "short-averaged"])
def test_every_tail_length_gives_the_float64_state(setting, d):
    # the fused float32 pass widens its chunks and its padded tail apart:
    # each of the 8 tail lengths, with and without full chunks before it
    n = 300
    X32, X64, y = stream(n, d, seed=100 + d)
    got = SETTINGS[setting]().fit(X32, y)
    assert_bit_identical(got, SETTINGS[setting]().fit(X64, y))


@pytest.mark.parametrize("d", (13, 100))
@pytest.mark.parametrize("setting", ["default", "short-averaged", "inverse-time",
                                     "least-squares"])
def test_float32_rows_with_weights(setting, d):
    n = 400
    X32, X64, y = stream(n, d, seed=100 + d)
    sw = weights(n, d)
    bounds = CHUNKINGS["uneven"](n)
    got = feed(SETTINGS[setting](), X32, y, bounds, sw)
    assert_bit_identical(got, feed(SETTINGS[setting](), X64, y, bounds, sw))
    assert_bit_identical(got, SETTINGS[setting]().fit(X64, y, sample_weight=sw))


@pytest.mark.parametrize("setting", ["default", "inference", "scale-online"])
def test_pickling_mid_stream_resumes_bit_identically(setting):
    X32, X64, y = stream(600, 100, seed=5)
    est = SETTINGS[setting]().partial_fit(X32[:233], y[:233])
    est = pickle.loads(pickle.dumps(est))
    est.partial_fit(X32[233:], y[233:])
    assert_bit_identical(est, SETTINGS[setting]().fit(X64, y))


LAYOUTS = {
    "fortran": np.asfortranarray,
    "strided-rows": lambda X: np.repeat(X, 2, axis=0)[::2],
    "strided-columns": lambda X: np.repeat(X, 2, axis=1)[:, ::2],
    "read-only": lambda X: np.frombuffer(X.tobytes(), np.float32).reshape(X.shape),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_float32_in_any_layout(layout):
    X32, X64, y = stream(300, 13, seed=9)
    X_in = LAYOUTS[layout](X32)
    assert X_in.dtype == np.float32 and not (X_in.flags.c_contiguous and X_in.flags.writeable)
    got = feed(SETTINGS["short-averaged"](), X_in, y, CHUNKINGS["uneven"](300))
    assert_bit_identical(got, SETTINGS["short-averaged"]().fit(X64, y))


def test_float32_memmap(tmp_path):
    X32, X64, y = stream(300, 13, seed=10)
    mm = np.memmap(tmp_path / "X.f32", dtype=np.float32, mode="w+", shape=X32.shape)
    mm[...] = X32
    mm.flush()
    mm = np.memmap(tmp_path / "X.f32", dtype=np.float32, mode="r", shape=X32.shape)
    got = OnlineQuantileRegressor().partial_fit(mm, y)
    assert_bit_identical(got, OnlineQuantileRegressor().fit(X64, y))


@pytest.mark.parametrize("mode, kw", [("batch", dict(batch_size=16)), ("storage", {})])
def test_the_modes_that_convert_give_the_float64_state_too(mode, kw):
    X32, X64, y = stream(300, 13, seed=11)
    got = feed(OnlineQuantileRegressor(mode=mode, **kw), X32, y, CHUNKINGS["uneven"](300))
    ref = feed(OnlineQuantileRegressor(mode=mode, **kw), X64, y, CHUNKINGS["uneven"](300))
    assert got.coef_.tobytes() == ref.coef_.tobytes()
    assert state_bytes(got) == state_bytes(ref)


MULTI = {
    "three taus": lambda: OnlineQuantileRegressor([0.2, 0.5, 0.8]),
    "nine taus, averaged, project": lambda: OnlineQuantileRegressor(
        [k / 10 for k in range(1, 10)], schedule=short(), average=True, noncrossing="project"),
    "two taus, inference": lambda: OnlineQuantileRegressor([0.3, 0.7], schedule=short(),
                                                           average=True, inference=True),
}


@pytest.mark.parametrize("d", (1, 7, 13, 100))
@pytest.mark.parametrize("setting", sorted(MULTI))
def test_several_taus_read_float32_rows_as_their_float64_values(setting, d):
    # each row is widened before the pass that reads it; chunked calls, weights
    # and a pickle mid-stream included
    n = 400
    X32, X64, y = stream(n, d, seed=200 + d)
    sw = weights(n, d)
    bounds = CHUNKINGS["uneven"](n)
    got = feed(MULTI[setting](), X32[:150], y[:150], [0, 1, 2, 7, 40, 41, 150], sw[:150])
    got = pickle.loads(pickle.dumps(got))
    got.partial_fit(X32[150:], y[150:], sample_weight=sw[150:])
    ref = feed(MULTI[setting](), X64, y, bounds, sw)
    assert got.coef_.tobytes() == ref.coef_.tobytes()
    assert np.asarray(got.intercept_).tobytes() == np.asarray(ref.intercept_).tobytes()
    assert state_bytes(got) == state_bytes(ref)
    assert MULTI[setting]().fit(X32, y, sample_weight=sw).coef_.tobytes() == \
        ref.coef_.tobytes()


def peak_bytes(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_single_mode_makes_no_float64_copy_of_the_block():
    X32, _, y = stream(20_000, 100, seed=12)         # 8 MB as float32, 16 MB as float64
    est = OnlineQuantileRegressor().partial_fit(X32[:10], y[:10])
    peak = peak_bytes(lambda: est.partial_fit(X32, y))
    assert peak < X32.nbytes / 8, f"{peak} bytes allocated for a {X32.nbytes}-byte block"
    # (the modes that convert do allocate the copy: the measurement sees it)
    batch = OnlineQuantileRegressor(mode="batch", batch_size=50).partial_fit(X32[:50], y[:50])
    assert peak_bytes(lambda: batch.partial_fit(X32, y)) >= 2 * X32.nbytes
    # (the kernel API's block call on float32 rows neither)
    state = LinearSGD(100, schedule=ConstantSchedule(1e-3))
    state.learn(X32[:10], y[:10])
    peak = peak_bytes(lambda: state.learn(X32, y))
    assert peak < X32.nbytes / 8
    # several taus neither
    multi = OnlineQuantileRegressor([0.1, 0.5, 0.9]).partial_fit(X32[:10], y[:10])
    peak = peak_bytes(lambda: multi.partial_fit(X32, y))
    assert peak < X32.nbytes / 8, f"{peak} bytes allocated for a {X32.nbytes}-byte block"


def test_a_bad_float32_row_is_refused_as_its_float64_twin_and_changes_nothing():
    X32, X64, y = stream(300, 13, seed=13)
    for bad in (np.nan, np.inf):
        X_bad = X32.copy()
        X_bad[171, 4] = bad
        est = OnlineQuantileRegressor().partial_fit(X32[:100], y[:100])
        before = state_bytes(est)
        with pytest.raises(ValueError) as got:
            est.partial_fit(X_bad[100:], y[100:])
        ref = OnlineQuantileRegressor().partial_fit(X64[:100], y[:100])
        with pytest.raises(ValueError) as want:
            ref.partial_fit(X_bad[100:].astype(np.float64), y[100:])
        assert str(got.value) == str(want.value)
        assert "row 71" in str(got.value)
        assert state_bytes(est) == before


def test_float32_rows_near_float32_max_are_learnt_in_float64():
    # 3e38^2 overflows float32 but not float64: the rows are as good as
    # their float64 values (the kernel's ||x||^2 is float64)
    X32, X64, y = stream(200, 13, seed=14)
    X32 = (X32 * 1e37).astype(np.float32)
    with np.errstate(over="ignore"):
        assert np.isinf(np.float32(np.abs(X32).max()) ** 2)
    y = y * 1e37
    got = OnlineQuantileRegressor(schedule=short()).fit(X32, y)
    assert_bit_identical(got, OnlineQuantileRegressor(schedule=short()).fit(
        X32.astype(np.float64), y))
    assert np.isfinite(got.coef_).all()


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals (SIGUSR1)")
@pytest.mark.parametrize("at", [0, 3, 4, 5, 6, 57, 250])
def test_an_interrupt_leaves_whole_float32_rows(at):
    X32, X64, y = stream(300, 100, seed=15)             # chunks of 5 rows
    est = OnlineQuantileRegressor(schedule=short()).partial_fit(X32[:20], y[:20])
    with stopped_at(at):
        est.partial_fit(X32[20:], y[20:])
    taken = est.n_samples_seen_ - 20
    assert taken == at
    # (partial_fit: the same state as fit, without fit's warning that 20 rows
    # do not end a 20-row warm-up)
    ref = OnlineQuantileRegressor(schedule=short()).partial_fit(X64[:20 + taken],
                                                               y[:20 + taken])
    assert_bit_identical(est, ref)
    est.partial_fit(X32[20 + taken:], y[20 + taken:])
    assert_bit_identical(est, OnlineQuantileRegressor(schedule=short()).fit(X64, y))


@pytest.mark.parametrize("block", [1, 4])
def test_kernel_api_float32(block):
    # the kernel API's state object: float32 rows (read as they are in single
    # mode, converted once in batch mode) give the float64 rows' state
    X32, X64, y = stream(400, 13, seed=16)
    results = []
    for X in (X32, X64):
        state = LinearSGD(13, tau=0.3, average=True, mode="single" if block == 1 else "batch",
                          batch_size=None if block == 1 else block)
        for a in range(0, 400, 100):
            state.learn(X[a:a + 100], y[a:a + 100])
        results.append(state_bytes(state))
    assert results[0] == results[1]
    assert state.n_updates == 400 // block - 50 // block     # (a 50-row warm-up)
