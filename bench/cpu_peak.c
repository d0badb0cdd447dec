/* cpu_peak.c: measures this machine's peak single-precision FMA throughput, per core and on several
 * threads, so that speed targets for the CPU backend can be checked against what the hardware can do.
 * Each thread runs a loop of independent vector FMAs (12 accumulators, enough to cover FMA latency on
 * two FMA ports; the inner loop is fully unrolled so they stay in registers) on registers only, so memory plays no part. Widths: AVX-512 (16 floats), AVX2 (8).
 *
 *   bench_cpu_peak [--threads N] [--seconds S]
 *
 * Prints GFLOP/s (one FMA = 2 FLOP) for 1 thread and for N threads (default: the online CPU count). */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { ACCS = 12, INNER = 1000 };

/* Returns the FMAs done (vector instructions times lanes); *sink keeps the result alive. */
__attribute__((target("avx512f"))) static double fma_loop_512(long iters, float *sink) {
    __m512 acc[ACCS];
    for (int i = 0; i < ACCS; i++) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++)
        for (int k = 0; k < INNER; k++)
#pragma GCC unroll 12
            for (int i = 0; i < ACCS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    __m512 s = acc[0];
    for (int i = 1; i < ACCS; i++) s = _mm512_add_ps(s, acc[i]);
    *sink = _mm512_reduce_add_ps(s);
    return (double)iters * INNER * ACCS * 16;
}

__attribute__((target("avx2,fma"))) static double fma_loop_256(long iters, float *sink) {
    __m256 acc[ACCS];
    for (int i = 0; i < ACCS; i++) acc[i] = _mm256_set1_ps((float)i * 1e-3f);
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++)
        for (int k = 0; k < INNER; k++)
#pragma GCC unroll 12
            for (int i = 0; i < ACCS; i++) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    float t[8];
    __m256 s = acc[0];
    for (int i = 1; i < ACCS; i++) s = _mm256_add_ps(s, acc[i]);
    _mm256_storeu_ps(t, s);
    *sink = t[0] + t[7];
    return (double)iters * INNER * ACCS * 8;
}

typedef struct job {
    int width; /* 512 or 256 */
    long iters;
    double fmas, seconds;
    float sink;
    pthread_barrier_t *start;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    if (j->start) pthread_barrier_wait(j->start);
    double t0 = now_s();
    j->fmas = j->width == 512 ? fma_loop_512(j->iters, &j->sink) : fma_loop_256(j->iters, &j->sink);
    j->seconds = now_s() - t0;
    return NULL;
}

/* Runs `threads` copies at once (best of `reps`); returns GFLOP/s over all threads. */
static double measure(int width, int threads, long iters, int reps) {
    double best = 0.0;
    for (int r = 0; r < reps; r++) {
        job jobs[64];
        pthread_t tid[64];
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)threads);
        for (int t = 0; t < threads; t++) {
            jobs[t] = (job){width, iters, 0, 0, 0, &bar};
            if (pthread_create(&tid[t], NULL, run_job, &jobs[t]) != 0) {
                fprintf(stderr, "pthread_create failed\n");
                pthread_barrier_destroy(&bar);
                return -1.0;
            }
        }
        double fl = 0.0, slowest = 0.0;
        for (int t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            fl += 2.0 * jobs[t].fmas;
            if (jobs[t].seconds > slowest) slowest = jobs[t].seconds;
        }
        pthread_barrier_destroy(&bar);
        double g = fl / slowest * 1e-9;
        if (g > best) best = g;
    }
    return best;
}

int main(int argc, char **argv) {
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double seconds = 0.5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (threads < 1 || threads > 64) threads = 1;
    __builtin_cpu_init();
    int widths[2] = {512, 256};
    printf("cpu_peak: fp32 FMA throughput, registers only, best of 5 (1 FMA = 2 FLOP)\n");
    for (int w = 0; w < 2; w++) {
        if (widths[w] == 512 && !__builtin_cpu_supports("avx512f")) continue;
        if (widths[w] == 256 && !__builtin_cpu_supports("avx2")) continue;
        /* Calibrate the iteration count to about `seconds` on one thread. */
        long iters = 100;
        double t0 = now_s();
        measure(widths[w], 1, iters, 1);
        double dt = now_s() - t0;
        iters = (long)(iters * seconds / (dt > 1e-6 ? dt : 1e-6));
        if (iters < 1) iters = 1;
        double g1 = measure(widths[w], 1, iters, 5);
        double gn = threads > 1 ? measure(widths[w], threads, iters, 5) : g1;
        printf("  %s  1 thread %7.1f GFLOP/s   %d threads %7.1f GFLOP/s\n", widths[w] == 512 ? "AVX-512" : "AVX2   ",
               g1, threads, gn);
    }
    return 0;
}
