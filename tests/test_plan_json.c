/* test_plan_json.c: rlt_plan_fit_json, the document behind `rltrain plan --json` (docs/plan_json.md):
 * - every document is valid JSON (a strict checker below), for TD3 and DQN, fitting or not, and a name
 *   with quotes, backslashes and control characters comes out escaped;
 * - the fields the schema promises are there, with this schema version, and agree with rlt_plan_fit;
 * - a buffer too small is an error with the length needed (never a truncated document), and a NULL
 *   buffer asks for the length;
 * - the smallest budgets it names fit and one MiB less does not.
 * The field-by-field check through the CLI (json.loads, each hint applied) is tests/plan_json_check.py. */
#include <string.h>

#include "harness.h"
#include "plan_json.h"

/* A strict JSON checker (RFC 8259 grammar): returns the end of one value, or NULL. */
static const char *ws(const char *s) {
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++;
    return s;
}

static const char *value(const char *s, int depth);

static const char *string(const char *s) {
    if (*s++ != '"') return NULL;
    for (;;) {
        unsigned char c = (unsigned char)*s++;
        if (c == '"') return s;
        if (c < 0x20) return NULL; /* raw control characters (a NUL too) are invalid */
        if (c != '\\') continue;
        c = (unsigned char)*s++;
        if (c == 'u') {
            for (int i = 0; i < 4; i++, s++)
                if (!strchr("0123456789abcdefABCDEF", *s) || !*s) return NULL;
        } else if (!c || !strchr("\"\\/bfnrt", c)) {
            return NULL;
        }
    }
}

static const char *number(const char *s) {
    if (*s == '-') s++;
    if (*s == '0') s++;
    else if (*s >= '1' && *s <= '9') while (*s >= '0' && *s <= '9') s++;
    else return NULL;
    if (*s == '.') {
        if (*++s < '0' || *s > '9') return NULL;
        while (*s >= '0' && *s <= '9') s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (*s < '0' || *s > '9') return NULL;
        while (*s >= '0' && *s <= '9') s++;
    }
    return s;
}

static const char *container(const char *s, int depth, char close, int keyed) {
    s = ws(s + 1);
    if (*s == close) return s + 1;
    for (;;) {
        if (keyed) {
            if (!(s = string(s))) return NULL;
            s = ws(s);
            if (*s++ != ':') return NULL;
        }
        if (!(s = value(ws(s), depth + 1))) return NULL;
        s = ws(s);
        if (*s == close) return s + 1;
        if (*s++ != ',') return NULL;
        s = ws(s);
    }
}

static const char *value(const char *s, int depth) {
    if (depth > 32) return NULL;
    switch (*s) {
    case '{': return container(s, depth, '}', 1);
    case '[': return container(s, depth, ']', 0);
    case '"': return string(s);
    case 't': return strncmp(s, "true", 4) ? NULL : s + 4;
    case 'f': return strncmp(s, "false", 5) ? NULL : s + 5;
    case 'n': return strncmp(s, "null", 4) ? NULL : s + 4;
    default: return number(s);
    }
}

static int valid_json(const char *doc) {
    const char *end = value(ws(doc), 0);
    return end && *ws(end) == '\0';
}

static rlt_config *load(const char *name, double budget_mb) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    char path[600], set[64];
    snprintf(path, sizeof path, "%s/configs/%s", RLT_SOURCE_DIR, name);
    CHECK(rlt_config_load_file(cfg, path) == RLT_OK, "load %s", name);
    rlt_config_set(cfg, "device=cpu");
    snprintf(set, sizeof set, "memory.budget_mb=%g", budget_mb);
    rlt_config_set(cfg, set);
    return cfg;
}

static char doc[1 << 17];

/* 1 when cfg with memory.budget_mb = mb (and the sets) fits, by rlt_plan_fit. */
static int fits_at(const rlt_config *cfg0, double mb, const char *set1, const char *set2) {
    rlt_config *cfg = rlt_config_clone(cfg0);
    char set[64], err[1024];
    snprintf(set, sizeof set, "memory.budget_mb=%g", mb);
    rlt_config_set(cfg, set);
    if (set1) rlt_config_set(cfg, set1);
    if (set2) rlt_config_set(cfg, set2);
    rlt_fit_report f;
    int rc = rlt_plan_fit(cfg, &f, NULL, 0, err, sizeof err);
    CHECK(rc == RLT_OK, "plan_fit: %s", err);
    rlt_config_free(cfg);
    return f.fits;
}

int main(void) {
    char err[1024];
    size_t len = 0;
    int32_t fits = -1;

    /* TD3 at 4 MiB: nothing fits by batch or replay alone. */
    rlt_config *cfg = load("td3_pendulum.yaml", 4);
    int rc = rlt_plan_fit_json(cfg, doc, sizeof doc, &len, &fits, err, sizeof err);
    CHECK(rc == RLT_OK, "json: %s", err);
    CHECK(len == strlen(doc) && len > 1000, "length %zu (strlen %zu)", len, strlen(doc));
    CHECK(fits == 0, "does not fit");
    CHECK(valid_json(doc), "valid JSON:\n%s", doc);
    const char *keys[] = {"\"schema_version\": 1,", "\"fits\": false", "\"entries\": [", "\"regions\": [",
                          "\"totals\": {", "\"device\": {\"name\": \"cpu\"", "\"budget\": {", "\"hints\": [",
                          "\"largest_region\": {\"name\": \"activations\"", "\"largest_fitting\": {",
                          "\"train.batch_size\": null", "\"smallest_sizes\": {", "\"name\": \"replay.obs\"",
                          "\"budget_bytes\": 4194304,"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) CHECK(strstr(doc, keys[i]) != NULL, "has %s", keys[i]);

    /* The struct and the document agree, and the budgets they name are the smallest that fit. */
    rlt_fit_report f;
    CHECK(rlt_plan_fit(cfg, &f, NULL, 0, err, sizeof err) == RLT_OK, "plan_fit: %s", err);
    char want[128];
    snprintf(want, sizeof want, "\"need_bytes\": %llu,", (unsigned long long)f.need_bytes);
    CHECK(strstr(doc, want) != NULL, "need_bytes as in the report: %s", want);
    CHECK(f.max_batch_size == 0 && f.max_replay_capacity == 0 && f.min_grad_accum_steps == 0, "nothing fits alone");
    CHECK(f.min_need_bytes > f.limit_bytes && f.min_need_bytes < f.need_bytes, "smallest sizes need %llu",
          (unsigned long long)f.min_need_bytes);
    double mb = (double)f.fit_budget_bytes / 1048576.0, min_mb = (double)f.min_fit_budget_bytes / 1048576.0;
    CHECK(mb == (double)(long)mb && min_mb == (double)(long)min_mb && mb > 4 && min_mb > 4, "budgets %g, %g", mb, min_mb);
    CHECK(fits_at(cfg, mb, NULL, NULL) && !fits_at(cfg, mb - 1, NULL, NULL), "%g MiB fits as given, one less not", mb);
    char cap_set[64];
    snprintf(cap_set, sizeof cap_set, "replay.capacity=%lld", (long long)f.min_replay_capacity);
    CHECK(fits_at(cfg, min_mb, "train.batch_size=1", cap_set) && !fits_at(cfg, min_mb - 1, "train.batch_size=1", cap_set),
          "%g MiB fits at the smallest sizes, one less not", min_mb);

    /* Too small a buffer: an error naming the size, never a truncated document; NULL asks for the length. */
    char small[256];
    size_t len2 = 0;
    rc = rlt_plan_fit_json(cfg, small, sizeof small, &len2, NULL, err, sizeof err);
    CHECK(rc == RLT_EINVAL && len2 == len && small[0] == '\0', "small buffer: rc %d, len %zu", rc, len2);
    CHECK(strstr(err, "bytes") != NULL, "the error says how many bytes: %s", err);
    len2 = 0;
    rc = rlt_plan_fit_json(cfg, NULL, 0, &len2, NULL, err, sizeof err);
    CHECK(rc == RLT_OK && len2 == len, "length query: rc %d, len %zu", rc, len2);
    rlt_config_free(cfg);

    /* Fitting: no hints, exit-0 document. */
    cfg = load("td3_pendulum.yaml", 64);
    rc = rlt_plan_fit_json(cfg, doc, sizeof doc, &len, &fits, err, sizeof err);
    CHECK(rc == RLT_OK && fits == 1 && valid_json(doc), "fitting document: %s", err);
    CHECK(strstr(doc, "\"fits\": true") && strstr(doc, "\"hints\": []"), "fits, no hints");
    rlt_config_free(cfg);

    /* DQN, with an image environment and a plan note: valid, replay the largest region. */
    cfg = load("dqn_minatar_breakout.yaml", 16);
    rc = rlt_plan_fit_json(cfg, doc, sizeof doc, &len, &fits, err, sizeof err);
    CHECK(rc == RLT_OK && fits == 0 && valid_json(doc), "dqn document: %s", err);
    CHECK(strstr(doc, "\"algo\": \"dqn\"") && strstr(doc, "\"largest_region\": {\"name\": \"replay\""), "dqn fields");
    CHECK(strstr(doc, "\"notes\": [\"replay stores observations") != NULL, "the plan's note");
    rlt_config_free(cfg);

    /* Names that need escaping come out as valid JSON strings. */
    static rlt_plan p;
    plan_init(&p, 1);
    rlt_err e = {0};
    plan_add(&p, &e, "odd\"name\\with\ttab\nand\x01", "re\"gion", RLT_LOC_HOST, 100, NULL);
    plan_note(&p, "a note with \"quotes\"");
    plan_layout(&p);
    rlt_plan_summary s = {0};
    snprintf(s.device, sizeof s.device, "dev\\ice\"");
    rlt_fit_report fr = {0};
    fr.need_bytes = 256;
    fr.limit_bytes = 1;
    cfg = load("td3_pendulum.yaml", 1);
    len = plan_json_format(&p, &s, &fr, cfg, doc, sizeof doc);
    CHECK(len == strlen(doc) && valid_json(doc), "escaped document valid:\n%s", doc);
    CHECK(strstr(doc, "\"odd\\\"name\\\\with\\ttab\\nand\\u0001\"") != NULL, "escaped name: %s", doc);
    CHECK(strstr(doc, "\"dev\\\\ice\\\"\"") && strstr(doc, "\"a note with \\\"quotes\\\"\""), "escaped device and note");
    /* Cut short at every length, the writer still NUL-terminates and reports the full length. */
    for (size_t cap = 1; cap < 64; cap++) {
        memset(small, 'x', sizeof small);
        CHECK(plan_json_format(&p, &s, &fr, cfg, small, cap) == len && small[cap - 1] == '\0', "cap %zu", cap);
    }
    rlt_config_free(cfg);
    return test_summary("test_plan_json");
}
