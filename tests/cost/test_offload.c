/* test_offload.c: pass_offload (passes/cost/offload.c), Transformer Engine's
 * activation offload schedule replayed, against schedules worked out by hand
 * (the comments give each step). */
#include "cost/cost.h"

#include <math.h>
#include <stdio.h>

static int failures;

static void check(const char *what, int L, int N, double f, double b, double copy, double fwd, double bwd,
                  int resident)
{
    PassOffload o;
    pass_offload(L, N, f, b, copy, &o);
    bool ok = fabs(o.fwd_s - fwd) < 1e-12 && fabs(o.bwd_s - bwd) < 1e-12 && o.resident == resident;
    printf("%s %s: stalls %g + %g s, %d layers resident (want %g + %g, %d)\n", ok ? "ok  " : "FAIL", what,
           o.fwd_s, o.bwd_s, o.resident, fwd, bwd, resident);
    failures += !ok;
}

int main(void)
{
    /* 4 layers, the first 2 offloaded: windows end at layers 1 and 3. Copies
     * of 0.5 s fit the 1 s layers: no stall; the most on the GPU is layer 1
     * (offloaded at layer 3's end) with layers 2 and 3. */
    check("copies inside their windows", 4, 2, 1, 2, 0.5, 0, 0, 3);
    /* Copies of 3 s. Forward: layer 0's copy ends at 4, waited for at layer
     * 1's end (2): 2 s; layer 1's runs 4 to 7, waited for at layer 3's end
     * (6): 1 s. Backward: layer 1's reload starts at 0 (layer 3's backward),
     * ends at 3; layer 0's starts at layer 1's backward (4), ends at 7,
     * waited for before layer 0's (6): 1 s. */
    check("copies outlasting their windows", 4, 2, 1, 2, 3, 3, 1, 3);
    /* 5 layers, 2 offloaded: TE spreads the remainder over the first
     * windows, which end at layers 2 and 4; 1 s copies fit. */
    check("uneven windows", 5, 2, 1, 1, 1, 0, 0, 4);
    /* Nothing offloaded, or every layer (which Megatron refuses): the GPU
     * holds every layer and nothing stalls. */
    check("none offloaded", 8, 0, 1, 2, 5, 0, 0, 8);
    check("all offloaded", 8, 8, 1, 2, 5, 0, 0, 8);
    /* Half of 80 layers (GB200's Megatron-FSDP recipe): 41 resident. */
    check("40 of 80", 80, 40, 0.03, 0.06, 0.015, 0, 0, 41);
    return failures ? 1 : 0;
}
