/* test_safetensors.c: the strict JSON parser; export and import round trips
 * (F32 exact, BF16 rounded to nearest even, F16 decoded); the Hugging Face
 * mappings (transposed linear weights, GPT-2's fused c_attn parts) under a
 * sharding; malformed files refused with a message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common.h"
#include "json.h"
#include "ref.h"
#include "rt.h"

static char dir[] = "/tmp/ptdrt-st-XXXXXX";
static char paths[64][128];
static int npaths;

static const char *tmp(const char *name)
{
    snprintf(paths[npaths], sizeof paths[npaths], "%s/%s", dir, name);
    return paths[npaths++];
}

static void test_json(void)
{
    printf("json\n");
    static const char *good[] = {
        "{}", " [1, -2.5e+3, 0, 0.125, true, false, null] ", "{\"a\":{\"b\":[[]]}}",
        "\"\\u00e9\\ud83d\\ude00\\n\\\"\"", "\"caf\xc3\xa9\"", "123456789012345678",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char err[256] = "";
        JsonValue *v = json_parse(good[i], strlen(good[i]), err, sizeof err);
        CHECK(v != NULL, "valid JSON %s refused: %s", good[i], err);
        json_free(v);
    }
    char err[256];
    JsonValue *v = json_parse("\"\\u00e9\\ud83d\\ude00\"", 20, err, sizeof err);
    CHECK(v && v->len == 6 && memcmp(v->text, "\xc3\xa9\xf0\x9f\x98\x80", 6) == 0,
          "escapes decode to UTF-8");
    json_free(v);
    static const char *bad[] = {
        "", "{", "[1,]", "{\"a\":1,}", "01", "1.", "1e", "-", "+1", ".5", "\"abc",
        "\"a\x01\"", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "\"\xc3\x28\"", "\"\xc0\xaf\"",
        "\"\xed\xa0\x80\"", "{\"a\":1,\"a\":2}", "{} x", "// c\n{}", "{'a':1}", "NaN", "[1 2]",
        "{\"a\" 1}", "tru", "{1:2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = json_parse(bad[i], strlen(bad[i]), err, sizeof err);
        CHECK(v == NULL, "invalid JSON '%s' accepted", bad[i]);
        json_free(v);
    }
    char deep[200];
    memset(deep, '[', 65);
    memset(deep + 65, ']', 65);
    v = json_parse(deep, 130, err, sizeof err);
    CHECK(v == NULL && strstr(err, "nesting"), "65 levels of nesting accepted");
    json_free(v);
    v = json_parse(deep + 1, 128, err, sizeof err);
    CHECK(v != NULL, "64 levels of nesting refused: %s", err);
    json_free(v);
    int64_t x = 0;
    const char *ints = "[9223372036854775807, 9223372036854775808, 1.0, -1]";
    v = json_parse(ints, strlen(ints), err, sizeof err);
    CHECK(v && json_uint(&v->items[0], &x) == 0 && x == INT64_MAX, "int64 max");
    CHECK(v && json_uint(&v->items[1], &x) != 0, "2^63 is not an int64");
    CHECK(v && json_uint(&v->items[2], &x) != 0 && json_uint(&v->items[3], &x) != 0,
          "1.0 and -1 are not sizes");
    json_free(v);
}

static void test_round_trip(const char *dtype)
{
    printf("round trip %s\n", dtype);
    const char *path = tmp(strcmp(dtype, "F32") ? "rt-bf16.safetensors" : "rt-f32.safetensors");
    RtStTensor t[4] = {{"model.b", 1, {4}}, {"model.a", 2, {2, 3}}, {"scalar", 0, {0}},
                       {"empty", 2, {0, 5}}};
    float a[6], b[4], s = 3.25f;
    ref_fill(a, NULL, 6, -2, 2);
    ref_fill(b, NULL, 4, -2, 2);
    /* values whose bf16 rounding is known by hand */
    b[0] = 1.0f + 0x1p-8f;                  /* tie: to even, 1 */
    b[1] = 1.0f + 3 * 0x1p-8f;              /* tie: to even, 1 + 2^-6 */
    b[2] = 1.0f + 0x1p-8f + 0x1p-20f;       /* above the tie: 1 + 2^-7 */
    b[3] = -(1.0f + 0x1p-7f);               /* exact */
    const float b_bf16[4] = {1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -(1.0f + 0x1p-7f)};
    char err[512] = "";
    RtStWriter *w = rt_st_writer_open(path, t, 4, dtype, err, sizeof err);
    CHECK(w != NULL, "writer: %s", err);
    if (!w)
        return;
    int64_t g2[2] = {2, 3}, o2[2] = {1, 0}, l2[2] = {1, 3}, z2[2] = {0, 0}, l2a[2] = {1, 3};
    int64_t g1[1] = {4};
    int64_t o1[1] = {0};
    /* rows of model.a in reverse order, as two ranks would */
    CHECK(rt_st_writer_put(w, "model.a", false, 0, 1, 2, g2, o2, l2, a + 3, err, sizeof err) == 0,
          "%s", err);
    CHECK(rt_st_writer_put(w, "model.a", false, 0, 1, 2, g2, z2, l2a, a, err, sizeof err) == 0,
          "%s", err);
    CHECK(rt_st_writer_put(w, "model.b", false, 0, 1, 1, g1, o1, g1, b, err, sizeof err) == 0,
          "%s", err);
    CHECK(rt_st_writer_put(w, "scalar", false, 0, 1, 0, NULL, NULL, NULL, &s, err, sizeof err) == 0,
          "%s", err);
    CHECK(rt_st_writer_close(w, err, sizeof err) == 0, "close: %s", err);

    RtSt *st = rt_st_open(path, err, sizeof err);
    CHECK(st != NULL, "open: %s", err);
    if (!st)
        return;
    CHECK(rt_st_count(st) == 4, "count %d", rt_st_count(st));
    CHECK(strcmp(rt_st_name(st, 0), "empty") == 0 && strcmp(rt_st_name(st, 1), "model.a") == 0 &&
              strcmp(rt_st_name(st, 3), "scalar") == 0,
          "names are sorted");
    CHECK(rt_st_metadata(st, "format") && strcmp(rt_st_metadata(st, "format"), "pt") == 0,
          "metadata format pt");
    int nd;
    int64_t shape[RT_ST_MAXDIM];
    const char *dt;
    CHECK(rt_st_find(st, "model.a", &nd, shape, &dt) >= 0 && nd == 2 && shape[0] == 2 &&
              shape[1] == 3 && strcmp(dt, dtype) == 0,
          "model.a header");
    CHECK(rt_st_find(st, "nope", NULL, NULL, NULL) < 0, "missing tensor found");
    float ra[6], rb[4], rs = 0;
    CHECK(rt_st_read(st, "model.a", false, 0, 1, 2, g2, z2, g2, ra, err, sizeof err) == 0, "%s",
          err);
    CHECK(rt_st_read(st, "model.b", false, 0, 1, 1, g1, o1, g1, rb, err, sizeof err) == 0, "%s",
          err);
    CHECK(rt_st_read(st, "scalar", false, 0, 1, 0, NULL, NULL, NULL, &rs, err, sizeof err) == 0,
          "%s", err);
    if (strcmp(dtype, "F32") == 0) {
        CHECK(memcmp(ra, a, sizeof a) == 0 && memcmp(rb, b, sizeof b) == 0 && rs == s,
              "F32 round trip is not exact");
    } else {
        CHECK(memcmp(rb, b_bf16, sizeof rb) == 0, "BF16 rounding: %a %a %a %a", rb[0], rb[1],
              rb[2], rb[3]);
        bool ok = rs == s;
        for (int i = 0; i < 6; i++) /* bf16 keeps 8 significant bits */
            ok = ok && fabsf(ra[i] - a[i]) <= ldexpf(fabsf(a[i]), -8);
        CHECK(ok, "BF16 values off by more than half an ulp");
    }
    rt_st_close(st);

    /* the raw header: length multiple of 8, keys in sorted order */
    FILE *f = fopen(path, "rb");
    unsigned char len8[8];
    char hdr[1024] = "";
    size_t got = fread(len8, 1, 8, f);
    uint64_t hl = rtc_get_u64(len8);
    if (got == 8 && hl < sizeof hdr)
        got = fread(hdr, 1, hl, f);
    fclose(f);
    printf("  header (%llu bytes): %s\n", (unsigned long long)hl, hdr);
    char *p1 = strstr(hdr, "\"__metadata__\""), *p2 = strstr(hdr, "\"empty\""),
         *p3 = strstr(hdr, "\"model.a\""), *p4 = strstr(hdr, "\"scalar\"");
    CHECK(hl % 8 == 0 && p1 && p2 && p3 && p4 && p1 < p2 && p2 < p3 && p3 < p4,
          "header keys not sorted or length not a multiple of 8");
}

/* GPT-OSS's gate_up_proj [E, IN, 2 F]: gate and up [E, IN, F] as parts 0
 * and 1 of 2 interleaved (gate in the even columns, up in the odd ones),
 * each put as two expert blocks and a column block (an expert-parallel and a
 * tensor-parallel split) into an F32 and a BF16 file, the other part's
 * elements between them left alone; read back whole and as a column block. */
static void test_interleaved(const char *dtype)
{
    printf("hf interleaved parts (%s)\n", dtype);
    const char *path = tmp(strcmp(dtype, "F32") ? "il-bf16.safetensors" : "il-f32.safetensors");
    enum { E = 2, IN = 3, F = 4 };
    float gate[E * IN * F], up[E * IN * F];
    for (int i = 0; i < E * IN * F; i++) /* exact in BF16 */
        gate[i] = (float)(i + 1), up[i] = -(float)(i + 1);
    RtStTensor t[1] = {{"gate_up_proj", 3, {E, IN, 2 * F}}};
    char err[512] = "";
    RtStWriter *w = rt_st_writer_open(path, t, 1, dtype, err, sizeof err);
    CHECK(w != NULL, "%s", err);
    if (!w)
        return;
    int64_t g[3] = {E, IN, F}, z[3] = {0, 0, 0}, one[3] = {1, IN, F}, e1[3] = {1, 0, 0};
    int64_t cols[3] = {E, IN, 2}, c2[3] = {0, 0, 2};
    float ub[E * IN * 2], ub2[E * IN * 2];
    for (int e = 0; e < E; e++)
        for (int r = 0; r < IN; r++)
            for (int j = 0; j < 2; j++)
                ub[(e * IN + r) * 2 + j] = up[(e * IN + r) * F + j],
                ub2[(e * IN + r) * 2 + j] = up[(e * IN + r) * F + 2 + j];
    CHECK(rt_st_writer_put(w, "gate_up_proj", false, 0, RT_ST_INTERLEAVED(2), 3, g, z, one, gate, err,
                           sizeof err) == 0, "%s", err);
    CHECK(rt_st_writer_put(w, "gate_up_proj", false, 1, RT_ST_INTERLEAVED(2), 3, g, z, cols, ub, err,
                           sizeof err) == 0, "%s", err);
    CHECK(rt_st_writer_put(w, "gate_up_proj", false, 0, RT_ST_INTERLEAVED(2), 3, g, e1, one, gate + IN * F,
                           err, sizeof err) == 0, "%s", err);
    CHECK(rt_st_writer_put(w, "gate_up_proj", false, 1, RT_ST_INTERLEAVED(2), 3, g, c2, cols, ub2, err,
                           sizeof err) == 0, "%s", err);
    CHECK(rt_st_writer_close(w, err, sizeof err) == 0, "%s", err);
    RtSt *st = rt_st_open(path, err, sizeof err);
    CHECK(st != NULL, "%s", err);
    if (!st)
        return;
    float file[E * IN * 2 * F], rg[E * IN * F], rb[E * IN * 2];
    int64_t gf[3] = {E, IN, 2 * F};
    CHECK(rt_st_read(st, "gate_up_proj", false, 0, 1, 3, gf, z, gf, file, err, sizeof err) == 0, "%s", err);
    bool ok = true;
    for (int k = 0; k < E * IN; k++)
        for (int j = 0; j < F; j++)
            ok = ok && file[k * 2 * F + 2 * j] == gate[k * F + j] && file[k * 2 * F + 2 * j + 1] == up[k * F + j];
    CHECK(ok, "gate and up are not interleaved column by column in the file");
    CHECK(rt_st_read(st, "gate_up_proj", false, 0, RT_ST_INTERLEAVED(2), 3, g, z, g, rg, err, sizeof err) == 0,
          "%s", err);
    CHECK(memcmp(rg, gate, sizeof rg) == 0, "gate read back");
    CHECK(rt_st_read(st, "gate_up_proj", false, 1, RT_ST_INTERLEAVED(2), 3, g, c2, cols, rb, err, sizeof err) ==
              0, "%s", err);
    CHECK(memcmp(rb, ub2, sizeof rb) == 0, "a column block of up read back");
    int64_t bad[3] = {E, IN, F + 1};
    CHECK(rt_st_read(st, "gate_up_proj", false, 0, RT_ST_INTERLEAVED(2), 3, bad, z, bad, rg, err, sizeof err) != 0 &&
              strstr(err, "has shape [2, 3, 8]; the model expects [2, 3, 10]"), "a wrong width accepted: %s", err);
    rt_st_close(st);
}

/* Hugging Face mappings: LLaMA q_proj stored [out, in] for a parameter
 * [in, out], and GPT-2 c_attn [768, 3 x 768] holding q, k, v as parts. */
static void test_mappings(void)
{
    printf("hf mappings\n");
    const char *path = tmp("hf.safetensors");
    enum { IN = 4, OUT = 6 };
    float wq[IN * OUT], q[IN * 3], k[IN * 3], v[IN * 3];
    ref_fill(wq, NULL, IN * OUT, -1, 1);
    ref_fill(q, NULL, IN * 3, -1, 1);
    ref_fill(k, NULL, IN * 3, -1, 1);
    ref_fill(v, NULL, IN * 3, -1, 1);
    RtStTensor t[2] = {{"q_proj.weight", 2, {OUT, IN}}, {"c_attn.weight", 2, {IN, 9}}};
    char err[512] = "";
    RtStWriter *w = rt_st_writer_open(path, t, 2, "F32", err, sizeof err);
    CHECK(w != NULL, "%s", err);
    if (!w)
        return;
    /* wq [IN, OUT] put transposed, as two column blocks (a tensor-parallel split) */
    int64_t g[2] = {IN, OUT};
    for (int s = 0; s < 2; s++) {
        int64_t off[2] = {0, 3 * s}, loc[2] = {IN, 3};
        float blk[IN * 3];
        for (int i = 0; i < IN; i++)
            for (int j = 0; j < 3; j++)
                blk[i * 3 + j] = wq[i * OUT + 3 * s + j];
        CHECK(rt_st_writer_put(w, "q_proj.weight", true, 0, 1, 2, g, off, loc, blk, err,
                               sizeof err) == 0,
              "%s", err);
    }
    /* q, k, v [IN, 3] as parts 0, 1, 2 of c_attn, k in two row blocks */
    int64_t gp[2] = {IN, 3}, z[2] = {0, 0}, half[2] = {2, 3}, off2[2] = {2, 0};
    CHECK(rt_st_writer_put(w, "c_attn.weight", false, 0, 3, 2, gp, z, gp, q, err, sizeof err) == 0,
          "%s", err);
    CHECK(rt_st_writer_put(w, "c_attn.weight", false, 1, 3, 2, gp, z, half, k, err, sizeof err) ==
              0,
          "%s", err);
    CHECK(rt_st_writer_put(w, "c_attn.weight", false, 1, 3, 2, gp, off2, half, k + 6, err,
                           sizeof err) == 0,
          "%s", err);
    CHECK(rt_st_writer_put(w, "c_attn.weight", false, 2, 3, 2, gp, z, gp, v, err, sizeof err) == 0,
          "%s", err);
    CHECK(rt_st_writer_close(w, err, sizeof err) == 0, "%s", err);

    RtSt *st = rt_st_open(path, err, sizeof err);
    CHECK(st != NULL, "%s", err);
    if (!st)
        return;
    /* the file holds q_proj as [OUT, IN] = wq^T and c_attn as [q | k | v] */
    float fq[OUT * IN], fc[IN * 9];
    int64_t gq[2] = {OUT, IN}, gc[2] = {IN, 9};
    CHECK(rt_st_read(st, "q_proj.weight", false, 0, 1, 2, gq, z, gq, fq, err, sizeof err) == 0,
          "%s", err);
    CHECK(rt_st_read(st, "c_attn.weight", false, 0, 1, 2, gc, z, gc, fc, err, sizeof err) == 0,
          "%s", err);
    bool tr = true, parts = true;
    for (int i = 0; i < IN; i++)
        for (int j = 0; j < OUT; j++)
            tr = tr && fq[j * IN + i] == wq[i * OUT + j];
    for (int i = 0; i < IN; i++)
        for (int j = 0; j < 3; j++)
            parts = parts && fc[i * 9 + j] == q[i * 3 + j] && fc[i * 9 + 3 + j] == k[i * 3 + j] &&
                    fc[i * 9 + 6 + j] == v[i * 3 + j];
    CHECK(tr, "q_proj is not stored transposed");
    CHECK(parts, "c_attn parts misplaced");
    /* import: a row block of wq through the transpose, a column block of k */
    float blk[2 * OUT], kb[IN * 2];
    int64_t off[2] = {1, 0}, loc[2] = {2, OUT};
    CHECK(rt_st_read(st, "q_proj.weight", true, 0, 1, 2, g, off, loc, blk, err, sizeof err) == 0,
          "%s", err);
    CHECK(memcmp(blk, wq + OUT, sizeof blk) == 0, "transposed import of a row block");
    int64_t koff[2] = {0, 1}, kloc[2] = {IN, 2};
    CHECK(rt_st_read(st, "c_attn.weight", false, 1, 3, 2, gp, koff, kloc, kb, err, sizeof err) ==
              0,
          "%s", err);
    bool kok = true;
    for (int i = 0; i < IN; i++)
        for (int j = 0; j < 2; j++)
            kok = kok && kb[i * 2 + j] == k[i * 3 + 1 + j];
    CHECK(kok, "part import of a column block");
    /* shape disagreement is named */
    int64_t wrong[2] = {IN, 5};
    CHECK(rt_st_read(st, "q_proj.weight", true, 0, 1, 2, wrong, z, wrong, blk, err, sizeof err) !=
                  0 &&
              strstr(err, "has shape [6, 4]; the model expects [5, 4]"),
          "shape mismatch message: %s", err);
    printf("  refused: %s\n", err);
    CHECK(rt_st_read(st, "missing", false, 0, 1, 2, g, z, g, blk, err, sizeof err) != 0 &&
              strstr(err, "no tensor 'missing'"),
          "missing tensor: %s", err);
    rt_st_close(st);

    /* an incomplete export is refused and leaves no file */
    const char *inc = tmp("incomplete.safetensors");
    w = rt_st_writer_open(inc, t, 1, "F32", err, sizeof err);
    int64_t rows[2] = {1, OUT};
    rt_st_writer_put(w, "q_proj.weight", true, 0, 1, 2, g, z, rows, wq, err, sizeof err);
    CHECK(rt_st_writer_close(w, err, sizeof err) != 0 && strstr(err, "6 of its 24 elements"),
          "incomplete export: %s", err);
    printf("  refused: %s\n", err);
    CHECK(access(inc, F_OK) != 0, "an incomplete export left a file");
    RtStTensor dup[2] = {{"x", 1, {2}}, {"x", 1, {2}}};
    CHECK(rt_st_writer_open(inc, dup, 2, "F32", err, sizeof err) == NULL &&
              strstr(err, "appears twice"),
          "duplicate names: %s", err);
    CHECK(rt_st_writer_open(inc, dup, 1, "F64", err, sizeof err) == NULL && strstr(err, "F64"),
          "export dtype: %s", err);
}

/* A file from its header text and data bytes. */
static void write_file(const char *path, const char *header, const void *data, size_t n,
                       int64_t len_override)
{
    unlink(path);
    FILE *f = fopen(path, "wb");
    unsigned char len8[8];
    rtc_put_u64(len8, len_override >= 0 ? (uint64_t)len_override : strlen(header));
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    if (n)
        fwrite(data, 1, n, f);
    fclose(f);
}

static void test_f16(void)
{
    printf("f16 import\n");
    const char *path = tmp("f16.safetensors");
    /* 1, -2, 65504, 2^-24 (subnormal), -0, 0.5 */
    static const unsigned char d[12] = {0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B,
                                        0x01, 0x00, 0x00, 0x80, 0x00, 0x38};
    write_file(path, "{\"h\":{\"dtype\":\"F16\",\"shape\":[6],\"data_offsets\":[0,12]}}", d, 12, -1);
    char err[512] = "";
    RtSt *st = rt_st_open(path, err, sizeof err);
    CHECK(st != NULL, "%s", err);
    if (!st)
        return;
    float v[6];
    int64_t g[1] = {6}, z[1] = {0};
    CHECK(rt_st_read(st, "h", false, 0, 1, 1, g, z, g, v, err, sizeof err) == 0, "%s", err);
    CHECK(v[0] == 1.0f && v[1] == -2.0f && v[2] == 65504.0f && v[3] == 0x1p-24f && v[4] == 0.0f &&
              signbit(v[4]) && v[5] == 0.5f,
          "F16 decode: %g %g %g %g %g %g", v[0], v[1], v[2], v[3], v[4], v[5]);
    rt_st_close(st);
    CHECK(rtc_f16_to_f32(0x7C00) == INFINITY && isnan(rtc_f16_to_f32(0x7E00)), "F16 inf, nan");
    CHECK(isnan(rtc_bf16_to_f32(rtc_f32_to_bf16(NAN))), "BF16 keeps NaN");
}

static void test_malformed(void)
{
    printf("malformed files\n");
    static const unsigned char data[16] = {0};
    static const struct {
        const char *header;
        size_t data;
        int64_t len; /* header length field, -1: the real one */
        const char *expect;
    } cases[] = {
        {"{}", 0, 1000, "exceeds the file"},
        {"[]", 0, -1, "does not start with '{'"},
        {"{\"a\":", 0, -1, "JSON error"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}", 8, -1, "JSON error"},
        {"{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1, "unknown dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, -1, "lacks dtype, shape or data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, -1,
         "do not hold its shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, -1,
         "integers >= 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, -1, "overlap or gap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}",
         16, -1, "overlap or gap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, -1,
         "cover 8 data bytes but the file holds 12"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, -1,
         "beyond the 8 data bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, -1,
         "unknown header key 'x'"},
        {"{\"__metadata__\":{\"format\":1}}", 0, -1, "not a string"},
        {"{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1,
         "NUL"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
         -1, "at most 8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = tmp("bad.safetensors");
        npaths--; /* reuse the slot */
        write_file(path, cases[i].header, data, cases[i].data, cases[i].len);
        char err[512] = "";
        RtSt *st = rt_st_open(path, err, sizeof err);
        CHECK(st == NULL, "malformed case %zu accepted", i);
        rt_st_close(st);
        printf("  refused: %s\n", err);
        CHECK(strstr(err, "bad.safetensors") && strstr(err, cases[i].expect),
              "case %zu: message lacks '%s': %s", i, cases[i].expect, err);
    }
    const char *path = tmp("short.safetensors");
    FILE *f = fopen(path, "wb");
    fwrite("abc", 1, 3, f);
    fclose(f);
    char err[512];
    CHECK(rt_st_open(path, err, sizeof err) == NULL && strstr(err, "too short"), "%s", err);
    CHECK(rt_st_open(tmp("absent.safetensors"), err, sizeof err) == NULL &&
              strstr(err, "cannot open"),
          "%s", err);
    /* a valid I32 tensor cannot be read as fp32 */
    const char *ip = tmp("i32.safetensors");
    write_file(ip, "{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8, -1);
    RtSt *st = rt_st_open(ip, err, sizeof err);
    float out[2];
    int64_t g[1] = {2}, z[1] = {0};
    CHECK(st && rt_st_read(st, "a", false, 0, 1, 1, g, z, g, out, err, sizeof err) != 0 &&
              strstr(err, "dtype I32"),
          "I32 read: %s", err);
    rt_st_close(st);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    ref_seed(11);
    test_json();
    test_round_trip("F32");
    test_round_trip("BF16");
    test_mappings();
    test_interleaved("F32");
    test_interleaved("BF16");
    test_f16();
    test_malformed();
    for (int i = 0; i < npaths; i++)
        unlink(paths[i]);
    unlink(tmp("bad.safetensors"));
    rmdir(dir);
    return check_status("rt_safetensors");
}
