/* measure.c: ptdc-measure's entry point: the flags, then the parts (the
 * m_*.c files, which share m_util.c); nothing calls back into this file.
 *
 *   ptdc-measure --part compute|comm|memory [--quick] [--budget SECONDS]
 *
 * `ptdc calibrate` launches it (mpirun/srun) once per part and machine
 * configuration; docs/cost-model.md lists the records it prints. */
#include "measure.h"

#ifdef PTDC_CUDA
#include <cuda_runtime.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void)
{
    fprintf(stderr, "usage: ptdc-measure --part compute|comm|memory [--quick] [--budget SECONDS]\n"
                    "Times libptdrt's kernels and collectives and prints calibration records;\n"
                    "`ptdc calibrate` runs it and fits the cost model to them.\n");
}

enum { NO_DEVICE = 3 }; /* exit status `ptdc calibrate` recognises */

int main(int argc, char **argv)
{
#ifdef PTDC_CUDA
    /* Say plainly that there is nothing to measure, before MPI and NCCL. */
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        fprintf(stderr, "ptdc-measure: no CUDA GPU on this machine (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no device visible");
        return NO_DEVICE;
    }
    if (argc == 2 && !strcmp(argv[1], "--devices")) { /* for `ptdc calibrate`'s default --ranks */
        printf("%d\n", ndev);
        return 0;
    }
#endif
    rt_init(&argc, &argv);
    CalOpts o;
    memset(&o, 0, sizeof o);
    o.rank = rt_world_rank();
    o.size = rt_world_size();
    o.budget_s = 0.05;
#ifdef PTDC_CUDA
    o.gpu = 1;
#endif
    const char *part = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--part") && i + 1 < argc) {
            part = argv[++i];
        } else if (!strcmp(argv[i], "--quick")) {
            o.quick = 1;
        } else if (!strcmp(argv[i], "--budget") && i + 1 < argc) {
            o.budget_s = atof(argv[++i]);
            if (!(o.budget_s > 0 && o.budget_s < 10))
                rt_fatal("ptdc-measure: --budget must be between 0 and 10 seconds");
        } else if (!strcmp(argv[i], "--help")) {
            if (o.rank == 0)
                usage();
            rt_finalize();
            return 0;
        } else {
            if (o.rank == 0)
                usage();
            rt_fatal("ptdc-measure: unknown argument '%s'", argv[i]);
        }
    }
    if (!part)
        rt_fatal("ptdc-measure: --part compute|comm|memory is required");
    cal_util_init();
    char host[256] = "";
    gethostname(host, sizeof host - 1);
#ifdef PTDC_CUDA
    const char *backend = "cuda";
#else
    const char *backend = "cpu";
#endif
    cal_out(&o, CAL_FMT_META, backend, o.size,
            (int)sizeof(rt_act), host, part);
    if (!strcmp(part, "compute")) {
        cal_measure_gemm(&o);
        cal_measure_kernels(&o);
        cal_measure_attention(&o);
    } else if (!strcmp(part, "comm")) {
        cal_measure_comm(&o);
        cal_measure_share(&o);
        cal_measure_sync(&o);
    } else if (!strcmp(part, "memory")) {
        cal_measure_memory(&o);
    } else {
        rt_fatal("ptdc-measure: unknown part '%s' (compute, comm or memory)", part);
    }
    cal_out(&o, CAL_FMT_END);
    rt_finalize();
    return 0;
}
