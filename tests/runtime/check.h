/* check.h: the tiny assertion layer of the runtime tests. A failed CHECK
 * prints file:line and a message and counts; main returns check_status(). */
#ifndef PTDRT_TEST_CHECK_H
#define PTDRT_TEST_CHECK_H

#include <stdio.h>

extern int check_failures;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);                              \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            check_failures++;                                                                  \
        }                                                                                      \
    } while (0)

static inline int check_status(const char *name)
{
    if (check_failures)
        fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
    else
        printf("%s: all checks passed\n", name);
    return check_failures ? 1 : 0;
}

#endif
