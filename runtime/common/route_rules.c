/* route_rules.c: what both backends' routers (runtime/cpu/route.c,
 * runtime/cuda/route.cu) check of their arguments, and the capacity they
 * keep per expert and sequence (docs/moe.md, step 5): one statement of
 * each, so the backends refuse and drop alike. */
#include <math.h>

#include "common.h"

void rtc_check_route(const char *fn, int64_t seqs, int64_t seq_len, int64_t E, const RtRoute *r)
{
    if (seqs < 0 || seq_len < 0)
        rt_fatal("%s: negative sizes seqs=%lld seq_len=%lld", fn, (long long)seqs,
                 (long long)seq_len);
    if (E < 1 || E > RT_ROUTE_MAX_EXPERTS)
        rt_fatal("%s: n_experts = %lld outside [1, %d]", fn, (long long)E, RT_ROUTE_MAX_EXPERTS);
    int g = r->groups > 1 ? r->groups : 1;
    if (E % g != 0)
        rt_fatal("%s: %d expert groups do not divide %lld experts", fn, g, (long long)E);
    int gk = g > 1 ? r->group_topk : 1;
    if (g > 1 && (gk < 1 || gk > g))
        rt_fatal("%s: group_topk = %d outside [1, %d]", fn, r->group_topk, g);
    int64_t cand = g > 1 ? (int64_t)gk * (E / g) : E;
    if (r->topk < 1 || r->topk > RT_ROUTE_MAX_TOPK || r->topk > cand)
        rt_fatal("%s: topk = %d outside [1, %lld] (at most %d, and no more than the candidate experts)",
                 fn, r->topk, (long long)(cand < RT_ROUTE_MAX_TOPK ? cand : RT_ROUTE_MAX_TOPK),
                 RT_ROUTE_MAX_TOPK);
    if (!(r->capacity >= 0) || !(r->aux >= 0) || !(r->zloss >= 0))
        rt_fatal("%s: capacity, aux and zloss must be >= 0 (got %g, %g, %g)", fn,
                 (double)r->capacity, (double)r->aux, (double)r->zloss);
}

int64_t rtc_route_capacity(const RtRoute *r, int64_t seq_len, int64_t E)
{
    if (r->capacity <= 0)
        return INT64_MAX;
    return (int64_t)ceil((double)r->capacity * (double)seq_len * r->topk / (double)E);
}
