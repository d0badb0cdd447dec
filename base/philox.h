/* philox.h: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the
 * counter-based generator behind every random number in rltrain. Pure integer arithmetic, so the CPU and
 * the GPU draw identical bits from the same (key, counter): that is what makes CPU/GPU trajectory parity
 * and bit-exact resume possible. Usable from C and from CUDA device code. */
#ifndef RLT_PHILOX_H
#define RLT_PHILOX_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define RLT_HD __host__ __device__ __forceinline__
#else
#define RLT_HD static inline
#endif

typedef struct { uint32_t v[4]; } rlt_u32x4;

RLT_HD uint32_t rlt_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* key = (seed lo, seed hi ^ stream); counter = (ctr lo, ctr hi, index lo, index hi). */
RLT_HD rlt_u32x4 rlt_philox4x32(uint64_t seed, uint32_t stream, uint64_t ctr, uint64_t index) {
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32) ^ (stream * 0x9E3779B9u);
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = (uint32_t)index, c3 = (uint32_t)(index >> 32);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = rlt_mulhilo32(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = rlt_mulhilo32(0xCD9E8D57u, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    rlt_u32x4 out = {{c0, c1, c2, c3}};
    return out;
}

/* Uniform in [0, 1) with 24 random bits. */
RLT_HD float rlt_u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

/* One standard normal from one Philox block (Box-Muller on its first two words). */
RLT_HD float rlt_philox_normal(uint64_t seed, uint32_t stream, uint64_t ctr, uint64_t index) {
    rlt_u32x4 r = rlt_philox4x32(seed, stream, ctr, index);
    float u1 = ((float)(r.v[0] >> 8) + 1.0f) * (1.0f / 16777216.0f); /* (0, 1]: log is finite */
    float u2 = rlt_u32_to_unit(r.v[1]);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

/* Uniform integer in [0, n) (Lemire's multiply-shift; bias below 2^-32 * n). */
RLT_HD uint32_t rlt_philox_below(uint64_t seed, uint32_t stream, uint64_t ctr, uint64_t index, uint64_t n) {
    rlt_u32x4 r = rlt_philox4x32(seed, stream, ctr, index);
    return (uint32_t)(((uint64_t)r.v[0] * n) >> 32);
}

/* A replay slot for sample i of n: uniform over [0, size), redrawn (up to 15 more draws, at indices
 * i + t n so no two samples share a draw) while valid[slot] == 0, then stepped back to the nearest valid
 * slot. valid == NULL means every slot is valid. The redraws keep sampling uniform over valid slots in all
 * but the rarest cases; the fallback only guarantees a valid answer. */
RLT_HD uint32_t rlt_replay_slot(uint64_t seed, uint32_t stream, uint64_t ctr, uint64_t i, uint64_t n, uint64_t size,
                                const uint8_t *valid) {
    uint32_t s = rlt_philox_below(seed, stream, ctr, i, size);
    if (!valid) return s;
    for (uint64_t t = 1; t < 16 && !valid[s]; t++) s = rlt_philox_below(seed, stream, ctr, i + t * n, size);
    for (uint64_t k = 0; k < size && !valid[s]; k++) s = s == 0 ? (uint32_t)(size - 1) : s - 1;
    return s;
}

/* Random-number streams: one per purpose, so adding draws in one place never shifts another. */
enum {
    RLT_STREAM_INIT = 1,      /* weight initialisation */
    RLT_STREAM_SAMPLE = 2,    /* replay indices */
    RLT_STREAM_TARGET = 3,    /* TD3 target policy smoothing */
    RLT_STREAM_EXPLORE = 4,   /* exploration noise and random actions */
    RLT_STREAM_ENV = 5,       /* environment resets and dynamics noise */
    RLT_STREAM_EVAL_ENV = 6,  /* evaluation environment */
    /* Training environment k >= 1 of env.num_envs draws from stream RLT_STREAM_ENV_VEC + k; environment 0
     * keeps RLT_STREAM_ENV, so a one-environment run is the run it always was. */
    RLT_STREAM_ENV_VEC = 0x100,
    /* Rank r of a data-parallel group draws its replay indices, target noise and exploration from stream
     * + r * RLT_STREAM_RANK (rlt_rank_stream), and its environments continue the numbering of env.num_envs
     * (rank r's environment k is environment r * num_envs + k): the ranks share the weight initialisation, so
     * their replicas start equal, and nothing else. Rank 0 keeps every stream, so it is the single run's. */
    RLT_STREAM_RANK = 0x10000
};

static inline uint32_t rlt_rank_stream(uint32_t stream, int32_t rank) {
    return stream + (uint32_t)rank * (uint32_t)RLT_STREAM_RANK;
}

#endif
