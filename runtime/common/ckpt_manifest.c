/* ckpt_manifest.c: the manifest that makes a checkpoint step valid.
 *
 * DIR/step-N/manifest.json is JSON followed by one line "crc32c XXXXXXXX"
 * (the CRC-32C of the JSON text, in hex), written by rank 0 after every rank
 * has written and synced its file:
 *   {"format": "ptdc checkpoint", "version": 2, "step": N,
 *    "data_position": P, "world_size": W, "run_id": "<32 hex digits>",
 *    "lineage": "<32 hex digits>",
 *    "parent": {"lineage": "<32 hex digits>", "step": S},  (a rollback's only)
 *    "plan_hash": "...", "optimizer": "adamw",  (absent before LAMB: adamw)
 *    "tensors": [{"name": "wte", "dtype": "F32", "shape": [50304, 768]}, ...],
 *    "files": [{"name": "rank00000.ckpt", "rank": 0, "bytes": B,
 *               "crc32c": "<8 hex digits>"}, ...]}
 * Its rename into place is the commit: a step without one is incomplete. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "json.h"

#define MF_MAX_BYTES ((uint64_t)256 << 20)
#define MF_CRC_LINE 16 /* "crc32c XXXXXXXX\n" */

char *rtc_ck_rank_path(const char *stepdir, int rank)
{
    size_t n = strlen(stepdir) + 32;
    char *p = rtc_xmalloc(n);
    snprintf(p, n, "%s/rank%05d.ckpt", stepdir, rank);
    return p;
}

void rt_run_id_hex(const uint8_t id[RT_RUN_ID_BYTES], char out[2 * RT_RUN_ID_BYTES + 1])
{
    for (int i = 0; i < RT_RUN_ID_BYTES; i++)
        snprintf(out + 2 * i, 3, "%02x", id[i]);
}

int rtc_mf_write(const char *stepdir, const RtCkptMeta *m, const RtCkptRecord *recs,
                 const RtCkptTensor *model, int nmodel, char *err, size_t errlen)
{
    char id[2 * RT_RUN_ID_BYTES + 1], lin[2 * RT_RUN_ID_BYTES + 1];
    rt_run_id_hex(m->run_id, id);
    rt_run_id_hex(rtc_ck_lineage(m), lin);
    RtcStr b = {0};
    rtc_str_fmt(&b,
                "{\n  \"format\": \"ptdc checkpoint\",\n  \"version\": 2,\n  \"step\": %lld,\n"
                "  \"data_position\": %lld,\n  \"world_size\": %d,\n  \"run_id\": \"%s\",\n"
                "  \"lineage\": \"%s\",\n",
                (long long)m->step, (long long)m->data_pos, m->world, id, lin);
    if (rtc_ck_has_parent(m)) {
        char par[2 * RT_RUN_ID_BYTES + 1];
        rt_run_id_hex(m->parent_lineage, par);
        rtc_str_fmt(&b, "  \"parent\": {\"lineage\": \"%s\", \"step\": %lld},\n", par,
                    (long long)m->parent_step);
    }
    rtc_str_fmt(&b, "  \"plan_hash\": ");
    rtc_str_json(&b, m->plan_hash);
    rtc_str_fmt(&b, ",\n  \"optimizer\": ");
    rtc_str_json(&b, m->optimizer ? m->optimizer : "adamw");
    rtc_str_fmt(&b, ",\n  \"tensors\": [");
    for (int i = 0; i < nmodel; i++) {
        rtc_str_fmt(&b, "%s\n    {\"name\": ", i ? "," : "");
        rtc_str_json(&b, model[i].name);
        rtc_str_fmt(&b, ", \"dtype\": \"%s\", \"shape\": [", rtc_dtype_name(model[i].dtype));
        for (int d = 0; d < model[i].ndim; d++)
            rtc_str_fmt(&b, "%s%lld", d ? ", " : "", (long long)model[i].shape[d]);
        rtc_str_fmt(&b, "]}");
    }
    rtc_str_fmt(&b, "\n  ],\n  \"files\": [");
    for (int r = 0; r < m->world; r++)
        rtc_str_fmt(&b,
                    "%s\n    {\"name\": \"rank%05d.ckpt\", \"rank\": %d, \"bytes\": %lld, "
                    "\"crc32c\": \"%08" PRIx32 "\"}",
                    r ? "," : "", r, r, (long long)recs[r].bytes, recs[r].crc);
    rtc_str_fmt(&b, "\n  ]\n}\n");
    rtc_str_fmt(&b, "crc32c %08" PRIx32 "\n", rtc_crc32c(0, b.s, b.len));

    size_t n = strlen(stepdir) + sizeof RTC_MF_NAME + 1;
    char *path = rtc_xmalloc(n);
    snprintf(path, n, "%s/%s", stepdir, RTC_MF_NAME);
    RtcAtomic a;
    int rc = rtc_atomic_open(&a, path, err, errlen);
    if (rc == 0) {
        rc = rtc_write_all(a.fd, b.s, b.len, -1, path, err, errlen);
        if (rc != 0)
            rtc_atomic_abort(&a);
        else
            rc = rtc_atomic_commit(&a, err, errlen);
    }
    free(path);
    free(b.s);
    return rc;
}

void rt_ckpt_close(RtCkpt *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->ntensors; i++)
        free((char *)c->tensors[i].name);
    free(c->tensors);
    free(c->files);
    free(c->plan_hash);
    free(c->optimizer);
    free(c->dir);
    free(c);
}

static int hexval(int ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Exactly 2 * n lowercase hex digits into out[n]. */
static bool parse_hex(const JsonValue *v, uint8_t *out, int n)
{
    if (!v || v->kind != JSON_STRING || v->len != (size_t)(2 * n))
        return false;
    for (int i = 0; i < n; i++) {
        int hi = hexval(v->text[2 * i]), lo = hexval(v->text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

static bool get_int(const JsonValue *obj, const char *key, int64_t *out)
{
    return json_uint(json_get(obj, key), out) == 0;
}

/* The JSON fields into c; a sentence in why on failure. */
static bool parse_fields(const JsonValue *root, RtCkpt *c, char *why, size_t whylen)
{
    const JsonValue *fmt = json_get(root, "format"), *hash = json_get(root, "plan_hash");
    const JsonValue *tensors = json_get(root, "tensors"), *files = json_get(root, "files");
    int64_t version, world;
    if (root->kind != JSON_OBJECT || !fmt || fmt->kind != JSON_STRING ||
        strcmp(fmt->text, "ptdc checkpoint") != 0)
        return rtc_err(why, whylen, "not a ptdc checkpoint manifest"), false;
    if (!get_int(root, "version", &version) || version != 2)
        return rtc_err(why, whylen, "manifest version is not 2"), false;
    if (!get_int(root, "step", &c->step) || !get_int(root, "data_position", &c->data_pos))
        return rtc_err(why, whylen, "no valid step or data_position"), false;
    if (!get_int(root, "world_size", &world) || world < 1 || world > (1 << 24))
        return rtc_err(why, whylen, "no valid world_size"), false;
    c->world = (int)world;
    if (!parse_hex(json_get(root, "run_id"), c->run_id, RT_RUN_ID_BYTES))
        return rtc_err(why, whylen, "no valid run_id (32 hex digits)"), false;
    /* Lineage and parent came later: a manifest without them is its run's
     * first lineage, with no parent. */
    const JsonValue *lin = json_get(root, "lineage"), *par = json_get(root, "parent");
    memcpy(c->lineage, c->run_id, RT_RUN_ID_BYTES);
    if (lin && !parse_hex(lin, c->lineage, RT_RUN_ID_BYTES))
        return rtc_err(why, whylen, "no valid lineage (32 hex digits)"), false;
    c->parent_step = -1;
    if (par && (par->kind != JSON_OBJECT ||
                !parse_hex(json_get(par, "lineage"), c->parent_lineage, RT_RUN_ID_BYTES) ||
                !get_int(par, "step", &c->parent_step)))
        return rtc_err(why, whylen, "malformed parent (lineage and step)"), false;
    if (!hash || hash->kind != JSON_STRING || hash->len > RT_PLAN_HASH_MAX ||
        strlen(hash->text) != hash->len)
        return rtc_err(why, whylen, "no valid plan_hash"), false;
    c->plan_hash = rtc_xstrdup(hash->text);
    const JsonValue *opt = json_get(root, "optimizer");
    if (opt && (opt->kind != JSON_STRING || !opt->len || opt->len > 64 ||
                strlen(opt->text) != opt->len))
        return rtc_err(why, whylen, "no valid optimizer"), false;
    c->optimizer = rtc_xstrdup(opt ? opt->text : "adamw");
    if (!tensors || tensors->kind != JSON_ARRAY)
        return rtc_err(why, whylen, "no tensors list"), false;
    c->tensors = rtc_xcalloc((size_t)tensors->n, sizeof *c->tensors);
    for (int i = 0; i < tensors->n; i++) {
        const JsonValue *t = &tensors->items[i], *nm = json_get(t, "name");
        const JsonValue *dt = json_get(t, "dtype"), *sh = json_get(t, "shape");
        RtCkptTensor *o = &c->tensors[i];
        if (t->kind != JSON_OBJECT || !nm || nm->kind != JSON_STRING || !nm->len ||
            strlen(nm->text) != nm->len || !dt || dt->kind != JSON_STRING ||
            !(o->dtype = rtc_dtype_parse(dt->text)) || !sh || sh->kind != JSON_ARRAY ||
            sh->n > RT_CKPT_MAXDIM)
            return rtc_err(why, whylen, "tensor %d is malformed", i), false;
        o->name = rtc_xstrdup(nm->text);
        c->ntensors = i + 1;
        o->ndim = sh->n;
        for (int d = 0; d < sh->n; d++)
            if (json_uint(&sh->items[d], &o->shape[d]) != 0)
                return rtc_err(why, whylen, "tensor '%s' has a malformed shape", o->name), false;
    }
    if (!files || files->kind != JSON_ARRAY || files->n != c->world)
        return rtc_err(why, whylen, "it lists %d rank files for a world of %d",
                       files && files->kind == JSON_ARRAY ? files->n : 0, c->world),
               false;
    c->files = rtc_xcalloc((size_t)c->world, sizeof *c->files);
    for (int i = 0; i < files->n; i++) {
        const JsonValue *f = &files->items[i], *nm = json_get(f, "name");
        int64_t rank, bytes;
        uint8_t crc[4];
        char want[32];
        if (f->kind != JSON_OBJECT || !get_int(f, "rank", &rank) || rank != i ||
            !get_int(f, "bytes", &bytes) || !parse_hex(json_get(f, "crc32c"), crc, 4))
            return rtc_err(why, whylen, "rank file entry %d is malformed", i), false;
        /* The name is fixed by the rank: a manifest never points elsewhere. */
        snprintf(want, sizeof want, "rank%05d.ckpt", i);
        if (!nm || nm->kind != JSON_STRING || strcmp(nm->text, want) != 0 ||
            nm->len != strlen(want))
            return rtc_err(why, whylen, "rank file entry %d is not named %s", i, want), false;
        c->files[i].bytes = (uint64_t)bytes;
        c->files[i].crc = (uint32_t)crc[0] << 24 | (uint32_t)crc[1] << 16 |
                          (uint32_t)crc[2] << 8 | crc[3];
    }
    return true;
}

RtCkpt *rtc_mf_read(const char *stepdir, char *err, size_t errlen)
{
    size_t n = strlen(stepdir) + sizeof RTC_MF_NAME + 1;
    char *path = rtc_xmalloc(n);
    snprintf(path, n, "%s/%s", stepdir, RTC_MF_NAME);
    struct stat st;
    int fd = rtc_open_regular(path, "checkpoint manifest", &st, err, errlen);
    if (fd < 0) {
        free(path);
        return NULL;
    }
    RtCkpt *c = NULL;
    char *text = NULL;
    uint64_t size = (uint64_t)st.st_size;
    char why[512] = "";
    if (size < MF_CRC_LINE + 2 || size > MF_MAX_BYTES) {
        snprintf(why, sizeof why, "%llu bytes: too short or too long for a manifest",
                 (unsigned long long)size);
    } else {
        text = rtc_xmalloc(size + 1);
        if (rtc_read_all(fd, text, size, 0, path, err, errlen) != 0)
            goto out;
        text[size] = 0;
        const char *line = text + size - MF_CRC_LINE;
        uint32_t stored = 0;
        bool ok = memcmp(line, "crc32c ", 7) == 0 && line[15] == '\n';
        for (int i = 7; ok && i < 15; i++) {
            int h = hexval(line[i]);
            ok = h >= 0;
            stored = stored << 4 | (uint32_t)(h < 0 ? 0 : h);
        }
        uint64_t body = size - MF_CRC_LINE;
        if (!ok) {
            snprintf(why, sizeof why, "it does not end in its crc32c line (truncated?)");
        } else if (rtc_crc32c(0, text, body) != stored) {
            snprintf(why, sizeof why, "CRC-32C mismatch (stored %08" PRIx32 ", computed %08" PRIx32
                     ")", stored, rtc_crc32c(0, text, body));
        } else {
            char jerr[256];
            JsonValue *root = json_parse(text, body, jerr, sizeof jerr);
            if (!root) {
                snprintf(why, sizeof why, "malformed JSON: %s", jerr);
            } else {
                c = rtc_xcalloc(1, sizeof *c);
                c->dir = rtc_xstrdup(stepdir);
                if (!parse_fields(root, c, why, sizeof why)) {
                    rt_ckpt_close(c);
                    c = NULL;
                }
                json_free(root);
            }
        }
    }
    if (!c)
        rtc_err(err, errlen, "%s: damaged checkpoint manifest: %s", path, why);
out:
    free(text);
    close(fd);
    free(path);
    return c;
}

const char *rt_ckpt_dir(const RtCkpt *c) { return c->dir; }
int64_t rt_ckpt_step(const RtCkpt *c) { return c->step; }
int64_t rt_ckpt_data_pos(const RtCkpt *c) { return c->data_pos; }
int rt_ckpt_world(const RtCkpt *c) { return c->world; }
const uint8_t *rt_ckpt_run_id(const RtCkpt *c) { return c->run_id; }
const uint8_t *rt_ckpt_lineage(const RtCkpt *c) { return c->lineage; }

const uint8_t *rt_ckpt_parent(const RtCkpt *c, int64_t *step)
{
    *step = c->parent_step;
    return c->parent_lineage;
}

const uint8_t *rtc_ck_lineage(const RtCkptMeta *m)
{
    static const uint8_t zero[RT_RUN_ID_BYTES];
    return memcmp(m->lineage, zero, RT_RUN_ID_BYTES) ? m->lineage : m->run_id;
}

bool rtc_ck_has_parent(const RtCkptMeta *m)
{
    static const uint8_t zero[RT_RUN_ID_BYTES];
    return memcmp(m->parent_lineage, zero, RT_RUN_ID_BYTES) != 0 && m->parent_step >= 0;
}
const char *rt_ckpt_plan_hash(const RtCkpt *c) { return c->plan_hash; }
const char *rt_ckpt_optimizer(const RtCkpt *c) { return c->optimizer; }
