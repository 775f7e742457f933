#!/usr/bin/env python3
"""bench/gpu/sdpa_reference.py: PyTorch's FlashAttention-2 backend
(scaled_dot_product_attention under SDPBackend.FLASH_ATTENTION) at the shapes
and FLOP convention of attention_bench.cu, as the reference beside ptdc's
kernels (docs/cuda.md): causal, bf16, 16384 tokens per call, heads x D = 2048;
forward 4 B H S^2 D / 2 FLOPs, backward 2.5x forward, timed as (forward +
backward) - forward with CUDA events over 10 calls after 3 warm-ups.
Needs a GPU and PyTorch; prints "SKIPPED: <reason>" and exits 77 otherwise."""
import sys

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError as e:
    print("SKIPPED: %s" % e)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIPPED: torch.cuda finds no GPU")
    sys.exit(77)


def ms(fn, iters=10):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / iters


print("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name()))
print("   D      S |   fwd ms  TFLOP/s |   bwd ms  TFLOP/s")
for D in (64, 128):
    for S in (512, 1024, 2048, 4096, 8192):
        B, H = 16384 // S, 2048 // D
        q, k, v = [torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3)]
        do = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            fwd = ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            both = ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(do))
        flops = 4 * B * H * S * S * D / 2
        print("%4d %6d | %8.3f %8.1f | %8.3f %8.1f" % (D, S, fwd, flops / fwd * 1e-9, both - fwd,
                                                        2.5 * flops / (both - fwd) * 1e-9), flush=True)
