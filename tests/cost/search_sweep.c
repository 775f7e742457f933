/* search_sweep.c: the search's answer under --stack megatron in the
 * LLaMA-13B layout sweep's setting (64 A100-80GB, vocabulary 128000,
 * sequence 2048, global batch 2048) never picks a layout that ran out of
 * memory there. For each of the sweep's kernel families (FlashAttention-2
 * with and without the RMSNorm kernel, FlashAttention-1, Megatron's fused
 * softmax, eager attention) it runs
 *
 *   ptdc llama2-13b.mdl --set vocab=128000 --set seq=2048 --gpus 64
 *        --global-batch 2048 --sp off --zero 1 --schedule 1f1b
 *        --stack megatron --stack-set KEY=VALUE ... --plan-only --json
 *
 * with the code base's differences from the megatron preset that
 * tests/cost/sweep.c assumes (sweep_stack, as tests/stack/sweep_cli.c writes
 * them; the sweep ran no sequence parallelism, ZeRO-1 and 1F1B only, so
 * those are pinned) and lets the search choose tp, pp, the micro-batch and
 * recomputation. The plan it picks is checked against the sweep's rows of
 * that kernel family:
 *   - it ran out of memory if a row with its tp and pp, a micro-batch no
 *     larger and recomputation keeping no more (full keeps least; the
 *     picked policy's own row otherwise) did: the test fails;
 *   - it ran if a row with its tp and pp, a micro-batch no smaller and no
 *     recomputation did;
 *   - otherwise the sweep did not run it (said, not failed).
 * Every pick must also be a plan the model says fits.
 * usage: search_sweep PTDC REF_DIR MODELS_DIR */
#include "refcsv.h"
#include "sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *yes(bool b) { return b ? "yes" : "no"; }

/* The integer after "key": in text, or -1; the string after it into out. */
static int int_after(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(text, pat);
    return p ? atoi(p + strlen(pat)) : -1;
}

static void str_after(const char *text, const char *key, char *out, size_t n)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    const char *p = strstr(text, pat);
    out[0] = 0;
    if (p) {
        p += strlen(pat);
        size_t k = 0;
        while (p[k] && p[k] != '"' && k + 1 < n)
            out[k] = p[k], k++;
        out[k] = 0;
    }
}

/* The sweep's kernel families: its attention_impl and rmsnorm_kernel, and
 * the stack keys that say them. */
static const struct {
    const char *impl;
    int rms_kernel;
    const char *kernel;           /* attention_kernel */
    bool materialized;
} fams[] = {
    {"flash2", 1, "flash2", false},         {"flash2", 0, "flash2", false},
    {"flash1", 0, "flash1", false},         {"megatron_fused", 0, "fused_softmax", true},
    {"torch", 0, "eager", true},
};

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: search_sweep PTDC REF_DIR MODELS_DIR\n");
        return 2;
    }
    const char *ptdc = argv[1], *ref = argv[2], *models = argv[3];
    char path[1024];
    snprintf(path, sizeof path, "%s/layouts_llama13b_seq2048_64xA100.csv", ref);
    RefCsv *csv = ref_load(path);
    const SweepStack *S = &sweep_stack;
    int failures = 0;
    printf("the search under --stack megatron in the LLaMA-13B sweep's setting, per kernel family:\n");
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "'%s' '%s/llama2-13b.mdl' --set vocab=128000 --set seq=2048 --gpus 64 --global-batch 2048 "
                 "--sp %s --zero %d --schedule 1f1b --stack megatron --stack-set grad_bytes=%d "
                 "--stack-set loss_fp32=%s --stack-set alloc_reserve=%.17g --stack-set frag_act=%.17g "
                 "--stack-set grad_accum_unfused=%s --stack-set swiglu_unfused=%s --stack-set attn_dropout=%s "
                 "--stack-set attention_kernel=%s --stack-set norm_unfused=%s%s --plan-only --json 2>/dev/null",
                 ptdc, models, S->sp ? "on" : "off", S->zero, S->grad_bytes, yes(S->loss_fp32),
                 S->alloc_reserve, S->frag_act, yes(S->grad_accum_unfused), yes(S->swiglu_unfused),
                 yes(S->attn_dropout), fams[f].kernel, yes(!fams[f].rms_kernel),
                 fams[f].materialized ? " --attention materialized" : "");
        int status = -1;
        char *out = sweep_capture(cmd, &status);
        char st[32], rec[32];
        str_after(out ? out : "", "status", st, sizeof st);
        const char *par = out ? strstr(out, "\"parallel\": {") : NULL;
        par = par ? par : "";
        str_after(par, "recompute", rec, sizeof rec);
        int tp = int_after(par, "tp"), pp = int_after(par, "pp"), mb = int_after(par, "micro_batch");
        printf("  %-14s rmsnorm kernel %d: ", fams[f].impl, fams[f].rms_kernel);
        if (!out || status != 0 || strcmp(st, "fits") || tp < 1 || pp < 1 || mb < 1) {
            printf("no plan (exit %d, status '%s')  FAIL\n", status, st);
            failures++;
            free(out);
            continue;
        }
        /* Context parallelism (docs/context.md): a layout the sweep did not run. */
        const char *ctx = out ? strstr(out, "\"context\": {") : NULL;
        int cp = ctx ? int_after(ctx, "cp") : 1;
        if (cp > 1)
            printf("cp %d ", cp);
        printf("tp %d pp %d micro-batch %d recompute %s: ", tp, pp, mb, rec);
        if (cp > 1) {
            printf("not run in the sweep (it ran no context parallelism)  ok\n");
            free(out);
            continue;
        }
        /* The rows of this family with this tp and pp. */
        bool oom = false, ran = false;
        for (int r = 0; r < csv->nrows; r++) {
            if (strcmp(ref_get(csv, r, "attention_impl"), fams[f].impl) ||
                atoi(ref_get(csv, r, "rmsnorm_kernel")) != fams[f].rms_kernel ||
                atoi(ref_get(csv, r, "tp")) != tp || atoi(ref_get(csv, r, "pp")) != pp)
                continue;
            int rmb = atoi(ref_get(csv, r, "micro_batch"));
            bool full = !strcmp(ref_get(csv, r, "activation_checkpointing"), "every_layer");
            bool ok = !strcmp(ref_get(csv, r, "status"), "ok");
            /* Full recomputation keeps least; no recomputation most (the
             * picked policy is one of them, a mix of them, or in between). */
            bool keeps_no_more = full || !strcmp(rec, "none");
            bool keeps_no_less = !full;
            if (!ok && rmb <= mb && keeps_no_more)
                oom = true;
            if (ok && rmb >= mb && keeps_no_less)
                ran = true;
        }
        if (oom) {
            printf("ran out of memory in the sweep  FAIL\n");
            failures++;
        } else {
            printf("%s\n", ran ? "ran in the sweep  ok" : "not run in the sweep (unchecked)  ok");
        }
        free(out);
    }
    ref_free(csv);
    if (failures)
        fprintf(stderr, "%d pick(s) failed\n", failures);
    return failures != 0;
}
