/* test_schedule.c: the pipeline schedule is well formed (every micro-batch of
 * every chunk goes forward once, then backward once), the slot counts and
 * activation peaks computed from its prefix equal those of the whole
 * schedule, and 1F1B holds min(m, pp - r) micro-batches on rank r. */
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "check failed: %s: ", #cond);                                 \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

int main(void)
{
    int cases = 0;
    for (int pp = 1; pp <= 8; pp++)
        for (int v = 1; v <= 4; v++)
            for (int mult = 1; mult <= 6; mult++) {
                if (v > 1 && pp == 1)
                    continue;
                int m = v == 1 ? mult + pp / 2 : mult * pp; /* interleaving: m a multiple of pp */
                for (int r = 0; r < pp; r++) {
                    int n = 2 * m * v;
                    int *state = calloc((size_t)(m * v), sizeof *state);
                    int live[PASS_MAX_CHUNKS] = {0}, slots[PASS_MAX_CHUNKS] = {0};
                    double saved[PASS_MAX_CHUNKS], sum = 0, peak = 0;
                    for (int j = 0; j < v; j++)
                        saved[j] = 1 + 0.37 * j;
                    for (int k = 0; k < n; k++) {
                        PassSchedOp op = pass_schedule_op(pp, v, m, r, k);
                        CHECK(op.chunk >= 0 && op.chunk < v && op.mb >= 0 && op.mb < m,
                              "pp %d v %d m %d rank %d op %d", pp, v, m, r, k);
                        int *s = &state[op.mb * v + op.chunk];
                        CHECK(*s == op.bwd, "pp %d v %d m %d rank %d: op %d out of order", pp, v, m,
                              r, k);
                        *s += 1;
                        live[op.chunk] += op.bwd ? -1 : 1;
                        sum += (op.bwd ? -1 : 1) * saved[op.chunk];
                        if (live[op.chunk] > slots[op.chunk])
                            slots[op.chunk] = live[op.chunk];
                        peak = fmax(peak, sum);
                    }
                    for (int i = 0; i < m * v; i++)
                        CHECK(state[i] == 2, "pp %d v %d m %d rank %d: item %d ran %d times", pp,
                              v, m, r, i, state[i]);
                    free(state);
                    int got[PASS_MAX_CHUNKS];
                    pass_schedule_slots(pp, v, m, r, got);
                    double stat = 0;
                    for (int j = 0; j < v; j++) {
                        CHECK(got[j] == slots[j], "pp %d v %d m %d rank %d chunk %d: %d slots, "
                              "the whole schedule needs %d", pp, v, m, r, j, got[j], slots[j]);
                        stat += slots[j] * saved[j];
                    }
                    if (v == 1)
                        CHECK(slots[0] == (m < pp - r ? m : pp - r), "1F1B rank %d holds %d", r,
                              slots[0]);
                    double a = pass_schedule_acts(pp, v, m, r, saved, false);
                    double d = pass_schedule_acts(pp, v, m, r, saved, true);
                    CHECK(fabs(a - stat) < 1e-9, "static acts %g vs %g", a, stat);
                    CHECK(fabs(d - peak) < 1e-9, "dynamic acts %g vs %g (pp %d v %d m %d rank %d)",
                          d, peak, pp, v, m, r);
                    CHECK(d <= a + 1e-9, "a peak above the sum of the maxima");
                    cases++;
                }
            }
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("schedule: %d rank schedules checked\n", cases);
    return 0;
}
