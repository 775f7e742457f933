/* bench_ilp.c: size and solve time of the sharding ILP for one LLaMA-2 70B
 * layer (a stage of one layer between layers, as the pipeline search asks
 * for it) on 1x8, 2x8, 4x8 and 8x8 H100 meshes: one sequence per
 * data-parallel replica, 8 micro-batches, ZeRO-1; then again under a memory
 * budget halfway between the least memory any plan needs and the memory of
 * the unconstrained optimum, where the memory row binds.
 *
 *   bench_ilp [RUNS] [MODEL]      (defaults: 9, models/llama2-70b.mdl)
 *
 * Prints per mesh the operators before and after merging, the ILP handed to
 * GLPK (variables, binaries, constraints, strategies pruned), the median and
 * the minimum over RUNS of the lowering time and of the solve time (wall
 * clock and process CPU), and the status and gap. */
#include "../bench.h"
#include "frontend.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef PTDC_SOURCE_DIR
#define PTDC_SOURCE_DIR "."
#endif

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 9;
    if (runs < 1 || runs > 1000)
        runs = 9;
    char path[512];
    if (argc > 2)
        snprintf(path, sizeof path, "%s", argv[2]);
    else
        snprintf(path, sizeof path, "%s/models/llama2-70b.mdl", PTDC_SOURCE_DIR);
    IrArena *arena = ir_arena_new();
    IrGraph *g = fe_compile_file(arena, path, NULL, 0, 0);
    if (!g)
        return 1;
    PassCluster cl;
    memset(&cl, 0, sizeof cl);
    pass_gpu_preset("h100-80gb", &cl.gpu);
    cl.gpus_per_node = 8;
    cl.ngpus = 64;
    PassCostCtx ctx = {.cl = &cl, .attention = PLAN_ATTN_FLASH};
    /* A layer whose neighbours are layers. */
    int piece = -1;
    for (int p = 1; p + 1 < g->npieces && piece < 0; p++)
        if (g->pieces[p].rep >= 0 && g->pieces[p - 1].rep == g->pieces[p].rep &&
            g->pieces[p + 1].rep == g->pieces[p].rep)
            piece = p;
    if (piece < 0)
        piece = g->npieces > 1 ? 1 : 0;
    printf("%s, piece '%s', h100-80gb, %d runs each: median (min) in ms\n", g->name,
           g->pieces[piece].name, runs);
    printf("%-5s %-7s %6s %6s %6s %6s %5s %15s %15s %15s  %s\n", "mesh", "budget", "ops", "merged",
           "vars", "bin", "rows", "lower ms", "solve ms", "solve cpu ms", "status");
    static const int meshes[][2] = {{1, 8}, {2, 8}, {4, 8}, {8, 8}};
    double *tl = malloc(sizeof(double) * (size_t)runs), *ts = malloc(sizeof(double) * (size_t)runs);
    double *tc = malloc(sizeof(double) * (size_t)runs);
    for (int mi = 0; mi < 4; mi++) {
        double free_mem = 0, min_mem = 0;
        for (int pass = 0; pass < 2; pass++) {
            PassIlpQuery q;
            memset(&q, 0, sizeof q);
            q.first_piece = piece;
            q.npieces = 1;
            plan_mesh_make(&q.mesh, meshes[mi][0], meshes[mi][1], 8);
            q.mb_seqs = meshes[mi][0];
            q.num_micro = 8;
            q.zero = 1;
            q.inflight = 1;
            q.budget = pass == 0 ? 0 : min_mem + 0.5 * (free_mem - min_mem);
            IlpSolution sol = {0};
            IlpSeg *s = NULL;
            for (int r = 0; r < runs; r++) {
                double w0 = wall();
                s = ilp_lower(&ctx, &pass_ilp_costs, g, &q);
                ilp_merge(s);
                ilp_build(s);
                double w1 = wall(), c1 = cpu();
                ilp_solution_free(&sol);
                ilp_solve(s->prob, &(IlpOpts){.time_limit_s = 60}, &sol);
                tl[r] = (w1 - w0) * 1e3;
                ts[r] = (wall() - w1) * 1e3;
                tc[r] = (cpu() - c1) * 1e3;
                if (r + 1 < runs)
                    ilp_seg_free(s);
            }
            if (pass == 0) {
                free_mem = ilp_memory(s->prob, &sol.total);
                /* The least memory: the same problem minimising memory. */
                IlpProblem *p = s->prob;
                double w[ILP_NQ];
                memcpy(w, p->obj_w, sizeof w);
                for (int k = 0; k < ILP_NQ; k++)
                    p->obj_w[k] = p->mem_w[k];
                IlpSolution m = {0};
                ilp_solve(p, &(IlpOpts){.time_limit_s = 60}, &m);
                min_mem = m.objective;
                memcpy(p->obj_w, w, sizeof w);
                ilp_solution_free(&m);
            }
            double mins[3] = {INFINITY, INFINITY, INFINITY};
            for (int r = 0; r < runs; r++) {
                mins[0] = fmin(mins[0], tl[r]);
                mins[1] = fmin(mins[1], ts[r]);
                mins[2] = fmin(mins[2], tc[r]);
            }
            char budget[16];
            snprintf(budget, sizeof budget, "%s", pass == 0 ? "none" : "mid");
            char a[32], b[32], c[32], mesh[16];
            snprintf(mesh, sizeof mesh, "%dx%d", meshes[mi][0], meshes[mi][1]);
            snprintf(a, sizeof a, "%.1f (%.1f)", median(tl, runs), mins[0]);
            snprintf(b, sizeof b, "%.1f (%.1f)", median(ts, runs), mins[1]);
            snprintf(c, sizeof c, "%.1f (%.1f)", median(tc, runs), mins[2]);
            printf("%-5s %-7s %6d %6d %6d %6d %5d %15s %15s %15s  %s, gap %.2g, pruned %d\n", mesh,
                   budget, s->ninst, s->ngroups, sol.nvars, sol.nbin, sol.nrows, a, b, c,
                   ilp_status_name(sol.status), sol.gap, sol.pruned);
            ilp_solution_free(&sol);
            ilp_seg_free(s);
        }
    }
    free(tl);
    free(ts);
    free(tc);
    ir_graph_free(g);
    ir_arena_free(arena);
    return 0;
}
