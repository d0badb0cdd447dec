/* test_backend_table.c: the backend table's ops that take a mode, on the CPU backend: each mode does what
 * kernels/backend.h says it does, and a mode outside the enum is refused with RLT_EINVAL (never read as another).
 * - graph: SUPPORTED answers 0 on the CPU (no capture), BEGIN/END/LAUNCH fail with RLT_ESTATE.
 * - flat: FILL writes the value (and +0 for -0), COPY copies, POLYAK computes tau src + (1 - tau) dst bit for bit as
 *   written; none writes past n; a tau outside [0, 1] is refused.
 * - lane: lanes 0..RLT_BACKEND_MAX_LANES-1 branch, RLT_LANE_JOIN joins (on a backend with the worker, a fill
 *   issued on a side lane has run once the join returns), other values are refused.
 * - reserve/release: both locations give a zeroed block; a failed allocation is RLT_ENOFIT with *base NULL; an
 *   unknown location is refused.
 * - gather_fields with a sample and no field draws the indices alone: the same indices the draw with a field
 *   writes (and that field's rows are the drawn ones); a replay size below 1 is refused.
 * - workspace: the query (need non-NULL) answers the dense kernels' panel size and changes nothing, whatever ptr
 *   says; the hand-over (need NULL) gives the backend its panel; NULL and 0 take it back. */
#include <string.h>

#include "backend_registry.h"
#include "harness.h"
#include "kernels/cpu/cpu_ops.h"
#include "mem.h"
#include "rltrain.h"

static rlt_backend bk;
static rlt_err err;

static void test_graph(void) {
    CHECK(bk.ops->graph(&bk, RLT_GRAPH_SUPPORTED, 0) == 0, "the CPU backend does not capture graphs");
    CHECK(bk.ops->graph(&bk, RLT_GRAPH_BEGIN, 0) == RLT_ESTATE, "BEGIN on the CPU: %s", err.msg);
    CHECK(strstr(err.msg, "does not capture graphs") != NULL, "BEGIN's message: %s", err.msg);
    CHECK(bk.ops->graph(&bk, RLT_GRAPH_END, 0) == RLT_ESTATE, "END on the CPU");
    CHECK(bk.ops->graph(&bk, RLT_GRAPH_LAUNCH, 0) == RLT_ESTATE, "LAUNCH on the CPU");
    CHECK(bk.ops->graph(&bk, RLT_GRAPH_ASIDE_MARK, 0) == RLT_ESTATE, "ASIDE_MARK on the CPU (no aside stream: acting waits)");
    CHECK(bk.ops->graph(&bk, RLT_GRAPH_ASIDE_LAUNCH, 0) == RLT_ESTATE, "ASIDE_LAUNCH on the CPU");
    CHECK(bk.ops->graph(&bk, (rlt_graph_mode)(RLT_GRAPH_ASIDE_LAUNCH + 1), 0) == RLT_EINVAL, "an unknown mode is refused");
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static void test_flat(void) {
    enum { N = 37 };
    float dst[N + 1], src[N + 1], want[N + 1];
    for (int i = 0; i <= N; i++) dst[i] = -1.0f, src[i] = 0.25f * (float)i - 3.0f;
    CHECK(bk.ops->flat(&bk, RLT_FLAT_FILL, dst, NULL, N, 2.5f) == RLT_OK, "fill");
    int bad = 0;
    for (int i = 0; i < N; i++) bad += dst[i] != 2.5f;
    CHECK(bad == 0 && dst[N] == -1.0f, "fill wrote the value to n elements and nothing past them");
    CHECK(bk.ops->flat(&bk, RLT_FLAT_FILL, dst, NULL, N, -0.0f) == RLT_OK && same_bits(dst[3], 0.0f),
          "fill with -0 writes +0");
    CHECK(bk.ops->flat(&bk, RLT_FLAT_COPY, dst, src, N, 7.0f) == RLT_OK, "copy");
    bad = 0;
    for (int i = 0; i < N; i++) bad += !same_bits(dst[i], src[i]);
    CHECK(bad == 0 && dst[N] == -1.0f, "copy: dst = src over n elements and nothing past them");
    for (int i = 0; i <= N; i++) dst[i] = 1.0f / (float)(i + 1);
    const float tau = 0.37f;
    for (int i = 0; i < N; i++) want[i] = tau * src[i] + (1.0f - tau) * dst[i];
    CHECK(bk.ops->flat(&bk, RLT_FLAT_POLYAK, dst, src, N, tau) == RLT_OK, "polyak");
    bad = 0;
    for (int i = 0; i < N; i++) bad += !same_bits(dst[i], want[i]);
    CHECK(bad == 0 && dst[N] == 1.0f / (float)(N + 1), "polyak: %d elements differ from tau src + (1 - tau) dst", bad);
    CHECK(bk.ops->flat(&bk, RLT_FLAT_POLYAK, dst, src, N, 1.5f) == RLT_EINVAL, "polyak with tau > 1 is refused");
    CHECK(bk.ops->flat(&bk, (rlt_flat_mode)5, dst, src, N, 0.0f) == RLT_EINVAL, "flat with an unknown mode");
    CHECK(bk.ops->flat(&bk, RLT_FLAT_FILL, dst, NULL, 0, 9.0f) == RLT_OK && dst[0] != 9.0f, "n 0 does nothing");
}

static void test_lane(void) {
    CHECK(bk.ops->lane(&bk, 1) == RLT_OK && bk.ops->lane(&bk, RLT_LANE_JOIN) == RLT_OK, "branch then join");
    CHECK(bk.ops->lane(&bk, -2) == RLT_EINVAL, "lane -2 is refused");
    CHECK(bk.ops->lane(&bk, RLT_BACKEND_MAX_LANES) == RLT_EINVAL, "lane %d is refused", RLT_BACKEND_MAX_LANES);
    /* Two threads: a side lane's big fill goes to the worker; the join waits for it. */
    rlt_backend b2 = {0};
    rlt_err e2 = {0};
    CHECK(rlt_backend_open(&b2, &e2, "cpu", 2, NULL, 0) == RLT_OK, "cpu backend with 2 threads: %s", e2.msg);
    if (!b2.ops) return;
    enum { N = 1 << 20 };
    float *x = calloc(N, sizeof *x);
    CHECK(b2.ops->lane(&b2, 3) == RLT_OK && b2.ops->flat(&b2, RLT_FLAT_FILL, x, NULL, N, 4.0f) == RLT_OK,
          "fill on lane 3");
    CHECK(b2.ops->lane(&b2, RLT_LANE_JOIN) == RLT_OK, "join");
    int bad = 0;
    for (int i = 0; i < N; i++) bad += x[i] != 4.0f;
    CHECK(bad == 0, "after the join every element of the side lane's fill is written (%d are not)", bad);
    free(x);
    rlt_backend_close(&b2);
}

static void test_reserve(void) {
    const rlt_location locs[2] = {RLT_LOC_HOST, RLT_LOC_DEVICE};
    for (int k = 0; k < 2; k++) {
        void *base = NULL;
        CHECK(bk.ops->reserve(&bk, locs[k], 10000, &base) == RLT_OK && base, "reserve at location %d", (int)locs[k]);
        if (!base) continue;
        int nonzero = 0;
        for (int i = 0; i < 10000; i++) nonzero += ((unsigned char *)base)[i] != 0;
        CHECK(nonzero == 0, "the block at location %d is zeroed (%d bytes are not)", (int)locs[k], nonzero);
        memset(base, 7, 10000);
        bk.ops->release(&bk, locs[k], base);
    }
    bk.ops->release(&bk, RLT_LOC_HOST, NULL);
    void *base = &base;
    rlt_mem_fail_after(0);
    int rc = bk.ops->reserve(&bk, RLT_LOC_DEVICE, 4096, &base);
    rlt_mem_fail_after(-1);
    CHECK(rc == RLT_ENOFIT && base == NULL, "a failed reservation: %d, base %p", rc, base);
    base = &base;
    CHECK(bk.ops->reserve(&bk, (rlt_location)5, 4096, &base) == RLT_EINVAL && base == NULL, "an unknown location");
}

static void test_draw_alone(void) {
    enum { N = 100, SLOTS = 57 };
    int64_t size = SLOTS, ctr = 3;
    rlt_sample_spec smp = {.size = &size, .seed = 11, .stream = 4, .row0 = 0, .batch = N, .counter = &ctr};
    int32_t alone[N], with[N];
    float rows[SLOTS], got[N];
    for (int i = 0; i < SLOTS; i++) rows[i] = (float)i + 0.5f;
    memset(alone, 0xff, sizeof alone);
    CHECK(bk.ops->gather_fields(&bk, alone, N, &smp, 0, NULL) == RLT_OK, "the draw alone: %s", err.msg);
    rlt_gather_field f = {.dst = got, .dst_stride = 4, .src = rows, .row_bytes = 4};
    CHECK(bk.ops->gather_fields(&bk, with, N, &smp, 1, &f) == RLT_OK, "the draw with a field");
    int bad = 0, spread = 0;
    for (int i = 0; i < N; i++) {
        bad += alone[i] != with[i] || alone[i] < 0 || alone[i] >= SLOTS || got[i] != rows[with[i]];
        spread += alone[i] != alone[0];
    }
    CHECK(bad == 0 && spread > 0, "the draw alone equals the draw with a field (%d rows differ)", bad);
    size = 0;
    CHECK(bk.ops->gather_fields(&bk, alone, N, &smp, 0, NULL) == RLT_EINVAL, "a replay of size 0 is refused");
}

static void test_workspace(void) {
    cpu_impl *im = bk.impl;
    uint64_t need = 12345, want = im->dense ? CPU_DENSE_PACK_FLOATS * sizeof(float) : 0;
    float *pack = rlt_mem_alloc(CPU_DENSE_PACK_FLOATS * sizeof(float), 64);
    CHECK(bk.ops->workspace(&bk, pack, 64, &need) == RLT_OK && need == want, "the query: %llu, want %llu",
          (unsigned long long)need, (unsigned long long)want);
    CHECK(im->pack == NULL, "the query hands nothing over");
    CHECK(rlt_backend_workspace_need(&bk) == want, "rlt_backend_workspace_need");
    CHECK(bk.ops->workspace(&bk, pack, CPU_DENSE_PACK_FLOATS * sizeof(float), NULL) == RLT_OK && im->pack == pack,
          "the hand-over");
    CHECK(bk.ops->workspace(&bk, NULL, 0, NULL) == RLT_OK && im->pack == NULL, "NULL and 0: no workspace");
    rlt_mem_free(pack);
}

int main(void) {
    CHECK(rlt_backend_open(&bk, &err, "cpu", 1, NULL, 0) == RLT_OK, "cpu backend: %s", err.msg);
    if (!bk.ops) return test_summary("test_backend_table");
    test_graph();
    test_flat();
    test_lane();
    test_reserve();
    test_draw_alone();
    test_workspace();
    rlt_backend_close(&bk);
    return test_summary("test_backend_table");
}
