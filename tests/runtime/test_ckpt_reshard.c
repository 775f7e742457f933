/* test_ckpt_reshard.c: rt_ckpt_read_any, checkpoints read under another
 * plan. A tensor w [6, 4, 10] whose element e holds the value e (and a byte
 * array) is saved by every layout of a list (simulated ranks in one
 * process: blocks split along one or two dims, ZeRO-style flat shards of
 * the block with uneven last shards, replicas writing parts of their shard)
 * and read back by every rank of every layout; each element read must be
 * the one its global coordinates name. Proves also:
 *   - an element no rank file holds is refused by name before any blob is
 *     written (the blobs keep their sentinel);
 *   - another shape or dtype of the same name is refused;
 *   - rank files swapped or damaged inside are refused (header check, CRC);
 *   - a file a rank needs nothing from is checked by its header and
 *     trailer only: its payload is not read. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common.h"
#include "ref.h"
#include "rt.h"

enum { D0 = 6, D1 = 4, D2 = 10, N = D0 * D1 * D2, NB = 9 };

/* A layout: parts[k] ways along dim dim[k] (k = 0, 1), then the block's
 * elements flat-sharded `zero` ways, then each shard written in `reps`
 * parts by its replicas. Ranks: (p0, p1, z, rep), rep fastest. */
typedef struct {
    const char *name;
    int dim[2], parts[2], zero, reps;
} Lay;

static const Lay lays[] = {
    {"1 rank", {0, 1}, {1, 1}, 1, 1},
    {"rows/2", {0, 1}, {2, 1}, 1, 1},
    {"rows/3 x cols/2", {0, 2}, {3, 2}, 1, 1},
    {"mid/4", {1, 0}, {4, 1}, 1, 1},
    {"cols/5", {2, 0}, {5, 1}, 1, 1},
    {"zero 3 of the whole", {0, 1}, {1, 1}, 3, 1},
    {"zero 7 (uneven, an empty shard)", {0, 1}, {1, 1}, 7, 1},
    {"cols/2, zero 2, 2 replicas", {2, 0}, {2, 1}, 2, 2},
    {"rows/2 x mid/2, 3 replicas", {0, 1}, {2, 2}, 1, 3},
    {"mid/2, zero 3 (uneven)", {1, 0}, {2, 1}, 3, 1},
};
enum { NLAYS = sizeof lays / sizeof lays[0] };

static int world_of(const Lay *l) { return l->parts[0] * l->parts[1] * l->zero * l->reps; }

/* Rank r's part of w under l: block, and the flat range of it; with
 * `whole_shard` the zero shard (what a rank loads), else its replica's part
 * of it (what it saves). */
static void part_of(const Lay *l, int r, bool whole_shard, RtCkptBlob *b)
{
    int rep = r % l->reps, z = r / l->reps % l->zero;
    int c1 = r / (l->reps * l->zero) % l->parts[1], c0 = r / (l->reps * l->zero * l->parts[1]);
    int64_t g[3] = {D0, D1, D2};
    b->dtype = RT_DT_F32;
    b->ndim = 3;
    for (int d = 0; d < 3; d++) {
        b->global[d] = g[d];
        b->local[d] = g[d];
        b->offset[d] = 0;
    }
    int coord[2] = {c0, c1};
    for (int k = 0; k < 2; k++) {
        int d = l->dim[k];
        b->local[d] = g[d] / l->parts[k];
        b->offset[d] = coord[k] * b->local[d];
    }
    int64_t numel = b->local[0] * b->local[1] * b->local[2];
    int64_t shard = (numel + l->zero - 1) / l->zero;
    int64_t start = z * shard, count = numel - start < shard ? numel - start : shard;
    if (count < 0)
        count = 0, start = numel;
    if (!whole_shard) {
        int64_t chunk = (count + l->reps - 1) / l->reps, s = rep * chunk;
        int64_t c = count - s < chunk ? count - s : chunk;
        start += s < count ? s : count;
        count = c < 0 ? 0 : c;
    }
    b->flat_start = start;
    b->flat_count = count;
    b->bytes = count * 4;
}

/* The global index of element k of blob b's flat range. */
static int64_t global_index(const RtCkptBlob *b, int64_t k)
{
    int64_t f = b->flat_start + k, idx[3];
    for (int d = 2; d >= 0; d--) {
        idx[d] = f % b->local[d] + b->offset[d];
        f /= b->local[d];
    }
    return (idx[0] * D1 + idx[1]) * D2 + idx[2];
}

static const uint8_t run[RT_RUN_ID_BYTES] = {7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};


/* Save w (and the bytes, on rank 0 only) under l; `drop`: a rank that
 * writes no w (its elements are then in no file). */
static int save(const char *dir, const Lay *l, int drop, RtDtype dtype, char *err, size_t len)
{
    int W = world_of(l);
    RtCkptRecord rec[64];
    for (int r = 0; r < W; r++) {
        RtCkptBlob b[2];
        memset(b, 0, sizeof b);
        b[0].name = "master:w";
        part_of(l, r, false, &b[0]);
        b[0].dtype = dtype;
        float *v = calloc((size_t)b[0].flat_count + 1, sizeof *v);
        for (int64_t k = 0; k < b[0].flat_count; k++)
            v[k] = (float)global_index(&b[0], k);
        b[0].data = v;
        unsigned char bytes[NB];
        for (int i = 0; i < NB; i++)
            bytes[i] = (unsigned char)(200 + i);
        b[1] = (RtCkptBlob){.name = "rng", .data = bytes, .bytes = NB, .dtype = RT_DT_U8,
                            .ndim = 1, .global = {NB}, .local = {NB}, .flat_count = NB};
        int n = r == drop ? 0 : 1;
        if (r == 0) /* the bytes after w, or alone */
            b[n++] = b[1];
        RtCkptMeta m = {.plan_hash = l->name, .step = 5, .data_pos = 40, .rank = r, .world = W};
        memcpy(m.run_id, run, sizeof run);
        int rc = rt_ckpt_write(dir, &m, b, n, &rec[r], err, len);
        free(v);
        if (rc != 0)
            return -1;
    }
    RtCkptTensor t = {.name = "w", .dtype = dtype, .ndim = 3, .shape = {D0, D1, D2}};
    RtCkptMeta m = {.plan_hash = l->name, .step = 5, .data_pos = 40, .rank = 0, .world = W};
    memcpy(m.run_id, run, sizeof run);
    return rt_ckpt_commit(dir, &m, rec, W, &t, 1, err, len);
}

/* Read rank r of layout l from c; 0 if every element is the right one. */
static int read_rank(RtCkpt *c, const Lay *l, int r, char *err, size_t len, bool *untouched)
{
    RtCkptBlob b[2];
    memset(b, 0, sizeof b);
    b[0].name = "master:w";
    part_of(l, r, true, &b[0]);
    float *v = malloc(((size_t)b[0].flat_count + 1) * sizeof *v);
    for (int64_t k = 0; k <= b[0].flat_count; k++)
        v[k] = -1;
    b[0].data = v;
    unsigned char bytes[NB + 1];
    memset(bytes, 0x5c, sizeof bytes);
    b[1] = (RtCkptBlob){.name = "rng", .data = bytes, .bytes = NB, .dtype = RT_DT_U8, .ndim = 1,
                        .global = {NB}, .local = {NB}, .flat_count = NB};
    int rc = rt_ckpt_read_any(c, b, 2, err, len);
    *untouched = bytes[0] == 0x5c;
    for (int64_t k = 0; k < b[0].flat_count; k++)
        *untouched &= v[k] == -1;
    for (int64_t k = 0; k < b[0].flat_count && rc == 0; k++)
        if (v[k] != (float)global_index(&b[0], k))
            rc = rtc_err(err, len, "element %lld of rank %d's part is %g, not %lld", (long long)k,
                         r, (double)v[k], (long long)global_index(&b[0], k));
    if (rc == 0 && v[b[0].flat_count] != -1)
        rc = rtc_err(err, len, "rank %d: written past the blob", r);
    for (int i = 0; i < NB && rc == 0; i++)
        if (bytes[i] != 200 + i)
            rc = rtc_err(err, len, "rank %d: byte %d is %d", r, i, bytes[i]);
    if (rc == 0 && bytes[NB] != 0x5c)
        rc = rtc_err(err, len, "rank %d: written past the bytes", r);
    free(v);
    return rc;
}

static void swap_files(const char *sd, int a, int b)
{
    char pa[512], pb[512], pt[512];
    snprintf(pa, sizeof pa, "%s/rank%05d.ckpt", sd, a);
    snprintf(pb, sizeof pb, "%s/rank%05d.ckpt", sd, b);
    snprintf(pt, sizeof pt, "%s/tmp", sd);
    CHECK(rename(pa, pt) == 0 && rename(pb, pa) == 0 && rename(pt, pb) == 0, "swap failed");
}

int main(void)
{
    char root[] = "/tmp/ptdc-reshard-XXXXXX", dir[256], err[2048];
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    int pairs = 0;
    /* Every layout saved, every layout read back, every rank of it. */
    for (int a = 0; a < NLAYS; a++) {
        snprintf(dir, sizeof dir, "%s/a%d", root, a);
        CHECK(save(dir, &lays[a], -1, RT_DT_F32, err, sizeof err) == 0, "save %s: %s",
              lays[a].name, err);
        RtCkpt *c = rt_ckpt_open_latest(dir, INT64_MAX, NULL, 0, err, sizeof err);
        CHECK(c != NULL, "open %s: %s", lays[a].name, err);
        if (!c)
            continue;
        RtCkptTensor t = {.name = "w", .dtype = RT_DT_F32, .ndim = 3, .shape = {D0, D1, D2}};
        CHECK(rt_ckpt_check_model(c, &t, 1, err, sizeof err) == 0, "%s", err);
        for (int b = 0; b < NLAYS; b++)
            for (int r = 0; r < world_of(&lays[b]); r++) {
                bool untouched;
                CHECK(read_rank(c, &lays[b], r, err, sizeof err, &untouched) == 0,
                      "saved as %s, read as %s: %s", lays[a].name, lays[b].name, err);
                pairs++;
            }
        rt_ckpt_close(c);
    }
    printf("%d (layout, layout, rank) reads exact\n", pairs);

    /* An element in no file: rank 2 of "rows/3 x cols/2" wrote no w. */
    snprintf(dir, sizeof dir, "%s/drop", root);
    CHECK(save(dir, &lays[2], 2, RT_DT_F32, err, sizeof err) == 0, "%s", err);
    RtCkpt *c = rt_ckpt_open_latest(dir, INT64_MAX, NULL, 0, err, sizeof err);
    bool untouched;
    CHECK(c && read_rank(c, &lays[2], 0, err, sizeof err, &untouched) == 0, "rank 0 needs "
          "nothing of rank 2: %s", err);
    CHECK(c && read_rank(c, &lays[0], 0, err, sizeof err, &untouched) != 0 &&
              strstr(err, "no rank file holds elements 80..85 of blob 'master:w'") && untouched,
          "a missing block: '%s' (blobs %s)", err, untouched ? "untouched" : "written");
    rt_ckpt_close(c);

    /* Another shape or dtype under the same name. */
    snprintf(dir, sizeof dir, "%s/bf16", root);
    CHECK(save(dir, &lays[1], -1, RT_DT_BF16, err, sizeof err) == 0, "%s", err);
    c = rt_ckpt_open_latest(dir, INT64_MAX, NULL, 0, err, sizeof err);
    CHECK(c && read_rank(c, &lays[0], 0, err, sizeof err, &untouched) != 0 &&
              strstr(err, "blob 'master:w' is BF16 in the checkpoint; this program's is F32") &&
              untouched, "another dtype: '%s'", err);
    RtCkptTensor t4 = {.name = "w", .dtype = RT_DT_F32, .ndim = 3, .shape = {D0, 2, 2 * D2}};
    CHECK(c && rt_ckpt_check_model(c, &t4, 1, err, sizeof err) != 0 &&
              strstr(err, "tensor 'w' has shape [6, 4, 10] in the checkpoint; this model's is "
                          "[6, 2, 20]"), "another shape: '%s'", err);
    rt_ckpt_close(c);

    /* Swapped rank files; a payload byte changed. */
    snprintf(dir, sizeof dir, "%s/a2", root);
    char sd[300];
    snprintf(sd, sizeof sd, "%s/step-000000005", dir);
    swap_files(sd, 1, 4);
    c = rt_ckpt_open_step(dir, 5, err, sizeof err);
    CHECK(!c && strstr(err, "rank00001.ckpt: holds rank 4's state, not rank 1's"),
          "swapped: '%s'", err);
    rt_ckpt_close(c);
    swap_files(sd, 1, 4);
    c = rt_ckpt_open_step(dir, 5, err, sizeof err);
    CHECK(c != NULL, "swapped back: %s", err);
    char p[400];
    snprintf(p, sizeof p, "%s/rank00003.ckpt", sd);
    struct stat st;
    CHECK(stat(p, &st) == 0, "stat");
    FILE *f = fopen(p, "r+b");
    CHECK(f && fseek(f, (long)st.st_size - 8 - 5, SEEK_SET) == 0 && fputc('Z', f) != EOF,
          "damage");
    if (f)
        fclose(f);
    CHECK(c && read_rank(c, &lays[0], 0, err, sizeof err, &untouched) != 0 &&
              strstr(err, "rank00003.ckpt: corrupted checkpoint file: CRC-32C mismatch"),
          "a damaged payload: '%s'", err);
    /* Rank 0 of "rows/3 x cols/2" needs nothing from rank 3's file. */
    CHECK(c && read_rank(c, &lays[2], 0, err, sizeof err, &untouched) == 0,
          "a file not needed was read: %s", err);
    rt_ckpt_close(c);

    ref_rm_rf(root);
    return check_status("rt_ckpt_reshard");
}
