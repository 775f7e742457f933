/* trainer.c: the fixed half of every training program ptdc generates (the
 * other half, model.c, holds the model and the plan; see trainer.h).
 *
 * One process per rank. World rank = pipeline rank x CG_DEVICES + mesh index,
 * mesh index = coordinate 0 x CG_MESH1 + coordinate 1. A step: zero the
 * gradients, walk this pipeline rank's schedule (stage forwards and
 * backwards per micro-batch), then per parameter sum tied copies across
 * pipeline ranks and reduce over the mesh axes its gradient is partial on
 * (all-reduce, or ZeRO's reduce-scatter), clip by the global norm, AdamW on
 * this rank's shard, all-gather ZeRO-1/2 shards back. Written in the common
 * subset of C11 and C++ so that nvcc compiles it for the CUDA runtime. */
#include "trainer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

RtComm *g_comm[4];
int g_coord[2];
float *g_loss;
rt_act *g_scratch, *g_step_ws, *g_ws_act;
float *g_ws_f32;
int32_t *g_ws_i32;

typedef struct Flags {
    long steps, decay_steps, save_every, warmup;
    const char *data, *load, *save, *import_hf, *export_hf, *export_dtype;
    long long shard_bytes; /* --max-shard-size */
    double lr, min_lr, clip, weight_decay, beta1, beta2, eps;
    unsigned long long seed;
    int grad_check;
} Flags;

static Flags fl;
static const CgRank *R;          /* what this rank's pipeline rank runs */
static int pp_rank, mesh_index, world_rank;
static RtComm *world, *tied[64];
static RtData *data;
static int32_t *tok_host, *tgt_host, *stage_host;
static int64_t step;             /* steps done */

#define ROOT (world_rank == 0)

static void usage(void)
{
    printf("usage: train [options]   (run through run.sh: it launches all %d ranks)\n"
           "Trains %s with the plan %s.\n\n"
           "  --steps N          train until step N (default 10)\n"
           "  --data SPEC        llm.c shard, u16:PATH, u32:PATH or synthetic:SEED (default synthetic:1)\n"
           "  --load DIR         resume from a checkpoint (weights, optimizer, step, data position)\n"
           "  --save DIR         write a checkpoint at the end (and every --save-every steps)\n"
           "  --save-every N     checkpoint every N steps\n"
           "  --lr X             peak learning rate (default 1e-3)\n"
           "  --warmup N         linear warm-up steps (default 0)\n"
           "  --min-lr X         floor of the cosine decay (default lr / 10)\n"
           "  --decay-steps N    length of the schedule (default --steps)\n"
           "  --clip X           clip the global gradient norm to X (default 1; 0: off)\n"
           "  --weight-decay X   AdamW weight decay of matrices (default 0.1)\n"
           "  --adam-eps X       AdamW epsilon (default 1e-8; LLaMA-2 used 1e-5)\n"
           "  --seed N           initialisation seed (default 0)\n"
           "  --import-hf PATH   initial weights from Hugging Face safetensors: a file, a model\n"
           "                     directory or its model.safetensors.index.json (shards)\n"
           "  --export-hf PATH   write the trained weights with Hugging Face names: PATH.safetensors\n"
           "                     as one file, any other PATH as a model directory of shards\n"
           "  --export-dtype T   f32 (default), bf16 or f16\n"
           "  --max-shard-size N bytes per shard of a directory export (default 5000000000)\n"
           "  --grad-check       check every parameter's gradient against finite differences\n"
           "                     of the loss at the initial weights, then exit\n",
           CG_WORLD, CG_MODEL, CG_PLAN);
}

static void bad_flag(const char *flag, const char *why, const char *value)
{
    if (ROOT)
        fprintf(stderr, "train: %s %s, got '%s'\n", flag, why, value ? value : "nothing");
    rt_finalize();
    exit(2);
}

static long int_flag(const char *flag, const char *s, long lo)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo)
        bad_flag(flag, lo > 0 ? "expects a positive integer" : "expects an integer >= 0", s);
    return v;
}

static double num_flag(const char *flag, const char *s)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || errno || end == s || *end || !(v >= 0))
        bad_flag(flag, "expects a number >= 0", s);
    return v;
}

static void parse_flags(int argc, char **argv)
{
    fl.steps = 10;
    fl.data = "synthetic:1";
    fl.lr = 1e-3;
    fl.min_lr = -1;
    fl.decay_steps = -1;
    fl.clip = 1.0;
    fl.weight_decay = 0.1;
    fl.beta1 = 0.9;
    fl.beta2 = 0.95;
    fl.eps = 1e-8;
    fl.export_dtype = "F32";
    fl.shard_bytes = 5000000000LL; /* save_pretrained's max_shard_size "5GB" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (ROOT)
                usage();
            rt_finalize();
            exit(0);
        }
#define FLAG(name) (!strcmp(a, name) && (i++, 1))
        if (FLAG("--steps"))
            fl.steps = int_flag(a, v, 0);
        else if (FLAG("--decay-steps"))
            fl.decay_steps = int_flag(a, v, 1);
        else if (FLAG("--save-every"))
            fl.save_every = int_flag(a, v, 1);
        else if (FLAG("--warmup"))
            fl.warmup = int_flag(a, v, 0);
        else if (FLAG("--seed"))
            fl.seed = (unsigned long long)int_flag(a, v, 0);
        else if (FLAG("--data"))
            fl.data = v ? v : (bad_flag(a, "expects a token source", v), "");
        else if (FLAG("--load"))
            fl.load = v ? v : (bad_flag(a, "expects a directory", v), "");
        else if (FLAG("--save"))
            fl.save = v ? v : (bad_flag(a, "expects a directory", v), "");
        else if (FLAG("--import-hf"))
            fl.import_hf = v ? v : (bad_flag(a, "expects a safetensors file or directory", v), "");
        else if (FLAG("--export-hf"))
            fl.export_hf = v ? v : (bad_flag(a, "expects a .safetensors file or a directory", v), "");
        else if (FLAG("--export-dtype"))
            fl.export_dtype = v && !strcmp(v, "f32") ? "F32" : v && !strcmp(v, "bf16") ? "BF16"
                            : v && !strcmp(v, "f16") ? "F16"
                            : (bad_flag(a, "expects f32, bf16 or f16", v), "");
        else if (FLAG("--max-shard-size"))
            fl.shard_bytes = int_flag(a, v, 1);
        else if (FLAG("--lr"))
            fl.lr = num_flag(a, v);
        else if (FLAG("--min-lr"))
            fl.min_lr = num_flag(a, v);
        else if (FLAG("--clip"))
            fl.clip = num_flag(a, v);
        else if (FLAG("--weight-decay"))
            fl.weight_decay = num_flag(a, v);
        else if (FLAG("--adam-eps"))
            fl.eps = num_flag(a, v);
        else if (!strcmp(a, "--grad-check"))
            fl.grad_check = 1;
        else
            bad_flag(a, "is not an option (see --help)", a);
#undef FLAG
    }
    if (fl.min_lr < 0)
        fl.min_lr = fl.lr / 10;
    if (fl.decay_steps < 0)
        fl.decay_steps = fl.steps;
}

/* ------------------------------------------------------------ processes */

static void make_comms(void)
{
    world = rt_comm_world();
    int c0 = g_coord[0], c1 = g_coord[1];
    /* Mask 1: along axis 0 (same coordinate 1); mask 2: along axis 1; mask 3: the mesh. */
    g_comm[0] = NULL;
    g_comm[1] = rt_comm_split(pp_rank * CG_DEVICES + c1, c0);
    g_comm[2] = rt_comm_split(pp_rank * CG_DEVICES + c0, c1);
    g_comm[3] = rt_comm_split(pp_rank, mesh_index);
    for (int i = 0; i < CG_NTIED; i++)
        tied[i] = rt_comm_split(cg_tied_mask[i] >> pp_rank & 1 ? mesh_index : -1, pp_rank);
}

static int peer(int pp) { return pp * CG_DEVICES + mesh_index; }

void cg_recv(void *buf, int64_t n, RtType t, int pp_peer, int tag)
{
    rt_wait(rt_irecv(world, buf, n, t, peer(pp_peer), tag));
}

void cg_wait(RtReq **req)
{
    if (*req)
        rt_wait(*req);
    *req = NULL;
}

void cg_send(RtReq **req, const void *buf, int64_t n, RtType t, int pp_peer, int tag)
{
    cg_wait(req);
    *req = rt_isend(world, buf, n, t, peer(pp_peer), tag);
}

void cg_load(int32_t *dst, int which, int mb, int64_t b0, int64_t nb, int64_t s0, int64_t ns)
{
    for (int64_t b = 0; b < nb; b++) {
        int64_t seq = step * CG_GLOBAL_BATCH + (int64_t)mb * CG_MB_SEQS + b0 + b;
        rt_data_sequence(data, seq, tok_host, tgt_host);
        memcpy(stage_host + b * ns, (which == CG_TOKENS ? tok_host : tgt_host) + s0,
               (size_t)ns * sizeof(int32_t));
    }
    rt_to_device(dst, stage_host, (size_t)(nb * ns) * sizeof(int32_t));
}

static bool time_gemm;
static double gemm_s;     /* seconds in GEMMs this step */
static double gemm_flops; /* their FLOPs */

void cg_matmul(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
               bool ta, bool tb, bool accumulate)
{
    if (!time_gemm) {
        (rt_matmul)(c, a, b, M, N, K, ta, tb, accumulate);
        return;
    }
    double t0 = rt_time();
    (rt_matmul)(c, a, b, M, N, K, ta, tb, accumulate);
    gemm_s += rt_time() - t0;
    gemm_flops += 2.0 * (double)M * (double)N * (double)K;
}

/* ------------------------------------------------------------ parameters */

static int group_size(const CgParam *p) { return p->pmask ? rt_comm_size(g_comm[p->pmask]) : 1; }
static int64_t padded(const CgParam *p) { return p->zshard ? p->shard * group_size(p) : p->numel; }
static int64_t shard_offset(const CgParam *p)
{
    return p->zshard ? (int64_t)rt_comm_rank(g_comm[p->pmask]) * p->shard : 0;
}
static int mesh_size(int a) { return a == 0 ? CG_MESH0 : CG_MESH1; }

/* This rank's block of p: offset and extent per dim. */
static void block(const CgParam *p, int64_t *off, int64_t *loc)
{
    for (int i = 0; i < p->rank; i++) {
        int a = p->split_axis[i];
        loc[i] = a >= 0 ? p->global[i] / mesh_size(a) : p->global[i];
        off[i] = a >= 0 ? g_coord[a] * loc[i] : 0;
    }
}

/* The 2-D (or 1-D) view Hugging Face stores: dims [0, hf_split) are rows. */
static int view(const CgParam *p, int64_t *vg)
{
    if (!p->hf_name) {
        for (int i = 0; i < p->rank; i++)
            vg[i] = p->global[i];
        return p->rank;
    }
    int64_t rows = 1, cols = 1;
    for (int i = 0; i < p->rank; i++)
        *(i < p->hf_split ? &rows : &cols) *= p->global[i];
    if (p->hf_split == 0) {
        vg[0] = cols;
        return 1;
    }
    vg[0] = rows;
    vg[1] = cols;
    return 2;
}

/* Dims [lo, hi) of a block, flattened row-major: a contiguous range when
 * the dims before its first split dim have size 1 and those after it are
 * whole. */
static int flat_range(const CgParam *p, int lo, int hi, const int64_t *off, const int64_t *loc,
                      int64_t *voff, int64_t *vloc)
{
    int64_t o = 0, n = 1, before = 1;
    int first = -1;
    for (int i = lo; i < hi; i++) {
        if (loc[i] < p->global[i]) {
            if (first >= 0)
                return 0;
            first = i;
        } else if (first >= 0 && loc[i] != p->global[i]) {
            return 0;
        }
        if (first < 0)
            before *= p->global[i];
        o = o * p->global[i] + off[i];
        n *= loc[i];
    }
    if (first >= 0 && before != 1)
        return 0;
    *voff = o;
    *vloc = n;
    return 1;
}

static void block_view(const CgParam *p, const int64_t *off, const int64_t *loc, int vr,
                       int64_t *voff, int64_t *vloc, int *ok)
{
    if (!p->hf_name) {
        memcpy(voff, off, sizeof(int64_t) * (size_t)p->rank);
        memcpy(vloc, loc, sizeof(int64_t) * (size_t)p->rank);
        *ok = 1;
        return;
    }
    int split = vr == 1 ? 0 : p->hf_split;
    *ok = 1;
    if (vr == 2)
        *ok = flat_range(p, 0, split, off, loc, &voff[0], &vloc[0]);
    if (*ok)
        *ok = flat_range(p, split, p->rank, off, loc, &voff[vr - 1], &vloc[vr - 1]);
}

/* Copy block (off, loc) of a full row-major tensor. */
static void extract(const CgParam *p, const float *full, const int64_t *off, const int64_t *loc,
                    float *dst)
{
    int64_t idx[CG_MAX_RANK] = {0}, n = 1;
    for (int i = 0; i < p->rank; i++)
        n *= loc[i];
    for (int64_t k = 0; k < n; k++) {
        int64_t fi = 0;
        for (int d = 0; d < p->rank; d++)
            fi = fi * p->global[d] + off[d] + idx[d];
        dst[k] = full[fi];
        for (int d = p->rank - 1; d >= 0; d--) {
            if (++idx[d] < loc[d])
                break;
            idx[d] = 0;
        }
    }
}

static void import_block(RtSt *st, const CgParam *p, const int64_t *off, const int64_t *loc,
                         float *dst)
{
    char err[1024];
    int64_t vg[CG_MAX_RANK], voff[CG_MAX_RANK], vloc[CG_MAX_RANK];
    int vr = view(p, vg), ok;
    const char *name = p->hf_name ? p->hf_name : p->name;
    int tr = p->hf_name ? p->hf_transposed : 0, part = p->hf_name ? p->hf_part : 0;
    int parts = p->hf_name ? p->hf_nparts : 1;
    block_view(p, off, loc, vr, voff, vloc, &ok);
    if (ok) {
        if (rt_st_read(st, name, tr != 0, part, parts, vr, vg, voff, vloc, dst, err, sizeof err))
            rt_fatal("%s", err);
        return;
    }
    int64_t n = 1, zero[CG_MAX_RANK] = {0};
    for (int i = 0; i < p->rank; i++)
        n *= p->global[i];
    float *full = (float *)malloc((size_t)n * sizeof(float));
    if (!full)
        rt_fatal("out of host memory importing %s", p->name);
    if (rt_st_read(st, name, tr != 0, part, parts, vr, vg, zero, vg, full, err, sizeof err))
        rt_fatal("%s", err);
    extract(p, full, off, loc, dst);
    free(full);
}

/* Parameter and fp32 master from host values of this rank's block. */
static void set_param(CgParam *p, const float *host)
{
    int64_t pad = padded(p), off = shard_offset(p);
    float *h = (float *)calloc((size_t)pad, sizeof(float));
    if (!h)
        rt_fatal("out of host memory for %s", p->name);
    memcpy(h, host, (size_t)p->numel * sizeof(float));
    if (p->zshard && CG_ZERO == 3)
        rt_act_from_f32(p->param, h + off, p->shard);
    else
        rt_act_from_f32(p->param, h, pad);
    rt_to_device(p->master, h + off, (size_t)p->shard * sizeof(float));
    free(h);
}

static void init_params(void)
{
    RtSt *st = NULL;
    char err[1024];
    if (fl.import_hf && !(st = rt_st_open(fl.import_hf, err, sizeof err)))
        rt_fatal("%s", err);
    for (int i = 0; i < R->nparams; i++) {
        CgParam *p = &R->params[i];
        int64_t off[CG_MAX_RANK], loc[CG_MAX_RANK];
        block(p, off, loc);
        float *host = (float *)malloc((size_t)p->numel * sizeof(float));
        if (!host)
            rt_fatal("out of host memory for %s", p->name);
        if (st)
            import_block(st, p, off, loc, host);
        else
            rt_init_param(host, rt_hash(p->name) + fl.seed * 0x9E3779B97F4A7C15ull, p->init, p->std,
                          p->rank, p->global, off, loc);
        set_param(p, host);
        free(host);
    }
    if (st)
        rt_st_close(st);
}

/* ------------------------------------------------------------- one step */

static double learning_rate(int64_t t)
{
    if (t < fl.warmup)
        return fl.lr * (double)(t + 1) / (double)fl.warmup;
    if (fl.decay_steps <= fl.warmup)
        return fl.min_lr;
    double r = (double)(t - fl.warmup) / (double)(fl.decay_steps - fl.warmup);
    if (r > 1)
        r = 1;
    return fl.min_lr + 0.5 * (1 + cos(3.14159265358979323846 * r)) * (fl.lr - fl.min_lr);
}

static int counts(int mask)
{
    for (int a = 0; a < CG_NAXES; a++)
        if ((mask >> a & 1) && g_coord[a] != 0)
            return 0;
    return 1;
}

/* The reduced gradient this rank updates with: full, or its ZeRO shard. */
static rt_act *reduced_grad(const CgParam *p, int64_t *n)
{
    *n = p->zshard ? p->shard : p->numel;
    return p->zshard && CG_ZERO == 1 ? p->grad_shard : p->grad;
}

/* Forward and backward of every micro-batch: gradients accumulate, the
 * loss sums in g_loss[0]. */
static void run_schedule(void)
{
    for (int i = 0; i < R->nparams; i++) {
        CgParam *p = &R->params[i];
        rt_zero(p->grad, (size_t)(p->zshard && CG_ZERO >= 2 ? p->shard : padded(p)) * sizeof(rt_act));
    }
    rt_zero(g_loss, 2 * sizeof(float));
    for (int k = 0; k < R->nsched; k++) {
        const CgSchedOp *op = &R->sched[k];
        int slot = op->mb % R->nslots[op->chunk];
        (op->bwd ? R->backward : R->forward)[op->chunk](op->mb, slot);
    }
    R->wait_sends();
}

/* Gradient reduction: tied copies, then the mesh axes it is partial on. */
static void reduce_grads(void)
{
    for (int i = 0; i < R->nparams; i++) {
        CgParam *p = &R->params[i];
        int64_t n = p->zshard && CG_ZERO >= 2 ? p->shard : padded(p);
        if (p->tied >= 0)
            rt_allreduce(tied[p->tied], p->grad, n, RT_ACT);
        if (!p->pmask || (p->zshard && CG_ZERO >= 2))
            continue;
        if (p->zshard)
            rt_reduce_scatter(g_comm[p->pmask], p->grad_shard, p->grad, p->shard, RT_ACT);
        else
            rt_allreduce(g_comm[p->pmask], p->grad, p->numel, RT_ACT);
    }
}

/* Sum of squares of the reduced gradients (of parameter `only` of this rank,
 * none if -2, all if -1), each element counted once over the world. */
static double grad_sumsq(int only)
{
    float host;
    rt_zero(g_loss + 1, sizeof(float));
    for (int i = 0; i < R->nparams; i++) {
        CgParam *p = &R->params[i];
        int64_t n;
        rt_act *g = reduced_grad(p, &n);
        if (p->primary && counts(p->norm_mask) && (only == -1 || only == i))
            rt_sumsq(g_loss + 1, g, n);
    }
    rt_allreduce(world, g_loss + 1, 1, RT_F32);
    rt_to_host(&host, g_loss + 1, sizeof host);
    return host;
}

/* The step's loss: summed over micro-batches by cross-entropy, over the world here. */
static double world_loss(void)
{
    float host;
    if (!(pp_rank == CG_LOSS_PP && counts(CG_LOSS_MASK)))
        rt_zero(g_loss, sizeof(float));
    rt_allreduce(world, g_loss, 1, RT_F32);
    rt_to_host(&host, g_loss, sizeof host);
    return host;
}

static void step_once(double *loss, double *norm, double *lr)
{
    run_schedule();
    reduce_grads();
    *norm = sqrt(grad_sumsq(-1));
    double scale = fl.clip > 0 && *norm > fl.clip ? fl.clip / (*norm + 1e-6) : 1.0;
    *lr = learning_rate(step);
    for (int i = 0; i < R->nparams; i++) {
        CgParam *p = &R->params[i];
        int64_t n;
        rt_act *g = reduced_grad(p, &n);
        float wd = p->decay ? (float)fl.weight_decay : 0.0f;
        bool gather = p->zshard && CG_ZERO < 3;
        rt_adamw(p->master, gather ? g_step_ws : p->param, g, p->m, p->v, n, (float)*lr,
                 (float)fl.beta1, (float)fl.beta2, (float)fl.eps, wd, (float)scale, (int)step + 1);
        if (gather)
            rt_allgather(g_comm[p->pmask], p->param, g_step_ws, p->shard, RT_ACT);
    }
    *loss = world_loss();
}

/* --grad-check: for every parameter tensor W with reduced gradient G, the
 * derivative of the loss along G/|G| by central differences (step h),
 * (L(W + h G/|G|) - L(W - h G/|G|)) / 2h, must equal |G| (autodiff, the
 * kernels and every collective checked against the program's own forward).
 * A wrong scale, a wrong sign or a missing term in G changes that derivative.
 * Tied copies move together. Needs ZeRO-0 (parameters whole on each rank). */
static int grad_check(double tol)
{
    if (CG_ZERO != 0)
        rt_fatal("--grad-check needs a plan without ZeRO");
    run_schedule();
    reduce_grads();
    double l0 = world_loss();
    int bad = 0, nchecked = 0;
    float **g = (float **)calloc((size_t)R->nparams + 1, sizeof *g);
    float **w = (float **)calloc((size_t)R->nparams + 1, sizeof *w);
    float *tmp = NULL;
    int64_t most = 1;
    for (int i = 0; i < R->nparams; i++) {
        CgParam *p = &R->params[i];
        g[i] = (float *)malloc((size_t)p->numel * sizeof(float));
        w[i] = (float *)malloc((size_t)p->numel * sizeof(float));
        rt_act_to_f32(g[i], p->grad, p->numel);
        rt_act_to_f32(w[i], p->param, p->numel);
        if (p->numel > most)
            most = p->numel;
    }
    tmp = (float *)malloc((size_t)most * sizeof(float));
    /* Every parameter of the model in a fixed order; the ranks holding it move
     * it. First |G| of each (collectives: every rank, every parameter), before
     * any perturbed pass overwrites the gradients. */
    int total = 0;
    for (int r = 0; r < CG_PP; r++)
        total += cg_ranks[r].nparams;
    double *norms = (double *)calloc((size_t)total + 1, sizeof(double));
    int *local = (int *)calloc((size_t)total + 1, sizeof(int));
    for (int r = 0, q = 0; r < CG_PP; r++)
        for (int k = 0; k < cg_ranks[r].nparams; k++, q++) {
            local[q] = -1;
            for (int i = 0; i < R->nparams; i++)
                if (!strcmp(R->params[i].name, cg_ranks[r].params[k].name))
                    local[q] = i;
            if (cg_ranks[r].params[k].primary)
                norms[q] = sqrt(grad_sumsq(local[q] >= 0 ? local[q] : -2));
        }
    for (int r = 0, qi = -1; r < CG_PP; r++)
        for (int k = 0; k < cg_ranks[r].nparams; k++) {
            const CgParam *q = &cg_ranks[r].params[k];
            qi++;
            if (!q->primary)
                continue;
            int mine = local[qi];
            double nrm = norms[qi];
            /* A step that moves the fp32 loss by ~4e-3 (thousands of its ulps),
             * at most 1 in weight units (its elements move by far less). */
            double h = 2e-3 / nrm;
            h = h < 1e-3 ? 1e-3 : h > 1.0 ? 1.0 : h;
            double lpm[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                if (mine >= 0) {
                    CgParam *p = &R->params[mine];
                    double d = (sgn ? -h : h) / nrm;
                    for (int64_t e = 0; e < p->numel; e++)
                        tmp[e] = (float)(w[mine][e] + d * g[mine][e]);
                    rt_act_from_f32(p->param, tmp, p->numel);
                }
                run_schedule();
                lpm[sgn] = world_loss();
            }
            if (mine >= 0)
                rt_act_from_f32(R->params[mine].param, w[mine], R->params[mine].numel);
            double fd = (lpm[0] - lpm[1]) / (2 * h), rel = fabs(fd - nrm) / nrm;
            /* A gradient that is zero but for rounding (GPT's key bias: softmax
             * ignores a shift every key shares) has no direction to test. */
            if (nrm < 1e-7 && fabs(fd) < 1e-4)
                rel = 0;
            nchecked++;
            if (!(rel <= tol))
                bad++;
            if (ROOT)
                printf("grad-check %-40s |G| %.6e  finite differences %.6e  relative %.1e%s\n",
                       q->name, nrm, fd, rel, rel <= tol ? "" : "  MISMATCH");
        }
    if (ROOT)
        printf("grad-check: loss %.7f, %d tensors, %d outside %.0e\n", l0, nchecked, bad, tol);
    for (int i = 0; i < R->nparams; i++) {
        free(g[i]);
        free(w[i]);
    }
    free(g);
    free(w);
    free(tmp);
    free(norms);
    free(local);
    return bad;
}

/* ---------------------------------------------------------- checkpoints */

static const char *ckpt_path(const char *dir, int rank)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/rank%05d.ckpt", dir, rank);
    return buf;
}

/* The blobs of this rank's checkpoint: fp32 masters and AdamW moments of its
 * shards. Names live in *names (heap) until the caller frees it. */
static RtBlob *ckpt_blobs(int *n, char **names)
{
    static const char *const kind[3] = {"master", "adam_m", "adam_v"};
    size_t len = 0;
    for (int i = 0; i < R->nparams; i++)
        len += 3 * (strlen(R->params[i].name) + 8);
    RtBlob *b = (RtBlob *)malloc(sizeof(RtBlob) * (size_t)(3 * R->nparams + 1));
    char *s = *names = (char *)malloc(len + 1);
    if (!b || !s)
        rt_fatal("out of host memory for the checkpoint index");
    *n = 0;
    for (int i = 0; i < R->nparams; i++) {
        CgParam *p = &R->params[i];
        float *bufs[3] = {p->master, p->m, p->v};
        for (int k = 0; k < 3; k++) {
            int w = sprintf(s, "%s:%s", kind[k], p->name);
            b[*n].name = s;
            b[*n].data = bufs[k];
            b[*n].bytes = p->shard * (int64_t)sizeof(float);
            s += w + 1;
            (*n)++;
        }
    }
    return b;
}

static void save_checkpoint(const char *dir)
{
    char err[1024];
    if (ROOT) {
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            rt_fatal("cannot create checkpoint directory %s: %s", dir, strerror(errno));
        /* The plan this checkpoint belongs to, written atomically. */
        char path[4096], tmp[4200];
        snprintf(path, sizeof path, "%s/plan.txt", dir);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "ptdc checkpoint\nplan %s\nhash %s\nranks %d\n", CG_PLAN, CG_PLAN_HASH,
                          CG_WORLD) < 0 || fflush(f) || fsync(fileno(f)) || fclose(f) ||
            rename(tmp, path))
            rt_fatal("cannot write %s: %s", path, strerror(errno));
    }
    rt_barrier(world);
    int n;
    char *names;
    RtBlob *blobs = ckpt_blobs(&n, &names);
    if (rt_ckpt_save(ckpt_path(dir, world_rank), blobs, n, step, step * CG_GLOBAL_BATCH, err,
                     sizeof err))
        rt_fatal("cannot save checkpoint: %s", err);
    free(blobs);
    free(names);
    rt_barrier(world);
    if (ROOT)
        printf("saved checkpoint of step %lld to %s\n", (long long)step, dir);
}

static void check_plan_file(const char *dir)
{
    char path[4096], line[1024], plan[1024] = "", hash[1024] = "";
    snprintf(path, sizeof path, "%s/plan.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        rt_fatal("cannot load checkpoint %s: %s: %s", dir, path, strerror(errno));
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "plan ", 5))
            snprintf(plan, sizeof plan, "%s", line + 5);
        if (!strncmp(line, "hash ", 5))
            snprintf(hash, sizeof hash, "%s", line + 5);
    }
    fclose(f);
    if (strcmp(hash, CG_PLAN_HASH) != 0)
        rt_fatal("cannot load checkpoint %s: it was saved by a program for another plan (%s, "
                 "plan hash %s); this program runs %s (plan hash %s)",
                 dir, plan[0] ? plan : "unknown", hash[0] ? hash : "none", CG_PLAN, CG_PLAN_HASH);
}

/* Parameters from the loaded fp32 masters. */
static void params_from_master(void)
{
    for (int i = 0; i < R->nparams; i++) {
        CgParam *p = &R->params[i];
        float *h = (float *)malloc((size_t)p->shard * sizeof(float));
        rt_to_host(h, p->master, (size_t)p->shard * sizeof(float));
        if (p->zshard && CG_ZERO < 3) {
            rt_act_from_f32(g_step_ws, h, p->shard);
            rt_allgather(g_comm[p->pmask], p->param, g_step_ws, p->shard, RT_ACT);
        } else {
            rt_act_from_f32(p->param, h, p->shard);
        }
        free(h);
    }
}

static void load_checkpoint(const char *dir)
{
    char err[1024];
    check_plan_file(dir);
    int n;
    char *names;
    RtBlob *blobs = ckpt_blobs(&n, &names);
    int64_t st, pos;
    if (rt_ckpt_load(ckpt_path(dir, world_rank), blobs, n, &st, &pos, err, sizeof err))
        rt_fatal("cannot load checkpoint: %s", err);
    free(blobs);
    free(names);
    if (pos != st * CG_GLOBAL_BATCH)
        rt_fatal("cannot load checkpoint %s: data position %lld does not follow step %lld", dir,
                 (long long)pos, (long long)st);
    /* Every rank's file must be of the same step (a save interrupted midway is not). */
    float mm[2] = {(float)st, (float)-st};
    rt_to_device(g_loss, mm, sizeof mm);
    rt_allreduce_max(world, g_loss, 2);
    rt_to_host(mm, g_loss, sizeof mm);
    if ((int64_t)mm[0] != st || (int64_t)-mm[1] != st)
        rt_fatal("cannot load checkpoint %s: its rank files are of different steps (%lld to %lld)",
                 dir, (long long)-mm[1], (long long)mm[0]);
    step = st;
    params_from_master();
    if (ROOT)
        printf("loaded checkpoint of step %lld from %s\n", (long long)step, dir);
}

/* ----------------------------------------------------- safetensors export */

static int64_t global_numel(const CgParam *p)
{
    int64_t n = 1;
    for (int i = 0; i < p->rank; i++)
        n *= p->global[i];
    return n;
}

/* The whole of p on every rank of its pipeline rank, in buf (rt_act). */
static void gather_full(const CgParam *p, rt_act *buf, rt_act *tmp, rt_act *scratch)
{
    int64_t off[CG_MAX_RANK], loc[CG_MAX_RANK];
    block(p, off, loc);
    if (p->zshard && CG_ZERO == 3)
        rt_allgather(g_comm[p->pmask], buf, p->param, p->shard, RT_ACT);
    else
        rt_copy(buf, p->param, (size_t)p->numel * sizeof(rt_act));
    for (int a = 0; a < CG_NAXES; a++)
        for (int d = 0; d < p->rank; d++) {
            if (p->split_axis[d] != a)
                continue;
            int64_t outer = 1, inner = 1;
            for (int i = 0; i < d; i++)
                outer *= loc[i];
            for (int i = d + 1; i < p->rank; i++)
                inner *= loc[i];
            rt_allgather_dim(g_comm[1 << a], tmp, buf, outer, loc[d], inner, scratch);
            loc[d] *= mesh_size(a);
            rt_copy(buf, tmp, (size_t)(outer * loc[d] * inner) * sizeof(rt_act));
        }
}

static void export_hf(const char *path)
{
    char err[1024];
    int64_t most = 1;
    int ntensors = 0;
    RtStTensor *decl = NULL;
    for (int r = 0; r < CG_PP; r++)
        for (int i = 0; i < cg_ranks[r].nparams; i++) {
            const CgParam *p = &cg_ranks[r].params[i];
            if (!p->primary)
                continue;
            if (global_numel(p) > most)
                most = global_numel(p);
            const char *name = p->hf_name ? p->hf_name : p->name;
            int dup = 0;
            for (int k = 0; k < ntensors; k++)
                dup |= !strcmp(decl[k].name, name);
            if (dup)
                continue;
            decl = (RtStTensor *)realloc(decl, sizeof *decl * (size_t)(ntensors + 1));
            RtStTensor *t = &decl[ntensors++];
            memset(t, 0, sizeof *t);
            t->name = name;
            int64_t vg[CG_MAX_RANK];
            t->ndim = view(p, vg);
            for (int d = 0; d < t->ndim; d++)
                t->shape[d] = p->hf_name && p->hf_transposed && t->ndim == 2 ? vg[1 - d] : vg[d];
            if (p->hf_name)
                t->shape[t->ndim - 1] *= p->hf_nparts;
        }
    RtStWriter *w = NULL;
    size_t plen = strlen(path);
    bool one_file = plen >= 12 && !strcmp(path + plen - 12, ".safetensors");
    if (ROOT && !(w = one_file ? rt_st_writer_open(path, decl, ntensors, fl.export_dtype, err, sizeof err)
                               : rt_st_writer_open_dir(path, decl, ntensors, fl.export_dtype,
                                                       fl.shard_bytes, err, sizeof err)))
        rt_fatal("%s", err);
    rt_act *buf = (rt_act *)rt_alloc((size_t)(3 * most) * sizeof(rt_act));
    float *host = (float *)malloc((size_t)most * sizeof(float));
    for (int r = 0; r < CG_PP; r++)
        for (int i = 0; i < cg_ranks[r].nparams; i++) {
            const CgParam *p = &cg_ranks[r].params[i];
            if (!p->primary)
                continue;
            int64_t n = global_numel(p);
            bool mine = r == pp_rank, sender = mine && mesh_index == 0;
            if (mine)
                gather_full(p, buf, buf + most, buf + 2 * most);
            if (sender && !ROOT)
                rt_wait(rt_isend(world, buf, n, RT_ACT, 0, 7));
            if (!ROOT)
                continue;
            if (!mine)
                rt_wait(rt_irecv(world, buf, n, RT_ACT, r * CG_DEVICES, 7));
            rt_act_to_f32(host, buf, n);
            int64_t vg[CG_MAX_RANK], zero[CG_MAX_RANK] = {0};
            int vr = view(p, vg);
            if (rt_st_writer_put(w, p->hf_name ? p->hf_name : p->name,
                                 p->hf_name && p->hf_transposed, p->hf_name ? p->hf_part : 0,
                                 p->hf_name ? p->hf_nparts : 1, vr, vg, zero, vg, host, err,
                                 sizeof err)) {
                rt_st_writer_abort(w);
                rt_fatal("%s", err);
            }
        }
    if (ROOT && rt_st_writer_close(w, err, sizeof err))
        rt_fatal("%s", err);
    rt_free(buf);
    free(host);
    free(decl);
    rt_barrier(world);
    if (ROOT)
        printf("exported weights to %s\n", path);
}

/* ------------------------------------------------------------------ main */

static size_t round_up(size_t n) { return (n + 255) / 256 * 256; }

static const char *mib(double bytes)
{
    static char buf[8][32];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%9.3f MiB", bytes / (1024.0 * 1024.0));
    return buf[k];
}

static void print_memory_plan(void)
{
    static const char *const rows[CG_MEM_N] = {"parameters", "gradients", "optimizer state",
                                              "activations", "workspace"};
    const size_t bytes[CG_NTYPES] = {sizeof(rt_act), sizeof(float), sizeof(int32_t)};
    printf("%s: %d ranks, %s\n", CG_MODEL, CG_WORLD, CG_PLAN);
    printf("memory plan per rank (one allocation, offsets fixed at compile time):\n");
    for (int r = 0; r < CG_PP; r++) {
        const CgRank *k = &cg_ranks[r];
        double total = 0;
        printf("  pipeline rank %d (slots per chunk:", r);
        for (int j = 0; j < k->nchunks; j++)
            printf(" %d", k->nslots[j]);
        printf(")\n");
        for (int m = 0; m < CG_MEM_N; m++) {
            double b = 0;
            for (int t = 0; t < CG_NTYPES; t++)
                b += (double)k->mem[m][t] * (double)bytes[t];
            total += b;
            printf("    %-16s %s\n", rows[m], mib(b));
        }
        printf("    %-16s %s\n", "total", mib(total));
    }
}

int main(int argc, char **argv)
{
    rt_init(&argc, &argv);
    world_rank = rt_world_rank();
    parse_flags(argc, argv);
    time_gemm = getenv("PTDC_TIME_GEMM") && strcmp(getenv("PTDC_TIME_GEMM"), "0") != 0;
    if (rt_world_size() != CG_WORLD) {
        if (ROOT)
            fprintf(stderr, "train: this program runs on %d ranks (its plan's), not %d; start it "
                            "with run.sh\n", CG_WORLD, rt_world_size());
        rt_finalize();
        return 2;
    }
    pp_rank = world_rank / CG_DEVICES;
    mesh_index = world_rank % CG_DEVICES;
    g_coord[0] = mesh_index / CG_MESH1;
    g_coord[1] = mesh_index % CG_MESH1;
    make_comms();
    R = &cg_ranks[pp_rank];
    size_t fo = round_up((size_t)R->total[CG_ACT] * sizeof(rt_act));
    size_t io = fo + round_up((size_t)R->total[CG_F32] * sizeof(float));
    size_t bytes = io + round_up((size_t)R->total[CG_I32] * sizeof(int32_t));
    char *arena = (char *)rt_alloc(bytes);
    rt_zero(arena, bytes);
    R->bind((rt_act *)arena, (float *)(arena + fo), (int32_t *)(arena + io));
    if (ROOT)
        print_memory_plan();

    char err[1024];
    if (!(data = rt_data_try_open(fl.data, CG_VOCAB, CG_SEQ, err, sizeof err)))
        rt_fatal("%s", err);
    tok_host = (int32_t *)malloc(sizeof(int32_t) * CG_SEQ);
    tgt_host = (int32_t *)malloc(sizeof(int32_t) * CG_SEQ);
    stage_host = (int32_t *)malloc(sizeof(int32_t) * CG_SEQ * CG_MB_SEQS);
    init_params();
    if (fl.load)
        load_checkpoint(fl.load);
    if (fl.grad_check) {
        int bad = grad_check(1e-2);
        rt_finalize();
        return bad ? 1 : 0;
    }

    bool saved = false;
    while (step < fl.steps) {
        gemm_s = gemm_flops = 0;
        double t0 = rt_time(), loss, norm, lr;
        step_once(&loss, &norm, &lr);
        double dt = rt_time() - t0;
        step++;
        if (ROOT) {
            printf("step %5lld/%ld | loss %.7f | lr %.3e | norm %.6f | %8.1f ms | %10.0f tok/s",
                   (long long)step, fl.steps, loss, lr, norm, dt * 1e3,
                   (double)CG_GLOBAL_BATCH * CG_SEQ / dt);
            if (time_gemm)
                printf(" | gemm %4.1f%% %6.2f GFLOP/s", 100 * gemm_s / dt, gemm_flops / gemm_s / 1e9);
            printf("\n");
            fflush(stdout);
        }
        saved = fl.save && fl.save_every && step % fl.save_every == 0;
        if (saved)
            save_checkpoint(fl.save);
    }
    if (fl.save && !saved)
        save_checkpoint(fl.save);
    if (fl.export_hf)
        export_hf(fl.export_hf);
    rt_data_close(data);
    free(tok_host);
    free(tgt_host);
    free(stage_host);
    rt_free(arena);
    rt_finalize();
    return 0;
}
