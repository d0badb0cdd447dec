/* harness.c: see harness.h. */
#include "harness.h"

#include <string.h>
#include <sys/stat.h>

int rlt_test_checks = 0;
int rlt_test_failures = 0;

int test_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, rlt_test_checks - rlt_test_failures, rlt_test_failures);
    return rlt_test_failures ? 1 : 0;
}

void test_skip(const char *why) {
    printf("SKIPPED: %s\n", why);
    fflush(stdout);
    exit(77);
}

const char *test_tmpdir(const char *name) {
    static char path[512];
    char cmd[600];
    snprintf(path, sizeof path, "tmp_%s", name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) return NULL;
    if (mkdir(path, 0755) != 0) return NULL;
    return path;
}
