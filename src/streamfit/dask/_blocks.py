"""Dask collections as ordered row blocks: one block per chunk of a Dask array
(rows; the columns are joined into one chunk) or per partition of a Dask
DataFrame or Series. Everything here runs on the client and reads metadata
only: no chunk is computed.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np

from ._client import SchedulerTimeout, ask

__all__ = ["Blocks", "row_blocks", "is_frame", "submit_block", "resident_blocks"]


def is_frame(obj):
    """A Dask DataFrame or Series (without importing dask.dataframe, which a
    user holding one has already imported)."""
    dd = sys.modules.get("dask.dataframe")
    return dd is not None and isinstance(obj, (dd.DataFrame, dd.Series))


def _check_dtype(dtype, name):
    if np.dtype(dtype).kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {dtype}")


def _frame_dtypes(frame, name):
    import pandas as pd

    dtypes = frame.dtypes if frame.ndim == 2 else pd.Series({frame.name: frame.dtype})
    for column, dtype in dtypes.items():
        if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)):
            raise TypeError(f"{name} column {column!r} must hold real numbers, got dtype "
                            f"{dtype}")


def _array_blocks(a, name, ndims):
    if a.ndim not in ndims:
        shape = " or ".join(f"{d}-dimensional" for d in ndims)
        raise ValueError(f"{name} must be {shape}, got a Dask array of shape {a.shape}")
    _check_dtype(a.dtype, name)
    rows = a.chunks[0]
    if any(np.isnan(r) for r in rows):
        raise ValueError(f"{name} has unknown chunk sizes (NaN rows per chunk), so its "
                         f"alignment with the other arguments cannot be checked before the "
                         f"run: call {name}.compute_chunk_sizes() first (or pass the Dask "
                         f"DataFrame it came from)")
    if a.ndim > 1 and any(len(c) > 1 for c in a.chunks[1:]):
        # one chunk per row block: the columns of a block are joined on a worker
        a = a.rechunk({axis: -1 for axis in range(1, a.ndim)})
    # Unoptimised per collection: X and y chunks made by one task (a reader,
    # a generator) then share that task's key, and computing a block's X and
    # y together runs it once (optimising each collection on its own would
    # fuse a copy of it into each).
    delayed = a.to_delayed(optimize_graph=False).reshape(a.numblocks[0], -1)[:, 0]
    return list(delayed), [int(r) for r in rows]


@dataclass
class Blocks:
    """Aligned row blocks: ``items[i]`` is the tuple of Delayed (X, and y,
    sample_weight when given) of block i; ``rows[i]`` its row count, or None
    when unknown (DataFrame partitions; then checked on the worker)."""

    items: list
    rows: list
    kinds: tuple
    n_features: int | None

    def __len__(self):
        return len(self.items)

    def describe(self, i):
        """Where block i is in the stream, for error messages."""
        unit = "chunk" if self.kinds[0] == "array" else "partition"
        if self.rows[i] is None:
            return f"{unit} {i} of {len(self)}"
        start = sum(self.rows[:i])
        return f"{unit} {i} of {len(self)} (rows {start}..{start + self.rows[i] - 1})"


def _one(obj, name, ndims):
    if isinstance(obj, da.Array):
        delayed, rows = _array_blocks(obj, name, ndims)
        return delayed, rows, "array"
    if is_frame(obj):
        _frame_dtypes(obj, name)
        if obj.ndim not in ndims:
            what = "DataFrame" if obj.ndim == 2 else "Series"
            raise ValueError(f"{name} must be {'a Series' if 2 not in ndims else 'a DataFrame'}"
                             f", got a Dask {what}")
        return list(obj.to_delayed()), [None] * obj.npartitions, "frame"
    if dask.is_dask_collection(obj):
        raise TypeError(f"{name} must be a Dask array, DataFrame or Series, got a "
                        f"{type(obj).__name__}")
    raise TypeError(f"{name} must be a Dask array, DataFrame or Series, got "
                    f"{type(obj).__name__}; for data in memory, call the estimator's own "
                    f"partial_fit/fit (or wrap it with dask.array.from_array)")


def row_blocks(X, y=None, sample_weight=None, *, x_ndims=(2,)):
    """Check X (and y, sample_weight) and return their aligned :class:`Blocks`.

    Dask arrays must have known chunk sizes and identical row chunks; Dask
    DataFrames/Series must have the same number of partitions (and the same
    divisions when both are known); the rows of each partition are checked on
    the worker that holds it.
    """
    if dask.is_dask_collection(X) and hasattr(X, "ndim") and X.ndim == 1 and 1 not in x_ndims:
        raise ValueError("X must be 2-dimensional (n_samples, n_features), got a 1-dimensional "
                         "Dask collection; use X.reshape(-1, 1) (array) or X.to_frame() "
                         "(Series) for a single feature")
    parts = [("X", X, x_ndims)]
    if y is not None:
        parts.append(("y", y, (1, 2)))
    if sample_weight is not None:
        parts.append(("sample_weight", sample_weight, (1,)))
    split = [(name,) + _one(obj, name, ndims) for name, obj, ndims in parts]
    x_delayed, x_rows, x_kind = split[0][1:]
    n_blocks = len(x_delayed)
    for name, delayed, rows, kind in split[1:]:
        obj = y if name == "y" else sample_weight
        if x_kind == kind == "array":
            if sum(rows) != sum(x_rows):
                raise ValueError(f"{name} has {sum(rows)} rows but X has {sum(x_rows)}")
            if rows != x_rows:
                raise ValueError(f"{name}'s chunks {tuple(rows)} differ from X's row chunks "
                                 f"{tuple(x_rows)}: align them, e.g. "
                                 f"{name} = {name}.rechunk((X.chunks[0],))")
        elif len(delayed) != n_blocks:
            raise ValueError(f"{name} has {len(delayed)} {'chunks' if kind == 'array' else 'partitions'}"
                             f" but X has {n_blocks}: X and {name} must be split alike "
                             f"(the same partitions, or the same row chunks)")
        if x_kind == kind == "frame" and X.known_divisions and obj.known_divisions \
                and tuple(X.divisions) != tuple(obj.divisions):
            raise ValueError(f"{name}'s divisions differ from X's: their partitions do not "
                             f"hold the same rows")
    rows = x_rows if x_kind == "array" else [None] * n_blocks
    for _, delayed, r, kind in split[1:]:
        if kind == "array" and x_kind == "frame":
            rows = list(r)      # known from y's chunks: checked against X on the worker
    if x_kind == "array":
        n_features = int(np.prod(X.shape[1:]))
    else:
        n_features = len(X.columns)
    items = list(zip(*(s[1] for s in split)))
    return Blocks(items, rows, tuple(s[3] for s in split), n_features)


def _make_here(items):
    # on a worker: the block's own graph, run inside this one task
    return dask.compute(*items, scheduler="sync", optimize_graph=False)


def submit_block(client, items, place=None, key=None):
    """Submit one block's Delayed objects (X, y, ...) together; return their
    futures and the worker the block is restricted to (None: where Dask
    puts it). The graph is culled here to what the block needs: a block of
    dask.array.from_array holds the whole NumPy array in its graph, which
    the client would otherwise send with every block.

    With ``place`` (a function returning a worker, or None) and a unique
    ``key``, a block made from scratch (its graph holds no futures: a
    reader, a generator, an array in the graph) is made by one task on the
    worker ``place()`` chooses, and its parts split off there. Left to
    the scheduler, the tasks of one block's graph (a generator returning
    (X, y), then a getitem for each) could run on different workers, and a
    whole partition then moved between them (measured: 200 MB per 250,000
    rows at d = 100, with the generator beside it running at half speed).
    A block of data already in the cluster (persisted) is computed where
    the data is."""
    import operator

    from distributed import futures_of

    items = dask.optimize(*items)
    # only a block that is placed asks for a worker (the placer counts them)
    worker = None if place is None or futures_of(list(items)) else place()
    if worker is None:
        return client.compute(list(items)), None
    where = dict(workers=[worker], allow_other_workers=False, pure=False)
    whole = client.submit(_make_here, items, key=key, **where)
    return [client.submit(operator.getitem, whole, j, key=f"{key}-{j}", **where)
            for j in range(len(items))], worker


def _held_future(item, found):
    """The future of the cluster whose key is item's own (a persisted chunk,
    taken as it is), or None. ``found`` caches the futures of each graph:
    the blocks of one collection share theirs."""
    from distributed import futures_of

    graph = getattr(item, "dask", None)
    if graph is None:
        return None
    if id(graph) not in found:
        found[id(graph)] = (graph, {f.key: f for f in futures_of(item)})
    return found[id(graph)][1].get(getattr(item, "key", None))


def resident_blocks(client, blocks):
    """{i: (futures, holders)} for the blocks whose every part is already
    held in the cluster (the chunks of a persisted collection): their
    futures, and the workers holding all parts (when X and y are held
    apart: the holders of X, the larger), asked of the scheduler once for
    all blocks. Other blocks are left out (they are computed first)."""
    found, held = {}, {}
    for i, items in enumerate(blocks.items):
        futures = [_held_future(item, found) for item in items]
        if futures and all(f is not None for f in futures):
            held[i] = futures
    if not held:
        return {}
    try:
        who = ask(client, "who_has", keys=[f.key for futures in held.values() for f in futures])
    except SchedulerTimeout:
        raise
    except Exception:       # the scheduler is gone: the waits' checks say so
        return {}
    out = {}
    for i, futures in held.items():
        parts = [set(who.get(f.key, ())) for f in futures]
        if not parts[0]:        # not in memory (lost, or still being computed)
            continue
        both = set.intersection(*parts)
        out[i] = (futures, sorted(both or parts[0]))
    return out


def spread(holders, rows, nthreads):
    """{i: worker}: one of its holders for every block, so that each
    worker's rows per thread are as even as the data's placement allows.
    Blocks held by one worker go there; the others (replicated) then go,
    largest first, to the holder with the fewest rows per thread so far."""
    load = dict.fromkeys(nthreads, 0)
    out = {}
    order = sorted(holders, key=lambda i: (len(holders[i]) > 1, -(rows[i] or 1), i))
    for i in order:
        best = min(holders[i], key=lambda w: (load.get(w, 0) / max(nthreads.get(w, 1), 1), w))
        load[best] = load.get(best, 0) + (rows[i] or 1)
        out[i] = best
    return out
