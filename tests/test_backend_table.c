/* test_backend_table.c: the backend table's ops that take a mode, on the CPU backend: each mode does what
 * kernels/backend.h says it does, and a mode outside the enum is refused with RLT_EINVAL (never read as another).
 * - graph: SUPPORTED answers 0 on the CPU (no capture), BEGIN/END/LAUNCH fail with RLT_ESTATE. */
#include <string.h>

#include "backend_registry.h"
#include "harness.h"
#include "rltrain.h"

static rlt_backend bk;
static rlt_err err;

static void test_graph(void) {
    CHECK(bk.ops->graph(&bk, RLT_GRAPH_SUPPORTED, 0) == 0, "the CPU backend does not capture graphs");
    CHECK(bk.ops->graph(&bk, RLT_GRAPH_BEGIN, 0) == RLT_ESTATE, "BEGIN on the CPU: %s", err.msg);
    CHECK(strstr(err.msg, "does not capture graphs") != NULL, "BEGIN's message: %s", err.msg);
    CHECK(bk.ops->graph(&bk, RLT_GRAPH_END, 0) == RLT_ESTATE, "END on the CPU");
    CHECK(bk.ops->graph(&bk, RLT_GRAPH_LAUNCH, 0) == RLT_ESTATE, "LAUNCH on the CPU");
    CHECK(bk.ops->graph(&bk, (rlt_graph_mode)7, 0) == RLT_EINVAL, "an unknown mode is refused");
}

int main(void) {
    CHECK(rlt_backend_open(&bk, &err, "cpu", 1, NULL, 0) == RLT_OK, "cpu backend: %s", err.msg);
    if (!bk.ops) return test_summary("test_backend_table");
    test_graph();
    rlt_backend_close(&bk);
    return test_summary("test_backend_table");
}
