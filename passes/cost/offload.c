/* offload.c: activation offloading to host memory as Megatron runs it
 * (--cpu-offloading-num-layers N, TransformerConfig cpu_offloading; the
 * context is Transformer Engine's get_cpu_offload_context, v1 path:
 * AsyncDoubleBufferGroupOffloadHandler in transformer_engine/pytorch/
 * cpu_offload.py). Of a rank's L transformer layers the first N are
 * offloaded, each layer one group:
 *
 *   forward   layer 0's saved tensors start copying to the host on a copy
 *             stream when its forward ends; at the end of layer w(k) the
 *             compute stream waits for group k's copy, frees its GPU copies
 *             and starts group k + 1's. w spreads the N copies evenly over
 *             the L layers (layer_window_map: w(k) = (L / N)(k + 1) - 1,
 *             plus the remainder spread over the first L mod N groups).
 *   backward  at the start of layer w(k)'s backward the compute stream
 *             waits for the reloads issued so far and starts group k's
 *             reload into fresh GPU buffers, which live until layer k's
 *             backward has used them; the last reload is waited for before
 *             layer 0's backward.
 *
 * The copies are one per layer of the same size, each beside compute; what
 * a copy outlasts its window by stalls the step. Replaying both passes
 * layer by layer gives the stalls and the most layers whose activations are
 * on the GPU at once. */
#include "cost/cost.h"

#include <math.h>
#include <stdlib.h>

/* Transformer Engine's layer_window_map. */
static int window(int L, int N, int k)
{
    int q = L / N, r = L % N;
    return (q * (k + 1) - 1) + (k < r ? k + 1 : r);
}

void pass_offload(int L, int N, double f, double b, double copy, PassOffload *out)
{
    out->fwd_s = out->bwd_s = 0;
    out->copy_s = copy;
    out->resident = L;
    if (N <= 0 || N >= L)
        return;
    /* forward */
    double t = 0, d2h = 0;
    int next = 0, held = 0, peak = 0; /* next: the group the next wait is for */
    for (int j = 0; j < L; j++) {
        t += f;
        held++;
        if (held > peak)
            peak = held;
        if (j == 0)
            d2h = t + copy;
        if (next < N && window(L, N, next) == j) {
            if (d2h > t)
                out->fwd_s += d2h - t, t = d2h;
            held--; /* group next's GPU copies freed */
            if (next < N - 1)
                d2h = t + copy;
            next++;
        }
    }
    /* backward: held counts the layers not yet backpropagated whose
     * activations are on the GPU (the non-offloaded ones, and the reloaded) */
    t = 0;
    double h2d = 0;
    int count = N;
    held = L - N;
    for (int j = L - 1; j >= 0; j--) {
        if (count >= 1 && window(L, N, count - 1) == j) {
            if (h2d > t)
                out->bwd_s += h2d - t, t = h2d;
            h2d = t + copy;
            held++;
            if (count > 1)
                count--;
        }
        if (j == 0 && h2d > t)
            out->bwd_s += h2d - t, t = h2d;
        if (held > peak)
            peak = held;
        t += b;
        held--;
    }
    out->resident = peak;
}
