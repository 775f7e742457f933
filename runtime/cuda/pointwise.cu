/* pointwise.cu: SiLU, fused SwiGLU, GELU (tanh form), add and mul with
 * broadcast; the fp32 gradient adds (rt_grad_add, rt_grad_sum).
 *
 * One grid-stride pass, fp32 math on bf16 loads, one rounding per output.
 * When sizes are multiples of 8 and pointers 16-byte aligned each thread moves
 * 8 elements per 16-byte access (memory-bound: ~80-90% of HBM bandwidth
 * expected). Outputs may alias inputs: each element is read and written by
 * the same thread. */
#include "cu_dev.cuh"

namespace {

struct Sigmoid {
    __device__ float operator()(float x, float) const { return 1.0f / (1.0f + expf(-x)); }
};
struct SigmoidBwd { /* (y, dy) */
    __device__ float operator()(float y, float dy) const { return dy * y * (1.0f - y); }
};
struct Silu {
    __device__ float operator()(float x, float) const { return x / (1.0f + expf(-x)); }
};
struct SiluBwd { /* (x, dy) */
    __device__ float operator()(float x, float dy) const
    {
        float s = 1.0f / (1.0f + expf(-x));
        return dy * s * (1.0f + x * (1.0f - s));
    }
};
constexpr float kGeluC = 0.7978845608028654f; /* sqrt(2/pi) */
struct Gelu {
    __device__ float operator()(float x, float) const
    {
        float t = tanhf(kGeluC * (x + 0.044715f * x * x * x));
        return 0.5f * x * (1.0f + t);
    }
};
struct GeluBwd {
    __device__ float operator()(float x, float dy) const
    {
        float t = tanhf(kGeluC * (x + 0.044715f * x * x * x));
        float dt = (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * x * x);
        return dy * (0.5f * (1.0f + t) + 0.5f * x * dt);
    }
};
struct Add {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct Mul {
    __device__ float operator()(float a, float b) const { return a * b; }
};

/* out[i] = op(a[i], b[i % nb]); b may be NULL for unary ops (then 0 is passed). */
template <class Op>
__global__ void k_map(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb, Op op)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float bv = b ? ld(b + (nb == n ? i : i % nb)) : 0.0f;
        out[i] = bf(op(ld(a + i), bv));
    }
}

/* Same over groups of 8 (n, nb multiples of 8, 16-byte aligned). */
template <class Op>
__global__ void k_map8(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb, Op op)
{
    int64_t n8 = n / 8, stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
        float av[8], bv[8], ov[8];
        bf8_load(av, a + 8 * i);
        if (b)
            bf8_load(bv, b + (nb == n ? 8 * i : (8 * i) % nb));
        else
            for (int j = 0; j < 8; j++) bv[j] = 0.0f;
        for (int j = 0; j < 8; j++) ov[j] = op(av[j], bv[j]);
        bf8_store(out + 8 * i, ov);
    }
}

template <class Op>
void map(const char *fn, rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb, Op op)
{
    rtcu_require_init(fn);
    if (n <= 0) return;
    if (b && (nb <= 0 || n % nb != 0))
        rt_fatal("%s: broadcast size %lld does not divide %lld", fn, (long long)nb, (long long)n);
    size_t es = sizeof(rt_act);
    rtcu_deps({{out, (size_t)n * es}, {a, (size_t)n * es}, {b, b ? (size_t)nb * es : (size_t)0}});
    const int T = 256;
    if (n % 8 == 0 && (!b || nb % 8 == 0) && rtcu_aligned16(out, a, b))
        RTCU_LAUNCH(k_map8<Op>, rtcu_grid(n / 8, T), T, 0)(out, a, b, n, nb, op);
    else
        RTCU_LAUNCH(k_map<Op>, rtcu_grid(n, T), T, 0)(out, a, b, n, nb, op);
    LAUNCH_CHECK();
}

/* SwiGLU: y = silu(a) b; backward da = dy b s (1 + a (1 - s)), db = dy a s
 * (s = sigmoid(a)), the CPU backend's formulas. Each thread owns element
 * groups, so outputs may alias inputs. */
__device__ __forceinline__ float swiglu(float a, float b) { return a / (1.0f + expf(-a)) * b; }
__device__ __forceinline__ void swiglu_bwd(float a, float b, float g, float *da, float *db)
{
    float s = 1.0f / (1.0f + expf(-a));
    *da = g * b * s * (1.0f + a * (1.0f - s));
    *db = g * a * s;
}

__global__ void k_swiglu_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = bf(swiglu(ld(a + i), ld(b + i)));
}

__global__ void k_swiglu_fwd8(rt_act *y, const rt_act *a, const rt_act *b, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n / 8; i += stride) {
        float av[8], bv[8], ov[8];
        bf8_load(av, a + 8 * i);
        bf8_load(bv, b + 8 * i);
        for (int j = 0; j < 8; j++) ov[j] = swiglu(av[j], bv[j]);
        bf8_store(y + 8 * i, ov);
    }
}

__global__ void k_swiglu_bwd(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b, const rt_act *dy,
                             int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float x, z;
        swiglu_bwd(ld(a + i), ld(b + i), ld(dy + i), &x, &z);
        da[i] = bf(x);
        db[i] = bf(z);
    }
}

__global__ void k_swiglu_bwd8(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b, const rt_act *dy,
                              int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n / 8; i += stride) {
        float av[8], bv[8], gv[8], x[8], z[8];
        bf8_load(av, a + 8 * i);
        bf8_load(bv, b + 8 * i);
        bf8_load(gv, dy + 8 * i);
        for (int j = 0; j < 8; j++) swiglu_bwd(av[j], bv[j], gv[j], &x[j], &z[j]);
        bf8_store(da + 8 * i, x);
        bf8_store(db + 8 * i, z);
    }
}

/* Squared ReLU and GPT-OSS's clamped SwiGLU (rt.h; the CPU backend's
 * formulas), element by element: outputs may alias inputs. */
__device__ __forceinline__ float oai_gate(float a) { return fminf(a, RT_OAI_LIMIT); }
__device__ __forceinline__ float oai_up(float b) { return fminf(fmaxf(b, -RT_OAI_LIMIT), RT_OAI_LIMIT); }

__global__ void k_relu2_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float r = fmaxf(ld(x + i), 0.0f);
        y[i] = bf(r * r);
    }
}

__global__ void k_relu2_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = ld(x + i);
        dx[i] = bf(v > 0.0f ? 2.0f * v * ld(dy + i) : 0.0f);
    }
}

__global__ void k_swiglu_oai_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float g = oai_gate(ld(a + i));
        y[i] = bf(g / (1.0f + expf(-RT_OAI_ALPHA * g)) * (oai_up(ld(b + i)) + 1.0f));
    }
}

__global__ void k_swiglu_oai_bwd(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b, const rt_act *dy,
                                 int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float x = ld(a + i), v = ld(b + i), d = ld(dy + i);
        float g = oai_gate(x), c = oai_up(v), s = 1.0f / (1.0f + expf(-RT_OAI_ALPHA * g));
        float dai = x <= RT_OAI_LIMIT ? d * (c + 1.0f) * s * (1.0f + RT_OAI_ALPHA * g * (1.0f - s)) : 0.0f;
        db[i] = bf(v >= -RT_OAI_LIMIT && v <= RT_OAI_LIMIT ? d * g * s : 0.0f);
        da[i] = bf(dai);
    }
}

} // namespace

void rt_swiglu_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t n)
{
    rtcu_require_init("rt_swiglu_fwd");
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(rt_act);
    rtcu_deps({{y, bytes}, {a, bytes}, {b, bytes}});
    const int T = 256;
    if (n % 8 == 0 && rtcu_aligned16(y, a, b))
        RTCU_LAUNCH(k_swiglu_fwd8, rtcu_grid(n / 8, T), T, 0)(y, a, b, n);
    else
        RTCU_LAUNCH(k_swiglu_fwd, rtcu_grid(n, T), T, 0)(y, a, b, n);
    LAUNCH_CHECK();
}

void rt_swiglu_bwd(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b, const rt_act *dy, int64_t n)
{
    rtcu_require_init("rt_swiglu_bwd");
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(rt_act);
    rtcu_deps({{da, bytes}, {db, bytes}, {a, bytes}, {b, bytes}, {dy, bytes}});
    const int T = 256;
    if (n % 8 == 0 && rtcu_aligned16(da, db, a) && rtcu_aligned16(b, dy))
        RTCU_LAUNCH(k_swiglu_bwd8, rtcu_grid(n / 8, T), T, 0)(da, db, a, b, dy, n);
    else
        RTCU_LAUNCH(k_swiglu_bwd, rtcu_grid(n, T), T, 0)(da, db, a, b, dy, n);
    LAUNCH_CHECK();
}

void rt_sigmoid_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    map("rt_sigmoid_fwd", y, x, NULL, n, n, Sigmoid());
}
void rt_sigmoid_bwd(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t n)
{
    map("rt_sigmoid_bwd", dx, y, dy, n, n, SigmoidBwd());
}
void rt_silu_fwd(rt_act *y, const rt_act *x, int64_t n) { map("rt_silu_fwd", y, x, NULL, n, n, Silu()); }
void rt_silu_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    map("rt_silu_bwd", dx, x, dy, n, n, SiluBwd());
}
void rt_gelu_fwd(rt_act *y, const rt_act *x, int64_t n) { map("rt_gelu_fwd", y, x, NULL, n, n, Gelu()); }
void rt_gelu_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    map("rt_gelu_bwd", dx, x, dy, n, n, GeluBwd());
}
void rt_add(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb)
{
    map("rt_add", out, a, b, n, nb, Add());
}
void rt_mul(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb)
{
    map("rt_mul", out, a, b, n, nb, Mul());
}

/* Parameter gradients (fp32): acc += x, x a contribution in bf16 or an
 * fp32 shard. One coalesced grid-stride pass; memory-bound (10 or 12 bytes
 * per element). */
template <class T>
static __global__ void k_grad_add(rt_grad *acc, const T *x, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) acc[i] += ld(x + i);
}

template <class T>
static void grad_add(const char *fn, rt_grad *acc, const T *x, int64_t n)
{
    rtcu_require_init(fn);
    if (n <= 0) return;
    rtcu_deps({{acc, (size_t)n * sizeof(rt_grad)}, {x, (size_t)n * sizeof(T)}});
    RTCU_LAUNCH(k_grad_add<T>, rtcu_grid(n, 256), 256, 0)(acc, x, n);
    LAUNCH_CHECK();
}

void rt_grad_add(rt_grad *acc, const rt_act *x, int64_t n) { grad_add("rt_grad_add", acc, x, n); }
void rt_grad_sum(rt_grad *acc, const rt_grad *x, int64_t n) { grad_add("rt_grad_sum", acc, x, n); }

void rt_relu2_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    rtcu_require_init("rt_relu2_fwd");
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(rt_act);
    rtcu_deps({{y, bytes}, {x, bytes}});
    RTCU_LAUNCH(k_relu2_fwd, rtcu_grid(n, 256), 256, 0)(y, x, n);
    LAUNCH_CHECK();
}

void rt_relu2_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    rtcu_require_init("rt_relu2_bwd");
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(rt_act);
    rtcu_deps({{dx, bytes}, {x, bytes}, {dy, bytes}});
    RTCU_LAUNCH(k_relu2_bwd, rtcu_grid(n, 256), 256, 0)(dx, x, dy, n);
    LAUNCH_CHECK();
}

void rt_swiglu_oai_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t n)
{
    rtcu_require_init("rt_swiglu_oai_fwd");
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(rt_act);
    rtcu_deps({{y, bytes}, {a, bytes}, {b, bytes}});
    RTCU_LAUNCH(k_swiglu_oai_fwd, rtcu_grid(n, 256), 256, 0)(y, a, b, n);
    LAUNCH_CHECK();
}

void rt_swiglu_oai_bwd(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b, const rt_act *dy, int64_t n)
{
    rtcu_require_init("rt_swiglu_oai_bwd");
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(rt_act);
    rtcu_deps({{da, bytes}, {db, bytes}, {a, bytes}, {b, bytes}, {dy, bytes}});
    RTCU_LAUNCH(k_swiglu_oai_bwd, rtcu_grid(n, 256), 256, 0)(da, db, a, b, dy, n);
    LAUNCH_CHECK();
}
