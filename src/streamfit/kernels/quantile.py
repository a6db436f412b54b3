"""The online linear learners' compiled state objects, for libraries with
their own loop: the objects the estimators drive, handed out as they are.

- :class:`LinearSGD`: online quantile regression (one tau or several) and
  online least squares by (sub-)gradient descent, under every schedule of
  :mod:`streamfit.schedules`, with averaging, drift restarts, random-scaling
  inference and online scaling; ``learn`` over a block of rows,
  ``learn_one`` one row, ``predict``/``predict_one``.
- :class:`IntervalState`: a quantile pair calibrated by conformal inference
  (what :class:`~streamfit.OnlineIntervalRegressor` drives).

Each object checks what enters it (rows, settings, a loaded state: every
field), takes one call at a time (a second thread waits), keeps the whole
rows before a signal that interrupts a block call, and is left as it was by
any other failure. ``to_state()`` / ``from_state()`` give its state as plain
data (what :func:`streamfit.save` writes); pickling resumes bit-identically.
"""
from __future__ import annotations

from .._kernels._conformal import IntervalState
from .._kernels._quantile import LinearSGD

__all__ = ["LinearSGD", "IntervalState"]
