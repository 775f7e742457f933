/* train_ckpt.c: checkpoints. A directory holds plan.txt (the plan and its
 * hash, checked on load so a program never resumes another plan's state)
 * and one file per rank with its fp32 masters and AdamW moments, the step
 * and the data position. */
#include "train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    for (int i = 0; i < tr_prog->nparams; i++)
        len += 3 * (strlen(tr_prog->params[i].name) + 8);
    RtBlob *b = (RtBlob *)malloc(sizeof(RtBlob) * (size_t)(3 * tr_prog->nparams + 1));
    char *s = *names = (char *)malloc(len + 1);
    if (!b || !s)
        rt_fatal("out of host memory for the checkpoint index");
    *n = 0;
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
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

void tr_save_checkpoint(const char *dir)
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
    rt_barrier(tr_world);
    int n;
    char *names;
    RtBlob *blobs = ckpt_blobs(&n, &names);
    if (rt_ckpt_save(ckpt_path(dir, tr_world_rank), blobs, n, tr_step, tr_step * CG_GLOBAL_BATCH,
                     err, sizeof err))
        rt_fatal("cannot save checkpoint: %s", err);
    free(blobs);
    free(names);
    rt_barrier(tr_world);
    if (ROOT)
        printf("saved checkpoint of step %lld to %s\n", (long long)tr_step, dir);
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
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
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

void tr_load_checkpoint(const char *dir)
{
    char err[1024];
    check_plan_file(dir);
    int n;
    char *names;
    RtBlob *blobs = ckpt_blobs(&n, &names);
    int64_t st, pos;
    if (rt_ckpt_load(ckpt_path(dir, tr_world_rank), blobs, n, &st, &pos, err, sizeof err))
        rt_fatal("cannot load checkpoint: %s", err);
    free(blobs);
    free(names);
    if (pos != st * CG_GLOBAL_BATCH)
        rt_fatal("cannot load checkpoint %s: data position %lld does not follow step %lld", dir,
                 (long long)pos, (long long)st);
    /* Every rank's file must be of the same step (a save interrupted midway is not). */
    float mm[2] = {(float)st, (float)-st};
    rt_to_device(g_loss, mm, sizeof mm);
    rt_allreduce_max(tr_world, g_loss, 2);
    rt_to_host(mm, g_loss, sizeof mm);
    if ((int64_t)mm[0] != st || (int64_t)-mm[1] != st)
        rt_fatal("cannot load checkpoint %s: its rank files are of different steps (%lld to %lld)",
                 dir, (long long)-mm[1], (long long)mm[0]);
    tr_step = st;
    params_from_master();
    if (ROOT)
        printf("loaded checkpoint of step %lld from %s\n", (long long)tr_step, dir);
}
