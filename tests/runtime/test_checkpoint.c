/* test_checkpoint.c: CRC-32C check value; one rank file of a version-2
 * checkpoint (a world of 1) byte by byte: save/load round trip (blobs in
 * another order, odd and empty sizes, step and data position), a re-save
 * leaves no temporary; every truncation length and a bit flip in every byte
 * of the rank file are refused (outside the payload before any blob is
 * written; in it by the CRC); name and size mismatches are refused naming
 * the blob. (test_ckpt_v2.c: directories, manifests, many ranks.) */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common.h"
#include "ref.h"
#include "rt.h"

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n ? *n : 1);
    if (fread(b, 1, *n, f) != *n)
        *n = 0;
    fclose(f);
    return b;
}

static int temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

enum { NW = 300, NB = 7 };

typedef struct {
    float w[NW], m[NW];
    unsigned char b[NB];
    char empty[1];
} State;

static const uint8_t run[RT_RUN_ID_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static RtCkptBlob blob(const char *name, void *data, int64_t n, RtDtype t)
{
    RtCkptBlob b;
    memset(&b, 0, sizeof b);
    b.name = name;
    b.data = data;
    b.bytes = n * (int64_t)rtc_dtype_size(t);
    b.dtype = t;
    b.ndim = 1;
    b.global[0] = b.local[0] = n;
    b.flat_count = n;
    return b;
}

static void blobs_of(State *s, RtCkptBlob *out, bool reversed)
{
    RtCkptBlob b[4] = {blob("master:layers.0.wq", s->w, NW, RT_DT_F32),
                       blob("adam_m:layers.0.wq", s->m, NW, RT_DT_F32),
                       blob("master:odd", s->b, NB, RT_DT_U8), blob("empty", s->empty, 0, RT_DT_F32)};
    for (int i = 0; i < 4; i++)
        out[i] = b[reversed ? 3 - i : i];
}

static RtCkptMeta meta(int64_t step, int64_t pos)
{
    RtCkptMeta m;
    memset(&m, 0, sizeof m);
    memcpy(m.run_id, run, sizeof run);
    m.plan_hash = "plan";
    m.step = step;
    m.data_pos = pos;
    m.world = 1;
    return m;
}

static int save(const char *dir, State *s, int64_t step, int64_t pos, char *err, size_t len)
{
    RtCkptBlob b[4];
    blobs_of(s, b, false);
    RtCkptMeta m = meta(step, pos);
    RtCkptRecord rec;
    if (rt_ckpt_write(dir, &m, b, 4, &rec, err, len) != 0)
        return -1;
    RtCkptTensor t = {.name = "w", .dtype = RT_DT_F32, .ndim = 1, .shape = {NW}};
    return rt_ckpt_commit(dir, &m, &rec, 1, &t, 1, err, len);
}

/* Open step 5 of dir and read rank 0 into a fresh state; the message in err. */
static int load(const char *dir, State *s, RtCkptBlob *b, int n, char *err, size_t len)
{
    RtCkpt *c = rt_ckpt_open_step(dir, 5, err, len);
    if (!c)
        return -1;
    int rc = rt_ckpt_read(c, 0, b, n, err, len);
    if (rc == 0 && (rt_ckpt_step(c) != 5 || rt_ckpt_data_pos(c) != 1234))
        rc = rtc_err(err, len, "step %lld, data position %lld", (long long)rt_ckpt_step(c),
                     (long long)rt_ckpt_data_pos(c));
    rt_ckpt_close(c);
    (void)s;
    return rc;
}

/* The load must fail with `expect` in the message; outside the payload it
 * must leave the state untouched. */
static bool refused(const char *dir, const char *expect, bool untouched, bool quiet)
{
    State s;
    memset(&s, 0xA5, sizeof s);
    State keep = s;
    RtCkptBlob b[4];
    blobs_of(&s, b, false);
    char err[1024] = "";
    int rc = load(dir, &s, b, 4, err, sizeof err);
    if (!quiet)
        printf("  refused: %s\n", err);
    bool same = memcmp(&s, &keep, sizeof s) == 0;
    bool ok = rc != 0 && (!untouched || same) && (!expect || strstr(err, expect) != NULL);
    CHECK(ok, "load of %s: rc %d, message '%s' (want '%s'), state %s", dir, rc, err,
          expect ? expect : "", same ? "intact" : "modified");
    return ok;
}

int main(void)
{
    printf("crc32c\n");
    CHECK(rtc_crc32c(0, "123456789", 9) == 0xE3069283u, "CRC-32C check value");
    CHECK(rtc_crc32c(rtc_crc32c(0, "12345", 5), "6789", 4) == 0xE3069283u, "CRC-32C chaining");
    unsigned char big[1000];
    for (int i = 0; i < 1000; i++)
        big[i] = (unsigned char)(i * 31);
    uint32_t one = rtc_crc32c(0, big, 1000), parts = 0;
    for (int i = 0; i < 1000; i += 37)
        parts = rtc_crc32c(parts, big + i, i + 37 <= 1000 ? 37 : (size_t)(1000 - i));
    CHECK(one == parts, "CRC-32C over uneven chunks (slicing-by-8 vs tail bytes)");

    char dir[] = "/tmp/ptdrt-ckpt-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char sd[160], path[200];
    snprintf(sd, sizeof sd, "%s/step-000000005", dir);
    snprintf(path, sizeof path, "%s/rank00000.ckpt", sd);

    printf("round trip\n");
    State s;
    ref_seed(5);
    ref_fill(s.w, NULL, NW, -1, 1);
    ref_fill(s.m, NULL, NW, -1, 1);
    for (int i = 0; i < NB; i++)
        s.b[i] = (unsigned char)(200 + i);
    char err[1024] = "";
    CHECK(save(dir, &s, 5, 999, err, sizeof err) == 0, "save: %s", err);
    /* saving the step again replaces it, with new contents */
    CHECK(save(dir, &s, 5, 1234, err, sizeof err) == 0, "second save: %s", err);
    CHECK(temporaries(sd) == 0, "a temporary file was left behind");
    State t;
    memset(&t, 0, sizeof t);
    RtCkptBlob c[4];
    blobs_of(&t, c, true);
    CHECK(load(dir, &t, c, 4, err, sizeof err) == 0, "load: %s", err);
    CHECK(memcmp(s.w, t.w, sizeof s.w) == 0 && memcmp(s.m, t.m, sizeof s.m) == 0 &&
              memcmp(s.b, t.b, NB) == 0,
          "loaded blobs differ");

    size_t n = 0;
    unsigned char *file = slurp(path, &n);
    if (!file || n == 0) {
        CHECK(0, "cannot read back %s", path);
        return check_status("rt_checkpoint");
    }
    /* Where the payload is: after the header and the index. */
    size_t payload = RTC_CK_HEADER + (size_t)rtc_get_u64(file + 32);
    size_t payload_end = n - RTC_CK_TRAILER;
    printf("  %zu bytes, payload [%zu, %zu)\n", n, payload, payload_end);

    printf("truncation (every length)\n");
    int bad_trunc = 0;
    for (size_t len = n; len-- > 0;) {
        CHECK(truncate(path, (off_t)len) == 0, "truncate");
        bad_trunc += !refused(dir, len < RTC_CK_HEADER + RTC_CK_TRAILER ? "truncated" : "bytes",
                              true, len != 0 && len != n - 1);
    }
    CHECK(bad_trunc == 0, "%d truncations not refused", bad_trunc);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(file, 1, n, f) == n, "rewrite");
    unsigned char extra = 0;
    CHECK(f && fwrite(&extra, 1, 1, f) == 1 && fclose(f) == 0, "append");
    refused(dir, "the manifest recorded", true, false);

    printf("bit flips (every byte)\n");
    f = fopen(path, "wb");
    CHECK(f && fwrite(file, 1, n, f) == n && fclose(f) == 0, "rewrite");
    int fd = open(path, O_RDWR);
    int missed = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char byte = file[i] ^ (unsigned char)(1u << (i % 8));
        CHECK(pwrite(fd, &byte, 1, (off_t)i) == 1, "pwrite");
        bool in_payload = i >= payload && i < payload_end;
        missed += !refused(dir, in_payload ? "CRC-32C mismatch" : NULL, !in_payload,
                           i != 20 && i != n / 2);
        CHECK(pwrite(fd, &file[i], 1, (off_t)i) == 1, "pwrite");
    }
    close(fd);
    CHECK(missed == 0, "%d of %zu bit flips were loaded", missed, n);
    free(file);

    printf("mismatches\n");
    State u;
    RtCkptBlob d[4];
    blobs_of(&u, d, false);
    d[2].name = "master:other";
    CHECK(load(dir, &u, d, 4, err, sizeof err) != 0 &&
              (strstr(err, "no blob 'master:other'") ||
               strstr(err, "blob 'master:odd', which the program does not expect")),
          "another name: %s", err);
    printf("  refused: %s\n", err);
    blobs_of(&u, d, false);
    d[2].bytes = d[2].flat_count = d[2].global[0] = d[2].local[0] = NB - 1;
    CHECK(load(dir, &u, d, 4, err, sizeof err) != 0 &&
              strstr(err, "blob 'master:odd' is part of a tensor of shape [7] in the checkpoint; "
                          "this program's is [6]"),
          "size mismatch: %s", err);
    printf("  refused: %s\n", err);
    blobs_of(&u, d, false);
    CHECK(load(dir, &u, d, 3, err, sizeof err) != 0 && strstr(err, "'empty', which the program"),
          "unexpected blob: %s", err);
    printf("  refused: %s\n", err);
    blobs_of(&u, d, false);
    d[1].name = d[0].name;
    RtCkptMeta m = meta(6, 1);
    RtCkptRecord rec;
    CHECK(rt_ckpt_write(dir, &m, d, 4, &rec, err, sizeof err) != 0 && strstr(err, "appears twice"),
          "duplicate names: %s", err);
    printf("  refused: %s\n", err);
    static const char junk[] = "definitely not a checkpoint, but long enough to hold a "
                               "header and a trailer.................................................";
    f = fopen(path, "wb");
    CHECK(f && fwrite(junk, 1, sizeof junk, f) == sizeof junk && fclose(f) == 0, "junk");
    refused(dir, "not a ptdc checkpoint", true, false);
    CHECK(temporaries(sd) == 0, "a temporary file was left behind");

    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "rm");
    return check_status("rt_checkpoint");
}
