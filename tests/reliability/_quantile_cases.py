"""What the online quantile regression reliability suites share: the whole
learnt state as bytes and its bit-for-bit comparison (the comparison is
_pca_cases's, given this family's snapshot). Imported relatively (pytest's
importlib mode puts no test folder on sys.path)."""
import numpy as np

from . import _pca_cases


def state_dict(est):
    """The state object's own state dict (what it pickles: ``to_state()``'s
    sections, a user schedule kept as an object), or None when unfitted."""
    state = est.__dict__.get("_state")
    if state is None:
        return None
    return type(state).__reduce__(state)[1][0]


def _plain(value):
    # a value of a state dict as bytes, the same for equal contents
    if isinstance(value, dict):
        return b"{" + b",".join(_plain(k) + b":" + _plain(v)
                                for k, v in sorted(value.items())) + b"}"
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join(_plain(v) for v in value) + b"]"
    if isinstance(value, np.ndarray):
        return f"{value.dtype.str}{value.shape}".encode() + \
            np.ascontiguousarray(value).tobytes()
    if isinstance(value, (type(None), bool, int, float, str, np.generic)):
        return f"{type(value).__name__}:{value!r}".encode()
    return type(value).__qualname__.encode() + _plain(dict(vars(value)))


def learnt(est):
    """The whole learnt state (the state object's, every section: records,
    iterates, averages, windows, sums, pending and stored rows, settings),
    each section as bytes, keyed by its name (``coef``, ``records``, ...;
    an interval's quantile pair under ``quantiles.``). Equal means
    bit-identical; {} when unfitted."""
    raw = state_dict(est)
    if raw is None:
        return {}
    out = {}

    def add(prefix, d):
        for key, value in d.items():
            if key == "quantiles":
                add("quantiles.", value)
            else:
                out[prefix + key] = _plain(value)

    add("", raw)
    return out


def assert_same_state(a, b):
    _pca_cases.assert_same_state(a, b, learnt=learnt)
