/* sweep.c: TEST-ONLY: the LLaMA-13B layout sweep through the cost model. */
#include "sweep.h"

#include "megatron.h"
#include "refcsv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* The Aleph Alpha code base is Megatron-derived: we assume its distributed
 * optimizer (ZeRO-1) with bf16 gradients (fp32 gradients cannot fit pure
 * data parallelism at 13.999e9 parameters, which ran), Megatron's fp32
 * vocabulary-parallel loss, an eager SwiGLU (silu(gate) * up: autograd keeps
 * silu(gate) too), and no sequence parallelism (not recorded; see
 * docs/cost-model.md for the comparison). PyTorch's caching allocator
 * fragments: its reserve is larger than ptdc's static arena needs. */
const SweepStack sweep_stack = {
    .sp = false,
    .zero = 1,
    .grad_bytes = 2,
    .loss_fp32 = true,
    .alloc_reserve = 0.05,
    .frag_act = 0.15,
    .grad_accum_unfused = true,
    .swiglu_unfused = true,
    .attn_dropout = true,
};

static PassAttnKernel kernel_of(const char *s)
{
    if (!strcmp(s, "flash2"))
        return PASS_KERNEL_FLASH2;
    if (!strcmp(s, "flash1"))
        return PASS_KERNEL_FLASH1;
    if (!strcmp(s, "megatron_fused"))
        return PASS_KERNEL_FUSED_SOFTMAX;
    if (!strcmp(s, "torch"))
        return PASS_KERNEL_EAGER;
    fprintf(stderr, "unknown attention_impl '%s'\n", s);
    exit(1);
}

int sweep_run(const char *ref_dir, const char *model_dir, const SweepStack *st, SweepRow **rows)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/layouts_llama13b_seq2048_64xA100.csv", ref_dir);
    RefCsv *csv = ref_load(path);
    snprintf(path, sizeof path, "%s/llama2-13b.mdl", model_dir);
    IrArena *a = ir_arena_new();
    IrGraph *g = mega_compile(a, path, "seq=2048,vocab=128000", 2048);
    if (!g) {
        fprintf(stderr, "cannot compile %s\n", path);
        exit(1);
    }
    PassCluster cl = {.ngpus = 64, .gpus_per_node = 8};
    pass_gpu_preset("a100-80gb", &cl.gpu);
    SweepRow *R = calloc((size_t)csv->nrows, sizeof *R);
    for (int r = 0; r < csv->nrows; r++) {
        SweepRow *w = &R[r];
        w->tp = atoi(ref_get(csv, r, "tp"));
        w->pp = atoi(ref_get(csv, r, "pp"));
        w->dp = atoi(ref_get(csv, r, "dp"));
        w->mb = atoi(ref_get(csv, r, "micro_batch"));
        w->recompute = !strcmp(ref_get(csv, r, "activation_checkpointing"), "every_layer")
                           ? PLAN_RECOMPUTE_FULL : PLAN_RECOMPUTE_NONE;
        const char *impl = ref_get(csv, r, "attention_impl");
        w->attn = !strcmp(impl, "flash2") ? "flash2" : !strcmp(impl, "flash1") ? "flash1"
                : !strcmp(impl, "torch") ? "torch" : "megatron_fused";
        w->kernel = kernel_of(impl);
        w->rms_kernel = atoi(ref_get(csv, r, "rmsnorm_kernel")) == 1;
        w->ok = !strcmp(ref_get(csv, r, "status"), "ok");
        w->mfu = ref_num(csv, r, "mfu");
        w->step_s = ref_num(csv, r, "step_time_s");
        MegaLayout L = {.tp = w->tp, .pp = w->pp, .dp = w->dp, .v = 1, .micro_batch = w->mb,
                        .global_batch = 2048, .sp = st->sp, .zero = st->zero,
                        .recompute = w->recompute,
                        .attention = w->kernel >= PASS_KERNEL_FUSED_SOFTMAX ? PLAN_ATTN_MATERIALIZED
                                                                            : PLAN_ATTN_FLASH,
                        .gpus_per_node = 8};
        Plan plan;
        if (!mega_plan(g, &L, &plan))
            exit(1);
        /* Megatron's stack as the preset describes it, then the code base's
         * differences and the row's kernels. */
        PassCostCtx c = {.cl = &cl, .attention = L.attention};
        pass_stack_preset("megatron", &c.st);
        c.st.attn_kernel = w->kernel;
        c.st.norm_unfused = !w->rms_kernel;
        c.st.loss_fp32 = st->loss_fp32;
        c.st.grad_bytes = st->grad_bytes;
        c.st.alloc_reserve = st->alloc_reserve;
        c.st.frag_act = st->frag_act;
        c.st.grad_accum_unfused = st->grad_accum_unfused;
        c.st.swiglu_unfused = st->swiglu_unfused;
        c.st.attn_dropout = st->attn_dropout;
        pass_predict(&c, g, &plan, &w->pred);
        mega_plan_free(&plan);
    }
    int n = csv->nrows;
    ref_free(csv);
    ir_graph_free(g);
    ir_arena_free(a);
    *rows = R;
    return n;
}

void sweep_free(SweepRow *rows, int n)
{
    for (int i = 0; i < n; i++)
        pass_prediction_free(&rows[i].pred);
    free(rows);
}

static void ranks(const double *x, int n, double *r)
{
    for (int i = 0; i < n; i++) {
        int less = 0, eq = 0;
        for (int j = 0; j < n; j++)
            less += x[j] < x[i], eq += x[j] == x[i];
        r[i] = less + (eq + 1) / 2.0;
    }
}

double spearman(const double *x, const double *y, int n)
{
    double *rx = malloc(sizeof(double) * (size_t)n), *ry = malloc(sizeof(double) * (size_t)n);
    ranks(x, n, rx);
    ranks(y, n, ry);
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++)
        mx += rx[i] / n, my += ry[i] / n;
    double sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        sxy += (rx[i] - mx) * (ry[i] - my);
        sxx += (rx[i] - mx) * (rx[i] - mx);
        syy += (ry[i] - my) * (ry[i] - my);
    }
    free(rx);
    free(ry);
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0;
}

char *sweep_capture(const char *cmd, int *status)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t k; (k = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
        n += k;
        if (cap - n < 4096)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}
