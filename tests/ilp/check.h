/* check.h: what the ILP tests share: a CHECK that counts failures and keeps
 * going, and a small xorshift generator (each test seeds it with ilp_seed). */
#ifndef PTDC_TEST_ILP_CHECK_H
#define PTDC_TEST_ILP_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                        \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

static uint64_t rng;
static inline void ilp_seed(uint64_t s) { rng = s; }
static inline uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static inline int irand(int n) { return (int)(next() % (uint64_t)n); }
static inline double urand(void) { return (double)(next() >> 11) / 9007199254740992.0; }

#endif
