"""Pickles of streamfit 0.1 name this class (see streamfit._legacy)."""
from .._legacy import OldState as MultiWork  # noqa: F401
