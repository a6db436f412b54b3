"""Hypothesis over the public kernel API (``streamfit.kernels``): random valid
and invalid arguments, records and sequences of calls into every kernel --
integers and reals including -1e6, -1, NaN, inf, 1e300, 2^62, strings and
bools; arrays of any length, of float64, float32, ints, bool, complex, object
and str dtypes, in C, Fortran, strided, read-only, list and memoryview
layouts, with NaN, inf, -1e6 or 1e300 poked in; the state objects' records
and attributes edited between calls, pickled and unpickled.

Property: each call raises a ValueError or TypeError naming what is wrong
(or a FloatingPointError/MemoryError for a diverging iterate or an absurd
size), or returns the right result (checked against NumPy in
``_kernel_cases``) -- never a signal, a hang or a wrong result.

The examples are drawn once (fixed: ``derandomize=True``, no database, a
bounded number per kernel) and run in child processes (``_isolated``), two
at a time; a crash or a hang names its example. Every example's spec is
plain JSON, so a failure prints what to replay."""
import collections
import json
import re

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from streamfit._kernels import _quantile as _k

from ._isolated import describe, run_cases

# examples drawn per kernel (bounded: the suite runs in well under a minute)
EXAMPLES = {"goe": 80, "sizes": 60, "project_capped_simplex": 120,
            "mixture_decomposition": 100, "systematic_sample": 100, "TopK": 150,
            "LinearSGD": 150, "LinearSGD-statistical": 120}

# the names an error may cite, per kernel (arguments, fields, attributes)
NAMES = {
    "goe": ["n", "sigma", "random_state", "out"],
    "sizes": ["n", "k", "b"],
    "project_capped_simplex": ["v", "k", "divergence"],
    "mixture_decomposition": ["w", "k"],
    "systematic_sample": ["w", "k", "size", "random_state"],
    "TopK": ["n", "k", "block", "max_iter", "vector", "rows", "matrix", "scale", "tol",
             "hint", "seed", "update", "S", "_S", "_V", "_values", "TopK", "state", "field"],
    "LinearSGD": ["n_features", "X", "y", "x", "weight", "sample_weight", "stepsizes",
                  "schedule", "loss", "tau", "batch_size", "mode", "coef", "coef_avg",
                  "records", "LinearSGD", "field", "row"],
    "LinearSGD-statistical": ["n_features", "X", "y", "x", "weight", "sample_weight",
                              "schedule", "loss", "tau", "batch_size", "mode", "coef",
                              "coef_avg", "records", "LinearSGD", "field", "row"],
}

BAD_INTS = ["i:-1", "i:2^62", "i:-2^62", "f:nan", "f:1e300", "f:2", "f:-1e6", "s:3", "b:1",
            "np:3"]
BAD_REALS = ["f:-1e6", "f:-1", "f:nan", "f:inf", "f:-inf", "f:1e300", "s:x", "b:1"]
SPECIAL = ["-1e6", "-1", "nan", "inf", "-inf", "1e300", "0", "1e-300"]
DTYPES = ["float64"] * 12 + ["float32", "int64", "int8", "bool", "complex128", "object", "str"]
LAYOUTS = ["C"] * 6 + ["F", "strided", "reversed", "readonly", "list", "memoryview"]


def mostly(good, *bad, times=4):
    """``good`` about ``times`` times as often as any of ``bad`` (a selector
    drawn first: hypothesis's simplest examples are then the good ones)."""
    options = [good] * times + list(bad)
    return st.integers(0, len(options) - 1).flatmap(lambda i: options[i])


def ints(lo, hi, bad=0.25):
    """An integer in [lo, hi], or with probability about ``bad`` a bad one."""
    return mostly(st.integers(lo, hi), st.sampled_from(BAD_INTS),
                  times=round((1 - bad) / bad))


def reals(lo, hi):
    return mostly(st.floats(lo, hi, allow_nan=False), st.sampled_from(BAD_REALS))


@st.composite
def arrays(draw, shape, specials=True):
    """An array spec of ``shape`` (or, now and then, another shape); half of
    them plain (float64, C order, finite), so that calls get past the checks
    to a result to verify."""
    shape = list(shape)
    if draw(st.booleans()):
        return {"shape": shape, "seed": draw(st.integers(0, 10_000))}
    if draw(st.integers(0, 9)) == 0:       # a wrong shape
        shape = draw(st.sampled_from([shape[:-1], shape + [1], [s + 1 for s in shape],
                                      [0] * len(shape), [2, 2, 2]]))
    spec = {"shape": shape, "seed": draw(st.integers(0, 10_000)),
            "dtype": draw(st.sampled_from(DTYPES)), "layout": draw(st.sampled_from(LAYOUTS)),
            "scale": draw(st.sampled_from([1.0] * 9 + [1e-300, 1e150, 1e-3]))}
    if specials and draw(st.integers(0, 5)) == 0:
        spec["specials"] = draw(st.lists(st.tuples(st.integers(0, 1000),
                                                   st.sampled_from(SPECIAL)), max_size=2))
    if draw(st.booleans()):
        spec["nonneg"] = True
    return spec


@st.composite
def goe_specs(draw):
    n = draw(ints(0, 12))
    good_n = n if isinstance(n, int) else 3
    out = draw(st.one_of(st.none(), st.none(), arrays([max(good_n, 0)] * 2, specials=False)))
    return {"kernel": "goe", "n": n, "sigma": draw(reals(0, 3)),
            "seed": draw(mostly(st.integers(0, 2 ** 32), st.sampled_from(["i:-1", "s:x"]))),
            "out": out}


@st.composite
def size_specs(draw):
    return {"kernel": "sizes", "n": draw(ints(-2, 2000)), "k": draw(ints(-2, 300))}


@st.composite
def project_specs(draw):
    m = draw(st.integers(1, 12))
    return {"kernel": "project_capped_simplex", "v": draw(arrays([m])),
            "k": draw(ints(1, max(m, 1))),
            "divergence": draw(mostly(st.sampled_from(["euclidean", "entropy"]),
                                      st.just("l1")))}


@st.composite
def capped_specs(draw, kernel):
    m = draw(st.integers(1, 12))
    spec = {"kernel": kernel, "w": draw(arrays([m])), "k": draw(ints(1, m)),
            "valid": draw(st.sampled_from([True, True, True, False]))}
    if kernel == "systematic_sample":
        spec["size"] = draw(mostly(st.one_of(st.none(), st.integers(0, 40)),
                                   st.sampled_from(["i:-1", "f:2", "f:nan"])))
        spec["seed"] = draw(mostly(st.integers(0, 1000), st.sampled_from(["i:-1", "s:x"])))
    return spec


TOPK_FIELDS = ["solves", "products", "fallbacks", "direct", "skip", "backoff",
               "eig_fallbacks", "kept", "tol", "gap", "max_gap_ratio"]
FIELD_VALUES = ["f:-1e6", "f:-1", "f:nan", "f:inf", "f:1e300", "i:2^62", "i:-1", "i:0",
                "f:0.5", "i:1", "i:3"]


@st.composite
def topk_specs(draw):
    n = draw(ints(1, 12, bad=0.1))
    good = n if isinstance(n, int) and n >= 1 else 4
    k = draw(ints(1, good, bad=0.1))
    spec = {"kernel": "TopK", "n": n, "k": k,
            "block": draw(st.one_of(st.none(), st.none(), ints(1, good))),
            "max_iter": draw(st.one_of(st.none(), st.none(), ints(0, 40)))}
    ops = []
    for _ in range(draw(st.integers(1, 8))):
        what = draw(st.sampled_from(["vector", "rows", "matrix", "solve", "solve", "field",
                                     "attr", "pickle"]))
        if what in ("vector", "rows", "matrix"):
            shape = {"vector": [good], "rows": [draw(st.integers(0, 5)), good],
                     "matrix": [good, good]}[what]
            ops.append({"op": what, "term": draw(arrays(shape)),
                        "scale": draw(mostly(st.floats(-2, 2, allow_nan=False),
                                             st.sampled_from(BAD_REALS)))})
        elif what == "solve":
            ops.append({"op": "solve",
                        "tol": draw(st.sampled_from([0.0, 1e-10, 1e-8, 1e-4, "f:-1",
                                                     "f:nan", "f:inf"])),
                        "hint": draw(st.one_of(st.none(), arrays([good]))),
                        "seed": draw(st.one_of(st.none(), st.integers(0, 99), st.just("i:-1")))})
        elif what == "field":
            ops.append({"op": "field", "field": draw(st.sampled_from(TOPK_FIELDS)),
                        "value": draw(st.sampled_from(FIELD_VALUES))})
            ops.append({"op": "solve", "tol": draw(st.sampled_from([0.0, 1e-8])),
                        "hint": None, "seed": None})
        elif what == "attr":
            name = draw(st.sampled_from(["n", "k", "block", "max_iter", "_S", "_V",
                                         "_values"]))
            if name.startswith("_"):
                shape = {"_S": [good, good], "_V": [good, good], "_values": [good]}[name]
                value = draw(arrays(shape))
            else:
                value = draw(st.sampled_from(BAD_INTS + ["i:0", "i:1", "i:2"]))
            ops.append({"op": "attr", "name": name, "value": value})
        else:
            ops.append({"op": "pickle"})
    spec["ops"] = ops
    return spec


# the schedule records' fields, as the compiled module lays them out
STATE_FIELDS = list(_k.STATE_FIELDS)


def _block_data(draw, d, block, most, least=0):
    m = block * draw(st.integers(least, most // block))
    return m, draw(arrays([m, d])), draw(arrays([m]))


@st.composite
def linear_specs(draw, schedule):
    """kernels.LinearSGD: its settings (a few bad), then calls: blocks of
    rows (with the stepsizes of a user schedule: their number, values and
    type drawn too), single rows, a record's field or the coefficients set
    through the state dict, pickle round trips."""
    d = draw(ints(1, 5, bad=0.1))
    good = d if isinstance(d, int) and d >= 1 else 3
    loss = draw(st.sampled_from(["check", "check", "check", "squared", "l1"]))
    block = draw(st.sampled_from([1, 1, 1, 2, 3, "i:0", "i:-1"] if loss != "squared" else
                                 [1, 1, 1, 2]))
    b = block if isinstance(block, int) and block >= 1 else 1
    spec = {"kernel": "LinearSGD" if schedule == "given" else "LinearSGD-statistical",
            "schedule": schedule, "n_features": d, "loss": loss, "block": block,
            "tau": draw(mostly(st.floats(0.05, 0.95), st.sampled_from(BAD_REALS),
                               st.just([0.25, 0.75]))),
            "fit_intercept": draw(st.booleans()), "average": draw(st.booleans())}
    most = 12 if schedule == "given" else 120
    ops = []
    for _ in range(draw(st.integers(1, 6))):
        what = draw(st.sampled_from(["learn", "learn", "learn", "one", "field", "coef",
                                     "pickle"]))
        if what == "learn":
            m, X, y = _block_data(draw, good, b, most)
            sw = draw(st.one_of(st.none(), st.none(), arrays([m])))
            n_etas = m // b if draw(st.integers(0, 3)) else draw(st.integers(0, m))
            ops.append({"op": "learn", "X": X, "y": y, "sw": sw,
                        "etas": draw(mostly(st.just({"shape": [n_etas], "seed": m,
                                                     "nonneg": True}),
                                            arrays([n_etas])))})
        elif what == "one":
            ops.append({"op": "one", "x": draw(arrays([good])),
                        "y": draw(mostly(st.floats(-3, 3), st.sampled_from(BAD_REALS))),
                        "weight": draw(mostly(st.floats(0, 2), st.sampled_from(BAD_REALS))),
                        "etas": draw(mostly(st.just({"shape": [1], "nonneg": True}),
                                            arrays([draw(st.integers(0, 2))])))})
        elif what == "field":
            ops.append({"op": "field", "field": draw(st.sampled_from(STATE_FIELDS)),
                        "value": draw(st.sampled_from(FIELD_VALUES))})
            m, seed = b * draw(st.integers(1, 12 // b)), draw(st.integers(0, 10_000))
            ops.append({"op": "learn", "X": {"shape": [m, good], "seed": seed},
                        "y": {"shape": [m], "seed": seed + 1}, "sw": None,
                        "etas": {"shape": [m // b], "seed": seed + 2, "nonneg": True}})
        elif what == "coef":
            ops.append({"op": "coef", "name": draw(st.sampled_from(["coef", "coef_avg"])),
                        "value": draw(arrays([1, good]))})
        else:
            ops.append({"op": "pickle"})
    spec["ops"] = ops
    return spec


STRATEGIES = {"goe": goe_specs(), "sizes": size_specs(), "project_capped_simplex":
              project_specs(), "mixture_decomposition": capped_specs("mixture_decomposition"),
              "systematic_sample": capped_specs("systematic_sample"), "TopK": topk_specs(),
              "LinearSGD": linear_specs("given"),
              "LinearSGD-statistical": linear_specs("statistical")}


def draw_examples(kernel):
    """The kernel's examples: hypothesis's generation phase, fixed."""
    drawn = []

    @settings(derandomize=True, database=None, max_examples=EXAMPLES[kernel], deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(STRATEGIES[kernel])
    def collect(spec):
        drawn.append(spec)

    collect()
    return drawn


# exceptions that say what went wrong without naming an argument: a
# diverging iterate, and a size no memory can hold
ALSO_CLEAR = ("FloatingPointError", "MemoryError")
# numpy's own refusal of an array of 2^62 entries (an absurd n_features)
ABSURD_SIZE = re.compile(r"array is too big|Maximum allowed (size|dimension) exceeded|"
                         r"Unable to allocate")


@pytest.fixture(scope="module")
def outcomes():
    cases = [spec for kernel in EXAMPLES for spec in draw_examples(kernel)]
    results = run_cases("_kernel_cases", "kernel_case", cases, timeout=30, workers=2)
    calls, returned = collections.Counter(), collections.Counter()
    for spec, out in zip(cases, results):
        if out["status"] == "ok":
            calls[spec["kernel"]] += out["value"]["calls"]
            returned[spec["kernel"]] += out["value"]["returned"]
    # (-s shows it) examples, calls made, calls that returned a result checked
    print("\nkernel fuzz: [examples, calls, results checked] per kernel:",
          json.dumps({k: [sum(s["kernel"] == k for s in cases), calls[k], returned[k]]
                      for k in EXAMPLES}))
    return cases, results


def _names_something(message, names):
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message)
               for n in names)


@pytest.mark.parametrize("kernel", list(EXAMPLES))
def test_a_kernel_raises_naming_the_argument_or_returns_the_right_result(outcomes, kernel):
    cases, results = outcomes
    bad = []
    n = 0
    for spec, out in zip(cases, results):
        if spec["kernel"] != kernel:
            continue
        n += 1
        if out["status"] == "raised" and out["type"] in ALSO_CLEAR:
            continue
        if out["status"] != "ok":
            bad.append(describe(spec, out))
            continue
        for message in out["value"]["raised"]:
            if not (_names_something(message, NAMES[kernel]) or ABSURD_SIZE.search(message)):
                bad.append(f"{json.dumps(spec)}: an error naming nothing: {message}")
    assert n > 0
    assert not bad, f"{len(bad)} of {n} examples of {kernel}:\n" + "\n".join(bad[:20])
