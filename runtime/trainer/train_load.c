/* train_load.c: reading at scale (MegaScale's fix for storage overload):
 * no byte is read from storage by two ranks that load it. A checkpoint load
 * shares the reading over the world (rt_ckpt_read_shared: the ranks that
 * need the same rank files form a group, each file read by one member and
 * broadcast). An --import-hf shares it among the ranks whose parameters have
 * the same blocks (data-parallel replicas: tr_load_group below), each block
 * read by one member and broadcast; ranks with other blocks, even
 * overlapping ones, read for themselves. PTDC_LOAD_BCAST=0 makes every rank
 * read what it needs, for comparison (bench/load). Each load reports, on
 * rank 0, the bytes read from storage over all ranks and those received by
 * broadcast. */
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t tr_load_hash(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull; /* FNV-1a */
    return h;
}

bool tr_load_bcast_on(void)
{
    const char *v = getenv("PTDC_LOAD_BCAST");
    return !v || strcmp(v, "0") != 0;
}

RtComm *tr_load_group(uint64_t hash)
{
    /* Off: a hash no other rank has (ranks that disagree on the variable
     * still form consistent groups: the ones with it on group together). */
    if (!tr_load_bcast_on())
        hash = tr_load_hash(0xcbf29ce484222325ull ^ 0x5bd1e995u, &tr_world_rank,
                            sizeof tr_world_rank) | 1;
    else
        hash &= ~(uint64_t)1; /* never equal to an "off" rank's */
    uint64_t *all = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)CG_WORLD);
    if (!all)
        rt_fatal("out of host memory");
    rt_host_allgather(tr_world, all, &hash, sizeof hash);
    int color = tr_world_rank;
    for (int r = 0; r < CG_WORLD; r++)
        if (all[r] == hash) {
            color = r; /* the group's lowest rank names it */
            break;
        }
    free(all);
    return rt_comm_split(color, tr_world_rank);
}

void tr_load_report(const char *what, int64_t state, int64_t meta, int64_t received,
                    int group, double seconds)
{
    int64_t mine[5] = {state, meta, received, group, (int64_t)(seconds * 1e6)};
    int64_t *all = (int64_t *)malloc(sizeof mine * (size_t)CG_WORLD);
    if (!all)
        rt_fatal("out of host memory");
    rt_host_allgather(tr_world, all, mine, sizeof mine);
    if (ROOT) {
        int64_t s = 0, m = 0, rcv = 0, lo = INT64_MAX, hi = 0, gmax = 1, us = 0;
        for (int r = 0; r < CG_WORLD; r++) {
            int64_t *x = all + 5 * r;
            s += x[0];
            m += x[1];
            rcv += x[2];
            lo = x[0] < lo ? x[0] : lo;
            hi = x[0] > hi ? x[0] : hi;
            gmax = x[3] > gmax ? x[3] : gmax;
            us = x[4] > us ? x[4] : us; /* the slowest rank's */
        }
        /* One line for the job; bench/load and tests/codegen/load_bcast.sh read it. */
        char extra[96] = "", groups[64] = "no broadcast groups";
        if (gmax > 1)
            snprintf(groups, sizeof groups, "groups of up to %lld ranks", (long long)gmax);
        if (meta >= 0) /* only checkpoints count theirs */
            snprintf(extra, sizeof extra, ", %lld bytes of headers and indexes", (long long)m);
        printf("load: %s: %lld bytes read from storage over %d rank%s (%lld to %lld per rank), "
               "%lld bytes received by broadcast (%s)%s, %.3f s\n", what, (long long)s, CG_WORLD,
               CG_WORLD == 1 ? "" : "s", (long long)lo, (long long)hi, (long long)rcv, groups,
               extra, (double)us * 1e-6);
        fflush(stdout);
    }
    free(all);
}
