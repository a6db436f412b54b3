# The capped simplex {w : 0 <= w_i <= 1, sum w = k} on eigenvalue vectors: the
# Euclidean projection (matrix gradient descent), the relative-entropy
# projection ("capping", matrix exponentiated gradient) and systematic
# sampling of k indices with inclusion probabilities w, as
# streamfit.kernels.project_capped_simplex and systematic_sample compute them.
#
#   euclid_project(v, n, k, u, w) -> theta     v ascending; u: n scratch
#   entropy_cap(mu, n, k, s, &logc) -> m       mu = log v ascending; s: n scratch
#   systematic_pick(w, n, k, u, out) -> k      u uniform in [0, 1)


cdef double euclid_theta(const double *v, int n, int k) noexcept nogil
    # theta with sum_i clip(v_i - theta, 0, 1) = k, v ascending, 1 <= k < n.

cdef double euclid_project(const double *v, int n, int k, double *u, double *w) noexcept nogil
    # The Euclidean projection of v (ascending) onto the capped simplex into w;
    # returns theta (w = clip(v - theta, 0, 1)). u: n doubles of scratch.

cdef int entropy_cap(const double *mu, int n, int k, double *s, double *logc) noexcept nogil
    # The relative-entropy projection of exp(mu) (mu ascending, log domain):
    # w_i = min(1, c exp(mu_i)) with sum w = k (Warmuth & Kuzmin's capping).
    # Returns m, the number of capped entries (the top m); log c into logc.
    # s: n doubles of scratch.

cdef int systematic_pick(const double *w, int n, int k, double u, int *out) noexcept nogil
    # Systematic sampling: the indices i whose interval [c_{i-1}, c_i) of the
    # cumulative sums c of w (0 <= w_i <= 1, sum w = k) holds one of
    # u, u + 1, ..., u + k - 1: exactly k, ascending, into out; returns k.
    # Index i is drawn with probability w_i when u is uniform in [0, 1).
