"""Tasks that run on the worker holding their data block: chains that carry
states through a sequence of blocks (stream_fit: one chain; fit_groups: one
per bucket of groups), and one independent task per block
(parallel_quantile_fit, best_gain).

Dask's scheduler places a task where most of its input bytes are, unless
that worker is busy and another idle: then it moves the input (placement or
work stealing, which also takes loosely restricted tasks), and a block is
most of the data. Here a task is submitted only once its block is computed,
strictly restricted to the worker that holds the block. Dask cannot re-run
such a task elsewhere if that worker dies, so the waits watch the pinned
workers: chains then fail with a clear error (WorkerLost), independent block
tasks are submitted again (their block recomputed where Dask puts it)."""
from __future__ import annotations

import weakref
from concurrent.futures import CancelledError

from ._client import (_POLL, WorkerLost, _workers, ask, lost_with_a_worker, nthreads,
                      settle)
from ._state import add_note

__all__ = ["drive_chains", "map_pinned", "default_window"]

# States up to this size ride inside their first task; larger ones are
# scattered once (a graph of megabytes is slow to send and Dask warns).
INLINE_BYTES = 1 << 20
# attempts per block of map_pinned when workers holding its data leave
ATTEMPTS = 3


def _raise_if_erred(futures, note=None):
    for future in futures:
        if future.status == "error":
            try:
                future.result()
            except Exception as exc:
                if note:
                    add_note(exc, note(future) if callable(note) else note)
                raise


def _holders(client, future):
    """The workers that hold a finished future's data."""
    return sorted(ask(client, "who_has", keys=[future.key]).get(future.key, ()))


def _take_result(client, task, worker, what=None):
    """A finished task's result; WorkerLost if it is lost with its worker
    while we wait (the future's status 'lost', or the worker it is pinned to
    gone), instead of waiting for a recomputation that cannot run."""
    wait = _POLL
    while True:
        try:
            return task.result(timeout=wait)
        except TimeoutError:
            # a timed-out fetch starts again: wait longer each time, so a
            # large result (best_gain's n x n block sums) still arrives
            wait = min(2 * wait, 30.0)
            workers = _workers(client)
            if task.status == "lost" or (worker is not None and workers is not None
                                         and worker not in workers):
                raise WorkerLost(f"{what or 'streamfit.dask'}: worker {worker} left (died or was "
                                 f"retired) while holding the result of {task.key}; nothing "
                                 f"was kept, re-run the call", {worker}) from None


def _cancel(client, futures):
    if futures and client.status == "running":
        try:
            client.cancel(futures)
        except Exception:       # pragma: no cover - cancelling is best effort
            pass


class _Placer:
    """Chooses the worker that makes the next block from scratch: the one
    with the least work of the call per thread (the workers listed as busy:
    blocks being made there, steps or tasks pinned there), ties to the one
    given the fewest blocks so far (short blocks leave every load at zero)."""

    def __init__(self, client):
        self.client = client
        self.given = {}

    def __call__(self, busy):
        threads = nthreads(self.client)     # None: the scheduler is gone (settle says so)
        if not threads:
            return None
        load = dict.fromkeys(threads, 0)
        for w in busy:
            if w in load:
                load[w] += 1
        best = min(sorted(load), key=lambda w: (load[w] / max(threads[w], 1),
                                                self.given.get(w, 0) / max(threads[w], 1)))
        self.given[best] = self.given.get(best, 0) + 1
        return best


def drive_chains(client, n_blocks, compute_block, submit_step, states, describe, what,
                 prefetch, timeout, describe_failed=None):
    """Run len(states) chains over blocks 0..n_blocks-1 and return their final
    states (gathered to the client).

    ``compute_block(i, place)`` submits block i and returns its futures (the
    first is the one whose worker runs the steps) and the worker it is
    restricted to or already held by, or None (see map_pinned); ``submit_step(chain, i, state,
    block, workers)`` submits chain's step on block i from ``state`` (a
    future or the initial value), restricted to ``workers``. A "block" may
    be several of the data's blocks fitted by one step (stream_fit's runs);
    ``describe_failed(i, future)``, if given, names the data block whose
    future failed to compute (default ``describe(i)``).

    Blocks are computed at most ``prefetch`` ahead of the steps being
    submitted, and only once every step ``prefetch + 2`` blocks back has
    finished: about ``prefetch + 2`` blocks are in cluster memory at a time.
    Each step is submitted once its block is computed, pinned to the worker
    holding the block, so the states move to the data, not the other way.
    Two steps per chain are queued at a time, so that the next starts as
    soon as one ends. On any error every future of the call still alive is
    cancelled: the exception's traceback keeps the driver's frames, and with
    them futures whose data would otherwise stay in the cluster's memory.
    """
    states = [client.scatter(s, hash=False, timeout=timeout)
              if isinstance(s, bytes) and len(s) > INLINE_BYTES else s for s in states]
    scattered = [s for s in states if hasattr(s, "key")]
    alive = weakref.WeakSet(scattered)      # every future made here (not kept alive by this)
    pending, steps, pinned, placed = {}, {}, {}, {}
    previous = list(states)
    made = 0
    place = _Placer(client)

    # where the scattered states are, until the first steps have taken them
    seeds = {w for st in scattered for w in _holders(client, st)}

    def pins():
        # the workers of steps that are running or queued, or whose state the
        # next step has not taken yet
        needed = set()
        for i, chain in steps.items():
            after = steps.get(i + 1)
            if pinned.get(i) and (after is None or not all(step.done() for step in after)):
                needed.add(pinned[i])
        if 0 not in steps or not all(step.done() for step in steps[0]):
            needed |= seeds
        # blocks being made on a worker chosen here: restricted to it
        needed |= {placed[j] for j in pending if placed.get(j)}
        return needed

    try:
        for i in range(n_blocks):
            while made < n_blocks and made <= i + prefetch:
                back = made - prefetch - 2
                if back >= 0:
                    settle(client, steps[back], f"{what}, {describe(back)}", timeout, pins=pins)
                    _raise_if_erred(steps[back])
                pending[made], placed[made] = compute_block(made, lambda: place(
                    [placed[j] for j in pending if placed.get(j)]
                    + [pinned[j] for j in steps if pinned.get(j)
                       and not all(step.done() for step in steps[j])]))
                alive.update(pending[made])
                made += 1
            # popped once made: its worker stays among the pins while we wait
            block = pending[i]
            settle(client, block, f"{what}, {describe(i)}", timeout, pins=pins)
            pending.pop(i)
            _raise_if_erred(block, lambda f, i=i: f"while computing "
                            f"{describe_failed(i, f) if describe_failed else describe(i)} "
                            f"for {what}")
            # a block made on (or held by) a known worker is there: no need to ask
            workers = [placed[i]] if placed.get(i) else _holders(client, block[0])
            steps[i] = [submit_step(c, i, previous[c], block, workers)
                        for c in range(len(previous))]
            alive.update(steps[i])
            pinned[i] = workers[0] if workers else None
            previous = steps[i]
            steps.pop(i - prefetch - 3, None)
            pinned.pop(i - prefetch - 3, None)
        if n_blocks == 0:
            return [s.result() if hasattr(s, "key") else s for s in states]
        settle(client, previous, f"{what}, {describe(n_blocks - 1)}", timeout, pins=pins)
        _raise_if_erred(previous)
        # taken with bounded waits: a final state lost with its worker now
        # would make a plain gather wait forever for a recomputation pinned
        # to the dead worker
        return [_take_result(client, f, pinned.get(n_blocks - 1), what) for f in previous]
    except BaseException:
        _cancel(client, list(alive))
        raise


def default_window(client):
    """Blocks in flight for map_pinned: one per worker thread (a thread makes
    or fits one block at a time; a second one queued per thread would only
    double the memory) and one more, so that a thread finds the next block
    ready while its last one's task is submitted."""
    return sum((nthreads(client) or {}).values()) + 1


def map_pinned(client, n_blocks, compute_block, submit_task, on_result, window, describe, what,
               timeout, resident=None):
    """One task per block, each on the worker holding its block.

    ``compute_block(i, place, attempt)`` submits block i and returns its
    futures (the first one's worker runs the task) and the worker the block
    is restricted to, or None: a block made from scratch is made on the
    worker ``place()`` returns (:func:`~._blocks.submit_block`), the one
    with the least work of this call, so the workers share the blocks
    evenly; a block of persisted data is computed where the data is;
    ``submit_task(i, block, workers, attempt)`` submits the
    block's task, under a key that names the attempt (1, 2, ...): a key is
    never reused after its task was cancelled, because the scheduler's late
    'cancelled' message for the old task would cancel the new one (the
    client's futures are per key; CI saw 'cancelled for reason: unknown').
    ``on_result(i, value)`` receives each task's (small) result, taken here:
    a result lost with its worker before it was taken (the task finished,
    then its worker died) is fitted again, never waited for. At most
    ``window`` blocks are computed or waiting for their task at a time, so the
    cluster holds about ``window`` blocks, whatever n_blocks is; blocks are
    computed in order as room frees up. A block whose worker leaves before
    its task's result has been taken is computed and fitted again (up to
    ATTEMPTS times).

    ``resident``, {i: (futures, worker)}: blocks already held in the
    cluster (persisted; see :func:`~._blocks.resident_blocks` and
    ``spread``). Their tasks are all submitted at once, pinned to the
    worker given, outside the window (their data is in memory whatever
    is done here): no block waits for a round trip of this loop, and each
    worker works through its own blocks in order. If such a block's task
    must run again (its worker left), the block is computed again like any
    other.
    """
    blocks, tasks, pinned, placed = {}, {}, {}, {}
    resident = dict(resident or {})
    choose = _Placer(client)
    alive = weakref.WeakSet()               # as in drive_chains
    attempts = [0] * n_blocks
    todo = list(range(n_blocks))[::-1]       # popped from the end: in order

    def pins():
        return {pinned[i] for i in tasks if pinned.get(i)} | \
            {w for i, w in placed.items() if i in blocks and w}

    def place():
        return choose([placed[i] for i in blocks if placed.get(i)]
                      + [pinned[i] for i in tasks if pinned.get(i)])

    def holder(workers):
        # of several holders (a replicated block), the one with the fewest
        # of this call's tasks: a task is restricted to one worker
        if len(workers) < 2:
            return workers[0] if workers else None
        busy = [pinned[i] for i in tasks if pinned.get(i)]
        return min(workers, key=lambda w: (busy.count(w), w))

    try:
        for i in sorted(resident):
            futures, worker = resident[i]
            todo.remove(i)
            attempts[i] += 1
            pinned[i] = worker
            tasks[i] = submit_task(i, futures, [worker], attempts[i])
            alive.add(tasks[i])
        first = set(resident)       # tasks outside the window
        while todo or blocks or tasks:
            while todo and len(blocks) + len(set(tasks) - first) < window:
                i = todo.pop()
                first.discard(i)        # made again: in the window from now on
                attempts[i] += 1
                blocks[i], placed[i] = compute_block(i, place, attempts[i])
                alive.update(blocks[i])
            # only what is still running: a block whose X is done but whose y
            # is not would otherwise end every wait at once
            watch = [f for f in [f for block in blocks.values() for f in block]
                     + list(tasks.values()) if not f.done()]
            try:
                if watch and not any(all(f.done() for f in block) for block in blocks.values()) \
                        and not any(task.done() for task in tasks.values()):
                    settle(client, watch, what, timeout, return_when="FIRST_COMPLETED",
                           pins=pins)
            except WorkerLost as lost:
                again = sorted(i for i in tasks
                               if pinned.get(i) in lost.workers or tasks[i].cancelled())
                for i in again:
                    if attempts[i] >= ATTEMPTS:
                        raise
                    _cancel(client, [tasks.pop(i)])
                    todo.append(i)
                # blocks being made on a worker that left: their tasks are
                # restricted to it (fresh keys each attempt: see submit_block;
                # an unrestricted block is recomputed by Dask itself)
                for i in sorted(i for i in blocks if placed.get(i) in lost.workers):
                    if attempts[i] >= ATTEMPTS:
                        raise
                    _cancel(client, blocks.pop(i))
                    todo.append(i)
                todo.sort(reverse=True)
                continue
            for i in [i for i, block in blocks.items() if all(f.done() for f in block)]:
                block = blocks.pop(i)
                if lost_with_a_worker(client, block) and attempts[i] < ATTEMPTS:
                    todo.append(i)
                    todo.sort(reverse=True)
                    continue
                _raise_if_erred(block, f"while computing {describe(i)} for {what}")
                worker = holder(_holders(client, block[0]))
                pinned[i] = worker
                tasks[i] = submit_task(i, block, [worker] if worker else None, attempts[i])
                alive.add(tasks[i])
            for i in [i for i, task in tasks.items() if task.status == "lost"]:
                # finished, then its result was lost with the worker that held
                # it: the scheduler would recompute it on the dead worker it is
                # pinned to, forever (and a wait on it returns at once: the
                # loop would spin). Fit the block again.
                if attempts[i] >= ATTEMPTS:
                    raise WorkerLost(f"{what}: the result of {describe(i)} was lost with its "
                                     f"worker {ATTEMPTS} times; nothing was kept, re-run the "
                                     f"call", {pinned.get(i)})
                _cancel(client, [tasks.pop(i)])
                todo.append(i)
                todo.sort(reverse=True)
            for i in [i for i, task in tasks.items() if task.done()]:
                task = tasks.pop(i)
                # the scheduler may cancel a task pinned to a worker that died
                # before the wait above noticed the worker leave: fit again
                if lost_with_a_worker(client, [task]) and attempts[i] < ATTEMPTS:
                    todo.append(i)
                    todo.sort(reverse=True)
                    continue
                _raise_if_erred([task])
                try:
                    value = _take_result(client, task, pinned.get(i))
                except (CancelledError, WorkerLost) as exc:
                    # finished, then its result was lost with the worker that
                    # held it before we took it: the scheduler cancels the key
                    # (CI saw 'cancelled for reason: unknown' from
                    # future.result()) or marks it lost and waits forever to
                    # recompute it on the dead worker it is pinned to
                    gone = isinstance(exc, WorkerLost) or lost_with_a_worker(client, [task])
                    if gone and attempts[i] < ATTEMPTS:
                        _cancel(client, [task])
                        todo.append(i)
                        todo.sort(reverse=True)
                        continue
                    raise
                on_result(i, value)
    except BaseException:
        _cancel(client, list(alive))
        raise
