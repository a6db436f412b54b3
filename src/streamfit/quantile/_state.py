"""Pickles of streamfit 0.1 name these classes (see streamfit._legacy)."""
from .._legacy import OldState as Work, OldState as Plan  # noqa: F401
