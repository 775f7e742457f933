/* ckpt_file.c: one rank's file of a version-2 checkpoint (rt.h).
 *
 * Layout (all integers little-endian):
 *   header, 96 bytes:
 *     0  magic "PTDCKPT\0"        8  u32 version (2)      12 u32 blob count
 *     16 i64 step                 24 i64 data position
 *     32 u64 index bytes          40 u64 payload bytes    48 u64 file bytes
 *     56 u32 rank                 60 u32 world size       64 run id (16 bytes)
 *     80 u32 plan hash length     84 u32 zero             88 u64 zero
 *   index (its bytes: the plan hash, then per blob)
 *     plan hash
 *     per blob: u32 name length, u32 dtype, u32 ndim, u32 zero, u64 payload
 *               offset, u64 bytes, i64 flat start, i64 flat count,
 *               ndim x (i64 global, i64 offset, i64 local), name
 *   payload: the blobs back to back, in index order
 *   trailer, 8 bytes: u32 CRC-32C of everything before it, "CEND"
 * The file says whose it is (rank, world, run, step, plan) so a loader can
 * refuse one that was swapped, copied or mixed in, and what each blob is (a
 * block of a tensor of a global shape) so shapes, not only sizes, are
 * checked and a later loader can reshard. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define CK_MAGIC "PTDCKPT" /* 8 bytes with the terminating NUL */
#define CK_VERSION 2
#define CK_ENTRY_FIXED 48

size_t rtc_dtype_size(RtDtype t)
{
    switch (t) {
    case RT_DT_F32:
    case RT_DT_I32:
        return 4;
    case RT_DT_BF16:
    case RT_DT_F16:
        return 2;
    case RT_DT_U8:
        return 1;
    }
    return 0;
}

static const char *const dtype_names[] = {NULL, "F32", "BF16", "F16", "I32", "U8"};

const char *rtc_dtype_name(RtDtype t)
{
    return rtc_dtype_size(t) ? dtype_names[t] : "?";
}

RtDtype rtc_dtype_parse(const char *s)
{
    for (int i = 1; i <= (int)RT_DT_U8; i++)
        if (strcmp(s, dtype_names[i]) == 0)
            return (RtDtype)i;
    return (RtDtype)0;
}

const char *rtc_shape_str(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
    return buf;
}

/* Elements of a block, or -1 when the product overflows int64. */
static int64_t numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(n, shape[i], &n))
            return -1;
    return n;
}

/* The shape, block and flat range of one blob are consistent. */
static int check_entry(const char *path, const char *name, RtDtype dtype, int ndim,
                       const int64_t *global, const int64_t *offset, const int64_t *local,
                       int64_t flat_start, int64_t flat_count, int64_t bytes, char *err,
                       size_t errlen)
{
    size_t es = rtc_dtype_size(dtype);
    if (!es)
        return rtc_err(err, errlen, "%s: blob '%s' has an unknown dtype %d", path, name,
                       (int)dtype);
    if (ndim < 0 || ndim > RT_CKPT_MAXDIM)
        return rtc_err(err, errlen, "%s: blob '%s' has %d dims (at most %d)", path, name, ndim,
                       RT_CKPT_MAXDIM);
    char what[4200];
    snprintf(what, sizeof what, "%s: blob '%s'", path, name);
    if (rtc_check_block(ndim, global, offset, local, what, err, errlen) != 0)
        return -1;
    int64_t n = numel(ndim, local);
    if (n < 0 || numel(ndim, global) < 0)
        return rtc_err(err, errlen, "%s: blob '%s': its shape overflows 64 bits", path, name);
    if (flat_start < 0 || flat_count < 0 || flat_start > n || flat_count > n - flat_start)
        return rtc_err(err, errlen,
                       "%s: blob '%s' holds elements [%lld, +%lld) of a block of %lld", path,
                       name, (long long)flat_start, (long long)flat_count, (long long)n);
    if (bytes < 0 || bytes % (int64_t)es || bytes / (int64_t)es < flat_count)
        return rtc_err(err, errlen,
                       "%s: blob '%s' has %lld bytes: not a whole number of %s elements, or "
                       "fewer than its %lld",
                       path, name, (long long)bytes, rtc_dtype_name(dtype),
                       (long long)flat_count);
    return 0;
}

int rtc_ck_check_meta(const char *path, const RtCkptMeta *m, char *err, size_t errlen)
{
    static const uint8_t zero[RT_RUN_ID_BYTES];
    if (!m->plan_hash || strlen(m->plan_hash) > RT_PLAN_HASH_MAX)
        return rtc_err(err, errlen, "%s: the plan hash is missing or longer than %d bytes", path,
                       RT_PLAN_HASH_MAX);
    if (m->step < 0 || m->data_pos < 0)
        return rtc_err(err, errlen, "%s: negative step %lld or data position %lld", path,
                       (long long)m->step, (long long)m->data_pos);
    if (m->world < 1 || m->rank < 0 || m->rank >= m->world)
        return rtc_err(err, errlen, "%s: rank %d of a world of %d", path, m->rank, m->world);
    if (memcmp(m->run_id, zero, sizeof zero) == 0)
        return rtc_err(err, errlen, "%s: no run id (make one with rt_run_id_new)", path);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const RtCkptBlob *const *)a)->name, (*(const RtCkptBlob *const *)b)->name);
}

int rtc_ck_check_blobs(const char *path, const RtCkptBlob *b, int n, char *err, size_t errlen)
{
    if (n < 0)
        return rtc_err(err, errlen, "%s: negative blob count %d", path, n);
    for (int i = 0; i < n; i++) {
        const char *nm = b[i].name;
        if (!nm || !*nm || strlen(nm) > RTC_CK_MAX_NAME)
            return rtc_err(err, errlen, "%s: blob %d has an empty or over-long name", path, i);
        if (b[i].bytes > 0 && !b[i].data)
            return rtc_err(err, errlen, "%s: blob '%s' has no data", path, nm);
        if (check_entry(path, nm, b[i].dtype, b[i].ndim, b[i].global, b[i].offset, b[i].local,
                        b[i].flat_start, b[i].flat_count, b[i].bytes, err, errlen) != 0)
            return -1;
    }
    /* Unique names, in n log n: a model has thousands of blobs. */
    const RtCkptBlob **s = rtc_xcalloc((size_t)n, sizeof *s);
    for (int i = 0; i < n; i++)
        s[i] = &b[i];
    qsort(s, (size_t)n, sizeof *s, by_name);
    int rc = 0;
    for (int i = 1; i < n && rc == 0; i++)
        if (strcmp(s[i - 1]->name, s[i]->name) == 0)
            rc = rtc_err(err, errlen, "%s: blob name '%s' appears twice", path, s[i]->name);
    free(s);
    return rc;
}

int rtc_ck_write_file(const char *path, const RtCkptMeta *m, const RtCkptBlob *b, int n,
                      bool host, uint32_t *crc_out, uint64_t *bytes_out, char *err, size_t errlen)
{
    if (rtc_ck_check_meta(path, m, err, errlen) != 0 ||
        rtc_ck_check_blobs(path, b, n, err, errlen) != 0)
        return -1;
    size_t hash_len = strlen(m->plan_hash);
    uint64_t index_bytes = hash_len, payload = 0;
    for (int i = 0; i < n; i++) {
        index_bytes += CK_ENTRY_FIXED + 24 * (uint64_t)b[i].ndim + strlen(b[i].name);
        payload += (uint64_t)b[i].bytes;
    }
    uint64_t total = RTC_CK_HEADER + index_bytes + payload + RTC_CK_TRAILER;

    unsigned char *head = rtc_xcalloc(1, RTC_CK_HEADER + index_bytes);
    memcpy(head, CK_MAGIC, 8);
    rtc_put_u32(head + 8, CK_VERSION);
    rtc_put_u32(head + 12, (uint32_t)n);
    rtc_put_u64(head + 16, (uint64_t)m->step);
    rtc_put_u64(head + 24, (uint64_t)m->data_pos);
    rtc_put_u64(head + 32, index_bytes);
    rtc_put_u64(head + 40, payload);
    rtc_put_u64(head + 48, total);
    rtc_put_u32(head + 56, (uint32_t)m->rank);
    rtc_put_u32(head + 60, (uint32_t)m->world);
    memcpy(head + 64, m->run_id, RT_RUN_ID_BYTES);
    rtc_put_u32(head + 80, (uint32_t)hash_len);
    unsigned char *q = head + RTC_CK_HEADER;
    memcpy(q, m->plan_hash, hash_len);
    q += hash_len;
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint32_t len = (uint32_t)strlen(b[i].name);
        rtc_put_u32(q, len);
        rtc_put_u32(q + 4, (uint32_t)b[i].dtype);
        rtc_put_u32(q + 8, (uint32_t)b[i].ndim);
        rtc_put_u64(q + 16, off);
        rtc_put_u64(q + 24, (uint64_t)b[i].bytes);
        rtc_put_u64(q + 32, (uint64_t)b[i].flat_start);
        rtc_put_u64(q + 40, (uint64_t)b[i].flat_count);
        q += CK_ENTRY_FIXED;
        for (int d = 0; d < b[i].ndim; d++, q += 24) {
            rtc_put_u64(q, (uint64_t)b[i].global[d]);
            rtc_put_u64(q + 8, (uint64_t)b[i].offset[d]);
            rtc_put_u64(q + 16, (uint64_t)b[i].local[d]);
        }
        memcpy(q, b[i].name, len);
        q += len;
        off += (uint64_t)b[i].bytes;
    }

    RtcAtomic a;
    if (rtc_atomic_open(&a, path, err, errlen) != 0) {
        free(head);
        return -1;
    }
    uint32_t crc = rtc_crc32c(0, head, RTC_CK_HEADER + index_bytes);
    int rc = rtc_write_all(a.fd, head, RTC_CK_HEADER + index_bytes, -1, path, err, errlen);
    free(head);
    /* Backend memory comes through a host stage in pieces; host memory is
     * written in pieces of the same size straight from where it is. */
    size_t stage_bytes = payload < RTC_CK_STAGE ? (size_t)(payload ? payload : 1) : RTC_CK_STAGE;
    unsigned char *stage = rc == 0 && !host ? rtc_xmalloc(stage_bytes) : NULL;
    for (int i = 0; i < n && rc == 0; i++) {
        const char *src = b[i].data;
        for (int64_t done = 0; done < b[i].bytes && rc == 0;) {
            size_t k = (size_t)(b[i].bytes - done) < stage_bytes ? (size_t)(b[i].bytes - done)
                                                                 : stage_bytes;
            const unsigned char *piece = (const unsigned char *)src + done;
            if (!host) {
                rt_to_host(stage, piece, k);
                piece = stage;
            }
            crc = rtc_crc32c(crc, piece, k);
            rc = rtc_write_all(a.fd, piece, k, -1, path, err, errlen);
            done += (int64_t)k;
        }
    }
    free(stage);
    if (rc == 0) {
        unsigned char trailer[RTC_CK_TRAILER];
        rtc_put_u32(trailer, crc);
        memcpy(trailer + 4, "CEND", 4);
        rc = rtc_write_all(a.fd, trailer, RTC_CK_TRAILER, -1, path, err, errlen);
    }
    if (rc != 0) {
        rtc_atomic_abort(&a);
        return -1;
    }
    if (rtc_atomic_commit(&a, err, errlen) != 0)
        return -1;
    *crc_out = crc;
    *bytes_out = total;
    return 0;
}

int rtc_ck_decode_header(const unsigned char *h, const char *path, RtcCkHeader *o, char *err,
                         size_t errlen)
{
    if (memcmp(h, CK_MAGIC, 8) != 0)
        return rtc_err(err, errlen, "%s: not a ptdc checkpoint file (bad magic)", path);
    o->version = rtc_get_u32(h + 8);
    if (o->version != CK_VERSION)
        return rtc_err(err, errlen,
                       "%s: a version %u checkpoint file; this runtime reads version %d "
                       "(written by another ptdc?)",
                       path, o->version, CK_VERSION);
    o->count = rtc_get_u32(h + 12);
    o->step = (int64_t)rtc_get_u64(h + 16);
    o->data_pos = (int64_t)rtc_get_u64(h + 24);
    o->index_bytes = rtc_get_u64(h + 32);
    o->payload_bytes = rtc_get_u64(h + 40);
    o->file_bytes = rtc_get_u64(h + 48);
    o->rank = rtc_get_u32(h + 56);
    o->world = rtc_get_u32(h + 60);
    memcpy(o->run_id, h + 64, RT_RUN_ID_BYTES);
    o->hash_len = rtc_get_u32(h + 80);
    if (rtc_get_u32(h + 84) != 0 || rtc_get_u64(h + 88) != 0 || o->hash_len > RT_PLAN_HASH_MAX ||
        o->hash_len > o->index_bytes || o->index_bytes > RTC_CK_MAX_INDEX ||
        o->index_bytes > o->file_bytes ||
        o->payload_bytes > o->file_bytes ||
        RTC_CK_HEADER + o->index_bytes + o->payload_bytes + RTC_CK_TRAILER != o->file_bytes ||
        o->step < 0 || o->data_pos < 0 || o->world < 1 || o->rank >= o->world)
        return rtc_err(err, errlen, "%s: corrupted checkpoint header (inconsistent fields)",
                       path);
    return 0;
}

void rtc_ck_entries_free(RtcCkEntry *e, uint32_t n)
{
    if (!e)
        return;
    for (uint32_t i = 0; i < n; i++)
        free(e[i].name);
    free(e);
}

int rtc_ck_read_index(int fd, const char *path, const RtcCkHeader *hd, char **hash,
                      RtcCkEntry **entries, unsigned char **raw_out, char *err, size_t errlen)
{
    *hash = NULL;
    *entries = NULL;
    *raw_out = NULL;
    /* Each entry takes at least CK_ENTRY_FIXED + 1 bytes: a count the index
     * cannot hold is refused before anything is allocated for it. */
    if ((uint64_t)hd->count * (CK_ENTRY_FIXED + 1) > hd->index_bytes - hd->hash_len)
        return rtc_err(err, errlen, "%s: corrupted checkpoint index (%u blobs in %llu bytes)",
                       path, hd->count, (unsigned long long)hd->index_bytes);
    unsigned char *raw = rtc_xmalloc(RTC_CK_HEADER + hd->index_bytes);
    if (rtc_read_all(fd, raw, RTC_CK_HEADER + hd->index_bytes, 0, path, err, errlen) != 0 ||
        rtc_ck_parse_index(raw, path, hd, hash, entries, err, errlen) != 0) {
        free(raw);
        return -1;
    }
    *raw_out = raw;
    return 0;
}

int rtc_ck_parse_index(const unsigned char *raw, const char *path, const RtcCkHeader *hd,
                       char **hash, RtcCkEntry **entries, char *err, size_t errlen)
{
    *hash = NULL;
    *entries = NULL;
    if ((uint64_t)hd->count * (CK_ENTRY_FIXED + 1) > hd->index_bytes - hd->hash_len)
        return rtc_err(err, errlen, "%s: corrupted checkpoint index (%u blobs in %llu bytes)",
                       path, hd->count, (unsigned long long)hd->index_bytes);
    const unsigned char *ib = raw + RTC_CK_HEADER;
    char *h = rtc_xmalloc(hd->hash_len + 1);
    memcpy(h, ib, hd->hash_len);
    h[hd->hash_len] = 0;
    RtcCkEntry *e = rtc_xcalloc(hd->count ? hd->count : 1, sizeof *e);
    uint64_t pos = hd->hash_len, off = 0, end = hd->index_bytes;
    int rc = 0;
    for (uint32_t i = 0; i < hd->count && rc == 0; i++) {
        if (end - pos < CK_ENTRY_FIXED) {
            rc = rtc_err(err, errlen, "%s: corrupted checkpoint index (entry %u)", path, i);
            break;
        }
        const unsigned char *q = ib + pos;
        uint32_t len = rtc_get_u32(q), nd = rtc_get_u32(q + 8);
        e[i].dtype = (RtDtype)rtc_get_u32(q + 4);
        e[i].pos = rtc_get_u64(q + 16);
        e[i].bytes = rtc_get_u64(q + 24);
        e[i].flat_start = (int64_t)rtc_get_u64(q + 32);
        e[i].flat_count = (int64_t)rtc_get_u64(q + 40);
        if (rtc_get_u32(q + 12) != 0 || nd > RT_CKPT_MAXDIM || len == 0 ||
            len > RTC_CK_MAX_NAME || (end - pos - CK_ENTRY_FIXED) < 24 * (uint64_t)nd + len ||
            e[i].pos != off || e[i].bytes > hd->payload_bytes - off ||
            e[i].bytes > (uint64_t)INT64_MAX) {
            rc = rtc_err(err, errlen, "%s: corrupted checkpoint index (entry %u)", path, i);
            break;
        }
        e[i].ndim = (int)nd;
        q += CK_ENTRY_FIXED;
        for (uint32_t d = 0; d < nd; d++, q += 24) {
            e[i].global[d] = (int64_t)rtc_get_u64(q);
            e[i].offset[d] = (int64_t)rtc_get_u64(q + 8);
            e[i].local[d] = (int64_t)rtc_get_u64(q + 16);
        }
        e[i].name = rtc_xmalloc(len + 1);
        memcpy(e[i].name, q, len);
        e[i].name[len] = 0;
        if (memchr(e[i].name, 0, len)) {
            rc = rtc_err(err, errlen, "%s: corrupted checkpoint index (entry %u)", path, i);
            break;
        }
        rc = check_entry(path, e[i].name, e[i].dtype, e[i].ndim, e[i].global, e[i].offset,
                         e[i].local, e[i].flat_start, e[i].flat_count, (int64_t)e[i].bytes, err,
                         errlen);
        pos += CK_ENTRY_FIXED + 24 * (uint64_t)nd + len;
        off += e[i].bytes;
    }
    if (rc == 0 && (pos != end || off != hd->payload_bytes))
        rc = rtc_err(err, errlen, "%s: corrupted checkpoint index (sizes do not add up)", path);
    if (rc != 0) {
        free(h);
        rtc_ck_entries_free(e, hd->count);
        return -1;
    }
    *hash = h;
    *entries = e;
    return 0;
}
