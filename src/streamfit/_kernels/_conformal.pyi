# Partial stub of the compiled module streamfit._kernels._conformal (csrc/_conformal.pyx):
# its names are typed Any until full stubs are written. Internal: the typed
# public API is streamfit.* and streamfit.kernels.
from typing import Any

def __getattr__(name: str) -> Any: ...
