"""One mapping from the kernels' return codes to exceptions.

Every kernel returns a code from ``csrc/_common.pxd``; :func:`raise_for`
turns it into the exception a user sees, saying what happened to the
estimator's state (the caller says which, in ``state``).
"""
from __future__ import annotations

import numpy as np

from ._kernels._common import CODES

__all__ = ["OK", "ERR_NOMEM", "ERR_LAPACK", "ERR_INTERRUPTED", "ERR_NONFINITE",
           "ERR_BADINPUT", "ERR_SCALE", "ERR_LAYOUT", "raise_for", "raise_row_error"]

OK = CODES["OK"]
ERR_NOMEM = CODES["ERR_NOMEM"]
ERR_LAPACK = CODES["ERR_LAPACK"]
ERR_INTERRUPTED = CODES["ERR_INTERRUPTED"]
ERR_NONFINITE = CODES["ERR_NONFINITE"]
ERR_BADINPUT = CODES["ERR_BADINPUT"]
ERR_SCALE = CODES["ERR_SCALE"]
ERR_LAYOUT = CODES["ERR_LAYOUT"]

_UNCHANGED = "the estimator was left as it was before this call"


def raise_for(code, where, *, exc=None, detail="", state=_UNCHANGED):
    """Raise the exception for a kernel's return code (nothing for OK).

    ``where`` names the estimator or function; ``exc`` is the exception a
    signal handler raised inside the kernel (ERR_INTERRUPTED), re-raised as
    it is; ``detail`` adds to the message; ``state`` says what the state is
    now (default: unchanged).
    """
    if code == OK:
        return
    if code == ERR_INTERRUPTED:
        if exc is None:     # pragma: no cover - the kernel always hands it over
            exc = KeyboardInterrupt()
        raise exc
    suffix = f" {detail}" if detail else ""
    if code == ERR_NOMEM:
        raise MemoryError(f"{where}: a work space could not be allocated;{suffix} {state}")
    if code == ERR_LAPACK:
        raise np.linalg.LinAlgError(f"{where}: every LAPACK routine of the eigen-solver "
                                    f"chain failed (dsyevr, dsyevd, dsyev, Jacobi);{suffix} "
                                    f"{state}")
    if code == ERR_NONFINITE:
        raise FloatingPointError(f"{where}: the iterate diverged (it is no longer finite); "
                                 f"the stepsizes are too large for this data.{suffix} {state}")
    if code == ERR_SCALE:
        raise ValueError(f"{where}: X is too large or too small for float64 arithmetic "
                         f"(||x||^2 overflows or underflows); rescale (standardize) the "
                         f"features.{suffix} {state}")
    if code == ERR_BADINPUT:
        raise ValueError(f"{where}: the input contains NaN or inf; every value must be "
                         f"finite.{suffix} {state}")
    if code == ERR_LAYOUT:
        raise ValueError(f"{where}: a state array has the wrong length or layout "
                         f"(a corrupted or foreign state?).{suffix}")
    raise RuntimeError(f"{where}: unknown kernel code {code}")  # pragma: no cover


def raise_row_error(where, at, x, target, mean_sq=0.0, state=None):
    """A kernel stopped at a row whose residual or ||x||^2 is not finite
    (ERR_BADINPUT): say why. ``at`` names the row ("row 3 of this call"),
    ``mean_sq`` is the mean ||x||^2 the schedule was calibrated on (0: none)."""
    kw = {} if state is None else {"state": state}
    if not np.isfinite(x).all():
        raise_for(ERR_BADINPUT, where, detail=f"X contains NaN or inf ({at}).", **kw)
    if not np.isfinite(target):
        raise_for(ERR_BADINPUT, where, detail=f"y contains NaN or inf ({at}).", **kw)
    with np.errstate(over="ignore"):
        sq = float(x @ x)
    if not np.isfinite(sq):
        raise_for(ERR_SCALE, where, detail=f"X's {at} has entries up to "
                  f"{float(np.abs(x).max()):.3g}: its ||x||^2 overflows.", **kw)
    # finite input, non-finite residual: the iterate ran away here
    raise_for(ERR_NONFINITE, where, detail=f"It left the finite range at X's {at}, where "
              f"||x||^2 = {sq:.3g}" + (f"; the schedule was calibrated on a mean ||x||^2 of "
                                       f"{mean_sq:.3g}" if mean_sq > 0 else "") + ".", **kw)
