/* safetensors_index.c: the public safetensors reader (rt_st_*), over one
 * file, a Hugging Face model directory or a shard index.
 *
 * rt_st_open(PATH):
 *   PATH a directory    DIR/model.safetensors if present, else
 *                       DIR/model.safetensors.index.json (transformers'
 *                       from_pretrained looks in this order)
 *   PATH *.index.json   an index: {"metadata": {...}, "weight_map": {tensor:
 *                       shard file}}; shard files sit beside the index
 *   otherwise           one safetensors file (safetensors.c)
 * An index is read strictly: only the keys "metadata" and "weight_map", shard
 * names that are plain file names, every mapped tensor present in its shard
 * and every tensor of a shard mapped to it. Tensors of all shards form one
 * name-sorted table, so rt_st_count/rt_st_name/rt_st_find work as on a file.
 * rt_st_pick says which of a tensor's two names (with and without the model
 * class's base_model_prefix) the files use. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "json.h"
#include "safetensors.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define MAX_INDEX_BYTES ((size_t)256 << 20)

typedef struct {
    const char *name; /* owned by the file */
    int file;
} Entry;

struct RtSt {
    char *path;
    int nfiles;
    RtcStFile **files;
    int n;
    Entry *t;         /* sorted by name */
    bool index;       /* opened through a shard index */
    int nmeta;        /* an index's "metadata": string values and number literals */
    char **meta_keys, **meta_vals;
};

static int by_name(const void *a, const void *b)
{
    return strcmp(((const Entry *)a)->name, ((const Entry *)b)->name);
}

void rt_st_close(RtSt *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->nfiles; i++)
        rtc_stf_close(st->files[i]);
    for (int i = 0; i < st->nmeta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_vals[i]);
    }
    free(st->meta_keys);
    free(st->meta_vals);
    free(st->files);
    free(st->t);
    free(st->path);
    free(st);
}

static bool is_kind(const char *path, mode_t kind)
{
    struct stat sb;
    return stat(path, &sb) == 0 && (sb.st_mode & S_IFMT) == kind;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = rtc_xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Every tensor of files [0, nfiles) into the sorted table. */
static int build_table(RtSt *st, char *err, size_t errlen)
{
    int n = 0;
    for (int f = 0; f < st->nfiles; f++)
        n += rtc_stf_count(st->files[f]);
    st->t = rtc_xcalloc((size_t)(n ? n : 1), sizeof *st->t);
    for (int f = 0; f < st->nfiles; f++)
        for (int i = 0; i < rtc_stf_count(st->files[f]); i++)
            st->t[st->n++] = (Entry){rtc_stf_name(st->files[f], i), f};
    qsort(st->t, (size_t)st->n, sizeof *st->t, by_name);
    for (int i = 1; i < st->n; i++)
        if (strcmp(st->t[i - 1].name, st->t[i].name) == 0)
            return rtc_err(err, errlen, "%s: tensor '%s' is in two shards", st->path, st->t[i].name);
    return 0;
}

/* qsort has no context argument: the weight map being sorted. */
static const JsonValue *sort_keys;

static int by_key(const void *a, const void *b)
{
    return strcmp(sort_keys->keys[*(const int *)a], sort_keys->keys[*(const int *)b]);
}

static char *read_text(const char *path, size_t *len, char *err, size_t errlen)
{
    /* rtc_open_regular: a FIFO named like an index would block open() for
     * a writer forever; it and a directory are refused by what they are. */
    struct stat sb;
    int fd = rtc_open_regular(path, "shard index", &sb, err, errlen);
    if (fd < 0)
        return NULL;
    char *text = NULL;
    if ((size_t)sb.st_size > MAX_INDEX_BYTES)
        rtc_err(err, errlen, "%s: %lld bytes: too large for a shard index", path,
                (long long)sb.st_size);
    else {
        text = rtc_xmalloc((size_t)sb.st_size + 1);
        if (rtc_read_all(fd, text, (size_t)sb.st_size, 0, path, err, errlen) != 0) {
            free(text);
            text = NULL;
        } else {
            *len = (size_t)sb.st_size;
            text[*len] = 0;
        }
    }
    close(fd);
    return text;
}

/* A shard name from an index: a plain file name beside the index. */
static bool plain_name(const JsonValue *v)
{
    return v->kind == JSON_STRING && v->len > 0 && strlen(v->text) == v->len &&
           !strchr(v->text, '/') && strcmp(v->text, ".") != 0 && strcmp(v->text, "..") != 0;
}

static int open_index(RtSt *st, const char *index, char *err, size_t errlen)
{
    st->index = true;
    size_t len = 0;
    char *text = read_text(index, &len, err, errlen);
    if (!text)
        return -1;
    char jerr[256];
    JsonValue *root = json_parse_limited(text, len, ST_MAX_ARRAY, jerr, sizeof jerr);
    free(text);
    if (!root)
        return rtc_err(err, errlen, "%s: malformed shard index: JSON error %s", index, jerr);
    int rc = 0;
    const JsonValue *map = NULL, *meta = NULL;
    if (root->kind != JSON_OBJECT)
        rc = rtc_err(err, errlen, "%s: a shard index is a JSON object", index);
    for (int i = 0; rc == 0 && i < root->n; i++) {
        if (strcmp(root->keys[i], "weight_map") == 0)
            map = &root->items[i];
        else if (strcmp(root->keys[i], "metadata") == 0)
            meta = &root->items[i];
        else
            rc = rtc_err(err, errlen, "%s: unknown key '%s' (a shard index has \"metadata\" and "
                         "\"weight_map\")", index, root->keys[i]);
    }
    if (rc == 0 && (!map || map->kind != JSON_OBJECT))
        rc = rtc_err(err, errlen, "%s: \"weight_map\" is missing or not an object", index);
    if (rc == 0 && meta && meta->kind != JSON_OBJECT)
        rc = rtc_err(err, errlen, "%s: \"metadata\" is not an object", index);
    if (rc == 0 && meta) {
        st->meta_keys = rtc_xcalloc((size_t)(meta->n ? meta->n : 1), sizeof(char *));
        st->meta_vals = rtc_xcalloc((size_t)(meta->n ? meta->n : 1), sizeof(char *));
        for (int i = 0; i < meta->n; i++) {
            const JsonValue *v = &meta->items[i];
            if (strcmp(meta->keys[i], "total_size") == 0 && json_uint(v, &(int64_t){0}) != 0)
                rc = rtc_err(err, errlen, "%s: metadata.total_size is not a byte count", index);
            if (v->kind != JSON_STRING && v->kind != JSON_NUMBER)
                continue;
            st->meta_keys[st->nmeta] = rtc_xstrdup(meta->keys[i]);
            st->meta_vals[st->nmeta++] = rtc_xstrdup(v->text);
        }
    }
    /* The distinct shard files, in order of first mention. */
    char *dir = rtc_xstrdup(index);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        strcpy(dir, ".");
    int *file_of = map ? rtc_xcalloc((size_t)(map->n ? map->n : 1), sizeof *file_of) : NULL;
    const char **names = map ? rtc_xcalloc((size_t)(map->n ? map->n : 1), sizeof *names) : NULL;
    for (int i = 0; rc == 0 && i < map->n; i++) {
        const JsonValue *v = &map->items[i];
        if (!plain_name(v)) {
            rc = rtc_err(err, errlen, "%s: weight_map entry '%s' must name a shard file beside the "
                         "index", index, map->keys[i]);
            break;
        }
        int f = 0;
        while (f < st->nfiles && strcmp(names[f], v->text) != 0)
            f++;
        if (f == st->nfiles) {
            char *path = join(dir, v->text);
            RtcStFile *sf = rtc_stf_open(path, err, errlen);
            free(path);
            if (!sf) {
                rc = -1;
                break;
            }
            st->files = realloc(st->files, sizeof *st->files * (size_t)(st->nfiles + 1));
            if (!st->files)
                rt_fatal("ptdrt: out of host memory");
            names[f] = v->text;
            st->files[st->nfiles++] = sf;
        }
        file_of[i] = f;
        if (rtc_stf_find(st->files[f], map->keys[i], NULL, NULL, NULL) < 0)
            rc = rtc_err(err, errlen, "%s: weight_map puts '%s' in %s, which has no such tensor",
                         index, map->keys[i], v->text);
    }
    if (rc == 0 && map->n == 0)
        rc = rtc_err(err, errlen, "%s: the weight_map is empty", index);
    if (rc == 0)
        rc = build_table(st, err, errlen);
    /* Every tensor of a shard is the one the index maps there: the map's
     * keys sorted once and searched (a scan per tensor was quadratic). */
    int *order = NULL;
    if (rc == 0) {
        order = rtc_xcalloc((size_t)map->n, sizeof *order);
        for (int i = 0; i < map->n; i++)
            order[i] = i;
        sort_keys = map;
        qsort(order, (size_t)map->n, sizeof *order, by_key);
    }
    for (int i = 0; rc == 0 && i < st->n; i++) {
        const Entry *e = &st->t[i];
        int lo = 0, hi = map->n, k = map->n;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2, c = strcmp(map->keys[order[mid]], e->name);
            if (c == 0) {
                k = order[mid];
                break;
            }
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (k == map->n || file_of[k] != e->file)
            rc = rtc_err(err, errlen, "%s: shard %s holds tensor '%s', which the weight_map %s",
                         index, names[e->file], e->name,
                         k == map->n ? "does not list" : "puts in another shard");
    }
    free(order);
    free(names);
    free(file_of);
    free(dir);
    json_free(root);
    return rc;
}

RtSt *rt_st_open(const char *path, char *err, size_t errlen)
{
    RtSt *st = rtc_xcalloc(1, sizeof *st);
    st->path = rtc_xstrdup(path);
    int rc;
    if (is_kind(path, S_IFDIR)) {
        char *index = join(path, INDEX_NAME), *single = join(path, SINGLE_NAME);
        if (is_kind(single, S_IFREG)) {
            st->files = rtc_xcalloc(1, sizeof *st->files);
            rc = (st->files[0] = rtc_stf_open(single, err, errlen)) ? 0 : -1;
            st->nfiles = st->files[0] ? 1 : 0;
            if (rc == 0)
                rc = build_table(st, err, errlen);
        } else if (access(index, F_OK) == 0) {
            /* There but no regular file (a FIFO, a directory): opening it
             * refuses it by what it is. */
            rc = open_index(st, index, err, errlen);
        } else if (access(single, F_OK) == 0) {
            RtcStFile *f = rtc_stf_open(single, err, errlen); /* the same: never a file here */
            rc = f ? rtc_err(err, errlen, "%s: not a regular file", single) : -1;
            rtc_stf_close(f);
        } else {
            rc = rtc_err(err, errlen, "%s: a Hugging Face model directory holds %s or %s; this "
                         "one holds neither", path, INDEX_NAME, SINGLE_NAME);
        }
        free(index);
        free(single);
    } else if (ends_with(path, ".index.json")) {
        rc = open_index(st, path, err, errlen);
    } else {
        st->files = rtc_xcalloc(1, sizeof *st->files);
        rc = (st->files[0] = rtc_stf_open(path, err, errlen)) ? 0 : -1;
        st->nfiles = st->files[0] ? 1 : 0;
        if (rc == 0)
            rc = build_table(st, err, errlen);
    }
    if (rc != 0) {
        rt_st_close(st);
        return NULL;
    }
    return st;
}

int rt_st_count(const RtSt *st)
{
    return st->n;
}

const char *rt_st_name(const RtSt *st, int i)
{
    return i >= 0 && i < st->n ? st->t[i].name : NULL;
}

static const Entry *lookup(const RtSt *st, const char *name)
{
    Entry key = {name, 0};
    return bsearch(&key, st->t, (size_t)st->n, sizeof *st->t, by_name);
}

int rt_st_find(const RtSt *st, const char *name, int *ndim, int64_t *shape, const char **dtype)
{
    const Entry *e = lookup(st, name);
    if (!e)
        return -1;
    rtc_stf_find(st->files[e->file], name, ndim, shape, dtype);
    return (int)(e - st->t);
}

const char *rt_st_metadata(const RtSt *st, const char *key)
{
    if (st->index) {
        for (int i = 0; i < st->nmeta; i++)
            if (strcmp(st->meta_keys[i], key) == 0)
                return st->meta_vals[i];
        return NULL;
    }
    return rtc_stf_metadata(st->files[0], key);
}

int rt_st_read(const RtSt *st, const char *name, bool transposed, int part, int nparts, int rank,
               const int64_t *global, const int64_t *offset, const int64_t *local, float *dst,
               char *err, size_t errlen)
{
    const Entry *e = lookup(st, name);
    if (!e)
        return rtc_err(err, errlen, "%s: no tensor '%s'", st->path, name);
    return rtc_stf_read(st->files[e->file], name, transposed, part, nparts, rank, global, offset,
                        local, dst, err, errlen);
}

int64_t rt_st_bytes_read(const RtSt *st)
{
    int64_t n = 0;
    for (int i = 0; i < st->nfiles; i++)
        n += rtc_stf_bytes_read(st->files[i]);
    return n;
}

/* " (in SHARD)" for a tensor of a sharded directory or index, else "". */
static void shard_of(const RtSt *st, const Entry *e, char *buf, size_t n)
{
    const char *f = rtc_stf_path(st->files[e->file]), *slash = strrchr(f, '/');
    if (st->index)
        snprintf(buf, n, " (in %s)", slash ? slash + 1 : f);
    else
        buf[0] = 0;
}

const char *rt_st_pick(const RtSt *st, const char *name, const char *alt, char *err,
                       size_t errlen)
{
    const Entry *a = lookup(st, name), *b = alt ? lookup(st, alt) : NULL;
    if (a && b) {
        char wa[300], wb[300];
        shard_of(st, a, wa, sizeof wa);
        shard_of(st, b, wb, sizeof wb);
        rtc_err(err, errlen, "%s: '%s'%s and '%s'%s are both there: one tensor under both of its "
                "names (with and without the model's base_model_prefix); which one is meant is "
                "not guessed", st->path, name, wa, alt, wb);
        return NULL;
    }
    if (a || b)
        return a ? a->name : b->name;
    if (alt)
        rtc_err(err, errlen, "%s: no tensor '%s' (nor '%s')", st->path, name, alt);
    else
        rtc_err(err, errlen, "%s: no tensor '%s'", st->path, name);
    return NULL;
}
