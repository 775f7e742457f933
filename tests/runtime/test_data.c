/* test_data.c: token sources. Good files of each format give the windows
 * of the position rule (sequence i = window i mod W, W = (n-1)/seq); bad
 * files are refused with a sentence naming the file and the problem;
 * rt_data_open turns a refusal into exit status 1. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common.h"
#include "ref.h"
#include "rt.h"

enum { NTOK = 100, VOCAB = 50, SEQ = 8 };

static int32_t tok(int64_t i)
{
    return (int32_t)((i * 7 + 3) % VOCAB);
}

/* Write an llm.c shard: 256 int32 header then `count` tokens of `width` bytes
 * (the file really holds `have` tokens). */
static void write_shard(const char *path, int32_t magic, int32_t version, int32_t count,
                        int64_t have, int width)
{
    FILE *f = fopen(path, "wb");
    unsigned char h[1024] = {0};
    rtc_put_u32(h, (uint32_t)magic);
    rtc_put_u32(h + 4, (uint32_t)version);
    rtc_put_u32(h + 8, (uint32_t)count);
    fwrite(h, 1, sizeof h, f);
    for (int64_t i = 0; i < have; i++) {
        unsigned char b[4];
        rtc_put_u32(b, (uint32_t)tok(i));
        fwrite(b, 1, (size_t)width, f);
    }
    fclose(f);
}

static void write_raw(const char *path, int64_t n, int width, int64_t bad_at, uint32_t bad)
{
    FILE *f = fopen(path, "wb");
    for (int64_t i = 0; i < n; i++) {
        unsigned char b[4];
        rtc_put_u32(b, i == bad_at ? bad : (uint32_t)tok(i));
        fwrite(b, 1, (size_t)width, f);
    }
    fclose(f);
}

static void check_windows(const char *spec, int64_t ntok)
{
    char err[512] = "";
    RtData *d = rt_data_try_open(spec, VOCAB, SEQ, err, sizeof err);
    CHECK(d != NULL, "%s refused: %s", spec, err);
    if (!d)
        return;
    int64_t w = (ntok - 1) / SEQ;
    CHECK(rt_data_num_sequences(d) == w, "%s: %lld windows, want %lld", spec,
          (long long)rt_data_num_sequences(d), (long long)w);
    int32_t t[SEQ], y[SEQ];
    static const int64_t idx[] = {0, 1, 5, 11, 12, 13, 1000};
    for (size_t k = 0; k < sizeof idx / sizeof idx[0]; k++) {
        rt_data_sequence(d, idx[k], t, y);
        int64_t p = (idx[k] % w) * SEQ;
        bool ok = true;
        for (int j = 0; j < SEQ; j++)
            ok = ok && t[j] == tok(p + j) && y[j] == tok(p + j + 1);
        CHECK(ok, "%s: sequence %lld is not window %lld", spec, (long long)idx[k],
              (long long)(idx[k] % w));
    }
    rt_data_close(d);
    printf("  %-36s ok (%lld windows)\n", spec, (long long)w);
}

static void expect_refused(const char *spec, int64_t vocab, int64_t seq, const char *name,
                           const char *problem)
{
    char err[512] = "";
    RtData *d = rt_data_try_open(spec, vocab, seq, err, sizeof err);
    CHECK(d == NULL, "%s was accepted", spec);
    rt_data_close(d);
    printf("  refused: %s\n", err);
    CHECK(strstr(err, name) != NULL, "message for %s does not name it: %s", spec, err);
    CHECK(strstr(err, problem) != NULL, "message for %s lacks '%s': %s", spec, problem, err);
}

static void test_synthetic(void)
{
    char err[256];
    RtData *a = rt_data_try_open("synthetic:42", VOCAB, SEQ, err, sizeof err);
    RtData *b = rt_data_try_open("synthetic:42", VOCAB, SEQ, err, sizeof err);
    RtData *c = rt_data_try_open("synthetic:43", VOCAB, SEQ, err, sizeof err);
    CHECK(a && b && c, "synthetic refused: %s", err);
    CHECK(rt_data_num_sequences(a) == -1, "synthetic is unbounded");
    int64_t follows = 0, total = 0;
    bool same = true, differ = false, inrange = true, shifted = true;
    for (int64_t i = 0; i < 2000; i++) {
        int32_t t1[SEQ], y1[SEQ], t2[SEQ], y2[SEQ], t3[SEQ], y3[SEQ];
        /* read b backwards: a sequence does not depend on what was read before */
        rt_data_sequence(a, i, t1, y1);
        rt_data_sequence(b, 1999 - i, t2, y2);
        rt_data_sequence(b, i, t2, y2);
        rt_data_sequence(c, i, t3, y3);
        same = same && !memcmp(t1, t2, sizeof t1) && !memcmp(y1, y2, sizeof y1);
        differ = differ || memcmp(t1, t3, sizeof t1);
        for (int j = 0; j < SEQ; j++) {
            inrange = inrange && t1[j] >= 0 && t1[j] < VOCAB && y1[j] >= 0 && y1[j] < VOCAB;
            if (j + 1 < SEQ)
                shifted = shifted && y1[j] == t1[j + 1];
            follows += y1[j] == (5 * t1[j] + 3) % VOCAB;
            total++;
        }
    }
    double frac = (double)follows / (double)total;
    printf("  synthetic: next = (5 prev + 3) mod V in %.4f of positions (expect 0.755)\n", frac);
    CHECK(same, "synthetic:42 is not deterministic");
    CHECK(differ, "synthetic seeds 42 and 43 give the same data");
    CHECK(inrange, "synthetic token outside the vocabulary");
    CHECK(shifted, "targets are not the next tokens");
    /* 3/4 + 1/4 * 1/V = 0.755; sd over 16000 positions = 0.0034 */
    CHECK(frac > 0.735 && frac < 0.775, "synthetic bigram rule holds in %.4f", frac);
    rt_data_close(a);
    rt_data_close(b);
    rt_data_close(c);
}

/* spec = prefix + path (both short here) */
static void prefixed(char *spec, const char *prefix, const char *path)
{
    size_t a = strlen(prefix), b = strlen(path);
    memcpy(spec, prefix, a);
    memcpy(spec + a, path, b + 1);
}

static void open_missing(void *arg)
{
    rt_data_open((const char *)arg, VOCAB, SEQ);
}

int main(void)
{
    char dir[] = "/tmp/ptdrt-data-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char p[64][128];
    int np = 0;
#define PATH(name) (snprintf(p[np], sizeof p[np], "%s/%s", dir, name), p[np++])
    char spec[200];

    printf("good sources\n");
    const char *gpt2 = PATH("gpt2.bin");
    write_shard(gpt2, 20240520, 1, NTOK, NTOK, 2);
    check_windows(gpt2, NTOK);
    const char *llama3 = PATH("llama3.bin");
    write_shard(llama3, 20240801, 7, NTOK, NTOK, 4);
    check_windows(llama3, NTOK);
    const char *u16 = PATH("raw16.bin");
    write_raw(u16, NTOK, 2, -1, 0);
    prefixed(spec, "u16:", u16);
    check_windows(spec, NTOK);
    const char *u32 = PATH("raw32.bin");
    write_raw(u32, 97, 4, -1, 0);
    prefixed(spec, "u32:", u32);
    check_windows(spec, 97);
    const char *exact = PATH("exact.bin"); /* exactly one window: seq + 1 tokens */
    write_raw(exact, SEQ + 1, 2, -1, 0);
    prefixed(spec, "u16:", exact);
    check_windows(spec, SEQ + 1);
    test_synthetic();

    printf("bad sources\n");
    const char *missing = PATH("missing.bin");
    expect_refused(missing, VOCAB, SEQ, "missing.bin", "cannot open");
    const char *magic = PATH("magic.bin");
    write_shard(magic, 12345, 1, NTOK, NTOK, 2);
    expect_refused(magic, VOCAB, SEQ, "magic.bin", "bad magic 12345");
    const char *version = PATH("version.bin");
    write_shard(version, 20240520, 2, NTOK, NTOK, 2);
    expect_refused(version, VOCAB, SEQ, "version.bin", "version 2");
    const char *trunc = PATH("truncated.bin");
    write_shard(trunc, 20240520, 1, NTOK, NTOK - 10, 2);
    expect_refused(trunc, VOCAB, SEQ, "truncated.bin", "truncated");
    const char *trail = PATH("trailing.bin");
    write_shard(trail, 20240520, 1, NTOK - 1, NTOK, 2);
    expect_refused(trail, VOCAB, SEQ, "trailing.bin", "2 unexpected bytes");
    const char *shorth = PATH("short-header.bin");
    write_raw(shorth, 100, 2, -1, 0);
    expect_refused(shorth, VOCAB, SEQ, "short-header.bin", "too short");
    const char *big = PATH("big-token.bin");
    write_raw(big, NTOK, 2, 37, VOCAB);
    prefixed(spec, "u16:", big);
    expect_refused(spec, VOCAB, SEQ, "big-token.bin", "token 50 at position 37");
    const char *odd = PATH("odd.bin");
    write_raw(odd, 11, 1, -1, 0);
    prefixed(spec, "u16:", odd);
    expect_refused(spec, VOCAB, SEQ, "odd.bin", "not a multiple of 2");
    const char *tiny = PATH("tiny.bin");
    write_raw(tiny, SEQ, 2, -1, 0);
    prefixed(spec, "u16:", tiny);
    expect_refused(spec, VOCAB, SEQ, "tiny.bin", "fewer than one sequence");
    const char *empty = PATH("empty.bin");
    write_raw(empty, 0, 2, -1, 0);
    expect_refused(empty, VOCAB, SEQ, "empty.bin", "empty");
    expect_refused(dir, VOCAB, SEQ, dir, "not a regular file");
    expect_refused("synthetic:x1", VOCAB, SEQ, "synthetic:x1", "decimal integer");
    expect_refused("synthetic:99999999999999999999", VOCAB, SEQ, "synthetic:", "below 2^64");
    expect_refused("", VOCAB, SEQ, "data", "empty token source");

    printf("rt_data_open on a bad file\n");
    ref_expect_fatal("missing file", open_missing, (void *)missing, "missing.bin: cannot open");

    for (int i = 0; i < np; i++)
        unlink(p[i]);
    rmdir(dir);
    return check_status("rt_data");
}
