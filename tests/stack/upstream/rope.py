"""LLaMA-3.1's rotary frequency scaling, the one rule Hugging Face
(_compute_llama3_parameters), Megatron-Core (RotaryEmbedding._apply_scaling),
torchtitan (precompute_freqs_cis) and ptdc (runtime/cpu/rope.c) each
implement: wavelengths shorter than old/high kept, longer than old/low divided
by factor, those between interpolated. What differs between them is which
parameters a user can set, which the callers say."""

import math


def inv_freqs(theta, dim):
    """theta^(-j/dim) for even j < dim."""
    return [1.0 / theta ** (j / dim) for j in range(0, dim, 2)]


def llama3(freqs, factor, low, high, old):
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < old / high:
            out.append(f)
        elif wavelen > old / low:
            out.append(f / factor)
        else:
            s = (old / wavelen - low) / (high - low)
            out.append((1 - s) * f / factor + s * f)
    return out
