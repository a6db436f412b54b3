"""What pickles made by streamfit before its state objects (0.1) refer to:
the Python containers that held an estimator's state then. Loading such a
pickle raises a clear error instead of an ImportError or a half-made
estimator."""
from __future__ import annotations

__all__ = ["OldState"]


class OldState:
    """Stands for a state container of streamfit 0.1 in an old pickle."""

    def __setstate__(self, state):
        raise ValueError(
            "this model was pickled by an earlier streamfit (0.1, before the compiled state "
            "objects), whose learnt state this version cannot read: refit it with this "
            "version (or keep using the version that saved it)")
