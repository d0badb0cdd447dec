/* fuzz_corpus.c: the fuzz targets' entry points without libFuzzer, so that every build (the ctest test
 * "fuzz_corpus") runs what the fuzzers start from:
 * - every file of tests/fuzz/corpus/config through fuzz_config_one (the real configs must load);
 * - every file of tests/fuzz/corpus/checkpoint through fuzz_checkpoint_one (the committed *.ckpt seeds must
 *   each load into one of the fuzz trainers, so a format change that makes them stale is noticed);
 * - fresh checkpoints of the three fuzz trainers (written now), which must load, and 300 deterministic
 *   mutations of each (a byte set to a chosen value, both CRCs recomputed), which must not crash.
 * `fuzz_corpus --write-seeds DIR` writes the checkpoint seeds into DIR instead (tests/fuzz/run_fuzz.sh
 * does; run it with DIR = tests/fuzz/corpus/checkpoint to refresh the committed ones). */
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_targets.h"
#include "harness.h"

#define CORPUS_MAX_INPUT (1u << 20)
static uint8_t input[CORPUS_MAX_INPUT], mutated[CORPUS_MAX_INPUT];

static int ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

/* Runs fn on every regular file of dir; returns how many. */
static int run_dir(const char *dir, int checkpoints) {
    DIR *d = opendir(dir);
    CHECK(d != NULL, "corpus directory %s", dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        char path[1024];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        if (ent->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        long size = test_read_file(path, input, sizeof input);
        CHECK(size >= 0 && size < (long)sizeof input, "read %s", path);
        if (size < 0) continue;
        n++;
        if (!checkpoints) {
            int ok = fuzz_config_one(input, (size_t)size);
            if (ends_with(path, ".yaml")) CHECK(ok, "%s loads and validates", path);
        } else {
            int accepted = fuzz_checkpoint_one(input, (size_t)size);
            if (ends_with(path, ".ckpt"))
                CHECK(accepted == 1, "%s loads into one fuzz trainer (%d did); if the format changed, refresh the seeds: "
                      "fuzz_corpus --write-seeds %s", path, accepted, dir);
        }
    }
    closedir(d);
    printf("%s: %d files\n", dir, n);
    return n;
}

/* 300 mutations of one valid checkpoint: a byte at a pseudo-random offset set to a value that is often
 * interesting (0, 0xff, 0x7f, 0x80, or random), CRCs recomputed. */
static void mutate_seed(const char *path) {
    long size = test_read_file(path, input, sizeof input);
    CHECK(size > 0, "read %s", path);
    /* The upper bound also tells the compiler that the copy below fits (-Warray-bounds at -O3 with ASan). */
    if (size <= 0 || size > (long)sizeof mutated) return;
    CHECK(fuzz_checkpoint_one(input, (size_t)size) == 1, "fresh seed %s loads into one fuzz trainer", path);
    uint32_t s = 12345u;
    static const uint8_t special[4] = {0x00, 0xff, 0x7f, 0x80};
    for (int k = 0; k < 300; k++) {
        memcpy(mutated, input, (size_t)size);
        s = s * 1664525u + 1013904223u;
        long at = (long)((s >> 8) % (uint32_t)size);
        s = s * 1664525u + 1013904223u;
        mutated[at] = (s >> 30) ? special[(s >> 8) & 3] : (uint8_t)(s >> 16);
        fuzz_fix_crcs(mutated, (size_t)size);
        fuzz_checkpoint_one(mutated, (size_t)size);
    }
    printf("%s: 300 mutations\n", path);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) {
        const char *work = test_tmpdir("fuzz_seeds");
        return work && fuzz_write_checkpoint_seeds(argv[2], work) == 0 ? 0 : 1;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/config", RLT_SOURCE_DIR);
    CHECK(run_dir(dir, 0) >= 3, "config corpus");
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/checkpoint", RLT_SOURCE_DIR);
    CHECK(run_dir(dir, 1) >= 3, "checkpoint corpus");

    const char *fresh = test_tmpdir("fuzz_corpus");
    char work[600];
    snprintf(work, sizeof work, "%s/work", fresh);
    CHECK(fresh && mkdir(work, 0755) == 0 && fuzz_write_checkpoint_seeds(fresh, work) == 0, "fresh seeds");
    static const char *names[] = {"pendulum_td3", "cartpole_dqn", "breakout_dqn"};
    for (int i = 0; i < 3; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s.ckpt", fresh, names[i]);
        mutate_seed(path);
    }
    return test_summary("fuzz_corpus");
}
