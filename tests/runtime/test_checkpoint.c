/* test_checkpoint.c: CRC-32C check value; save/load round trip (blobs in
 * another order, odd and empty sizes, step and data position); atomic
 * replacement leaves no temporary; every truncation length and a bit flip
 * in every byte are refused and leave the destination untouched; name and
 * size mismatches are refused naming the blob. */
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

/* Unlink first: ext4 flushes a file truncated and rewritten in place on
 * close (auto_da_alloc), which would make thousands of rewrites slow. */
static void spit(const char *path, const unsigned char *b, size_t n)
{
    unlink(path);
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

static int temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

enum { NW = 300, NB = 7 };

typedef struct {
    float w[NW], m[NW];
    unsigned char b[NB];
    char empty[1];
} State;

static void blobs_of(State *s, RtBlob *out, bool reversed)
{
    RtBlob b[4] = {{"param:layers.0.wq", s->w, sizeof s->w},
                   {"adam_m:layers.0.wq", s->m, sizeof s->m},
                   {"param:odd", s->b, NB},
                   {"empty", s->empty, 0}};
    for (int i = 0; i < 4; i++)
        out[i] = b[reversed ? 3 - i : i];
}

/* Load must fail with `expect` in the message and leave s untouched. */
static bool refused(const char *path, const char *expect, bool quiet)
{
    State s;
    memset(&s, 0xA5, sizeof s);
    State keep = s;
    RtBlob b[4];
    blobs_of(&s, b, false);
    char err[512] = "";
    int64_t step = -1, pos = -1;
    int rc = rt_ckpt_load(path, b, 4, &step, &pos, err, sizeof err);
    if (!quiet)
        printf("  refused: %s\n", err);
    bool ok = rc != 0 && memcmp(&s, &keep, sizeof s) == 0 && step == -1 &&
              strstr(err, path) != NULL && (!expect || strstr(err, expect) != NULL);
    CHECK(ok, "load of %s: rc %d, message '%s' (want '%s'), destination %s", path, rc, err,
          expect ? expect : "", memcmp(&s, &keep, sizeof s) ? "modified" : "intact");
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
    char path[128], bad[128];
    snprintf(path, sizeof path, "%s/rank00000.ckpt", dir);
    snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);

    printf("round trip\n");
    State s;
    ref_seed(5);
    ref_fill(s.w, NULL, NW, -1, 1);
    ref_fill(s.m, NULL, NW, -1, 1);
    for (int i = 0; i < NB; i++)
        s.b[i] = (unsigned char)(200 + i);
    RtBlob b[4];
    blobs_of(&s, b, false);
    char err[512] = "";
    CHECK(rt_ckpt_save(path, b, 4, 41, 999, err, sizeof err) == 0, "save: %s", err);
    /* saving again replaces the file atomically, with new contents */
    CHECK(rt_ckpt_save(path, b, 4, 42, 1234, err, sizeof err) == 0, "second save: %s", err);
    CHECK(temporaries(dir) == 0, "a temporary file was left behind");
    State t;
    memset(&t, 0, sizeof t);
    RtBlob c[4];
    blobs_of(&t, c, true);
    int64_t step = 0, pos = 0;
    CHECK(rt_ckpt_load(path, c, 4, &step, &pos, err, sizeof err) == 0, "load: %s", err);
    CHECK(memcmp(s.w, t.w, sizeof s.w) == 0 && memcmp(s.m, t.m, sizeof s.m) == 0 &&
              memcmp(s.b, t.b, NB) == 0,
          "loaded blobs differ");
    CHECK(step == 42 && pos == 1234, "step %lld, data position %lld", (long long)step,
          (long long)pos);

    size_t n = 0;
    unsigned char *file = slurp(path, &n);
    if (!file || n == 0) {
        CHECK(0, "cannot read back %s", path);
        return check_status("rt_checkpoint");
    }
    printf("  %zu bytes\n", n);

    /* One file modified in place: creating thousands of files is slow on a
     * busy disk, shrinking and patching one is not. */
    printf("truncation (every length)\n");
    spit(bad, file, n);
    int bad_trunc = 0;
    for (size_t len = n; len-- > 0;) {
        CHECK(truncate(bad, (off_t)len) == 0, "truncate");
        bad_trunc += !refused(bad, "truncated", len != 0 && len != n - 1);
    }
    CHECK(bad_trunc == 0, "%d truncations not refused as truncated", bad_trunc);
    spit(bad, file, n);
    unsigned char extra = 0;
    FILE *f = fopen(bad, "ab");
    fwrite(&extra, 1, 1, f);
    fclose(f);
    refused(bad, "corrupted", false);

    printf("bit flips (every byte)\n");
    spit(bad, file, n);
    int fd = open(bad, O_RDWR);
    int missed = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char byte = file[i] ^ (unsigned char)(1u << (i % 8));
        CHECK(pwrite(fd, &byte, 1, (off_t)i) == 1, "pwrite");
        missed += !refused(bad, NULL, i != 20 && i != n / 2);
        CHECK(pwrite(fd, &file[i], 1, (off_t)i) == 1, "pwrite");
    }
    close(fd);
    CHECK(missed == 0, "%d of %zu bit flips were loaded", missed, n);
    file[n / 2] ^= 1; /* a payload flip reaches the checksum */
    spit(bad, file, n);
    file[n / 2] ^= 1;
    refused(bad, "CRC-32C mismatch", false);
    free(file);

    printf("mismatches\n");
    State u;
    RtBlob d[4];
    blobs_of(&u, d, false);
    d[2].name = "param:other";
    CHECK(rt_ckpt_load(path, d, 4, &step, &pos, err, sizeof err) != 0 &&
              strstr(err, "no blob 'param:other'"),
          "missing blob: %s", err);
    printf("  refused: %s\n", err);
    blobs_of(&u, d, false);
    d[2].bytes = NB - 1;
    CHECK(rt_ckpt_load(path, d, 4, &step, &pos, err, sizeof err) != 0 &&
              strstr(err, "'param:odd' holds 7 bytes, the program expects 6"),
          "size mismatch: %s", err);
    printf("  refused: %s\n", err);
    blobs_of(&u, d, false);
    CHECK(rt_ckpt_load(path, d, 3, &step, &pos, err, sizeof err) != 0 &&
              strstr(err, "'empty' the program does not expect"),
          "unexpected blob: %s", err);
    printf("  refused: %s\n", err);
    blobs_of(&u, d, false);
    d[1].name = d[0].name;
    CHECK(rt_ckpt_save(path, d, 4, 1, 1, err, sizeof err) != 0 && strstr(err, "appears twice"),
          "duplicate names: %s", err);
    printf("  refused: %s\n", err);
    static const char junk[] = "definitely not a checkpoint, but long enough to hold a "
                               "header and a trailer.......";
    spit(bad, (const unsigned char *)junk, strlen(junk));
    refused(bad, "not a ptdc checkpoint", false);
    char nodir[160];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir.ckpt", dir);
    blobs_of(&s, b, false);
    CHECK(rt_ckpt_save(nodir, b, 4, 1, 1, err, sizeof err) != 0 && strstr(err, nodir),
          "save into a missing directory: %s", err);
    printf("  refused: %s\n", err);
    CHECK(rt_ckpt_load(nodir, b, 4, &step, &pos, err, sizeof err) != 0 &&
              strstr(err, "cannot open checkpoint"),
          "load of a missing file: %s", err);
    CHECK(temporaries(dir) == 0, "a temporary file was left behind");

    unlink(path);
    unlink(bad);
    rmdir(dir);
    return check_status("rt_checkpoint");
}
