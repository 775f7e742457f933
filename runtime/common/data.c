/* data.c: token sources for training (spec grammar and position rule in
 * rt.h and docs/runtime.md).
 *
 *   PATH          llm.c shard: 256 int32 header (magic 20240520, version 1,
 *                 token count), then uint16 tokens; also llm.c's LLaMA-3
 *                 shards (magic 20240801, version 7, uint32 tokens)
 *   u16:PATH      raw little-endian uint16 tokens
 *   u32:PATH      raw little-endian uint32 tokens
 *   synthetic:N   a deterministic, learnable stream from seed N
 *
 * Position rule (files): the n tokens form W = (n - 1) / seq consecutive,
 * non-overlapping windows; window w holds tokens [w seq, w seq + seq] (seq + 1
 * tokens: inputs and their next-token targets). Global sequence i reads
 * window i mod W, so a run wraps to the start after W sequences.
 * Files are mapped read-only and checked once at open: size, header and
 * every token < vocab. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define LLMC_MAGIC_GPT2 20240520
#define LLMC_MAGIC_LLAMA3 20240801
#define LLMC_HEADER_BYTES 1024

struct RtData {
    char *spec;
    int64_t vocab, seq;
    /* file sources */
    unsigned char *map;     /* whole file, read-only */
    size_t map_bytes;
    const unsigned char *tok; /* first token */
    int width;              /* bytes per token: 2 or 4 */
    int64_t ntok, windows;
    /* synthetic source */
    bool synthetic;
    uint64_t seed;
};

static int64_t token_at(const RtData *d, int64_t i)
{
    const unsigned char *p = d->tok + i * d->width;
    return d->width == 2 ? (int64_t)(p[0] | (p[1] << 8)) : (int64_t)rtc_get_u32(p);
}

static void data_free(RtData *d)
{
    if (d->map)
        munmap(d->map, d->map_bytes);
    free(d->spec);
    free(d);
}

/* Map the file and check its size and header. */
static int open_file(RtData *d, const char *path, int raw_width, char *err, size_t errlen)
{
    struct stat st;
    int fd = rtc_open_regular(path, "token file", &st, err, errlen);
    if (fd < 0)
        return -1;
    if (st.st_size == 0) {
        close(fd);
        return rtc_err(err, errlen, "%s: token file is empty", path);
    }
    d->map_bytes = (size_t)st.st_size;
    void *m = mmap(NULL, d->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED)
        return rtc_err(err, errlen, "%s: cannot map token file: %s", path, strerror(e));
    d->map = m;

    if (raw_width) {
        d->width = raw_width;
        if (d->map_bytes % (size_t)raw_width)
            return rtc_err(err, errlen,
                           "%s: size %zu bytes is not a multiple of %d (raw uint%d tokens)", path,
                           d->map_bytes, raw_width, raw_width * 8);
        d->tok = d->map;
        d->ntok = (int64_t)(d->map_bytes / (size_t)raw_width);
        return 0;
    }
    if (d->map_bytes < LLMC_HEADER_BYTES)
        return rtc_err(err, errlen,
                       "%s: file of %zu bytes is too short for the 1024-byte llm.c shard header "
                       "(for raw tokens use u16:%s or u32:%s)",
                       path, d->map_bytes, path, path);
    int32_t magic = (int32_t)rtc_get_u32(d->map), version = (int32_t)rtc_get_u32(d->map + 4);
    int32_t count = (int32_t)rtc_get_u32(d->map + 8);
    if (magic == LLMC_MAGIC_GPT2) {
        if (version != 1)
            return rtc_err(err, errlen,
                           "%s: llm.c shard has version %d; magic 20240520 requires version 1",
                           path, (int)version);
        d->width = 2;
    } else if (magic == LLMC_MAGIC_LLAMA3) {
        if (version != 7)
            return rtc_err(err, errlen,
                           "%s: llm.c shard has version %d; magic 20240801 requires version 7",
                           path, (int)version);
        d->width = 4;
    } else {
        return rtc_err(err, errlen,
                       "%s: bad magic %d: not an llm.c token shard (expected 20240520; for raw "
                       "tokens use u16:%s or u32:%s)",
                       path, (int)magic, path, path);
    }
    if (count < 0)
        return rtc_err(err, errlen, "%s: llm.c shard header gives a negative token count %d", path,
                       (int)count);
    size_t want = LLMC_HEADER_BYTES + (size_t)count * (size_t)d->width;
    if (d->map_bytes < want)
        return rtc_err(err, errlen,
                       "%s: truncated: the header announces %d tokens (%zu bytes) but the file "
                       "has %zu bytes",
                       path, (int)count, want, d->map_bytes);
    if (d->map_bytes > want)
        return rtc_err(err, errlen,
                       "%s: %zu unexpected bytes after the %d tokens the header announces", path,
                       d->map_bytes - want, (int)count);
    d->tok = d->map + LLMC_HEADER_BYTES;
    d->ntok = count;
    return 0;
}

static int parse_seed(const char *s, uint64_t *seed)
{
    if (!*s)
        return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned dgt = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - dgt) / 10)
            return -1;
        v = v * 10 + dgt;
    }
    *seed = v;
    return 0;
}

RtData *rt_data_try_open(const char *spec, int64_t vocab, int64_t seq, char *err, size_t errlen)
{
    if (!spec || !*spec) {
        rtc_err(err, errlen, "data: empty token source (give a file, u16:PATH, u32:PATH or "
                             "synthetic:SEED)");
        return NULL;
    }
    if (vocab < 1 || vocab > INT32_MAX || seq < 1) {
        rtc_err(err, errlen, "%s: invalid vocabulary size %lld or sequence length %lld", spec,
                (long long)vocab, (long long)seq);
        return NULL;
    }
    RtData *d = rtc_xcalloc(1, sizeof *d);
    d->spec = rtc_xstrdup(spec);
    d->vocab = vocab;
    d->seq = seq;
    if (strncmp(spec, "synthetic:", 10) == 0) {
        d->synthetic = true;
        d->windows = -1;
        if (parse_seed(spec + 10, &d->seed) == 0)
            return d;
        rtc_err(err, errlen, "%s: the seed must be a decimal integer below 2^64", spec);
        data_free(d);
        return NULL;
    }
    const char *path = spec;
    int raw = 0;
    if (strncmp(spec, "u16:", 4) == 0)
        path = spec + 4, raw = 2;
    else if (strncmp(spec, "u32:", 4) == 0)
        path = spec + 4, raw = 4;
    if (open_file(d, path, raw, err, errlen) != 0) {
        data_free(d);
        return NULL;
    }
    if (d->ntok < seq + 1) {
        rtc_err(err, errlen,
                "%s: holds %lld tokens, fewer than one sequence of %lld plus its next-token "
                "target",
                path, (long long)d->ntok, (long long)seq);
        data_free(d);
        return NULL;
    }
    for (int64_t i = 0; i < d->ntok; i++) {
        int64_t t = token_at(d, i);
        if (t >= vocab) {
            rtc_err(err, errlen,
                    "%s: token %lld at position %lld is outside the vocabulary of %lld", path,
                    (long long)t, (long long)i, (long long)vocab);
            data_free(d);
            return NULL;
        }
    }
    d->windows = (d->ntok - 1) / seq;
    return d;
}

RtData *rt_data_open(const char *spec, int64_t vocab, int64_t seq)
{
    char err[1024];
    RtData *d = rt_data_try_open(spec, vocab, seq, err, sizeof err);
    if (!d)
        rt_fatal("%s", err);
    return d;
}

void rt_data_close(RtData *d)
{
    if (d)
        data_free(d);
}

int64_t rt_data_num_sequences(const RtData *d)
{
    return d->windows;
}

/* Synthetic sequence i: t0 uniform; then t[j] = (5 t[j-1] + 3) mod vocab with
 * probability 3/4, else uniform. Random words come from Philox keyed by the
 * seed with counter (i, j), so sequence i does not depend on any other. */
static uint64_t synth_word(uint64_t seed, int64_t i, int64_t j)
{
    uint32_t ctr[4] = {(uint32_t)i, (uint32_t)((uint64_t)i >> 32), (uint32_t)j,
                       (uint32_t)((uint64_t)j >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t w[4];
    rtc_philox4x32_10(ctr, key, w);
    return ((uint64_t)w[0] << 32) | w[1];
}

void rt_data_sequence(RtData *d, int64_t index, int32_t *tokens, int32_t *targets)
{
    if (index < 0)
        rt_fatal("%s: negative sequence index %lld", d->spec, (long long)index);
    int64_t seq = d->seq;
    if (d->synthetic) {
        uint64_t v = (uint64_t)d->vocab;
        int64_t prev = (int64_t)(synth_word(d->seed, index, 0) % v);
        for (int64_t j = 0; j < seq; j++) {
            uint64_t r = synth_word(d->seed, index, j + 1);
            int64_t next = (r & 3) ? (int64_t)((5 * (uint64_t)prev + 3) % v) : (int64_t)((r >> 2) % v);
            tokens[j] = (int32_t)prev;
            targets[j] = (int32_t)next;
            prev = next;
        }
        return;
    }
    int64_t p = (index % d->windows) * seq;
    for (int64_t j = 0; j < seq; j++) {
        tokens[j] = (int32_t)token_at(d, p + j);
        targets[j] = (int32_t)token_at(d, p + j + 1);
    }
}
