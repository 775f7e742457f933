/* checkpoint.c: one rank's shard of the training state in one file.
 *
 * Layout (all integers little-endian):
 *   header, 64 bytes:
 *     0  magic "PTDCKPT\0"        8  u32 version (1)     12 u32 blob count
 *     16 i64 step                 24 i64 data position
 *     32 u64 index bytes          40 u64 payload bytes   48 u64 file bytes
 *     56 u64 zero
 *   index: per blob  u32 name length, u64 payload offset, u64 bytes, name
 *   payload: the blobs back to back, in index order
 *   trailer, 8 bytes: u32 CRC-32C of everything before it, "CEND"
 * Save streams blobs through a host staging buffer (backend memory may be
 * device memory) and replaces the file atomically. Load checks the header,
 * the index and the CRC of the whole file before it touches a blob. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define CK_MAGIC "PTDCKPT"  /* 8 bytes with the terminating NUL */
#define CK_VERSION 1
#define CK_HEADER 64
#define CK_TRAILER 8
#define CK_MAX_NAME 4095
#define CK_STAGE ((size_t)16 << 20)

/* Host staging buffer: at most CK_STAGE, no more than the data needs. */
static size_t stage_size(uint64_t bytes)
{
    return bytes < CK_STAGE ? (size_t)(bytes ? bytes : 1) : CK_STAGE;
}

static int check_blobs(const char *path, const RtBlob *blobs, int n, char *err, size_t errlen)
{
    if (n < 0)
        return rtc_err(err, errlen, "%s: negative blob count %d", path, n);
    for (int i = 0; i < n; i++) {
        const char *nm = blobs[i].name;
        if (!nm || !*nm || strlen(nm) > CK_MAX_NAME)
            return rtc_err(err, errlen, "%s: blob %d has an empty or over-long name", path, i);
        if (blobs[i].bytes < 0 || (blobs[i].bytes > 0 && !blobs[i].data))
            return rtc_err(err, errlen, "%s: blob '%s' has a negative size or no data", path, nm);
        for (int j = 0; j < i; j++)
            if (strcmp(blobs[j].name, nm) == 0)
                return rtc_err(err, errlen, "%s: blob name '%s' appears twice", path, nm);
    }
    return 0;
}

int rt_ckpt_save(const char *path, const RtBlob *blobs, int n, int64_t step, int64_t data_pos,
                 char *err, size_t errlen)
{
    if (check_blobs(path, blobs, n, err, errlen) != 0)
        return -1;
    uint64_t index_bytes = 0, payload = 0;
    for (int i = 0; i < n; i++) {
        index_bytes += 20 + strlen(blobs[i].name);
        payload += (uint64_t)blobs[i].bytes;
    }
    uint64_t total = CK_HEADER + index_bytes + payload + CK_TRAILER;

    unsigned char *head = rtc_xcalloc(1, CK_HEADER + index_bytes);
    memcpy(head, CK_MAGIC, 8);
    rtc_put_u32(head + 8, CK_VERSION);
    rtc_put_u32(head + 12, (uint32_t)n);
    rtc_put_u64(head + 16, (uint64_t)step);
    rtc_put_u64(head + 24, (uint64_t)data_pos);
    rtc_put_u64(head + 32, index_bytes);
    rtc_put_u64(head + 40, payload);
    rtc_put_u64(head + 48, total);
    unsigned char *q = head + CK_HEADER;
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint32_t len = (uint32_t)strlen(blobs[i].name);
        rtc_put_u32(q, len);
        rtc_put_u64(q + 4, off);
        rtc_put_u64(q + 12, (uint64_t)blobs[i].bytes);
        memcpy(q + 20, blobs[i].name, len);
        q += 20 + len;
        off += (uint64_t)blobs[i].bytes;
    }

    RtcAtomic a;
    if (rtc_atomic_open(&a, path, err, errlen) != 0) {
        free(head);
        return -1;
    }
    uint32_t crc = rtc_crc32c(0, head, CK_HEADER + index_bytes);
    int rc = rtc_write_all(a.fd, head, CK_HEADER + index_bytes, -1, path, err, errlen);
    free(head);
    unsigned char *stage = rc == 0 ? rtc_xmalloc(stage_size(payload)) : NULL;
    for (int i = 0; i < n && rc == 0; i++) {
        const char *src = blobs[i].data;
        for (int64_t done = 0; done < blobs[i].bytes && rc == 0;) {
            size_t k = (size_t)(blobs[i].bytes - done) < CK_STAGE ? (size_t)(blobs[i].bytes - done)
                                                                   : CK_STAGE;
            rt_to_host(stage, src + done, k);
            crc = rtc_crc32c(crc, stage, k);
            rc = rtc_write_all(a.fd, stage, k, -1, path, err, errlen);
            done += (int64_t)k;
        }
    }
    free(stage);
    if (rc == 0) {
        unsigned char trailer[CK_TRAILER];
        rtc_put_u32(trailer, crc);
        memcpy(trailer + 4, "CEND", 4);
        rc = rtc_write_all(a.fd, trailer, CK_TRAILER, -1, path, err, errlen);
    }
    if (rc != 0) {
        rtc_atomic_abort(&a);
        return -1;
    }
    return rtc_atomic_commit(&a, err, errlen);
}

typedef struct {
    char *name;
    uint64_t offset, bytes;
} CkEntry;

/* Parse and check the header and index; on success *entries holds `count`
 * entries (names NUL-terminated) that the caller frees. */
static int read_index(int fd, const char *path, uint64_t size, uint32_t *count, int64_t *step,
                      int64_t *data_pos, uint64_t *payload_start, CkEntry **entries,
                      unsigned char **index_buf, char *err, size_t errlen)
{
    unsigned char h[CK_HEADER];
    if (size < CK_HEADER + CK_TRAILER)
        return rtc_err(err, errlen,
                       "%s: truncated checkpoint: %llu bytes, less than its 72-byte header and "
                       "trailer",
                       path, (unsigned long long)size);
    if (rtc_read_all(fd, h, CK_HEADER, 0, path, err, errlen) != 0)
        return -1;
    if (memcmp(h, CK_MAGIC, 8) != 0)
        return rtc_err(err, errlen, "%s: not a ptdc checkpoint (bad magic)", path);
    uint32_t version = rtc_get_u32(h + 8);
    if (version != CK_VERSION)
        return rtc_err(err, errlen, "%s: checkpoint version %u; this runtime reads version %d",
                       path, version, CK_VERSION);
    *count = rtc_get_u32(h + 12);
    *step = (int64_t)rtc_get_u64(h + 16);
    *data_pos = (int64_t)rtc_get_u64(h + 24);
    uint64_t index_bytes = rtc_get_u64(h + 32), payload = rtc_get_u64(h + 40);
    uint64_t total = rtc_get_u64(h + 48);
    if (total != size) {
        if (total > size)
            return rtc_err(err, errlen,
                           "%s: truncated checkpoint: its header announces %llu bytes, the file "
                           "has %llu",
                           path, (unsigned long long)total, (unsigned long long)size);
        return rtc_err(err, errlen,
                       "%s: corrupted checkpoint: its header announces %llu bytes, the file has "
                       "%llu",
                       path, (unsigned long long)total, (unsigned long long)size);
    }
    if (rtc_get_u64(h + 56) != 0 || index_bytes > size || payload > size ||
        CK_HEADER + index_bytes + payload + CK_TRAILER != size ||
        (uint64_t)*count * 20 > index_bytes)
        return rtc_err(err, errlen, "%s: corrupted checkpoint header (inconsistent sizes)", path);

    unsigned char *ib = rtc_xmalloc(index_bytes);
    CkEntry *e = rtc_xcalloc(*count, sizeof *e);
    *index_buf = ib;
    *entries = e;
    if (rtc_read_all(fd, ib, index_bytes, CK_HEADER, path, err, errlen) != 0)
        return -1;
    uint64_t pos = 0, off = 0;
    for (uint32_t i = 0; i < *count; i++) {
        if (index_bytes - pos < 20)
            return rtc_err(err, errlen, "%s: corrupted checkpoint index (entry %u)", path, i);
        uint32_t len = rtc_get_u32(ib + pos);
        e[i].offset = rtc_get_u64(ib + pos + 4);
        e[i].bytes = rtc_get_u64(ib + pos + 12);
        if (len == 0 || len > CK_MAX_NAME || len > index_bytes - pos - 20 || e[i].offset != off ||
            e[i].bytes > payload - off)
            return rtc_err(err, errlen, "%s: corrupted checkpoint index (entry %u)", path, i);
        e[i].name = rtc_xmalloc(len + 1);
        memcpy(e[i].name, ib + pos + 20, len);
        e[i].name[len] = 0;
        pos += 20 + len;
        off += e[i].bytes;
    }
    if (pos != index_bytes || off != payload)
        return rtc_err(err, errlen, "%s: corrupted checkpoint index (sizes do not add up)", path);
    *payload_start = CK_HEADER + index_bytes;
    return 0;
}

static int verify_crc(int fd, const char *path, uint64_t size, char *err, size_t errlen)
{
    uint64_t body = size - CK_TRAILER;
    unsigned char *buf = rtc_xmalloc(stage_size(body));
    uint32_t crc = 0;
    int rc = 0;
    for (uint64_t done = 0; done < body && rc == 0;) {
        size_t k = body - done < stage_size(body) ? (size_t)(body - done) : stage_size(body);
        rc = rtc_read_all(fd, buf, k, (int64_t)done, path, err, errlen);
        crc = rtc_crc32c(crc, buf, k);
        done += k;
    }
    unsigned char t[CK_TRAILER];
    if (rc == 0)
        rc = rtc_read_all(fd, t, CK_TRAILER, (int64_t)body, path, err, errlen);
    free(buf);
    if (rc != 0)
        return -1;
    if (memcmp(t + 4, "CEND", 4) != 0)
        return rtc_err(err, errlen, "%s: corrupted checkpoint (bad trailer)", path);
    if (rtc_get_u32(t) != crc)
        return rtc_err(err, errlen,
                       "%s: corrupted checkpoint: CRC-32C mismatch (stored %08x, computed %08x)",
                       path, rtc_get_u32(t), crc);
    return 0;
}

int rt_ckpt_load(const char *path, const RtBlob *blobs, int n, int64_t *step, int64_t *data_pos,
                 char *err, size_t errlen)
{
    if (check_blobs(path, blobs, n, err, errlen) != 0)
        return -1;
    struct stat st;
    int fd = rtc_open_regular(path, "checkpoint", &st, err, errlen);
    if (fd < 0)
        return -1;
    uint32_t count = 0;
    int64_t fstep = 0, fpos = 0;
    uint64_t payload_start = 0;
    CkEntry *e = NULL;
    unsigned char *ib = NULL;
    int rc = read_index(fd, path, (uint64_t)st.st_size, &count, &fstep, &fpos, &payload_start, &e,
                        &ib, err, errlen);
    if (rc == 0)
        rc = verify_crc(fd, path, (uint64_t)st.st_size, err, errlen);
    /* Match the requested blobs against the file, both ways. */
    int *where = rtc_xcalloc((size_t)n, sizeof *where);
    for (int i = 0; i < n && rc == 0; i++) {
        where[i] = -1;
        for (uint32_t j = 0; j < count; j++)
            if (strcmp(e[j].name, blobs[i].name) == 0)
                where[i] = (int)j;
        if (where[i] < 0)
            rc = rtc_err(err, errlen, "%s: checkpoint has no blob '%s' (saved by another model "
                         "or plan?)", path, blobs[i].name);
        else if (e[where[i]].bytes != (uint64_t)blobs[i].bytes)
            rc = rtc_err(err, errlen,
                         "%s: blob '%s' holds %llu bytes, the program expects %lld (saved by "
                         "another plan?)",
                         path, blobs[i].name, (unsigned long long)e[where[i]].bytes,
                         (long long)blobs[i].bytes);
    }
    if (rc == 0 && count != (uint32_t)n) {
        for (uint32_t j = 0; j < count && rc == 0; j++) {
            bool wanted = false;
            for (int i = 0; i < n; i++)
                wanted = wanted || strcmp(e[j].name, blobs[i].name) == 0;
            if (!wanted)
                rc = rtc_err(err, errlen,
                             "%s: checkpoint holds blob '%s' the program does not expect (saved "
                             "by another model or plan?)",
                             path, e[j].name);
        }
    }
    /* Verified: now copy into the blobs. */
    unsigned char *stage = rc == 0 ? rtc_xmalloc(stage_size((uint64_t)st.st_size)) : NULL;
    for (int i = 0; i < n && rc == 0; i++) {
        char *dst = blobs[i].data;
        int64_t base = (int64_t)(payload_start + e[where[i]].offset);
        for (int64_t done = 0; done < blobs[i].bytes && rc == 0;) {
            size_t k = (size_t)(blobs[i].bytes - done) < CK_STAGE ? (size_t)(blobs[i].bytes - done)
                                                                   : CK_STAGE;
            rc = rtc_read_all(fd, stage, k, base + done, path, err, errlen);
            if (rc == 0)
                rt_to_device(dst + done, stage, k);
            done += (int64_t)k;
        }
    }
    free(stage);
    free(where);
    if (e)
        for (uint32_t j = 0; j < count; j++)
            free(e[j].name);
    free(e);
    free(ib);
    close(fd);
    if (rc == 0) {
        if (step)
            *step = fstep;
        if (data_pos)
            *data_pos = fpos;
    }
    return rc;
}
