/* test_fit.c: `ptdc calibrate`'s fit recovers a device it did not see.
 *
 * Records are made from a known device (a GEMM curve, kernel rates that
 * fall from cache to memory, attention rates, alpha-beta collectives) with
 * +-3% deterministic noise, written as ptdc-measure's text and parsed back;
 * the fitted device must then reproduce the true times of shapes it was
 * not given (GEMM shapes between the measured ones, kernel sizes between
 * the measured ones) and the collectives' latency and bandwidth. Also: the
 * records parser refuses malformed lines by line number, and the fitted
 * cluster file reads back equal. */
#include "calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

/* +-3%, reproducible. */
static double noise(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return 1 + 0.03 * (((*s >> 8) & 0xffff) / 32768.0 - 1);
}

static PassGpu truth(void)
{
    PassGpu g;
    memset(&g, 0, sizeof g);
    g.kind = PASS_DEV_CPU;
    g.act_bytes = 4;
    g.peak_flops = 80e9;
    g.gemm_eff = 1;
    g.sms = 1;
    g.gemm_tile_m = 16, g.gemm_tile_n = 8, g.gemm_tile_k = 8;
    g.gemm_k_half = 48;
    g.gemm_misalign = 0.8;
    g.gemm_overhead_s = 2e-6;
    g.hbm_bw = 1e15, g.hbm_eff = 1;
    return g;
}

/* A kernel's true rate (bytes per second) by bytes moved: from cache (30
 * GB/s) down to memory (6 GB/s) around a few MB. */
static double kern_rate(double bytes) { return 6e9 + 24e9 / (1 + bytes / 3e6); }
static double kern_time(double bytes) { return 1e-6 + bytes / kern_rate(bytes); }

static char *make_records_solo(const PassGpu *g);

/* The 27 GEMMs of the calibration's grid, timed by g's curve with noise. */
static void gemm_grid(FILE *f, const PassGpu *g, unsigned *seed)
{
    static const double grid[] = {128, 512, 2048}, kg[] = {64, 256, 1024};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++)
                fprintf(f, "gemm %g %g %g 0 0 %.9g\n", grid[i], grid[j], kg[k],
                        pass_gemm_time(g, grid[i], grid[j], kg[k], 1) * noise(seed));
}

/* Every runtime kernel at five sizes, kern_time scaled by `speed` (with
 * noise when seed is given). */
static void kern_sizes(FILE *f, double speed, unsigned *seed)
{
    for (int k = 0; k < PASS_NKERN; k++)
        for (double n = 4096; n <= 16777216; n *= 8) {
            double cols = 512, rows = n / cols;
            double b = pass_kernel_bytes((PassKernel)k, rows, cols, 4);
            fprintf(f, "kern %s %g %g %.9g\n", pass_kernel_names[k], rows, cols,
                    kern_time(b) * speed * (seed ? noise(seed) : 1));
        }
}

static char *make_records(const PassGpu *g)
{
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    unsigned seed = 7;
    fprintf(f, "meta backend cpu ranks 2 act_bytes 4 host synthetic part compute\n");
    gemm_grid(f, g, &seed);
    static const double extra[][3] = {{1024, 1024, 16}, {1024, 1024, 32}, {1000, 1000, 1000},
                                      {510, 770, 250},  {64, 64, 64},     {32, 32, 32}};
    for (int e = 0; e < 6; e++)
        fprintf(f, "gemm %g %g %g 0 0 %.9g\n", extra[e][0], extra[e][1], extra[e][2],
                pass_gemm_time(g, extra[e][0], extra[e][1], extra[e][2], 1) * noise(&seed));
    kern_sizes(f, 1, &seed);
    for (int d = 64; d <= 128; d *= 2)
        for (int s = 128; s <= 2048; s *= 4) {
            double flops = 2.0 * 4 * s * (double)s * d; /* B 1, H 4, causal */
            double rate = 5e9 * (s >= 512 ? 1.5 : 1) * (d == 128 ? 1.2 : 1);
            fprintf(f, "attn fwd 1 %d 4 2 %d 1 %.9g\n", s, d, flops / rate);
            fprintf(f, "attn bwd 1 %d 4 2 %d 1 %.9g\n", s, d, 2.5 * flops / (0.6 * rate));
        }
    fprintf(f, "end\n");
    fclose(f);
    return buf;
}

/* The same device alone on a 2-core node: twice the GEMM rate over two
 * threads, kernels 1.6 times faster. */
static PassGpu truth_solo(void)
{
    PassGpu g = truth();
    g.peak_flops = 150e9;
    g.sms = 2;
    return g;
}

static char *make_records_solo(const PassGpu *g)
{
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    unsigned seed = 5;
    fprintf(f, "meta backend cpu ranks 1 act_bytes 4 host synthetic part compute\n");
    gemm_grid(f, g, &seed);
    kern_sizes(f, 1 / 1.6, NULL);
    fprintf(f, "end\n");
    fclose(f);
    return buf;
}

static char *make_comm(void)
{
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    unsigned seed = 11;
    fprintf(f, "meta backend cpu ranks 2 act_bytes 4 host synthetic part comm\nnode 0 0\nnode 1 0\n");
    static const char *kinds[] = {"allreduce", "reduce_scatter", "allgather", "alltoall", "sendrecv"};
    static const double factor[] = {1.0, 0.5, 0.5, 0.5, 1.0}; /* bus factor at n = 2 */
    for (int k = 0; k < 5; k++)
        for (double b = 1024; b <= 33554432; b *= 8)
            fprintf(f, "coll %s 2 1 2 %g %.9g\n", kinds[k], b, (4e-6 + factor[k] * b / 3e9) * noise(&seed));
    fprintf(f, "sync 2 2 gemm 0.004 0.02\nsync 2 2 mem 0.002 0.07\nend\n");
    fclose(f);
    return buf;
}

/* Diagnostics into *out (freed by the caller) until diag_end. */
static size_t diag_len;
static FILE *diag_begin(char **out)
{
    FILE *f = open_memstream(out, &diag_len);
    ir_diag_set_stream(f);
    return f;
}
static void diag_end(FILE *f)
{
    fclose(f);
    ir_diag_set_stream(stderr);
    ir_diag_reset();
}

static void test_parse_errors(void)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"meta backend cpu ranks 2 act_bytes 4\ngemm 1 2\nend\n", "r:2: malformed calibration record 'gemm'"},
        {"meta backend cpu ranks 2 act_bytes 4\ngemm 64 64 64 0 0 -1\nend\n", "r:2: malformed"},
        {"meta backend cpu ranks 2 act_bytes 4\nwhat 1\nend\n", "r:2: malformed calibration record 'what'"},
        {"meta backend cpu ranks 2 act_bytes 4\ncoll nothing 2 1 2 10 1\nend\n", "r:2: malformed"},
        {"meta backend cpu ranks 2 act_bytes 4\ngemm 64 64 64 0 0 0.001\n", "did not finish"},
        {"meta backend cpu ranks 2 act_bytes 3\nend\n", "r:1: malformed meta record"},
        {"meta backend cpu ranks 2 act_bytes 4\nshare 2 4 0.1 0.1\nend\n", "r:2: malformed calibration record 'share'"},
        {"meta backend cpu ranks 2 act_bytes 4\nsync 2 2 disk 0.004 0.1\nend\n", "r:2: malformed calibration record 'sync'"},
        {"meta backend cpu ranks 2 act_bytes 4\nsync 2 2 gemm 0 0.1\nend\n", "r:2: malformed calibration record 'sync'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out;
        FILE *m = diag_begin(&out);
        CalRecords r;
        bool ok = cal_records_parse("r", bad[i].text, &r);
        diag_end(m);
        CHECK(!ok && strstr(out, bad[i].want), "case %zu: want '%s', got '%s'", i, bad[i].want, out);
        free(out);
    }
}

/* cal_records_merge: each measured number the median over the sets (the
 * mean of the middle two for an even count), the naming tokens kept; sets
 * that did not measure the same things refused with a sentence. */
static void test_merge(void)
{
    char *t[3] = {
        "meta backend cpu ranks 2 act_bytes 4 host h part compute\n# a comment\n"
        "gemm 64 64 64 0 0 0.003\nkern add 4 1024 2e-06\nshare_sync 4 2 10 0.5 0.7\nsync 2 2 mem 0.004 0.03\nend\n",
        "meta backend cpu ranks 2 act_bytes 4 host h part compute\n"
        "gemm 64 64 64 0 0 0.001\nkern add 4 1024 9e-06\nshare_sync 4 2 12 0.4 0.9\nsync 2 2 mem 0.002 -0.01\nend\n",
        "meta backend cpu ranks 2 act_bytes 4 host h part compute\n"
        "gemm 64 64 64 0 0 0.002\nkern add 4 1024 3e-06\nshare_sync 4 2 11 0.6 0.8\nsync 2 2 mem 0.003 0.05\nend\n",
    };
    char *m = cal_records_merge("full", t, 3);
    CHECK(m && !strcmp(m, "meta backend cpu ranks 2 act_bytes 4 host h part compute\n"
                          "gemm 64 64 64 0 0 0.002\nkern add 4 1024 3.0000000000000001e-06\n"
                          "share_sync 4 2 11 0.5 0.80000000000000004\nsync 2 2 mem 0.0030000000000000001 0.029999999999999999\nend\n"),
          "merged records:\n%s", m ? m : "(none)");
    free(m);
    m = cal_records_merge("full", t, 2);
    CHECK(m && strstr(m, "gemm 64 64 64 0 0 0.002\n"), "two sets: the mean of both: %s", m ? m : "(none)");
    free(m);
    static const struct {
        const char *other, *want;
    } bad[] = {
        {"meta backend cpu ranks 4 act_bytes 4 host h part compute\ngemm 64 64 64 0 0 0.001\n"
         "kern add 4 1024 9e-06\nshare_sync 4 2 12 0.4 0.9\nsync 2 2 mem 0.002 0.01\nend\n", "record 'meta backend ...' of set 1 is not in set 2"},
        {"meta backend cpu ranks 2 act_bytes 4 host h part compute\ngemm 64 64 128 0 0 0.001\n"
         "kern add 4 1024 9e-06\nshare_sync 4 2 12 0.4 0.9\nsync 2 2 mem 0.002 0.01\nend\n", "record 'gemm 64 ...' of set 1 is not in set 2"},
        {"meta backend cpu ranks 2 act_bytes 4 host h part compute\ngemm 64 64 64 0 0 0.001\n"
         "kern add 4 1024 9e-06\nshare_sync 4 2 12 0.4 0.9\nsync 2 2 gemm 0.002 0.01\nend\n", "record 'sync 2 ...' of set 1 is not in set 2"},
        {"meta backend cpu ranks 2 act_bytes 4 host h part compute\nend\n", "set 2 has 2 records, set 1 has 6"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out;
        FILE *f = diag_begin(&out);
        char *two[2] = {t[0], (char *)bad[i].other};
        m = cal_records_merge("full", two, 2);
        diag_end(f);
        CHECK(!m && strstr(out, bad[i].want) && strstr(out, "cannot be merged"), "case %zu: want '%s', got '%s'",
              i, bad[i].want, out);
        free(m);
        free(out);
    }
}

/* A GPU file (`--target cuda --gpu gb200`) keeps the preset's hosts and
 * NVLink domain: measuring a few ranks cannot see them, and a file has no
 * preset's defaults. The same records as a CUDA run's. */
static void test_gpu_topology(const char *cpu_text)
{
    size_t n = strlen(cpu_text) + 64, meta = strcspn(cpu_text, "\n");
    char *text = malloc(n);
    snprintf(text, n, "meta backend cuda ranks 2 act_bytes 2 host synthetic part compute%s", cpu_text + meta);
    CalRecords rec, comm;
    CHECK(cal_records_parse("gpu", text, &rec), "CUDA records parse");
    /* a pair of ranks on two hosts: over NVLink inside an NVL72 rack */
    CHECK(cal_records_parse("comm", "meta backend cuda ranks 2 act_bytes 2 host h part comm\nnode 0 0\nnode 1 1\n"
                                    "coll allreduce 2 2 1 1048576 2e-5\ncoll allreduce 2 2 1 16777216 1e-4\nend\n", &comm),
          "CUDA comm records parse");
    static const struct {
        const char *gpu;
        int host, domain;
    } want[] = {{"gb200", 4, 72}, {"gb300", 4, 72}, {"h100-80gb", 0, 0}};
    if (comm.nodes != 2)
        CHECK(0, "comm records on %d nodes", comm.nodes);
    for (int i = 0; i < 3; i++) {
        PassCluster cl;
        memset(&cl, 0, sizeof cl);
        pass_gpu_preset(want[i].gpu, &cl.gpu);
        CalInput in = {&rec, NULL, {&comm, NULL}, NULL, 0};
        CalReport rep;
        CHECK(cal_fit(&in, &cl, &rep), "%s: fit", want[i].gpu);
        CHECK(cl.gpu.ncoll[PLAN_COLL_ALLREDUCE] == 1 && cl.gpu.coll[PLAN_COLL_ALLREDUCE][0].net == !want[i].domain,
              "%s: two hosts measured %s", want[i].gpu, want[i].domain ? "over NVLink" : "across the network");
        CHECK(cl.gpu.kind == PASS_DEV_GPU && cl.gpus_per_node == want[i].host && cl.nvlink_domain == want[i].domain,
              "%s: hosts of %d, domain %d", want[i].gpu, cl.gpus_per_node, cl.nvlink_domain);
        cl.gpu.gemm_eff = 0.6; /* the records are a CPU's rates: a tiny fraction of a GPU's peak */
        char *txt;
        size_t len;
        FILE *m = open_memstream(&txt, &len);
        pass_cluster_print(m, &cl);
        fclose(m);
        PassCluster back;
        CHECK(pass_cluster_parse("gpu.cluster", txt, len, &back) && pass_cluster_finish(&back, 144, 0, true),
              "%s: the file reads back", want[i].gpu);
        CHECK(back.gpus_per_node == (want[i].host ? want[i].host : 8) &&
                  back.nvlink_domain == (want[i].domain ? want[i].domain : 8),
              "%s: read back hosts of %d, domain %d", want[i].gpu, back.gpus_per_node, back.nvlink_domain);
        free(txt);
    }
    cal_records_free(&rec);
    cal_records_free(&comm);
    free(text);
}

int main(void)
{
    test_parse_errors();
    test_merge();
    PassGpu t = truth();
    char *text = make_records(&t), *comm = make_comm();
    PassGpu ts = truth_solo();
    char *stext = make_records_solo(&ts);
    CalRecords full, cr, solo, cr2;
    /* 4 ranks on 2 cores: half of them done in 62.5% of the time all take:
     * they gained 0.375 / 0.5 = 75% of the waiting ranks' share. */
    CHECK(cal_records_parse("comm-shared", "meta backend cpu ranks 4 act_bytes 4 host h part comm\n"
                                           "share 4 2 0.2 0.125\nsync 4 2 gemm 0.004 -0.01\n"
                                           "sync 4 2 mem 0.004 0.12\nend\n", &cr2), "share record parses");
    CHECK(cal_records_parse("full", text, &full), "records parse");
    CHECK(cal_records_parse("solo", stext, &solo), "solo records parse");
    CHECK(cal_records_parse("comm", comm, &cr), "comm records parse");
    PassCluster cl;
    memset(&cl, 0, sizeof cl);
    pass_gpu_preset("a100-80gb", &cl.gpu);
    CalInput in = {&full, &solo, {&cr, &cr2}, NULL, 2};
    CalReport rep;
    CHECK(cal_fit(&in, &cl, &rep), "fit");
    const PassGpu *g = &cl.gpu;
    CHECK(g->kind == PASS_DEV_CPU && g->act_bytes == 4 && g->cores == 2, "kind %d bytes %d", g->kind,
          g->act_bytes);
    /* GEMMs it was not given: within 6% of the truth (noise is 3%). */
    static const double probe[][3] = {{256, 256, 128}, {768, 384, 512}, {1536, 1024, 96},
                                      {2048, 2048, 2048}, {333, 517, 129}, {96, 96, 96}};
    double worst = 0;
    for (int i = 0; i < 6; i++) {
        double a = pass_gemm_time(g, probe[i][0], probe[i][1], probe[i][2], 1);
        double b = pass_gemm_time(&t, probe[i][0], probe[i][1], probe[i][2], 1);
        worst = fmax(worst, fabs(a / b - 1));
    }
    CHECK(worst < 0.06, "GEMM shapes not measured: worst error %.1f%%", 100 * worst);
    CHECK(rep.gemm.median_err < 0.04, "GEMM fit median error %.1f%%", 100 * rep.gemm.median_err);
    /* Kernels at sizes between the measured ones: the truth is piecewise,
     * so within the step's size; at the measured sizes within the noise. */
    for (int k = 0; k < PASS_NKERN; k++) {
        CHECK(g->kern[k].n == 5, "kernel %s: %d points", pass_kernel_names[k], g->kern[k].n);
        double rows = 16384.0 / 512; /* 16 Ki elements: between the 4 Ki and 32 Ki points */
        double b = pass_kernel_bytes((PassKernel)k, rows, 512, 4);
        double want = kern_time(b), got = pass_kernel_time(g, (PassKernel)k, rows, 512);
        CHECK(fabs(got / want - 1) < 0.15, "kernel %s between points: %g s vs %g s", pass_kernel_names[k],
              got, want);
    }
    /* Attention: the measured rates, interpolated by head dim. */
    CHECK(g->attn_dims == 2, "attention dims %d", g->attn_dims);
    double r96 = pass_attn_rate(g, 0, 96, 2048);
    CHECK(fabs(r96 / (5e9 * 1.5 * 1.1) - 1) < 0.02, "attention at D 96: %g FLOP/s", r96);
    /* Collectives: alpha 4 us, bus bandwidth 3 GB/s. */
    CHECK(g->ncoll[PLAN_COLL_ALLREDUCE] == 1 && g->ncoll[PLAN_COLL_SENDRECV] == 1, "coll fits");
    for (int k = PLAN_COLL_ALLREDUCE; k <= PLAN_COLL_SENDRECV; k++) {
        if (k == PLAN_COLL_SLICE)
            continue;
        const PassCollFit *f = &g->coll[k][0];
        CHECK(f->group == 2 && fabs(f->busbw / 3e9 - 1) < 0.05 && fabs(f->alpha_s / 4e-6 - 1) < 0.25,
              "%s: alpha %.2f us busbw %.2f GB/s", plan_coll_name((PlanCollKind)k), f->alpha_s * 1e6,
              f->busbw * 1e-9);
    }
    /* A rank alone on its node computes at the solo rates: a 2-core node
     * with 1 rank; with 2 ranks, at the base ones. */
    CHECK(g->has_solo, "no solo rates");
    {
        PassCluster one = cl, two = cl;
        one.ngpus = 1, two.ngpus = 2, one.gpus_per_node = two.gpus_per_node = 0;
        one.nodes = two.nodes = 1;
        CHECK(pass_cluster_finish(&one, 1, 0, true) && pass_cluster_finish(&two, 2, 0, true), "finish");
        double a1 = pass_gemm_time(&one.gpu, 1536, 1024, 512, 1), b1 = pass_gemm_time(&ts, 1536, 1024, 512, 1);
        double a2 = pass_gemm_time(&two.gpu, 1536, 1024, 512, 1), b2 = pass_gemm_time(&t, 1536, 1024, 512, 1);
        CHECK(fabs(a1 / b1 - 1) < 0.06 && fabs(a2 / b2 - 1) < 0.06, "GEMM alone %g vs %g, shared %g vs %g",
              a1, b1, a2, b2);
        double k1 = pass_kernel_time(&one.gpu, PASS_K_SILU_FWD, 1, 65536);
        double k2 = pass_kernel_time(&two.gpu, PASS_K_SILU_FWD, 1, 65536);
        CHECK(fabs(k2 / k1 / 1.6 - 1) < 0.02, "kernel alone %g vs shared %g", k1, k2);
        PassCluster four = cl;
        four.ngpus = 4, four.gpus_per_node = 0, four.nodes = 1;
        CHECK(pass_cluster_finish(&four, 4, 0, true), "finish 4");
        double a4 = pass_gemm_time(&four.gpu, 1536, 1024, 512, 1);
        CHECK(a4 > 1.8 * a2, "4 ranks on 2 cores: %g vs %g", a4, a2);
    }
    /* The file reads back equal. */
    char *txt;
    size_t len;
    FILE *m = open_memstream(&txt, &len);
    pass_cluster_print(m, &cl);
    fclose(m);
    PassCluster back;
    CHECK(pass_cluster_parse("fitted.cluster", txt, len, &back), "fitted file parses:\n%s", txt);
    CHECK(fabs(g->core_share - 0.75) < 1e-9 && fabs(back.gpu.core_share - 0.75) < 1e-5, "core_share %g, read back %g",
          g->core_share, back.gpu.core_share);
    /* The waits at collectives in pairs: one rank per core (make_comm),
     * and 4 ranks on 2 cores (a fraction below 0 is noise: 0). */
    CHECK(fabs(g->sync_gemm - 0.02) < 1e-12 && fabs(g->sync_mem - 0.07) < 1e-12 && g->sync_gemm_shared == 0 &&
              fabs(g->sync_mem_shared - 0.12) < 1e-12,
          "sync waits %g %g %g %g", g->sync_gemm, g->sync_mem, g->sync_gemm_shared, g->sync_mem_shared);
    CHECK(fabs(back.gpu.sync_gemm - 0.02) < 1e-6 && fabs(back.gpu.sync_mem - 0.07) < 1e-6 &&
              back.gpu.sync_gemm_shared == 0 && fabs(back.gpu.sync_mem_shared - 0.12) < 1e-6,
          "sync waits read back %g %g %g %g", back.gpu.sync_gemm, back.gpu.sync_mem, back.gpu.sync_gemm_shared,
          back.gpu.sync_mem_shared);
    CHECK(back.gpu.has_solo && fabs(back.gpu.solo.peak_flops / g->solo.peak_flops - 1) < 1e-5 &&
              back.gpu.solo.kern[PASS_K_ADAMW].n == g->solo.kern[PASS_K_ADAMW].n, "solo round trip");
    CHECK(back.gpu.kind == PASS_DEV_CPU && back.gpu.attn_dims == 2 &&
              fabs(pass_gemm_time(&back.gpu, 700, 300, 200, 1) / pass_gemm_time(g, 700, 300, 200, 1) - 1) < 1e-5 &&
              fabs(pass_kernel_time(&back.gpu, PASS_K_ADAMW, 3, 1000) /
                       pass_kernel_time(g, PASS_K_ADAMW, 3, 1000) - 1) < 1e-5,
          "round trip");
    free(txt);
    test_gpu_topology(text);
    cal_records_free(&full);
    cal_records_free(&cr);
    cal_records_free(&cr2);
    cal_records_free(&solo);
    free(stext);
    free(text);
    free(comm);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("calibrate fit: GEMM worst %.1f%% on unseen shapes, median fit error %.1f%%\n", 100 * worst,
           100 * rep.gemm.median_err);
    return 0;
}
