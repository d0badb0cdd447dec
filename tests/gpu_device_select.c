/* gpu_device_select.c: device selection through the registry. A device index the machine does not have
 * must fail with RLT_EDEVICE and a message naming the device count, never open cuda:0 instead; cuda:0
 * opens device 0; a missing module is RLT_EDEVICE with a rebuild hint, and `auto` then falls back to the
 * CPU with the reason. The checks that need a GPU are skipped (exit 77) when none can be opened. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_registry.h"
#include "harness.h"

static void check_bad_strings(void) {
    static const char *const bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda0", "CPU"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rlt_backend bk;
        rlt_err e;
        int rc = rlt_backend_open(&bk, &e, bad[i], 1, NULL, 0);
        CHECK(rc == RLT_ECONFIG && strstr(e.msg, bad[i]), "device '%s': rc %d (%s)", bad[i], rc, e.msg);
        CHECK(bk.ops == NULL, "device '%s' left a backend open", bad[i]);
    }
}

/* With the module path pointing nowhere: cuda is an error naming RLT_CUDA_MODULE (not the hint for a build
 * without the module), auto is the CPU plus a reason. */
static void check_missing_module(void) {
    setenv("RLT_CUDA_MODULE", "/nonexistent/librltrain_cuda.so", 1);
    rlt_backend bk;
    rlt_err e;
    int rc = rlt_backend_open(&bk, &e, "cuda:0", 1, NULL, 0);
    CHECK(rc == RLT_EDEVICE && strstr(e.msg, "RLT_CUDA_MODULE names '/nonexistent/librltrain_cuda.so'") &&
              !strstr(e.msg, "no CUDA backend module"),
          "missing module: rc %d (%s)", rc, e.msg);
    CHECK(bk.ops == NULL && bk.module == NULL, "a failed open left state behind");
    char why[512];
    rc = rlt_backend_open(&bk, &e, "auto", 1, why, sizeof why);
    CHECK(rc == RLT_OK && bk.ops && strcmp(bk.ops->name, "cpu") == 0, "auto without module: rc %d (%s)", rc, e.msg);
    CHECK(why[0] != '\0' && strstr(why, "nonexistent"), "auto without module gave no reason: '%s'", why);
    CHECK(e.status == RLT_OK, "auto's fallback left an error: %s", e.msg);
    rlt_backend_close(&bk);
    char w2[256];
    CHECK(rlt_backend_cuda_ops(w2, sizeof w2) == NULL && w2[0], "rlt_backend_cuda_ops found a missing module");
}

int main(void) {
    check_bad_strings();
    check_missing_module();
    setenv("RLT_CUDA_MODULE", RLT_BINARY_DIR "/librltrain_cuda.so", 1);

    rlt_backend bk;
    rlt_err e;
    int rc = rlt_backend_open(&bk, &e, "cuda:0", 1, NULL, 0);
    if (rc != RLT_OK) {
        char why[2200];
        snprintf(why, sizeof why, "cuda:0 cannot be opened: %s (%d checks passed before)", e.msg,
                 rlt_test_checks - rlt_test_failures);
        if (rlt_test_failures) return test_summary("gpu_device_select");
        test_skip(why);
    }
    CHECK(rc == RLT_OK, "cuda:0: %s", e.msg);
    CHECK(bk.ops && strcmp(bk.ops->name, "cuda") == 0, "cuda:0 opened backend '%s'", bk.ops ? bk.ops->name : "?");
    CHECK(bk.device_index == 0, "cuda:0 opened device_index %d", bk.device_index);
    CHECK(strncmp(bk.device_name, "cuda:0 (", 8) == 0, "device_name '%s'", bk.device_name);
    CHECK(bk.device_is_host == 0, "a CUDA backend claims host memory");
    CHECK(bk.module != NULL, "the registry did not keep the module handle");
    CHECK(bk.device_total > 0 && bk.device_free <= bk.device_total && bk.context_bytes > 0 &&
              bk.context_bytes < bk.device_total,
          "memory figures: total %llu free %llu context %llu", (unsigned long long)bk.device_total,
          (unsigned long long)bk.device_free, (unsigned long long)bk.context_bytes);
    printf("cuda:0 is %s; context_bytes %llu (%.1f MiB) of %.1f MiB\n", bk.device_name,
           (unsigned long long)bk.context_bytes, bk.context_bytes / 1048576.0, bk.device_total / 1048576.0);
    rlt_backend_close(&bk);
    CHECK(bk.ops == NULL && bk.impl == NULL && bk.module == NULL, "close left state behind");

    /* Count the devices through the registry itself: the first index that does not open. */
    int count = 1;
    while (count < 64) {
        char name[16];
        snprintf(name, sizeof name, "cuda:%d", count);
        if (rlt_backend_open(&bk, &e, name, 1, NULL, 0) != RLT_OK) break;
        CHECK(bk.device_index == count, "%s opened device_index %d", name, bk.device_index);
        rlt_backend_close(&bk);
        count++;
    }
    char name[16], want[96];
    snprintf(name, sizeof name, "cuda:%d", count);
    snprintf(want, sizeof want, "cuda:%d requested but this machine has %d CUDA device", count, count);
    rc = rlt_backend_open(&bk, &e, name, 1, NULL, 0);
    CHECK(rc == RLT_EDEVICE, "%s on a machine with %d devices: rc %d", name, count, rc);
    CHECK(strstr(e.msg, want) != NULL, "%s: message does not name the device count: %s", name, e.msg);
    CHECK(bk.ops == NULL && bk.module == NULL && bk.impl == NULL, "%s: a failed open left a backend behind", name);
    printf("%s: %s\n", name, e.msg);
    rc = rlt_backend_open(&bk, &e, "cuda:1000", 1, NULL, 0);
    CHECK(rc == RLT_EDEVICE, "cuda:1000: rc %d", rc);

    /* "cuda" is device 0, and "auto" picks the GPU when there is one. */
    rc = rlt_backend_open(&bk, &e, "cuda", 1, NULL, 0);
    CHECK(rc == RLT_OK && bk.device_index == 0, "cuda: rc %d index %d (%s)", rc, bk.device_index, e.msg);
    if (rc == RLT_OK) rlt_backend_close(&bk);
    char why[512];
    rc = rlt_backend_open(&bk, &e, "auto", 1, why, sizeof why);
    CHECK(rc == RLT_OK && bk.ops && strcmp(bk.ops->name, "cuda") == 0 && why[0] == '\0',
          "auto with a GPU: rc %d backend %s why '%s'", rc, bk.ops ? bk.ops->name : "?", why);
    if (rc == RLT_OK) rlt_backend_close(&bk);
    CHECK(rlt_backend_cuda_ops(NULL, 0) != NULL, "rlt_backend_cuda_ops found no module");
    return test_summary("gpu_device_select");
}
