/* fault_ckpt.c: a training loop that only checkpoints, for the fault tests.
 *
 *   fault_ckpt DIR LAST KEEP [load]
 * with "load" resumes from the newest complete step S of DIR (printing
 * "loaded step S" after checking every rank's data), else starts fresh
 * (S = 0, whatever DIR holds); then saves steps S+1 .. LAST, printing
 * "saved step N" after each commit, keeping KEEP steps.
 * A failed save prints its messages and exits 1; a refused load exits 2; data
 * that differ from what the step saved exit 3.
 *
 * Under mpirun every process is one rank and the calls are exactly the
 * trainer's (rt.h): rt_ckpt_write on every rank, rt_host_allgather of the
 * records, rt_ckpt_commit and rt_ckpt_prune on rank 0, rt_host_max of the
 * outcome. Run alone, it plays FAULT_WORLD ranks (default 3) in turn with
 * the same calls minus the collectives (no MPI start-up: hundreds of runs
 * per test stay fast). Rank r's state at step s is a function of (r, s). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

enum { ROWS = 4, COLS = 8, NRNG = 5 };
#define PLAN "fault-plan"

static int world = 1, me = 0; /* me: this process's rank under MPI */
static bool mpi;
static RtComm *comm;

typedef struct {
    float w[ROWS * COLS], m[ROWS * COLS];
    unsigned char rng[NRNG];
} State;

static void fill(State *s, int r, int64_t step)
{
    memset(s, 0, sizeof *s); /* padding too: states are compared whole */
    for (int i = 0; i < ROWS * COLS; i++) {
        s->w[i] = (float)(r * 100000 + (step % 5000) * 10) + (float)i / 64;
        s->m[i] = -s->w[i];
    }
    for (int i = 0; i < NRNG; i++)
        s->rng[i] = (unsigned char)(r + step + i);
}

static int blobs_of(State *s, int r, RtCkptBlob *b)
{
    memset(b, 0, 3 * sizeof *b);
    b[0] = (RtCkptBlob){.name = "master:w", .data = s->w, .bytes = sizeof s->w,
                        .dtype = RT_DT_F32, .ndim = 2, .global = {(int64_t)world * ROWS, COLS},
                        .offset = {(int64_t)r * ROWS, 0}, .local = {ROWS, COLS},
                        .flat_count = ROWS * COLS};
    b[1] = b[0];
    b[1].name = "adam_m:w";
    b[1].data = s->m;
    b[2] = (RtCkptBlob){.name = "rng", .data = s->rng, .bytes = NRNG, .dtype = RT_DT_U8,
                        .ndim = 1, .global = {NRNG}, .local = {NRNG}, .flat_count = NRNG};
    return 3;
}

static RtCkptTensor model(void)
{
    return (RtCkptTensor){.name = "w", .dtype = RT_DT_F32, .ndim = 2,
                          .shape = {(int64_t)world * ROWS, COLS}};
}

static RtCkptMeta meta(const uint8_t *run, int64_t step, int r)
{
    RtCkptMeta m = {.plan_hash = PLAN, .step = step, .data_pos = step * 4, .rank = r,
                    .world = world};
    memcpy(m.run_id, run, RT_RUN_ID_BYTES);
    return m;
}

static int64_t agree_max(int64_t v)
{
    return mpi ? rt_host_max(comm, v) : v;
}

/* The newest complete step whose every rank reads back, or -1. */
static int64_t load(const char *dir, uint8_t *run)
{
    char err[2048], notes[8192] = "";
    int64_t before = INT64_MAX;
    for (;;) {
        int64_t step = -1;
        if (me == 0) {
            RtCkpt *c = rt_ckpt_open_latest(dir, before, notes, sizeof notes, err, sizeof err);
            if (notes[0])
                fputs(notes, stdout);
            if (c)
                step = rt_ckpt_step(c);
            else
                printf("load refused: %s\n", err);
            rt_ckpt_close(c);
        }
        step = agree_max(step);
        if (step < 0) {
            if (mpi)
                rt_finalize();
            exit(2);
        }
        RtCkpt *c = rt_ckpt_open_step(dir, step, err, sizeof err);
        RtCkptTensor t = model();
        int bad = !c || rt_ckpt_check_program(c, world, PLAN, &t, 1, err, sizeof err) != 0;
        for (int r = mpi ? me : 0; r < (mpi ? me + 1 : world) && !bad; r++) {
            State got, want;
            fill(&want, r, step);
            memset(&got, 0, sizeof got);
            RtCkptBlob b[3];
            bad = rt_ckpt_read(c, r, b, blobs_of(&got, r, b), err, sizeof err) != 0;
            if (!bad && memcmp(&got, &want, sizeof got) != 0) {
                printf("rank %d: the data of step %lld differ from what was saved\n", r,
                       (long long)step);
                exit(3);
            }
        }
        if (bad)
            printf("step %lld: %s\n", (long long)step, err);
        if (c)
            memcpy(run, rt_ckpt_run_id(c), RT_RUN_ID_BYTES);
        rt_ckpt_close(c);
        if (!agree_max(bad))
            return step;
        before = step; /* a damaged rank file: the next older step */
    }
}

static void save(const char *dir, const uint8_t *run, int64_t step, int keep)
{
    char err[2048], notes[4096];
    RtCkptRecord *recs = calloc((size_t)world, sizeof *recs);
    for (int r = mpi ? me : 0; r < (mpi ? me + 1 : world); r++) {
        State s;
        fill(&s, r, step);
        RtCkptBlob b[3];
        RtCkptMeta m = meta(run, step, r);
        if (rt_ckpt_write(dir, &m, b, blobs_of(&s, r, b), &recs[r], err, sizeof err) != 0)
            rt_log("%s", err);
    }
    if (mpi) {
        RtCkptRecord mine = recs[me];
        rt_host_allgather(comm, recs, &mine, sizeof mine);
    }
    int64_t failed = 0;
    if (me == 0) {
        RtCkptMeta m = meta(run, step, 0);
        RtCkptTensor t = model();
        if (rt_ckpt_commit(dir, &m, recs, world, &t, 1, err, sizeof err) != 0) {
            rt_log("%s", err);
            failed = 1;
        } else if (rt_ckpt_prune(dir, &m, keep, notes, sizeof notes, err, sizeof err) != 0) {
            rt_log("%s", err); /* the step is saved; only old ones stay */
        }
    }
    free(recs);
    if (agree_max(failed)) {
        printf("save of step %lld failed\n", (long long)step);
        if (mpi)
            rt_finalize();
        exit(1);
    }
    if (me == 0) {
        printf("saved step %lld\n", (long long)step);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("OMPI_COMM_WORLD_SIZE")) {
        rt_init(&argc, &argv);
        mpi = true;
        comm = rt_comm_world();
        world = rt_world_size();
        me = rt_world_rank();
    } else {
        const char *w = getenv("FAULT_WORLD");
        world = w ? atoi(w) : 3;
    }
    if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "load")))
        rt_fatal("usage: fault_ckpt DIR LAST KEEP [load]");
    const char *dir = argv[1];
    int64_t last = atoll(argv[2]);
    uint8_t run[RT_RUN_ID_BYTES];
    char err[256];
    if (rt_run_id_new(run, err, sizeof err) != 0)
        rt_fatal("%s", err);
    if (mpi)
        rt_bcast(comm, run, RT_RUN_ID_BYTES / 4, RT_I32, 0);
    int64_t step = 0;
    if (argc == 5) {
        step = load(dir, run);
        if (me == 0)
            printf("loaded step %lld\n", (long long)step);
    } else if (me == 0) {
        printf("fresh start\n");
    }
    for (int64_t s = step + 1; s <= last; s++)
        save(dir, run, s, atoi(argv[3]));
    if (mpi)
        rt_finalize();
    return 0;
}
