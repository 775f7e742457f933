/* ssm.cu: Mamba-2's operators on the CUDA backend (rt_softplus_*,
 * rt_conv1d_*, rt_ssd_*; runtime/rt.h). Not built yet: each refuses at its
 * first call with a sentence, so a program of a model with Mamba layers
 * stops rather than computing something else. The CPU backend
 * (runtime/cpu/ssm.c, conv1d.c, pointwise.c) runs them (docs/hybrid.md). */
#include "cu_dev.cuh"

static void no_kernel(const char *fn)
{
    rt_fatal("%s: libptdrt's CUDA backend has no Mamba-2 kernels yet (docs/hybrid.md); build this "
             "model's program with --target cpu", fn);
}

extern "C" {

void rt_softplus_fwd(rt_act *, const rt_act *, int64_t) { no_kernel("rt_softplus_fwd"); }
void rt_softplus_bwd(rt_act *, const rt_act *, const rt_act *, int64_t) { no_kernel("rt_softplus_bwd"); }
void rt_conv1d_fwd(rt_act *, const rt_act *, const rt_act *, const rt_act *, int64_t, int64_t, int64_t, int64_t)
{
    no_kernel("rt_conv1d_fwd");
}
void rt_conv1d_bwd(rt_act *, rt_grad *, rt_grad *, const rt_act *, const rt_act *, const rt_act *, int64_t, int64_t,
                   int64_t, int64_t)
{
    no_kernel("rt_conv1d_bwd");
}
void rt_ssd_fwd(rt_act *, const rt_act *, const rt_act *, const rt_act *, const rt_act *, const rt_act *,
                const rt_act *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t)
{
    no_kernel("rt_ssd_fwd");
}
void rt_ssd_bwd(rt_act *, rt_act *, rt_grad *, rt_act *, rt_act *, rt_grad *, const rt_act *, const rt_act *,
                const rt_act *, const rt_act *, const rt_act *, const rt_act *, const rt_act *, int64_t, int64_t,
                int64_t, int64_t, int64_t, int64_t)
{
    no_kernel("rt_ssd_bwd");
}

} /* extern "C" */
