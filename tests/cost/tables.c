/* tables.c: TEST-ONLY evaluation of the other reference tables. Each row
 * is a GPT-style model (models/gpt.mdl with the row's sizes) under a
 * Megatron-style layout; what a table leaves out is assumed as stated per
 * table. */
#include "tables.h"

#include "megatron.h"
#include "refcsv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Run {
    const char *gpu;
    int layers, hidden, heads, vocab, seq, ffn_mult;
    MegaLayout L;
    PassCostCtx c;                /* cl is filled in */
} Run;

/* Predict r's layout; with tune, r->L's micro-batch and interleaving are
 * what the table does not give: every micro-batch dividing the sequences a
 * replica runs per step and every number of model chunks Megatron accepts
 * (layers per pipeline rank divisible by it; micro-batches divisible by pp,
 * megatron/core/pipeline_parallel/schedules.py; at most PLAN_PROG_MAX_CHUNKS) is
 * priced, and r->L becomes the fastest that fits (the fastest of all when
 * none does): the layout the published run's tuning would have found. */
static bool run_tuned(const char *model_dir, Run *r, bool tune, PassPrediction *p)
{
    char path[1024], sets[256];
    snprintf(path, sizeof path, "%s/gpt.mdl", model_dir);
    snprintf(sets, sizeof sets, "n_layers=%d,d_model=%d,n_heads=%d,vocab=%d,seq=%d", r->layers,
             r->hidden, r->heads, r->vocab, r->seq);
    IrArena *a = ir_arena_new();
    IrGraph *g = mega_compile(a, path, sets, r->L.global_batch);
    if (!g) {
        ir_arena_free(a);
        return false;
    }
    PassCluster cl = {.ngpus = r->L.tp * r->L.pp * r->L.dp, .gpus_per_node = 8};
    if (!pass_gpu_preset(r->gpu, &cl.gpu)) {
        fprintf(stderr, "unknown gpu %s\n", r->gpu);
        exit(1);
    }
    r->c.cl = &cl;
    r->c.attention = r->L.attention;
    MegaLayout want = r->L;
    int per_replica = (int)(want.global_batch / want.dp), per_rank = r->layers / want.pp;
    bool any = false;
    for (int mb = tune ? 1 : want.micro_batch; mb <= (tune ? per_replica : want.micro_batch); mb++) {
        if (per_replica % mb)
            continue;
        for (int v = tune ? 1 : want.v; v <= (tune ? per_rank : want.v) && v <= PLAN_PROG_MAX_CHUNKS; v++) {
            if (per_rank % v || (tune && v > 1 && (want.pp < 2 || (per_replica / mb) % want.pp)))
                continue;
            MegaLayout L = want;
            L.micro_batch = mb, L.v = v;
            Plan plan;
            if (!mega_plan(g, &L, &plan))
                continue;
            PassPrediction q;
            pass_predict(&r->c, g, &plan, &q);
            mega_plan_free(&plan);
            bool better = !any || (q.fits && !p->fits) ||
                          (q.fits == p->fits && q.step_time_s < p->step_time_s);
            if (better) {
                if (any)
                    pass_prediction_free(p);
                *p = q, r->L = L, any = true;
            } else {
                pass_prediction_free(&q);
            }
        }
    }
    ir_graph_free(g);
    ir_arena_free(a);
    r->c.cl = NULL;
    return any;
}

static bool run(const char *model_dir, Run *r, PassPrediction *p) { return run_tuned(model_dir, r, false, p); }

static void add(Table *t, const char *label, const char *group, double meas, double step_meas,
                const PassPrediction *p)
{
    t->rows = realloc(t->rows, sizeof *t->rows * (size_t)(t->n + 1));
    TableRow *w = &t->rows[t->n++];
    memset(w, 0, sizeof *w);
    snprintf(w->label, sizeof w->label, "%s", label);
    snprintf(w->group, sizeof w->group, "%s", group);
    w->measured = meas;
    w->step_measured = step_meas;
    w->predicted = p->mfu;
    w->step_predicted = p->step_time_s;
    w->fits = p->fits;
    w->peak_gib = p->peak_mem_bytes / 1073741824.0;
}

void table_free(Table *t)
{
    free(t->rows);
    t->rows = NULL;
    t->n = 0;
}

static int I(const RefCsv *c, int r, const char *k) { return atoi(ref_get(c, r, k)); }

static PassStack stack(const char *name)
{
    PassStack st;
    if (!pass_stack_preset(name, &st))
        ir_die("no stack preset %s", name);
    return st;
}

/* Megatron-LM 2021 on Selene: full recomputation, fused softmax with
 * attention dropout, fp32 main gradients without a distributed optimizer,
 * gradient accumulation fused into the GEMM, fp32 loss. Micro-batch and
 * interleaving are not given: micro-batch 1, plain 1F1B. */
bool table_sc21(const char *ref, const char *models, Table *t)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/megatron_sc21.csv", ref);
    RefCsv *c = ref_load(path);
    *t = (Table){"Megatron-LM SC21 (Narayanan et al. 2021, Table 1)", "megatron_sc21",
                 "GPT 1.7B-1T on A100-80GB, full recompute", 0, NULL};
    for (int r = 0; r < c->nrows; r++) {
        Run k = {.gpu = "a100-80gb", .layers = I(c, r, "layers"), .hidden = I(c, r, "hidden"),
                 .heads = I(c, r, "heads"), .vocab = I(c, r, "vocab"), .seq = I(c, r, "seq_len")};
        k.L = (MegaLayout){.tp = I(c, r, "tp"), .pp = I(c, r, "pp"), .dp = I(c, r, "dp"), .v = 1,
                           .micro_batch = 1, .global_batch = I(c, r, "global_batch"), .sp = false,
                           .zero = 0, .recompute = PLAN_RECOMPUTE_FULL,
                           .attention = PLAN_ATTN_MATERIALIZED};
        /* Megatron-LM 2021: Megatron's fused scale-mask-softmax. */
        k.c = (PassCostCtx){.st = stack("megatron")};
        k.c.st.attn_kernel = PASS_KERNEL_FUSED_SOFTMAX;
        PassPrediction p;
        if (!run(models, &k, &p))
            return false;
        char label[128];
        snprintf(label, sizeof label, "%sB t%d p%d d%d", ref_get(c, r, "params_b"), k.L.tp, k.L.pp,
                 k.L.dp);
        add(t, label, "A100", ref_num(c, r, "mfu_est_no_recompute_derived"),
            ref_num(c, r, "step_time_s_derived"), &p);
        pass_prediction_free(&p);
    }
    ref_free(c);
    return true;
}

/* Megatron-Core r0.8 on H100, as the README says it ran: sequence
 * parallelism, --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap
 * (the megatron preset: tp_overlap userbuffers, param_gather forward),
 * distributed optimizer (fp32 main gradients), flash attention, no
 * recomputation, fused gradient accumulation. Micro-batch and interleaving
 * are not given (NVIDIA tuned them; no script of that release states them):
 * each row takes the fastest layout that fits over both (run_tuned). */
bool table_h100(const char *ref, const char *models, Table *t)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/megatron_readme_h100.csv", ref);
    RefCsv *c = ref_load(path);
    *t = (Table){"Megatron-Core on H100 (Megatron-LM README)", "megatron_readme_h100",
                 "GPT 1.7B-462B, seq 4096, weak scaling", 0, NULL};
    for (int r = 0; r < c->nrows; r++) {
        Run k = {.gpu = "h100-80gb", .layers = I(c, r, "layers"), .hidden = I(c, r, "hidden"),
                 .heads = I(c, r, "heads"), .vocab = I(c, r, "vocab"), .seq = I(c, r, "seq_len")};
        k.L = (MegaLayout){.tp = I(c, r, "tp"), .pp = I(c, r, "pp"), .dp = I(c, r, "dp"), .v = 1,
                           .micro_batch = 1, .global_batch = I(c, r, "global_batch"),
                           .sp = I(c, r, "tp") > 1, .zero = 1, .recompute = PLAN_RECOMPUTE_NONE,
                           .attention = PLAN_ATTN_FLASH};
        k.c = (PassCostCtx){.st = stack("megatron")};
        PassPrediction p;
        if (!run_tuned(models, &k, true, &p))
            return false;
        char label[128];
        snprintf(label, sizeof label, "%s t%d p%d d%d mb%d v%d", ref_get(c, r, "model_size"), k.L.tp,
                 k.L.pp, k.L.dp, k.L.micro_batch, k.L.v);
        add(t, label, "H100", ref_num(c, r, "mfu"), NAN, &p);
        pass_prediction_free(&p);
    }
    ref_free(c);
    return true;
}

/* MegaScale Table 2 / Figure 9, the Megatron-LM rows (the MegaScale rows
 * change the algorithm): interleaved 1F1B with the table's v, distributed
 * optimizer, micro-batch 1, A100-80GB, and Megatron-LM's recipe for GPT-175B:
 * sequence parallelism with selective recomputation of its core attention
 * (Korthikanti et al. 2022; the Megatron-LM README of that time gives 175B
 * MFU 51.4% and HFU 52.8%, the gap being the recomputed attention), whose
 * fused scale-mask-softmax keeps the S x S scores only while it runs: kept
 * for backward, they would not fit (83 GiB at 256 GPUs). What MegaScale
 * (section 3) says it added over this baseline, the baseline runs without:
 * FlashAttention-2, tensor-parallel overlap in forward (Megatron-LM's linear
 * layers overlap only the backward pair: tp_overlap backward), pipeline
 * overlap (its transfers block) and data-parallel overlap (its
 * reduce-scatter and all-gather block). */
bool table_megascale(const char *ref, const char *models, Table *t)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/megascale_2402.15627.csv", ref);
    RefCsv *c = ref_load(path);
    *t = (Table){"MegaScale (Jiang et al. 2024): Megatron-LM baseline", "megascale_2402.15627",
                 "GPT-175B and 530B on up to 12288 A100", 0, NULL};
    for (int r = 0; r < c->nrows; r++) {
        if (strcmp(ref_get(c, r, "system"), "megatron-lm") != 0)
            continue;
        Run k = {.gpu = "a100-80gb", .layers = I(c, r, "layers"), .hidden = I(c, r, "hidden"),
                 .heads = I(c, r, "heads"), .vocab = I(c, r, "vocab"), .seq = I(c, r, "seq_len")};
        k.L = (MegaLayout){.tp = I(c, r, "tp"), .pp = I(c, r, "pp"), .dp = I(c, r, "dp"),
                           .v = I(c, r, "interleave_v"), .micro_batch = 1,
                           .global_batch = I(c, r, "global_batch"), .sp = true, .zero = 1,
                           .recompute = PLAN_RECOMPUTE_SELECTIVE,
                           .attention = PLAN_ATTN_MATERIALIZED};
        k.c = (PassCostCtx){.st = stack("megatron")};
        k.c.st.attn_kernel = PASS_KERNEL_FUSED_SOFTMAX;
        k.c.st.tp_overlap = PASS_TP_OVERLAP_BACKWARD;
        k.c.st.dp_overlap = false;
        k.c.st.pp_overlap = false;
        PassPrediction p;
        if (!run(models, &k, &p))
            return false;
        char label[128];
        snprintf(label, sizeof label, "%s %d GPUs b%d", ref_get(c, r, "model"),
                 I(c, r, "n_gpus"), I(c, r, "global_batch"));
        add(t, label, ref_get(c, r, "model"), ref_num(c, r, "mfu"),
            ref_num(c, r, "iteration_time_s"), &p);
        pass_prediction_free(&p);
    }
    ref_free(c);
    return true;
}

/* MosaicML llm-foundry MPT benchmarks: FSDP FULL_SHARD (ZeRO-3 over every
 * GPU), flash attention, the table's micro-batch and activation
 * checkpointing (full recompute), 8 GPUs per node. MPT is GPT-like (GELU 4h,
 * tied embeddings, vocabulary 50368); its sizes are llm-foundry's configs.
 * The fp8 rows are skipped (ptdc models bf16). */
static const struct {
    const char *name;
    int layers, hidden, heads;
} mpt[] = {{"125m", 12, 768, 12},   {"350m", 24, 1024, 16}, {"760m", 24, 1536, 12},
           {"1b", 24, 2048, 16},    {"3b", 32, 2560, 20},   {"7b", 32, 4096, 32},
           {"13b", 40, 5120, 40},   {"30b", 48, 7168, 64},  {"70b", 80, 8192, 64}};

bool table_mpt(const char *ref, const char *models, Table *t)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/mpt_llmfoundry_benchmarks.csv", ref);
    RefCsv *c = ref_load(path);
    *t = (Table){"MosaicML llm-foundry MPT benchmarks", "mpt_llmfoundry_benchmarks",
                 "FSDP data parallelism, 125M-70B, A100 and H100", 0, NULL};
    for (int r = 0; r < c->nrows; r++) {
        if (strstr(ref_get(c, r, "precision"), "fp8"))
            continue;
        int mi = -1;
        for (size_t i = 0; i < sizeof mpt / sizeof mpt[0]; i++)
            if (!strcmp(mpt[i].name, ref_get(c, r, "model")))
                mi = (int)i;
        if (mi < 0)
            continue;
        const char *gpu = ref_get(c, r, "gpu");
        Run k = {.gpu = !strcmp(gpu, "a100_40gb") ? "a100-40gb" : !strcmp(gpu, "a100_80gb") ? "a100-80gb"
                                                                                      : "h100-80gb",
                 .layers = mpt[mi].layers, .hidden = mpt[mi].hidden, .heads = mpt[mi].heads,
                 .vocab = 50368, .seq = I(c, r, "seq_len")};
        int gpus = I(c, r, "n_gpus"), mb = I(c, r, "micro_batch");
        int zero = !strcmp(ref_get(c, r, "sharding"), "FULL_SHARD") ? 3 : 2;
        k.L = (MegaLayout){.tp = 1, .pp = 1, .dp = gpus, .v = 1, .micro_batch = mb,
                           .global_batch = (int64_t)I(c, r, "global_batch"), .sp = false,
                           .zero = zero,
                           .recompute = !strcmp(ref_get(c, r, "activation_checkpointing"), "True")
                                            ? PLAN_RECOMPUTE_FULL : PLAN_RECOMPUTE_NONE,
                           .attention = PLAN_ATTN_FLASH};
        /* llm-foundry's FSDP: mixed precision PURE (bf16 gradients, reduced
         * in bf16), its fused LayerNorm and triton flash attention
         * (FlashAttention-1 class), Composer's gradient accumulation into
         * the FSDP shards; memory as the table reports it ran, without the
         * allocator terms fitted on the Megatron sweep. */
        k.c = (PassCostCtx){.st = stack("fsdp")};
        k.c.st.attn_kernel = PASS_KERNEL_FLASH1;
        k.c.st.norm_unfused = false;
        k.c.st.loss_fp32 = false;
        k.c.st.grad_bytes = 0;
        k.c.st.grad_accum_unfused = false;
        k.c.st.frag_act = 0;
        k.c.st.alloc_reserve = 0;
        PassPrediction p;
        if (!run(models, &k, &p))
            return false;
        char label[128];
        snprintf(label, sizeof label, "%s s%d %dx%s mb%d%s", mpt[mi].name, k.seq, gpus, gpu, mb,
                 k.L.recompute == PLAN_RECOMPUTE_FULL ? " ckpt" : "");
        add(t, label, k.gpu, ref_num(c, r, "mfu"), NAN, &p);
        pass_prediction_free(&p);
    }
    ref_free(c);
    return true;
}
