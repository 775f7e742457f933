/* lamb.c: LAMB's layer-wise trust ratio, host code shared by both backends
 * so a CPU and a CUDA program scale each tensor's update alike. */
#include <math.h>

#include "common.h"

double rt_lamb_trust(double w_sumsq, double r_sumsq, double phi_max)
{
    /* Either norm 0: ratio 1, as the reference implementations (a
     * zero-initialised tensor would otherwise never move, and r = 0 has
     * nothing to scale). A non-finite sum is returned as is: the step's
     * finiteness check already skipped non-finite gradients. */
    if (!(w_sumsq > 0) || !(r_sumsq > 0))
        return 1.0;
    double w = sqrt(w_sumsq), r = sqrt(r_sumsq);
    if (phi_max > 0 && w > phi_max)
        w = phi_max; /* phi(z) = min(max(z, 0), phi_max): trust-ratio clipping */
    return w / r;
}
