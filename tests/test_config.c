/* test_config.c: the strict YAML configuration: the schema table's own consistency, the defaults, a full
 * valid file, a table of bad inputs (each with its exact status and the file:line:column, key and hint
 * its message must carry), that a failed load or --set changes nothing, --set, validate's cross-field
 * checks, the dump reading back to identical bits, the 1 MiB limit, file errors, every shipped file
 * in configs/, and the enum keys (each value parsed once into its enum, written back as the same text, and
 * every bad value refused with file:line:column and the allowed values). */
#include <dirent.h>
#include <locale.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "config_conv.h"
#include "config_schema.h"
#include "harness.h"
#include "mem.h"

/* Compares every field the schema knows, byte for byte (strings and lists are stored zero-padded, so
 * equal values have equal bytes). Returns 1 when all agree, else 0 with the first differing key. */
static int same_values(const rlt_config *a, const rlt_config *b, const char **which) {
    size_t n;
    const cfg_key *k = config_schema_keys(&n);
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + k[i].offset, (const char *)b + k[i].offset, k[i].size) != 0) {
            *which = k[i].key;
            return 0;
        }
    *which = "";
    return 1;
}

static void check_schema(void) {
    char why[512];
    CHECK(config_schema_selftest(why, sizeof why) == 0, "schema table: %s", why);
    size_t n;
    const cfg_key *k = config_schema_keys(&n);
    /* Every value field has a row: sorted by offset, the rows neither overlap nor leave a gap that could
     * hold a forgotten 8-byte field, and they end where the provenance fields begin. A 4-byte field could
     * still hide in padding; the _Generic check in the table catches rows whose type is wrong. */
    size_t end = 0, gaps = 0, overlaps = 0;
    for (size_t done = 0; done < n; done++) {
        size_t next = n;
        for (size_t i = 0; i < n; i++)
            if (k[i].offset >= end && (next == n || k[i].offset < k[next].offset)) next = i;
        if (next == n) {
            overlaps++;
            break;
        }
        if (k[next].offset - end >= 8) gaps++;
        end = k[next].offset + k[next].size;
    }
    CHECK(gaps == 0 && overlaps == 0 && offsetof(rlt_config, source) - end < 8,
          "rows cover struct rlt_config: %zu gaps, %zu overlaps, %zu bytes after the last row", gaps, overlaps,
          offsetof(rlt_config, source) - end);
    CHECK(config_schema_find("train.batch_size", 16) == &k[config_schema_index(config_schema_find("train.batch_size", 16))],
          "find and index agree");
    CHECK(config_schema_section("td3", 3) >= 0 && config_schema_section("td", 2) < 0, "sections are whole components");
}

static void check_defaults(void) {
    rlt_config *c;
    CHECK(rlt_config_init(&c) == RLT_OK, "init");
    if (!c) return;
    CHECK(!strcmp(c->algo, "td3"), "algo %s", c->algo);
    CHECK(!strcmp(c->env.name, "pendulum"), "env.name %s", c->env.name);
    CHECK(c->env.max_episode_steps == 0, "max_episode_steps");
    CHECK(c->seed == 1, "seed");
    CHECK(c->device.kind == RLT_DEVICE_CPU && c->device.index == -1, "device %d:%d", (int)c->device.kind,
          (int)c->device.index);
    CHECK(c->precision == RLT_PRECISION_FP32, "precision %d", (int)c->precision);
    CHECK(c->train.total_steps == 20000 && c->train.start_steps == 1000, "steps");
    CHECK(c->train.batch_size == 256 && c->train.grad_accum_steps == 1 && c->train.updates_per_step == 1, "batch");
    CHECK(c->train.eval_every == 2000 && c->train.eval_episodes == 10, "eval");
    CHECK(c->train.progress_every_s == 2.0, "progress_every_s");
    CHECK(c->replay.capacity == 100000 && c->replay.location == RLT_REPLAY_LOCATION_AUTO &&
              c->replay.obs_dtype == RLT_OBS_DTYPE_AUTO, "replay");
    CHECK(c->dqn.loss == RLT_DQN_LOSS_HUBER && c->memory.on_oom == RLT_ON_OOM_FAIL, "dqn.loss, memory.on_oom");
    CHECK(c->network.conv.preset == RLT_CONV_PRESET_NONE && c->network.conv.n == 0, "network.conv");
    CHECK(c->td3.actor_hidden.n == 2 && c->td3.actor_hidden.v[0] == 256 && c->td3.actor_hidden.v[1] == 256, "actor");
    CHECK(c->td3.critic_hidden.n == 2 && c->td3.critic_hidden.v[0] == 256 && c->td3.critic_hidden.v[1] == 256, "critic");
    CHECK(c->td3.actor_lr == 3e-4 && c->td3.critic_lr == 3e-4, "lr");
    CHECK(c->td3.gamma == 0.99 && c->td3.tau == 0.005, "gamma tau");
    CHECK(c->td3.policy_noise == 0.2 && c->td3.noise_clip == 0.5 && c->td3.exploration_noise == 0.1, "noises");
    CHECK(c->td3.policy_delay == 2, "policy_delay");
    CHECK(c->memory.budget_mb == 512 && c->cpu.threads == 0, "budget threads");
    CHECK(!strcmp(c->out_dir, "runs/td3_pendulum"), "out_dir %s", c->out_dir);
    CHECK(rlt_config_validate(c) == RLT_OK, "defaults validate: %s", rlt_config_errmsg(c));
    /* An empty document, a comment-only one and a bare '---' merge nothing. */
    rlt_config *d;
    const char *which;
    CHECK(rlt_config_init(&d) == RLT_OK, "init");
    CHECK(rlt_config_load_string(d, "", "empty.yaml") == RLT_OK, "empty: %s", rlt_config_errmsg(d));
    CHECK(rlt_config_load_string(d, "# nothing\n", "c.yaml") == RLT_OK, "comment only: %s", rlt_config_errmsg(d));
    CHECK(rlt_config_load_string(d, "---\n", "dash.yaml") == RLT_OK, "bare document: %s", rlt_config_errmsg(d));
    CHECK(rlt_config_load_string(d, "train:\n", "sec.yaml") == RLT_OK, "empty section: %s", rlt_config_errmsg(d));
    CHECK(same_values(c, d, &which), "empty inputs changed %s", which);
    rlt_config_free(d);
    rlt_config_free(c);
}

static const char full_yaml[] =
    "# every key, none at its default\n"
    "algo: td3\n"
    "env:\n"
    "  name: cartpole\n"
    "  max_episode_steps: 500\n"
    "seed: 18446744073709551615\n"
    "device: cuda:3\n"
    "precision: fp32\n"
    "train:\n"
    "  total_steps: 1000000\n"
    "  start_steps: 25000\n"
    "  batch_size: 128\n"
    "  grad_accum_steps: 1\n"
    "  updates_per_step: 2\n"
    "  eval_every: 5000\n"
    "  eval_episodes: 5\n"
    "  progress_every_s: 0.5\n"
    "replay:\n"
    "  capacity: 1000000\n"
    "  location: host\n"
    "td3:\n"
    "  actor_hidden: [400, 300]\n"
    "  critic_hidden:\n"
    "    - 400\n"
    "    - 300\n"
    "    - 7\n"
    "  actor_lr: 1e-3\n"
    "  critic_lr: 0.001\n"
    "  gamma: 1\n"
    "  tau: 0.01\n"
    "  policy_noise: 0.25\n"
    "  noise_clip: 0.4\n"
    "  policy_delay: 3\n"
    "  exploration_noise: 0.15\n"
    "memory:\n"
    "  budget_mb: 0.5\n"
    "cpu:\n"
    "  threads: 4\n"
    "out_dir: \"runs/a b: #c\"\n";

static void check_full_config(void) {
    rlt_config *c;
    CHECK(rlt_config_init(&c) == RLT_OK, "init");
    if (!c) return;
    CHECK(rlt_config_load_string(c, full_yaml, "full.yaml") == RLT_OK, "full: %s", rlt_config_errmsg(c));
    CHECK(!strcmp(c->source, "full.yaml"), "source %s", c->source);
    CHECK(!strcmp(c->env.name, "cartpole") && c->env.max_episode_steps == 500, "env");
    CHECK(c->seed == UINT64_MAX, "seed");
    CHECK(c->device.kind == RLT_DEVICE_CUDA && c->device.index == 3, "device");
    CHECK(c->train.total_steps == 1000000 && c->train.start_steps == 25000, "steps");
    CHECK(c->train.batch_size == 128 && c->train.updates_per_step == 2, "batch");
    CHECK(c->train.eval_every == 5000 && c->train.eval_episodes == 5 && c->train.progress_every_s == 0.5, "eval");
    CHECK(c->replay.capacity == 1000000 && c->replay.location == RLT_REPLAY_LOCATION_HOST, "replay");
    CHECK(c->td3.actor_hidden.n == 2 && c->td3.actor_hidden.v[0] == 400 && c->td3.actor_hidden.v[1] == 300, "actor");
    CHECK(c->td3.critic_hidden.n == 3 && c->td3.critic_hidden.v[2] == 7, "block list");
    CHECK(c->td3.actor_lr == 1e-3 && c->td3.critic_lr == 0.001 && c->td3.gamma == 1.0 && c->td3.tau == 0.01, "td3");
    CHECK(c->td3.policy_noise == 0.25 && c->td3.noise_clip == 0.4 && c->td3.exploration_noise == 0.15, "noise");
    CHECK(c->td3.policy_delay == 3 && c->memory.budget_mb == 0.5 && c->cpu.threads == 4, "rest");
    CHECK(!strcmp(c->out_dir, "runs/a b: #c"), "quoted string %s", c->out_dir);
    CHECK(rlt_config_validate(c) == RLT_OK, "validate: %s", rlt_config_errmsg(c));
    /* Dotted keys are the same keys, and merging keeps what the input does not name. */
    CHECK(rlt_config_load_string(c, "train.batch_size: 64\n", "dotted.yaml") == RLT_OK, "dotted: %s", rlt_config_errmsg(c));
    CHECK(c->train.batch_size == 64 && c->train.updates_per_step == 2, "dotted key merged over the rest");
    /* A UTF-8 byte order mark and CRLF line ends are ordinary files. */
    CHECK(rlt_config_load_string(c, "\xef\xbb\xbfseed: 2\r\ntrain:\r\n  batch_size: 8\r\n", "bom.yaml") == RLT_OK,
          "bom: %s", rlt_config_errmsg(c));
    CHECK(c->seed == 2 && c->train.batch_size == 8, "bom values");
    rlt_config_free(c);
}

typedef struct bad_case {
    const char *yaml;
    int status;
    const char *needles[4]; /* each must appear in the message */
} bad_case;

static const bad_case bad_cases[] = {
    /* Unknown keys, with the nearest valid key or the list of valid ones. */
    {"train:\n  bach_size: 64\n", RLT_ECONFIG,
     {"t.yaml:2:3: unknown key 'train.bach_size'; did you mean 'train.batch_size'?"}},
    {"trian:\n  batch_size: 64\n", RLT_ECONFIG, {"t.yaml:1:1:", "unknown key 'trian'", "did you mean 'train'?"}},
    {"optimizer: adam\n", RLT_ECONFIG, {"t.yaml:1:1:", "unknown key 'optimizer'", "valid keys at the top level", "td3"}},
    {"td3:\n  gamma: 0.9\n  lerning_rate: 1\n", RLT_ECONFIG, {"t.yaml:3:3:", "unknown key 'td3.lerning_rate'", "valid keys under 'td3'"}},
    {"train:\n  gamma: 0.9\n", RLT_ECONFIG, {"t.yaml:2:3:", "did you mean 'td3.gamma'?"}},
    {"td3:\n  actor_hidden:\n    width: 3\n", RLT_ECONFIG, {"t.yaml:3:5:", "key 'td3.actor_hidden'", "got a mapping"}},
    /* Duplicates, of a key and of a section. */
    {"train:\n  batch_size: 64\n  batch_size: 32\n", RLT_ECONFIG,
     {"t.yaml:3:3: key 'train.batch_size': duplicate key", "line 2", "give each key once"}},
    {"train: {batch_size: 1}\ntrain: {eval_every: 5}\n", RLT_ECONFIG, {"t.yaml:2:1: key 'train': duplicate key"}},
    {"train.batch_size: 3\ntrain: {batch_size: 2}\n", RLT_ECONFIG, {"t.yaml:2:9: key 'train.batch_size': duplicate"}},
    /* Wrong types. */
    {"train:\n  batch_size: abc\n", RLT_ECONFIG,
     {"t.yaml:2:15: key 'train.batch_size': expected an integer, got 'abc'", "[1, 1048576]"}},
    {"train: {batch_size: 2.5}\n", RLT_ECONFIG, {"t.yaml:1:21: key 'train.batch_size': expected an integer, got '2.5'",
                                                 "without a decimal point"}},
    {"train: {total_steps: 1e5}\n", RLT_ECONFIG, {"t.yaml:1:22: key 'train.total_steps': expected an integer"}},
    {"seed: \"5\"\n", RLT_ECONFIG, {"t.yaml:1:7: key 'seed':", "quoted string", "without quotes"}},
    {"td3: {gamma: [1]}\n", RLT_ECONFIG, {"t.yaml:1:14: key 'td3.gamma': expected a number, got a list"}},
    {"td3: {gamma: high}\n", RLT_ECONFIG, {"t.yaml:1:14: key 'td3.gamma': expected a number, got 'high'"}},
    {"td3: {gamma: .inf}\n", RLT_ECONFIG, {"key 'td3.gamma': expected a number"}},
    {"td3: {actor_hidden: 256}\n", RLT_ECONFIG,
     {"t.yaml:1:21: key 'td3.actor_hidden': expected a list of integers, got '256'", "[256, 256]"}},
    {"td3: {actor_hidden: [64, [1]]}\n", RLT_ECONFIG, {"t.yaml:1:26: key 'td3.actor_hidden': entry 2: expected an integer, got a list"}},
    {"td3: {actor_hidden: [64, 6.5]}\n", RLT_ECONFIG, {"key 'td3.actor_hidden': entry 2: expected an integer"}},
    {"algo: {name: td3}\n", RLT_ECONFIG, {"t.yaml:1:7: key 'algo': expected one of td3|dqn, got a mapping"}},
    {"train: 5\n", RLT_ECONFIG, {"t.yaml:1:8: key 'train': is a section", "batch_size"}},
    {"out_dir:\n", RLT_ECONFIG, {"t.yaml:1:9: key 'out_dir': has no value"}},
    {"out_dir: \"\"\n", RLT_ECONFIG, {"key 'out_dir': must not be empty"}},
    {"train: {batch_size: 007}\n", RLT_ECONFIG, {"key 'train.batch_size': '007' has a leading zero"}},
    /* Out of range, with the range named. */
    {"train: {batch_size: -5}\n", RLT_ECONFIG,
     {"t.yaml:1:21: key 'train.batch_size': -5 is out of range", "allowed range is [1, 1048576]"}},
    {"td3: {gamma: 1.5}\n", RLT_ECONFIG, {"t.yaml:1:14: key 'td3.gamma': 1.5 is out of range", "[0, 1]"}},
    {"td3: {actor_lr: 0}\n", RLT_ECONFIG, {"key 'td3.actor_lr': 0 is out of range", "(0, 1]"}},
    {"td3: {critic_lr: 1e999}\n", RLT_ECONFIG, {"key 'td3.critic_lr': 1e999 is out of range"}},
    {"seed: 18446744073709551616\n", RLT_ECONFIG, {"key 'seed': 18446744073709551616 is out of range"}},
    {"seed: -1\n", RLT_ECONFIG, {"key 'seed': -1 is out of range"}},
    {"memory: {budget_mb: 0}\n", RLT_ECONFIG, {"key 'memory.budget_mb': 0 is out of range", "(0, 16777216]"}},
    {"train: {grad_accum_steps: 0}\n", RLT_ECONFIG, {"key 'train.grad_accum_steps': 0 is out of range", "[1, 1024]"}},
    {"td3: {critic_hidden: [64, 0]}\n", RLT_ECONFIG, {"t.yaml:1:27: key 'td3.critic_hidden': entry 2: 0 is out of range",
                                                      "[1, 65536]"}},
    {"td3: {actor_hidden: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n", RLT_ECONFIG,
     {"t.yaml:1:46: key 'td3.actor_hidden': has more than 8 entries"}},
    {"td3: {actor_hidden: []}\n", RLT_ECONFIG, {"t.yaml:1:21: key 'td3.actor_hidden': is an empty list"}},
    /* Enumerations. */
    {"device: gpu\n", RLT_ECONFIG, {"t.yaml:1:9: key 'device': 'gpu' is not one of auto|cpu|cuda|cuda:N"}},
    {"device: cuda:x\n", RLT_ECONFIG, {"t.yaml:1:9: key 'device': 'cuda:x' is not one of", "device index"}},
    {"device: \"cuda:\"\n", RLT_ECONFIG, {"key 'device': 'cuda:' is not one of"}},
    {"precision: fp8\n", RLT_ECONFIG, {"key 'precision': 'fp8' is not one of fp32|bf16|fp16|tf32"}},
    {"replay: {obs_dtype: fp8}\n", RLT_ECONFIG,
     {"t.yaml:1:21: key 'replay.obs_dtype': 'fp8' is not one of auto|fp32|fp16|bf16|uint8", "image observations only"}},
    {"replay:\n  obs_dtype: half\n", RLT_ECONFIG, {"t.yaml:2:14: key 'replay.obs_dtype': 'half' is not one of"}},
    /* Structure: aliases, anchors, tags, nesting, the top level, documents, syntax. */
    {"train:\n  batch_size: *x\n", RLT_ECONFIG, {"t.yaml:2:15: aliases (*x) are not allowed"}},
    {"td3: &h\n  gamma: 0.9\n", RLT_ECONFIG, {"t.yaml:1:6: anchors (&h) are not allowed"}},
    {"seed: !!int 5\n", RLT_ECONFIG, {"t.yaml:1:7: tags", "not allowed"}},
    {"td3: {actor_hidden: [[[[[[[[1]]]]]]]]}\n", RLT_ECONFIG, {"t.yaml:1:27: nesting is deeper than 8 levels"}},
    {"- 1\n- 2\n", RLT_ECONFIG, {"t.yaml:1:1: the top level must be a mapping of keys, not a list"}},
    {"hello\n", RLT_ECONFIG, {"t.yaml:1:1: the top level must be a mapping of keys, not a single value"}},
    {"seed: 1\n---\nseed: 2\n", RLT_ECONFIG, {"t.yaml:2:1: multiple documents"}},
    {"? [a]\n: 1\n", RLT_ECONFIG, {"t.yaml:1:3: a key must be a name"}},
    {"train:\n  batch_size: 64\n bad\n", RLT_ECONFIG, {"t.yaml:3:2: YAML syntax error", "indentation"}},
    {"train:\n\tbatch_size: 64\n", RLT_ECONFIG, {"t.yaml:2:1: YAML syntax error", "tabs"}},
    {"td3: {actor_hidden: [64, 64}\n", RLT_ECONFIG, {"t.yaml:1:", "YAML syntax error"}},
    {"out_dir: \"abc\n", RLT_ECONFIG, {"YAML syntax error", "quoted scalar"}},
};

static void check_bad_inputs(void) {
    rlt_config *c, *ref;
    CHECK(rlt_config_init(&c) == RLT_OK && rlt_config_init(&ref) == RLT_OK, "init");
    if (!c || !ref) return;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *b = &bad_cases[i];
        int rc = rlt_config_load_string(c, b->yaml, "t.yaml");
        const char *msg = rlt_config_errmsg(c), *which;
        CHECK(rc == b->status, "case %zu (%s): status %s, want %s: %s", i, b->yaml, rlt_status_name(rc),
              rlt_status_name(b->status), msg);
        for (int j = 0; j < 4 && b->needles[j]; j++)
            CHECK(strstr(msg, b->needles[j]) != NULL, "case %zu (%s): message lacks \"%s\": %s", i, b->yaml,
                  b->needles[j], msg);
        CHECK(same_values(c, ref, &which), "case %zu changed %s", i, which);
        CHECK(!strcmp(c->source, "defaults"), "case %zu changed the source to %s", i, c->source);
    }
    rlt_config_free(ref);
    rlt_config_free(c);
}

/* Keys before the bad one are parsed, but none of them may land. */
static void check_unchanged_after_failure(void) {
    rlt_config *c, *snap;
    const char *which;
    CHECK(rlt_config_init(&c) == RLT_OK && rlt_config_init(&snap) == RLT_OK, "init");
    if (!c || !snap) return;
    CHECK(rlt_config_load_string(c, "train: {batch_size: 64}\nout_dir: keep\n", "a.yaml") == RLT_OK, "first load");
    CHECK(rlt_config_load_string(snap, "train: {batch_size: 64}\nout_dir: keep\n", "a.yaml") == RLT_OK, "snapshot");
    int rc = rlt_config_load_string(c, "seed: 9\ntd3: {actor_hidden: [8, 8], gamma: 0.5}\ntrain: {batch_size: 32, "
                                       "eval_every: x}\n", "b.yaml");
    CHECK(rc == RLT_ECONFIG, "second load fails");
    CHECK(strstr(rlt_config_errmsg(c), "b.yaml:3:") && strstr(rlt_config_errmsg(c), "train.eval_every"), "%s",
          rlt_config_errmsg(c));
    CHECK(same_values(c, snap, &which), "failed load changed %s", which);
    CHECK(c->train.batch_size == 64 && c->seed == 1 && c->td3.actor_hidden.v[0] == 256, "values kept");
    CHECK(!strcmp(c->source, "a.yaml"), "source kept: %s", c->source);
    CHECK(rlt_config_set(c, "td3.actor_hidden=[8, 8, -1]") == RLT_ECONFIG, "bad set");
    CHECK(same_values(c, snap, &which), "failed set changed %s", which);
    /* A success clears the last error. */
    CHECK(rlt_config_set(c, "seed=3") == RLT_OK && rlt_config_errmsg(c)[0] == '\0', "error cleared");
    rlt_config_free(snap);
    rlt_config_free(c);
}

typedef struct set_case {
    const char *assign;
    int status;
    const char *needles[3];
} set_case;

static const set_case set_bad[] = {
    {"train.batch_size=abc", RLT_ECONFIG, {"--set train.batch_size=abc:1:18: key 'train.batch_size': expected an integer"}},
    {"nokey=1", RLT_ECONFIG, {"--set nokey=1:1:1: unknown key 'nokey'", "valid keys"}},
    {"train.bach_size=1", RLT_ECONFIG, {"unknown key 'train.bach_size'; did you mean 'train.batch_size'?"}},
    {"train.batch_size", RLT_ECONFIG, {"--set train.batch_size: missing '='", "key.path=value"}},
    {"train.batch_size=", RLT_ECONFIG, {"--set train.batch_size=:1:18: key 'train.batch_size': missing value"}},
    {"=5", RLT_ECONFIG, {"no key before '='"}},
    {"td3.gamma=2", RLT_ECONFIG, {"key 'td3.gamma': 2 is out of range", "[0, 1]"}},
    {"td3.actor_hidden=[64,64", RLT_ECONFIG, {"--set td3.actor_hidden=[64,64:", "YAML syntax error"}},
    {"td3.actor_hidden=64", RLT_ECONFIG, {"expected a list of integers"}},
    {"td3=5", RLT_ECONFIG, {"key 'td3': is a section"}},
    {"td3={gamma: 0.5, gamma: 0.6}", RLT_ECONFIG, {"key 'td3.gamma': duplicate key"}},
    {"out_dir=a: b", RLT_ECONFIG, {"key 'out_dir': expected a string, got a mapping", "double quotes"}},
    {"seed=*a", RLT_ECONFIG, {"aliases"}},
    {"seed=1\n---\n2", RLT_ECONFIG, {"control character 0x0a"}}, /* a raw newline ends nothing: refused */
};

static void check_set(void) {
    rlt_config *c, *ref;
    const char *which;
    CHECK(rlt_config_init(&c) == RLT_OK && rlt_config_init(&ref) == RLT_OK, "init");
    if (!c || !ref) return;
    CHECK(rlt_config_set(c, "td3.actor_hidden=[64,64]") == RLT_OK, "list: %s", rlt_config_errmsg(c));
    CHECK(c->td3.actor_hidden.n == 2 && c->td3.actor_hidden.v[0] == 64 && c->td3.actor_hidden.v[1] == 64, "list value");
    CHECK(rlt_config_set(c, "td3.critic_hidden=[32]") == RLT_OK && c->td3.critic_hidden.n == 1 &&
              c->td3.critic_hidden.v[0] == 32 && c->td3.critic_hidden.v[1] == 0, "shorter list replaces the whole list");
    CHECK(rlt_config_set(c, "train.batch_size=100") == RLT_OK && c->train.batch_size == 100, "int");
    CHECK(rlt_config_set(c, " td3.gamma = 0.95") == RLT_OK && c->td3.gamma == 0.95, "spaces around: %s",
          rlt_config_errmsg(c));
    CHECK(rlt_config_set(c, "device=cuda:1") == RLT_OK && c->device.kind == RLT_DEVICE_CUDA && c->device.index == 1,
          "cuda:N");
    CHECK(rlt_config_set(c, "device=auto") == RLT_OK && c->device.kind == RLT_DEVICE_AUTO && c->device.index == -1,
          "auto");
    CHECK(rlt_config_set(c, "out_dir=tmp_x/run one") == RLT_OK && !strcmp(c->out_dir, "tmp_x/run one"), "path");
    CHECK(rlt_config_set(c, "memory.budget_mb=1") == RLT_OK && c->memory.budget_mb == 1.0, "budget");
    CHECK(rlt_config_set(c, "td3={tau: 0.01, policy_delay: 4}") == RLT_OK && c->td3.tau == 0.01 &&
              c->td3.policy_delay == 4, "a section as a flow mapping: %s", rlt_config_errmsg(c));
    CHECK(rlt_config_set(c, "seed=12345678901234567890") == RLT_OK && c->seed == 12345678901234567890ull, "seed");
    CHECK(rlt_config_set(c, "env.name=MinAtar/Breakout-v1") == RLT_OK && !strcmp(c->env.name, "MinAtar/Breakout-v1"),
          "slash in a plain string");
    CHECK(rlt_config_set(c, "algo=\"dqn\"") == RLT_OK && !strcmp(c->algo, "dqn"), "quoted enum");
    CHECK(!strcmp(c->source, "defaults"), "--set does not change the source: %s", c->source);
    rlt_config_free(c);
    for (size_t i = 0; i < sizeof set_bad / sizeof set_bad[0]; i++) {
        const set_case *s = &set_bad[i];
        int rc = rlt_config_set(ref, s->assign);
        CHECK(rc == s->status, "set %zu (%s): status %s: %s", i, s->assign, rlt_status_name(rc), rlt_config_errmsg(ref));
        for (int j = 0; j < 3 && s->needles[j]; j++)
            CHECK(strstr(rlt_config_errmsg(ref), s->needles[j]) != NULL, "set %zu (%s): message lacks \"%s\": %s", i,
                  s->assign, s->needles[j], rlt_config_errmsg(ref));
    }
    rlt_config *fresh;
    CHECK(rlt_config_init(&fresh) == RLT_OK, "init");
    CHECK(fresh && same_values(ref, fresh, &which), "failed sets changed %s", which);
    rlt_config_free(fresh);
    rlt_config_free(ref);
}

static void check_validate(void) {
    static const struct {
        const char *set;
        const char *needle; /* NULL: validate passes */
    } cases[] = {
        {"precision=bf16", NULL}, /* the backend decides: the CPU computes bf16 configs in fp32 */
        {"precision=fp16", NULL},
        {"algo=dqn", NULL},
        {"dqn.eps_start=0.01", "is above dqn.eps_start"},
        {"train.grad_accum_steps=3", "3 does not divide train.batch_size (256)"},
        {"train.grad_accum_steps=2", NULL},
        {"device=cuda:3", NULL}, /* only the syntax is checked here; the backend says whether it exists */
        {"train.start_steps=50000", NULL}, /* more random steps than the run has is allowed */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlt_config *c;
        CHECK(rlt_config_init(&c) == RLT_OK, "init");
        if (!c) return;
        CHECK(rlt_config_set(c, cases[i].set) == RLT_OK, "%s parses: %s", cases[i].set, rlt_config_errmsg(c));
        int rc = rlt_config_validate(c);
        if (cases[i].needle)
            CHECK(rc == RLT_ECONFIG && strstr(rlt_config_errmsg(c), cases[i].needle), "%s: %s", cases[i].set,
                  rlt_config_errmsg(c));
        else
            CHECK(rc == RLT_OK, "%s validates: %s", cases[i].set, rlt_config_errmsg(c));
        rlt_config_free(c);
    }
    /* Fields written by code (not through the parser) are range-checked too. */
    rlt_config *c;
    CHECK(rlt_config_init(&c) == RLT_OK, "init");
    if (!c) return;
    c->td3.gamma = 2.0;
    CHECK(rlt_config_validate(c) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), "key 'td3.gamma'"), "%s",
          rlt_config_errmsg(c));
    c->td3.gamma = 0.99;
    c->td3.actor_hidden.n = 0;
    CHECK(rlt_config_validate(c) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), "td3.actor_hidden"), "%s",
          rlt_config_errmsg(c));
    rlt_config_free(c);
}

static void check_dump_roundtrip(void) {
    static char text[16384], again[16384];
    rlt_config *a, *b;
    const char *which;
    CHECK(rlt_config_init(&a) == RLT_OK && rlt_config_init(&b) == RLT_OK, "init");
    if (!a || !b) return;
    /* The defaults. */
    size_t need = rlt_config_dump(a, text, sizeof text);
    CHECK(need > 0 && need < sizeof text && strlen(text) == need, "dump length %zu", need);
    CHECK(strstr(text, "train:\n  total_steps: 20000\n") && strstr(text, "  actor_hidden: [256, 256]\n") &&
              strstr(text, "\nout_dir: \"runs/td3_pendulum\"\n"), "nested, flow lists: %s", text);
    CHECK(rlt_config_load_string(b, text, "dump.yaml") == RLT_OK, "defaults dump reads back: %s", rlt_config_errmsg(b));
    CHECK(same_values(a, b, &which), "defaults round trip differs at %s", which);
    /* Values that test the writer: doubles %.10g would round, awkward strings, a long list, a huge seed. */
    CHECK(rlt_config_load_string(a, full_yaml, "full.yaml") == RLT_OK, "full: %s", rlt_config_errmsg(a));
    const char *sets[] = {"td3.tau=0.30000000000000004", "td3.actor_lr=1.2345678901234567e-5",
                          "train.progress_every_s=1e-300", "memory.budget_mb=16777216",
                          "td3.actor_hidden=[1, 2, 3, 4, 5, 6, 7, 65536]",
                          "out_dir=\"q\\\"uote\\\\ back\\ttab: #hash \\u00e9 'single' true\"",
                          "env.name=\"123\"", "algo=dqn", "precision=bf16", "td3.gamma=0"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        CHECK(rlt_config_set(a, sets[i]) == RLT_OK, "%s: %s", sets[i], rlt_config_errmsg(a));
    CHECK(a->td3.tau == 0.30000000000000004 && a->td3.tau != 0.3, "tau bits");
    CHECK(!strcmp(a->out_dir, "q\"uote\\ back\ttab: #hash \xc3\xa9 'single' true"), "escapes: %s", a->out_dir);
    need = rlt_config_dump(a, text, sizeof text);
    CHECK(need < sizeof text, "fits");
    rlt_config *c;
    CHECK(rlt_config_init(&c) == RLT_OK, "init");
    if (c) {
        CHECK(rlt_config_load_string(c, text, "dump.yaml") == RLT_OK, "dump reads back: %s\n%s", rlt_config_errmsg(c), text);
        CHECK(same_values(a, c, &which), "round trip differs at %s:\n%s", which, text);
        rlt_config_dump(c, again, sizeof again);
        CHECK(!strcmp(text, again), "the dump of the reread config is the same text");
        rlt_config_free(c);
    }
    /* Truncation: the length it needs, always NUL-terminated. */
    char small[16];
    memset(small, 'x', sizeof small);
    CHECK(rlt_config_dump(a, small, sizeof small) == need && small[15] == '\0' && strlen(small) == 15, "truncated dump");
    CHECK(rlt_config_dump(a, NULL, 0) == need, "size query");
    rlt_config_free(b);
    rlt_config_free(a);
}

static int write_file(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(text, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static void check_files_and_size(const char *dir) {
    rlt_config *c;
    CHECK(rlt_config_init(&c) == RLT_OK, "init");
    if (!c || !dir) return;
    char path[600];
    /* Missing file and directory: RLT_EIO with the path and the system's reason. */
    snprintf(path, sizeof path, "%s/no_such.yaml", dir);
    CHECK(rlt_config_load_file(c, path) == RLT_EIO, "missing file");
    CHECK(strstr(rlt_config_errmsg(c), path) && strstr(rlt_config_errmsg(c), "No such file"), "%s", rlt_config_errmsg(c));
    CHECK(rlt_config_load_file(c, dir) == RLT_EIO, "a directory: %s", rlt_config_errmsg(c));
    /* A good file records its path; a bad one reports it. */
    snprintf(path, sizeof path, "%s/good.yaml", dir);
    CHECK(write_file(path, "seed: 7\n", 8) == 0, "write");
    CHECK(rlt_config_load_file(c, path) == RLT_OK && c->seed == 7 && !strcmp(c->source, path), "file: %s",
          rlt_config_errmsg(c));
    snprintf(path, sizeof path, "%s/bad.yaml", dir);
    CHECK(write_file(path, "algo: td3\ntrain:\n  bach_size: 64\n", 32) == 0, "write");
    char want[700];
    snprintf(want, sizeof want, "%s:3:3: unknown key 'train.bach_size'; did you mean 'train.batch_size'?", path);
    CHECK(rlt_config_load_file(c, path) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), want), "%s", rlt_config_errmsg(c));

    /* Exactly 1 MiB of comments is accepted; one byte more is refused, from a string and from a file. */
    size_t big = CFG_MAX_BYTES + 1;
    char *text = malloc(big + 1);
    CHECK(text != NULL, "malloc");
    if (text) {
        memset(text, ' ', big);
        for (size_t i = 0; i + 80 <= big; i += 80) text[i] = '#', text[i + 79] = '\n';
        memcpy(text, "seed: 5\n", 8);
        text[CFG_MAX_BYTES - 1] = '\n';
        text[CFG_MAX_BYTES] = '\0';
        CHECK(rlt_config_load_string(c, text, "mib.yaml") == RLT_OK && c->seed == 5, "1 MiB exactly: %s",
              rlt_config_errmsg(c));
        text[CFG_MAX_BYTES] = '\n';
        text[big] = '\0';
        memcpy(text, "seed: 6\n", 8);
        CHECK(rlt_config_load_string(c, text, "big.yaml") == RLT_ECONFIG && strstr(rlt_config_errmsg(c), "big.yaml") &&
                  strstr(rlt_config_errmsg(c), "1 MiB"), "oversized string: %s", rlt_config_errmsg(c));
        snprintf(path, sizeof path, "%s/big.yaml", dir);
        CHECK(write_file(path, text, big) == 0, "write big");
        CHECK(rlt_config_load_file(c, path) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), "1 MiB"), "oversized file: %s",
              rlt_config_errmsg(c));
        CHECK(c->seed == 5, "oversized inputs change nothing");
        free(text);
    }
    rlt_config_free(c);
}

/* Every shipped config loads and validates, so a renamed key cannot leave a stale file behind. */
static void check_configs_dir(void) {
    const char *dir_path = RLT_SOURCE_DIR "/configs";
    DIR *dir = opendir(dir_path);
    CHECK(dir != NULL, "cannot open %s", dir_path);
    if (!dir) return;
    int files = 0;
    struct dirent *d;
    while ((d = readdir(dir)) != NULL) {
        size_t n = strlen(d->d_name);
        if (n < 6 || strcmp(d->d_name + n - 5, ".yaml") != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir_path, d->d_name);
        rlt_config *c;
        CHECK(rlt_config_init(&c) == RLT_OK, "init");
        if (!c) break;
        CHECK(rlt_config_load_file(c, path) == RLT_OK, "%s: %s", d->d_name, rlt_config_errmsg(c));
        CHECK(rlt_config_validate(c) == RLT_OK, "%s validates: %s", d->d_name, rlt_config_errmsg(c));
        /* The dump of a shipped config reads back to the same values too. */
        static char text[16384];
        rlt_config *back;
        const char *which;
        rlt_config_dump(c, text, sizeof text);
        CHECK(rlt_config_init(&back) == RLT_OK && rlt_config_load_string(back, text, "dump") == RLT_OK &&
                  same_values(c, back, &which), "%s round trip", d->d_name);
        rlt_config_free(back);
        rlt_config_free(c);
        files++;
    }
    closedir(dir);
    CHECK(files >= 2, "found %d config files in %s, want at least 2", files, dir_path);
    printf("configs/: %d files load and validate\n", files);
}

static void check_shipped_values(void) {
    char path[1024];
    rlt_config *c;
    CHECK(rlt_config_init(&c) == RLT_OK, "init");
    if (!c) return;
    snprintf(path, sizeof path, "%s/configs/td3_lowmem.yaml", RLT_SOURCE_DIR);
    CHECK(rlt_config_load_file(c, path) == RLT_OK, "%s", rlt_config_errmsg(c));
    CHECK(c->train.batch_size == 64 && c->td3.actor_hidden.v[0] == 64 && c->td3.critic_hidden.v[1] == 64 &&
              c->replay.capacity == 20000 && c->memory.budget_mb == 16 && !strcmp(c->out_dir, "runs/td3_lowmem") &&
              c->td3.actor_lr == 3e-4 && c->td3.tau == 0.005, "td3_lowmem values");
    rlt_config_free(c);
    CHECK(rlt_config_init(&c) == RLT_OK, "init");
    if (!c) return;
    snprintf(path, sizeof path, "%s/configs/td3_pendulum.yaml", RLT_SOURCE_DIR);
    rlt_config *d;
    const char *which;
    CHECK(rlt_config_init(&d) == RLT_OK, "init");
    CHECK(rlt_config_load_file(c, path) == RLT_OK, "%s", rlt_config_errmsg(c));
    CHECK(d && same_values(c, d, &which), "td3_pendulum.yaml equals the built-in defaults (differs at %s)", which);
    rlt_config_free(d);
    rlt_config_free(c);
}

/* Allocation failures and NULL arguments give a clean status, never a crash. */
static void check_failures_are_clean(const char *dir) {
    rlt_config *c = (rlt_config *)&c;
    rlt_mem_fail_after(0);
    CHECK(rlt_config_init(&c) == RLT_ENOMEM && c == NULL, "init under allocation failure");
    rlt_mem_fail_after(-1);
    CHECK(rlt_config_init(&c) == RLT_OK, "init");
    if (!c || !dir) return;
    char path[600];
    snprintf(path, sizeof path, "%s/alloc.yaml", dir);
    CHECK(write_file(path, "seed: 11\n", 9) == 0, "write");
    rlt_mem_fail_after(0);
    CHECK(rlt_config_load_file(c, path) == RLT_ENOMEM && strstr(rlt_config_errmsg(c), path), "load_file under "
          "allocation failure: %s", rlt_config_errmsg(c));
    rlt_mem_fail_after(-1);
    CHECK(c->seed == 1, "nothing loaded");
    CHECK(rlt_config_load_file(c, path) == RLT_OK && c->seed == 11, "loads once memory is back");
    char buf[8] = "x";
    CHECK(rlt_config_init(NULL) == RLT_EINVAL, "init(NULL)");
    CHECK(rlt_config_load_string(NULL, "seed: 1", "n") == RLT_EINVAL, "NULL handle");
    CHECK(rlt_config_load_string(c, NULL, "n") == RLT_EINVAL, "NULL text");
    CHECK(rlt_config_load_file(c, NULL) == RLT_EINVAL, "NULL path");
    CHECK(rlt_config_set(c, NULL) == RLT_EINVAL && rlt_config_validate(NULL) == RLT_EINVAL, "NULL set / validate");
    CHECK(rlt_config_dump(NULL, buf, sizeof buf) == 0 && buf[0] == '\0', "dump(NULL)");
    CHECK(rlt_config_errmsg(NULL) != NULL, "errmsg(NULL)");
    CHECK(rlt_config_load_string(c, "seed: 12", NULL) == RLT_OK && !strcmp(c->source, "<string>"), "unnamed string");
    rlt_config_free(NULL);
    rlt_config_free(c);
}

/* A host program with a decimal-comma locale still reads and writes '.' (only where such a locale is
 * installed; minimal containers have none). */
static void check_comma_locale(void) {
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE", "fr_FR"};
    const char *got = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !got; i++) got = setlocale(LC_NUMERIC, names[i]);
    if (!got) {
        printf("no decimal-comma locale installed; the locale check did not run\n");
        return;
    }
    rlt_config *c;
    static char text[16384];
    CHECK(rlt_config_init(&c) == RLT_OK, "init");
    if (c) {
        CHECK(rlt_config_load_string(c, "td3: {gamma: 0.5, tau: 1.5e-3}\n", "l.yaml") == RLT_OK && c->td3.gamma == 0.5 &&
                  c->td3.tau == 1.5e-3, "decimal point under %s: %s", got, rlt_config_errmsg(c));
        rlt_config_dump(c, text, sizeof text);
        CHECK(strstr(text, "gamma: 0.5\n") && strstr(text, "tau: 0.0015\n"), "dump under %s:\n%s", got, text);
        rlt_config_free(c);
    }
    setlocale(LC_NUMERIC, "C");
}

/* rlt_config_get and rlt_config_clone. */
static void check_get_clone(void) {
    rlt_config *c;
    rlt_config_init(&c);
    rlt_config_set(c, "td3.actor_hidden=[64, 32]");
    char buf[128];
    CHECK(rlt_config_get(c, "train.batch_size", buf, sizeof buf) == 3 && !strcmp(buf, "256"), "get batch: %s", buf);
    rlt_config_get(c, "td3.actor_hidden", buf, sizeof buf);
    CHECK(!strcmp(buf, "[64, 32]"), "get list: %s", buf);
    CHECK(rlt_config_get(c, "train.bach_size", buf, sizeof buf) == 0 && strstr(rlt_config_errmsg(c), "train.batch_size"),
          "unknown key suggests: %s", rlt_config_errmsg(c));
    rlt_config *d = rlt_config_clone(c);
    CHECK(d && d->td3.actor_hidden.n == 2 && d->td3.actor_hidden.v[1] == 32, "clone copies values");
    rlt_config_set(d, "train.batch_size=7");
    CHECK(c->train.batch_size == 256, "clone is independent");
    rlt_config_free(d);
    rlt_config_free(c);
}

/* ---- enum keys ----------------------------------------------------------------------------------------- */

/* The enum the config holds for key, read from the typed field itself (not through the schema's offset). */
static int32_t stored_enum(const rlt_config *c, const char *key) {
    if (!strcmp(key, "precision")) return (int32_t)c->precision;
    if (!strcmp(key, "replay.location")) return (int32_t)c->replay.location;
    if (!strcmp(key, "replay.obs_dtype")) return (int32_t)c->replay.obs_dtype;
    if (!strcmp(key, "dqn.loss")) return (int32_t)c->dqn.loss;
    if (!strcmp(key, "memory.on_oom")) return (int32_t)c->memory.on_oom;
    if (!strcmp(key, "network.conv")) return (int32_t)c->network.conv.preset;
    return -100;
}

typedef struct enum_case {
    const char *key, *text; /* a valid value, as a config writes it */
    int32_t value;          /* the enum it is stored as */
} enum_case;

static const enum_case enum_cases[] = {
    {"precision", "fp32", RLT_PRECISION_FP32},
    {"precision", "bf16", RLT_PRECISION_BF16},
    {"precision", "fp16", RLT_PRECISION_FP16},
    {"precision", "tf32", RLT_PRECISION_TF32},
    {"replay.location", "auto", RLT_REPLAY_LOCATION_AUTO},
    {"replay.location", "device", RLT_REPLAY_LOCATION_DEVICE},
    {"replay.location", "host", RLT_REPLAY_LOCATION_HOST},
    {"replay.obs_dtype", "auto", RLT_OBS_DTYPE_AUTO},
    {"replay.obs_dtype", "fp32", RLT_OBS_DTYPE_FP32},
    {"replay.obs_dtype", "fp16", RLT_OBS_DTYPE_FP16},
    {"replay.obs_dtype", "bf16", RLT_OBS_DTYPE_BF16},
    {"replay.obs_dtype", "uint8", RLT_OBS_DTYPE_UINT8},
    {"dqn.loss", "huber", RLT_DQN_LOSS_HUBER},
    {"dqn.loss", "mse", RLT_DQN_LOSS_MSE},
    {"memory.on_oom", "fail", RLT_ON_OOM_FAIL},
    {"memory.on_oom", "cpu", RLT_ON_OOM_CPU},
    {"network.conv", "none", RLT_CONV_PRESET_NONE},
    {"network.conv", "nature", RLT_CONV_PRESET_NATURE},
    {"network.conv", "minatar", RLT_CONV_PRESET_MINATAR},
};

typedef struct device_case {
    const char *text, *dumped; /* dumped: how the dump writes it back */
    rlt_device_kind kind;
    int32_t index;
} device_case;

static const device_case device_cases[] = {
    {"auto", "auto", RLT_DEVICE_AUTO, -1},
    {"cpu", "cpu", RLT_DEVICE_CPU, -1},
    {"cuda", "cuda", RLT_DEVICE_CUDA, -1}, /* GPU 0, but written back as given */
    {"cuda:0", "cuda:0", RLT_DEVICE_CUDA, 0},
    {"cuda:3", "cuda:3", RLT_DEVICE_CUDA, 3},
    {"cuda:999999", "cuda:999999", RLT_DEVICE_CUDA, 999999},
    {"cuda:007", "cuda:7", RLT_DEVICE_CUDA, 7}, /* the index is a number: leading zeros are not kept */
};

/* "leaf: text" on a line of its own, indented under its section, as the dump writes it. */
static int dump_has(const char *dump, const char *key, const char *text) {
    char line[160];
    const char *leaf = strrchr(key, '.');
    snprintf(line, sizeof line, "\n%s%s: %s\n", leaf ? "  " : "", leaf ? leaf + 1 : key, text);
    return strstr(dump, line) != NULL;
}

/* The dump of c reads back to the same values, and the reread config dumps to the same bytes. */
static void check_dump_stable(const rlt_config *c, const char *what) {
    static char text[16384], again[16384];
    rlt_config *d;
    const char *which;
    rlt_config_dump(c, text, sizeof text);
    CHECK(rlt_config_init(&d) == RLT_OK, "init");
    if (!d) return;
    CHECK(rlt_config_load_string(d, text, "dump.yaml") == RLT_OK, "%s: the dump reads back: %s", what,
          rlt_config_errmsg(d));
    CHECK(same_values(c, d, &which), "%s: round trip differs at %s", what, which);
    rlt_config_dump(d, again, sizeof again);
    CHECK(!strcmp(text, again), "%s: the dump of the reread config differs", what);
    rlt_config_free(d);
}

static void check_enum_values(void) {
    static char dump[16384];
    char buf[64], set[128], yaml[160];
    for (size_t i = 0; i < sizeof enum_cases / sizeof enum_cases[0]; i++) {
        const enum_case *ec = &enum_cases[i];
        rlt_config *c, *f;
        CHECK(rlt_config_init(&c) == RLT_OK && rlt_config_init(&f) == RLT_OK, "init");
        if (!c || !f) return;
        snprintf(set, sizeof set, "%s=%s", ec->key, ec->text);
        CHECK(rlt_config_set(c, set) == RLT_OK, "%s: %s", set, rlt_config_errmsg(c));
        CHECK(stored_enum(c, ec->key) == ec->value, "%s stores %d, want %d", set, (int)stored_enum(c, ec->key),
              (int)ec->value);
        CHECK(rlt_config_get(c, ec->key, buf, sizeof buf) == strlen(ec->text) && !strcmp(buf, ec->text),
              "get %s: '%s', want '%s'", ec->key, buf, ec->text);
        rlt_config_dump(c, dump, sizeof dump);
        CHECK(dump_has(dump, ec->key, ec->text), "the dump writes %s as '%s':\n%s", ec->key, ec->text, dump);
        CHECK(rlt_config_validate(c) == RLT_OK, "%s validates: %s", set, rlt_config_errmsg(c));
        check_dump_stable(c, set);
        /* The nested file form stores the same value. */
        const char *dot = strchr(ec->key, '.');
        if (dot) snprintf(yaml, sizeof yaml, "%.*s:\n  %s: %s\n", (int)(dot - ec->key), ec->key, dot + 1, ec->text);
        else snprintf(yaml, sizeof yaml, "%s: %s\n", ec->key, ec->text);
        CHECK(rlt_config_load_string(f, yaml, "e.yaml") == RLT_OK && stored_enum(f, ec->key) == ec->value,
              "file form of %s: %s", set, rlt_config_errmsg(f));
        rlt_config_free(f);
        rlt_config_free(c);
    }
    for (size_t i = 0; i < sizeof device_cases / sizeof device_cases[0]; i++) {
        const device_case *dc = &device_cases[i];
        rlt_config *c;
        CHECK(rlt_config_init(&c) == RLT_OK, "init");
        if (!c) return;
        snprintf(yaml, sizeof yaml, "device: %s\n", dc->text);
        CHECK(rlt_config_load_string(c, yaml, "d.yaml") == RLT_OK, "%s: %s", yaml, rlt_config_errmsg(c));
        CHECK(c->device.kind == dc->kind && c->device.index == dc->index, "device %s stores %d:%d", dc->text,
              (int)c->device.kind, (int)c->device.index);
        rlt_config_get(c, "device", buf, sizeof buf);
        CHECK(!strcmp(buf, dc->dumped), "get device: '%s', want '%s'", buf, dc->dumped);
        rlt_config_dump(c, dump, sizeof dump);
        CHECK(dump_has(dump, "device", dc->dumped), "the dump writes device %s as %s", dc->text, dc->dumped);
        check_dump_stable(c, dc->text);
        rlt_config_free(c);
    }
    /* Every enum key at once, away from its default: the lines the dump writes (config.yaml, checkpoints). */
    rlt_config *c;
    CHECK(rlt_config_init(&c) == RLT_OK, "init");
    if (!c) return;
    CHECK(rlt_config_load_string(c, "device: cuda:2\nprecision: bf16\nreplay: {location: host, obs_dtype: fp16}\n"
                                    "dqn: {loss: mse}\nnetwork: {conv: nature}\nmemory: {on_oom: cpu}\n", "all.yaml") == RLT_OK,
          "all: %s", rlt_config_errmsg(c));
    rlt_config_dump(c, dump, sizeof dump);
    CHECK(!strncmp(dump, "algo: td3\nenv:\n", 15) && strstr(dump, "\ndevice: cuda:2\ndevices: []\nprecision: bf16\ntrain:\n") &&
              strstr(dump, "\nreplay:\n  capacity: 100000\n  location: host\n  obs_dtype: fp16\ntd3:\n") &&
              strstr(dump, "\n  double: true\n  loss: mse\n  target_update_every: 500\n") &&
              strstr(dump, "\n  conv: nature\nmemory:\n") && strstr(dump, "\n  on_oom: cpu\n  warn_free_mb: 256\ncheckpoint:\n"),
          "enum lines of the dump:\n%s", dump);
    check_dump_stable(c, "all enums");
    rlt_config_free(c);
    /* The preset names messages list are the table's. */
    char names[64];
    snprintf(names, sizeof names, "%s|%s|%s", config_conv_preset_name(RLT_CONV_PRESET_NONE),
             config_conv_preset_name(RLT_CONV_PRESET_NATURE), config_conv_preset_name(RLT_CONV_PRESET_MINATAR));
    CHECK(!strcmp(names, CONV_PRESET_NAMES) && !strcmp(config_conv_preset_name(RLT_CONV_PRESET_EXPLICIT), ""),
          "CONV_PRESET_NAMES is %s, the table says %s", CONV_PRESET_NAMES, names);
    CHECK(!strcmp(config_precision_name(RLT_PRECISION_BF16), "bf16") &&
              !strcmp(config_obs_dtype_name(RLT_OBS_DTYPE_UINT8), "uint8") &&
              !strcmp(config_precision_name((rlt_precision)7), "?"), "name functions");
}

typedef struct enum_bad {
    const char *key, *bad;
    const char *choices; /* as the message lists them */
} enum_bad;

static const enum_bad enum_bads[] = {
    {"device", "gpu", "auto|cpu|cuda|cuda:N"},
    {"device", "CPU", "auto|cpu|cuda|cuda:N"},
    {"device", "cuda:x", "auto|cpu|cuda|cuda:N"},
    {"device", "cuda:-1", "auto|cpu|cuda|cuda:N"},
    {"device", "cuda:1x", "auto|cpu|cuda|cuda:N"},
    {"device", "cuda:1234567", "auto|cpu|cuda|cuda:N"},
    {"device", "cudaa", "auto|cpu|cuda|cuda:N"},
    {"precision", "fp64", "fp32|bf16|fp16|tf32"},
    {"precision", "FP32", "fp32|bf16|fp16|tf32"},
    {"replay.location", "hots", "auto|device|host"},
    {"replay.location", "1", "auto|device|host"},
    {"replay.obs_dtype", "int8", "auto|fp32|fp16|bf16|uint8"},
    {"dqn.loss", "l1", "huber|mse"},
    {"memory.on_oom", "true", "fail|cpu"},
    {"memory.on_oom", "gpu", "fail|cpu"},
};

static void check_enum_errors(const char *dir) {
    rlt_config *c, *ref;
    const char *which;
    char yaml[200], want[800], set[160];
    CHECK(rlt_config_init(&c) == RLT_OK && rlt_config_init(&ref) == RLT_OK, "init");
    if (!c || !ref) return;
    for (size_t i = 0; i < sizeof enum_bads / sizeof enum_bads[0]; i++) {
        const enum_bad *b = &enum_bads[i];
        /* In a file, on line 3 under its section: file:line:column, the key, the value and the allowed values. */
        const char *dot = strchr(b->key, '.');
        size_t col;
        if (dot) {
            snprintf(yaml, sizeof yaml, "seed: 3\n%.*s:\n  %s: %s\n", (int)(dot - b->key), b->key, dot + 1, b->bad);
            col = 2 + strlen(dot + 1) + 2 + 1;
        } else {
            snprintf(yaml, sizeof yaml, "seed: 3\n\n%s: %s\n", b->key, b->bad);
            col = strlen(b->key) + 2 + 1;
        }
        snprintf(want, sizeof want, "e.yaml:3:%zu: key '%s': '%s' is not one of %s; use one of %s%s (", col, b->key,
                 b->bad, b->choices, b->choices, strstr(b->choices, ":N") ? ", where N is a device index like 0" : "");
        CHECK(rlt_config_load_string(c, yaml, "e.yaml") == RLT_ECONFIG && strstr(rlt_config_errmsg(c), want),
              "%s=%s in a file:\n  got  %s\n  want %s", b->key, b->bad, rlt_config_errmsg(c), want);
        CHECK(same_values(c, ref, &which), "%s=%s changed %s", b->key, b->bad, which);
        /* From --set: the column counts from the start of the assignment. */
        snprintf(set, sizeof set, "%s=%s", b->key, b->bad);
        snprintf(want, sizeof want, "--set %s:1:%zu: key '%s': '%s' is not one of %s", set, strlen(b->key) + 2, b->key,
                 b->bad, b->choices);
        CHECK(rlt_config_set(c, set) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), want), "--set %s:\n  got  %s\n  want %s",
              set, rlt_config_errmsg(c), want);
        CHECK(same_values(c, ref, &which), "--set %s changed %s", set, which);
    }
    /* A preset that does not exist, and a value of the wrong shape. */
    CHECK(rlt_config_load_string(c, "network:\n  conv: natur\n", "e.yaml") == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(c), "e.yaml:2:9: key 'network.conv': 'natur' is not one of the presets "
                                            "none|nature|minatar"), "preset: %s", rlt_config_errmsg(c));
    CHECK(rlt_config_load_string(c, "dqn:\n  loss: [huber]\n", "e.yaml") == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(c), "e.yaml:2:9: key 'dqn.loss': expected one of huber|mse, got a list"),
          "list for an enum: %s", rlt_config_errmsg(c));
    /* From a file on disk, as rltrain --config reads it. */
    char path[600];
    snprintf(path, sizeof path, "%s/enum.yaml", dir ? dir : ".");
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL, "write %s", path);
    if (fp) {
        fputs("algo: dqn\nprecision: half\n", fp);
        fclose(fp);
        snprintf(want, sizeof want, "%s:2:12: key 'precision': 'half' is not one of fp32|bf16|fp16|tf32", path);
        CHECK(rlt_config_load_file(c, path) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), want), "file: %s",
              rlt_config_errmsg(c));
        CHECK(same_values(c, ref, &which), "failed file changed %s", which);
    }
    /* Values written by code that no name reads to are refused by validate. */
    c->precision = (rlt_precision)7;
    CHECK(rlt_config_validate(c) == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(c), "key 'precision': holds 7, which is not one of fp32|bf16|fp16|tf32"),
          "stored precision 7: %s", rlt_config_errmsg(c));
    c->precision = RLT_PRECISION_FP32;
    c->memory.on_oom = (rlt_on_oom)-1;
    CHECK(rlt_config_validate(c) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), "key 'memory.on_oom': holds -1"),
          "stored on_oom -1: %s", rlt_config_errmsg(c));
    c->memory.on_oom = RLT_ON_OOM_FAIL;
    c->device = (rlt_device){RLT_DEVICE_CPU, 2};
    CHECK(rlt_config_validate(c) == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(c), "key 'device': holds kind 1, index 2, which is not one of auto|cpu|cuda|cuda:N"),
          "cpu with an index: %s", rlt_config_errmsg(c));
    c->device = (rlt_device){RLT_DEVICE_CUDA, 1000000};
    CHECK(rlt_config_validate(c) == RLT_ECONFIG, "cuda:1000000 written by code");
    c->device = (rlt_device){RLT_DEVICE_CUDA, -1};
    c->network.conv.preset = (rlt_conv_preset)9;
    CHECK(rlt_config_validate(c) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), "key 'network.conv': holds preset 9"),
          "stored preset 9: %s", rlt_config_errmsg(c));
    c->network.conv.preset = RLT_CONV_PRESET_NONE;
    CHECK(rlt_config_validate(c) == RLT_OK, "restored: %s", rlt_config_errmsg(c));
    rlt_config_free(ref);
    rlt_config_free(c);
}

/* Issue 37: a NULL buffer asks for the length (no crash); control characters in a --set value are refused and
 * shown escaped; a YAML escape of a newline in a string key is refused (an out_dir "a\nb" is not a path). */
static void check_null_and_control(void) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    size_t need = rlt_config_dump(cfg, NULL, 0), need2 = rlt_config_dump(cfg, NULL, 100);
    CHECK(need > 100 && need == need2, "rlt_config_dump(NULL) returns the length it needs: %zu, %zu", need, need2);
    CHECK(rlt_config_get(cfg, "seed", NULL, 16) > 0, "rlt_config_get(NULL) returns the length");
    CHECK(rlt_config_set(cfg, "out_dir=/tmp/a\nb") == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(cfg), "--set out_dir=/tmp/a\\x0ab") &&
              strstr(rlt_config_errmsg(cfg), "control character 0x0a") && !strchr(rlt_config_errmsg(cfg), '\n'),
          "a raw newline in --set is refused, shown escaped: %s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_set(cfg, "out_dir=\"/tmp/a\\nb\"") == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(cfg), "key 'out_dir': contains the control character 0x0a"),
          "a YAML \\n in out_dir is refused: %s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_set(cfg, "env.name=\x1b[31m") == RLT_ECONFIG && !strchr(rlt_config_errmsg(cfg), 0x1b),
          "an escape sequence is refused and not echoed: %s", rlt_config_errmsg(cfg));
    char out[64];
    rlt_config_get(cfg, "out_dir", out, sizeof out);
    CHECK(!strcmp(out, "\"runs/td3_pendulum\""), "the refused values changed nothing: %s", out);
    rlt_config_free(cfg);
}

int main(void) {
    check_null_and_control();
    check_get_clone();
    const char *dir = test_tmpdir("config");
    CHECK(dir != NULL, "tmpdir");
    check_schema();
    check_defaults();
    check_full_config();
    check_bad_inputs();
    check_unchanged_after_failure();
    check_set();
    check_validate();
    check_dump_roundtrip();
    check_files_and_size(dir);
    check_failures_are_clean(dir);
    check_configs_dir();
    check_comma_locale();
    check_shipped_values();
    check_enum_values();
    check_enum_errors(dir);
    return test_summary("test_config");
}
