/* harness.c: see harness.h. */
#include "harness.h"

#include "rltrain.h"
#include "checkpoint.h"

#include <stdio.h>
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

static int print_eval(void *user, const rlt_progress *p) {
    (void)user;
    if (p->is_eval)
        printf("step %7lld  eval %8.1f  best %8.1f  %7.0f updates/s\n", (long long)p->env_steps, p->last_eval_return,
               p->best_eval_return, p->updates_per_s);
    fflush(stdout);
    return 0;
}

/* configs/<config> from the source tree with the overrides, writing into a fresh tmp_<tag>/run. */
static rlt_config *load_config(const char *config, const char *const *sets, const char *tag) {
    char path[700];
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    snprintf(path, sizeof path, "%s/configs/%s", RLT_SOURCE_DIR, config);
    CHECK(rlt_config_load_file(cfg, path) == RLT_OK, "load %s: %s", config, rlt_config_errmsg(cfg));
    for (int i = 0; sets && sets[i]; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "--set %s", sets[i]);
    snprintf(path, sizeof path, "out_dir=%s/run", test_tmpdir(tag));
    rlt_config_set(cfg, path);
    return cfg;
}

int test_train_config_sets(const char *config, const char *const *sets, const char *tag, rlt_progress *out) {
    return test_train_config_then(config, sets, tag, out, NULL, NULL);
}

int test_train_config_then(const char *config, const char *const *sets, const char *tag, rlt_progress *out,
                           void (*after)(rlt_trainer *tr, void *user), void *user) {
    memset(out, 0, sizeof *out);
    rlt_config *cfg = load_config(config, sets, tag);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(cfg, &tr);
    CHECK(rc == RLT_OK, "init %s: %s", config, rlt_trainer_errmsg(tr));
    if (rc == RLT_OK) {
        rc = rlt_trainer_run(tr, print_eval, NULL);
        CHECK(rc == RLT_OK, "run %s: %s", config, rlt_trainer_errmsg(tr));
        rlt_trainer_progress(tr, out);
        CHECK(rlt_agent_allocations_after_init(rlt_trainer_agent(tr)) == 0, "no allocation after init");
        printf("%s", config);
        for (int i = 0; sets && sets[i]; i++) printf(" %s", sets[i]);
        printf(": final eval %.1f, best %.1f after %lld steps (%.1f s, %.0f updates/s)\n", out->last_eval_return,
               out->best_eval_return, (long long)out->env_steps, out->elapsed_s, out->updates_per_s);
        if (rc == RLT_OK && after) after(tr, user);
    }
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc;
}

static int print_group_eval(void *user, const rlt_group_report *r) {
    (void)user;
    /* The long learning tests' progress, as it comes (ctest -V, or a failure's output): time so far and the ETA. */
    char eta[32] = "?";
    if (r->eta_s == r->eta_s) snprintf(eta, sizeof eta, "%.0f s", r->eta_s); /* NaN: not known yet */
    if (r->is_eval)
        printf("step %7lld per seed  eval mean %8.1f  min %8.1f  max %8.1f  | %.0f s, ETA %s\n",
               (long long)(r->env_steps / r->n_members), r->eval_mean, r->eval_min, r->eval_max, r->elapsed_s, eta);
    fflush(stdout);
    return 0;
}

int test_train_seeds(const char *config, const char *const *sets, const char *tag, int n, rlt_progress *out) {
    memset(out, 0, (size_t)n * sizeof *out);
    rlt_config *cfg = load_config(config, sets, tag);
    char num[48];
    snprintf(num, sizeof num, "train.num_seeds=%d", n);
    CHECK(rlt_config_set(cfg, num) == RLT_OK && rlt_config_set(cfg, "cpu.threads=1") == RLT_OK, "seed group sets");
    rlt_group *g;
    int rc = rlt_group_init(cfg, &g);
    CHECK(rc == RLT_OK, "group init %s: %s", config, rlt_group_errmsg(g));
    if (rc == RLT_OK) {
        rc = rlt_group_run(g, print_group_eval, NULL);
        CHECK(rc == RLT_OK, "group run %s: %s", config, rlt_group_errmsg(g));
        CHECK(rlt_group_size(g) == n, "%d members", n);
        for (int k = 0; k < n && k < rlt_group_size(g); k++) {
            rlt_trainer *tr = rlt_group_member(g, k);
            rlt_trainer_progress(tr, &out[k]);
            CHECK(rlt_agent_allocations_after_init(rlt_trainer_agent(tr)) == 0, "member %d: no allocation after init", k);
            printf("%s member %d: final eval %.1f, best %.1f after %lld steps (%.1f s)\n", config, k,
                   out[k].last_eval_return, out[k].best_eval_return, (long long)out[k].env_steps, out[k].elapsed_s);
        }
    }
    rlt_group_free(g);
    rlt_config_free(cfg);
    return rc;
}

double test_median(const double *v, int n) {
    double s[64];
    int m = n < 64 ? n : 64;
    for (int i = 0; i < m; i++) { /* insertion sort: a handful of seeds */
        int j = i;
        for (; j > 0 && s[j - 1] > v[i]; j--) s[j] = s[j - 1];
        s[j] = v[i];
    }
    return m % 2 ? s[m / 2] : 0.5 * (s[m / 2 - 1] + s[m / 2]);
}

int test_train_config(const char *config, const char *device, const char *tag, rlt_progress *out) {
    char dev[64];
    snprintf(dev, sizeof dev, "device=%s", device ? device : "");
    const char *sets[] = {dev, NULL};
    return test_train_config_sets(config, device ? sets : NULL, tag, out);
}

rlt_agent *test_td3_synthetic(const char *const *sets, int *rc_out) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    rlt_config_set(cfg, "train.start_steps=0");
    rlt_config_set(cfg, "replay.capacity=4000");
    for (int i = 0; sets && sets[i]; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "--set %s", sets[i]);
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {17, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {6, 0, 0, 0}, 0, NULL, NULL};
    rlt_agent *ag;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    rlt_config_free(cfg);
    if (rc_out) *rc_out = rc;
    if (rc != RLT_OK) {
        fprintf(stderr, "test_td3_synthetic: %s\n", rlt_agent_errmsg(ag));
        rlt_agent_free(ag);
        return NULL;
    }
    uint32_t s = 11;
    for (int i = 0; i < 3000; i++) {
        float o[17], o2[17], a[6], r;
        for (int j = 0; j < 17; j++) {
            s = s * 1664525u + 1013904223u;
            o[j] = (float)(s >> 8) / 16777216.0f - 0.5f;
            o2[j] = 0.9f * o[j];
        }
        for (int j = 0; j < 6; j++) a[j] = o[j] - o[j + 6];
        r = o[0] * o[1];
        uint8_t term = i % 200 == 199, trunc = 0;
        CHECK(rlt_agent_observe(ag, o, a, &r, o2, &term, &trunc, 1) == RLT_OK, "observe");
    }
    return ag;
}

long test_files_differ(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    long diff = -1;
    if (fa && fb) {
        diff = 0;
        int ca, cb;
        do {
            ca = fgetc(fa);
            cb = fgetc(fb);
            diff += ca != cb;
        } while (ca != EOF && cb != EOF);
        if (ca != cb) diff = -1; /* different lengths */
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return diff;
}

long test_read_file(const char *path, void *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return (long)n;
}

int test_write_file(const char *path, const void *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(buf, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

size_t test_read_text(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    return n;
}

void test_strip_wall(char *text) {
    /* The columns that measure the machine rather than the run, found by name in the header: wall_s, and on a GPU
     * the device's free memory and the co-tenants' (device_free_mib, cotenants_mib). Their fields are emptied. */
    static const char *const measured[] = {"wall_s", "device_free_mib", "cotenants_mib"};
    int skip[64] = {0};
    const char *hdr_end = strchr(text, '\n');
    int field = 0;
    for (const char *f = text; f && (!hdr_end || f < hdr_end) && field < 64; field++) {
        const char *comma = strchr(f, ',');
        size_t len = (size_t)((comma && (!hdr_end || comma < hdr_end) ? comma : hdr_end ? hdr_end : f + strlen(f)) - f);
        for (size_t m = 0; m < sizeof measured / sizeof measured[0]; m++)
            if (len == strlen(measured[m]) && strncmp(f, measured[m], len) == 0) skip[field] = 1;
        f = comma && (!hdr_end || comma < hdr_end) ? comma + 1 : NULL;
    }
    char *out = text;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        int first = line == text; /* the header keeps its names */
        field = 0;
        for (size_t i = 0; i < len; i++) {
            if (line[i] == ',') field++;
            if (!first && field < 64 && skip[field] && line[i] != ',' && line[i] != '\n') continue;
            *out++ = line[i];
        }
        line += len;
    }
    *out = '\0';
}

static unsigned char g_ckpt_a[1 << 20], g_ckpt_b[1 << 20];

int test_ckpt_same_tensor(const char *a_path, const char *b_path, const char *name) {
    rlt_err e;
    ckpt_reader ra, rb;
    const ckpt_tensor_info *ia, *ib;
    int same = -1;
    if (ckpt_reader_open(&ra, &e, a_path) != RLT_OK) return -1;
    if (ckpt_reader_open(&rb, &e, b_path) != RLT_OK) {
        ckpt_reader_close(&ra);
        return -1;
    }
    if (ckpt_reader_find(&ra, name, &ia) == RLT_OK && ckpt_reader_find(&rb, name, &ib) == RLT_OK &&
        ia->bytes <= sizeof g_ckpt_a && ia->bytes == ib->bytes &&
        ckpt_reader_read(&ra, name, g_ckpt_a, ia->bytes) == RLT_OK && ckpt_reader_read(&rb, name, g_ckpt_b, ib->bytes) == RLT_OK)
        same = memcmp(g_ckpt_a, g_ckpt_b, ia->bytes) == 0;
    ckpt_reader_close(&ra);
    ckpt_reader_close(&rb);
    return same;
}

int test_ckpt_same_replica(const char *a_path, const char *b_path) {
    const char *state[] = {"params", "adam_m", "adam_v", "target"};
    for (int i = 0; i < 4; i++)
        if (test_ckpt_same_tensor(a_path, b_path, state[i]) != 1) {
            fprintf(stderr, "  tensor '%s' differs between %s and %s\n", state[i], a_path, b_path);
            return 0;
        }
    return 1;
}

void test_same_run(const char *dir_a, const char *dir_b, const char *what) {
    static char text_a[1 << 20], text_b[1 << 20];
    char a[800], b[800];
    snprintf(a, sizeof a, "%s/final.ckpt", dir_a);
    snprintf(b, sizeof b, "%s/final.ckpt", dir_b);
    CHECK(test_files_differ(a, b) == 0, "%s: final.ckpt differs (%ld bytes)", what, test_files_differ(a, b));
    snprintf(a, sizeof a, "%s/metrics.csv", dir_a);
    snprintf(b, sizeof b, "%s/metrics.csv", dir_b);
    test_read_text(a, text_a, sizeof text_a);
    test_read_text(b, text_b, sizeof text_b);
    test_strip_wall(text_a);
    test_strip_wall(text_b);
    CHECK(strchr(text_a, '\n') && strcmp(text_a, text_b) == 0, "%s: metrics.csv differs (but wall_s)", what);
}

static char g_group_log[1 << 16];

static void group_log_line(void *user, int level, const char *message) {
    (void)user;
    (void)level;
    size_t n = strlen(g_group_log);
    snprintf(g_group_log + n, sizeof g_group_log - n, "%s\n", message);
}

const char *test_group_logged(rlt_config *cfg, const char *tag, const char *expect) {
    g_group_log[0] = '\0';
    rlt_log_set_callback(group_log_line, NULL);
    rlt_group *g;
    int rc = rlt_group_init(cfg, &g);
    CHECK(rc == RLT_OK, "%s: group init: %s", tag, rlt_group_errmsg(g));
    if (rc == RLT_OK) rc = rlt_group_run(g, NULL, NULL);
    CHECK(rc == RLT_OK, "%s: group run: %s", tag, rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(cfg);
    rlt_log_set_callback(NULL, NULL);
    CHECK(strstr(g_group_log, expect) != NULL, "%s: the group's log says '%s'; it says:\n%s", tag, expect, g_group_log);
    return g_group_log;
}

void test_single_same(rlt_config *one, const char *sdir, const char *member_dir, const char *what) {
    rlt_trainer *tr;
    int rc = rlt_trainer_init(one, &tr);
    CHECK(rc == RLT_OK, "%s: single init: %s", what, rlt_trainer_errmsg(tr));
    if (rc == RLT_OK) CHECK(rlt_trainer_run(tr, NULL, NULL) == RLT_OK, "%s: single run: %s", what, rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(one);
    test_same_run(member_dir, sdir, what);
}

rlt_config *test_config_text(const char *yaml, const char *name, const char *out_dir, const char *set1, const char *set2) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg, yaml, name) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    char set[700];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    if (set1) CHECK(rlt_config_set(cfg, set1) == RLT_OK, "%s: %s", set1, rlt_config_errmsg(cfg));
    if (set2) CHECK(rlt_config_set(cfg, set2) == RLT_OK, "%s: %s", set2, rlt_config_errmsg(cfg));
    return cfg;
}
