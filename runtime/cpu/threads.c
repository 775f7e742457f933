/* threads.c: how many threads a rank runs, and the environment its
 * libraries (OpenBLAS, libgomp) start with. Called by rt_init (process.c). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_* */
#include <cblas.h>
#include <sched.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu.h"
#include "simd.h"

/* GEMMs split over the OpenMP team (matmul.c), OpenBLAS single-threaded,
 * unless OPENBLAS_NUM_THREADS asks for OpenBLAS's own threads. Decided at
 * the first GEMM (or by rt_init), so programs and tests that call kernels
 * without rt_init get the same. */
static int gemm_split = -1;

static void blas_threads(void)
{
    gemm_split = getenv("OPENBLAS_NUM_THREADS") == NULL;
    if (gemm_split)
        openblas_set_num_threads(1);
}

int rtcpu_gemm_threads(void)
{
    if (gemm_split < 0)
        blas_threads();
    return gemm_split ? rtcpu_threads() : 1;
}

int rtcpu_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* OpenBLAS's kernels for this CPU when it fell back to generic ones, or NULL.
 * OpenBLAS chooses when it is loaded, from the CPU model; a release older
 * than the CPU does not know the model and takes its Prescott (SSE3)
 * kernels: Debian 12's 0.3.21 on an Intel Xeon of model 0xCF runs sgemm at
 * 20 GFLOP/s a core instead of the 120 of its AVX-512 (SkylakeX) kernels. */
static const char *blas_core(void)
{
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "prescott") != 0)
        return NULL;
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    if (__builtin_cpu_supports("avx"))
        return "Sandybridge";
#endif
    return NULL;
}

/* The libraries read their settings from the environment when they are
 * loaded, before main, so the program sets what it needs and starts again
 * (execv, before MPI_Init: nothing but this process exists yet). Settings
 * the user made are left alone, which also ends the loop:
 *   OPENBLAS_CORETYPE  better kernels where OpenBLAS fell back (above);
 *   OMP_WAIT_POLICY    passive: libgomp's threads sleep as soon as they wait
 *                      instead of spinning for milliseconds. Waking them
 *                      costs microseconds a kernel; spinning, when anything
 *                      else shares the cores (another rank, MPI, another
 *                      job), cost 40% of a step on a busy 2-core machine
 *                      (5.1 s against 2.9 s). GOMP_SPINCOUNT counts as a
 *                      choice too. */
void rtcpu_library_env(char **argv)
{
    if (!argv || !argv[0])
        return;
    bool again = false;
    const char *core = getenv("OPENBLAS_CORETYPE") ? NULL : blas_core();
    if (core)
        again |= setenv("OPENBLAS_CORETYPE", core, 1) == 0;
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT"))
        again |= setenv("OMP_WAIT_POLICY", "passive", 1) == 0;
    if (!again)
        return;
    /* The program's own path, so that it keeps its name (ps, top). */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = 0;
    execv(self, argv);
    /* exec failed (no /proc?): carry on with the libraries as they are */
}

/* CPUs this process may run on (its affinity mask, which mpirun's binding
 * or srun's --cpus-per-task set), or every online CPU. */
static int affinity(cpu_set_t *set)
{
    CPU_ZERO(set);
    if (sched_getaffinity(0, sizeof *set, set) == 0 && CPU_COUNT(set) > 0)
        return CPU_COUNT(set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i < n && i < CPU_SETSIZE; i++)
        CPU_SET(i, set);
    return n > 0 ? (int)n : 1;
}

/* Threads per rank = this rank's CPUs / the ranks of this node sharing them
 * (at least 1): a rank bound to T cores runs T threads; unbound ranks split
 * the node. OMP_NUM_THREADS (read by libgomp itself) overrides the count.
 * GEMMs run on the same OpenMP team, OpenBLAS single-threaded (matmul.c),
 * unless OPENBLAS_NUM_THREADS asks for OpenBLAS's own threads. */
void rtcpu_threads_init(void)
{
    cpu_set_t mine;
    int cpus = affinity(&mine);
    MPI_Comm node;
    RT_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int n = 1;
    RT_MPI(MPI_Comm_size(node, &n));
    cpu_set_t *all = rtcpu_xmalloc((size_t)n * sizeof *all);
    RT_MPI(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, node));
    RT_MPI(MPI_Comm_free(&node));
    int sharing = 0;
    for (int r = 0; r < n; r++) {
        cpu_set_t both;
        CPU_AND(&both, &mine, &all[r]);
        sharing += CPU_COUNT(&both) > 0;
    }
    free(all);
    int t = cpus / (sharing > 0 ? sharing : 1);
    if (t < 1)
        t = 1;
#ifdef _OPENMP
    if (!getenv("OMP_NUM_THREADS"))
        omp_set_num_threads(t);
#endif
    blas_threads();
}
