/* suggest.c: "did you mean" for unknown names: the candidate with the
 * smallest edit distance, if it is close enough to be a likely typo. */
#include "fe.h"

#include <string.h>

/* Levenshtein distance, giving up (returning limit + 1) past limit. */
static int distance(const char *a, const char *b, int limit)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la - lb > limit || lb - la > limit || la > FE_MAX_NAME || lb > FE_MAX_NAME)
        return limit + 1;
    int row[FE_MAX_NAME + 1];
    for (int j = 0; j <= lb; j++)
        row[j] = j;
    for (int i = 1; i <= la; i++) {
        int diag = row[0], best = row[0] = i;
        for (int j = 1; j <= lb; j++) {
            int up = row[j];
            int v = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < v)
                v = up + 1;
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            row[j] = v;
            diag = up;
            if (v < best)
                best = v;
        }
        if (best > limit)
            return limit + 1;
    }
    return row[lb];
}

const char *fe_suggest(const char *name, const char *const *cands, int ncands)
{
    /* Past the error limit nothing prints: skip the work. */
    if (ir_error_count() >= 50)
        return NULL;
    int len = (int)strlen(name);
    int limit = len <= 2 ? 1 : len <= 5 ? 2 : 3;
    const char *best = NULL;
    int bestd = limit + 1;
    for (int i = 0; i < ncands; i++) {
        if (!cands[i] || strcmp(cands[i], name) == 0)
            continue;
        /* A short form of a longer name (eps for epsilon) is a likely slip too. */
        size_t lc = strlen(cands[i]);
        if (!best && lc >= 3 && (size_t)len > lc && strncmp(cands[i], name, lc) == 0) {
            best = cands[i];
            continue;
        }
        int d = distance(name, cands[i], bestd - 1 < limit ? bestd - 1 : limit);
        if (d < bestd && d < len) {
            best = cands[i];
            bestd = d;
        }
    }
    return best;
}

const char *fe_did_you_mean(IrArena *a, const char *name, const char *const *cands, int ncands)
{
    const char *s = fe_suggest(name, cands, ncands);
    return s ? ir_sprintf(a, "; did you mean '%s'?", s) : "";
}
