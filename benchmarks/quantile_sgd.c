/* Plain C reference for the benchmarks: one pass of single-sample sub-gradient
 * descent on the check loss with a constant stepsize, the update of
 * streamfit's kernel with ConstantSchedule:
 *     g = 1{y_i <= x_i'w + b} - tau;  w -= eta * g * x_i;  b -= eta * g
 * Straightforward C (no BLAS, no intrinsics), as a careful hand would write
 * it: four partial sums in the dot product, so it is not one serial chain of
 * adds (which -O2 may not reorder). This is the "physical bar". */
#include <stddef.h>

void quantile_sgd(ptrdiff_t n, ptrdiff_t d, const double *X, const double *y,
                  double tau, double eta, int fit_intercept, double *w, double *b)
{
    double intercept = *b;
    for (ptrdiff_t i = 0; i < n; i++) {
        const double *x = X + i * d;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, pred, g;
        ptrdiff_t j = 0;
        for (; j + 4 <= d; j += 4) {
            s0 += x[j] * w[j];
            s1 += x[j + 1] * w[j + 1];
            s2 += x[j + 2] * w[j + 2];
            s3 += x[j + 3] * w[j + 3];
        }
        for (; j < d; j++)
            s0 += x[j] * w[j];
        pred = ((s0 + s1) + (s2 + s3)) + intercept;     /* x_i'w + b */
        g = (y[i] <= pred ? 1.0 : 0.0) - tau;
        for (j = 0; j < d; j++)
            w[j] -= eta * g * x[j];
        if (fit_intercept)
            intercept -= eta * g;
    }
    *b = intercept;
}
