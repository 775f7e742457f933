/* moe_stub.h: TEST-ONLY stand-ins for the MoE runtime calls (docs/moe.md,
 * "Runtime calls") while runtime/rt.h does not declare them yet: hf.sh moe
 * builds the programs with -include moe_stub.h then, to exercise the import
 * and export of expert tensors at --steps 0, where no forward runs. Any call
 * aborts. Once rt.h has RtRoute, hf.sh builds against the real runtime. */
#ifndef PTDC_MOE_STUB_H
#define PTDC_MOE_STUB_H
#include <stdio.h>
#include <stdlib.h>
typedef struct RtRoute {
    int topk, sigmoid, groups, group_topk, norm;
    float scale, capacity, aux, zloss;
} RtRoute;
static inline void moe_stub_call(const char *f)
{
    fprintf(stderr, "moe_stub.h: %s called: the runtime has no MoE kernels yet\n", f);
    abort();
}
#define rt_route_fwd(...) moe_stub_call("rt_route_fwd")
#define rt_route_bwd(...) moe_stub_call("rt_route_bwd")
#define rt_moe_fwd(...) moe_stub_call("rt_moe_fwd")
#define rt_moe_bwd(...) moe_stub_call("rt_moe_bwd")
#endif
