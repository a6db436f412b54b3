"""Hostile model files for streamfit.load, run in child processes by
test_safe_format.py (a crash or a hang is recorded, not suffered).

Every file here is made from a valid one by one attack: a FollowTheLeaderPCA
fitted on a fixed stream (its state object, LeaderState), or an
OnlineQuantileRegressor (attacks named "qr: ...": its state object, LinearSGD;
both saved by to_state and loaded by from_state). :func:`attack` loads it and returns what
happened: refused (the exception's type and message) or loaded (then the
estimator is used: a state that passed the checks must work), and the peak
of memory traced during the load, which must stay far below any declared
size.
"""
import functools
import io
import json
import os
import pickle
import struct
import tracemalloc
import warnings
import zipfile

import numpy as np

MARKER = os.environ.get("STREAMFIT_TEST_MARKER", "")


def _rows():
    return np.random.default_rng(0).standard_normal((120, 6))


@functools.lru_cache(maxsize=None)
def valid_file():
    import streamfit

    ftl = streamfit.FollowTheLeaderPCA(2).partial_fit(_rows()[:100])
    out = io.BytesIO()
    streamfit.save(ftl, out)
    return out.getvalue()


def _target(rows):
    return rows @ np.arange(1.0, 7.0) + 3.0


@functools.lru_cache(maxsize=None)
def valid_qr_file():
    import streamfit

    # batch mode with rows pending (a partial batch), averaged: most of
    # LinearSGD's sections are in the file
    rows = _rows()[:100]
    qr = streamfit.OnlineQuantileRegressor(0.3, mode="batch", batch_size=16,
                                           average=True).partial_fit(rows, _target(rows))
    out = io.BytesIO()
    streamfit.save(qr, out)
    return out.getvalue()


def members(data):
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return [(info.filename, zf.read(info)) for info in zf.infolist()]


def rebuild(items, compression=zipfile.ZIP_STORED):
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # zipfile warns on a duplicate name
        with zipfile.ZipFile(out, "w", compression=compression) as zf:
            for name, payload in items:
                zf.writestr(name, payload)
    return out.getvalue()


def manifest_of(data):
    return json.loads(dict(members(data))["manifest.json"])


def with_manifest(data, manifest=None, raw=None):
    text = raw if raw is not None else json.dumps(manifest).encode()
    return rebuild([(n, text if n == "manifest.json" else p) for n, p in members(data)])


def edit_manifest(data, edit):
    manifest = manifest_of(data)
    edit(manifest)
    return with_manifest(data, manifest)


def with_member(data, name, payload):
    return rebuild([(n, payload if n == name else p) for n, p in members(data)])


def npy(array, allow_pickle=False):
    out = io.BytesIO()
    np.lib.format.write_array(out, array, allow_pickle=allow_pickle)
    return out.getvalue()


def npy_header(descr, shape, fortran=False, payload=b""):
    """A .npy file whose header declares anything, with ``payload`` after it."""
    header = {"descr": descr, "fortran_order": fortran, "shape": shape}
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue() + payload


def state_array(data, field):
    """The member holding a state object's state[field]."""
    return manifest_of(data)["state"][field]["$array"]


def _cd_records(data):
    """[(offset of the record, name)] of the central directory."""
    out, i = [], 0
    while True:
        i = data.find(b"PK\x01\x02", i)
        if i < 0:
            return out
        n = struct.unpack_from("<H", data, i + 28)[0]
        out.append((i, data[i + 46:i + 46 + n].decode()))
        i += 46 + n


def patch_cd(data, name, **fields):
    """Rewrite fields of a member's central-directory record: flags,
    method, csize, usize, offset."""
    at = {"flags": (8, "<H"), "method": (10, "<H"), "csize": (20, "<I"),
          "usize": (24, "<I"), "offset": (42, "<I")}
    data = bytearray(data)
    for i, n in _cd_records(bytes(data)):
        if n == name:
            for key, value in fields.items():
                offset, fmt = at[key]
                struct.pack_into(fmt, data, i + offset, value)
            return bytes(data)
    raise KeyError(name)


def duplicate_cd(data, name, new_name):
    """A second central-directory record for ``name``'s data under
    ``new_name`` (same length): two members reading one stored block."""
    assert len(new_name) == len(name)
    records = _cd_records(data)
    eocd = data.rfind(b"PK\x05\x06")
    start = records[0][0]
    i = next(i for i, n in records if n == name)
    n, m, k = struct.unpack_from("<HHH", data, i + 28)
    record = bytearray(data[i:i + 46 + n + m + k])
    record[46:46 + n] = new_name.encode()
    cd = data[start:eocd] + bytes(record)
    count, size = struct.unpack_from("<HHII", data, eocd + 8)[1], len(cd)
    tail = bytearray(data[eocd:])
    struct.pack_into("<HHI", tail, 8, count + 1, count + 1, size)
    return data[:start] + cd + bytes(tail)


class _Marker:
    """Unpickling it creates MARKER: proof that a pickle ran."""

    def __reduce__(self):
        return (open, (MARKER, "w"))


def _pickle_payload():
    return pickle.dumps(_Marker())


def _object_array_payload():
    a = np.empty(1, dtype=object)
    a[0] = _Marker()
    return npy(a, allow_pickle=True)


# -- the attacks ---------------------------------------------------------------------------
def _attacks():
    v = valid_file()
    arrays = sorted(n for n, _ in members(v) if n != "manifest.json")
    perturbed = arrays[0]
    A = {}

    # the file as a whole
    A["empty file"] = lambda: b""
    A["random bytes"] = lambda: np.random.default_rng(1).bytes(4000)
    A["a pickle, not a zip"] = _pickle_payload
    A["a .npy, not a zip"] = lambda: npy(np.zeros(3))
    A["truncated to half"] = lambda: v[:len(v) // 2]
    A["truncated by one byte"] = lambda: v[:-1]
    A["central directory cut"] = lambda: v[:v.rfind(b"PK\x01\x02")] + v[v.rfind(b"PK\x05\x06"):]
    # members: names
    A["path ../"] = lambda: rebuild(members(v) + [("../evil.npy", npy(np.zeros(1)))])
    A["absolute path"] = lambda: rebuild(members(v) + [("/tmp/evil.npy", npy(np.zeros(1)))])
    A["arrays/../manifest.json"] = lambda: rebuild(
        [("arrays/../manifest.json" if n == "manifest.json" else n, p) for n, p in members(v)])
    A["backslash name"] = lambda: rebuild(members(v) + [("arrays\\9.npy", npy(np.zeros(1)))])
    A["leading zero index"] = lambda: rebuild(members(v) + [("arrays/07.npy", npy(np.zeros(1)))])
    A["duplicate manifest"] = lambda: rebuild(
        members(v) + [("manifest.json", json.dumps(manifest_of(v)).encode())])
    A["duplicate array name"] = lambda: rebuild(members(v) + [(perturbed, npy(np.eye(6)))])
    A["a pickle member"] = lambda: rebuild(members(v) + [("model.pkl", _pickle_payload())])
    A["no manifest"] = lambda: rebuild([(n, p) for n, p in members(v) if n != "manifest.json"])
    A["unreferenced array"] = lambda: rebuild(members(v) + [("arrays/99.npy", npy(np.zeros(2)))])
    A["5,000 members"] = lambda: rebuild(
        members(v) + [(f"arrays/{i}.npy", b"") for i in range(10, 5010)])
    # members: sizes and storage
    A["zip bomb (deflated 200 MB of zeros)"] = lambda: _bomb(v)
    A["deflated manifest"] = lambda: rebuild(members(v), compression=zipfile.ZIP_DEFLATED)
    A["overlapping members"] = lambda: duplicate_cd(v, perturbed, _sibling(perturbed))
    A["member declares 4 GiB"] = lambda: patch_cd(v, perturbed, csize=2 ** 32 - 1,
                                                  usize=2 ** 32 - 1)
    A["member sizes disagree"] = lambda: patch_cd(v, perturbed, usize=2 ** 31)
    A["manifest declares 2 GiB"] = lambda: patch_cd(v, "manifest.json", csize=2 ** 31,
                                                    usize=2 ** 31)
    A["manifest of 2 MiB"] = lambda: edit_manifest(
        v, lambda m: m.update(streamfit_version="x" * (2 << 20)))
    A["encrypted flag"] = lambda: patch_cd(v, perturbed, flags=1)
    A["data edited (bad CRC)"] = lambda: _flip_in_member(v, perturbed)
    # arrays: headers
    A["npy declares 2^40 floats"] = lambda: with_member(
        v, perturbed, npy_header("<f8", (2 ** 40,), payload=b"\0" * 16))
    A["npy declares 2^62 x 2^62"] = lambda: with_member(
        v, perturbed, npy_header("<f8", (2 ** 62, 2 ** 62), payload=b"\0" * 16))
    A["npy shorter than declared"] = lambda: with_member(
        v, perturbed, npy(np.eye(6))[:-8])
    A["npy with bytes after the data"] = lambda: with_member(
        v, perturbed, npy(np.eye(6)) + b"\0" * 8)
    A["npy header of 100 kB"] = lambda: with_member(
        v, perturbed, b"\x93NUMPY\x02\x00" + struct.pack("<I", 100_000) + b" " * 100_000)
    A["not a .npy member"] = lambda: with_member(v, perturbed, b"hello, world")
    A["pickled member as .npy"] = lambda: with_member(v, perturbed, _pickle_payload())
    A["object array (pickled payload)"] = lambda: with_member(v, perturbed,
                                                              _object_array_payload())
    A["float32 array"] = lambda: with_member(v, perturbed, npy(np.eye(6, dtype=np.float32)))
    A["big-endian float64"] = lambda: with_member(v, perturbed, npy(np.eye(6, dtype=">f8")))
    A["complex array"] = lambda: with_member(v, perturbed, npy(np.eye(6, dtype=complex)))
    A["bool array"] = lambda: with_member(v, perturbed, npy(np.eye(6, dtype=bool)))
    A["string array"] = lambda: with_member(v, perturbed, npy(np.array(["a"] * 36)))
    A["structured array"] = lambda: with_member(
        v, perturbed, npy(np.zeros(6, dtype=[("a", "<f8"), ("b", "<i8")])))
    A["Fortran-ordered array"] = lambda: with_member(v, perturbed,
                                                     npy(np.asfortranarray(np.eye(6)[:, :5])))
    A["int64 where float64 belongs"] = lambda: with_member(v, perturbed,
                                                           npy(np.eye(6, dtype=np.int64)))
    # the manifest: encoding and syntax
    A["manifest not UTF-8"] = lambda: with_manifest(
        v, raw=json.dumps(manifest_of(v)).encode().replace(b'"auto"', b'"aut\xe9"'))
    A["manifest UTF-16"] = lambda: with_manifest(v, raw=json.dumps(manifest_of(v))
                                                 .encode("utf-16"))
    A["manifest not JSON"] = lambda: with_manifest(v, raw=b"{'format': 1}")
    A["manifest nested 100,000 deep"] = lambda: with_manifest(
        v, raw=b"[" * 100_000 + b"]" * 100_000)
    A["manifest nested 17 deep"] = lambda: edit_manifest(
        v, lambda m: m["params"].update(tol=_nest(17)))
    A["NaN token"] = lambda: with_manifest(v, raw=json.dumps(manifest_of(v)).encode()
                                           .replace(b'"tol": 0.01', b'"tol": NaN'))
    A["Infinity token"] = lambda: with_manifest(v, raw=json.dumps(manifest_of(v)).encode()
                                                .replace(b'"tol": 0.01', b'"tol": -Infinity'))
    A["duplicate key"] = lambda: with_manifest(v, raw=json.dumps(manifest_of(v)).encode()
                                               .replace(b'"tol": 0.01', b'"tol": 0.01, "tol": 1'))
    A["integer of 100,000 digits"] = lambda: with_manifest(
        v, raw=json.dumps(manifest_of(v)).encode().replace(b'"tol": 0.01',
                                                           b'"tol": ' + b"9" * 100_000))
    A["manifest is a list"] = lambda: with_manifest(v, raw=b"[]")
    # the manifest: fields
    A["format edited"] = lambda: edit_manifest(v, lambda m: m.update(format="pickle"))
    A["format_version 2"] = lambda: edit_manifest(v, lambda m: m.update(format_version=2))
    A["format_version '1'"] = lambda: edit_manifest(v, lambda m: m.update(format_version="1"))
    A["format_version true"] = lambda: edit_manifest(v, lambda m: m.update(format_version=True))
    A["unknown top-level field"] = lambda: edit_manifest(v, lambda m: m.update(code="x"))
    A["estimator os.system"] = lambda: edit_manifest(v, lambda m: m.update(estimator="os.system"))
    A["estimator of another module"] = lambda: edit_manifest(
        v, lambda m: m.update(estimator="sklearn.linear_model.SGDRegressor"))
    A["estimator a number"] = lambda: edit_manifest(v, lambda m: m.update(estimator=5))
    A["estimator another class"] = lambda: edit_manifest(
        v, lambda m: m.update(estimator="MatrixEGPCA"))
    A["unknown parameter"] = lambda: edit_manifest(v, lambda m: m["params"].update(evil=1))
    A["unknown tag"] = lambda: edit_manifest(
        v, lambda m: m["params"].update(tol={"$eval": "__import__('os')"}))
    A["$schedule FunctionSchedule"] = lambda: edit_manifest(
        v, lambda m: m["params"].update(tol={"$schedule": "FunctionSchedule",
                                             "params": {"func": None}}))
    A["$schedule in the state"] = lambda: edit_manifest(
        v, lambda m: m["state"].update(instances_={"$schedule": "ConstantSchedule",
                                                   "params": {}}))
    A["$float 1e308"] = lambda: edit_manifest(v, lambda m: m["params"].update(
        tol={"$float": "1e308"}))
    # (a state object's file: its state dict holds the arrays by name)
    q = valid_qr_file()
    A["$array to a missing member"] = lambda: edit_manifest(
        q, lambda m: m["state"].update(coef={"$array": "arrays/77.npy"}))
    A["$array to the manifest"] = lambda: edit_manifest(
        q, lambda m: m["state"].update(coef={"$array": "manifest.json"}))
    A["$array twice"] = lambda: rebuild(
        [(n, p) for n, p in members(edit_manifest(q, lambda m: m["state"].update(
            coef_avg=m["state"]["coef"])))
         if n != manifest_of(q)["state"]["coef_avg"]["$array"]])
    A["state is a list"] = lambda: edit_manifest(v, lambda m: m.update(state=[1, 2]))
    A.update(_qr_attacks())
    return A


def _qr_attacks():
    """A state object's file (LinearSGD): the class it names, and fields
    its from_state checks."""
    q = valid_qr_file()
    coef, records = state_array(q, "coef"), state_array(q, "records")
    A = {}

    def edit(f):
        return lambda: edit_manifest(q, f)

    def settings(**changes):
        return edit(lambda m: m["state"]["settings"].update(changes))

    # the class: only the one a QR holds, looked up in streamfit's table
    A["qr: state_object os.system"] = edit(lambda m: m.update(state_object="os.system"))
    A["qr: state_object a dotted path"] = edit(
        lambda m: m.update(state_object="streamfit._kernels._quantile.LinearSGD"))
    A["qr: state_object builtins.eval"] = edit(lambda m: m.update(state_object="eval"))
    A["qr: state_object another family's"] = edit(lambda m: m.update(state_object="IntervalState"))
    A["qr: state_object a list"] = edit(lambda m: m.update(state_object=["LinearSGD"]))
    A["qr: state_object with state null"] = edit(lambda m: m.update(state=None))
    A["qr: state_object dropped"] = edit(lambda m: m.update(state_object=None))
    # pickles and objects where arrays belong
    A["qr: pickled member as coef"] = lambda: with_member(q, coef, _pickle_payload())
    A["qr: object array as coef"] = lambda: with_member(q, coef, _object_array_payload())
    A["qr: a schedule object by name"] = settings(
        schedule={"class": "FunctionSchedule", "params": {"func": "os.system"}})
    A["qr: a schedule of another module"] = settings(
        schedule={"class": "subprocess.Popen", "params": {}})
    A["qr: a schedule with an unknown parameter"] = settings(
        schedule={"class": "ConstantSchedule", "params": {"eta": 0.1, "code": "x"}})
    # the fields from_state checks
    A["qr: state format 99"] = edit(lambda m: m["state"].update(format=99))
    A["qr: state field added"] = edit(lambda m: m["state"].update(evil=1))
    A["qr: state field missing"] = edit(lambda m: m["state"].pop("refuse_new"))
    A["qr: settings tau 2"] = settings(tau=2.0)
    A["qr: settings mode unknown"] = settings(mode="exec")
    A["qr: settings n_features 7"] = settings(n_features=7)
    A["qr: coef NaN"] = lambda: with_member(q, coef, npy(np.full((1, 6), np.nan)))
    A["qr: coef wrong shape"] = lambda: with_member(q, coef, npy(np.zeros((1, 5))))
    A["qr: coef int64"] = lambda: with_member(q, coef, npy(np.zeros((1, 6), dtype=np.int64)))
    A["qr: records wrong shape"] = lambda: with_member(q, records, npy(np.zeros((1, 3))))
    A["qr: pending rows in single mode"] = lambda: _qr_with(mode="single")
    # parameters the learnt state cannot take (another tau, mode)
    A["qr: params tau 0.9"] = edit(lambda m: m["params"].update(tau=0.9))
    A["qr: params mode storage"] = edit(lambda m: m["params"].update(mode="storage"))
    return A


def _qr_with(**settings):
    """The qr file with its state's settings changed (the rows it holds
    kept): a state inconsistent with its own settings."""
    q = valid_qr_file()
    m = manifest_of(q)
    m["state"]["settings"].update(settings)
    m["params"].update(settings)
    return with_manifest(q, m)


def _sibling(name):
    # a name of the same length that the file does not hold (it has 5 arrays)
    digits = name[len("arrays/"):-len(".npy")]
    return f"arrays/{'9' * len(digits)}.npy"


def _nest(depth):
    value = 0.01
    for _ in range(depth):
        value = [value]
    return value


def _bomb(v):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, payload in members(v):
            zf.writestr(name, payload)
        with zf.open("arrays/50.npy", "w") as f:
            f.write(npy_header("<f8", (25_000_000,)))
            chunk = bytes(1 << 20)
            for _ in range(200):
                f.write(chunk)
    return out.getvalue()


def _flip_in_member(v, name):
    with zipfile.ZipFile(io.BytesIO(v)) as zf:
        info = zf.getinfo(name)
    # the member's data: after the local header (30 bytes, its name and extra)
    n, m = struct.unpack_from("<HH", v, info.header_offset + 26)
    at = info.header_offset + 30 + n + m + info.file_size - 3
    data = bytearray(v)
    data[at] ^= 0x40
    return bytes(data)


ATTACKS = None


def names():
    return list(_attacks())


def _load_traced(data):
    import streamfit

    tracemalloc.start()
    try:
        est = streamfit.load(io.BytesIO(data))
        return est, None, tracemalloc.get_traced_memory()[1]
    except Exception as exc:        # noqa: BLE001 - the outcome is the answer
        return None, exc, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _use(est):
    # a loaded state must work: the next rows are learnt and the estimator
    # answers
    rows = _rows()
    if hasattr(est, "transform"):
        est.partial_fit(rows[100:])
        return bool(np.isfinite(est.transform(rows[:5])).all())
    est.partial_fit(rows[100:], _target(rows[100:]))
    return bool(np.isfinite(est.predict(rows[:5])).all())


def attack(name):
    """Build the named hostile file, load it; the outcome as a dict."""
    global ATTACKS
    if ATTACKS is None:
        ATTACKS = _attacks()
    data = ATTACKS[name]()
    est, exc, peak = _load_traced(data)
    out = {"size": len(data), "peak": peak,
           "marker": bool(MARKER) and os.path.exists(MARKER)}
    if exc is not None:
        out.update(refused=True, type=type(exc).__name__,
                   mro=[c.__name__ for c in type(exc).__mro__], message=str(exc)[:1000])
    else:
        out.update(refused=False, used=_use(est))
    return out


def random_edit(seed):
    """One random edit of a valid file (bytes changed, cut or inserted
    anywhere; odd seeds the qr file): refused with a ValueError, or loaded
    and usable."""
    rng = np.random.default_rng(seed)
    data = bytearray(valid_qr_file() if seed % 2 else valid_file())
    kind = ("flip", "cut", "insert", "zero")[seed // 2 % 4]
    at = int(rng.integers(0, len(data)))
    if kind == "flip":
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data)))] ^= 1 << int(rng.integers(0, 8))
    elif kind == "cut":
        del data[at:at + int(rng.integers(1, 64))]
    elif kind == "insert":
        data[at:at] = rng.bytes(int(rng.integers(1, 16)))
    else:
        data[at:at + 8] = bytes(min(8, len(data) - at))
    est, exc, peak = _load_traced(bytes(data))
    out = {"kind": kind, "peak": peak}
    if exc is not None:
        out.update(refused=True, type=type(exc).__name__, message=str(exc)[:300])
    else:
        out.update(refused=False, used=_use(est))
    return out
