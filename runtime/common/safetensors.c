/* safetensors.c: strict reading of Hugging Face safetensors files.
 *
 * File: u64 little-endian N, N bytes of JSON (an object: tensor name ->
 * {"dtype", "shape", "data_offsets"}, optional "__metadata__" of strings),
 * then the data. Refused: N beyond the file or above 100 MB, malformed JSON,
 * unknown keys or dtypes, more than 8 dims, offsets that disagree with shape
 * x dtype size, and tensors that do not tile the data exactly (no overlap,
 * no gap, nothing after). The file is mapped read-only. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "json.h"
#include "safetensors.h"

#define ST_MAX_HEADER ((uint64_t)100 << 20)

typedef struct {
    char *name;
    char dtype[8];
    int size; /* bytes per element */
    int ndim;
    int64_t shape[RT_ST_MAXDIM];
    uint64_t begin, end; /* in the data section */
} StTensor;

struct RtcStFile {
    char *path;
    unsigned char *map;
    size_t map_bytes;
    const unsigned char *data;
    uint64_t data_bytes;
    int n;
    StTensor *t;       /* sorted by name */
    int nmeta;
    char **meta_keys, **meta_vals;
    int64_t nread; /* tensor data bytes rtc_stf_read has read */
};

static const struct {
    const char *name;
    int size;
} dtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},
    {"U16", 2},  {"F16", 2}, {"BF16", 2}, {"I32", 4},    {"U32", 4},     {"F32", 4},
    {"I64", 8},  {"U64", 8}, {"F64", 8},
};

int rtc_st_dtype_size(const char *name)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, name) == 0)
            return dtypes[i].size;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const StTensor *)a)->name, ((const StTensor *)b)->name);
}

static int by_begin(const void *a, const void *b)
{
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

void rtc_stf_close(RtcStFile *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n; i++)
        free(st->t[i].name);
    for (int i = 0; i < st->nmeta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_vals[i]);
    }
    free(st->t);
    free(st->meta_keys);
    free(st->meta_vals);
    if (st->map)
        munmap(st->map, st->map_bytes);
    free(st->path);
    free(st);
}

/* Fill one tensor from its header entry. */
static int parse_tensor(RtcStFile *st, StTensor *t, const char *name, const JsonValue *v, char *err,
                        size_t errlen)
{
    const char *path = st->path;
    if (v->kind != JSON_OBJECT)
        return rtc_err(err, errlen, "%s: header entry '%s' is not an object", path, name);
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], "dtype") != 0 && strcmp(v->keys[i], "shape") != 0 &&
            strcmp(v->keys[i], "data_offsets") != 0)
            return rtc_err(err, errlen, "%s: tensor '%s' has unknown header key '%s'", path, name,
                           v->keys[i]);
    const JsonValue *dt = json_get(v, "dtype"), *sh = json_get(v, "shape");
    const JsonValue *off = json_get(v, "data_offsets");
    if (!dt || !sh || !off)
        return rtc_err(err, errlen, "%s: tensor '%s' lacks dtype, shape or data_offsets", path,
                       name);
    if (dt->kind != JSON_STRING || !(t->size = rtc_st_dtype_size(dt->text)))
        return rtc_err(err, errlen, "%s: tensor '%s' has an unknown dtype", path, name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dt->text);
    if (sh->kind != JSON_ARRAY || sh->n > RT_ST_MAXDIM)
        return rtc_err(err, errlen, "%s: tensor '%s': shape must be an array of at most %d sizes",
                       path, name, RT_ST_MAXDIM);
    t->ndim = sh->n;
    uint64_t numel = 1;
    bool overflow = false;
    for (int i = 0; i < sh->n; i++) {
        if (json_uint(&sh->items[i], &t->shape[i]) != 0)
            return rtc_err(err, errlen, "%s: tensor '%s': shape entries must be integers >= 0",
                           path, name);
        if (t->shape[i] && numel > UINT64_MAX / 16 / (uint64_t)t->shape[i])
            overflow = true;
        numel *= (uint64_t)t->shape[i];
    }
    int64_t b, e;
    if (off->kind != JSON_ARRAY || off->n != 2 || json_uint(&off->items[0], &b) != 0 ||
        json_uint(&off->items[1], &e) != 0)
        return rtc_err(err, errlen,
                       "%s: tensor '%s': data_offsets must be two integers [begin, end]", path,
                       name);
    if (overflow || e < b || (uint64_t)(e - b) != numel * (uint64_t)t->size)
        return rtc_err(err, errlen,
                       "%s: tensor '%s': data_offsets [%lld, %lld] do not hold its shape of %s "
                       "elements",
                       path, name, (long long)b, (long long)e, t->dtype);
    if ((uint64_t)e > st->data_bytes)
        return rtc_err(err, errlen,
                       "%s: tensor '%s': data_offsets end %lld beyond the %llu data bytes (file "
                       "truncated?)",
                       path, name, (long long)e, (unsigned long long)st->data_bytes);
    t->begin = (uint64_t)b;
    t->end = (uint64_t)e;
    return 0;
}

static int parse_header(RtcStFile *st, const JsonValue *root, char *err, size_t errlen)
{
    const char *path = st->path;
    if (root->kind != JSON_OBJECT)
        return rtc_err(err, errlen, "%s: safetensors header is not a JSON object", path);
    st->t = rtc_xcalloc((size_t)root->n, sizeof *st->t);
    for (int i = 0; i < root->n; i++) {
        const char *key = root->keys[i];
        if (strlen(key) != root->key_lens[i])
            return rtc_err(err, errlen, "%s: a header key contains a NUL character", path);
        if (strcmp(key, "__metadata__") == 0) {
            const JsonValue *m = &root->items[i];
            if (m->kind != JSON_OBJECT)
                return rtc_err(err, errlen, "%s: __metadata__ is not an object", path);
            st->meta_keys = rtc_xcalloc((size_t)m->n, sizeof(char *));
            st->meta_vals = rtc_xcalloc((size_t)m->n, sizeof(char *));
            for (int j = 0; j < m->n; j++) {
                if (m->items[j].kind != JSON_STRING)
                    return rtc_err(err, errlen, "%s: __metadata__ value of '%s' is not a string",
                                   path, m->keys[j]);
                st->meta_keys[j] = rtc_xstrdup(m->keys[j]);
                st->meta_vals[j] = rtc_xstrdup(m->items[j].text);
                st->nmeta++;
            }
            continue;
        }
        StTensor *t = &st->t[st->n];
        t->name = rtc_xstrdup(key);
        st->n++;
        if (parse_tensor(st, t, key, &root->items[i], err, errlen) != 0)
            return -1;
    }
    /* The tensors must tile the data section exactly. */
    StTensor **order = rtc_xcalloc((size_t)st->n, sizeof *order);
    for (int i = 0; i < st->n; i++)
        order[i] = &st->t[i];
    qsort(order, (size_t)st->n, sizeof *order, by_begin);
    uint64_t pos = 0;
    int rc = 0;
    for (int i = 0; i < st->n && rc == 0; i++) {
        if (order[i]->begin != pos)
            rc = rtc_err(err, errlen,
                         "%s: tensor '%s' starts at data byte %llu but the previous tensor ends "
                         "at %llu (overlap or gap)",
                         path, order[i]->name, (unsigned long long)order[i]->begin,
                         (unsigned long long)pos);
        pos = order[i]->end;
    }
    free(order);
    if (rc == 0 && pos != st->data_bytes)
        rc = rtc_err(err, errlen, "%s: tensors cover %llu data bytes but the file holds %llu",
                     path, (unsigned long long)pos, (unsigned long long)st->data_bytes);
    qsort(st->t, (size_t)st->n, sizeof *st->t, by_name);
    return rc;
}

RtcStFile *rtc_stf_open(const char *path, char *err, size_t errlen)
{
    RtcStFile *st = rtc_xcalloc(1, sizeof *st);
    st->path = rtc_xstrdup(path);
    struct stat sb;
    int fd = rtc_open_regular(path, "safetensors file", &sb, err, errlen);
    if (fd < 0) {
        rtc_stf_close(st);
        return NULL;
    }
    int rc = 0;
    if (sb.st_size < 8)
        rc = rtc_err(err, errlen, "%s: %lld bytes: too short for a safetensors file", path,
                     (long long)sb.st_size);
    if (rc == 0) {
        st->map_bytes = (size_t)sb.st_size;
        void *m = mmap(NULL, st->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            rc = rtc_err(err, errlen, "%s: cannot map: %s", path, strerror(errno));
        else
            st->map = m;
    }
    close(fd);
    if (rc != 0) {
        rtc_stf_close(st);
        return NULL;
    }
    uint64_t hlen = rtc_get_u64(st->map);
    if (hlen > st->map_bytes - 8 || hlen > ST_MAX_HEADER) {
        rtc_err(err, errlen,
                "%s: header length %llu exceeds the file (%zu bytes) or the 100 MB limit: not a "
                "safetensors file, or truncated",
                path, (unsigned long long)hlen, st->map_bytes);
        rtc_stf_close(st);
        return NULL;
    }
    if (hlen == 0 || st->map[8] != '{') {
        rtc_err(err, errlen, "%s: safetensors header does not start with '{'", path);
        rtc_stf_close(st);
        return NULL;
    }
    st->data = st->map + 8 + hlen;
    st->data_bytes = st->map_bytes - 8 - hlen;
    char jerr[256];
    JsonValue *root =
        json_parse_limited((const char *)st->map + 8, (size_t)hlen, ST_MAX_ARRAY, jerr, sizeof jerr);
    if (!root) {
        rtc_err(err, errlen, "%s: malformed safetensors header: JSON error %s", path, jerr);
        rtc_stf_close(st);
        return NULL;
    }
    rc = parse_header(st, root, err, errlen);
    json_free(root);
    if (rc != 0) {
        rtc_stf_close(st);
        return NULL;
    }
    return st;
}

int rtc_stf_count(const RtcStFile *st)
{
    return st->n;
}

const char *rtc_stf_name(const RtcStFile *st, int i)
{
    return i >= 0 && i < st->n ? st->t[i].name : NULL;
}

static const StTensor *lookup(const RtcStFile *st, const char *name)
{
    StTensor key = {.name = (char *)name};
    return bsearch(&key, st->t, (size_t)st->n, sizeof *st->t, by_name);
}

int rtc_stf_find(const RtcStFile *st, const char *name, int *ndim, int64_t *shape, const char **dtype)
{
    const StTensor *t = lookup(st, name);
    if (!t)
        return -1;
    if (ndim)
        *ndim = t->ndim;
    if (shape)
        memcpy(shape, t->shape, sizeof t->shape);
    if (dtype)
        *dtype = t->dtype;
    return (int)(t - st->t);
}

const char *rtc_stf_path(const RtcStFile *st)
{
    return st->path;
}

const char *rtc_stf_metadata(const RtcStFile *st, const char *key)
{
    for (int i = 0; i < st->nmeta; i++)
        if (strcmp(st->meta_keys[i], key) == 0)
            return st->meta_vals[i];
    return NULL;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

int rtc_st_map(const char *path, const char *name, int file_ndim, const int64_t *file_shape,
               bool transposed, int part, int nparts, int rank, const int64_t *global,
               const int64_t *offset, const int64_t *local, RtcStBlock *blk, char *err,
               size_t errlen)
{
    char what[512];
    snprintf(what, sizeof what, "%s: tensor '%s'", path, name);
    if (rtc_check_block(rank, global, offset, local, what, err, errlen) != 0)
        return -1;
    bool interleaved = nparts < 0; /* RT_ST_INTERLEAVED(n) */
    if (interleaved)
        nparts = -nparts;
    if (nparts < 1 || part < 0 || part >= nparts || (nparts > 1 && rank == 0))
        return rtc_err(err, errlen, "%s: invalid part %d of %d", what, part, nparts);
    if (transposed && rank != 2)
        return rtc_err(err, errlen, "%s: only 2-D parameters can be transposed (rank %d)", what,
                       rank);
    /* The file tensor's expected shape, and the block in file coordinates. */
    blk->ndim = rank;
    for (int i = 0; i < rank; i++) {
        int s = transposed ? 1 - i : i;
        blk->shape[i] = global[s];
        blk->offset[i] = offset[s];
        blk->local[i] = local[s];
    }
    blk->stride = interleaved ? nparts : 1;
    blk->phase = interleaved ? part : 0;
    if (rank > 0) {
        if (!interleaved)
            blk->offset[rank - 1] += (int64_t)part * blk->shape[rank - 1];
        blk->shape[rank - 1] *= nparts;
    }
    bool same = file_ndim == rank;
    for (int i = 0; same && i < rank; i++)
        same = file_shape[i] == blk->shape[i];
    if (!same) {
        char have[256], want[256];
        shape_str(have, sizeof have, file_ndim, file_shape);
        shape_str(want, sizeof want, rank, blk->shape);
        return rtc_err(err, errlen, "%s has shape %s; the model expects %s", what, have, want);
    }
    blk->transposed = transposed;
    return 0;
}

int64_t rtc_stf_bytes_read(const RtcStFile *st)
{
    return st->nread;
}

int rtc_stf_read(RtcStFile *st, const char *name, bool transposed, int part, int nparts, int rank,
               const int64_t *global, const int64_t *offset, const int64_t *local, float *dst,
               char *err, size_t errlen)
{
    const StTensor *t = lookup(st, name);
    if (!t)
        return rtc_err(err, errlen, "%s: no tensor '%s'", st->path, name);
    int kind = strcmp(t->dtype, "F32") == 0 ? 0 : strcmp(t->dtype, "BF16") == 0 ? 1
                                              : strcmp(t->dtype, "F16") == 0    ? 2
                                                                                : -1;
    if (kind < 0)
        return rtc_err(err, errlen, "%s: tensor '%s' has dtype %s; only F32, BF16 and F16 are "
                       "read as fp32", st->path, name, t->dtype);
    RtcStBlock blk;
    if (rtc_st_map(st->path, name, t->ndim, t->shape, transposed, part, nparts, rank, global,
                   offset, local, &blk, err, errlen) != 0)
        return -1;
    const unsigned char *base = st->data + t->begin;
    int64_t n = rtc_numel(rank, local);
    st->nread += n * (int64_t)t->size; /* each element of the block once */
    int64_t idx[RT_ST_MAXDIM] = {0};
    /* Walk the block in parameter order; fi is the file element index. */
    for (int64_t k = 0; k < n; k++) {
        int64_t fi = 0;
        for (int d = 0; d < rank; d++) {
            int s = transposed ? 1 - d : d; /* param dim s is file dim d */
            fi = fi * blk.shape[d] + (d == rank - 1 ? (blk.offset[d] + idx[s]) * blk.stride + blk.phase
                                                    : blk.offset[d] + idx[s]);
        }
        const unsigned char *p = base + (size_t)fi * (size_t)t->size;
        if (kind == 0) {
            uint32_t u = rtc_get_u32(p);
            memcpy(&dst[k], &u, sizeof u);
        } else {
            uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
            dst[k] = kind == 1 ? rtc_bf16_to_f32(h) : rtc_f16_to_f32(h);
        }
        for (int d = rank - 1; d >= 0; d--) {
            if (++idx[d] < local[d])
                break;
            idx[d] = 0;
        }
    }
    return 0;
}
