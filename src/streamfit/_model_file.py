"""The safe model format: :func:`save` and :func:`load`.

A model file is a zip archive of uncompressed members: ``manifest.json``
(the format's name and version, the estimator's class -- a name from an
allow-list --, its parameters and its learnt state, as JSON) and
``arrays/<i>.npy``, the float64/int64 arrays the manifest refers to. Loading
one runs no code from it: the class and the schedule classes are looked up
in fixed tables of streamfit's own, the parameters are JSON values (arrays
and schedules written as tagged objects), and the arrays are read by
numpy's ``.npy`` header parser into arrays allocated only once their size
is checked against the bytes the file really holds. Every value then goes
through the estimator's own checks of a loaded state (the same as
unpickling's). Pickle stays for the Python ecosystem (joblib, Dask): it runs
whatever code a file holds, so unpickle only what you trust.

The estimators' side is their state object (issue 39's convention: the
whole learnt state is one compiled object in ``estimator.__dict__["_state"]``):

- saving writes ``state.to_state()``, a dict of str / int / float / bool /
  None, lists, dicts and float64/int64 arrays, and the object's class name;
- loading looks that name up in :data:`STATE_OBJECTS` (fixed names of
  streamfit's own classes, and only the one :data:`ESTIMATOR_STATES` gives
  for the file's estimator), rebuilds it with ``Class.from_state(dict)`` --
  the checker unpickling uses: every field's type, dtype, shape, range,
  finiteness and consistency, ValueError naming the field --, applies the
  saved parameters to it as a call after ``set_params`` would (a parameter
  the learnt state cannot take, such as another ``tau``, is refused naming
  it), and hands it to the estimator's ``__setstate__``, as unpickling does
  (its checks of a loaded state, and what it does after loading).

One path serves every family: every public estimator holds its learnt
state in a state object once fitted (an unfitted one saves its parameters
only).
"""
from __future__ import annotations

import io
import json
import math
import numbers
import os
import re
import struct
import tempfile
import zipfile
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ._typing import Estimator, FileLike

__all__ = ["save", "load", "FORMAT_VERSION"]

FORMAT = "streamfit-model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"

# The estimators a file may name, and the schedule classes its parameters
# may: names of streamfit's own classes, looked up in these tables and
# nowhere else. (FunctionSchedule holds a Python callable: not storable.)
ESTIMATORS = ("PerturbedLeaderPCA", "FollowTheLeaderPCA", "DropoutPCA", "MatrixEGPCA",
              "MatrixGDPCA", "OnlineQuantileRegressor", "OnlineLeastSquaresRegressor",
              "OnlineIntervalRegressor", "OnlineLowRankQuantileRegressor")
SCHEDULES = ("StatisticalSchedule", "ConstantSchedule", "InverseTimeSchedule")

# The state objects a file may name (class -> its compiled module: fixed
# strings, the file's name is only a key here), and the one each estimator
# holds. A module that this build lacks (a family not merged yet) makes its
# name unknown, refused like any other.
STATE_OBJECTS = {"LinearSGD": "streamfit._kernels._quantile",
                 "IntervalState": "streamfit._kernels._conformal",
                 "LeaderState": "streamfit._kernels._pca",
                 "CappedState": "streamfit._kernels._capped",
                 "DropoutState": "streamfit._kernels._dropout",
                 "LowRankState": "streamfit._kernels._lowrank"}
ESTIMATOR_STATES = {"OnlineQuantileRegressor": "LinearSGD",
                    "OnlineLeastSquaresRegressor": "LinearSGD",
                    "OnlineIntervalRegressor": "IntervalState",
                    "PerturbedLeaderPCA": "LeaderState", "FollowTheLeaderPCA": "LeaderState",
                    "DropoutPCA": "DropoutState", "MatrixEGPCA": "CappedState",
                    "MatrixGDPCA": "CappedState",
                    "OnlineLowRankQuantileRegressor": "LowRankState"}

# Limits of what a file may declare, checked before anything is read or
# allocated: the manifest holds parameters and scalars only (arrays are
# members), so 1 MiB is generous; a state has a few dozen arrays.
MAX_MANIFEST_BYTES = 1 << 20
MAX_MEMBERS = 4096
MAX_DEPTH = 16              # nesting of the manifest's JSON values
MAX_NPY_HEADER = 4096       # bytes of a .npy header (numpy's own default: 10,000)
MAX_NDIM = 8
_ARRAY_MEMBER = re.compile(r"arrays/(0|[1-9][0-9]{0,5})\.npy\Z")
_DTYPES = {"<f8": np.float64, "<i8": np.int64}      # as written: little-endian
_TAGS = ("$float", "$array", "$tuple", "$schedule")
_TOP = {"format", "format_version", "streamfit_version", "estimator", "params", "state",
        "state_object"}
_LOCAL_HEADER = 30          # bytes of a zip local file header before its name and extra
# what zipfile raises on a damaged archive (besides BadZipFile: an edited
# version field, a header cut short, an impossible offset)
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
               NotImplementedError, struct.error, KeyError, IndexError, OverflowError)


def _estimator_classes():
    import streamfit

    return {name: getattr(streamfit, name) for name in ESTIMATORS}


def _schedule_classes():
    from streamfit import schedules

    return {name: getattr(schedules, name) for name in SCHEDULES}


# -- writing --------------------------------------------------------------------------------
class _Writer:
    """Encodes values to JSON, collecting the arrays as members."""

    def __init__(self):
        self.arrays = []

    def encode(self, value, where, params):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real) and not isinstance(value, np.ndarray):
            value = float(value)
            return value if math.isfinite(value) else {"$float": repr(value)}
        if isinstance(value, np.ndarray):
            if value.dtype not in (np.float64, np.int64) or value.ndim > MAX_NDIM:
                raise TypeError(f"{where} is a {value.dtype} array of {value.ndim} dimensions: "
                                f"the safe format stores float64 and int64 arrays of at most "
                                f"{MAX_NDIM}")
            self.arrays.append(np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")))
            return {"$array": f"arrays/{len(self.arrays) - 1}.npy"}
        if isinstance(value, tuple):
            return {"$tuple": [self.encode(v, f"{where}[{i}]", params)
                               for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self.encode(v, f"{where}[{i}]", params) for i, v in enumerate(value)]
        if isinstance(value, dict):
            out = {}
            for key, v in value.items():
                if not isinstance(key, str) or key.startswith("$"):
                    raise TypeError(f"{where} has the key {key!r}: the safe format stores "
                                    f"str keys not starting with '$'")
                out[key] = self.encode(v, f"{where}[{key!r}]", params)
            return out
        if params:
            schedule = _schedule_classes().get(type(value).__name__)
            if schedule is not None and type(value) is schedule:
                return {"$schedule": type(value).__name__,
                        "params": self.encode(value.get_params(deep=False),
                                              f"{where}.params", params)}
        hint = (" (a schedule from streamfit.schedules is stored by class and parameters; "
                "a FunctionSchedule or your own subclass holds code)"
                if params and hasattr(value, "stepsizes") else "")
        raise TypeError(f"{where} is a {type(value).__name__}: the safe format stores JSON "
                        f"values, float64/int64 arrays and streamfit's schedules, no Python "
                        f"objects{hint}; use pickle or joblib, for trusted use only")


def _state_class(name):
    """streamfit's state object class called ``name`` (a key of
    STATE_OBJECTS), or None if this build has none of that name."""
    import importlib

    module = STATE_OBJECTS.get(name) if isinstance(name, str) else None
    if module is None:
        return None
    try:
        cls = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    if not (isinstance(cls, type) and cls.__name__ == name and
            callable(getattr(cls, "from_state", None))):
        return None
    return cls


def _state_of(estimator):
    """(state object class name, state dict) to save, or (None, None) for
    an unfitted estimator (its parameters are all there is to save)."""
    obj = vars(estimator).get("_state")
    if obj is not None:
        name = type(estimator).__name__
        kind = type(obj).__name__
        if ESTIMATOR_STATES.get(name) != kind or _state_class(kind) is not type(obj):
            raise TypeError(f"{name} holds a {type(obj).__module__}.{type(obj).__qualname__}, "
                            f"not the {ESTIMATOR_STATES.get(name)} the safe format stores for "
                            f"it; use pickle or joblib, for trusted use only")
        try:
            state = obj.to_state()
        except TypeError as exc:
            raise TypeError(f"{name}'s state cannot be stored safely: {exc}") from None
        if not isinstance(state, dict):
            raise TypeError(f"{kind}.to_state() returned a {type(state).__name__}, expected "
                            f"a dict")
        return kind, state
    return None, None           # unfitted: its parameters are all there is to save


def save(estimator: Estimator, file: FileLike) -> None:
    """Save a fitted (or unfitted) streamfit estimator in the safe format.

    The file holds the estimator's class name, its parameters and its
    learnt state as JSON and float64/int64 arrays (see :func:`load`): no
    pickle, nothing that runs code when it is loaded. Continuing from the
    loaded estimator gives bit for bit what continuing from this one would.

    Parameters
    ----------
    estimator : streamfit estimator
        One of streamfit's public estimators (not a subclass), whose
        parameters are JSON values (numbers, strings, None, lists, tuples),
        float64/int64 arrays, schedules of :mod:`streamfit.schedules` other
        than FunctionSchedule, and ``random_state`` an int or None.
    file : str, os.PathLike or binary file object
        A path (written to a temporary file beside it, then renamed: an
        interrupted save leaves no partial file) or a writable binary file.

    Raises
    ------
    TypeError
        The estimator, or one of its parameters (named), cannot be stored
        safely: pickle or joblib it instead, for trusted use only.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> import streamfit
    >>> from streamfit import OnlineQuantileRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((400, 3))
    >>> y = X.sum(1) + rng.standard_normal(400)
    >>> est = OnlineQuantileRegressor(0.9).partial_fit(X[:200], y[:200])
    >>> buffer = io.BytesIO()
    >>> streamfit.save(est, buffer)
    >>> loaded = streamfit.load(io.BytesIO(buffer.getvalue()))
    >>> a = est.partial_fit(X[200:], y[200:]).coef_
    >>> b = loaded.partial_fit(X[200:], y[200:]).coef_
    >>> bool(np.array_equal(a, b))
    True
    """
    classes = _estimator_classes()
    name = type(estimator).__name__
    if classes.get(name) is not type(estimator):
        raise TypeError(f"estimator must be one of streamfit's estimators "
                        f"({', '.join(ESTIMATORS)}), not a {type(estimator).__module__}."
                        f"{type(estimator).__qualname__}; use pickle or joblib, for trusted "
                        f"use only")
    writer = _Writer()
    params = estimator.get_params(deep=False)
    random_state = params.get("random_state")
    if random_state is not None and (isinstance(random_state, bool) or
                                     not isinstance(random_state, numbers.Integral)):
        raise TypeError(f"params['random_state'] is a {type(random_state).__name__}: the safe "
                        f"format stores an int or None (the generator's learnt state is part "
                        f"of the estimator's state); use pickle or joblib, for trusted use only")
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "streamfit_version": _version(), "estimator": name,
        "params": writer.encode(params, "params", True),
        "state": None, "state_object": None,
    }
    kind, state = _state_of(estimator)
    manifest["state_object"] = kind
    if state is not None:
        manifest["state"] = writer.encode(state, "state", False)
    text = json.dumps(manifest, allow_nan=False, ensure_ascii=True, sort_keys=True).encode()
    if len(text) > MAX_MANIFEST_BYTES:
        raise TypeError(f"the manifest would take {len(text)} bytes, above the format's "
                        f"{MAX_MANIFEST_BYTES}: store large values as arrays")
    if isinstance(file, (str, os.PathLike)):
        path = os.fspath(file)
        fd, tmp = tempfile.mkstemp(prefix=".streamfit-", suffix=".tmp",
                                   dir=os.path.dirname(os.path.abspath(path)))
        try:
            with os.fdopen(fd, "wb") as out:
                _write_zip(out, text, writer.arrays)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    elif hasattr(file, "write"):
        _write_zip(file, text, writer.arrays)
    else:
        raise TypeError(f"file must be a path or a writable binary file, got "
                        f"{type(file).__name__}")


def _write_zip(out, manifest, arrays):
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr(MANIFEST, manifest)
        for i, a in enumerate(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, a, allow_pickle=False)
            zf.writestr(f"arrays/{i}.npy", buffer.getvalue())


def _version():
    from streamfit import __version__

    return __version__


# -- reading --------------------------------------------------------------------------------
class _Reader:
    """Checks the archive's directory, then reads and decodes the manifest
    and the arrays it refers to."""

    def __init__(self, zf, size, what):
        self.zf, self.what = zf, what
        self.used = set()
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise self.refuse(f"has {len(infos)} members, more than the format's {MAX_MEMBERS}")
        names = [info.filename for info in infos]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise self.refuse(f"holds members named twice: {twice[:5]}")
        for info in infos:
            name = info.filename
            if name != MANIFEST and not _ARRAY_MEMBER.match(name):
                raise self.refuse(f"holds a member named {name[:200]!r}: a model file holds "
                                  f"only {MANIFEST} and arrays/<i>.npy")
            if info.flag_bits & 0x1:
                raise self.refuse(f"member {name}: encrypted")
            if info.compress_type != zipfile.ZIP_STORED:
                raise self.refuse(f"member {name}: compressed (method {info.compress_type}); "
                                  f"the format stores members uncompressed, so that no "
                                  f"member can declare more bytes than the file holds")
            if info.file_size != info.compress_size:
                raise self.refuse(f"member {name}: declares {info.file_size} bytes but "
                                  f"stores {info.compress_size}")
        # the members' data must lie one after another inside the file:
        # overlapping members (one stored block read as many) and sizes
        # beyond the file are refused before anything is read
        end = 0
        for info in sorted(infos, key=lambda i: i.header_offset):
            if info.header_offset < end:
                raise self.refuse(f"member {info.filename}: overlaps the member before it")
            end = (info.header_offset + _LOCAL_HEADER + len(info.filename.encode())
                   + info.compress_size)
            if end > size:
                raise self.refuse(f"member {info.filename}: declares {info.compress_size} "
                                  f"bytes, beyond the end of the file ({size} bytes)")
        self.infos = {info.filename: info for info in infos}

    def refuse(self, message):
        return ValueError(f"{self.what}: {message}")

    # the manifest
    def manifest(self):
        info = self.infos.get(MANIFEST)
        if info is None:
            raise self.refuse(f"has no {MANIFEST} (not a streamfit model file?)")
        if info.file_size > MAX_MANIFEST_BYTES:
            raise self.refuse(f"{MANIFEST} declares {info.file_size} bytes, more than the "
                              f"format's {MAX_MANIFEST_BYTES}")
        raw = self.read(info, info.file_size)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.refuse(f"{MANIFEST} is not UTF-8 ({exc.reason} at byte "
                              f"{exc.start})") from None

        def constant(name):
            raise ValueError(f"{name} is not a JSON number")

        def pairs(items):
            out = dict(items)
            if len(out) != len(items):
                seen = set()
                twice = next(k for k, _ in items if k in seen or seen.add(k))
                raise ValueError(f"an object has the key {_short(twice)} twice")
            return out

        try:
            manifest = json.loads(text, parse_constant=constant, object_pairs_hook=pairs)
        except RecursionError:
            raise self.refuse(f"{MANIFEST} is nested too deeply") from None
        except ValueError as exc:       # JSONDecodeError, the hooks', int digit limits
            raise self.refuse(f"{MANIFEST} is not valid JSON: {exc}") from None
        _check_depth(manifest, self.refuse)
        if not isinstance(manifest, dict):
            raise self.refuse(f"{MANIFEST} is a JSON {type(manifest).__name__}, not an object")
        unknown, missing = set(manifest) - _TOP, _TOP - set(manifest)
        if unknown:
            raise self.refuse(f"{MANIFEST} has unknown fields {sorted(unknown)[:5]}")
        if missing:
            raise self.refuse(f"{MANIFEST} lacks the fields {sorted(missing)}")
        if manifest["format"] != FORMAT:
            raise self.refuse(f"format is {_short(manifest['format'])}, not {FORMAT!r}")
        version = manifest["format_version"]
        if type(version) is not int:
            raise self.refuse(f"format_version is {_short(version)}, expected an integer")
        if version != FORMAT_VERSION:
            raise self.refuse(f"format_version is {version}; this streamfit reads version "
                              f"{FORMAT_VERSION}" + (" (the file is from a newer streamfit)"
                                                     if version > FORMAT_VERSION else ""))
        return manifest

    # arrays
    def read(self, info, n):
        """The member's n bytes (n checked against the member before)."""
        try:
            with self.zf.open(info) as f:
                data = f.read(n)
                extra = f.read(1)
        except _ZIP_ERRORS as exc:
            raise self.refuse(f"member {info.filename}: {exc}") from None
        if len(data) != n or extra:
            raise self.refuse(f"member {info.filename}: holds {len(data)} bytes, expected {n}")
        return data

    def array(self, name, where):
        info = self.infos.get(name) if isinstance(name, str) else None
        if info is None or name == MANIFEST:
            raise self.refuse(f"{where} refers to the array {_short(name)}, which is not a "
                              f"member of the file")
        if name in self.used:
            raise self.refuse(f"{where} refers to {name}, which another value refers to")
        self.used.add(name)
        try:
            with self.zf.open(info) as f:
                header, shape, dtype = _npy_header(f)
                n = math.prod(shape) * dtype.itemsize
                if header + n != info.file_size:
                    raise ValueError(f"declares shape {shape} of {dtype} ({n} bytes) but holds "
                                     f"{info.file_size - header} bytes of data")
                out = np.empty(shape, dtype=_DTYPES[dtype.str])
                if n:
                    got = f.readinto(memoryview(out).cast("B"))
                    if got != n:
                        raise ValueError(f"holds {got} bytes of data, expected {n}")
                if f.read(1):
                    raise ValueError("holds bytes after the array")
        except _ZIP_ERRORS as exc:
            raise self.refuse(f"{where} ({name}): {exc}") from None
        return out

    def decode(self, value, where, params, depth=0):
        if value is None or isinstance(value, (bool, str, int)):
            return value
        if isinstance(value, float):
            return value                # finite: json refused NaN and Infinity
        if isinstance(value, list):
            return [self.decode(v, f"{where}[{i}]", params) for i, v in enumerate(value)]
        tagged = [key for key in value if key.startswith("$")]
        if not tagged:
            return {key: self.decode(v, f"{where}[{key!r}]", params)
                    for key, v in value.items()}
        tag = tagged[0]
        if tag not in _TAGS or (tag == "$schedule" and not params):
            raise self.refuse(f"{where}: unknown tag {_short(tag)}")
        expected = {"$schedule": {"$schedule", "params"}}.get(tag, {tag})
        if set(value) != expected:
            raise self.refuse(f"{where}: a {tag} value has the fields {sorted(value)[:5]}, "
                              f"expected {sorted(expected)}")
        body = value[tag]
        if tag == "$float":
            if body not in ("nan", "inf", "-inf"):
                raise self.refuse(f"{where}: $float is {_short(body)}, expected 'nan', 'inf' "
                                  f"or '-inf'")
            return float(body)
        if tag == "$array":
            return self.array(body, where)
        if tag == "$tuple":
            if not isinstance(body, list):
                raise self.refuse(f"{where}: $tuple holds a {type(body).__name__}, not a list")
            return tuple(self.decode(v, f"{where}[{i}]", params) for i, v in enumerate(body))
        cls = _schedule_classes().get(body) if isinstance(body, str) else None
        if cls is None:
            raise self.refuse(f"{where}: $schedule is {_short(body)}, not one of "
                              f"{', '.join(SCHEDULES)}")
        kwargs = value["params"]
        if not isinstance(kwargs, dict) or any(k.startswith("$") for k in kwargs):
            raise self.refuse(f"{where}: the schedule's params are not an object of parameters")
        return _construct(cls, self.decode(kwargs, f"{where}.params", params), where,
                          self.refuse)


def _short(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_depth(value, refuse):
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise refuse(f"{MANIFEST} is nested deeper than the format's {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _npy_header(f):
    """(header bytes, shape, dtype) of the .npy stream f, checked: a float64
    or int64 C-ordered array of at most MAX_NDIM dimensions."""
    try:
        version = np.lib.format.read_magic(f)
    except ValueError:
        raise ValueError("is not a .npy array") from None
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(
            f, max_header_size=MAX_NPY_HEADER)
    elif version in ((2, 0), (3, 0)):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(
            f, max_header_size=MAX_NPY_HEADER)
    else:       # pragma: no cover - read_magic accepts only 1.0, 2.0 and 3.0 files
        raise ValueError(f"is a .npy file of version {version}")
    if dtype.str not in _DTYPES:
        raise ValueError(f"has dtype {dtype.descr if dtype.fields else dtype.str!s}, expected "
                         f"little-endian float64 or int64 (<f8, <i8)")
    if fortran:
        raise ValueError("is Fortran-ordered; the format stores C-ordered arrays")
    if len(shape) > MAX_NDIM or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"has shape {_short(shape)}")
    return f.tell(), shape, dtype


def _construct(cls, kwargs, where, refuse):
    names = set(cls._get_param_names())
    unknown = sorted(set(kwargs) - names)
    if unknown:
        raise refuse(f"{where}: {cls.__name__} has no parameters {unknown[:5]}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise refuse(f"{where}: {cls.__name__}({_short(kwargs)}) refused: {exc}") from None


def _file_size(file):
    if isinstance(file, (str, os.PathLike)):
        return os.stat(file).st_size
    position = file.tell()
    size = file.seek(0, os.SEEK_END)
    file.seek(position)
    return size


def load(file: FileLike) -> Estimator:
    """Load an estimator saved by :func:`save`, running no code from the file.

    The file is checked before anything in it is used, and refused with a
    ValueError naming what is wrong: members other than ``manifest.json``
    and ``arrays/<i>.npy`` (path tricks, duplicates), compressed, encrypted,
    overlapping or truncated members, sizes that the file does not hold (no
    allocation follows a declared size before the bytes are there: every
    array's size is the file's own), a manifest that is not UTF-8 JSON
    (NaN and Infinity refused, objects with a key twice, nesting deeper
    than 16, above 1 MiB), an unknown format version, an estimator or
    schedule class outside streamfit's public ones, parameters the class
    does not have or refuses, arrays other than float64/int64 (object
    arrays, pickles), and any state field the estimator's own loader
    refuses (the field named: type, dtype, shape, range, finiteness,
    consistency).

    Parameters
    ----------
    file : str, os.PathLike or binary file object
        Readable and seekable.

    Returns
    -------
    estimator
        A new estimator of the saved class and parameters, with the saved
        state (or unfitted, if it was saved unfitted).

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> import streamfit
    >>> X = np.random.default_rng(1).standard_normal((40, 4))
    >>> buffer = io.BytesIO()
    >>> streamfit.save(streamfit.FollowTheLeaderPCA(1).partial_fit(X), buffer)
    >>> ftl = streamfit.load(io.BytesIO(buffer.getvalue()))
    >>> ftl.n_trials_, ftl.components_.shape
    (40, (1, 4))
    >>> buffer = io.BytesIO(buffer.getvalue()[:100])        # truncated
    >>> try:
    ...     streamfit.load(buffer)
    ... except ValueError as exc:
    ...     print(exc)
    streamfit.load: <BytesIO>: not a zip archive, or a truncated one (File is not a zip file)
    """
    if isinstance(file, (str, os.PathLike)):
        what = f"streamfit.load: {os.fspath(file)!r}"
    elif hasattr(file, "read") and hasattr(file, "seek"):
        what = f"streamfit.load: <{type(file).__name__}>"
    else:
        raise TypeError(f"file must be a path or a readable, seekable binary file, got "
                        f"{type(file).__name__}")
    size = _file_size(file)
    try:
        zf = zipfile.ZipFile(file)
    except _ZIP_ERRORS as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{what}: not a zip archive, or a truncated one ({exc})") from None
    with zf:
        return _load(_Reader(zf, size, what))


def _load(reader):
    manifest = reader.manifest()
    classes = _estimator_classes()
    name = manifest["estimator"]
    cls = classes.get(name) if isinstance(name, str) else None
    if cls is None:
        raise reader.refuse(f"estimator is {_short(name)}, not one of streamfit's "
                            f"({', '.join(ESTIMATORS)})")
    if not isinstance(manifest["params"], dict):
        raise reader.refuse(f"params is a JSON {type(manifest['params']).__name__}, not an "
                            f"object")
    params = reader.decode(manifest["params"], "params", True)
    estimator = _construct(cls, params, "params", reader.refuse)
    state = manifest["state"]
    if state is not None:
        if not isinstance(state, dict):
            raise reader.refuse(f"state is a JSON {type(state).__name__}, not an object or "
                                f"null")
        state = reader.decode(state, "state", False)
    unused = sorted(set(reader.infos) - reader.used - {MANIFEST})
    if unused:
        raise reader.refuse(f"holds arrays no value refers to: {unused[:5]}")
    kind = manifest["state_object"]
    if kind is not None:
        if state is None:
            raise reader.refuse(f"state_object is {_short(kind)} but state is null")
        _install(reader, estimator, kind, state)
        return estimator
    if state is not None:
        raise reader.refuse(f"holds a state for {name} but state_object is null")
    return estimator


# what a state object's checker may raise on a hostile dict, besides its
# ValueError naming the field (a check that indexes before it tests): all
# refused the same way
_STATE_ERRORS = (ValueError, TypeError, KeyError, IndexError, OverflowError)


def _install(reader, estimator, kind, state):
    """Rebuild the state object ``kind`` from ``state`` (every field checked
    by its own from_state), apply the estimator's parameters to it, and
    install it as unpickling does."""
    name = type(estimator).__name__
    expected = ESTIMATOR_STATES.get(name)
    if kind != expected:
        raise reader.refuse(f"state_object is {_short(kind)}; {name} holds a {expected}")
    cls = _state_class(kind)
    if cls is None:
        raise reader.refuse(f"state_object is {kind}, which this build of streamfit does not "
                            f"have (a file from a newer streamfit?)")
    declared = getattr(type(estimator), "_STATE_TYPE", cls)
    if declared is not cls:         # pragma: no cover - the tables follow the estimators
        raise reader.refuse(f"internal error: {name} holds a {declared.__name__}, the table "
                            f"says {kind}")
    try:
        obj = cls.from_state(state)
    except _STATE_ERRORS as exc:
        raise reader.refuse(f"state: {exc}") from None
    if type(obj) is not cls:        # pragma: no cover - from_state builds its own class
        raise reader.refuse(f"state: {kind}.from_state built a {type(obj).__name__}")
    # The saved parameters, applied as a call after set_params applies them:
    # equal ones (a file save() wrote) change nothing; others take effect as
    # documented, or are refused naming the setting the learnt state cannot
    # take (tau, mode, loss, ...), so that the estimator never holds a state
    # its parameters contradict.
    settings, key = getattr(estimator, "_settings", None), getattr(estimator, "_key", None)
    if callable(settings) and callable(key) and callable(getattr(obj, "configure", None)):
        try:
            obj.configure(**settings())
        except _STATE_ERRORS as exc:
            raise reader.refuse(f"params do not fit the state: {exc}") from None
        obj.source = key()
    # published as unpickling publishes it: the estimator's own __setstate__,
    # with its checks of a loaded state and what it does after (the PCA
    # estimators link the state's generator to random_state)
    pickled = dict(vars(estimator))
    pickled["_state"] = obj
    try:
        estimator.__setstate__(pickled)
    except (TypeError, ValueError) as exc:
        raise reader.refuse(f"state: {exc}") from None
