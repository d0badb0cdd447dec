/* harness.h: the tiny test harness shared by every test: CHECK macros that count failures and keep
 * going, a skip exit (77, ctest's SKIP_RETURN_CODE) and a summary line. */
#ifndef RLT_TEST_HARNESS_H
#define RLT_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern int rlt_test_checks;
extern int rlt_test_failures;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        rlt_test_checks++;                                                            \
        if (!(cond)) {                                                                \
            rlt_test_failures++;                                                      \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_NEAR(a, b, atol, rtol, what)                                                     \
    do {                                                                                       \
        double a_ = (double)(a), b_ = (double)(b);                                             \
        CHECK(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_) && !isnan(a_), "%s: got %.9g want %.9g", \
              (what), a_, b_);                                                                 \
    } while (0)

/* Prints "<name>: N passed, N failed" and returns the exit code (0 when nothing failed). */
int test_summary(const char *name);
/* Prints why and exits 77 so ctest reports the test as skipped. */
void test_skip(const char *why);
/* A fresh empty directory under the test's working directory (removed first if it exists). */
const char *test_tmpdir(const char *name);

struct rlt_progress;
struct rlt_agent;
/* A TD3 agent at HalfCheetah sizes (observation 17, action 6) with start_steps 0, a 4,000-transition replay and
 * `sets` applied (a NULL-terminated list), after observing 3,000 fixed synthetic transitions: the subject of
 * the GPU tests. NULL (with *rc the status) when init fails. */
struct rlt_agent *test_td3_synthetic(const char *const *sets, int *rc);
/* Bytes that differ between two files, or -1 when one is missing or their lengths differ. */
long test_files_differ(const char *a, const char *b);
/* Tensor `name` of two checkpoints: 1 when equal byte for byte, 0 when not, -1 when missing from either (or
 * larger than 1 MiB). */
int test_ckpt_same_tensor(const char *a_path, const char *b_path, const char *name);
/* 1 when the two checkpoints hold the same replica: params, adam_m, adam_v and target equal byte for byte. */
int test_ckpt_same_replica(const char *a_path, const char *b_path);
/* A whole file into buf (at most cap bytes): its size, or -1 when it cannot be opened. */
long test_read_file(const char *path, void *buf, size_t cap);
/* n bytes from buf as the whole file at path: 0, or -1 on failure. */
int test_write_file(const char *path, const void *buf, size_t n);
/* A whole text file into buf, NUL-terminated (at most cap - 1 bytes; an empty string when it cannot be read):
 * its length. */
size_t test_read_text(const char *path, char *buf, size_t cap);
/* metrics.csv text without its wall_s column (the 7th), which differs between runs, in place. */
void test_strip_wall(char *text);
/* CHECKs that the runs in dir_a and dir_b are the same run: final.ckpt byte for byte, and metrics.csv (not
 * empty) row for row but its wall_s column; `what` names the pair in the messages. */
void test_same_run(const char *dir_a, const char *dir_b, const char *what);
/* Trains configs/<config> (from the source tree) on `device` (NULL: as configured) into a fresh
 * tmp_<tag> directory, printing each evaluation; fills *out with the final progress. Returns the run's
 * status (init and run failures are CHECKed). */
int test_train_config(const char *config, const char *device, const char *tag, struct rlt_progress *out);
/* The same with any --set overrides (a NULL-terminated list, e.g. {"device=cuda:0", "precision=bf16", NULL}). */
int test_train_config_sets(const char *config, const char *const *sets, const char *tag, struct rlt_progress *out);
/* The same, calling after(trainer, user) once the run succeeded, before the trainer is freed. */
struct rlt_trainer;
int test_train_config_then(const char *config, const char *const *sets, const char *tag, struct rlt_progress *out,
                           void (*after)(struct rlt_trainer *tr, void *user), void *user);
/* Trains seeds seed .. seed + n - 1 of configs/<config> as one seed group (train.num_seeds = n, cpu.threads 1:
 * the members share the cores; on the CPU each is bit for bit its single run, whatever the thread count) into a
 * fresh tmp_<tag>, printing the group's evaluations; fills out[0 .. n-1] with each member's final progress.
 * Returns the group's status (init and run failures are CHECKed). */
int test_train_seeds(const char *config, const char *const *sets, const char *tag, int n, struct rlt_progress *out);
/* Runs the seed group of cfg (freed here) with the library's log captured, CHECKing that it initialises, runs and
 * logs `expect` (tag names it in the messages); returns the log (a static buffer, valid until the next call). */
struct rlt_config;
/* A config from YAML text (named `name` in messages) with out_dir and up to two --set overrides (NULL: none);
 * failures are CHECKed. */
struct rlt_config *test_config_text(const char *yaml, const char *name, const char *out_dir, const char *set1,
                                    const char *set2);
const char *test_group_logged(struct rlt_config *cfg, const char *tag, const char *expect);
/* Runs the single run of `one` (freed here), whose out_dir is sdir, and CHECKs it is the same run as the group
 * member's in member_dir (test_same_run; `what` names the pair). */
void test_single_same(struct rlt_config *one, const char *sdir, const char *member_dir, const char *what);
/* The median of v[0 .. n-1] (n <= 64). */
double test_median(const double *v, int n);

#endif
