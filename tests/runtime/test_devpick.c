/* test_devpick.c: rtc_pick_device, the GPU each rank of a node takes, for
 * the ways launchers expose GPUs (issue 15, item 8). */
#include "check.h"
#include "common.h"

#include <string.h>


enum { MAXV = 8, MAXR = 8 };
static char ids[MAXR * MAXV * RTC_DEVID_LEN];
static int nvis[MAXR];

/* Rank r sees the bus ids in `list` ("A B C"), in that order. */
static void see(int r, const char *list)
{
    nvis[r] = 0;
    for (const char *p = list; *p; p++)
        if (*p != ' ') {
            char *d = ids + ((size_t)r * MAXV + (size_t)nvis[r]++) * RTC_DEVID_LEN;
            memset(d, 0, RTC_DEVID_LEN);
            snprintf(d, RTC_DEVID_LEN, "0000:%c%c:00.0", *p, *p);
        }
}

static int pick(int me, int n, char *err)
{
    return rtc_pick_device(me, n, nvis, ids, MAXV, err, 256);
}

int main(void)
{
    char err[256];
    /* Every rank sees the node's four GPUs: device = local rank. */
    for (int r = 0; r < 4; r++)
        see(r, "ABCD");
    for (int r = 0; r < 4; r++)
        CHECK(pick(r, 4, err) == r, "all visible: rank %d took %d", r, pick(r, 4, err));
    /* Slurm --gpus-per-task=1: each rank sees one GPU, its own, as index 0. */
    see(0, "C"), see(1, "A"), see(2, "D"), see(3, "B");
    for (int r = 0; r < 4; r++)
        CHECK(pick(r, 4, err) == 0, "bound: rank %d took %d", r, pick(r, 4, err));
    /* Two ranks, one per GPU pair (--gpus-per-task=2): each takes its first. */
    see(0, "AB"), see(1, "CD");
    CHECK(pick(0, 2, err) == 0 && pick(1, 2, err) == 0, "pairs");
    /* A rank bound to B and one that sees all: the bound one keeps B, the
     * other takes A, whatever their rank order. */
    see(0, "AB"), see(1, "B");
    CHECK(pick(1, 2, err) == 0, "bound rank keeps its GPU");
    CHECK(pick(0, 2, err) == 0, "the other takes A");
    see(0, "B"), see(1, "AB");
    CHECK(pick(0, 2, err) == 0 && pick(1, 2, err) == 0, "bound first");
    /* CUDA_VISIBLE_DEVICES reorders: rank 1 sees B first. */
    see(0, "AB"), see(1, "BA");
    CHECK(pick(0, 2, err) == 0 && pick(1, 2, err) == 0, "reordered: 0 takes A, 1 takes B");
    /* Two ranks on one GPU: the second is refused with a sentence. */
    see(0, "A"), see(1, "A");
    CHECK(pick(0, 2, err) == 0, "first rank on the GPU");
    err[0] = 0;
    CHECK(pick(1, 2, err) == -1, "second rank on the same GPU refused");
    CHECK(strstr(err, "local rank 1 sees 1 GPU (0000:AA:00.0)") && strstr(err, "by local rank 0") &&
              strstr(err, "one GPU per rank"),
          "message: %s", err);
    /* More ranks than GPUs. */
    see(0, "AB"), see(1, "AB"), see(2, "AB");
    CHECK(pick(2, 3, err) == -1 && strstr(err, "local rank 2 sees 2 GPUs"), "3 ranks, 2 GPUs: %s", err);
    /* No GPU at all. */
    nvis[0] = 0;
    CHECK(pick(0, 1, err) == -1 && strstr(err, "no CUDA device visible"), "none: %s", err);
    return check_status("rt_devpick");
}
