# The online linear learner (streamfit.kernels.LinearSGD: online quantile
# regression, one tau or several, and online least squares) driven from a
# compiled loop: the state object's own one-row and block calls on raw rows,
# without Python in between. `state` is a LinearSGD made in Python (any
# settings: schedule, averaging, drift, ...); each call takes its lock as its
# Python methods do, checks the row and raises as they do (naming the row,
# the state unchanged), and a one-row call holds the GIL from start to end.
#
#   from streamfit.cython.linear cimport learn_one, predict_one
#   cdef double pred
#   for i in range(n):                      # the caller's own event loop
#       predict_one(state, &X[i, 0], &pred)
#       learn_one(state, &X[i, 0], y[i], 1.0)
#
# Rows are n_features contiguous float64 values (shape() tells n_features and
# the number of quantiles m); predict_one writes m values (sorted).

cdef int learn_one(object state, const double *x, double y, double weight) except -1
    # one row of weight >= 0, as LinearSGD.learn_one (mode "batch": rows wait
    # for a full batch; "storage": one step over all rows so far)

cdef int predict_one(object state, const double *x, double *out) except -1
    # the prediction(s) for one row into out[0:m], as LinearSGD.predict_one

cdef int learn(object state, const double *X, const double *y, const double *weight,
               Py_ssize_t n) except -1
    # a block of n rows (X n x n_features, C order; weight NULL for all 1), as
    # LinearSGD.learn: releases the GIL, polls for signals, commits whole rows

cdef int shape(object state, Py_ssize_t *n_features, Py_ssize_t *n_quantiles) except -1
