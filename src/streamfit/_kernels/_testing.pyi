# Partial stub of the compiled module streamfit._kernels._testing (csrc/_testing.pyx):
# its names are typed Any until full stubs are written. Test entries only: the typed
# public API is streamfit.* and streamfit.kernels.
from typing import Any

def __getattr__(name: str) -> Any: ...
