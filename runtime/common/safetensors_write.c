/* safetensors_write.c: export fp32 parameters as one safetensors file (F32,
 * BF16 or F16; safetensors_shard.c makes the public, possibly sharded, writer).
 *
 * The header lists the declared tensors with keys sorted bytewise (the
 * `__metadata__` entry {"format":"pt"} among them, as Hugging Face loaders
 * expect), data offsets in that order, padded with spaces to a multiple of 8
 * bytes. Blocks land at their final offsets with pwrite, so parameters can be
 * put in any order and in any sharding; close writes atomically. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "safetensors.h"

typedef struct {
    char *name;
    int ndim;
    int64_t shape[RT_ST_MAXDIM];
    uint64_t begin;  /* in the data section */
    int64_t numel, written;
} WTensor;

struct RtcStFileWriter {
    RtcAtomic a;
    char *path;
    int n;
    WTensor *t; /* sorted by name */
    int kind;  /* 0 F32, 1 BF16, 2 F16 */
    int esize;
    uint64_t data_start; /* 8 + header length */
};

#define str_lit(b, lit) rtc_str_add((b), (lit), sizeof(lit) - 1)

static int wt_by_name(const void *a, const void *b)
{
    return strcmp(((const WTensor *)a)->name, ((const WTensor *)b)->name);
}

static void writer_free(RtcStFileWriter *w)
{
    for (int i = 0; i < w->n; i++)
        free(w->t[i].name);
    free(w->t);
    free(w->path);
    free(w);
}

RtcStFileWriter *rtc_stfw_open(const char *path, const RtStTensor *tensors, int n,
                               const char *dtype, char *err, size_t errlen)
{
    int kind = !dtype ? -1 : !strcmp(dtype, "F32") ? 0 : !strcmp(dtype, "BF16") ? 1
             : !strcmp(dtype, "F16") ? 2 : -1;
    if (kind < 0) {
        rtc_err(err, errlen, "%s: safetensors export dtype must be F32, BF16 or F16, not %s", path,
                dtype ? dtype : "(null)");
        return NULL;
    }
    RtcStFileWriter *w = rtc_xcalloc(1, sizeof *w);
    w->path = rtc_xstrdup(path);
    w->kind = kind;
    w->esize = kind ? 2 : 4;
    w->t = rtc_xcalloc((size_t)(n > 0 ? n : 0), sizeof *w->t);
    int rc = n < 0 ? rtc_err(err, errlen, "%s: negative tensor count", path) : 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const RtStTensor *s = &tensors[i];
        WTensor *t = &w->t[i];
        if (!s->name || !*s->name || strcmp(s->name, "__metadata__") == 0) {
            rc = rtc_err(err, errlen, "%s: tensor %d has an empty or reserved name", path, i);
            break;
        }
        t->name = rtc_xstrdup(s->name);
        w->n++;
        if (s->ndim < 0 || s->ndim > RT_ST_MAXDIM) {
            rc = rtc_err(err, errlen, "%s: tensor '%s' has %d dims (at most %d)", path, s->name,
                         s->ndim, RT_ST_MAXDIM);
            break;
        }
        t->ndim = s->ndim;
        t->numel = 1;
        for (int d = 0; d < s->ndim; d++) {
            if (s->shape[d] < 0) {
                rc = rtc_err(err, errlen, "%s: tensor '%s' has a negative size", path, s->name);
                break;
            }
            t->shape[d] = s->shape[d];
            t->numel *= s->shape[d];
        }
    }
    if (rc == 0) {
        qsort(w->t, (size_t)w->n, sizeof *w->t, wt_by_name);
        for (int i = 1; i < w->n && rc == 0; i++)
            if (strcmp(w->t[i - 1].name, w->t[i].name) == 0)
                rc = rtc_err(err, errlen, "%s: tensor name '%s' appears twice", path, w->t[i].name);
    }
    if (rc != 0) {
        writer_free(w);
        return NULL;
    }

    /* Header: keys sorted bytewise, "__metadata__" in its place among them. */
    RtcStr h = {0};
    rtc_str_add(&h, "{", 1);
    uint64_t pos = 0;
    bool meta_done = false, first = true;
    for (int i = 0; i <= w->n; i++) {
        if (!meta_done && (i == w->n || strcmp("__metadata__", w->t[i].name) < 0)) {
            rtc_str_add(&h, first ? "" : ",", first ? 0 : 1);
            str_lit(&h, "\"__metadata__\":{\"format\":\"pt\"}");
            meta_done = true;
            first = false;
        }
        if (i == w->n)
            break;
        WTensor *t = &w->t[i];
        t->begin = pos;
        rtc_str_add(&h, first ? "" : ",", first ? 0 : 1);
        first = false;
        rtc_str_json(&h, t->name);
        str_lit(&h, ":{\"dtype\":");
        rtc_str_json(&h, dtype);
        str_lit(&h, ",\"shape\":[");
        for (int d = 0; d < t->ndim; d++)
            rtc_str_fmt(&h, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        str_lit(&h, "],\"data_offsets\":[");
        rtc_str_fmt(&h, "%lld", (long long)pos);
        pos += (uint64_t)t->numel * (uint64_t)w->esize;
        rtc_str_fmt(&h, ",%lld]}", (long long)pos);
    }
    rtc_str_add(&h, "}", 1);
    while (h.len % 8)
        rtc_str_add(&h, " ", 1);
    w->data_start = 8 + h.len;

    if (rtc_atomic_open(&w->a, path, err, errlen) != 0) {
        free(h.s);
        writer_free(w);
        return NULL;
    }
    unsigned char len8[8];
    rtc_put_u64(len8, h.len);
    rc = rtc_write_all(w->a.fd, len8, 8, 0, path, err, errlen);
    if (rc == 0)
        rc = rtc_write_all(w->a.fd, h.s, h.len, 8, path, err, errlen);
    free(h.s);
    if (rc == 0 && ftruncate(w->a.fd, (off_t)(w->data_start + pos)) != 0)
        rc = rtc_err(err, errlen, "%s: cannot size the file: %s", path, strerror(errno));
    if (rc != 0) {
        rtc_atomic_abort(&w->a);
        writer_free(w);
        return NULL;
    }
    return w;
}

int rtc_stfw_put(RtcStFileWriter *w, const char *name, bool transposed, int part, int nparts,
                     int rank, const int64_t *global, const int64_t *offset, const int64_t *local,
                     const float *src, char *err, size_t errlen)
{
    WTensor key = {.name = (char *)name};
    WTensor *t = bsearch(&key, w->t, (size_t)w->n, sizeof *w->t, wt_by_name);
    if (!t)
        return rtc_err(err, errlen, "%s: tensor '%s' was not declared", w->path, name);
    RtcStBlock blk;
    if (rtc_st_map(w->path, name, t->ndim, t->shape, transposed, part, nparts, rank, global,
                   offset, local, &blk, err, errlen) != 0)
        return -1;
    int64_t n = rtc_numel(rank, local);
    if (t->written + n > t->numel)
        return rtc_err(err, errlen, "%s: tensor '%s': more elements put than it holds", w->path,
                       name);
    if (n == 0)
        return 0;
    /* Rows of the block in file order: file dims lead, last dim contiguous;
     * with interleaved parts a row's elements lie blk.stride apart, among
     * other parts' (written before or after): its span is read, patched and
     * written back (one process writes the file). */
    int last = rank - 1;
    int64_t row = rank > 0 ? blk.local[last] : 1, span = rank > 0 ? (row - 1) * blk.stride + 1 : 1;
    unsigned char *buf = rtc_xmalloc((size_t)span * (size_t)w->esize);
    int64_t idx[RT_ST_MAXDIM] = {0}; /* over the file block's leading dims */
    int rc = 0;
    for (int64_t done = 0; done < n && rc == 0; done += row) {
        int64_t fi = 0;
        for (int d = 0; d < rank; d++)
            fi = fi * blk.shape[d] + (d < last ? blk.offset[d] + idx[d] : blk.offset[d] * blk.stride + blk.phase);
        int64_t at = (int64_t)(w->data_start + t->begin + (uint64_t)fi * (uint64_t)w->esize);
        if (blk.stride > 1) { /* the span as it is (a hole reads short: zeros) */
            memset(buf, 0, (size_t)span * (size_t)w->esize);
            for (size_t got = 0, want = (size_t)span * (size_t)w->esize; got < want;) {
                ssize_t r = pread(w->a.fd, buf + got, want - got, (off_t)at + (off_t)got);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r < 0) {
                    rc = rtc_err(err, errlen, "%s: cannot read back tensor '%s': %s", w->path, name,
                                 strerror(errno));
                    break;
                }
                if (r == 0)
                    break;
                got += (size_t)r;
            }
            if (rc)
                break;
        }
        for (int64_t j = 0; j < row; j++) {
            /* transposed: file (r, j) is parameter-local (j, r) */
            float v = transposed ? src[j * local[1] + idx[0]] : src[done + j];
            int64_t e = j * blk.stride; /* the element's place in the span */
            if (w->kind) {
                uint16_t b = w->kind == 1 ? rtc_f32_to_bf16(v) : rtc_f32_to_f16(v);
                buf[2 * e] = (unsigned char)b;
                buf[2 * e + 1] = (unsigned char)(b >> 8);
            } else {
                uint32_t u;
                memcpy(&u, &v, sizeof u);
                rtc_put_u32(buf + 4 * e, u);
            }
        }
        rc = rtc_write_all(w->a.fd, buf, (size_t)span * (size_t)w->esize, at, w->path, err, errlen);
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < blk.local[d])
                break;
            idx[d] = 0;
        }
    }
    free(buf);
    if (rc == 0)
        t->written += n;
    return rc;
}

int rtc_stfw_close(RtcStFileWriter *w, char *err, size_t errlen)
{
    for (int i = 0; i < w->n; i++)
        if (w->t[i].written != w->t[i].numel) {
            rtc_err(err, errlen, "%s: tensor '%s': %lld of its %lld elements were written",
                    w->path, w->t[i].name, (long long)w->t[i].written, (long long)w->t[i].numel);
            rtc_stfw_abort(w);
            return -1;
        }
    int rc = rtc_atomic_commit(&w->a, err, errlen);
    writer_free(w);
    return rc;
}

void rtc_stfw_abort(RtcStFileWriter *w)
{
    if (!w)
        return;
    rtc_atomic_abort(&w->a);
    writer_free(w);
}
