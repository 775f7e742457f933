/* fault_hostile.c: large and hostile inputs to the readers every rank runs
 * (issue 36, item 9). Each case ends in seconds with the input accepted or
 * refused by a sentence, within a memory bound:
 *   - a JSON object of 200k keys (the duplicate check compared each key
 *     with every earlier one: 64 s) parses;
 *   - a safetensors file of 200k tensors (293 s on every rank) opens, and
 *     its tensors are found;
 *   - a shard index of 200k entries over two shards opens;
 *   - a 40 MB header array (1.9 GB before it was refused) is refused at
 *     once, the resident set growing by under 64 MB;
 *   - a FIFO named model.safetensors.index.json (open() waited for a writer
 *     forever) and a directory in its place are refused by what they are.
 * The test's TIMEOUT (CMakeLists.txt) is what fails the quadratic cases. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "json.h"
#include "rt.h"

static int failures;
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static char dir[] = "/tmp/ptdc-hostile-XXXXXX";

static double now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* A growing text. */
typedef struct {
    char *s;
    size_t len, cap;
} Text;

static void put(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (t->s && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap ? 2 * t->cap + (size_t)n : 1 << 20;
        t->s = realloc(t->s, t->cap);
        if (!t->s)
            abort();
    }
}

static char *path(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_file(const char *p, const void *data, size_t n)
{
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(1);
    }
}

/* A safetensors file of n one-element F32 tensors t<first>..t<first+n-1>. */
static void write_st(const char *p, int first, int n)
{
    Text h = {0};
    put(&h, "{");
    for (int i = 0; i < n; i++)
        put(&h, "%s\"t%07d\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%d,%d]}", i ? "," : "",
            first + i, 4 * i, 4 * i + 4);
    put(&h, "}");
    while (h.len % 8)
        put(&h, " ");
    FILE *f = fopen(p, "wb");
    uint64_t hl = h.len;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(hl >> (8 * i));
    float zero[1024] = {0};
    if (!f || fwrite(le, 1, 8, f) != 8 || fwrite(h.s, 1, h.len, f) != h.len)
        exit(1);
    for (int left = n; left > 0; left -= 1024)
        if (fwrite(zero, 4, (size_t)(left < 1024 ? left : 1024), f) != (size_t)(left < 1024 ? left : 1024))
            exit(1);
    fclose(f);
    free(h.s);
}

static void many_keys(void)
{
    Text t = {0};
    put(&t, "{");
    for (int i = 0; i < 200000; i++)
        put(&t, "%s\"key%d\":%d", i ? "," : "", i, i);
    put(&t, "}");
    char err[256];
    double t0 = now();
    JsonValue *v = json_parse(t.s, t.len, err, sizeof err);
    CHECK(v && v->n == 200000, "200k keys: %s", v ? "wrong count" : err);
    printf("200k-key object: %.3f s\n", now() - t0);
    json_free(v);
    /* A duplicate far apart is still found, at its position. */
    t.s[t.len - 1] = ',';
    put(&t, "\"key7\":1}");
    v = json_parse(t.s, t.len, err, sizeof err);
    CHECK(!v && strstr(err, "duplicate key"), "a late duplicate: %s", v ? "accepted" : err);
    json_free(v);
    free(t.s);
}

static void many_tensors(void)
{
    char err[512];
    write_st(path("big.safetensors"), 0, 200000);
    double t0 = now();
    RtSt *st = rt_st_open(path("big.safetensors"), err, sizeof err);
    CHECK(st && rt_st_count(st) == 200000, "200k tensors: %s", st ? "wrong count" : err);
    if (st) {
        int ndim = 0;
        int64_t shape[RT_ST_MAXDIM];
        CHECK(rt_st_find(st, "t0123456", &ndim, shape, NULL) >= 0 && ndim == 1 && shape[0] == 1,
              "t0123456 not found");
        rt_st_close(st);
    }
    printf("200k-tensor safetensors file: %.3f s\n", now() - t0);

    /* The same tensors as two shards under an index. */
    mkdir(path("sharded"), 0777);
    write_st(path("sharded/a.safetensors"), 0, 100000);
    write_st(path("sharded/b.safetensors"), 100000, 100000);
    Text ix = {0};
    put(&ix, "{\"metadata\":{},\"weight_map\":{");
    for (int i = 0; i < 200000; i++)
        put(&ix, "%s\"t%07d\":\"%s\"", i ? "," : "", i, i < 100000 ? "a.safetensors" : "b.safetensors");
    put(&ix, "}}");
    write_file(path("sharded/model.safetensors.index.json"), ix.s, ix.len);
    free(ix.s);
    t0 = now();
    st = rt_st_open(path("sharded"), err, sizeof err);
    CHECK(st && rt_st_count(st) == 200000, "200k tensors in 2 shards: %s", st ? "wrong count" : err);
    rt_st_close(st);
    printf("200k-entry shard index: %.3f s\n", now() - t0);
}

static void long_array(void)
{
    /* A header whose shape is a 40 MB array. */
    Text h = {0};
    put(&h, "{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,4],\"shape\":[");
    for (int i = 0; i < 20 * 1000 * 1000; i++)
        put(&h, "%s", i ? ",1" : "1");
    put(&h, "]}}");
    FILE *f = fopen(path("long.safetensors"), "wb");
    uint64_t hl = h.len;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(hl >> (8 * i));
    if (!f || fwrite(le, 1, 8, f) != 8 || fwrite(h.s, 1, h.len, f) != h.len || fwrite("\0\0\0\0", 1, 4, f) != 4)
        exit(1);
    fclose(f);
    free(h.s);
    char err[512];
    long before = rss_kb();
    RtSt *st = rt_st_open(path("long.safetensors"), err, sizeof err);
    long grew = rss_kb() - before;
    CHECK(!st && strstr(err, "an array of more than 64 elements"), "40 MB shape: %s",
          st ? "accepted" : err);
    CHECK(grew < 64 * 1024, "the resident set grew by %ld kB reading a 40 MB header", grew);
    printf("40 MB header array: refused (%s), RSS +%ld kB\n", err, grew);
    rt_st_close(st);
}

static void not_files(void)
{
    char err[512];
    mkdir(path("fifo"), 0777);
    CHECK(mkfifo(path("fifo/model.safetensors.index.json"), 0666) == 0, "mkfifo: %s", strerror(errno));
    RtSt *st = rt_st_open(path("fifo/model.safetensors.index.json"), err, sizeof err);
    CHECK(!st && strstr(err, "a FIFO"), "a FIFO index: %s", st ? "accepted" : err);
    rt_st_close(st);
    st = rt_st_open(path("fifo"), err, sizeof err);
    CHECK(!st && strstr(err, "a FIFO"), "a directory with a FIFO index: %s", st ? "accepted" : err);
    rt_st_close(st);
    printf("FIFO index: %s\n", err);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    many_keys();
    many_tensors();
    long_array();
    not_files();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("fault_hostile: %d failures\n", failures);
    return failures != 0;
}
