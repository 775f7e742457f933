/* train_ckpt.c: checkpoints (runtime version 2, docs/runtime.md): each save
 * a step directory DIR/step-N that becomes valid only when rank 0 commits
 * its manifest after every rank has written and synced its file; a load
 * takes the newest complete step, under this plan or any other plan of the
 * same model (resharding).
 *
 * What a rank writes: for each parameter it holds the primary copy of, its
 * fp32 master and AdamW moments as blobs "master:NAME", "adam_m:NAME",
 * "adam_v:NAME", each described as the block of the global tensor this rank
 * holds (its coordinates on the mesh axes the parameter is split over) and
 * the range of that block's elements: all of them, or the ZeRO shard. Ranks
 * whose state is the same (replicas along the other mesh axes) each write one
 * part of it, so the state is on disk once and every replica's share of the
 * writing is equal. The model (every primary parameter of every pipeline
 * rank, with its global shape) goes into the manifest.
 *
 * A load reads each rank's blobs from whichever rank files hold their
 * elements (rt_ckpt_read_any): the same code loads a checkpoint of this
 * plan or of another (other dp, tp, pp, sp, ZeRO stage or world size); the
 * parameters are then made from the masters, and step and data position
 * continue from the checkpoint's. */
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The run and its lineage (rt.h): made at a fresh run's first step, taken
 * from the checkpoint on resume, a new lineage on a rollback. */
static uint8_t run_id[RT_RUN_ID_BYTES], lineage[RT_RUN_ID_BYTES], parent_lineage[RT_RUN_ID_BYTES];
static int64_t parent_step = -1;

/* The state p's blobs describe on this rank: its block of the global tensor
 * and, within the block's elements, [*start, *start + *count) (the ZeRO
 * shard, or all), which `data` (p->master, m, v) holds from its element 0. */
static void state_range(const CgParam *p, int64_t *off, int64_t *loc, int64_t *start,
                        int64_t *count)
{
    tr_block(p, off, loc);
    *start = 0;
    *count = p->numel;
    if (p->zshard) {
        *start = (int64_t)rt_comm_rank(g_comm[p->pmask]) * p->shard;
        if (*start > p->numel)
            *start = p->numel;
        *count = p->numel - *start < p->shard ? p->numel - *start : p->shard;
    }
}

/* Ranks holding the same state as this one (it is split over neither axis
 * nor sharded over it) and this rank's index among them. */
static int replicas(const CgParam *p, int *index)
{
    int n = 1;
    *index = 0;
    for (int a = 0; a < CG_NAXES; a++) {
        bool split = false;
        for (int i = 0; i < p->rank; i++)
            split |= p->split_axes[i] >> a & 1;
        if (split || (p->zshard && (p->pmask >> a & 1)) || tr_mesh_size(a) == 1)
            continue;
        *index = *index * tr_mesh_size(a) + g_coord[a];
        n *= tr_mesh_size(a);
    }
    return n;
}

/* save: this rank's part of each state it writes; load: all of its state. */
static TrBlobs make_blobs(bool save)
{
    static const char *const kind[3] = {"master", "adam_m", "adam_v"};
    TrBlobs B;
    size_t len = 0;
    for (int i = 0; i < tr_prog->nparams; i++)
        len += 3 * (strlen(tr_prog->params[i].name) + 8);
    B.b = (RtCkptBlob *)calloc((size_t)(3 * tr_prog->nparams + 1), sizeof(RtCkptBlob));
    B.names = (char *)malloc(len + 1);
    if (!B.b || !B.names)
        rt_fatal("out of host memory for the checkpoint index");
    B.n = 0;
    char *s = B.names;
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
        if (save && !p->primary)
            continue; /* a tied copy: the primary one is saved */
        int64_t off[CG_MAX_RANK], loc[CG_MAX_RANK], start, count, skip = 0;
        state_range(p, off, loc, &start, &count);
        if (save) {
            int j, n = replicas(p, &j);
            int64_t chunk = (count + n - 1) / n;
            skip = (int64_t)j * chunk < count ? (int64_t)j * chunk : count;
            count = count - skip < chunk ? count - skip : chunk;
        }
        float *bufs[3] = {p->master, p->m, p->v};
        for (int k = 0; k < 3; k++) {
            RtCkptBlob *b = &B.b[B.n++];
            int w = sprintf(s, "%s:%s", kind[k], p->name);
            b->name = s;
            s += w + 1;
            b->data = bufs[k] + skip;
            b->bytes = count * (int64_t)sizeof(float);
            b->dtype = RT_DT_F32;
            b->ndim = p->rank;
            for (int d = 0; d < p->rank; d++) {
                b->global[d] = p->global[d];
                b->offset[d] = off[d];
                b->local[d] = loc[d];
            }
            b->flat_start = start + skip;
            b->flat_count = count;
        }
    }
    return B;
}

void tr_ckpt_blobs_free(TrBlobs *B)
{
    free(B->b);
    free(B->names);
}

TrBlobs tr_ckpt_blobs(void)
{
    return make_blobs(true);
}

/* The model as the manifest records it: every primary parameter of every
 * pipeline rank, by name, F32 (the masters), global shape. */
static RtCkptTensor *model_tensors(int *n)
{
    int cap = 0;
    for (int r = 0; r < CG_PP; r++)
        cap += cg_ranks[r].nparams;
    RtCkptTensor *t = (RtCkptTensor *)calloc((size_t)(cap + 1), sizeof(RtCkptTensor));
    if (!t)
        rt_fatal("out of host memory for the checkpoint's model");
    *n = 0;
    for (int r = 0; r < CG_PP; r++)
        for (int i = 0; i < cg_ranks[r].nparams; i++) {
            const CgParam *p = &cg_ranks[r].params[i];
            if (!p->primary)
                continue;
            RtCkptTensor *x = &t[(*n)++];
            x->name = p->name;
            x->dtype = RT_DT_F32;
            x->ndim = p->rank;
            for (int d = 0; d < p->rank; d++)
                x->shape[d] = p->global[d];
        }
    return t;
}

/* --save NAME where NAME's last component is step-DIGITS, or a step
 * directory: its parent is meant. Returns the parent's length, or -1. */
static int step_dir_parent(const char *save)
{
    size_t n = strlen(save);
    while (n > 1 && save[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && save[b - 1] != '/')
        b--;
    bool named = n - b > 5 && !strncmp(save + b, "step-", 5);
    for (size_t i = b + 5; named && i < n; i++)
        named = save[i] >= '0' && save[i] <= '9';
    if (!named && !rt_ckpt_is_step_dir(save))
        return -1;
    return b > 1 ? (int)b - 1 : (int)b;
}

void tr_check_outputs(void)
{
    char err[2048];
    int64_t bad = 0;
    if (ROOT && tr_fl.save) {
        int k = step_dir_parent(tr_fl.save);
        if (k >= 0) {
            const char *par = k ? tr_fl.save : ".";
            int pk = k ? k : 1;
            rt_log("train: --save %s is a step directory of a checkpoint: steps are saved as "
                   "DIR/step-N inside the --save directory, and one inside a step would be "
                   "resumed from the wrong step; pass --save %.*s (to resume from this step: "
                   "--load %s --save %.*s)", tr_fl.save, pk, par, tr_fl.save, pk, par);
            bad = 1;
        }
    }
    if (ROOT && tr_fl.save && !bad) {
        int nmodel;
        RtCkptTensor *model = model_tensors(&nmodel);
        int64_t need = 0;
        for (int i = 0; i < nmodel; i++) {
            int64_t e = 1;
            for (int d = 0; d < model[i].ndim; d++)
                e *= model[i].shape[d];
            need += 3 * e * (int64_t)sizeof(float); /* master and two AdamW moments */
        }
        free(model);
        /* Held until the process ends: no other job saves here meanwhile. */
        if (rt_ckpt_lock(tr_fl.save, need, err, sizeof err) < 0) {
            rt_log("train: --save %s", err);
            bad = 1;
        }
    }
    if (ROOT && tr_fl.export_hf &&
        rt_output_check(tr_fl.export_hf, !tr_hf_is_file(tr_fl.export_hf), err, sizeof err)) {
        rt_log("train: --export-hf %s", err);
        bad = 1;
    }
    if (rt_host_max(tr_world, bad)) {
        rt_finalize();
        exit(2);
    }
}

/* Print each line of notes as a warning of this rank (but pruning's
 * routine "removed" lines). */
static void log_notes(const char *notes)
{
    for (const char *p = notes; *p;) {
        const char *e = strchr(p, '\n');
        int n = e ? (int)(e - p) : (int)strlen(p);
        char line[4096];
        snprintf(line, sizeof line, "%.*s", n, p);
        if (n && !strstr(line, ": removed ("))
            rt_log("warning: %s", line);
        p += n + (e != NULL);
    }
}

/* Collective: a fresh id, rank 0's, into id on every rank. */
static void new_id(uint8_t *id)
{
    char err[512];
    uint8_t *all = (uint8_t *)malloc((size_t)CG_WORLD * RT_RUN_ID_BYTES);
    if (!all)
        rt_fatal("out of host memory");
    if (ROOT && rt_run_id_new(id, err, sizeof err) != 0)
        rt_fatal("%s", err);
    rt_host_allgather(tr_world, all, id, RT_RUN_ID_BYTES);
    memcpy(id, all, RT_RUN_ID_BYTES);
    free(all);
}

void tr_ckpt_new_run(void)
{
    new_id(run_id);
    new_id(lineage);
    memset(parent_lineage, 0, sizeof parent_lineage);
    parent_step = -1;
}

void tr_ckpt_meta(RtCkptMeta *m)
{
    memset(m, 0, sizeof *m);
    memcpy(m->run_id, run_id, RT_RUN_ID_BYTES);
    memcpy(m->lineage, lineage, RT_RUN_ID_BYTES);
    memcpy(m->parent_lineage, parent_lineage, RT_RUN_ID_BYTES);
    m->parent_step = parent_step;
    m->plan_hash = CG_PLAN_HASH;
    m->optimizer = tr_fl.optimizer;
    m->step = tr_step;
    m->data_pos = tr_data_pos;
    m->rank = tr_world_rank;
    m->world = CG_WORLD;
}

int tr_ckpt_commit(const char *dir, const RtCkptMeta *m, const RtCkptRecord *rec)
{
    char err[2048];
    RtCkptRecord *recs = (RtCkptRecord *)malloc(sizeof *rec * CG_WORLD);
    if (!recs)
        rt_fatal("out of host memory");
    rt_host_allgather(tr_world, recs, rec, sizeof *rec);
    int64_t failed = 0;
    if (ROOT) {
        int nmodel;
        RtCkptTensor *model = model_tensors(&nmodel);
        char notes[4096];
        if (rt_ckpt_commit(dir, m, recs, CG_WORLD, model, nmodel, err, sizeof err) != 0) {
            rt_log("error: %s", err);
            failed = 1;
        } else if (rt_ckpt_prune(dir, m, tr_fl.keep, notes, sizeof notes, err, sizeof err) != 0) {
            log_notes(notes);
            rt_log("warning: %s (the new step is saved; older ones stay)", err);
        } else {
            log_notes(notes);
        }
        free(model);
    }
    free(recs);
    /* The outcome, and a barrier: no rank goes on before the commit. */
    failed = rt_host_max(tr_world, failed);
    return failed ? -1 : 0;
}

int tr_save_checkpoint(const char *dir)
{
    char err[2048];
    RtCkptMeta m;
    tr_ckpt_meta(&m);
    TrBlobs B = make_blobs(true);
    RtCkptRecord rec;
    /* Every rank writes, even after an error (rec says so), so that the
     * gather in tr_ckpt_commit never waits for a rank that gave up. */
    if (rt_ckpt_write(dir, &m, B.b, B.n, &rec, err, sizeof err) != 0)
        rt_log("error: %s", err);
    tr_ckpt_blobs_free(&B);
    return tr_ckpt_commit(dir, &m, &rec);
}

/* Parameters from the loaded fp32 masters. */
static void params_from_master(void)
{
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
        float *h = (float *)malloc((size_t)p->shard * sizeof(float));
        if (!h)
            rt_fatal("out of host memory for %s", p->name);
        rt_to_host(h, p->master, (size_t)p->shard * sizeof(float));
        if (p->zshard && CG_ZERO < 3) { /* this rank's block, then the others' in place */
            rt_act *mine = p->param + (int64_t)rt_comm_rank(g_comm[p->pmask]) * p->shard;
            rt_act_from_f32(mine, h, p->shard);
            rt_allgather(g_comm[p->pmask], p->param, mine, p->shard, RT_ACT);
        } else {
            rt_act_from_f32(p->param, h, p->shard);
        }
        free(h);
    }
}

/* Outcomes of trying one step, agreed over the world (the largest wins). */
enum { LOAD_OK, LOAD_DAMAGED, LOAD_REFUSED };

/* Read step `step` of dir into this rank's state: LOAD_OK, LOAD_DAMAGED (a
 * rank file is damaged: an older step may do), LOAD_REFUSED (another model). */
static int try_step(const char *dir, int64_t step, RtComm *world, RtCkptIo *io,
                    bool *resharded, int *saved_world, char *where, size_t wlen)
{
    char err[2048];
    int outcome = LOAD_OK;
    /* The newest step not after `step`: that step, found as rank 0 found it
     * (DIR may be the step directory itself). */
    RtCkpt *c = rt_ckpt_open_latest(dir, step < INT64_MAX ? step + 1 : step, NULL, 0, err,
                                    sizeof err);
    if (c && rt_ckpt_step(c) != step) {
        snprintf(err, sizeof err, "%s: step %lld, which rank 0 found complete, is not complete "
                 "here (is DIR on a file system every rank shares?)", dir, (long long)step);
        rt_ckpt_close(c);
        c = NULL;
    }
    int nmodel;
    RtCkptTensor *model = model_tensors(&nmodel);
    if (c)
        snprintf(where, wlen, "%s", rt_ckpt_dir(c));
    if (!c) {
        outcome = LOAD_DAMAGED;
    } else if (rt_ckpt_check_model(c, model, nmodel, err, sizeof err) != 0) {
        outcome = LOAD_REFUSED;
    } else if (strcmp(rt_ckpt_optimizer(c), tr_fl.optimizer) != 0) {
        /* The moments have the same shape and definition in AdamW and LAMB,
         * so loading them would work; but a resume promises the run that was
         * interrupted, and another optimizer makes other updates from here. */
        snprintf(err, sizeof err, "%s was trained with --optimizer %s, and this run has "
                 "--optimizer %s: resume with --optimizer %s (a resume continues the same "
                 "run; the moments m, v would fit, but the updates would not be the "
                 "interrupted run's)", rt_ckpt_dir(c), rt_ckpt_optimizer(c), tr_fl.optimizer,
                 rt_ckpt_optimizer(c));
        outcome = LOAD_REFUSED;
    }
    /* The reading is shared over the world (collective): no rank starts it
     * unless every rank can. */
    if (rt_host_max(tr_world, outcome) == LOAD_OK) {
        *resharded = rt_ckpt_world(c) != CG_WORLD || strcmp(rt_ckpt_plan_hash(c), CG_PLAN_HASH);
        *saved_world = rt_ckpt_world(c);
        /* Padding after a ZeRO shard's last element stays zero. */
        for (int i = 0; i < tr_prog->nparams; i++) {
            CgParam *p = &tr_prog->params[i];
            size_t bytes = (size_t)p->shard * sizeof(float);
            rt_zero(p->master, bytes);
            rt_zero(p->m, bytes);
            rt_zero(p->v, bytes);
        }
        TrBlobs B = make_blobs(false);
        /* Each rank file read by one of the ranks that need it. */
        if (rt_ckpt_read_shared(c, world, B.b, B.n, io, err, sizeof err) != 0)
            outcome = LOAD_DAMAGED;
        tr_ckpt_blobs_free(&B);
        if (outcome == LOAD_OK) {
            memcpy(run_id, rt_ckpt_run_id(c), RT_RUN_ID_BYTES);
            memcpy(lineage, rt_ckpt_lineage(c), RT_RUN_ID_BYTES);
            memcpy(parent_lineage, rt_ckpt_parent(c, &parent_step), RT_RUN_ID_BYTES);
            tr_data_pos = rt_ckpt_data_pos(c);
        }
    }
    free(model);
    rt_ckpt_close(c);
    /* The model check reads the manifest only: every rank finds the same,
     * so rank 0 alone says it. Damage may be seen by some ranks only. */
    if (outcome == LOAD_DAMAGED || (outcome == LOAD_REFUSED && ROOT))
        rt_log("%s: %s", outcome == LOAD_REFUSED ? "error: cannot load checkpoint" : "warning",
               err);
    return (int)rt_host_max(tr_world, outcome);
}

void tr_load_checkpoint(const char *dir)
{
    char err[2048], notes[8192];
    int64_t before = INT64_MAX;
    double t0 = rt_time();
    /* The reading shared over the world (PTDC_LOAD_BCAST=0: every rank alone). */
    RtComm *group = tr_load_bcast_on() ? tr_world : NULL;
    for (;;) {
        int64_t step = -1;
        if (ROOT) {
            RtCkpt *c = rt_ckpt_open_latest(dir, before, notes, sizeof notes, err, sizeof err);
            log_notes(notes);
            if (c)
                step = rt_ckpt_step(c);
            else
                rt_log("error: cannot load checkpoint: %s", err);
            rt_ckpt_close(c);
        }
        step = rt_host_max(tr_world, step);
        if (step < 0)
            break;
        bool resharded = false;
        int saved_world = CG_WORLD;
        char where[4096] = "";
        RtCkptIo io;
        memset(&io, 0, sizeof io);
        int outcome = try_step(dir, step, group, &io, &resharded, &saved_world, where,
                               sizeof where);
        if (outcome == LOAD_REFUSED)
            break;
        if (outcome == LOAD_DAMAGED) {
            before = step; /* the next older complete step */
            continue;
        }
        tr_step = step;
        params_from_master();
        tr_load_report("checkpoint state", io.state, io.meta, io.received, io.group,
                       rt_time() - t0);
        char r[2 * RT_RUN_ID_BYTES + 1], l[2 * RT_RUN_ID_BYTES + 1];
        rt_run_id_hex(run_id, r);
        rt_run_id_hex(lineage, l);
        if (ROOT) {
            printf("loaded checkpoint of step %lld from %s (run %s, lineage %s)", (long long)step,
                   where, r, l);
            if (resharded)
                printf(" (saved by %d rank%s under another plan: resharded onto this one)",
                       saved_world, saved_world == 1 ? "" : "s");
            printf("\n");
        }
        /* A step named as --load DIR/step-N is a rollback: the run goes on
         * in a new lineage, so that the steps after N it abandons are never
         * resumed by a plain --load DIR nor pruned with the new ones, and
         * the rollback point is kept. */
        if (rt_ckpt_is_step_dir(dir)) {
            memcpy(parent_lineage, lineage, RT_RUN_ID_BYTES);
            parent_step = step;
            new_id(lineage);
            rt_run_id_hex(lineage, r);
            if (ROOT)
                printf("resuming from a named step: a new lineage %s starts after step %lld of "
                       "lineage %s; a later plain --load of its directory resumes the new "
                       "lineage once it has saved a step, never the abandoned steps after "
                       "%lld\n", r, (long long)step, l, (long long)step);
        }
        if (ROOT)
            fflush(stdout);
        return;
    }
    rt_finalize();
    exit(1);
}
