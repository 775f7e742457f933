/* ref_tool.c: the reference's command line (tests/ref/run.sh uses it).
 *
 *   ref_tool weights MODEL OUT.st SEED     random weights under the model's
 *                                           Hugging Face names (ref_weights)
 *   ref_tool tokens MODEL OUT SEED         one step of raw u16 tokens: the
 *                                           step's B sequences of S, plus the
 *                                           last one's next-token target
 *   ref_tool alter MODEL IN OUT T          the same tokens with position T + 1
 *                                           of every sequence changed
 *   ref_tool check MODEL W.st TOKENS DUMP  a program's --dump-first-step DUMP
 *                                           against the reference on the same
 *                                           weights and tokens (tolerances below)
 *   ref_tool causal MODEL W.st A B T DUMPA DUMPB
 *                                           tokens A and B differ at position
 *                                           T + 1 of every sequence: the
 *                                           reference's and the program's logits
 *                                           at positions <= T (and so the loss
 *                                           at every position < T) are
 *                                           unchanged, those at T + 1 change
 *   ref_tool selftest MODEL                the reference's backward against its
 *                                           own finite differences, per element
 *   ref_tool direction MODEL DUMP          --grad-check's directional differences
 *                                           redone in double on a program's dump
 *                                           (cmd_direction); check takes "-" "-"
 *                                           for W.st and TOKENS: the dump's own
 *
 * Tolerances of check (fp32 program, double reference; docs/codegen.md):
 * loss 1e-6 relative; logits and every gradient tensor: largest element
 * difference over the tensor's largest magnitude, 5e-6 and 1e-5. fp32
 * rounds to 6e-8; through sums of up to 256 terms and two layers the
 * programs measure at most 7e-8 (loss), 5e-7 (logits) and 9e-7 (gradients;
 * tiny-deepseek 9.7e-7) on every layout, about ten times below; a wrong
 * mask, scale, epsilon or missing term moves them by 1e-4 to 1. */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double TOL_LOSS = 1e-6, TOL_LOGITS = 5e-6;
/* Gradients: 1e-5 of each tensor's scale, or REF_TOL_GRAD where a model's
 * fp32 sums are longer (tests/ref/CMakeLists.txt says which and why). */
static double tol_grad(void)
{
    const char *e = getenv("REF_TOL_GRAD");
    return e && *e ? atof(e) : 1e-5;
}

static int failures;

static void check(bool ok, const char *what)
{
    if (!ok) {
        printf("FAIL %s\n", what);
        failures++;
    }
}

static void config(const char *mdl, RefConfig *c)
{
    if (!ref_config(mdl, c))
        exit(2);
}

/* Tokens and next-token targets of the step from a raw u16 file, as the
 * programs read u16:PATH (docs/runtime.md): sequence b is stream positions
 * [b S, b S + S], inputs then targets. */
static void read_tokens(const RefConfig *c, const char *path, int32_t *tok, int32_t *tgt)
{
    int64_t n = c->B * c->S + 1;
    FILE *f = fopen(path, "rb");
    unsigned char *buf = malloc((size_t)(2 * n));
    if (!f || fread(buf, 2, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "ref: cannot read %lld tokens from %s\n", (long long)n, path);
        exit(2);
    }
    fclose(f);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t j = 0; j < c->S; j++) {
            int64_t p = b * c->S + j;
            tok[p] = buf[2 * p] | buf[2 * p + 1] << 8;
            tgt[p] = buf[2 * p + 2] | buf[2 * p + 3] << 8;
        }
    free(buf);
}

static int write_tokens(const char *path, const unsigned char *buf, int64_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 2, (size_t)n, f) != (size_t)n || fclose(f) != 0) {
        fprintf(stderr, "ref: cannot write %s\n", path);
        return 2;
    }
    return 0;
}

static int cmd_tokens(const char *mdl, const char *out, uint64_t seed)
{
    RefConfig c;
    config(mdl, &c);
    int64_t n = c.B * c.S + 1;
    unsigned char *buf = malloc((size_t)(2 * n));
    for (int64_t i = 0; i < n; i++) {
        unsigned t = (unsigned)(ref_rand(&seed) % (uint64_t)c.V);
        buf[2 * i] = (unsigned char)t, buf[2 * i + 1] = (unsigned char)(t >> 8);
    }
    int rc = write_tokens(out, buf, n);
    free(buf);
    return rc;
}

static int cmd_alter(const char *mdl, const char *in, const char *out, int64_t t)
{
    RefConfig c;
    config(mdl, &c);
    if (t < 0 || t + 1 >= c.S) {
        fprintf(stderr, "ref: position %lld + 1 is outside a sequence of %lld\n", (long long)t,
                (long long)c.S);
        return 2;
    }
    int64_t n = c.B * c.S + 1;
    unsigned char *buf = malloc((size_t)(2 * n));
    FILE *f = fopen(in, "rb");
    if (!f || fread(buf, 2, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "ref: cannot read %s\n", in);
        return 2;
    }
    fclose(f);
    for (int64_t b = 0; b < c.B; b++) {
        int64_t p = b * c.S + t + 1;
        unsigned v = (unsigned)(buf[2 * p] | buf[2 * p + 1] << 8);
        v = (unsigned)((v + 1 + (uint64_t)b % (uint64_t)(c.V - 1)) % (uint64_t)c.V); /* never v */
        buf[2 * p] = (unsigned char)v, buf[2 * p + 1] = (unsigned char)(v >> 8);
    }
    int rc = write_tokens(out, buf, n);
    free(buf);
    return rc;
}

static RefSt *load(const char *dir, const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    RefSt *st = ref_st_read(path);
    if (!st)
        exit(2);
    ref_oss_unfuse(st); /* GPT-OSS's experts as the reference holds them */
    return st;
}

static RefTensor *need(const RefSt *st, const char *name, int64_t n, const char *file)
{
    RefTensor *t = ref_st_find(st, name);
    if (!t || t->n != n) {
        fprintf(stderr, "ref: %s has no %s of %lld values\n", file, name, (long long)n);
        exit(2);
    }
    return t;
}

/* Largest |a - b| over the largest |b|. */
static double scaled_diff(const double *a, const double *b, int64_t n)
{
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        s = fmax(s, fabs(b[i]));
    }
    return s > 0 ? d / s : d;
}

/* Weights W.st and tokens TOKENS, or with "-" for both the program's own:
 * the weights and tokens its dump holds (its initialisation, its data). */
static RefSt *from_dump(const RefConfig *c, const char *wpath, const char *tpath, const char *dump,
                        int32_t *tok, int32_t *tgt)
{
    int64_t R = c->B * c->S;
    if (strcmp(wpath, "-") || strcmp(tpath, "-")) {
        RefSt *w = ref_st_read(wpath);
        if (!w)
            exit(2);
        ref_oss_unfuse(w);
        read_tokens(c, tpath, tok, tgt);
        return w;
    }
    RefSt *out = load(dump, "outputs.safetensors");
    const double *t = need(out, "tokens", R, "outputs")->v, *g = need(out, "targets", R, "outputs")->v;
    for (int64_t i = 0; i < R; i++)
        tok[i] = (int32_t)t[i], tgt[i] = (int32_t)g[i];
    ref_st_free(out);
    return load(dump, "weights.safetensors");
}

static int cmd_check(const char *mdl, const char *wpath, const char *tpath, const char *dump)
{
    RefConfig c;
    config(mdl, &c);
    int64_t R = c.B * c.S;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)R), *tgt = malloc(sizeof(int32_t) * (size_t)R);
    RefSt *w = from_dump(&c, wpath, tpath, dump, tok, tgt);
    double *logits = malloc(sizeof(double) * (size_t)(R * c.V));
    RefSt *gr = ref_st_zeros_like(w);
    c.objective = true; /* the programs print the objective (MoE: with its regularisers) */
    double loss = ref_step(&c, w, tok, tgt, logits, gr);

    RefSt *out = load(dump, "outputs.safetensors"), *pw = load(dump, "weights.safetensors");
    RefSt *pg = load(dump, "grads.safetensors");
    const RefTensor *pt = need(out, "tokens", R, "outputs"), *pgt = need(out, "targets", R, "outputs");
    int bad = 0;
    for (int64_t i = 0; i < R; i++)
        bad += pt->v[i] != tok[i] || pgt->v[i] != tgt[i];
    check(bad == 0, "the program read other tokens or targets than the file holds");
    double pl = need(out, "loss", 1, "outputs")->v[0];
    double el = fabs(pl - loss) / fabs(loss);
    printf("%-44s program %.7f reference %.7f: %.1e (tolerance %.0e)\n", "loss", pl, loss, el, TOL_LOSS);
    check(el <= TOL_LOSS, "loss");
    double ez = scaled_diff(need(out, "logits", R * c.V, "outputs")->v, logits, R * c.V);
    printf("%-44s %.1e (tolerance %.0e)\n", "logits [batch, seq, vocab]", ez, TOL_LOGITS);
    check(ez <= TOL_LOGITS, "logits");
    check(pw->n == w->n && pg->n == w->n, "the program's tensors are not the model's");
    double worst = 0;
    const double TOL_GRAD = tol_grad();
    for (int i = 0; i < w->n; i++) {
        const RefTensor *t = &w->t[i];
        const RefTensor *a = need(pw, t->name, t->n, "weights"), *g = need(pg, t->name, t->n, "grads");
        bool same = true;
        for (int64_t e = 0; e < t->n; e++)
            same &= a->v[e] == t->v[e];
        check(same, "the program's weights differ from those it imported");
        const RefTensor *rg = ref_st_find(gr, t->name);
        double eg = scaled_diff(g->v, rg->v, t->n);
        worst = fmax(worst, eg);
        printf("  grad %-38s %.1e%s\n", t->name, eg, eg <= TOL_GRAD ? "" : "  FAIL");
        check(eg <= TOL_GRAD, t->name);
    }
    printf("%-44s %.1e (tolerance %.0e)\n", "gradients: worst tensor", worst, TOL_GRAD);
    ref_st_free(w), ref_st_free(gr), ref_st_free(out), ref_st_free(pw), ref_st_free(pg);
    free(tok), free(tgt), free(logits);
    return failures != 0;
}

/* Largest difference of logits a and b over positions [lo, hi] of every sequence. */
static double pos_diff(const RefConfig *c, const double *a, const double *b, int64_t lo, int64_t hi)
{
    double d = 0;
    for (int64_t s = 0; s < c->B; s++)
        for (int64_t p = lo; p <= hi; p++)
            for (int64_t v = 0; v < c->V; v++) {
                int64_t i = (s * c->S + p) * c->V + v;
                d = fmax(d, fabs(a[i] - b[i]));
            }
    return d;
}

/* Per-position loss of sequence s, position p. */
static double pos_loss(const RefConfig *c, const double *z, const int32_t *tgt, int64_t s, int64_t p)
{
    int64_t r = s * c->S + p;
    return ref_cross_entropy(z + r * c->V, tgt + r, 1, c->V, NULL);
}

static int cmd_causal(const char *mdl, const char *wpath, const char *ta, const char *tb, int64_t t,
                      const char *da, const char *db)
{
    RefConfig c;
    config(mdl, &c);
    RefSt *w = ref_st_read(wpath);
    if (!w)
        return 2;
    ref_oss_unfuse(w);
    int64_t R = c.B * c.S, n = R * c.V;
    int32_t *tok[2], *tgt[2];
    double *z[2];
    const double *pz[2];
    RefSt *out[2];
    for (int k = 0; k < 2; k++) {
        tok[k] = malloc(sizeof(int32_t) * (size_t)R), tgt[k] = malloc(sizeof(int32_t) * (size_t)R);
        read_tokens(&c, k ? tb : ta, tok[k], tgt[k]);
        z[k] = malloc(sizeof(double) * (size_t)n);
        ref_step(&c, w, tok[k], tgt[k], z[k], NULL);
        out[k] = load(k ? db : da, "outputs.safetensors");
        pz[k] = need(out[k], "logits", n, "outputs")->v;
    }
    /* The probe itself: tokens differ exactly at input position t + 1 (and so
     * target position t) of every sequence. */
    int bad = 0;
    for (int64_t s = 0; s < c.B; s++)
        for (int64_t p = 0; p < c.S; p++) {
            int64_t r = s * c.S + p;
            bad += (tok[0][r] != tok[1][r]) != (p == t + 1);
            bad += (tgt[0][r] != tgt[1][r]) != (p == t);
        }
    check(bad == 0, "the two token files do not differ exactly at position t + 1");
    double scale = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(z[0][i]));
    const char *who[2] = {"reference", "program"};
    for (int k = 0; k < 2; k++) {
        const double *a = k ? pz[0] : z[0], *b = k ? pz[1] : z[1];
        double before = pos_diff(&c, a, b, 0, t) / scale, at = pos_diff(&c, a, b, t + 1, t + 1) / scale;
        double lb = 0;
        for (int64_t s = 0; s < c.B; s++)
            for (int64_t p = 0; p < t; p++)
                lb = fmax(lb, fabs(pos_loss(&c, a, tgt[0], s, p) - pos_loss(&c, b, tgt[1], s, p)));
        printf("%-9s: token %lld of every sequence changed: logits at positions <= %lld move "
               "%.1e of their scale, the loss at positions < %lld %.1e; logits at %lld move %.1e\n",
               who[k], (long long)t + 1, (long long)t, before, (long long)t, lb, (long long)t + 1, at);
        /* The reference computes each position from its own row: bitwise
         * equal. The program may round differently between runs only through
         * rows it does not share: allow fp32 rounding. */
        check(before <= (k ? 1e-6 : 0), k ? "program: earlier logits changed" : "reference: earlier logits changed");
        check(lb <= (k ? 1e-5 : 0), k ? "program: loss at earlier positions changed" : "reference: loss changed");
        check(at > 1e-3, k ? "program: the change is not visible at t + 1" : "reference: change not visible");
    }
    for (int k = 0; k < 2; k++) {
        free(tok[k]), free(tgt[k]), free(z[k]);
        ref_st_free(out[k]);
    }
    ref_st_free(w);
    return failures != 0;
}

/* Central differences of the reference's loss, element by element: h = 1e-5
 * leaves truncation (h^2 f''' / 6, ~1e-11) and rounding (~1e-16 x loss / h,
 * ~1e-11) far below the 1e-6 of the gradient's scale allowed (measured: 3e-8). */
static int cmd_selftest(const char *mdl)
{
    RefConfig c;
    config(mdl, &c);
    c.B = 2, c.S = 8; /* smaller: every finite difference is two forwards */
    c.objective = true; /* the function the gradients belong to (MoE: with its regularisers) */
    RefSt *w = ref_weights(&c, 11);
    int64_t R = c.B * c.S;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)R), *tgt = malloc(sizeof(int32_t) * (size_t)R);
    uint64_t s = 5;
    for (int64_t i = 0; i < R; i++)
        tok[i] = (int32_t)(ref_rand(&s) % (uint64_t)c.V), tgt[i] = (int32_t)(ref_rand(&s) % (uint64_t)c.V);
    RefSt *gr = ref_st_zeros_like(w);
    double l0 = ref_step(&c, w, tok, tgt, NULL, gr);
    const double h = 1e-5, tol = 1e-6;
    double worst = 0;
    int checked = 0;
    /* REF_SELFTEST_ONLY: comma-separated name prefixes, the tensors checked
     * (a model whose other tensors another selftest checks: its time) */
    const char *only = getenv("REF_SELFTEST_ONLY");
    int skipped = 0;
    for (int i = 0; i < w->n; i++) {
        RefTensor *t = &w->t[i];
        const double *g = gr->t[i].v;
        bool want = !only || !*only;
        for (const char *p = only; !want && p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
            size_t n = strcspn(p, ",");
            want = n > 0 && !strncmp(t->name, p, n);
        }
        if (!want) {
            skipped++;
            continue;
        }
        int64_t big = 0;
        double gmax = 0;
        for (int64_t e = 0; e < t->n; e++)
            if (fabs(g[e]) > gmax)
                gmax = fabs(g[e]), big = e;
        double tw = 0, fdmax = 0;
        for (int k = 0; k < 4; k++) {
            int64_t e = k == 0 ? big : (int64_t)(ref_rand(&s) % (uint64_t)t->n);
            double keep = t->v[e];
            t->v[e] = keep + h;
            double lp = ref_step(&c, w, tok, tgt, NULL, NULL);
            t->v[e] = keep - h;
            double lm = ref_step(&c, w, tok, tgt, NULL, NULL);
            t->v[e] = keep;
            double fd = (lp - lm) / (2 * h), err = fabs(fd - g[e]) / gmax;
            fdmax = fmax(fdmax, fabs(fd));
            tw = fmax(tw, err);
            checked++;
        }
        worst = fmax(worst, tw);
        /* An expert no token of the small batch chose (2 x 8 tokens, fewer
         * with targets in multi-token prediction's layer): no gradient, and
         * the loss does not move either; a gradient missing where the loss
         * moves still fails. */
        bool unrouted = gmax == 0 && fdmax == 0 && strstr(t->name, ".experts.");
        printf("  %-44s |G|max %.3e  finite differences off by %.1e of it%s\n", t->name, gmax, tw,
               unrouted ? "  (an expert no token chose)" : tw <= tol ? "" : "  FAIL");
        check((gmax > 0 && tw <= tol) || unrouted, t->name);
    }
    printf("selftest: loss %.9f, %d elements of %d tensors, worst %.1e (tolerance %.0e)%s\n", l0, checked,
           w->n - skipped, worst, tol, skipped ? " (REF_SELFTEST_ONLY: the others not checked)" : "");
    ref_st_free(w), ref_st_free(gr);
    free(tok), free(tgt);
    return failures != 0;
}

/* The question --grad-check's directional misses leave (a wrong gradient,
 * or the differences' own error?), answered in double on a program's
 * dump (its weights and tokens): per tensor, the reference's |G| beside the
 * program's, and central differences of the reference's objective along
 * G/|G| at --grad-check's step (train_gradcheck.c: 2e-3 / |G| in [1e-3, 1],
 * at most a quarter of |W| when that exceeds 1e-3) and at 1e-4. In double
 * the loss's rounding is ~1e-16, so a miss at the program's step that
 * vanishes at 1e-4 is the step's truncation (curvature), not the gradient.
 * The routers' choices are held as --grad-check holds them. */
static int cmd_direction(const char *mdl, const char *dump)
{
    RefConfig c;
    config(mdl, &c);
    c.objective = true;
    int64_t R = c.B * c.S;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)R), *tgt = malloc(sizeof(int32_t) * (size_t)R);
    RefSt *w = from_dump(&c, "-", "-", dump, tok, tgt), *pg = load(dump, "grads.safetensors");
    RefSt *gr = ref_st_zeros_like(w);
    double l0 = ref_step(&c, w, tok, tgt, NULL, gr);
    ref_moe_freeze(1); /* the routers' choices on the unmoved weights, as --grad-check */
    ref_step(&c, w, tok, tgt, NULL, NULL);
    printf("loss %.9f\n%-52s %11s %11s %9s %10s %10s %10s\n", l0, "tensor", "|G| ref", "|G| program",
           "h", "miss at h", "at 1e-4", "|G| diff");
    for (int i = 0; i < w->n; i++) {
        RefTensor *t = &w->t[i];
        const double *g = gr->t[i].v, *p = need(pg, t->name, t->n, "grads")->v;
        double n = 0, np = 0, nw = 0, nd = 0;
        for (int64_t e = 0; e < t->n; e++)
            n += g[e] * g[e], np += p[e] * p[e], nw += t->v[e] * t->v[e], nd += (p[e] - g[e]) * (p[e] - g[e]);
        n = sqrt(n), np = sqrt(np), nw = sqrt(nw), nd = sqrt(nd);
        double hp = 2e-3 / n, cap = 0.25 * nw;
        hp = hp < 1e-3 ? 1e-3 : hp > 1 ? 1 : hp;
        hp = cap > 1e-3 && hp > cap ? cap : hp;
        double miss[2], hs[2] = {hp, 1e-4};
        double *keep = malloc(sizeof(double) * (size_t)t->n);
        memcpy(keep, t->v, sizeof(double) * (size_t)t->n);
        for (int k = 0; k < 2; k++) {
            double l[2];
            for (int sg = 0; sg < 2; sg++) {
                for (int64_t e = 0; e < t->n; e++)
                    t->v[e] = keep[e] + (sg ? -hs[k] : hs[k]) * g[e] / n;
                ref_moe_freeze(2);
                l[sg] = ref_step(&c, w, tok, tgt, NULL, NULL);
            }
            miss[k] = fabs((l[0] - l[1]) / (2 * hs[k]) - n) / n;
        }
        memcpy(t->v, keep, sizeof(double) * (size_t)t->n);
        free(keep);
        printf("%-52s %11.4e %11.4e %9.2e %10.1e %10.1e %10.1e\n", t->name, n, np, hp, miss[0], miss[1], nd / n);
    }
    ref_moe_freeze(0);
    ref_st_free(w), ref_st_free(gr), ref_st_free(pg);
    free(tok), free(tgt);
    return 0;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "";
    int rc;
    if (!strcmp(cmd, "weights") && argc == 5) {
        RefConfig c;
        config(argv[2], &c);
        RefSt *w = ref_weights(&c, strtoull(argv[4], NULL, 10));
        RefSt *f = c.fam == REF_GPTOSS ? ref_oss_fuse(w) : w; /* the file in Hugging Face's layout */
        rc = ref_st_write(argv[3], f) ? 0 : 2;
        if (f != w)
            ref_st_free(f);
        ref_st_free(w);
    } else if (!strcmp(cmd, "tokens") && argc == 5) {
        rc = cmd_tokens(argv[2], argv[3], strtoull(argv[4], NULL, 10));
    } else if (!strcmp(cmd, "alter") && argc == 6) {
        rc = cmd_alter(argv[2], argv[3], argv[4], atoll(argv[5]));
    } else if (!strcmp(cmd, "check") && argc == 6) {
        rc = cmd_check(argv[2], argv[3], argv[4], argv[5]);
    } else if (!strcmp(cmd, "causal") && argc == 9) {
        rc = cmd_causal(argv[2], argv[3], argv[4], argv[5], atoll(argv[6]), argv[7], argv[8]);
    } else if (!strcmp(cmd, "direction") && argc == 4) {
        rc = cmd_direction(argv[2], argv[3]);
    } else if (!strcmp(cmd, "selftest") && argc == 3) {
        rc = cmd_selftest(argv[2]);
    } else {
        fprintf(stderr, "usage: ref_tool weights|tokens|alter|check|causal|selftest|direction ... (see ref_tool.c)\n");
        return 2;
    }
    if (rc == 1)
        printf("%d check(s) failed\n", failures);
    return rc;
}
