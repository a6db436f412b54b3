# C-level pieces LeaderState (_pca.pyx) and DropoutState (_dropout.pyx)
# share: a state array's data pointer, entering a call on an object whose
# calls write in place, and the top-k solver's counters as stats and as
# state-dict fields. (The Python-level ones -- input checks, the seed's
# bookkeeping -- live in _pca.pyx, which _dropout and _capped import from;
# CappedState plays on a spare set and solves no top-k, so it needs none of
# these.)
from _owner cimport CallLock, lock_enter, lock_leave
from _topk cimport TopKState


cdef inline double *array_ptr(a):
    # the data of a C-contiguous 2-D float64 state array (NULL when empty);
    # taken once when the object adopts its arrays, which are never replaced
    # in place
    cdef double[:, ::1] m
    if a.shape[0] == 0 or a.shape[1] == 0:
        return NULL
    m = a
    return &m[0, 0]


cdef inline int enter_whole(CallLock *lock, str owner) except -1:
    # lock_enter for an object whose calls update its arrays in place: a fork
    # that caught another thread inside a call leaves the child's copy holding
    # part of a trial, refused from then on
    lock_enter(lock, owner)
    if lock.forked_mid_call:
        lock_leave(lock)
        raise RuntimeError(
            f"{owner}: this process was forked while another thread was inside a "
            f"call on this object, which updates its arrays in place: its state here "
            f"may hold part of a trial, so it refuses every call. Start afresh, or load "
            f"a copy pickled before the fork")
    return 0


cdef inline dict topk_stats(const TopKState *s):
    # solver_stats_: the counters a user reads
    return {"solves": s.solves, "products": s.products, "fallbacks": s.fallbacks,
            "direct": s.direct, "eig_fallbacks": s.eig_fallbacks, "kept": s.kept,
            "last_gap": s.gap, "max_gap_ratio": s.max_gap_ratio}


cdef inline dict topk_fields(const TopKState *s):
    # the solver's whole state as to_state's "topk_*" fields (read back by
    # read_topk)
    return {"topk_solves": s.solves, "topk_products": s.products,
            "topk_fallbacks": s.fallbacks, "topk_direct": s.direct, "topk_skip": s.skip,
            "topk_backoff": s.backoff, "topk_eig_fallbacks": s.eig_fallbacks,
            "topk_kept": s.kept, "topk_tol": s.tol, "topk_gap": s.gap,
            "topk_max_gap_ratio": s.max_gap_ratio}


cdef inline int read_topk(object r, TopKState *s) except -1:
    # topk_fields' fields through a StateReader r, each checked
    s.solves = r.integer("topk_solves")
    s.products = r.integer("topk_products")
    s.fallbacks = r.integer("topk_fallbacks")
    s.direct = r.integer("topk_direct")
    s.skip = r.integer("topk_skip", 0, 64)
    s.backoff = r.integer("topk_backoff", 0, 64)
    s.eig_fallbacks = r.integer("topk_eig_fallbacks")
    s.kept = r.integer("topk_kept")
    s.tol = r.real("topk_tol", 0)
    s.gap = r.real("topk_gap", 0, finite=False)
    s.max_gap_ratio = r.real("topk_max_gap_ratio", 0, finite=False)
    if s.gap != s.gap or s.max_gap_ratio != s.max_gap_ratio:
        raise r.error("topk_gap", "is NaN")
    return 0
