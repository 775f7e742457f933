/* cost_consts.c: every number the cost and memory model uses, in one place,
 * each with where it comes from. Datasheet and measured hardware numbers are
 * in the GPU presets; the model's efficiency and overhead constants are in
 * pass_cost_consts. docs/cost-model.md explains each and how the calibrated
 * ones were chosen (tests/cost/test_calib.c checks them against the
 * published runs in ../shared/reference). */
#include "cost/cost.h"

#define GB 1e9
#define MIB 1048576.0
#define GIB 1073741824.0

/* Capacity: what nvidia-smi reports as the total (A100 "80 GB" = 81920 MiB).
 * Peaks: NVIDIA datasheets (dense bf16). NVLink and NIC: per GPU and
 * direction (A100: 12 links x 25 GB/s, HDR 200 Gb/s; H100/H200: 18 x 25 GB/s,
 * NDR 400 Gb/s). Bus bandwidths (nccl-tests busbw, large messages): DGX A100
 * 8-GPU all-reduce 232 GB/s (NVIDIA/nccl#1048); A100 across nodes 192 GB/s
 * for 8 HDR NICs = 24 per NIC (nccl#1576); H100 NVLink ring 370 GB/s
 * (nccl-tests#212); NDR 46 GB/s per NIC (nccl-tests#290). Latencies per ring
 * step: NCCL's tuning model (src/graph/tuning.cc: NVLink 0.6-3.4 us, network
 * 2.7-14 us per hop by protocol), fitted to nccl-tests all-reduce on a DGX
 * A100 (busbw about 60 GB/s at 1 MB, 130 at 4 MB, 190 at 16 MB: a 25 us
 * latency for 14 steps plus the 8 us base). gemm_eff: sustained fraction
 * of peak of a large bf16 GEMM inside a training step: A100 cuBLAS reaches
 * 235-255 TFLOP/s on transformer shapes (EleutherAI cookbook sizing results,
 * 75-82%), H100 600-700 of 989 (power-capped clocks); calibrated within those
 * ranges against the LLaMA-13B sweep and the Megatron H100 table. hbm_eff:
 * STREAM-like kernels reach about 85-92% of the datasheet bandwidth. */
/* The GEMM curve and kernel overhead of NVIDIA's sm80/sm90 libraries:
 * CUTLASS/cuBLAS bf16 kernels use 128x128 (or 256x128) output tiles and
 * 32-64 deep K slices, partial tiles and the last wave costing full ones;
 * each tile loads its operands through a pipeline that must fill and drain
 * (with K = 128, attention's head_dim GEMMs, cuBLAS reaches about 2/3 of its
 * large-K rate); dims not multiples of 8 elements break 16-byte vector
 * loads and fall back to slower kernels (NVIDIA "Matrix multiplication
 * background" guide; EleutherAI sizing guide); launch and tail cost a few
 * microseconds per kernel. */
#define NV_GEMM_CURVE                                                                          \
    .kind = PASS_DEV_GPU, .act_bytes = 2, .gemm_tile_m = 128, .gemm_tile_n = 128,              \
    .gemm_tile_k = 64, .gemm_k_half = 64, .gemm_misalign = 0.5, .gemm_overhead_s = 3e-6,       \
    .kernel_overhead_s = 3e-6

const PassGpu pass_gpu_presets[] = {
    {.name = "a100-40gb", .peak_flops = 312e12, .hbm_bytes = 40960 * MIB, .hbm_bw = 1555 * GB,
     .nvlink_bw = 300 * GB, .nic_bw = 25 * GB, .busbw_nvlink = 232 * GB, .busbw_ib = 24 * GB,
     .alpha_nvlink = 1.2e-6, .alpha_ib = 5e-6, .sms = 108, .gemm_eff = 0.75, .hbm_eff = 0.85, NV_GEMM_CURVE},
    {.name = "a100-80gb", .peak_flops = 312e12, .hbm_bytes = 81920 * MIB, .hbm_bw = 2039 * GB,
     .nvlink_bw = 300 * GB, .nic_bw = 25 * GB, .busbw_nvlink = 232 * GB, .busbw_ib = 24 * GB,
     .alpha_nvlink = 1.2e-6, .alpha_ib = 5e-6, .sms = 108, .gemm_eff = 0.75, .hbm_eff = 0.85, NV_GEMM_CURVE},
    {.name = "h100-80gb", .peak_flops = 989e12, .peak_fp8_flops = 1979e12, .hbm_bytes = 81559 * MIB, .hbm_bw = 3350 * GB,
     .nvlink_bw = 450 * GB, .nic_bw = 50 * GB, .busbw_nvlink = 370 * GB, .busbw_ib = 46 * GB,
     .alpha_nvlink = 1.0e-6, .alpha_ib = 4e-6, .sms = 132, .gemm_eff = 0.60, .hbm_eff = 0.90, NV_GEMM_CURVE},
    {.name = "h200", .peak_flops = 989e12, .peak_fp8_flops = 1979e12, .hbm_bytes = 143771 * MIB, .hbm_bw = 4800 * GB,
     .nvlink_bw = 450 * GB, .nic_bw = 50 * GB, .busbw_nvlink = 370 * GB, .busbw_ib = 46 * GB,
     .alpha_nvlink = 1.0e-6, .alpha_ib = 4e-6, .sms = 132, .gemm_eff = 0.62, .hbm_eff = 0.90, NV_GEMM_CURVE},
    /* The systems below (docs/cost-model.md, "Presets", cites each number):
     * peaks are the datasheets' sparse rates halved (NVIDIA lists Blackwell
     * dense FP4 where it differs); nvlink_bw and nic_bw are the datasheet
     * link rates; busbw_nvlink and busbw_ib are not measured but scaled from
     * the link rates by the H100 preset's ratios (370/450 NVLink, 46/50 per
     * NIC); latencies and hbm_eff are the H100 preset's until a measurement
     * is published. gemm_eff is the sustained rate under each system's power
     * limit (HGX B200 1,000 W, GB200 1,200 W, GB300 1,400 W; the datasheet
     * peaks are boost-clock rates): fitted, one number per GPU, on
     * Megatron-Bridge's published dense rows of that GPU (least mean |log
     * ratio| of tokens/s, bench/bridge_gemm_eff.py; docs/cost-model.md,
     * "The Blackwell presets' sustained rates"); b300 and h800, without such
     * rows, keep H100's 0.60. Capacities are the per-GPU totals the cited
     * system pages report (nvidia-smi style, GiB). */
    /* HGX H800: an H100 SXM with 8 NVLinks (400 GB/s both directions). */
    {.name = "h800", .peak_flops = 989e12, .peak_fp8_flops = 1979e12, .hbm_bytes = 81559 * MIB, .hbm_bw = 3350 * GB,
     .nvlink_bw = 200 * GB, .nic_bw = 50 * GB, .busbw_nvlink = 164.4 * GB, .busbw_ib = 46 * GB,
     .alpha_nvlink = 1.0e-6, .alpha_ib = 4e-6, .sms = 132, .gemm_eff = 0.60, .hbm_eff = 0.90, NV_GEMM_CURVE},
    /* DGX/HGX B200: 8 per host, ConnectX-7 400 Gb/s per GPU. */
    {.name = "b200", .peak_flops = 2250e12, .peak_fp8_flops = 4500e12, .peak_fp4_flops = 9000e12,
     .hbm_bytes = 183359 * MIB, .hbm_bw = 8000 * GB, .nvlink_bw = 900 * GB, .nic_bw = 50 * GB,
     .busbw_nvlink = 740 * GB, .busbw_ib = 46 * GB, .alpha_nvlink = 1.0e-6, .alpha_ib = 4e-6, .sms = 148,
     .gemm_eff = 0.51, .hbm_eff = 0.90, .host_gpus = 8, NV_GEMM_CURVE},
    /* HGX B300 (Blackwell Ultra): 8 per host, ConnectX-8 800 Gb/s per GPU. */
    {.name = "b300", .peak_flops = 2250e12, .peak_fp8_flops = 4500e12, .peak_fp4_flops = 13125e12,
     .hbm_bytes = 270 * GIB, .hbm_bw = 8000 * GB, .nvlink_bw = 900 * GB, .nic_bw = 100 * GB,
     .busbw_nvlink = 740 * GB, .busbw_ib = 92 * GB, .alpha_nvlink = 1.0e-6, .alpha_ib = 4e-6, .sms = 160,
     .gemm_eff = 0.60, .hbm_eff = 0.90, .host_gpus = 8, NV_GEMM_CURVE},
    /* GB200 NVL72: 18 trays of 4 GPUs in one 72-GPU NVLink domain,
     * ConnectX-7 400 Gb/s per GPU; each tray's host is two Grace CPUs
     * (NVIDIA GB200 NVL72 product page: 36 Grace CPUs, 72 Blackwell GPUs),
     * where DGX/HGX B200, B300 and H100 hosts are x86 (host_grace). host_copy_bw: a GB200 superchip joins
     * its Grace CPU to its two GPUs by NVLink-C2C, 900 GB/s both directions
     * together; a copy to the host runs one way, and both GPUs of a
     * superchip copy at once when every rank offloads in step: 900 / 2 / 2
     * per GPU. Capacity: the 189471 MiB (185.0 GiB) nvidia-smi reports on a
     * GB200, as b200's is its nvidia-smi figure; the datasheet's "186 GB" per
     * GPU (13.4 TB over 72) is that figure rounded, not 186 GiB. */
    {.name = "gb200", .peak_flops = 2500e12, .peak_fp8_flops = 5000e12, .peak_fp4_flops = 10000e12,
     .hbm_bytes = 189471 * MIB, .hbm_bw = 8000 * GB, .nvlink_bw = 900 * GB, .nic_bw = 50 * GB,
     .busbw_nvlink = 740 * GB, .busbw_ib = 46 * GB, .alpha_nvlink = 1.0e-6, .alpha_ib = 4e-6, .sms = 148,
     .gemm_eff = 0.50, .hbm_eff = 0.90, .host_gpus = 4, .domain_gpus = 72, .host_copy_bw = 225 * GB,
     .host_grace = 1, NV_GEMM_CURVE},
    /* GB300 NVL72: the same rack with Blackwell Ultra and ConnectX-8 800 Gb/s
     * (and the same NVLink-C2C between a Grace and its two GPUs). */
    {.name = "gb300", .peak_flops = 2500e12, .peak_fp8_flops = 5000e12, .peak_fp4_flops = 15000e12,
     .hbm_bytes = 279 * GIB, .hbm_bw = 8000 * GB, .nvlink_bw = 900 * GB, .nic_bw = 100 * GB,
     .busbw_nvlink = 740 * GB, .busbw_ib = 92 * GB, .alpha_nvlink = 1.0e-6, .alpha_ib = 4e-6, .sms = 160,
     .gemm_eff = 0.61, .hbm_eff = 0.90, .host_gpus = 4, .domain_gpus = 72, .host_copy_bw = 225 * GB,
     .host_grace = 1, NV_GEMM_CURVE},
};
const int pass_ngpu_presets = (int)(sizeof pass_gpu_presets / sizeof pass_gpu_presets[0]);

const PassCostConsts pass_cost_consts = {
    /* FlashAttention-2 paper (Dao 2023): A100 forward 50-73% of peak,
     * backward 40-63%; relative to a large GEMM's sustained rate. FA1 is about
     * half FA2's speed (same paper, Fig. 4-6), more in backward. */
    .flash2_fwd = 0.80,
    .flash2_bwd = 0.68,
    .flash1_fwd = 0.40,
    .flash1_bwd = 0.30,
    /* Backward runs 5 matmuls of forward's 2 size (S recomputed). */
    .flash_bwd_ratio = 2.5,
    /* NCCL's base latency of a collective (tuning.cc: 6.6-8.4 us by protocol). */
    .coll_base_s = 8e-6,
    /* NCCL kernels occupy SMs while overlapping compute: Calculon charges 15%
     * (NVLink) to 2% (IB) of the overlapped time. */
    .overlap_slowdown = 0.10,
    /* Transformer Engine's userbuffers split a row-parallel GEMM into 4 to
     * pipeline its reduce-scatter (transformer_engine/pytorch/module/
     * base.py, initialize_ub: num_splits 4 for the "pipeline" method, which
     * proj_fprop and fc2_fprop use; Megatron passes no other unless
     * --tp-comm-overlap-cfg does). */
    .tp_rs_splits = 4,
    /* ... and allocates one buffer of [seq x micro-batch, hidden] for each
     * of the ten GEMMs its default methods list (v1.8, Megatron-Core r0.8's:
     * 4 ring_exchange, 2 pipeline, 4 bulk: qkv, proj, fc1, fc2 forward and
     * input gradient, qkv and fc1 weight gradient; later releases add two
     * "external" entries for the proj and fc2 weight gradients). */
    .tp_ub_buffers = 10,
    /* CUDA context with lazy module loading (CUDA >= 11.7): 0.5-0.9 GiB. */
    .cuda_ctx_bytes = 0.75 * GIB,
    /* NCCL per communicator: 0.5-0.7 GB measured on A100 (NVIDIA/nccl#964,
     * #864); ptdc splits communicators with shared resources, so less. */
    .nccl_comm_bytes = 0.5 * GIB,
    /* cuBLAS workspace (32 MiB on sm90) plus attention and loss scratch. */
    .workspace_bytes = 128 * MIB,
    /* AdamW on one shard element: read grad (2) master, m, v (12), write
     * master, m, v (12) and the bf16 weight (2), plus the grad-norm read (2). */
    .opt_bytes_per_elem = 30,
};
