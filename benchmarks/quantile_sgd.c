/* Plain C reference for the benchmarks: one pass of single-sample sub-gradient
 * descent on the check loss with a constant stepsize, the update of
 * streamfit's kernel with ConstantSchedule:
 *     g = 1{y_i <= x_i'w + b} - tau;  w -= eta * g * x_i;  b -= eta * g
 * Deliberately straightforward (no BLAS, no intrinsics, no reassociation): it is
 * the "physical bar" a direct compiled loop reaches with `cc -O2`. */
#include <stddef.h>

void quantile_sgd(ptrdiff_t n, ptrdiff_t d, const double *X, const double *y,
                  double tau, double eta, int fit_intercept, double *w, double *b)
{
    double intercept = *b;
    for (ptrdiff_t i = 0; i < n; i++) {
        const double *x = X + i * d;
        double pred = 0.0, g;
        for (ptrdiff_t j = 0; j < d; j++)
            pred += x[j] * w[j];
        pred += intercept;              /* x_i'w + b, in the kernel's order */
        g = (y[i] <= pred ? 1.0 : 0.0) - tau;
        for (ptrdiff_t j = 0; j < d; j++)
            w[j] -= eta * g * x[j];
        if (fit_intercept)
            intercept -= eta * g;
    }
    *b = intercept;
}
