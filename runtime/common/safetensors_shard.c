/* safetensors_shard.c: the public safetensors writer (rt_st_writer_*): one
 * file, or a Hugging Face model directory of shards and an index.
 *
 * A directory is laid out as transformers' save_pretrained does it (through
 * huggingface_hub's split_torch_state_dict_into_shards): tensors are taken in
 * the order declared; one larger than the shard limit gets a shard of its
 * own, otherwise a tensor that would take the current shard over the limit
 * starts a new one. One shard is written as DIR/model.safetensors without an
 * index; n shards as DIR/model-00001-of-0000n.safetensors ... with
 * DIR/model.safetensors.index.json: {"metadata": {"total_size": bytes of all
 * tensors}, "weight_map": {tensor: shard}} (keys sorted, two-space indent).
 * Every shard is written to a temporary and renamed at close, then the index;
 * model files of an earlier export that the new one does not use are removed
 * next, so the directory never mixes two exports under one index.
 *
 * A directory export may also hold config.json and generation_config.json
 * (rt_st_writer_add_file), written last, each atomically; config.json the
 * very last. config.json is what makes a directory a model transformers
 * loads, so it marks a complete export: close removes the one an earlier
 * export left before it moves the first shard into place. An export that
 * fails or is killed half-way leaves no config.json, and one that completes
 * has removed every stale file before its config.json appears. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "safetensors.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define CONFIG_NAME "config.json"

/* The other files of an export directory, in the order close writes them. */
static const char *const side_names[] = {"generation_config.json", CONFIG_NAME};
enum { NSIDE = sizeof side_names / sizeof side_names[0] };

typedef struct {
    const char *name; /* owned by decl */
    int file;
} WEntry;

struct RtStWriter {
    char *dir;        /* NULL: a single file */
    int nfiles;
    RtcStFileWriter **files;
    char **file_names;
    int n;
    WEntry *map;      /* sorted by name */
    char **decl;      /* copies of the declared names */
    int64_t total;    /* bytes of all tensors */
    unsigned char *side[NSIDE]; /* rt_st_writer_add_file's copies, by side_names */
    size_t side_len[NSIDE];
    bool has_side[NSIDE];
};

static int by_name(const void *a, const void *b)
{
    return strcmp(((const WEntry *)a)->name, ((const WEntry *)b)->name);
}

static void writer_free(RtStWriter *w)
{
    for (int i = 0; i < w->nfiles; i++)
        free(w->file_names[i]);
    for (int i = 0; i < w->n; i++)
        free(w->decl[i]);
    for (int i = 0; i < NSIDE; i++)
        free(w->side[i]);
    free(w->file_names);
    free(w->files);
    free(w->map);
    free(w->decl);
    free(w->dir);
    free(w);
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = rtc_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* mkdir -p */
static int make_dirs(const char *dir, char *err, size_t errlen)
{
    char *p = rtc_xstrdup(dir);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s && *s != '/')
            continue;
        char c = *s;
        *s = 0;
        struct stat sb;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            rc = rtc_err(err, errlen, "%s: cannot create directory: %s", p, strerror(errno));
        else if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
            rc = rtc_err(err, errlen, "%s: exists and is not a directory", p);
        *s = c;
        if (rc != 0 || !c)
            break;
    }
    free(p);
    return rc;
}

static int dtype_bytes(const char *dtype)
{
    return dtype && !strcmp(dtype, "F32") ? 4 : dtype && (!strcmp(dtype, "BF16") || !strcmp(dtype, "F16")) ? 2 : 0;
}

/* Record the declared names (sorted, unique) with the file each goes to. */
static int make_map(RtStWriter *w, const char *where, const RtStTensor *t, const int *file, int n,
                    char *err, size_t errlen)
{
    w->decl = rtc_xcalloc((size_t)(n ? n : 1), sizeof *w->decl);
    w->map = rtc_xcalloc((size_t)(n ? n : 1), sizeof *w->map);
    for (int i = 0; i < n; i++) {
        w->decl[i] = rtc_xstrdup(t[i].name ? t[i].name : "");
        w->map[i] = (WEntry){w->decl[i], file[i]};
        w->n++;
    }
    qsort(w->map, (size_t)n, sizeof *w->map, by_name);
    for (int i = 1; i < n; i++)
        if (strcmp(w->map[i - 1].name, w->map[i].name) == 0)
            return rtc_err(err, errlen, "%s: tensor name '%s' appears twice", where, w->map[i].name);
    return 0;
}

static void abort_files(RtStWriter *w)
{
    for (int i = 0; i < w->nfiles; i++)
        if (w->files[i])
            rtc_stfw_abort(w->files[i]);
}

RtStWriter *rt_st_writer_open(const char *path, const RtStTensor *tensors, int n,
                              const char *dtype, char *err, size_t errlen)
{
    if (n < 0) {
        rtc_err(err, errlen, "%s: negative tensor count", path);
        return NULL;
    }
    RtStWriter *w = rtc_xcalloc(1, sizeof *w);
    int *file = rtc_xcalloc((size_t)(n ? n : 1), sizeof *file);
    int rc = make_map(w, path, tensors, file, n, err, errlen);
    free(file);
    w->files = rtc_xcalloc(1, sizeof *w->files);
    w->file_names = rtc_xcalloc(1, sizeof *w->file_names);
    if (rc == 0 && !(w->files[0] = rtc_stfw_open(path, tensors, n, dtype, err, errlen)))
        rc = -1;
    w->file_names[0] = rtc_xstrdup(path);
    w->nfiles = 1;
    if (rc != 0) {
        abort_files(w);
        writer_free(w);
        return NULL;
    }
    return w;
}

RtStWriter *rt_st_writer_open_dir(const char *dir, const RtStTensor *tensors, int n,
                                  const char *dtype, int64_t max_shard_bytes, char *err,
                                  size_t errlen)
{
    int esize = dtype_bytes(dtype);
    if (!esize) {
        rtc_err(err, errlen, "%s: safetensors export dtype must be F32, BF16 or F16, not %s", dir,
                dtype ? dtype : "(null)");
        return NULL;
    }
    if (n < 1 || max_shard_bytes < 1) {
        rtc_err(err, errlen, "%s: %d tensors with a shard limit of %lld bytes", dir, n,
                (long long)max_shard_bytes);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (tensors[i].ndim < 0 || tensors[i].ndim > RT_ST_MAXDIM) {
            rtc_err(err, errlen, "%s: tensor '%s' has %d dims (at most %d)", dir,
                    tensors[i].name ? tensors[i].name : "", tensors[i].ndim, RT_ST_MAXDIM);
            return NULL;
        }
    /* Assign shards as huggingface_hub does. */
    int *shard = rtc_xcalloc((size_t)n, sizeof *shard);
    int nshards = 0, cur = -1;
    int64_t cur_bytes = 0, total = 0;
    for (int i = 0; i < n; i++) {
        int64_t b = rtc_numel(tensors[i].ndim, tensors[i].shape) * esize;
        total += b;
        if (b > max_shard_bytes) {
            shard[i] = nshards++; /* its own shard, numbered before the open one */
            continue;
        }
        if (cur < 0 || cur_bytes + b > max_shard_bytes) {
            cur = nshards++;
            cur_bytes = 0;
        }
        shard[i] = cur;
        cur_bytes += b;
    }
    /* Shard numbers in the order huggingface_hub appends them: an oversized
     * tensor's shard is appended at once, the open shard when it closes. */
    int *order = rtc_xcalloc((size_t)nshards, sizeof *order), next = 0;
    {
        int open = -1;
        for (int i = 0; i < n; i++) {
            bool alone = rtc_numel(tensors[i].ndim, tensors[i].shape) * esize > max_shard_bytes;
            if (alone) {
                order[shard[i]] = next++;
                continue;
            }
            if (shard[i] != open) {
                if (open >= 0)
                    order[open] = next++;
                open = shard[i];
            }
        }
        if (open >= 0)
            order[open] = next++;
    }
    for (int i = 0; i < n; i++)
        shard[i] = order[shard[i]];
    free(order);

    RtStWriter *w = rtc_xcalloc(1, sizeof *w);
    w->dir = rtc_xstrdup(dir);
    w->total = total;
    int rc = make_map(w, dir, tensors, shard, n, err, errlen);
    if (rc == 0)
        rc = make_dirs(dir, err, errlen);
    w->files = rtc_xcalloc((size_t)nshards, sizeof *w->files);
    w->file_names = rtc_xcalloc((size_t)nshards, sizeof *w->file_names);
    RtStTensor *mine = rtc_xcalloc((size_t)n, sizeof *mine);
    for (int s = 0; s < nshards && rc == 0; s++) {
        char name[64];
        if (nshards == 1)
            snprintf(name, sizeof name, "%s", SINGLE_NAME);
        else
            snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, nshards);
        int k = 0;
        for (int i = 0; i < n; i++)
            if (shard[i] == s)
                mine[k++] = tensors[i];
        char *path = join(dir, name);
        w->file_names[s] = rtc_xstrdup(name);
        w->nfiles++;
        if (!(w->files[s] = rtc_stfw_open(path, mine, k, dtype, err, errlen)))
            rc = -1;
        free(path);
    }
    free(mine);
    free(shard);
    if (rc != 0) {
        abort_files(w);
        writer_free(w);
        return NULL;
    }
    return w;
}

static const WEntry *find(const RtStWriter *w, const char *name)
{
    WEntry key = {name, 0};
    return bsearch(&key, w->map, (size_t)w->n, sizeof *w->map, by_name);
}

int rt_st_writer_put(RtStWriter *w, const char *name, bool transposed, int part, int nparts,
                     int rank, const int64_t *global, const int64_t *offset, const int64_t *local,
                     const float *src, char *err, size_t errlen)
{
    const WEntry *e = find(w, name);
    if (!e)
        return rtc_err(err, errlen, "%s: tensor '%s' was not declared",
                       w->dir ? w->dir : w->file_names[0], name);
    return rtc_stfw_put(w->files[e->file], name, transposed, part, nparts, rank, global, offset,
                        local, src, err, errlen);
}

int rt_st_writer_add_file(RtStWriter *w, const char *name, const void *data, size_t len,
                          char *err, size_t errlen)
{
    if (!w->dir)
        return rtc_err(err, errlen, "%s: %s goes into a model directory, not beside a single "
                       "safetensors file", w->file_names[0], name);
    for (int i = 0; i < NSIDE; i++) {
        if (strcmp(name, side_names[i]) != 0)
            continue;
        if (w->has_side[i])
            return rtc_err(err, errlen, "%s: %s added twice", w->dir, name);
        w->side[i] = rtc_xmalloc(len ? len : 1);
        if (len)
            memcpy(w->side[i], data, len);
        w->side_len[i] = len;
        w->has_side[i] = true;
        return 0;
    }
    return rtc_err(err, errlen, "%s: '%s' is not a file an export writes (config.json or "
                   "generation_config.json)", w->dir, name);
}

static void add(RtcStr *b, const char *s) { rtc_str_add(b, s, strlen(s)); }

static void str_json(RtcStr *b, const char *s)
{
    rtc_str_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p;
            rtc_str_add(b, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            rtc_str_add(b, esc, 6);
        } else {
            rtc_str_add(b, (const char *)p, 1);
        }
    }
    rtc_str_add(b, "\"", 1);
}

/* DIR/name holds data[0, len), or is as it was. */
static int write_atomic(const char *dir, const char *name, const void *data, size_t len,
                        char *err, size_t errlen)
{
    char *path = join(dir, name);
    RtcAtomic a;
    int rc = rtc_atomic_open(&a, path, err, errlen);
    if (rc == 0) {
        rc = len ? rtc_write_all(a.fd, data, len, 0, path, err, errlen) : 0;
        if (rc == 0)
            rc = rtc_atomic_commit(&a, err, errlen);
        else
            rtc_atomic_abort(&a);
    }
    free(path);
    return rc;
}

/* The index as json.dumps(index, indent=2, sort_keys=True) + "\n" writes it. */
static int write_index(const RtStWriter *w, char *err, size_t errlen)
{
    RtcStr b = {0};
    char num[64];
    snprintf(num, sizeof num, "%lld", (long long)w->total);
    add(&b, "{\n  \"metadata\": {\n    \"total_size\": ");
    add(&b, num);
    add(&b, "\n  },\n  \"weight_map\": {\n");
    for (int i = 0; i < w->n; i++) {
        add(&b, "    ");
        str_json(&b, w->map[i].name);
        add(&b, ": ");
        str_json(&b, w->file_names[w->map[i].file]);
        add(&b, i + 1 < w->n ? ",\n" : "\n");
    }
    add(&b, "  }\n}\n");
    int rc = write_atomic(w->dir, INDEX_NAME, b.s, b.len, err, errlen);
    free(b.s);
    return rc;
}

/* "model-00001-of-00003.safetensors" */
static bool shard_name(const char *s)
{
    unsigned a, b;
    char tail[32];
    return strlen(s) == 32 && sscanf(s, "model-%5u-of-%5u%31s", &a, &b, tail) == 3 &&
           strcmp(tail, ".safetensors") == 0;
}

/* Model files an earlier export left that this one does not use. */
static void remove_stale(const RtStWriter *w)
{
    DIR *d = opendir(w->dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *s = e->d_name;
        int side = -1;
        for (int i = 0; i < NSIDE; i++)
            if (strcmp(s, side_names[i]) == 0)
                side = i;
        if (strcmp(s, SINGLE_NAME) != 0 && strcmp(s, INDEX_NAME) != 0 && !shard_name(s) &&
            side < 0)
            continue;
        /* This export's own side files are not written yet. */
        bool used = (w->nfiles > 1 && strcmp(s, INDEX_NAME) == 0) ||
                    (side >= 0 && w->has_side[side]);
        for (int i = 0; i < w->nfiles; i++)
            used |= strcmp(s, w->file_names[i]) == 0;
        if (!used) {
            char *p = join(w->dir, s);
            unlink(p);
            free(p);
        }
    }
    closedir(d);
}

/* An earlier export's config.json goes before this one's first shard moves
 * in: until this export's is written, DIR is not a complete model. */
static int unmark(const RtStWriter *w, char *err, size_t errlen)
{
    char *path = join(w->dir, CONFIG_NAME);
    int rc = 0;
    if (unlink(path) == 0)
        rc = rtc_fsync_dir(w->dir, err, errlen);
    else if (errno != ENOENT)
        rc = rtc_err(err, errlen, "%s: cannot remove the earlier export's %s before replacing "
                     "its weights: %s", w->dir, CONFIG_NAME, strerror(errno));
    free(path);
    return rc;
}

int rt_st_writer_close(RtStWriter *w, char *err, size_t errlen)
{
    int rc = w->dir ? unmark(w, err, errlen) : 0;
    for (int i = 0; i < w->nfiles; i++) {
        RtcStFileWriter *f = w->files[i];
        w->files[i] = NULL;
        if (rc == 0)
            rc = rtc_stfw_close(f, err, errlen);
        else
            rtc_stfw_abort(f);
    }
    if (rc == 0 && w->dir && w->nfiles > 1)
        rc = write_index(w, err, errlen);
    if (rc == 0 && w->dir)
        remove_stale(w);
    for (int i = 0; rc == 0 && w->dir && i < NSIDE; i++) /* config.json last */
        if (w->has_side[i])
            rc = write_atomic(w->dir, side_names[i], w->side[i], w->side_len[i], err, errlen);
    writer_free(w);
    return rc;
}

void rt_st_writer_abort(RtStWriter *w)
{
    if (!w)
        return;
    abort_files(w);
    writer_free(w);
}
