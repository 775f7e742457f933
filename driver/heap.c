/* heap.c: the process heap laid out for the search's allocation pattern.
 *
 * Planning a large model touches about 200 MB of heap it never gives back
 * (the ILP cache, the variants, the floors' memos), 4 KiB at a time: on a
 * paravirtualised VM each first touch is a page fault of several
 * microseconds, and DeepSeek-V3 on 2048 A100s took 53,000 of them, about a
 * tenth of its CPU time (perf: pvm_irq_enable under exc_page_fault). So the
 * heap is grown once, up front, by HEAP_RESERVE (address space only: pages
 * are still touched on use), that range advised for transparent huge pages
 * (2 MiB a fault where the kernel's THP mode is "madvise" or "always"),
 * and freed memory kept rather than trimmed and faulted in again. glibc on
 * Linux only; under a sanitizer or another allocator, nothing. */
#define _DEFAULT_SOURCE /* sbrk, madvise */
#include "driver.h"

#include <stdint.h>
#include <stdlib.h>

#if defined(__GLIBC__) && defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

enum { HEAP_RESERVE = 512 << 20, HUGE_PAGE = 2 << 20 };

void drv_heap_init(void)
{
    /* Blocks up to 32 MiB from the heap (not one mmap each, faulted afresh
     * per allocation), and no trimming below 1 GiB free at its top. */
    if (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, 1 << 30))
        return;
    /* The next growth of the heap takes HEAP_RESERVE more than it needs:
     * force it with a block larger than what is left at the top. */
    mallopt(M_TOP_PAD, HEAP_RESERVE);
    char *p = malloc(1 << 20);
    char *end = sbrk(0);
    uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (p && end != (char *)-1 && (char *)a < end)
        (void)madvise((void *)a, (size_t)(end - (char *)a), MADV_HUGEPAGE); /* advice: may be refused */
    free(p);
    mallopt(M_TOP_PAD, 128 << 10); /* glibc's default again */
}
#else
void drv_heap_init(void) {}
#endif
