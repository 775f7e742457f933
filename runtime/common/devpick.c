/* devpick.c: which visible GPU each rank of a node takes.
 *
 * A rank may see every GPU of its node (mpirun, or srun without GPU
 * binding), or only its own (Slurm --gpus-per-task=1 / --gpu-bind, a
 * per-rank CUDA_VISIBLE_DEVICES); visible index k is then a different GPU
 * on every rank. So ranks compare physical identities (PCI bus ids): every
 * local rank takes the first GPU it sees that no rank before it took, ranks
 * that see fewer GPUs choosing first, so a rank bound to one GPU always gets
 * it. Where every rank sees the same list this is device = local rank. Pure
 * host code: runtime/cuda gathers the ids, tests/runtime checks the rule. */
#include "common.h"

#include <string.h>

int rtc_pick_device(int me, int nlocal, const int *nvis, const char *ids, int maxvis, char *err,
                    size_t errlen)
{
    if (nvis[me] <= 0)
        return rtc_err(err, errlen, "no CUDA device visible to local rank %d", me);
    enum { MAXR = 1024 };
    if (nlocal > MAXR)
        return rtc_err(err, errlen, "%d ranks on one node: at most %d", nlocal, MAXR);
    int order[MAXR], pick[MAXR];
    for (int r = 0; r < nlocal; r++)
        order[r] = r;
    for (int i = 1; i < nlocal; i++) /* stable: fewer visible GPUs first */
        for (int j = i; j > 0 && nvis[order[j - 1]] > nvis[order[j]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
#define ID(r, k) (ids + ((size_t)(r) * (size_t)maxvis + (size_t)(k)) * RTC_DEVID_LEN)
    for (int i = 0; i < nlocal; i++) {
        int r = order[i];
        pick[r] = -1;
        for (int k = 0; k < nvis[r] && k < maxvis && pick[r] < 0; k++) {
            bool taken = false;
            for (int j = 0; j < i && !taken; j++) {
                int q = order[j];
                taken = pick[q] >= 0 && !strncmp(ID(q, pick[q]), ID(r, k), RTC_DEVID_LEN);
            }
            if (!taken)
                pick[r] = k;
        }
        if (pick[r] < 0 && r == me) {
            int owner = 0;
            for (int j = 0; j < i; j++)
                if (pick[order[j]] >= 0 && !strncmp(ID(order[j], pick[order[j]]), ID(r, 0), RTC_DEVID_LEN))
                    owner = order[j];
            return rtc_err(err, errlen,
                           "local rank %d sees %d GPU%s (%.*s%s), all taken by other ranks of this node "
                           "(GPU %.*s by local rank %d): NCCL needs one GPU per rank; give each rank its "
                           "own GPU (srun --gpus-per-task=1, or fewer ranks per node)",
                           r, nvis[r], nvis[r] == 1 ? "" : "s", RTC_DEVID_LEN, ID(r, 0),
                           nvis[r] > 1 ? ", ..." : "", RTC_DEVID_LEN, ID(r, 0), owner);
        }
    }
#undef ID
    return pick[me];
}
