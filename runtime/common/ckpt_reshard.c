/* ckpt_reshard.c: rt_ckpt_read_any, a rank's blobs assembled from whichever
 * rank files of a checkpoint hold their elements (rt.h), so that state saved
 * under one plan loads under any other plan of the same model.
 *
 * Every blob names what it holds: the block [offset, offset + local) of a
 * tensor of shape `global` and, of that block's row-major elements, the
 * range [flat_start, flat_start + flat_count). An element of a wanted blob
 * and an element of a saved entry are the same when they have the same
 * global coordinates. The intersection of two blocks is a box; each of its
 * rows (all coordinates but the last fixed) is contiguous in both blocks,
 * so it is one copy, clipped to both flat ranges. Copies that continue one
 * another merge (identical blocks make one copy per blob).
 *
 * Three passes: (1) every rank file's header and index (against the
 * manifest, as rt_ckpt_read checks them); (2) the copies each file
 * contributes, and the elements of each blob they cover, which must be all
 * of them: a shortfall is refused before any blob is written; (3) each
 * contributing file streamed once, whole, its CRC computed on the way and
 * the copies that fall in each chunk applied.
 *
 * Shared over the world (rt_ckpt_read_shared), passes 1 and 3 are split
 * among ranks: the reader of a file reads it and broadcasts it, then its
 * outcome. Pass 1 over the world: every rank gets every index. Pass 3 in
 * groups of the ranks that need the same files: when their blobs are alike
 * (replicas), every member computes the same copies, so the reader sends
 * only the bytes they take, chunk by chunk, and each side knows how many;
 * otherwise (tensor-parallel ranks, which need parts of every file for the
 * tensors they all hold whole) it sends each chunk whole. Outcomes of a
 * rank's own (its blobs, pass 2) are agreed before the next broadcast. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

typedef struct {
    int blob;
    int64_t src, dst, bytes; /* src: payload offset in the file; dst: byte offset in the blob */
} Copy;

typedef struct {
    int64_t lo, hi; /* elements [lo, hi) of a blob's flat range */
} Span;

typedef struct {
    int fd;
    char *path, *hash;
    RtcCkHeader hd;
    RtcCkEntry *e;
    unsigned char *raw;
    Copy *copy;
    int64_t ncopy, capcopy;
} File;

typedef struct {
    Span *span;
    int64_t nspan, capspan;
} Cover;

static void add_copy(File *f, int blob, int64_t src, int64_t dst, int64_t bytes)
{
    if (f->ncopy) {
        Copy *l = &f->copy[f->ncopy - 1];
        if (l->blob == blob && l->src + l->bytes == src && l->dst + l->bytes == dst) {
            l->bytes += bytes;
            return;
        }
    }
    if (f->ncopy == f->capcopy) {
        f->capcopy = f->capcopy ? 2 * f->capcopy : 16;
        Copy *n = realloc(f->copy, (size_t)f->capcopy * sizeof *n);
        if (!n)
            rt_fatal("ptdrt: out of host memory resharding %s", f->path);
        f->copy = n;
    }
    f->copy[f->ncopy++] = (Copy){blob, src, dst, bytes};
}

static void add_span(Cover *c, int64_t lo, int64_t hi)
{
    if (c->nspan && c->span[c->nspan - 1].hi == lo) {
        c->span[c->nspan - 1].hi = hi;
        return;
    }
    if (c->nspan == c->capspan) {
        c->capspan = c->capspan ? 2 * c->capspan : 16;
        Span *n = realloc(c->span, (size_t)c->capspan * sizeof *n);
        if (!n)
            rt_fatal("ptdrt: out of host memory resharding a checkpoint");
        c->span = n;
    }
    c->span[c->nspan++] = (Span){lo, hi};
}

/* The copies entry e (of file f) gives blob b (index bi), recorded in f and
 * cover. Shapes and dtypes agree (checked by the caller). */
static void intersect(File *f, const RtcCkEntry *e, const RtCkptBlob *b, int bi, Cover *cover)
{
    int nd = b->ndim;
    int64_t lo[RT_CKPT_MAXDIM], hi[RT_CKPT_MAXDIM], idx[RT_CKPT_MAXDIM];
    int64_t tstr[RT_CKPT_MAXDIM], sstr[RT_CKPT_MAXDIM];
    for (int d = 0; d < nd; d++) {
        lo[d] = b->offset[d] > e->offset[d] ? b->offset[d] : e->offset[d];
        int64_t bh = b->offset[d] + b->local[d], eh = e->offset[d] + e->local[d];
        hi[d] = bh < eh ? bh : eh;
        if (lo[d] >= hi[d])
            return;
        idx[d] = lo[d];
    }
    int64_t ts = 1, ss = 1;
    for (int d = nd - 1; d >= 0; d--) {
        tstr[d] = ts;
        sstr[d] = ss;
        ts *= b->local[d];
        ss *= e->local[d];
    }
    int64_t es = (int64_t)rtc_dtype_size(b->dtype);
    int64_t len = nd ? hi[nd - 1] - lo[nd - 1] : 1;
    for (;;) {
        /* One row of the box: flat positions in the wanted and the saved block. */
        int64_t ft = 0, fs = 0;
        for (int d = 0; d < nd; d++) {
            ft += (idx[d] - b->offset[d]) * tstr[d];
            fs += (idx[d] - e->offset[d]) * sstr[d];
        }
        int64_t u0 = 0, u1 = len;
        if (b->flat_start - ft > u0)
            u0 = b->flat_start - ft;
        if (e->flat_start - fs > u0)
            u0 = e->flat_start - fs;
        if (b->flat_start + b->flat_count - ft < u1)
            u1 = b->flat_start + b->flat_count - ft;
        if (e->flat_start + e->flat_count - fs < u1)
            u1 = e->flat_start + e->flat_count - fs;
        if (u0 < u1) {
            add_copy(f, bi, (int64_t)e->pos + (fs + u0 - e->flat_start) * es,
                     (ft + u0 - b->flat_start) * es, (u1 - u0) * es);
            add_span(cover, ft + u0 - b->flat_start, ft + u1 - b->flat_start);
        }
        /* The next row: the odometer over every dim but the last. */
        int d = nd - 2;
        for (; d >= 0; d--) {
            if (++idx[d] < hi[d])
                break;
            idx[d] = lo[d];
        }
        if (d < 0)
            return;
    }
}

static int span_cmp(const void *a, const void *b)
{
    const Span *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static int copy_cmp(const void *a, const void *b)
{
    const Copy *x = a, *y = b;
    return (x->src > y->src) - (x->src < y->src);
}

/* The first element of [0, n) no span covers, or -1 when all are. */
static int64_t first_gap(Cover *c, int64_t n, int64_t *gap_end)
{
    qsort(c->span, (size_t)c->nspan, sizeof *c->span, span_cmp);
    int64_t at = 0;
    for (int64_t i = 0; i < c->nspan && at < n; i++) {
        if (c->span[i].lo > at) {
            *gap_end = c->span[i].lo;
            return at;
        }
        if (c->span[i].hi > at)
            at = c->span[i].hi;
    }
    *gap_end = n;
    return at < n ? at : -1;
}

static const RtCkptBlob *sort_blobs;

static int blob_index_cmp(const void *a, const void *b)
{
    return strcmp(sort_blobs[*(const int *)a].name, sort_blobs[*(const int *)b].name);
}

/* The index of the blob called name (order: blob indices sorted by name), or -1. */
static int find_blob(const RtCkptBlob *b, const int *order, int n, const char *name)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, cmp = strcmp(b[order[mid]].name, name);
        if (cmp == 0)
            return order[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* A reader's outcome as its group learns it: a status word first, then the
 * sentence that names the file. */
typedef struct {
    int64_t rc, bytes; /* bytes: what follows (an index's length) */
    char msg[1024];
} Outcome;

typedef struct {
    RtComm *g;
    int me, size;
    RtCkptIo *io;
    bool same; /* the members' blobs are alike (their copies too) */
} Group;

/* Every member's own outcome (0 or -1, the sentence in err) made the
 * group's: -1 on all when any failed; a member that did not fail says so. */
static int agree(const Group *G, int rc, char *err, size_t errlen)
{
    if (G->size == 1)
        return rc;
    if (rt_host_max(G->g, rc != 0) == 0)
        return 0;
    if (rc == 0)
        rtc_err(err, errlen, "another rank could not load its part of the checkpoint (its "
                "message says why)");
    return -1;
}

/* root's outcome (rc, err) to every member: its rc, and its sentence in err. */
static int64_t share_outcome(const Group *G, int root, int64_t rc, int64_t *bytes, char *err,
                             size_t errlen)
{
    if (G->size == 1)
        return rc;
    Outcome o;
    memset(&o, 0, sizeof o);
    o.rc = rc;
    o.bytes = *bytes;
    if (G->me == root && rc)
        snprintf(o.msg, sizeof o.msg, "%s", err);
    rt_host_bcast(G->g, &o, sizeof o, root);
    if (G->me != root && o.rc)
        snprintf(err, errlen, "%s", o.msg);
    *bytes = o.bytes;
    return o.rc;
}

/* Pass 1 for file r: its reader checks it against the manifest and reads its
 * header and index, which the others receive: -1 when the reader failed (on
 * every member). A member that cannot parse what the reader parsed (the
 * file changed between the reader's two reads of its header) fails alone,
 * in *mine, and goes on with the broadcasts. */
static int get_index(const RtCkpt *c, const Group *G, int r, File *f, int *mine, char *err,
                     size_t errlen)
{
    int root = r % G->size;
    int64_t rc = 0, len = 0;
    if (G->me == root) {
        rc = rtc_ck_rank_file_problem(c, r, &f->fd, &f->hd, err, errlen);
        if (rc == 0)
            rc = rtc_ck_read_index(f->fd, f->path, &f->hd, &f->hash, &f->e, &f->raw, err, errlen);
        if (rc == 0) {
            len = (int64_t)(RTC_CK_HEADER + f->hd.index_bytes);
            /* The header twice (the check, then with the index), the trailer once. */
            G->io->meta += 2 * RTC_CK_HEADER + RTC_CK_TRAILER + (int64_t)f->hd.index_bytes;
        }
    }
    if (share_outcome(G, root, rc, &len, err, errlen) != 0)
        return -1;
    if (G->me != root) {
        f->raw = rtc_xmalloc((size_t)len);
        rt_host_bcast(G->g, f->raw, (size_t)len, root);
        G->io->received += len;
        char e2[1024];
        if (rtc_ck_decode_header(f->raw, f->path, &f->hd, e2, sizeof e2) != 0 ||
            rtc_ck_parse_index(f->raw, f->path, &f->hd, &f->hash, &f->e, e2, sizeof e2) != 0) {
            f->hd.count = 0;
            if (*mine == 0)
                *mine = rtc_err(err, errlen, "%s", e2);
        }
    } else if (G->size > 1) {
        rt_host_bcast(G->g, f->raw, (size_t)len, root);
    }
    return 0;
}

/* Bytes of the copies of f (sorted by source) within payload bytes [a, z),
 * from copy *i on (advanced past those that end before a). */
static int64_t copied_in(const File *f, int64_t *i, int64_t a, int64_t z)
{
    while (*i < f->ncopy && f->copy[*i].src + f->copy[*i].bytes <= a)
        (*i)++;
    int64_t n = 0;
    for (int64_t j = *i; j < f->ncopy && f->copy[j].src < z; j++) {
        const Copy *x = &f->copy[j];
        int64_t from = x->src > a ? x->src : a;
        int64_t to = x->src + x->bytes < z ? x->src + x->bytes : z;
        n += to - from;
    }
    return n;
}

/* Pass 3 for file f (rank file r): its reader streams it whole, computing
 * its CRC and applying its copies; each chunk's copied bytes go to the
 * other members, packed in copy order, and its outcome after the last. */
static int stream(const RtCkpt *c, const Group *G, int root, int r, File *f,
                  const RtCkptBlob *blobs, char *err, size_t errlen)
{
    qsort(f->copy, (size_t)f->ncopy, sizeof *f->copy, copy_cmp);
    bool reader = G->me == root;
    uint64_t total = f->hd.payload_bytes;
    size_t sb = total < RTC_CK_STAGE ? (size_t)(total ? total : 1) : RTC_CK_STAGE;
    unsigned char *stage = reader ? rtc_xcalloc(1, sb) : NULL; /* zero: what a failed reader sends */
    unsigned char *pack = G->size > 1 ? rtc_xmalloc(sb) : NULL;
    int64_t base = (int64_t)(RTC_CK_HEADER + f->hd.index_bytes), i = 0;
    int64_t rc = 0;
    uint32_t crc = 0;
    if (reader && f->fd < 0) { /* pass 1 was another member's */
        struct stat st;
        f->fd = rtc_open_regular(f->path, "checkpoint file", &st, err, errlen);
        rc = f->fd < 0 ? -1 : 0;
    }
    if (reader)
        crc = rtc_crc32c(0, f->raw, RTC_CK_HEADER + f->hd.index_bytes);
    for (uint64_t p = 0; p < total; p += sb) {
        size_t k = total - p < sb ? (size_t)(total - p) : sb;
        int64_t a = (int64_t)p, z = (int64_t)(p + k), j0 = i;
        int64_t npack = copied_in(f, &i, a, z);
        bool whole = G->size > 1 && !G->same; /* every chunk goes to every member */
        if (npack == 0 && !reader && !whole)
            continue; /* nothing here for the blobs; the reader still reads it for the CRC */
        if (reader && rc == 0) {
            rc = rtc_read_all(f->fd, stage, k, base + (int64_t)p, f->path, err, errlen);
            if (rc == 0) {
                crc = rtc_crc32c(crc, stage, k);
                G->io->state += (int64_t)k;
            }
        }
        /* The copies in this chunk: from the stage into the blobs and the
         * pack (reader), or from the pack into the blobs (the others). A
         * reader that failed sends what it has: the outcome after the last
         * chunk tells the others to drop it. */
        if (reader && G->size > 1 && npack && !whole) {
            int64_t q = 0;
            for (int64_t j = j0; j < f->ncopy && f->copy[j].src < z; j++) {
                const Copy *x = &f->copy[j];
                int64_t from = x->src > a ? x->src : a;
                int64_t to = x->src + x->bytes < z ? x->src + x->bytes : z;
                if (to > from) {
                    memcpy(pack + q, stage + (from - a), (size_t)(to - from));
                    q += to - from;
                }
            }
        }
        if (whole) {
            rt_host_bcast(G->g, reader ? stage : pack, k, root);
            if (!reader)
                G->io->received += (int64_t)k;
        } else if (G->size > 1 && npack) {
            rt_host_bcast(G->g, pack, (size_t)npack, root);
            if (!reader)
                G->io->received += npack;
        }
        /* Chunk offsets in the stage or a whole chunk, packed offsets else. */
        bool chunk = reader || whole;
        const unsigned char *src = reader ? stage : pack;
        int64_t q = 0;
        for (int64_t j = j0; j < f->ncopy && f->copy[j].src < z; j++) {
            const Copy *x = &f->copy[j];
            int64_t from = x->src > a ? x->src : a;
            int64_t to = x->src + x->bytes < z ? x->src + x->bytes : z;
            if (to <= from)
                continue;
            rt_to_device((char *)blobs[x->blob].data + x->dst + (from - x->src),
                         src + (chunk ? from - a : q), (size_t)(to - from));
            q += to - from;
        }
    }
    free(stage);
    free(pack);
    if (reader && rc == 0 && crc != c->files[r].crc)
        rc = rtc_err(err, errlen, "%s: corrupted checkpoint file: CRC-32C mismatch (stored "
                     "%08" PRIx32 ", computed %08" PRIx32 ")", f->path, c->files[r].crc, crc);
    int64_t none = 0;
    return (int)share_outcome(G, root, rc, &none, err, errlen);
}

int rt_ckpt_read_any(const RtCkpt *c, const RtCkptBlob *blobs, int n, char *err, size_t errlen)
{
    RtCkptIo io;
    return rt_ckpt_read_shared(c, NULL, blobs, n, &io, err, errlen);
}

/* The blobs as a 64-bit FNV-1a of their descriptions: members whose blobs
 * hash alike apply the same copies, so a reader need send only those. */
static uint64_t blobs_hash(const RtCkptBlob *b, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        int64_t w[5] = {b[i].bytes, b[i].dtype, b[i].flat_start, b[i].flat_count, b[i].ndim};
        const void *part[5] = {b[i].name, w, b[i].global, b[i].offset, b[i].local};
        size_t len[5] = {strlen(b[i].name) + 1, sizeof w, 0, 0, 0};
        for (int k = 2; k < 5; k++)
            len[k] = sizeof(int64_t) * (size_t)b[i].ndim;
        for (int k = 0; k < 5; k++)
            for (size_t j = 0; j < len[k]; j++)
                h = (h ^ ((const unsigned char *)part[k])[j]) * 0x100000001b3ull;
    }
    return h;
}

/* The ranks of the world that need the same rank files (need: one byte per
 * file) form a group (rt_comm_split, ordered by world rank); *same: the
 * members' blobs are alike. */
static RtComm *need_group(RtComm *world, const unsigned char *need, int nfiles, uint64_t hash,
                          bool *same)
{
    int me = rt_comm_rank(world), size = rt_comm_size(world);
    unsigned char *all = rtc_xmalloc((size_t)size * (size_t)(nfiles ? nfiles : 1));
    rt_host_allgather(world, all, need, (size_t)(nfiles ? nfiles : 1));
    int color = me;
    for (int r = 0; r < me; r++)
        if (!memcmp(all + (size_t)r * (size_t)(nfiles ? nfiles : 1), need, (size_t)nfiles)) {
            color = r;
            break;
        }
    free(all);
    RtComm *g = rt_comm_split(color, me);
    int gsize = rt_comm_size(g);
    uint64_t *h = rtc_xmalloc(sizeof *h * (size_t)gsize);
    rt_host_allgather(g, h, &hash, sizeof hash);
    *same = true;
    for (int i = 1; i < gsize; i++)
        *same &= h[i] == h[0];
    free(h);
    return g;
}

int rt_ckpt_read_shared(const RtCkpt *c, RtComm *world, const RtCkptBlob *blobs, int n,
                        RtCkptIo *io, char *err, size_t errlen)
{
    memset(io, 0, sizeof *io);
    io->group = 1;
    Group W = {world, world ? rt_comm_rank(world) : 0, world ? rt_comm_size(world) : 1, io, true};
    /* Failures of one rank's own (its blobs, what the files give them) are
     * agreed over the world before the next collective step, so that no
     * rank waits in a broadcast the others left. */
    int mine = rtc_ck_check_blobs(c->dir, blobs, n, err, errlen);
    if (agree(&W, mine, err, errlen) != 0)
        return -1;
    int *order = rtc_xcalloc((size_t)(n ? n : 1), sizeof *order);
    for (int i = 0; i < n; i++)
        order[i] = i;
    sort_blobs = blobs; /* qsort has no context argument in C11 */
    qsort(order, (size_t)n, sizeof *order, blob_index_cmp);
    File *files = rtc_xcalloc((size_t)c->world, sizeof *files);
    Cover *cover = rtc_xcalloc((size_t)(n ? n : 1), sizeof *cover);
    for (int r = 0; r < c->world; r++)
        files[r].fd = -1;
    int rc = 0;
    char s1[512], s2[512], s3[512];
    /* 1, 2: every file's index (read by world rank r % size and broadcast),
     * and what it gives each blob. */
    for (int r = 0; r < c->world && rc == 0; r++) {
        File *f = &files[r];
        f->path = rtc_ck_rank_path(c->dir, r);
        rc = get_index(c, &W, r, f, &mine, err, errlen);
        if (rc == 0 && mine == 0 && strcmp(f->hash, c->plan_hash) != 0)
            mine = rtc_err(err, errlen, "%s: written by a program of plan hash %s, the manifest's "
                           "is %s (a rank file mixed in from another plan?)", f->path, f->hash,
                           c->plan_hash);
        for (uint32_t j = 0; j < (rc == 0 && mine == 0 ? f->hd.count : 0) && mine == 0; j++) {
            const RtcCkEntry *e = &f->e[j];
            int bi = find_blob(blobs, order, n, e->name);
            if (bi < 0)
                continue; /* another rank's state */
            const RtCkptBlob *b = &blobs[bi];
            if (b->ndim != e->ndim ||
                memcmp(b->global, e->global, (size_t)b->ndim * sizeof(int64_t)) != 0)
                mine = rtc_err(err, errlen, "%s: blob '%s' is part of a tensor of shape %s in "
                               "the checkpoint; this program's is %s (saved from another "
                               "model?)", f->path, e->name,
                               rtc_shape_str(e->ndim, e->global, s1, sizeof s1),
                               rtc_shape_str(b->ndim, b->global, s2, sizeof s2));
            else if (b->dtype != e->dtype)
                mine = rtc_err(err, errlen, "%s: blob '%s' is %s in the checkpoint; this "
                               "program's is %s", f->path, e->name, rtc_dtype_name(e->dtype),
                               rtc_dtype_name(b->dtype));
            else
                intersect(f, e, b, bi, &cover[bi]);
        }
    }
    for (int i = 0; i < n && rc == 0 && mine == 0; i++) {
        int64_t end, gap = first_gap(&cover[i], blobs[i].flat_count, &end);
        if (gap >= 0)
            mine = rtc_err(err, errlen, "%s: no rank file holds elements %lld..%lld of blob '%s' "
                           "(this rank's part: elements %lld..%lld of block %s at %s of a "
                           "tensor of shape %s)", c->dir, (long long)(blobs[i].flat_start + gap),
                           (long long)(blobs[i].flat_start + end), blobs[i].name,
                           (long long)blobs[i].flat_start,
                           (long long)(blobs[i].flat_start + blobs[i].flat_count),
                           rtc_shape_str(blobs[i].ndim, blobs[i].local, s1, sizeof s1),
                           rtc_shape_str(blobs[i].ndim, blobs[i].offset, s2, sizeof s2),
                           rtc_shape_str(blobs[i].ndim, blobs[i].global, s3, sizeof s3));
    }
    if (rc == 0)
        rc = agree(&W, mine, err, errlen);
    /* 3: the payloads. The ranks that need the same files share them: the
     * k-th such file is read by member k % size of the group and broadcast
     * (the bytes the members' copies take when their blobs are alike, as
     * data-parallel replicas' are; else the whole file, each member taking
     * its own copies from it). */
    RtComm *grp = NULL;
    bool same = true;
    if (rc == 0 && W.size > 1) {
        unsigned char *need = rtc_xcalloc((size_t)(c->world ? c->world : 1), 1);
        for (int r = 0; r < c->world; r++)
            need[r] = files[r].ncopy > 0;
        grp = need_group(world, need, c->world, blobs_hash(blobs, n), &same);
        free(need);
    }
    Group G = {grp, grp ? rt_comm_rank(grp) : 0, grp ? rt_comm_size(grp) : 1, io, same};
    io->group = G.size;
    for (int r = 0, k = 0; r < c->world && rc == 0; r++)
        if (files[r].ncopy)
            rc = stream(c, &G, k++ % G.size, r, &files[r], blobs, err, errlen);
    for (int r = 0; r < c->world; r++) {
        File *f = &files[r];
        if (f->fd >= 0)
            close(f->fd);
        if (f->e)
            rtc_ck_entries_free(f->e, f->hd.count);
        free(f->hash);
        free(f->raw);
        free(f->copy);
        free(f->path);
    }
    for (int i = 0; i < n; i++)
        free(cover[i].span);
    free(cover);
    free(files);
    free(order);
    return rc;
}
