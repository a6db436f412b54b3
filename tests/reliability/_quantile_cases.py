"""What the online quantile regression reliability suites share: the whole
learnt state as bytes and its bit-for-bit comparison (the comparison is
_pca_cases's, given this family's snapshot). Imported relatively (pytest's
importlib mode puts no test folder on sys.path)."""
import numpy as np

from streamfit.quantile._state import FIELDS

from . import _pca_cases


def learnt(est):
    """The whole learnt state (est._fit_), arrays as bytes: stored rows
    without the spare room, held residuals without the buffer's capacity.
    Equal means bit-identical."""
    fit = est.__dict__.get("_fit_")
    if fit is None:
        return {}
    out = {}
    for name in FIELDS:
        if not hasattr(fit, name):      # several quantiles: MultiWork has fewer
            continue
        v = getattr(fit, name)
        if name in ("store_X", "store_y", "store_w") and v is not None:
            v = v[:fit.store_n]
        elif name == "window":
            v = v[:int(fit.state["fill"][0])]
        elif name == "names" and v is not None:
            v = tuple(v)
        out[name] = (v.dtype.str, v.shape, v.tobytes()) if isinstance(v, np.ndarray) else v
    return out


def assert_same_state(a, b):
    _pca_cases.assert_same_state(a, b, learnt=learnt)
