/* replay.c: replay sampling (uniform indices from Philox) and the plain row gather (an oracle). */
#include <string.h>

#include "philox.h"
#include "cpu_ops.h"

int cpu_sample_check(rlt_backend *bk, int32_t n, const rlt_sample_spec *s) {
    CPU_REQUIRE(bk, n >= 0 && *s->size >= 1 && *s->size <= INT32_MAX, "gather_fields (sample)");
    CPU_REQUIRE(bk, s->row0 >= 0 && s->batch >= s->row0 + n, "gather_fields (sample)");
    return RLT_OK;
}

void cpu_sample_rows(int32_t *idx, int32_t r0, int32_t r1, const rlt_sample_spec *s) {
    uint64_t ctr = (uint64_t)*s->counter, sz = (uint64_t)*s->size;
    for (int32_t i = r0; i < r1; i++)
        idx[i] = (int32_t)rlt_replay_slot(s->seed, s->stream, ctr, (uint64_t)(s->row0 + i), (uint64_t)s->batch, sz,
                                          s->valid);
}

int cpu_gather_rows(rlt_backend *bk, void *dst, uint64_t dst_stride, const void *src, uint64_t row_bytes,
                    const int32_t *idx, int32_t n) {
    CPU_REQUIRE(bk, n >= 0 && dst_stride >= row_bytes, "gather_rows");
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (int32_t i = 0; i < n; i++) memcpy(d + (uint64_t)i * dst_stride, s + (uint64_t)idx[i] * row_bytes, row_bytes);
    return RLT_OK;
}
