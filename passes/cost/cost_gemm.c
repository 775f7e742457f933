/* cost_gemm.c: GEMM time on one device. A GEMM's efficiency depends on its
 * shape: the output is cut into tiles that run in waves over the device's
 * parallel units (a partial tile or a partial last wave costs a whole one),
 * K is consumed in slices through a pipeline that fills and drains (small K
 * is slow), and dims that break vector alignment fall back to slow kernels.
 * The result is bounded below by the time to stream the operands (skinny
 * GEMMs are memory bound), plus a per-call overhead. The curve's parameters
 * belong to the device: NVIDIA's libraries for the GPU presets, fitted to
 * measurements by `ptdc calibrate` for a measured device. */
#include "cost/cost.h"

#include <math.h>

static double ceil_to(double x, double q) { return ceil(x / q) * q; }
/* fmod(x, 8) == 0 without the libm call: x / 8 is exact. */
static bool mult8(double x) { return floor(x * 0.125) == x * 0.125; }

double pass_gemm_eff(const PassGpu *gpu, double M, double N, double K, double batch)
{
    if (M <= 0 || N <= 0 || K <= 0 || batch <= 0)
        return gpu->gemm_eff;
    /* Wave quantisation: useful tile area over the tile-slots the waves occupy. */
    double tm = gpu->gemm_tile_m > 0 ? gpu->gemm_tile_m : 1;
    double tn = gpu->gemm_tile_n > 0 ? gpu->gemm_tile_n : 1;
    double tiles = ceil(M / tm) * ceil(N / tn) * batch;
    double sms = gpu->sms > 0 ? gpu->sms : 1;
    double waves = ceil(tiles / sms);
    double wave = (M * N * batch) / (waves * sms * tm * tn);
    /* K padded to the slice depth, then pipeline fill/drain. */
    double kpad = ceil_to(K, gpu->gemm_tile_k > 0 ? gpu->gemm_tile_k : 1);
    double kf = (K / kpad) * (K / (K + gpu->gemm_k_half));
    double mh = gpu->gemm_mn_half;
    double mnf = mh > 0 ? (M / (M + mh)) * (N / (N + mh)) : 1;
    double align = (!mult8(M) || !mult8(N) || !mult8(K)) ? gpu->gemm_misalign : 1;
    return gpu->gemm_eff * wave * kf * mnf * align;
}

/* A GEMM at tensor-core rate `peak` with operands of in_bytes per element
 * (the output in the activation type): the format's rate times the same
 * shape efficiency, since tiles, waves and the K pipeline are the format's
 * too (so a small GEMM gains less from a faster format: its overhead and
 * quantisation stay). cost_prec.c prices the low-precision formats with it. */
double pass_gemm_time_at(const PassGpu *gpu, double M, double N, double K, double batch,
                         double peak, double in_bytes)
{
    if (M <= 0 || N <= 0 || K <= 0 || batch <= 0)
        return 0;
    double flops = 2 * M * N * K * batch;
    double t_compute = flops / (peak * pass_gemm_eff(gpu, M, N, K, batch));
    int eb = gpu->act_bytes > 0 ? gpu->act_bytes : 2;
    double bytes = (in_bytes * (M * K + K * N) + eb * M * N) * batch; /* operands and result */
    double t_mem = bytes / (gpu->hbm_bw * gpu->hbm_eff);
    return (t_compute > t_mem ? t_compute : t_mem) + gpu->gemm_overhead_s;
}

double pass_gemm_time(const PassGpu *gpu, double M, double N, double K, double batch)
{
    int eb = gpu->act_bytes > 0 ? gpu->act_bytes : 2;
    return pass_gemm_time_at(gpu, M, N, K, batch, gpu->peak_flops, eb);
}

double pass_mem_time(const PassGpu *gpu, double bytes, int kernels)
{
    return bytes / (gpu->hbm_bw * gpu->hbm_eff) + kernels * gpu->kernel_overhead_s;
}
