# The kernels' return codes, visible from Python: streamfit._errors maps them
# to exceptions in one place. The values are declared once, in _common.pxd.
from _common cimport (OK, ERR_NOMEM, ERR_LAPACK, ERR_INTERRUPTED, ERR_NONFINITE,
                      ERR_BADINPUT, ERR_SCALE, ERR_LAYOUT)

CODES = {
    "OK": OK,
    "ERR_NOMEM": ERR_NOMEM,
    "ERR_LAPACK": ERR_LAPACK,
    "ERR_INTERRUPTED": ERR_INTERRUPTED,
    "ERR_NONFINITE": ERR_NONFINITE,
    "ERR_BADINPUT": ERR_BADINPUT,
    "ERR_SCALE": ERR_SCALE,
    "ERR_LAYOUT": ERR_LAYOUT,
}


def check_struct(object arr, object dtype, str name):
    """Check a state or parameter record before a kernel views it as its C
    struct: a C-contiguous, writable-or-not structured array of exactly one
    record of ``dtype`` (names included; Cython's own buffer check compares
    the layout only). Raises ValueError naming ``name``."""
    if getattr(arr, "dtype", None) != dtype or getattr(arr, "shape", None) != (1,):
        raise ValueError(f"{name} must be a record array of shape (1,) and dtype {dtype}, "
                         f"got {getattr(arr, 'dtype', type(arr).__name__)} of shape "
                         f"{getattr(arr, 'shape', None)}")
