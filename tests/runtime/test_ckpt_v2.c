/* test_ckpt_v2.c: version-2 checkpoints (step directories and manifests).
 * World sizes of 3 are simulated in one process: each "rank" writes its file
 * with rt_ckpt_write, the records are committed by rt_ckpt_commit, exactly
 * the calls a trainer makes around its gather. Proves:
 *   - a round trip of every rank's blobs (a block of a 3-D tensor, a
 *     ZeRO-style flat shard, bytes, an empty blob, a blob larger than the
 *     16 MiB staging buffer), step and data position;
 *   - the newest complete step is found; incomplete and damaged steps are
 *     skipped with a note saying why; step numbers above 2^24, 2^32 and
 *     near 2^63 are told apart (they are int64 everywhere);
 *   - every refusal, by its message: rank files swapped, copied over
 *     another rank, mixed in from another run, step, world or plan; a
 *     truncated, flipped or missing rank file; a damaged or truncated
 *     manifest; a FIFO in place of a file (refused, not blocked on);
 *     a version-1 directory or file; the model's shapes, dtypes and
 *     tensors (8 heads of 8 against 4 heads of 16); the world size and
 *     the plan hash; every blob mismatch; commits with a failed, foreign or
 *     invisible rank file;
 *   - a re-save of a step removes its stale manifest first;
 *   - keep-N pruning never removes the newest complete step. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common.h"
#include "ref.h"
#include "rt.h"

enum { W = 3, ROWS = 6, C1 = 4, C2 = 5, NB = 7 };
#define PLAN "hash-of-plan-A"

typedef struct {
    float w[ROWS / W * C1 * C2]; /* rows [r*2, r*2+2) of w [6, 4, 5] */
    float m[ROWS * C1 * C2 / W]; /* flat shard r of the whole w */
    float b[C2];                 /* replicated */
    unsigned char rng[NB];
    char empty[1];
} State;

typedef struct {
    int64_t wshape[3];      /* the model's w: [6, 4, 5], or another shape */
    RtDtype wdtype;
    const char *plan;
    uint8_t run[RT_RUN_ID_BYTES];
} Model;

static Model model_a(void)
{
    Model m = {{ROWS, C1, C2}, RT_DT_F32, PLAN, {0}};
    m.run[0] = 0xA1;
    m.run[15] = 0x5A;
    return m;
}

static void fill(State *s, int rank, int64_t step)
{
    float base = (float)(rank * 1000 + step % 997);
    for (size_t i = 0; i < sizeof s->w / sizeof s->w[0]; i++)
        s->w[i] = base + (float)i;
    for (size_t i = 0; i < sizeof s->m / sizeof s->m[0]; i++)
        s->m[i] = -base - (float)i * 0.5f;
    for (int i = 0; i < C2; i++)
        s->b[i] = (float)(step % 101) + (float)i / 8;
    for (int i = 0; i < NB; i++)
        s->rng[i] = (unsigned char)(rank * 17 + i + step);
}

/* The blobs of rank r under model m. */
static int blobs_of(State *s, int r, const Model *m, RtCkptBlob *b)
{
    int64_t rows = m->wshape[0] / W, local = rows * m->wshape[1] * m->wshape[2];
    memset(b, 0, 5 * sizeof *b);
    b[0] = (RtCkptBlob){.name = "master:w", .data = s->w, .bytes = (int64_t)sizeof s->w,
                        .dtype = m->wdtype, .ndim = 3, .flat_start = 0, .flat_count = local};
    memcpy(b[0].global, m->wshape, sizeof m->wshape);
    b[0].offset[0] = r * rows;
    b[0].local[0] = rows;
    b[0].local[1] = m->wshape[1];
    b[0].local[2] = m->wshape[2];
    int64_t whole = m->wshape[0] * m->wshape[1] * m->wshape[2];
    b[1] = (RtCkptBlob){.name = "adam_m:w", .data = s->m, .bytes = (int64_t)sizeof s->m,
                        .dtype = m->wdtype, .ndim = 3, .flat_start = r * (whole / W),
                        .flat_count = whole / W};
    memcpy(b[1].global, m->wshape, sizeof m->wshape);
    memcpy(b[1].local, m->wshape, sizeof m->wshape);
    b[2] = (RtCkptBlob){.name = "master:b", .data = s->b, .bytes = (int64_t)sizeof s->b,
                        .dtype = RT_DT_F32, .ndim = 1, .flat_count = C2};
    b[2].global[0] = b[2].local[0] = C2;
    b[3] = (RtCkptBlob){.name = "rng", .data = s->rng, .bytes = NB, .dtype = RT_DT_U8,
                        .ndim = 1, .flat_count = NB};
    b[3].global[0] = b[3].local[0] = NB;
    b[4] = (RtCkptBlob){.name = "empty", .data = s->empty, .bytes = 0, .dtype = RT_DT_F32,
                        .ndim = 1, .flat_count = 0};
    return 5;
}

static int model_of(const Model *m, RtCkptTensor *t)
{
    memset(t, 0, 2 * sizeof *t);
    t[0] = (RtCkptTensor){.name = "w", .dtype = m->wdtype, .ndim = 3};
    memcpy(t[0].shape, m->wshape, sizeof m->wshape);
    t[1] = (RtCkptTensor){.name = "b", .dtype = RT_DT_F32, .ndim = 1, .shape = {C2}};
    return 2;
}

static RtCkptMeta meta_of(const Model *m, int64_t step, int rank, int world)
{
    RtCkptMeta x = {.plan_hash = m->plan, .step = step, .data_pos = step * 8, .rank = rank,
                    .world = world};
    memcpy(x.run_id, m->run, RT_RUN_ID_BYTES);
    return x;
}

/* A whole save of `world` ranks (ranks >= W reuse rank W-1's blob layout). */
static int save(const char *dir, const Model *m, int64_t step, int world, char *err,
                size_t errlen)
{
    RtCkptRecord rec[8];
    for (int r = 0; r < world; r++) {
        State s;
        fill(&s, r, step);
        RtCkptBlob b[5];
        int n = blobs_of(&s, r < W ? r : W - 1, m, b);
        RtCkptMeta x = meta_of(m, step, r, world);
        if (rt_ckpt_write(dir, &x, b, n, &rec[r], err, errlen) != 0)
            return -1;
    }
    RtCkptTensor t[2];
    RtCkptMeta x = meta_of(m, step, 0, world);
    return rt_ckpt_commit(dir, &x, rec, world, t, model_of(m, t), err, errlen);
}

/* Load every rank of the newest step and compare with what was saved. */
static int64_t load_all(const char *dir, const Model *m, char *notes, size_t nlen, char *err,
                        size_t errlen)
{
    RtCkpt *c = rt_ckpt_open_latest(dir, INT64_MAX, notes, nlen, err, errlen);
    if (!c)
        return -1;
    RtCkptTensor t[2];
    int64_t step = rt_ckpt_step(c);
    int rc = rt_ckpt_check_program(c, W, m->plan, t, model_of(m, t), err, errlen);
    for (int r = 0; r < W && rc == 0; r++) {
        State want, got;
        fill(&want, r, step);
        memset(&got, 0x5c, sizeof got);
        RtCkptBlob b[5];
        int n = blobs_of(&got, r, m, b);
        rc = rt_ckpt_read(c, r, b, n, err, errlen);
        if (rc == 0 && memcmp(&want, &got, offsetof(State, empty)) != 0)
            rc = rtc_err(err, errlen, "rank %d: loaded blobs differ from the saved ones", r);
    }
    if (rc == 0 && rt_ckpt_data_pos(c) != step * 8)
        rc = rtc_err(err, errlen, "data position %lld", (long long)rt_ckpt_data_pos(c));
    rt_ckpt_close(c);
    return rc == 0 ? step : -1;
}

/* ------------------------------------------------------- file helpers */

/* A file as ptdc's version-1 writer (gone since the trainer moved to
 * version 2) began one: magic, version 1, a 64-byte header, then a few
 * bytes of payload and a trailer. The loaders must name it. */
static void write_v1_file(const char *path)
{
    unsigned char b[120] = "PTDCKPT";
    rtc_put_u32(b + 8, 1);
    rtc_put_u32(b + 12, 1);
    memcpy(b + 112, "\0\0\0\0CEND", 8);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, sizeof b, f) == sizeof b && fclose(f) == 0, "write %s", path);
}


static char root[64];

/* An empty path under root (a ring of buffers: a few live at once). */
static const char *fresh(const char *name)
{
    static char ring[4][256];
    static int k;
    char *p = ring[k++ % 4];
    snprintf(p, sizeof ring[0], "%s/%s", root, name);
    ref_rm_rf(p);
    return p;
}

static char *path_of(const char *dir, int64_t step, const char *file)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/step-%09lld/%s", dir, (long long)step, file);
    return p;
}

static void copy_file(const char *from, const char *to)
{
    FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
    char buf[4096];
    size_t n;
    while (f && g && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, g);
    if (f)
        fclose(f);
    if (g)
        fclose(g);
}

static void flip_byte(const char *path, long off)
{
    int fd = open(path, O_RDWR);
    unsigned char c;
    if (off < 0)
        off += lseek(fd, 0, SEEK_END);
    if (pread(fd, &c, 1, off) == 1) {
        c ^= 0x10;
        if (pwrite(fd, &c, 1, off) != 1)
            perror("pwrite");
    }
    close(fd);
}

/* --------------------------------------------------------- assertions */

/* open_latest must skip step `bad` (note naming why) and return `good`;
 * an explicit open or read of `bad` must fail with the same reason. */
static void expect_skipped(const char *dir, int64_t bad, int64_t good, const char *why)
{
    char notes[4096] = "", err[1024] = "";
    Model m = model_a();
    int64_t got = load_all(dir, &m, notes, sizeof notes, err, sizeof err);
    CHECK(got == good, "%s: loaded step %lld (want %lld): %s", why, (long long)got,
          (long long)good, err);
    CHECK(strstr(notes, why) != NULL, "the note '%s' does not say '%s'", notes, why);
    RtCkpt *c = rt_ckpt_open_step(dir, bad, err, sizeof err);
    if (c) { /* damage found only by reading the payload */
        int rc = 0;
        for (int r = 0; r < W && rc == 0; r++) {
            State s;
            RtCkptBlob b[5];
            rc = rt_ckpt_read(c, r, b, blobs_of(&s, r, &m, b), err, sizeof err);
        }
        rt_ckpt_close(c);
        CHECK(rc != 0, "step %lld read although '%s'", (long long)bad, why);
    }
    CHECK(strstr(err, why) != NULL, "open/read of step %lld: '%s' does not say '%s'",
          (long long)bad, err, why);
    printf("  skipped: %s", notes);
}

/* Step `bad` of dir opens, but the program check or a read refuses it. */
static void expect_refused(int rc, const char *err, const char *why)
{
    printf("  refused: %s\n", err);
    CHECK(rc != 0 && strstr(err, why) != NULL, "'%s' does not say '%s'", err, why);
}

static void good_pair(const char *dir)
{
    char err[1024] = "";
    Model m = model_a();
    CHECK(save(dir, &m, 5, W, err, sizeof err) == 0, "save 5: %s", err);
    CHECK(save(dir, &m, 10, W, err, sizeof err) == 0, "save 10: %s", err);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/ptdrt-ckpt2-XXXXXX");
    if (!mkdtemp(root))
        return 1;
    alarm(60); /* a blocking open would hang the test: fail it instead */
    char err[1024] = "", notes[4096] = "";
    Model m = model_a();

    printf("run ids\n");
    uint8_t a[RT_RUN_ID_BYTES], b[RT_RUN_ID_BYTES];
    static const uint8_t zero[RT_RUN_ID_BYTES];
    CHECK(rt_run_id_new(a, err, sizeof err) == 0 && rt_run_id_new(b, err, sizeof err) == 0,
          "run id: %s", err);
    CHECK(memcmp(a, zero, sizeof a) && memcmp(a, b, sizeof a), "run ids zero or equal");
    char hex[33];
    rt_run_id_hex(m.run, hex);
    CHECK(!strcmp(hex, "a100000000000000000000000000005a"), "hex %s", hex);

    printf("round trip, newest step\n");
    const char *d = fresh("rt");
    good_pair(d);
    CHECK(load_all(d, &m, notes, sizeof notes, err, sizeof err) == 10, "load: %s", err);
    CHECK(notes[0] == 0, "notes on a clean directory: %s", notes);
    /* DIR/step-N itself names that step */
    char sd[512];
    snprintf(sd, sizeof sd, "%s/step-000000005", d);
    RtCkpt *c = rt_ckpt_open_latest(sd, INT64_MAX, notes, sizeof notes, err, sizeof err);
    CHECK(c && rt_ckpt_step(c) == 5, "open of a step directory: %s", err);
    rt_ckpt_close(c);
    /* `before`: the next older step, for a trainer whose newest read failed */
    c = rt_ckpt_open_latest(d, 10, notes, sizeof notes, err, sizeof err);
    CHECK(c && rt_ckpt_step(c) == 5, "open before 10: %s", err);
    rt_ckpt_close(c);
    c = rt_ckpt_open_latest(d, 5, notes, sizeof notes, err, sizeof err);
    CHECK(!c && strstr(err, "no complete checkpoint older than"), "before 5: %s", err);
    rt_ckpt_close(c);
    struct stat st;
    CHECK(stat(path_of(d, 10, "manifest.json"), &st) == 0, "no manifest");

    printf("a blob larger than the staging buffer\n");
    {
        const char *dd = fresh("big");
        int64_t n = (int64_t)(RTC_CK_STAGE / 4) + 12345;
        float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)i * 0.25f;
        RtCkptBlob bb = {.name = "big", .data = x, .bytes = n * 4, .dtype = RT_DT_F32,
                         .ndim = 1, .global = {n}, .local = {n}, .flat_count = n};
        RtCkptMeta x0 = meta_of(&m, 3, 0, 1);
        RtCkptRecord rec;
        RtCkptTensor t = {.name = "big", .dtype = RT_DT_F32, .ndim = 1, .shape = {n}};
        CHECK(rt_ckpt_write(dd, &x0, &bb, 1, &rec, err, sizeof err) == 0 &&
                  rt_ckpt_commit(dd, &x0, &rec, 1, &t, 1, err, sizeof err) == 0,
              "big save: %s", err);
        c = rt_ckpt_open_latest(dd, INT64_MAX, notes, sizeof notes, err, sizeof err);
        bb.data = y;
        CHECK(c && rt_ckpt_read(c, 0, &bb, 1, err, sizeof err) == 0 && !memcmp(x, y, (size_t)n * 4),
              "big load: %s", err);
        rt_ckpt_close(c);
        free(x);
        free(y);
    }

    printf("step numbers are int64\n");
    d = fresh("big-steps");
    const int64_t steps[] = {16777216, 16777217, (int64_t)1 << 32, ((int64_t)1 << 32) + 1,
                             INT64_MAX / 8 - 1};
    for (int i = 0; i < 5; i++) {
        CHECK(save(d, &m, steps[i], W, err, sizeof err) == 0, "save %lld: %s",
              (long long)steps[i], err);
        CHECK(load_all(d, &m, notes, sizeof notes, err, sizeof err) == steps[i],
              "newest after saving %lld: %s", (long long)steps[i], err);
    }
    c = rt_ckpt_open_latest(d, ((int64_t)1 << 32) + 1, notes, sizeof notes, err, sizeof err);
    CHECK(c && rt_ckpt_step(c) == (int64_t)1 << 32, "2^32 + 1 and 2^32 told apart");
    rt_ckpt_close(c);
    c = rt_ckpt_open_latest(d, 16777217, notes, sizeof notes, err, sizeof err);
    CHECK(c && rt_ckpt_step(c) == 16777216, "2^24 + 1 and 2^24 told apart");
    rt_ckpt_close(c);
    /* a directory name beyond int64 is not a step */
    char huge[512];
    snprintf(huge, sizeof huge, "%s/step-99999999999999999999", d);
    CHECK(mkdir(huge, 0777) == 0, "mkdir %s", huge);
    CHECK(load_all(d, &m, notes, sizeof notes, err, sizeof err) == INT64_MAX / 8 - 1,
          "with an overflowing name: %s", err);

    printf("incomplete steps are skipped\n");
    d = fresh("incomplete");
    good_pair(d);
    unlink(path_of(d, 10, "manifest.json"));
    expect_skipped(d, 10, 5, "incomplete (no manifest: its save did not finish)");
    /* a later save of step 10 over the leftovers makes it whole again */
    CHECK(save(d, &m, 10, W, err, sizeof err) == 0, "re-save: %s", err);
    CHECK(load_all(d, &m, notes, sizeof notes, err, sizeof err) == 10, "after re-save: %s", err);

    printf("a re-save removes the step's stale manifest before writing\n");
    {
        State s;
        fill(&s, 1, 10);
        RtCkptBlob bb[5];
        RtCkptMeta x = meta_of(&m, 10, 1, W);
        RtCkptRecord rec;
        CHECK(rt_ckpt_write(d, &x, bb, blobs_of(&s, 1, &m, bb), &rec, err, sizeof err) == 0,
              "write: %s", err);
        CHECK(stat(path_of(d, 10, "manifest.json"), &st) != 0,
              "a manifest vouches for a file being replaced");
        expect_skipped(d, 10, 5, "incomplete (no manifest");
    }

    printf("swapped, copied and mixed rank files\n");
    d = fresh("swap");
    good_pair(d);
    char p0[512], p1[512], tmp[600];
    snprintf(p0, sizeof p0, "%s", path_of(d, 10, "rank00000.ckpt"));
    snprintf(p1, sizeof p1, "%s", path_of(d, 10, "rank00001.ckpt"));
    snprintf(tmp, sizeof tmp, "%s.x", p0);
    rename(p0, tmp);
    rename(p1, p0);
    rename(tmp, p1);
    expect_skipped(d, 10, 5,
                   "holds rank 1's state, not rank 0's (rank files swapped or copied over each "
                   "other?)");

    d = fresh("copied");
    good_pair(d);
    {
        char from[512];
        snprintf(from, sizeof from, "%s", path_of(d, 10, "rank00000.ckpt"));
        copy_file(from, path_of(d, 10, "rank00002.ckpt"));
    }
    expect_skipped(d, 10, 5, "holds rank 0's state, not rank 2's");

    d = fresh("other-run");
    good_pair(d);
    {
        const char *o = fresh("other-run-src");
        Model m2 = model_a();
        m2.run[3] = 0x77; /* the same plan and step, another run */
        CHECK(save(o, &m2, 10, W, err, sizeof err) == 0, "save: %s", err);
        char from[512];
        snprintf(from, sizeof from, "%s", path_of(o, 10, "rank00001.ckpt"));
        copy_file(from, path_of(d, 10, "rank00001.ckpt"));
    }
    expect_skipped(d, 10, 5, "(a rank file mixed in from another run?)");

    d = fresh("other-step");
    good_pair(d);
    {
        char from[512];
        snprintf(from, sizeof from, "%s", path_of(d, 5, "rank00001.ckpt"));
        copy_file(from, path_of(d, 10, "rank00001.ckpt"));
    }
    expect_skipped(d, 10, 5, "holds step 5, the manifest step 10");

    d = fresh("other-world");
    good_pair(d);
    {
        const char *o = fresh("other-world-src");
        CHECK(save(o, &m, 10, 4, err, sizeof err) == 0, "save 4 ranks: %s", err);
        char from[512];
        snprintf(from, sizeof from, "%s", path_of(o, 10, "rank00002.ckpt"));
        copy_file(from, path_of(d, 10, "rank00002.ckpt"));
    }
    expect_skipped(d, 10, 5, "was written by a world of 4 ranks, the manifest's has 3");

    d = fresh("other-plan");
    good_pair(d);
    {
        const char *o = fresh("other-plan-src");
        Model m2 = model_a();
        m2.plan = "hash-of-plan-B";
        CHECK(save(o, &m2, 10, W, err, sizeof err) == 0, "save: %s", err);
        char from[512];
        snprintf(from, sizeof from, "%s", path_of(o, 10, "rank00001.ckpt"));
        copy_file(from, path_of(d, 10, "rank00001.ckpt"));
        c = rt_ckpt_open_step(d, 10, err, sizeof err);
        int rc = c ? 0 : -1;
        if (c) {
            State s;
            RtCkptBlob bb[5];
            rc = rt_ckpt_read(c, 1, bb, blobs_of(&s, 1, &m, bb), err, sizeof err);
        }
        rt_ckpt_close(c);
        /* the file differs in size or CRC too; which is found first depends
         * on the layout, and either is a refusal naming the file */
        CHECK(rc != 0 && strstr(err, "rank00001.ckpt"), "plan-B file accepted: %s", err);
        printf("  refused: %s\n", err);
    }

    printf("damaged rank files\n");
    d = fresh("truncated");
    good_pair(d);
    CHECK(truncate(path_of(d, 10, "rank00001.ckpt"), 200) == 0, "truncate");
    expect_skipped(d, 10, 5, "is 200 bytes; the manifest recorded");
    d = fresh("truncated-header");
    good_pair(d);
    CHECK(truncate(path_of(d, 10, "rank00001.ckpt"), 50) == 0, "truncate");
    expect_skipped(d, 10, 5, "truncated checkpoint file: 50 bytes");
    d = fresh("flip-payload");
    good_pair(d);
    flip_byte(path_of(d, 10, "rank00002.ckpt"), -20);
    {
        /* the header and trailer agree with the manifest: the step opens,
         * and the payload's CRC refuses the read */
        c = rt_ckpt_open_latest(d, INT64_MAX, notes, sizeof notes, err, sizeof err);
        CHECK(c && rt_ckpt_step(c) == 10, "open: %s", err);
        State s;
        RtCkptBlob bb[5];
        int rc = c ? rt_ckpt_read(c, 2, bb, blobs_of(&s, 2, &m, bb), err, sizeof err) : -1;
        expect_refused(rc, err, "corrupted checkpoint file: CRC-32C mismatch");
        rt_ckpt_close(c);
        c = rt_ckpt_open_latest(d, 10, notes, sizeof notes, err, sizeof err);
        CHECK(c && rt_ckpt_step(c) == 5, "the next older step: %s", err);
        rt_ckpt_close(c);
    }
    d = fresh("flip-trailer");
    good_pair(d);
    flip_byte(path_of(d, 10, "rank00002.ckpt"), -6);
    expect_skipped(d, 10, 5, "the manifest recorded");
    d = fresh("missing");
    good_pair(d);
    unlink(path_of(d, 10, "rank00001.ckpt"));
    expect_skipped(d, 10, 5, "rank00001.ckpt: cannot open checkpoint file: No such file");
    d = fresh("v1-in-step");
    good_pair(d);
    write_v1_file(path_of(d, 10, "rank00001.ckpt"));
    expect_skipped(d, 10, 5, "a version 1 checkpoint file; this runtime reads version 2");

    printf("damaged manifests\n");
    d = fresh("manifest-flip");
    good_pair(d);
    flip_byte(path_of(d, 10, "manifest.json"), 40);
    expect_skipped(d, 10, 5, "damaged checkpoint manifest: CRC-32C mismatch");
    d = fresh("manifest-cut");
    good_pair(d);
    {
        struct stat ms;
        stat(path_of(d, 10, "manifest.json"), &ms);
        CHECK(truncate(path_of(d, 10, "manifest.json"), ms.st_size - 5) == 0, "truncate");
    }
    expect_skipped(d, 10, 5, "it does not end in its crc32c line (truncated?)");

    printf("FIFOs are refused, not blocked on\n");
    d = fresh("fifo");
    good_pair(d);
    unlink(path_of(d, 10, "rank00001.ckpt"));
    CHECK(mkfifo(path_of(d, 10, "rank00001.ckpt"), 0644) == 0, "mkfifo");
    expect_skipped(d, 10, 5, "it is a FIFO, not a regular file");
    unlink(path_of(d, 10, "manifest.json"));
    CHECK(mkfifo(path_of(d, 10, "manifest.json"), 0644) == 0, "mkfifo");
    expect_skipped(d, 10, 5, "manifest.json: cannot read checkpoint manifest: it is a FIFO");
    {
        char fifo[256], e2[512];
        snprintf(fifo, sizeof fifo, "%s/tokens.fifo", root);
        CHECK(mkfifo(fifo, 0644) == 0, "mkfifo");
        RtData *dd = rt_data_try_open(fifo, 100, 8, e2, sizeof e2);
        expect_refused(dd ? 0 : -1, e2, "cannot read token file: it is a FIFO");
        RtSt *sst = rt_st_open(fifo, e2, sizeof e2);
        expect_refused(sst ? 0 : -1, e2, "cannot read safetensors file: it is a FIFO");
    }

    printf("directories that hold no version-2 checkpoint\n");
    d = fresh("empty");
    mkdir(d, 0777);
    c = rt_ckpt_open_latest(d, INT64_MAX, notes, sizeof notes, err, sizeof err);
    expect_refused(c ? 0 : -1, err, "holds no checkpoint (no step-NNNNNNNNN directory)");
    {
        char v1p[512];
        snprintf(v1p, sizeof v1p, "%s/rank00000.ckpt", d);
        write_v1_file(v1p);
    }
    c = rt_ckpt_open_latest(d, INT64_MAX, notes, sizeof notes, err, sizeof err);
    expect_refused(c ? 0 : -1, err, "a version 1 checkpoint (rank files without step directories");
    c = rt_ckpt_open_latest(fresh("nonexistent"), INT64_MAX, notes, sizeof notes, err, sizeof err);
    expect_refused(c ? 0 : -1, err, "cannot open checkpoint directory: No such file");
    {
        char f[256];
        snprintf(f, sizeof f, "%s/plainfile", root);
        copy_file("/dev/null", f);
        c = rt_ckpt_open_latest(f, INT64_MAX, notes, sizeof notes, err, sizeof err);
        expect_refused(c ? 0 : -1, err, "not a checkpoint directory");
    }
    d = fresh("all-bad");
    good_pair(d);
    unlink(path_of(d, 10, "manifest.json"));
    unlink(path_of(d, 5, "manifest.json"));
    c = rt_ckpt_open_latest(d, INT64_MAX, notes, sizeof notes, err, sizeof err);
    expect_refused(c ? 0 : -1, err, "no complete checkpoint: 2 step directories, none complete");
    CHECK(strstr(notes, "step-000000010: incomplete") && strstr(notes, "step-000000005: incomplete"),
          "notes: %s", notes);

    printf("the checkpoint against the program\n");
    d = fresh("program");
    good_pair(d);
    c = rt_ckpt_open_latest(d, INT64_MAX, notes, sizeof notes, err, sizeof err);
    {
        RtCkptTensor t[2];
        Model heads = model_a(); /* [6, 4, 5] has 120 elements; so has [6, 2, 10] */
        heads.wshape[1] = 2;
        heads.wshape[2] = 10;
        model_of(&heads, t);
        expect_refused(rt_ckpt_check_program(c, W, PLAN, t, 2, err, sizeof err), err,
                       "tensor 'w' has shape [6, 4, 5] in the checkpoint; this model's is [6, 2, "
                       "10] (saved from another model or configuration)");
        Model bf = model_a();
        bf.wdtype = RT_DT_BF16;
        model_of(&bf, t);
        expect_refused(rt_ckpt_check_program(c, W, PLAN, t, 2, err, sizeof err), err,
                       "tensor 'w' is F32 in the checkpoint; this model's is BF16");
        model_of(&m, t);
        expect_refused(rt_ckpt_check_program(c, W, PLAN, t, 1, err, sizeof err), err,
                       "the checkpoint holds tensor 'b', which this model does not have");
        RtCkptTensor t3[3];
        model_of(&m, t3);
        t3[2] = (RtCkptTensor){.name = "extra", .dtype = RT_DT_F32, .ndim = 1, .shape = {3}};
        expect_refused(rt_ckpt_check_program(c, W, PLAN, t3, 3, err, sizeof err), err,
                       "the checkpoint has no tensor 'extra'");
        expect_refused(rt_ckpt_check_program(c, 4, PLAN, t, 2, err, sizeof err), err,
                       "saved by 3 ranks; this program runs on 4");
        expect_refused(rt_ckpt_check_program(c, W, "hash-of-plan-B", t, 2, err, sizeof err), err,
                       "saved by a program of another plan (plan hash hash-of-plan-A); this "
                       "program's plan hash is hash-of-plan-B");
        CHECK(rt_ckpt_check_program(c, W, PLAN, t, 2, err, sizeof err) == 0, "match: %s", err);
        CHECK(!memcmp(rt_ckpt_run_id(c), m.run, RT_RUN_ID_BYTES) &&
                  !strcmp(rt_ckpt_plan_hash(c), PLAN) && rt_ckpt_world(c) == W,
              "manifest fields");
        /* A meta naming no optimizer is AdamW's (the only one before LAMB). */
        CHECK(!strcmp(rt_ckpt_optimizer(c), "adamw"), "optimizer %s, not adamw", rt_ckpt_optimizer(c));
    }
    {
        State s;
        RtCkptBlob bb[5];
        blobs_of(&s, 1, &m, bb);
        bb[0].global[1] = bb[0].local[1] = 2; /* a program whose w is [6, 2, 10] */
        bb[0].global[2] = bb[0].local[2] = 10;
        expect_refused(rt_ckpt_read(c, 1, bb, 5, err, sizeof err), err,
                       "blob 'master:w' is part of a tensor of shape [6, 4, 5] in the checkpoint; "
                       "this program's is [6, 2, 10]");
        blobs_of(&s, 1, &m, bb);
        bb[0].offset[0] = 4;
        expect_refused(rt_ckpt_read(c, 1, bb, 5, err, sizeof err), err,
                       "blob 'master:w' holds block [2:4, 0:4, 0:5] elements 0..40 in the "
                       "checkpoint; this program expects [4:6, 0:4, 0:5] elements 0..40");
        blobs_of(&s, 1, &m, bb);
        bb[1].flat_start = 0;
        expect_refused(rt_ckpt_read(c, 1, bb, 5, err, sizeof err), err,
                       "blob 'adam_m:w' holds block [0:6, 0:4, 0:5] elements 40..80");
        blobs_of(&s, 1, &m, bb);
        bb[3].dtype = RT_DT_F32;
        bb[3].bytes = 28;
        expect_refused(rt_ckpt_read(c, 1, bb, 5, err, sizeof err), err,
                       "blob 'rng' is U8 in the checkpoint; this program's is F32");
        blobs_of(&s, 1, &m, bb);
        expect_refused(rt_ckpt_read(c, 1, bb, 4, err, sizeof err), err,
                       "the checkpoint holds blob 'empty', which the program does not expect");
        blobs_of(&s, 1, &m, bb);
        bb[4].name = "adam_v:w";
        expect_refused(rt_ckpt_read(c, 1, bb, 5, err, sizeof err), err,
                       "the checkpoint has no blob 'adam_v:w'");
        blobs_of(&s, 1, &m, bb);
        bb[2].bytes += 4;
        expect_refused(rt_ckpt_read(c, 1, bb, 5, err, sizeof err), err,
                       "blob 'master:b' holds 20 bytes, the program expects 24");
        blobs_of(&s, 1, &m, bb);
        bb[2].name = "rng";
        expect_refused(rt_ckpt_read(c, 1, bb, 5, err, sizeof err), err,
                       "blob name 'rng' appears twice");
        expect_refused(rt_ckpt_read(c, 3, bb, 5, err, sizeof err), err,
                       "no rank 3 in a checkpoint of 3 ranks");
    }
    rt_ckpt_close(c);

    printf("commits refused\n");
    d = fresh("commit");
    {
        RtCkptRecord rec[W];
        RtCkptTensor t[2];
        model_of(&m, t);
        for (int r = 0; r < W; r++) {
            State s;
            fill(&s, r, 7);
            RtCkptBlob bb[5];
            RtCkptMeta x = meta_of(&m, 7, r, W);
            CHECK(rt_ckpt_write(d, &x, bb, blobs_of(&s, r, &m, bb), &rec[r], err, sizeof err) == 0,
                  "write: %s", err);
        }
        RtCkptMeta x = meta_of(&m, 7, 0, W);
        RtCkptRecord bad[W];
        memcpy(bad, rec, sizeof rec);
        bad[1].status = ENOSPC;
        expect_refused(rt_ckpt_commit(d, &x, bad, W, t, 2, err, sizeof err), err,
                       "step 7 not committed: rank 1 could not write its file (No space left on "
                       "device)");
        memcpy(bad, rec, sizeof rec);
        bad[2].step = 6;
        expect_refused(rt_ckpt_commit(d, &x, bad, W, t, 2, err, sizeof err), err,
                       "the record in place of rank 2 is rank 2's of world 3, step 6");
        memcpy(bad, rec, sizeof rec);
        bad[0] = rec[1];
        expect_refused(rt_ckpt_commit(d, &x, bad, W, t, 2, err, sizeof err), err,
                       "the record in place of rank 0 is rank 1's");
        expect_refused(rt_ckpt_commit(d, &x, rec, W - 1, t, 2, err, sizeof err), err,
                       "2 records for a world of 3");
        unlink(path_of(d, 7, "rank00002.ckpt"));
        expect_refused(rt_ckpt_commit(d, &x, rec, W, t, 2, err, sizeof err), err,
                       "rank 0 cannot see rank 2's file");
        CHECK(stat(path_of(d, 7, "manifest.json"), &st) != 0, "a refused commit left a manifest");
        RtCkptMeta y = x;
        memset(y.run_id, 0, sizeof y.run_id);
        RtCkptRecord r1;
        State s;
        RtCkptBlob bb[5];
        expect_refused(rt_ckpt_write(d, &y, bb, blobs_of(&s, 0, &m, bb), &r1, err, sizeof err),
                       err, "no run id (make one with rt_run_id_new)");
        CHECK(r1.status != 0, "a refused write has status 0");
        y = x;
        y.step = -1;
        expect_refused(rt_ckpt_write(d, &y, bb, 5, &r1, err, sizeof err), err,
                       "negative step -1");
        y = x;
        bb[0].flat_count = 41;
        expect_refused(rt_ckpt_write(d, &y, bb, 5, &r1, err, sizeof err), err,
                       "blob 'master:w' holds elements [0, +41) of a block of 40");
    }

    printf("keep N\n");
    d = fresh("keep");
    RtCkptMeta pm = meta_of(&m, 50, 0, W); /* the run pruning: the steps' own */
    for (int64_t s = 1; s <= 5; s++)
        CHECK(save(d, &m, s * 10, W, err, sizeof err) == 0, "save: %s", err);
    unlink(path_of(d, 20, "manifest.json")); /* an old incomplete step */
    {
        /* a newer incomplete step (another job's save in progress?) stays */
        State s;
        fill(&s, 0, 60);
        RtCkptBlob bb[5];
        RtCkptMeta x = meta_of(&m, 60, 0, W);
        RtCkptRecord rec;
        CHECK(rt_ckpt_write(d, &x, bb, blobs_of(&s, 0, &m, bb), &rec, err, sizeof err) == 0,
              "write 60: %s", err);
    }
    CHECK(rt_ckpt_prune(d, &pm, 2, notes, sizeof notes, err, sizeof err) == 0, "prune: %s", err);
    printf("  %s", notes);
    const int64_t kept[] = {60, 50, 40}, gone[] = {30, 20, 10};
    for (int i = 0; i < 3; i++) {
        snprintf(sd, sizeof sd, "%s/step-%09lld", d, (long long)kept[i]);
        CHECK(stat(sd, &st) == 0, "step %lld removed", (long long)kept[i]);
        snprintf(sd, sizeof sd, "%s/step-%09lld", d, (long long)gone[i]);
        CHECK(stat(sd, &st) != 0, "step %lld kept", (long long)gone[i]);
    }
    CHECK(strstr(notes, "step-000000020: removed (incomplete or damaged)") &&
              strstr(notes, "step-000000030: removed (older than the steps kept)"),
          "prune notes: %s", notes);
    CHECK(rt_ckpt_prune(d, &pm, 1, notes, sizeof notes, err, sizeof err) == 0, "prune 1: %s", err);
    CHECK(load_all(d, &m, notes, sizeof notes, err, sizeof err) == 50, "after keep 1: %s", err);
    expect_refused(rt_ckpt_prune(d, &pm, 0, notes, sizeof notes, err, sizeof err), err,
                   "keep 0: at least the newest step must be kept");

    ref_rm_rf(root);
    return check_status("rt_ckpt_v2");
}
