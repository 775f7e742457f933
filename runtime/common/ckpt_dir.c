/* ckpt_dir.c: version-2 checkpoints as step directories (protocol in rt.h).
 *
 *   DIR/step-000000123/rank00000.ckpt ... rankNNNNN.ckpt   (ckpt_file.c)
 *   DIR/step-000000123/manifest.json                       (ckpt_manifest.c)
 *
 * Every rank writes its own file; rank 0 commits the manifest once all
 * have; loaders take the newest step whose manifest and rank files agree. A
 * step's validity is decided in one place (step_problem), so the search for
 * the newest step, pruning and an explicit load all judge it alike. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common.h"

/* ------------------------------------------------------------ helpers */

static char *step_dir(const char *dir, int64_t step)
{
    size_t n = strlen(dir) + 32;
    char *p = rtc_xmalloc(n);
    snprintf(p, n, "%s/step-%09lld", dir, (long long)step);
    return p;
}

/* "step-" and decimal digits that fit int64 (leading zeros allowed). */
static bool parse_step_name(const char *name, int64_t *step)
{
    if (strncmp(name, "step-", 5) != 0 || !name[5])
        return false;
    int64_t v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || __builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, *p - '0', &v))
            return false;
    }
    *step = v;
    return true;
}

/* Append one line to notes (truncated when full, never overflowing). */
static void note(char *notes, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(char *notes, size_t len, const char *fmt, ...)
{
    if (!notes || !len)
        return;
    size_t k = strlen(notes);
    if (k + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes + k, len - k, fmt, ap);
    va_end(ap);
    k = strlen(notes);
    if (k + 1 < len) {
        notes[k] = '\n';
        notes[k + 1] = 0;
    }
}

int rt_run_id_new(uint8_t id[RT_RUN_ID_BYTES], char *err, size_t errlen)
{
    static const uint8_t zero[RT_RUN_ID_BYTES];
    do {
        size_t got = 0;
        while (got < RT_RUN_ID_BYTES) {
            ssize_t r = getrandom(id + got, RT_RUN_ID_BYTES - got, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return rtc_err(err, errlen, "cannot make a run id: getrandom: %s",
                               strerror(errno));
            got += (size_t)r;
        }
    } while (memcmp(id, zero, RT_RUN_ID_BYTES) == 0);
    return 0;
}

/* ------------------------------------------------------------- saving */

static int ckpt_write(const char *dir, const RtCkptMeta *m, const RtCkptBlob *blobs, int n,
                      bool host, RtCkptRecord *rec, char *err, size_t errlen)
{
    memset(rec, 0, sizeof *rec);
    rec->rank = m->rank;
    rec->world = m->world;
    rec->step = m->step;
    memcpy(rec->run_id, m->run_id, RT_RUN_ID_BYTES);
    rec->status = EINVAL;
    if (rtc_ck_check_meta(dir, m, err, errlen) != 0 ||
        rtc_ck_check_blobs(dir, blobs, n, err, errlen) != 0)
        return -1;
    char *sd = step_dir(dir, m->step);
    char *path = rtc_ck_rank_path(sd, m->rank);
    size_t mn = strlen(sd) + sizeof RTC_MF_NAME + 1;
    char *mf = rtc_xmalloc(mn);
    snprintf(mf, mn, "%s/%s", sd, RTC_MF_NAME);
    /* rec->status carries the errno of what failed (ENOSPC, EACCES, ...):
     * errno is cleared after each step that succeeded, so a stale value
     * (EEXIST from mkdir, ENOENT from unlink) is never reported. */
    errno = 0;
    int rc = rtc_mkdirs(sd, err, errlen);
    struct stat st;
    /* A step entry that is a symbolic link would put this step elsewhere. */
    if (rc == 0 && (lstat(sd, &st) != 0 || !S_ISDIR(st.st_mode)))
        rc = rtc_err(err, errlen, "%s: a symbolic link, not a step directory: refusing to save "
                     "through it", sd);
    if (rc == 0)
        errno = 0;
    /* A manifest of this step from an earlier save would vouch for files
     * being replaced now: remove it before touching any (every rank does,
     * so it is gone before rank 0 can gather and commit). */
    if (rc == 0 && unlink(mf) != 0) {
        if (errno == ENOENT)
            errno = 0;
        else
            rc = rtc_err(err, errlen, "%s: cannot remove the stale manifest: %s", mf,
                         strerror(errno));
    }
    uint32_t crc = 0;
    uint64_t bytes = 0;
    if (rc == 0)
        rc = rtc_ck_write_file(path, m, blobs, n, host, &crc, &bytes, err, errlen);
    if (rc == 0) {
        rec->status = 0;
        rec->crc = crc;
        rec->bytes = (int64_t)bytes;
    } else {
        rec->status = errno ? errno : -1;
    }
    free(mf);
    free(path);
    free(sd);
    return rc;
}

int rt_ckpt_write(const char *dir, const RtCkptMeta *m, const RtCkptBlob *blobs, int n,
                  RtCkptRecord *rec, char *err, size_t errlen)
{
    return ckpt_write(dir, m, blobs, n, false, rec, err, errlen);
}

int rt_ckpt_write_host(const char *dir, const RtCkptMeta *m, const RtCkptBlob *blobs, int n,
                       RtCkptRecord *rec, char *err, size_t errlen)
{
    return ckpt_write(dir, m, blobs, n, true, rec, err, errlen);
}

int rt_ckpt_commit(const char *dir, const RtCkptMeta *m, const RtCkptRecord *recs, int nrecs,
                   const RtCkptTensor *model, int nmodel, char *err, size_t errlen)
{
    if (rtc_ck_check_meta(dir, m, err, errlen) != 0)
        return -1;
    char *sd = step_dir(dir, m->step);
    int rc = 0;
    if (nrecs != m->world)
        rc = rtc_err(err, errlen, "%s: step %lld not committed: %d records for a world of %d",
                     sd, (long long)m->step, nrecs, m->world);
    for (int r = 0; r < nrecs && rc == 0; r++) {
        const RtCkptRecord *x = &recs[r];
        if (x->status != 0)
            rc = rtc_err(err, errlen, "%s: step %lld not committed: rank %d could not write its "
                         "file (%s)", sd, (long long)m->step, r,
                         x->status > 0 ? strerror(x->status) : "see its message");
        else if (x->rank != r || x->world != m->world || x->step != m->step ||
                 memcmp(x->run_id, m->run_id, RT_RUN_ID_BYTES) != 0 || x->bytes <= 0)
            rc = rtc_err(err, errlen, "%s: step %lld not committed: the record in place of rank "
                         "%d is rank %d's of world %d, step %lld, another run or empty",
                         sd, (long long)m->step, r, x->rank, x->world, (long long)x->step);
    }
    for (int i = 0; i < nmodel && rc == 0; i++)
        if (!model[i].name || !*model[i].name || !rtc_dtype_size(model[i].dtype) ||
            model[i].ndim < 0 || model[i].ndim > RT_CKPT_MAXDIM)
            rc = rtc_err(err, errlen, "%s: model tensor %d is malformed", sd, i);
    /* Rank 0 must see every file as written: a --save directory that is
     * not on a file system shared by all ranks fails here, not at load. */
    for (int r = 0; r < nrecs && rc == 0; r++) {
        char *p = rtc_ck_rank_path(sd, r);
        struct stat st;
        if (stat(p, &st) != 0)
            rc = rtc_err(err, errlen, "%s: step %lld not committed: rank 0 cannot see rank %d's "
                         "file: %s (is the directory on a file system every rank shares?)",
                         p, (long long)m->step, r, strerror(errno));
        else if ((uint64_t)st.st_size != (uint64_t)recs[r].bytes)
            rc = rtc_err(err, errlen, "%s: step %lld not committed: the file has %lld bytes, "
                         "rank %d wrote %lld", p, (long long)m->step, (long long)st.st_size, r,
                         (long long)recs[r].bytes);
        free(p);
    }
    if (rc == 0)
        rc = rtc_mf_write(sd, m, recs, model, nmodel, err, errlen);
    if (rc == 0) /* the step directory's entry in DIR */
        rc = rtc_fsync_dir(dir, err, errlen);
    free(sd);
    return rc;
}

/* ------------------------------------------------ judging one step */

/* Rank r's file against the manifest, from its header and trailer only
 * (cheap enough to run over every rank of every step scanned). On success
 * *fd is the open file (when fd is non-NULL) and *hd its header. */
int rtc_ck_rank_file_problem(const RtCkpt *c, int r, int *fd_out, RtcCkHeader *hd, char *err,
                             size_t errlen)
{
    char *path = rtc_ck_rank_path(c->dir, r);
    struct stat st;
    int fd = rtc_open_regular(path, "checkpoint file", &st, err, errlen);
    int rc = fd < 0 ? -1 : 0;
    uint64_t size = rc == 0 ? (uint64_t)st.st_size : 0;
    unsigned char h[RTC_CK_HEADER], t[RTC_CK_TRAILER];
    char a[2 * RT_RUN_ID_BYTES + 1], b[2 * RT_RUN_ID_BYTES + 1];
    if (rc == 0 && size < RTC_CK_HEADER + RTC_CK_TRAILER)
        rc = rtc_err(err, errlen, "%s: truncated checkpoint file: %llu bytes; the manifest "
                     "recorded %llu", path, (unsigned long long)size,
                     (unsigned long long)c->files[r].bytes);
    if (rc == 0)
        rc = rtc_read_all(fd, h, sizeof h, 0, path, err, errlen);
    if (rc == 0)
        rc = rtc_ck_decode_header(h, path, hd, err, errlen);
    /* Whose file it is, before its size: a swapped file is named as one. */
    if (rc == 0 && memcmp(hd->run_id, c->run_id, RT_RUN_ID_BYTES) != 0) {
        rt_run_id_hex(hd->run_id, a);
        rt_run_id_hex(c->run_id, b);
        rc = rtc_err(err, errlen, "%s: belongs to run %s, the manifest to run %s (a rank file "
                     "mixed in from another run?)", path, a, b);
    }
    if (rc == 0 && hd->world != (uint32_t)c->world)
        rc = rtc_err(err, errlen, "%s: was written by a world of %u ranks, the manifest's has "
                     "%d (a rank file mixed in from another checkpoint?)", path, hd->world,
                     c->world);
    if (rc == 0 && hd->rank != (uint32_t)r)
        rc = rtc_err(err, errlen, "%s: holds rank %u's state, not rank %d's (rank files swapped "
                     "or copied over each other?)", path, hd->rank, r);
    if (rc == 0 && hd->step != c->step)
        rc = rtc_err(err, errlen, "%s: holds step %lld, the manifest step %lld (a rank file "
                     "mixed in from another step?)", path, (long long)hd->step,
                     (long long)c->step);
    if (rc == 0 && hd->data_pos != c->data_pos)
        rc = rtc_err(err, errlen, "%s: holds data position %lld, the manifest %lld", path,
                     (long long)hd->data_pos, (long long)c->data_pos);
    if (rc == 0 && (size != c->files[r].bytes || hd->file_bytes != size))
        rc = rtc_err(err, errlen, "%s: is %llu bytes; the manifest recorded %llu (truncated, or "
                     "replaced after the save)", path, (unsigned long long)size,
                     (unsigned long long)c->files[r].bytes);
    if (rc == 0)
        rc = rtc_read_all(fd, t, sizeof t, (int64_t)(size - RTC_CK_TRAILER), path, err, errlen);
    if (rc == 0 && memcmp(t + 4, "CEND", 4) != 0)
        rc = rtc_err(err, errlen, "%s: corrupted checkpoint file (bad trailer)", path);
    if (rc == 0 && rtc_get_u32(t) != c->files[r].crc)
        rc = rtc_err(err, errlen, "%s: its CRC-32C is %08" PRIx32 ", the manifest recorded %08"
                     PRIx32 " (the file was changed after the save)", path, rtc_get_u32(t),
                     c->files[r].crc);
    if (fd >= 0 && (rc != 0 || !fd_out))
        close(fd);
    else if (fd_out)
        *fd_out = fd;
    free(path);
    return rc;
}

/* Open step `step` of root (stepdir given, or made from root) and check it
 * whole but for the rank files' payloads. NULL with the reason in err. */
static bool exists(const char *dir, const char *name);

static RtCkpt *open_checked(const char *stepdir, int64_t expect_step, char *err, size_t errlen)
{
    if (!exists(stepdir, RTC_MF_NAME)) {
        rtc_err(err, errlen, "%s: incomplete (no manifest: its save did not finish)", stepdir);
        return NULL;
    }
    RtCkpt *c = rtc_mf_read(stepdir, err, errlen);
    if (!c)
        return NULL;
    int rc = 0;
    if (expect_step >= 0 && c->step != expect_step)
        rc = rtc_err(err, errlen, "%s: its manifest is of step %lld", stepdir,
                     (long long)c->step);
    for (int r = 0; r < c->world && rc == 0; r++) {
        RtcCkHeader hd;
        rc = rtc_ck_rank_file_problem(c, r, NULL, &hd, err, errlen);
    }
    if (rc != 0) {
        rt_ckpt_close(c);
        return NULL;
    }
    return c;
}

/* The step directories of root, newest first. -1 with err if root cannot
 * be listed. With `notes` (pruning), an entry that is a symbolic link or
 * not a directory is left out with a line saying so: pruning never follows
 * one (it could delete files outside root). */
static int list_steps(const char *root, int64_t **steps, int *n, char *notes, size_t noteslen,
                      char *err, size_t errlen)
{
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(root);
    if (!d)
        return rtc_err(err, errlen, "%s: cannot open checkpoint directory: %s", root,
                       strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t s;
        if (!parse_step_name(e->d_name, &s))
            continue;
        struct stat st;
        if (notes && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            note(notes, noteslen, "%s/%s: cannot be examined (%s); never removed", root,
                 e->d_name, strerror(errno));
            continue;
        }
        if (notes && !S_ISDIR(st.st_mode)) {
            note(notes, noteslen, "%s/%s: %s; never followed or removed", root, e->d_name,
                 S_ISLNK(st.st_mode) ? "a symbolic link, not a step directory"
                                     : "not a directory");
            continue;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *ns = realloc(*steps, (size_t)cap * sizeof *ns);
            if (!ns)
                rt_fatal("ptdrt: out of host memory listing %s", root);
            *steps = ns;
        }
        (*steps)[(*n)++] = s;
    }
    closedir(d);
    /* Newest first; the same step under two spellings counts once. */
    for (int i = 1; i < *n; i++)
        for (int j = i; j > 0 && (*steps)[j - 1] < (*steps)[j]; j--) {
            int64_t t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
        }
    int k = 0;
    for (int i = 0; i < *n; i++)
        if (k == 0 || (*steps)[k - 1] != (*steps)[i])
            (*steps)[k++] = (*steps)[i];
    *n = k;
    return 0;
}

static bool exists(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = rtc_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    struct stat st;
    bool ok = stat(p, &st) == 0;
    free(p);
    return ok;
}

static bool same_id(const uint8_t *a, const uint8_t *b)
{
    return memcmp(a, b, RT_RUN_ID_BYTES) == 0;
}

/* The index of a manifest whose lineage forked from mf[i]'s lineage at a
 * step before mf[i]'s (so a rollback abandoned step i), or -1. */
static int abandoned_by(RtCkpt *const *mf, int n, int i)
{
    if (!mf[i])
        return -1;
    for (int j = 0; j < n; j++)
        if (mf[j] && mf[j]->parent_step >= 0 && mf[j]->parent_step < mf[i]->step &&
            same_id(mf[j]->parent_lineage, mf[i]->lineage) &&
            !same_id(mf[j]->lineage, mf[i]->lineage))
            return j;
    return -1;
}

/* A note naming the run resumed when dir holds steps of other runs too. */
static void note_other_runs(const char *dir, const RtCkpt *found, RtCkpt *const *mf, int n,
                            char *notes, size_t noteslen)
{
    int others = 0, newest = -1;
    for (int i = 0; i < n; i++) {
        if (!mf[i] || same_id(mf[i]->run_id, found->run_id))
            continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = mf[j] && same_id(mf[j]->run_id, mf[i]->run_id);
        others += !seen;
        if (newest < 0)
            newest = i; /* steps are newest first */
    }
    if (!others)
        return;
    char a[2 * RT_RUN_ID_BYTES + 1], b[2 * RT_RUN_ID_BYTES + 1];
    rt_run_id_hex(found->run_id, a);
    rt_run_id_hex(mf[newest]->run_id, b);
    note(notes, noteslen, "%s holds the steps of %d other run%s besides run %s (the newest: step "
         "%lld of run %s); resuming run %s at step %lld, the newest complete step; pass "
         "--load %s/step-NNNNNNNNN to resume another", dir, others, others == 1 ? "" : "s", a,
         (long long)mf[newest]->step, b, a, (long long)found->step, dir);
}

bool rt_ckpt_is_step_dir(const char *path)
{
    return exists(path, RTC_MF_NAME);
}

RtCkpt *rt_ckpt_open_step(const char *dir, int64_t step, char *err, size_t errlen)
{
    if (step < 0) {
        rtc_err(err, errlen, "%s: negative step %lld", dir, (long long)step);
        return NULL;
    }
    char *sd = step_dir(dir, step);
    RtCkpt *c = open_checked(sd, step, err, errlen);
    free(sd);
    return c;
}

RtCkpt *rt_ckpt_open_latest(const char *dir, int64_t before, char *notes, size_t noteslen,
                            char *err, size_t errlen)
{
    if (notes && noteslen)
        notes[0] = 0;
    struct stat st;
    if (stat(dir, &st) != 0) {
        rtc_err(err, errlen, "%s: cannot open checkpoint directory: %s", dir, strerror(errno));
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) {
        rtc_err(err, errlen, "%s: not a checkpoint directory (it is not a directory)", dir);
        return NULL;
    }
    /* DIR/step-N itself: that step and no other. */
    if (exists(dir, RTC_MF_NAME)) {
        RtCkpt *c = open_checked(dir, -1, err, errlen);
        if (c && c->step >= before) {
            rtc_err(err, errlen, "%s: holds step %lld only, not one before step %lld", dir,
                    (long long)c->step, (long long)before);
            rt_ckpt_close(c);
            return NULL;
        }
        return c;
    }
    int64_t *steps;
    int n;
    if (list_steps(dir, &steps, &n, NULL, 0, err, errlen) != 0)
        return NULL;
    /* Every step's manifest first: a rollback abandons steps of its parent
     * lineage, and other runs are named. */
    RtCkpt **mf = rtc_xcalloc((size_t)(n ? n : 1), sizeof *mf);
    char unread[1024]; /* a manifest that does not read: open_checked says why, below */
    for (int i = 0; i < n; i++) {
        char *sd = step_dir(dir, steps[i]);
        if (exists(sd, RTC_MF_NAME))
            mf[i] = rtc_mf_read(sd, unread, sizeof unread);
        free(sd);
    }
    RtCkpt *found = NULL;
    char why[1024];
    int tried = 0;
    for (int i = 0; i < n && !found; i++) {
        if (steps[i] >= before)
            continue;
        tried++;
        char *sd = step_dir(dir, steps[i]);
        int by = abandoned_by(mf, n, i);
        if (by >= 0) {
            char a[2 * RT_RUN_ID_BYTES + 1], b[2 * RT_RUN_ID_BYTES + 1];
            rt_run_id_hex(mf[i]->lineage, a);
            rt_run_id_hex(mf[by]->lineage, b);
            note(notes, noteslen, "%s: skipped: abandoned by a rollback (lineage %s resumed "
                 "lineage %s from step %lld; its step %lld is in %s)", sd, b, a,
                 (long long)mf[by]->parent_step, (long long)mf[by]->step, dir);
        } else if (!(found = open_checked(sd, steps[i], why, sizeof why))) {
            snprintf(why + strlen(why), sizeof why - strlen(why), "; skipped");
            note(notes, noteslen, "%s", why);
        }
        free(sd);
    }
    if (found)
        note_other_runs(dir, found, mf, n, notes, noteslen);
    for (int i = 0; i < n; i++)
        rt_ckpt_close(mf[i]);
    free(mf);
    free(steps);
    if (found)
        return found;
    if (tried)
        rtc_err(err, errlen, "%s: no complete checkpoint%s: %d step director%s, none complete "
                "(see the notes)", dir, before == INT64_MAX ? "" : " older than the one refused",
                tried, tried == 1 ? "y" : "ies");
    else if (n)
        rtc_err(err, errlen, "%s: no complete checkpoint older than step %lld", dir,
                (long long)before);
    else if (exists(dir, "rank00000.ckpt"))
        rtc_err(err, errlen, "%s: a version 1 checkpoint (rank files without step directories "
                "and manifest, from an older ptdc); this program reads version 2 checkpoints "
                "only", dir);
    else
        rtc_err(err, errlen, "%s: holds no checkpoint (no step-NNNNNNNNN directory)", dir);
    return NULL;
}

/* ------------------------------------------------------------ pruning */

/* Remove a step directory: its files, then itself. Only plain entries are
 * removed; anything else stays (with the directory) and is reported. The
 * directory is opened with O_NOFOLLOW: a step entry replaced by a symbolic
 * link since it was listed is refused, not followed. */
static int remove_step(const char *sd, char *err, size_t errlen)
{
    int fd = open(sd, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return rtc_err(err, errlen, "%s: cannot open: %s", sd,
                       e == ELOOP ? "a symbolic link (never followed)" : strerror(e));
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) && rc == 0) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0)
            rc = rtc_err(err, errlen, "%s/%s: cannot remove: %s", sd, e->d_name,
                         strerror(errno));
    }
    closedir(d);
    if (rc == 0 && rmdir(sd) != 0)
        rc = rtc_err(err, errlen, "%s: cannot remove: %s", sd, strerror(errno));
    return rc;
}

/* Does the incomplete step directory sd hold anything of another run or
 * lineage than m's: a manifest that reads, or a file whose rank-file header
 * names another run? (Files without a readable header hold nothing.) */
static bool foreign(const char *sd, const RtCkptMeta *m)
{
    char why[512];
    if (exists(sd, RTC_MF_NAME)) {
        RtCkpt *c = rtc_mf_read(sd, why, sizeof why);
        bool other = c && (!same_id(c->run_id, m->run_id) ||
                           !same_id(c->lineage, rtc_ck_lineage(m)));
        rt_ckpt_close(c);
        if (other)
            return true;
    }
    int fd = open(sd, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return true; /* cannot tell: leave it */
    }
    bool other = false;
    struct dirent *e;
    while (!other && (e = readdir(d))) {
        int f = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        unsigned char h[RTC_CK_HEADER];
        RtcCkHeader hd;
        if (f >= 0 && fstat(f, &st) == 0 && S_ISREG(st.st_mode) &&
            pread(f, h, sizeof h, 0) == (ssize_t)sizeof h &&
            rtc_ck_decode_header(h, e->d_name, &hd, why, sizeof why) == 0)
            other = !same_id(hd.run_id, m->run_id);
        if (f >= 0)
            close(f);
    }
    closedir(d);
    return other;
}

int rt_ckpt_prune(const char *dir, const RtCkptMeta *m, int keep, char *notes, size_t noteslen,
                  char *err, size_t errlen)
{
    if (notes && noteslen)
        notes[0] = 0;
    if (keep < 1)
        return rtc_err(err, errlen, "%s: keep %d: at least the newest step must be kept", dir,
                       keep);
    int64_t *steps;
    int n;
    char skipped[2048] = "";
    if (list_steps(dir, &steps, &n, skipped, sizeof skipped, err, errlen) != 0)
        return -1;
    if (skipped[0])
        note(notes, noteslen, "%.*s", (int)strlen(skipped) - 1, skipped);
    int complete = 0, rc = 0;
    char why[1024];
    for (int i = 0; i < n && rc == 0; i++) {
        char *sd = step_dir(dir, steps[i]);
        RtCkpt *c = open_checked(sd, steps[i], why, sizeof why);
        bool ok = c != NULL;
        /* Only this lineage's steps count and go: another run's, or a
         * rollback point of this run, are never removed. */
        bool mine = ok && same_id(c->run_id, m->run_id) && same_id(c->lineage, rtc_ck_lineage(m));
        rt_ckpt_close(c);
        /* Steps newer than the newest complete one are left alone: they
         * may be a save in progress of another job; older incomplete ones
         * can never become complete. */
        bool drop = ok ? mine && ++complete > keep : complete > 0 && !foreign(sd, m);
        if (drop) {
            rc = remove_step(sd, err, errlen);
            if (rc == 0)
                note(notes, noteslen, "%s: removed (%s)", sd,
                     ok ? "older than the steps kept" : "incomplete or damaged");
        }
        free(sd);
    }
    free(steps);
    if (rc == 0 && complete > 0)
        rc = rtc_fsync_dir(dir, err, errlen);
    return rc;
}

/* ------------------------------------------------------------ loading */

static int tensor_by_name(const void *a, const void *b)
{
    return strcmp(((const RtCkptTensor *)a)->name, ((const RtCkptTensor *)b)->name);
}

int rt_ckpt_check_program(const RtCkpt *c, int world, const char *plan_hash,
                          const RtCkptTensor *model, int nmodel, char *err, size_t errlen)
{
    int rc = rt_ckpt_check_model(c, model, nmodel, err, errlen);
    if (rc == 0 && c->world != world)
        rc = rtc_err(err, errlen, "%s: saved by %d ranks; this program runs on %d (load it with "
                     "rt_ckpt_read_any, which reshards)", c->dir, c->world, world);
    if (rc == 0 && strcmp(c->plan_hash, plan_hash ? plan_hash : "") != 0)
        rc = rtc_err(err, errlen, "%s: saved by a program of another plan (plan hash %s); this "
                     "program's plan hash is %s", c->dir, c->plan_hash, plan_hash);
    return rc;
}

int rt_ckpt_check_model(const RtCkpt *c, const RtCkptTensor *model, int nmodel, char *err,
                        size_t errlen)
{
    /* The model first: a different model is the most useful thing to say. */
    RtCkptTensor *want = rtc_xcalloc((size_t)nmodel, sizeof *want);
    RtCkptTensor *have = rtc_xcalloc((size_t)c->ntensors, sizeof *have);
    memcpy(want, model, (size_t)nmodel * sizeof *want);
    memcpy(have, c->tensors, (size_t)c->ntensors * sizeof *have);
    qsort(want, (size_t)nmodel, sizeof *want, tensor_by_name);
    qsort(have, (size_t)c->ntensors, sizeof *have, tensor_by_name);
    int rc = 0, i = 0, j = 0;
    char s1[256], s2[256];
    while (rc == 0 && (i < nmodel || j < c->ntensors)) {
        int cmp = i == nmodel ? 1 : j == c->ntensors ? -1 : strcmp(want[i].name, have[j].name);
        if (cmp < 0)
            rc = rtc_err(err, errlen, "%s: the checkpoint has no tensor '%s' (saved from another "
                         "model?)", c->dir, want[i].name);
        else if (cmp > 0)
            rc = rtc_err(err, errlen, "%s: the checkpoint holds tensor '%s', which this model "
                         "does not have (saved from another model?)", c->dir, have[j].name);
        else if (want[i].ndim != have[j].ndim ||
                 memcmp(want[i].shape, have[j].shape, (size_t)want[i].ndim * sizeof(int64_t)))
            rc = rtc_err(err, errlen, "%s: tensor '%s' has shape %s in the checkpoint; this "
                         "model's is %s (saved from another model or configuration)", c->dir,
                         want[i].name, rtc_shape_str(have[j].ndim, have[j].shape, s1, sizeof s1),
                         rtc_shape_str(want[i].ndim, want[i].shape, s2, sizeof s2));
        else if (want[i].dtype != have[j].dtype)
            rc = rtc_err(err, errlen, "%s: tensor '%s' is %s in the checkpoint; this model's is "
                         "%s", c->dir, want[i].name, rtc_dtype_name(have[j].dtype),
                         rtc_dtype_name(want[i].dtype));
        i += cmp <= 0;
        j += cmp >= 0;
    }
    free(want);
    free(have);
    return rc;
}

static void block_str(const RtcCkEntry *e, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < e->ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld:%lld", d ? ", " : "",
                              (long long)e->offset[d], (long long)(e->offset[d] + e->local[d]));
    if (k < len)
        snprintf(buf + k, len - k, "] elements %lld..%lld", (long long)e->flat_start,
                 (long long)(e->flat_start + e->flat_count));
}

/* A requested blob against the file's entry of the same name. */
static int blob_problem(const char *path, const RtCkptBlob *b, const RtcCkEntry *e, char *err,
                        size_t errlen)
{
    char s1[512], s2[512];
    if (b->ndim != e->ndim || memcmp(b->global, e->global, (size_t)b->ndim * sizeof(int64_t)))
        return rtc_err(err, errlen, "%s: blob '%s' is part of a tensor of shape %s in the "
                       "checkpoint; this program's is %s (saved from another model?)", path,
                       b->name, rtc_shape_str(e->ndim, e->global, s1, sizeof s1),
                       rtc_shape_str(b->ndim, b->global, s2, sizeof s2));
    if (b->dtype != e->dtype)
        return rtc_err(err, errlen, "%s: blob '%s' is %s in the checkpoint; this program's is %s",
                       path, b->name, rtc_dtype_name(e->dtype), rtc_dtype_name(b->dtype));
    RtcCkEntry want = *e;
    memcpy(want.offset, b->offset, sizeof want.offset);
    memcpy(want.local, b->local, sizeof want.local);
    want.flat_start = b->flat_start;
    want.flat_count = b->flat_count;
    if (memcmp(b->offset, e->offset, (size_t)b->ndim * sizeof(int64_t)) ||
        memcmp(b->local, e->local, (size_t)b->ndim * sizeof(int64_t)) ||
        b->flat_start != e->flat_start || b->flat_count != e->flat_count) {
        block_str(e, s1, sizeof s1);
        block_str(&want, s2, sizeof s2);
        return rtc_err(err, errlen, "%s: blob '%s' holds block %s in the checkpoint; this "
                       "program expects %s (saved under another plan?)", path, b->name, s1, s2);
    }
    if ((uint64_t)b->bytes != e->bytes)
        return rtc_err(err, errlen, "%s: blob '%s' holds %llu bytes, the program expects %lld",
                       path, b->name, (unsigned long long)e->bytes, (long long)b->bytes);
    return 0;
}

static const RtcCkEntry *sort_entries;
static const RtCkptBlob *sort_blobs;

static int entry_index_by_name(const void *a, const void *b)
{
    return strcmp(sort_entries[*(const int *)a].name, sort_entries[*(const int *)b].name);
}

static int blob_index_by_name(const void *a, const void *b)
{
    return strcmp(sort_blobs[*(const int *)a].name, sort_blobs[*(const int *)b].name);
}

/* where[j] = the blob named like entry j; every blob and entry matched once
 * (blob names are unique: rtc_ck_check_blobs). */
static int match_blobs(const char *path, const RtCkptBlob *b, int n, const RtcCkEntry *e,
                       uint32_t count, int *where, char *err, size_t errlen)
{
    int *ei = rtc_xcalloc(count ? count : 1, sizeof *ei), *bi = rtc_xcalloc((size_t)n, sizeof *bi);
    for (uint32_t j = 0; j < count; j++)
        ei[j] = (int)j;
    for (int i = 0; i < n; i++)
        bi[i] = i;
    sort_entries = e; /* qsort has no context argument in C11 */
    sort_blobs = b;
    qsort(ei, count, sizeof *ei, entry_index_by_name);
    qsort(bi, (size_t)n, sizeof *bi, blob_index_by_name);
    int rc = 0;
    for (uint32_t j = 1; j < count && rc == 0; j++)
        if (strcmp(e[ei[j - 1]].name, e[ei[j]].name) == 0)
            rc = rtc_err(err, errlen, "%s: corrupted checkpoint index (blob '%s' twice)", path,
                         e[ei[j]].name);
    int i = 0;
    uint32_t j = 0;
    while (rc == 0 && (i < n || j < count)) {
        int cmp = i == n ? 1 : j == count ? -1 : strcmp(b[bi[i]].name, e[ei[j]].name);
        if (cmp < 0)
            rc = rtc_err(err, errlen, "%s: the checkpoint has no blob '%s' (saved by another "
                         "model or plan?)", path, b[bi[i]].name);
        else if (cmp > 0)
            rc = rtc_err(err, errlen, "%s: the checkpoint holds blob '%s', which the program "
                         "does not expect (saved by another model or plan?)", path,
                         e[ei[j]].name);
        else if ((rc = blob_problem(path, &b[bi[i]], &e[ei[j]], err, errlen)) == 0)
            where[ei[j]] = bi[i];
        i += cmp <= 0;
        j += cmp >= 0;
    }
    free(ei);
    free(bi);
    return rc;
}

int rt_ckpt_read(const RtCkpt *c, int rank, const RtCkptBlob *blobs, int n, char *err,
                 size_t errlen)
{
    if (rank < 0 || rank >= c->world)
        return rtc_err(err, errlen, "%s: no rank %d in a checkpoint of %d ranks", c->dir, rank,
                       c->world);
    char *path = rtc_ck_rank_path(c->dir, rank);
    if (rtc_ck_check_blobs(path, blobs, n, err, errlen) != 0) {
        free(path);
        return -1;
    }
    int fd = -1;
    RtcCkHeader hd;
    char *hash = NULL;
    RtcCkEntry *e = NULL;
    unsigned char *raw = NULL;
    int rc = rtc_ck_rank_file_problem(c, rank, &fd, &hd, err, errlen);
    if (rc == 0)
        rc = rtc_ck_read_index(fd, path, &hd, &hash, &e, &raw, err, errlen);
    if (rc == 0 && strcmp(hash, c->plan_hash) != 0)
        rc = rtc_err(err, errlen, "%s: written by a program of plan hash %s, the manifest's is "
                     "%s (a rank file mixed in from another plan?)", path, hash, c->plan_hash);
    /* Match blobs and entries by name, both ways, in n log n (thousands of
     * blobs); where[j]: the blob of entry j. */
    int *where = rtc_xcalloc(hd.count ? hd.count : 1, sizeof *where);
    if (rc == 0)
        rc = match_blobs(path, blobs, n, e, hd.count, where, err, errlen);
    /* Verified but for the payload: stream it into the blobs, CRC as we go. */
    if (rc == 0) {
        uint32_t crc = rtc_crc32c(0, raw, RTC_CK_HEADER + hd.index_bytes);
        size_t sb = hd.payload_bytes < RTC_CK_STAGE ? (size_t)(hd.payload_bytes ? hd.payload_bytes
                                                                                : 1)
                                                    : RTC_CK_STAGE;
        unsigned char *stage = rtc_xmalloc(sb);
        int64_t base = (int64_t)(RTC_CK_HEADER + hd.index_bytes);
        for (uint32_t j = 0; j < hd.count && rc == 0; j++) {
            char *dst = blobs[where[j]].data;
            for (uint64_t done = 0; done < e[j].bytes && rc == 0;) {
                size_t k = e[j].bytes - done < sb ? (size_t)(e[j].bytes - done) : sb;
                rc = rtc_read_all(fd, stage, k, base + (int64_t)(e[j].pos + done), path, err,
                                  errlen);
                if (rc == 0) {
                    crc = rtc_crc32c(crc, stage, k);
                    rt_to_device(dst + done, stage, k);
                }
                done += k;
            }
        }
        free(stage);
        if (rc == 0 && crc != c->files[rank].crc)
            rc = rtc_err(err, errlen, "%s: corrupted checkpoint file: CRC-32C mismatch (stored "
                         "%08" PRIx32 ", computed %08" PRIx32 ")", path, c->files[rank].crc, crc);
    }
    free(where);
    if (e)
        rtc_ck_entries_free(e, hd.count);
    free(hash);
    free(raw);
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}
