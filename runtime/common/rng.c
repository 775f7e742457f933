/* rng.c: initialisation that does not depend on the sharding.
 *
 * Element e (global row-major index) of the parameter with key k is
 *   Philox-4x32-10(counter = (e lo, e hi, 0, 0), key = (k lo, k hi)) -> w0..w3
 *   u1 = (top 53 bits of w0:w1 + 1) / 2^53  in (0, 1]
 *   u2 = (top 53 bits of w2:w3) / 2^53      in [0, 1)
 *   value = (float)(std * sqrt(-2 ln u1) * cos(2 pi u2))   (Box-Muller)
 * so any sharding assembles the same tensor. To be identical on every
 * platform the arithmetic uses only IEEE-754 double +, -, *, / and sqrt
 * (correctly rounded everywhere), with ln and cos evaluated by the fixed
 * polynomials below instead of libm (whose last bits differ between
 * libraries), and the common code is compiled with -ffp-contract=off so no
 * FMA changes a rounding. Integer arithmetic is exact by construction. */
#include <math.h>
#include <string.h>

#include "common.h"

/* Philox-4x32-10 constants (Random123). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void rtc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

uint64_t rtc_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

/* FNV-1a over the bytes, then the splitmix64 finaliser to spread the bits
 * (FNV alone leaves similar names with similar high bits). */
uint64_t rt_hash(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 0x100000001B3ull;
    }
    return rtc_mix64(h);
}

/* Series coefficients, computed once by exact-rounded double division:
 * log_c[k] = 1/(2k+1), sin_c[k] = (-1)^k/(2k+1)!, cos_c[k] = (-1)^k/(2k)!. */
static double log_c[12], sin_c[10], cos_c[10];
static bool coef_ready;

static void coef_init(void)
{
    for (int k = 0; k < 12; k++)
        log_c[k] = 1.0 / (2.0 * k + 1.0);
    double s = 1.0, c = 1.0;
    for (int k = 0; k < 10; k++) {
        sin_c[k] = s;
        cos_c[k] = c;
        s = -s / ((2.0 * k + 2.0) * (2.0 * k + 3.0));
        c = -c / ((2.0 * k + 1.0) * (2.0 * k + 2.0));
    }
    coef_ready = true;
}

/* ln x = e ln2 + ln m with x = m 2^e, m in [sqrt(1/2), sqrt(2)), and
 * ln m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, summed to s^23 (the next
 * term is below 2^-60 relative). ln2 is split (fdlibm) so e*LN2_HI is exact. */
double rtc_log(double x)
{
    static const double LN2_HI = 6.93147180369123816490e-01;
    static const double LN2_LO = 1.90821492927058770002e-10;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int e = (int)((bits >> 52) & 0x7FF);
    if (e == 0) { /* subnormal: scale by 2^54 (exact) */
        x *= 18014398509481984.0;
        memcpy(&bits, &x, sizeof bits);
        e = (int)((bits >> 52) & 0x7FF) - 54;
    }
    e -= 1023;
    bits = (bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull; /* m in [1, 2) */
    double m;
    memcpy(&m, &bits, sizeof m);
    if (m > 1.41421356237309504880) {
        m *= 0.5;
        e += 1;
    }
    if (!coef_ready)
        coef_init();
    double s = (m - 1.0) / (m + 1.0);
    double z = s * s;
    double p = 0.0;
    for (int k = 11; k >= 0; k--)
        p = p * z + log_c[k];
    double lnm = 2.0 * s * p;
    return (double)e * LN2_HI + ((double)e * LN2_LO + lnm);
}

/* Taylor series on [0, pi/4]: 10 terms each leave an error below 1e-17. */
static double sin_small(double x)
{
    double z = x * x, p = 0.0;
    for (int k = 9; k >= 0; k--)
        p = p * z + sin_c[k];
    return x * p;
}

static double cos_small(double x)
{
    double z = x * x, p = 0.0;
    for (int k = 9; k >= 0; k--)
        p = p * z + cos_c[k];
    return p;
}

/* cos(pi/2 r) and sin(pi/2 r) for r in [0, 1], folded onto [0, pi/4]. */
static double cos_quarter(double r)
{
    static const double HALF_PI = 1.57079632679489661923;
    return r <= 0.5 ? cos_small(r * HALF_PI) : sin_small((1.0 - r) * HALF_PI);
}

static double sin_quarter(double r)
{
    static const double HALF_PI = 1.57079632679489661923;
    return r <= 0.5 ? sin_small(r * HALF_PI) : cos_small((1.0 - r) * HALF_PI);
}

/* cos(2 pi u) = cos(pi/2 (q + r)) with 4u = q + r, both parts exact. */
double rtc_cos2pi(double u)
{
    if (!coef_ready)
        coef_init();
    double t = 4.0 * u;
    int q = (int)t;
    double r = t - (double)q;
    switch (q & 3) {
    case 0: return cos_quarter(r);
    case 1: return -sin_quarter(r);
    case 2: return -cos_quarter(r);
    default: return sin_quarter(r);
    }
}

double rtc_normal(uint64_t key, uint64_t index)
{
    uint32_t ctr[4] = {(uint32_t)index, (uint32_t)(index >> 32), 0, 0};
    uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
    uint32_t w[4];
    rtc_philox4x32_10(ctr, k, w);
    uint64_t a = (((uint64_t)w[0] << 32) | w[1]) >> 11;
    uint64_t b = (((uint64_t)w[2] << 32) | w[3]) >> 11;
    double u1 = (double)(a + 1) * (1.0 / 9007199254740992.0);
    double u2 = (double)b * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * rtc_log(u1)) * rtc_cos2pi(u2);
}

/* ---- Bulk generation: the same arithmetic as rtc_normal, in loops that
 * vectorise and on the threads of the CPU backend. Identical bits follow
 * from the same IEEE operations in the same order on the same operands:
 * vector division, sqrt and int -> double conversions are correctly rounded
 * like their scalar forms, contraction stays off (-ffp-contract=off), and
 * the branches of rtc_log and rtc_cos2pi become selections between values
 * computed exactly as the taken branch computes them. rtc_log's subnormal
 * branch is not needed: u1 >= 2^-53. */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define RTC_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RTC_CLONES
#endif
#ifdef _OPENMP
#define RTC_PRAGMA(x) _Pragma(#x)
#else
#define RTC_PRAGMA(x)
#endif

enum { NORMAL_CHUNK = 512 }; /* values per vectorised chunk */

/* dst[j] = (float)(std * rtc_normal(key, g + j)) for j < n <= NORMAL_CHUNK. */
RTC_CLONES static void normal_chunk(float *dst, uint64_t key, uint64_t g, int64_t n, double std)
{
    static const double LN2_HI = 6.93147180369123816490e-01;
    static const double LN2_LO = 1.90821492927058770002e-10;
    static const double HALF_PI = 1.57079632679489661923;
    double u1[NORMAL_CHUNK], u2[NORMAL_CHUNK];
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    RTC_PRAGMA(omp simd)
    for (int64_t j = 0; j < n; j++) {
        uint64_t e = g + (uint64_t)j;
        uint32_t c0 = (uint32_t)e, c1 = (uint32_t)(e >> 32), c2 = 0, c3 = 0;
        uint32_t a0 = k0, a1 = k1;
        for (int round = 0; round < 10; round++) {
            uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
            uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ a0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ a1;
            c1 = (uint32_t)p1;
            c3 = (uint32_t)p0;
            c0 = n0;
            c2 = n2;
            a0 += PHILOX_W0;
            a1 += PHILOX_W1;
        }
        uint64_t a = (((uint64_t)c0 << 32) | c1) >> 11, b = (((uint64_t)c2 << 32) | c3) >> 11;
        u1[j] = (double)(int64_t)(a + 1) * (1.0 / 9007199254740992.0);
        u2[j] = (double)(int64_t)b * (1.0 / 9007199254740992.0);
    }
    RTC_PRAGMA(omp simd)
    for (int64_t j = 0; j < n; j++) {
        /* ln u1 as rtc_log */
        uint64_t bits;
        double x = u1[j];
        memcpy(&bits, &x, sizeof bits);
        int e = (int)((bits >> 52) & 0x7FF) - 1023;
        bits = (bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;
        double m;
        memcpy(&m, &bits, sizeof m);
        bool big = m > 1.41421356237309504880;
        m = big ? m * 0.5 : m;
        e = big ? e + 1 : e;
        double sv = (m - 1.0) / (m + 1.0), z = sv * sv, p = 0.0;
        for (int k = 11; k >= 0; k--)
            p = p * z + log_c[k];
        double lnm = 2.0 * sv * p;
        double ln = (double)e * LN2_HI + ((double)e * LN2_LO + lnm);
        /* cos(2 pi u2) as rtc_cos2pi: quadrant q, then the series that
         * cos_quarter or sin_quarter would evaluate, and the sign */
        double t = 4.0 * u2[j];
        int q = (int)t;
        double r = t - (double)q;
        bool lo = r <= 0.5;
        double xa = (lo ? r : 1.0 - r) * HALF_PI, za = xa * xa, pc = 0.0, ps = 0.0;
        for (int k = 9; k >= 0; k--) {
            pc = pc * za + cos_c[k];
            ps = ps * za + sin_c[k];
        }
        double sn = xa * ps;
        /* q even: cos_quarter(r) = lo ? cos : sin; q odd: sin_quarter(r) = lo ? sin : cos */
        double c = (q & 1) == 0 ? (lo ? pc : sn) : (lo ? sn : pc);
        c = (q & 3) == 1 || (q & 3) == 2 ? -c : c;
        dst[j] = (float)(std * (sqrt(-2.0 * ln) * c));
    }
}

void rt_init_param(float *host_dst, uint64_t key, int kind, double std, int rank,
                   const int64_t *global, const int64_t *offset, const int64_t *local)
{
    char err[256];
    if (rtc_check_block(rank, global, offset, local, "rt_init_param", err, sizeof err) != 0)
        rt_fatal("%s", err);
    if (kind != RT_INIT_NORMAL && kind != RT_INIT_ZEROS && kind != RT_INIT_ONES)
        rt_fatal("rt_init_param: unknown kind %d", kind);
    int64_t n = rtc_numel(rank, local);
    if (n == 0)
        return;
    if (kind != RT_INIT_NORMAL) {
        float v = kind == RT_INIT_ONES ? 1.0f : 0.0f;
        for (int64_t i = 0; i < n; i++)
            host_dst[i] = v;
        return;
    }
    if (!coef_ready)
        coef_init();
    /* Rows of the local block (rows = last dim) in pieces of NORMAL_CHUNK
     * values; a piece's global indices are consecutive. Pieces are
     * independent, so the threads take any of them. */
    int last = rank - 1;
    int64_t row = rank > 0 ? local[last] : 1, rows = n / row;
    int64_t per_row = (row + NORMAL_CHUNK - 1) / NORMAL_CHUNK, pieces = rows * per_row;
    RTC_PRAGMA(omp parallel for schedule(static) if (n >= 65536))
    for (int64_t pc = 0; pc < pieces; pc++) {
        int64_t r = pc / per_row, j0 = pc % per_row * NORMAL_CHUNK;
        int64_t len = row - j0 < NORMAL_CHUNK ? row - j0 : NORMAL_CHUNK;
        /* the row's global flat index: its leading-dim coordinates, odometer
         * order (last leading dim fastest) */
        uint64_t gi = 0, rem = (uint64_t)r;
        int64_t idx[RT_ST_MAXDIM] = {0};
        for (int d = last - 1; d >= 0; d--) {
            idx[d] = (int64_t)(rem % (uint64_t)local[d]);
            rem /= (uint64_t)local[d];
        }
        for (int d = 0; d < last; d++)
            gi = gi * (uint64_t)global[d] + (uint64_t)(offset[d] + idx[d]);
        if (rank > 0)
            gi = gi * (uint64_t)global[last] + (uint64_t)offset[last];
        normal_chunk(host_dst + r * row + j0, key, gi + (uint64_t)j0, len, std);
    }
}
