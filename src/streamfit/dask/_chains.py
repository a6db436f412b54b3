"""Chains of tasks that carry states through a sequence of data blocks, each
step on the worker that holds its block: the engine of stream_fit (one
chain) and fit_groups (one chain per bucket of groups)."""
from __future__ import annotations

from ._client import settle
from ._state import add_note

__all__ = ["drive_chains"]

# States up to this size ride inside their first task (so that a re-run
# after a worker died can start over from them); larger ones are scattered.
INLINE_BYTES = 1 << 20


def _raise_if_erred(futures, note=None):
    for future in futures:
        if future.status == "error":
            try:
                future.result()
            except Exception as exc:
                if note:
                    add_note(exc, note)
                raise


def _holders(client, future):
    """The workers that hold a finished future's data."""
    return sorted(client.who_has([future]).get(future.key, ()))


def _cancel(client, futures):
    if futures and client.status == "running":
        try:
            client.cancel(futures)
        except Exception:       # pragma: no cover - cancelling is best effort
            pass


def drive_chains(client, n_blocks, compute_block, submit_step, states, describe, what,
                 prefetch, timeout):
    """Run len(states) chains over blocks 0..n_blocks-1 and return their final
    states (gathered to the client).

    ``compute_block(i)`` submits block i and returns its futures (the first
    is the one whose worker runs the steps); ``submit_step(chain, i, state,
    block, workers)`` submits chain's step on block i from ``state`` (a
    future or the initial value), restricted to ``workers``.

    Blocks are computed at most ``prefetch`` ahead of the steps being
    submitted, and only once every step ``prefetch + 2`` blocks back has
    finished: about ``prefetch + 2`` blocks are in cluster memory at a time.
    Each step is submitted once its block is computed, restricted (loosely:
    if that worker is gone, any worker) to the worker holding the block, so
    the states move to the data, not the other way. Two steps per chain are
    queued at a time, so that the next starts as soon as one ends.
    """
    states = [client.scatter(s, hash=False) if isinstance(s, bytes) and len(s) > INLINE_BYTES
              else s for s in states]
    scattered = [s for s in states if hasattr(s, "key")]
    pending, steps = {}, {}
    previous = list(states)
    made = 0
    try:
        for i in range(n_blocks):
            while made < n_blocks and made <= i + prefetch:
                back = made - prefetch - 2
                if back >= 0:
                    settle(client, steps[back], f"{what}, {describe(back)}", timeout)
                    _raise_if_erred(steps[back])
                pending[made] = compute_block(made)
                made += 1
            block = pending.pop(i)
            settle(client, block, f"{what}, {describe(i)}", timeout)
            _raise_if_erred(block, f"while computing {describe(i)} for {what}")
            workers = _holders(client, block[0])
            steps[i] = [submit_step(c, i, previous[c], block, workers)
                        for c in range(len(previous))]
            previous = steps[i]
            steps.pop(i - prefetch - 3, None)
        if n_blocks == 0:
            return [s.result() if hasattr(s, "key") else s for s in states]
        settle(client, previous, f"{what}, {describe(n_blocks - 1)}", timeout)
        _raise_if_erred(previous)
        return client.gather(previous)
    except BaseException:
        _cancel(client, [f for block in pending.values() for f in block]
                + [f for chain in steps.values() for f in chain] + scattered)
        raise
