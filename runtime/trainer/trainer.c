/* trainer.c: the fixed half of every training program ptdc generates (the
 * other half, model.c, holds the model and the plan; see trainer.h).
 *
 * One process per rank. World rank = pipeline rank x CG_DEVICES + mesh index,
 * mesh index = (coordinate 0 x CG_MESH1 + coordinate 1) x CG_MESH2 + coordinate 2. A step: zero the
 * gradients, walk this pipeline rank's schedule (stage forwards and
 * backwards per micro-batch), then per parameter sum tied copies across
 * pipeline ranks and reduce over the mesh axes its gradient is partial on
 * (all-reduce, or ZeRO's reduce-scatter), clip by the global norm, AdamW on
 * this rank's shard, all-gather ZeRO-1/2 shards back. Written in the common
 * subset of C11 and C++ so that nvcc compiles it for the CUDA runtime.
 *
 * This file: the flags, GEMM timing and main (set-up and the step loop). The
 * rest, by concern (shared declarations in train.h):
 *   train_state.c     the globals: generated code's (trainer.h) and the trainer's
 *   train_sched.c     communicators, send/receive, the schedule, gradient reduction
 *   train_optim.c     learning rate, gradient norm and clipping, AdamW or LAMB
 *   train_lamb.c      LAMB's whole-tensor norms (one all-reduce per step)
 *   train_gradcheck.c --grad-check
 *   train_ckpt.c      checkpoints and the plan check on load
 *   train_ckpt_async.c a save as the step loop sees it: staged and written by
 *                     a background thread, or --save-sync
 *   train_hf.c        initial weights (seeded or imported) and the HF export
 *   train_hfdir.c     config.json and generation_config.json of an HF directory
 *   train_data.c      tokens and targets of each micro-batch
 *   train_dump.c      --dump-first-step: loss, logits and gradients of one step
 *   train_cp.c        context-parallel attention: this rank's queries' positions
 *   train_diag.c      --diagnose: GEMM and link rates before training
 *   train_health.c    PTDC_HEALTH: compute and wait per rank, stragglers named
 *   train_where.c     where this rank is, for the watchdog's stall report */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    printf("usage: train [options]   (run through run.sh: it launches all %d ranks)\n"
           "Trains %s with the plan %s.\n\n"
           "  --steps N          train until step N (default 10)\n"
           "  --data SPEC        llm.c shard, u16:PATH, u32:PATH or synthetic:SEED (default synthetic:1)\n"
           "  --load DIR         resume from the newest complete checkpoint of DIR that no rollback\n"
           "                     abandoned (weights, optimizer, step, data position), saved under\n"
           "                     any plan of this model; --load DIR/step-N resumes that step and\n"
           "                     starts a new lineage (a rollback: the steps after N are abandoned)\n"
           "  --save DIR         write a checkpoint at the end (and every --save-every steps) as\n"
           "                     DIR/step-N, valid once every rank's file is committed; DIR is\n"
           "                     locked for this job (DIR/.ptdc-save.lock)\n"
           "  --save-every N     checkpoint every N steps\n"
           "                     (a save copies the state to host memory at the step boundary\n"
           "                     and a background thread writes it while training goes on; a\n"
           "                     step is loadable once every rank's file is committed, the\n"
           "                     previous one until then; a save asked for while one is still\n"
           "                     being written waits for it)\n"
           "  --save-sync        write each checkpoint inside the step boundary instead\n"
           "  --keep N           complete checkpoints of this lineage kept in the --save DIR\n"
           "                     (default 2; other runs' and lineages' steps are never removed)\n"
           "  --lr X             peak learning rate (default 1e-3)\n"
           "  --warmup N         linear warm-up steps (default 0)\n"
           "  --min-lr X         floor of the cosine decay (default lr / 10)\n"
           "  --decay-steps N    length of the schedule (default --steps)\n"
           "  --clip X           clip the global gradient norm to X (default 1; 0: off)\n"
           "  --optimizer NAME   adamw (default) or lamb: Adam's moments with LAMB's per-tensor\n"
           "                     trust ratio min(||w||, --lamb-trust-max) / ||r|| (You et al. 2020)\n"
           "  --lamb-trust-max X LAMB clips each tensor's weight norm to X (default 10; 0: off)\n"
           "  --weight-decay X   weight decay of matrices (default 0.1; AdamW and LAMB)\n"
           "  --adam-eps X       Adam's epsilon (default 1e-8; LLaMA-2 used 1e-5; AdamW and LAMB)\n"
           "  --seed N           initialisation seed (default 0)\n"
           "  --import-hf PATH   initial weights from Hugging Face safetensors: a file, a model\n"
           "                     directory or its model.safetensors.index.json (shards)\n"
           "  --export-hf PATH   write the trained weights with Hugging Face names: PATH.safetensors\n"
           "                     as one file, any other PATH as a model directory (shards,\n"
           "                     config.json, the import's generation_config.json)\n"
           "  --export-dtype T   f32 (default), bf16 or f16\n"
           "  --max-shard-size N bytes per shard of a directory export (default 5000000000)\n"
           "  --max-skips N      a step whose loss or gradient norm is not finite updates\n"
           "                     nothing; abort after N such steps in a row (default 5)\n"
           "  --timeout S        abort every rank when a collective waits S seconds (default\n"
           "                     $PTDC_TIMEOUT, else 300 on CPU, 600 on CUDA; 0: never)\n"
           "  --deterministic    bitwise reproducible gradients on GPUs too: attention's dQ\n"
           "                     summed in a fixed order (a slower backward; sets\n"
           "                     PTDC_ATTENTION_DETERMINISTIC=1); CPU runs always are\n"
           "  --diagnose         before training, measure every rank's GEMM rate, each group's\n"
           "                     all-reduce and each pipeline transfer, and name the ranks that\n"
           "                     fall short of the others (PTDC_HEALTH_SLOW) beside the plan's\n"
           "                     peak (plan.json); --steps 0 to diagnose only\n"
           "  --grad-check       check every parameter's gradient against finite differences\n"
           "                     of the loss at the initial weights, then exit\n"
           "  --dump-first-step DIR  run the first step's forward and backward, write DIR/\n"
           "                     outputs.safetensors (loss, logits [batch, seq, vocab] of every\n"
           "                     micro-batch, tokens, targets), DIR/weights.safetensors and\n"
           "                     DIR/grads.safetensors (every parameter and its reduced gradient,\n"
           "                     whole, Hugging Face names, F32), then exit\n"
           "SIGTERM, SIGINT or SIGUSR1 (to run.sh, any rank, or SIGUSR1 to mpirun) ends the run\n"
           "after the current step, saving a checkpoint when --save is given, within the grace\n"
           "time PTDC_STOP_GRACE (default %d s); exit status %d (preempted).\n",
           CG_WORLD, CG_MODEL, CG_PLAN, RT_STOP_GRACE, RT_EXIT_PREEMPTED);
}

static void bad_flag(const char *flag, const char *why, const char *value)
{
    if (ROOT)
        rt_log("train: %s %s, got '%s'", flag, why, value ? value : "nothing");
    rt_finalize();
    exit(2);
}

static void bad_flags(const char *fmt, double a, double b)
{
    if (ROOT)
        rt_log(fmt, a, b);
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

/* A finite number >= 0 (> 0 when positive): inf, nan and overflow refused. */
static double num_flag(const char *flag, const char *s, bool positive)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || errno || end == s || *end || !isfinite(v) || !(positive ? v > 0 : v >= 0))
        bad_flag(flag, positive ? "expects a finite number > 0" : "expects a finite number >= 0",
                 s);
    return v;
}

static void parse_flags(int argc, char **argv)
{
    tr_fl.steps = 10;
    tr_fl.data = "synthetic:1";
    tr_fl.lr = 1e-3;
    tr_fl.min_lr = -1;
    tr_fl.decay_steps = -1;
    tr_fl.clip = 1.0;
    tr_fl.weight_decay = 0.1;
    tr_fl.beta1 = 0.9;
    tr_fl.beta2 = 0.95;
    tr_fl.eps = 1e-8;
    tr_fl.optimizer = "adamw";
    tr_fl.trust_max = 10;
    tr_fl.export_dtype = "F32";
    tr_fl.shard_bytes = 5000000000LL; /* save_pretrained's max_shard_size "5GB" */
    tr_fl.keep = 2;
    tr_fl.max_skips = 5;
    tr_fl.timeout = -1;
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
            tr_fl.steps = int_flag(a, v, 0);
        else if (FLAG("--decay-steps"))
            tr_fl.decay_steps = int_flag(a, v, 1);
        else if (!strcmp(a, "--save-sync"))
            tr_fl.save_sync = 1;
        else if (FLAG("--save-every"))
            tr_fl.save_every = int_flag(a, v, 1);
        else if (FLAG("--keep"))
            tr_fl.keep = int_flag(a, v, 1);
        else if (FLAG("--max-skips"))
            tr_fl.max_skips = int_flag(a, v, 1);
        else if (FLAG("--timeout"))
            tr_fl.timeout = num_flag(a, v, false);
        else if (FLAG("--warmup"))
            tr_fl.warmup = int_flag(a, v, 0);
        else if (FLAG("--seed"))
            tr_fl.seed = (unsigned long long)int_flag(a, v, 0);
        else if (FLAG("--data"))
            tr_fl.data = v ? v : (bad_flag(a, "expects a token source", v), "");
        else if (FLAG("--load"))
            tr_fl.load = v ? v : (bad_flag(a, "expects a directory", v), "");
        else if (FLAG("--save"))
            tr_fl.save = v ? v : (bad_flag(a, "expects a directory", v), "");
        else if (FLAG("--import-hf"))
            tr_fl.import_hf = v ? v : (bad_flag(a, "expects a safetensors file or directory", v), "");
        else if (FLAG("--export-hf"))
            tr_fl.export_hf = v ? v : (bad_flag(a, "expects a .safetensors file or a directory", v), "");
        else if (FLAG("--export-dtype"))
            tr_fl.export_dtype = v && !strcmp(v, "f32") ? "F32" : v && !strcmp(v, "bf16") ? "BF16"
                               : v && !strcmp(v, "f16") ? "F16"
                               : (bad_flag(a, "expects f32, bf16 or f16", v), "");
        else if (FLAG("--max-shard-size"))
            tr_fl.shard_bytes = int_flag(a, v, 1);
        else if (FLAG("--lr"))
            tr_fl.lr = num_flag(a, v, false);
        else if (FLAG("--min-lr"))
            tr_fl.min_lr = num_flag(a, v, false);
        else if (FLAG("--clip"))
            tr_fl.clip = num_flag(a, v, false);
        else if (FLAG("--weight-decay"))
            tr_fl.weight_decay = num_flag(a, v, false);
        else if (FLAG("--adam-eps"))
            tr_fl.eps = num_flag(a, v, true); /* AdamW divides by sqrt(v) + eps; v starts at 0 */
        else if (FLAG("--optimizer"))
            tr_fl.optimizer = v && !strcmp(v, "adamw") ? "adamw" : v && !strcmp(v, "lamb") ? "lamb"
                            : (bad_flag(a, "expects adamw or lamb", v), "");
        else if (FLAG("--lamb-trust-max"))
            tr_fl.trust_max = num_flag(a, v, false);
        else if (FLAG("--dump-first-step"))
            tr_fl.dump = v ? v : (bad_flag(a, "expects a directory", v), "");
        else if (!strcmp(a, "--grad-check"))
            tr_fl.grad_check = 1;
        else if (!strcmp(a, "--diagnose"))
            tr_fl.diagnose = 1;
        else if (!strcmp(a, "--deterministic")) /* read at the first attention backward */
            setenv("PTDC_ATTENTION_DETERMINISTIC", "1", 1);
        else
            bad_flag(a, "is not an option (see --help)", a);
#undef FLAG
    }
    if (tr_fl.min_lr < 0)
        tr_fl.min_lr = tr_fl.lr / 10;
    else if (tr_fl.min_lr > tr_fl.lr)
        bad_flags("train: --min-lr %g is above --lr %g: the schedule decays from --lr down to "
                  "--min-lr", tr_fl.min_lr, tr_fl.lr);
    if (tr_fl.decay_steps < 0)
        tr_fl.decay_steps = tr_fl.steps;
    /* Before training: a directory of weights without a true config.json
     * would not load as the model that was trained. */
    if (tr_fl.export_hf && tr_hf_export_refused(tr_fl.export_hf)) {
        if (ROOT)
            rt_log("train: --export-hf %s: %s has no Hugging Face config (%s), and a model "
                   "directory without one would not load; --export-hf FILE.safetensors writes "
                   "the weights alone", tr_fl.export_hf, CG_MODEL,
                   tr_hf_export_refused(tr_fl.export_hf));
        rt_finalize();
        exit(2);
    }
}

static bool time_gemm;
static double gemm_s;     /* seconds in GEMMs this step */
static double gemm_flops; /* their FLOPs */

/* Under PTDC_TIME_GEMM: the start of a GEMM call (0 otherwise), then the
 * call's time and the FLOPs of its count GEMMs into the step's sums (the
 * FP8 GEMMs' too: train_fp8.c). */
double tr_gemm_start(void) { return time_gemm ? rt_time() : 0; }

void tr_gemm_end(double t0, int count, int64_t M, int64_t N, int64_t K)
{
    if (!time_gemm)
        return;
    gemm_s += rt_time() - t0;
    gemm_flops += 2.0 * count * (double)M * (double)N * (double)K;
}

void (cg_matmul)(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
               bool ta, bool tb, bool accumulate)
{
    double t0 = tr_gemm_start();
    (rt_matmul)(c, a, b, M, N, K, ta, tb, accumulate);
    tr_gemm_end(t0, 1, M, N, K);
}

void (cg_matmul_grad)(rt_grad *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
                      bool ta, bool tb, bool accumulate)
{
    double t0 = tr_gemm_start();
    (rt_matmul_grad)(c, a, b, M, N, K, ta, tb, accumulate);
    tr_gemm_end(t0, 1, M, N, K);
}

void (cg_matmul_batch)(int count, rt_act *const c[], const rt_act *const a[], const rt_act *const b[],
                       int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool accumulate)
{
    double t0 = tr_gemm_start();
    (rt_matmul_batch)(count, c, a, b, M, N, K, ta, tb, accumulate);
    tr_gemm_end(t0, count, M, N, K);
}

void (cg_matmul_grad_batch)(int count, rt_grad *const c[], const rt_act *const a[],
                            const rt_act *const b[], int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                            bool accumulate)
{
    double t0 = tr_gemm_start();
    (rt_matmul_grad_batch)(count, c, a, b, M, N, K, ta, tb, accumulate);
    tr_gemm_end(t0, count, M, N, K);
}

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

/* End every rank with status rc (all call it together). */
static void finish(int rc)
{
    rt_finalize();
    exit(rc);
}

/* A save (this step's, or an asynchronous one's found at a later step) was
 * not committed: end the run. */
static void save_failed(void)
{
    if (ROOT)
        rt_log("error: a checkpoint was not saved (above: why); the newest complete step in %s "
               "is still the one to load", tr_fl.save);
    finish(1);
}

/* End a run that saves nothing more (all ranks together), with status rc,
 * after committing the asynchronous save still being written: it holds a
 * step that passed its checks, and the refusals below promise that the
 * steps saved before stay loadable. */
static void finish_after_save(int rc)
{
    if (tr_save_finish() != 0)
        save_failed();
    finish(rc);
}

/* Save, or end the run with status 1 when the step cannot be saved: never
 * over non-finite state, and a failed save says what stays loadable. */
static void save_or_exit(void)
{
    double t0 = rt_time();
    if (!tr_state_finite()) {
        if (ROOT)
            rt_log("error: not saving step %lld: the weights or optimizer state hold non-finite "
                   "values; the checkpoints already in %s are left as they are",
                   (long long)tr_step, tr_fl.save);
        finish_after_save(1);
    }
    /* Finite values can still be a state every later step fails from
     * (--lr 1e30): such a step never becomes the newest checkpoint. */
    double loss = tr_forward_loss();
    if (!isfinite(loss)) {
        if (ROOT)
            rt_log("error: not saving step %lld: its weights give a non-finite loss (%g) on the "
                   "next batch, so every step resumed from it would be skipped (lower --lr?); "
                   "the checkpoints already in %s are left as they are", (long long)tr_step, loss,
                   tr_fl.save);
        finish_after_save(1);
    }
    if (tr_save(tr_fl.save, rt_time() - t0) != 0)
        save_failed();
}

int main(int argc, char **argv)
{
    rt_init(&argc, &argv);
    tr_world_rank = rt_world_rank();
    parse_flags(argc, argv);
    if (tr_fl.timeout >= 0)
        rt_set_timeout(tr_fl.timeout);
    rt_stop_install();
    if (tr_env_check())
        finish(2);
    time_gemm = getenv("PTDC_TIME_GEMM") && strcmp(getenv("PTDC_TIME_GEMM"), "0") != 0;
    tr_prof_init();
    tr_health_init();
    tr_where_init();
    if (rt_world_size() != CG_WORLD) {
        if (ROOT)
            rt_log("train: this program runs on %d ranks (its plan's), not %d; start it with "
                   "run.sh", CG_WORLD, rt_world_size());
        finish(2);
    }
    tr_pp_rank = tr_world_rank / CG_DEVICES;
    tr_mesh_index = tr_world_rank % CG_DEVICES;
    g_coord[0] = tr_mesh_index / (CG_MESH1 * CG_MESH2);
    g_coord[1] = tr_mesh_index / CG_MESH2 % CG_MESH1;
    g_coord[2] = tr_mesh_index % CG_MESH2;
    tr_make_comms();
    tr_prog = &cg_ranks[tr_pp_rank];
    size_t fo = round_up((size_t)tr_prog->total[CG_ACT] * sizeof(rt_act));
    size_t io = fo + round_up((size_t)tr_prog->total[CG_F32] * sizeof(float));
    size_t bytes = io + round_up((size_t)tr_prog->total[CG_I32] * sizeof(int32_t));
    char *arena = (char *)rt_alloc(bytes); /* zeroed (rt.h) */
    tr_prog->bind((rt_act *)arena, (float *)(arena + fo), (int32_t *)(arena + io));
    tr_alias_masters();
    tr_buckets_init();
    if (ROOT)
        print_memory_plan();

    tr_check_outputs();
    tr_trace_init();
    tr_data_open();
    tr_init_params();
    if (tr_fl.load)
        tr_load_checkpoint(tr_fl.load); /* the run id, step and data position too */
    else if (tr_fl.save)
        tr_ckpt_new_run();
    if (tr_fl.dump) {
        tr_dump_first_step(tr_fl.dump);
        tr_data_close();
        rt_free(arena);
        rt_finalize();
        return 0;
    }
    if (tr_fl.grad_check) {
        int bad = tr_grad_check(1e-2);
        finish(bad ? 1 : 0);
    }

    if (tr_fl.diagnose)
        tr_diagnose(argv[0]);
    bool saved = false;
    int stop = 0;
    int64_t start = tr_step;
    long skips = 0; /* non-finite steps in a row */
    while (tr_step < tr_fl.steps && !stop) {
        gemm_s = gemm_flops = 0;
        tr_trace_step_begin();
        tr_where_step();
        double t0 = rt_time(), loss, norm, lr;
        tr_health_step_begin();
        bool updated = tr_step_once(&loss, &norm, &lr);
        double dt = rt_time() - t0;
        tr_step++;
        tr_where_phase("the step boundary (step log, stop agreement, checkpoints)");
        tr_trace_step_end();
        tr_data_pos += CG_GLOBAL_BATCH; /* a skipped step's batch is skipped too */
        tr_prof_step(dt);
        tr_health_step(dt);
        if (ROOT) {
            printf("step %5lld/%ld | loss %.7f | lr %.3e | norm %.6f | %8.1f ms | %10.0f tok/s",
                   (long long)tr_step, tr_fl.steps, loss, lr, norm, dt * 1e3,
                   (double)CG_GLOBAL_BATCH * CG_SEQ / dt);
            if (time_gemm)
                printf(" | gemm %4.1f%% %6.2f GFLOP/s", 100 * gemm_s / dt, gemm_flops / gemm_s / 1e9);
            printf("%s\n", updated ? "" : " | skipped");
            fflush(stdout);
        }
        skips = updated ? 0 : skips + 1;
        if (skips && ROOT)
            rt_log("warning: step %lld: the loss (%g) or the gradient norm (%g) is not finite: "
                   "update skipped (%ld in a row; --max-skips %ld)", (long long)tr_step, loss,
                   norm, skips, tr_fl.max_skips);
        if (skips >= tr_fl.max_skips) {
            if (ROOT)
                rt_log("error: %ld steps in a row had a non-finite loss or gradient norm; "
                       "stopping without saving or exporting (lower --lr?)", skips);
            finish_after_save(1);
        }
        /* Preemption: every rank learns of a signal to any at the same step. */
        stop = rt_stop_agree(tr_world);
        /* An asynchronous save in flight is committed at the first step
         * boundary where every rank's writer has finished (after the stop's
         * agreement, which has already waited for the slowest rank). */
        if (tr_save_poll(false) != 0)
            save_failed();
        saved = tr_fl.save && ((tr_fl.save_every && tr_step % tr_fl.save_every == 0) ||
                               (stop && tr_step < tr_fl.steps));
        if (saved)
            save_or_exit();
    }
    tr_prof_report();
    tr_health_report();
    tr_trace_finish();
    if (stop && tr_step < tr_fl.steps) {
        /* The stop's save is on disk and committed before the job says so. */
        if (tr_save_finish() != 0)
            save_failed();
        if (ROOT) {
            char saved_to[4200] = " (no --save: nothing saved)";
            if (tr_fl.save)
                snprintf(saved_to, sizeof saved_to, ": saved checkpoint %s/step-%09lld",
                         tr_fl.save, (long long)tr_step);
            printf("stopped by %s after step %lld of %ld%s; exit status %d (preempted)\n",
                   stop == SIGTERM ? "SIGTERM" : stop == SIGINT ? "SIGINT"
                   : stop == SIGUSR1 ? "SIGUSR1" : "a signal", (long long)tr_step, tr_fl.steps,
                   saved_to, RT_EXIT_PREEMPTED);
            fflush(stdout);
        }
        finish(RT_EXIT_PREEMPTED);
    }
    /* (A run that trained no step does not save the step it loaded again.) */
    if (tr_fl.save && !saved && (tr_step > start || !tr_fl.load))
        save_or_exit();
    if (tr_fl.export_hf) {
        if (!tr_state_finite()) {
            if (ROOT)
                rt_log("error: not exporting to %s: the weights hold non-finite values",
                       tr_fl.export_hf);
            finish_after_save(1);
        }
        tr_export_hf(tr_fl.export_hf);
    }
    /* The last save was written while the export ran; the job ends once it
     * is committed. */
    if (tr_save_finish() != 0)
        save_failed();
    tr_data_close();
    tr_buckets_free();
    rt_free(arena);
    rt_finalize();
    return 0;
}
