/* test_conv_list.c: network.conv as an explicit list of layers.
 * - flow and block lists parse into the layers (stride and pad defaulting to 1 and 0), replace the previous
 *   value whole, and the dump reads back to the same bytes; presets dump as their names; the list in
 *   configs/dqn_minatar_breakout.yaml's comment is its preset;
 * - every error names file:line:column and the key (network.conv[1].kernel), and a failed load changes
 *   nothing; --set takes presets and flow lists, and explains that a list is set whole;
 * - validate refuses values written by code that the parser would not have made;
 * - the list equal to the nature preset gives the same plan bytes, parameters and first Q values as the
 *   preset (same seed), and a checkpoint of one loads into the other; a list of the same sizes but another
 *   stride and padding is refused by the checkpoint's network description, which names both;
 * - a custom two-layer list with padding trains DQN updates on the built-in MinAtar Breakout on the CPU:
 *   the loss is finite and the parameters change; the saved config.yaml reloads to the same network and
 *   the run's final.ckpt resumes under it;
 * - a stack the image is too small for, and a torso on vector observations, fail with a clear message;
 * - eight layers (the most) build and act: the backend's conv slots hold both networks'. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../agents/dqn.h"
#include "agent.h"
#include "config.h"
#include "config_conv.h"
#include "harness.h"

static rlt_config *new_config(void) {
    rlt_config *c = NULL;
    CHECK(rlt_config_init(&c) == RLT_OK && c, "config init");
    return c;
}

static int same_conv(const rlt_conv_list *a, const rlt_conv_list *b) { return memcmp(a, b, sizeof *a) == 0; }

static void check_layer(const rlt_conv_layer *l, int out, int kernel, int stride, int pad, const char *what) {
    CHECK(l->out == out && l->kernel == kernel && l->stride == stride && l->pad == pad,
          "%s: got {out %d, kernel %d, stride %d, pad %d}, want {%d, %d, %d, %d}", what, (int)l->out, (int)l->kernel,
          (int)l->stride, (int)l->pad, out, kernel, stride, pad);
}

/* ---- parsing ---------------------------------------------------------------------------------------- */

static void check_parse(void) {
    rlt_config *c = new_config();
    if (!c) return;
    CHECK(c->network.conv.n == 0 && c->network.conv.preset == RLT_CONV_PRESET_NONE, "default is none");
    const char *flow = "network:\n  conv: [{out: 32, kernel: 8, stride: 4}, {out: 64, kernel: 4, stride: 2},"
                       " {out: 64, kernel: 3, stride: 1}]\n  hidden: [512]\n";
    CHECK(rlt_config_load_string(c, flow, "flow.yaml") == RLT_OK, "flow: %s", rlt_config_errmsg(c));
    CHECK(c->network.conv.n == 3 && c->network.conv.preset == RLT_CONV_PRESET_EXPLICIT, "flow list: %d layers, preset %d",
          (int)c->network.conv.n, (int)c->network.conv.preset);
    check_layer(&c->network.conv.layer[0], 32, 8, 4, 0, "flow [0]");
    check_layer(&c->network.conv.layer[1], 64, 4, 2, 0, "flow [1]");
    check_layer(&c->network.conv.layer[2], 64, 3, 1, 0, "flow [2]");
    CHECK(c->network.hidden.n == 1 && c->network.hidden.v[0] == 512, "hidden beside it");
    const char *block = "network:\n"
                        "  conv:\n"
                        "    - out: 16\n"
                        "      kernel: 5\n"
                        "      pad: 2\n"
                        "    - {out: 8, kernel: 3, stride: 2, pad: 1}\n";
    CHECK(rlt_config_load_string(c, block, "block.yaml") == RLT_OK, "block: %s", rlt_config_errmsg(c));
    CHECK(c->network.conv.n == 2, "block list replaces the flow list whole: %d layers", (int)c->network.conv.n);
    check_layer(&c->network.conv.layer[0], 16, 5, 1, 2, "block [0], stride defaulted");
    check_layer(&c->network.conv.layer[1], 8, 3, 2, 1, "block [1]");
    rlt_conv_layer zero;
    memset(&zero, 0, sizeof zero);
    CHECK(!memcmp(&c->network.conv.layer[2], &zero, sizeof zero), "unused layers are zero (equal lists, equal bytes)");
    CHECK(rlt_config_validate(c) == RLT_OK, "validate: %s", rlt_config_errmsg(c));

    /* The dump writes the list in flow style, and it reads back to the same bytes and the same text. */
    static char text[16384], again[16384];
    rlt_config_dump(c, text, sizeof text);
    CHECK(strstr(text, "\n  conv: [{out: 16, kernel: 5, stride: 1, pad: 2}, {out: 8, kernel: 3, stride: 2, pad: 1}]\n"),
          "dumped list: %s", text);
    rlt_config *d = new_config();
    if (d) {
        CHECK(rlt_config_load_string(d, text, "dump.yaml") == RLT_OK, "dump reads back: %s", rlt_config_errmsg(d));
        CHECK(same_conv(&c->network.conv, &d->network.conv), "list round trip");
        rlt_config_dump(d, again, sizeof again);
        CHECK(!strcmp(text, again), "the dump of the reread config is the same text");
        /* A preset dumps as its name and reads back to the same bytes. */
        CHECK(rlt_config_set(d, "network.conv=nature") == RLT_OK, "--set preset: %s", rlt_config_errmsg(d));
        CHECK(d->network.conv.n == 3 && d->network.conv.preset == RLT_CONV_PRESET_NATURE, "preset stored with its layers");
        check_layer(&d->network.conv.layer[1], 64, 4, 2, 0, "nature [1]");
        char val[512];
        rlt_config_get(d, "network.conv", val, sizeof val);
        CHECK(!strcmp(val, "nature"), "get: %s", val);
        rlt_config_dump(d, text, sizeof text);
        CHECK(strstr(text, "\n  conv: nature\n"), "dumped preset: %s", text);
        CHECK(rlt_config_load_string(c, text, "dump2.yaml") == RLT_OK && same_conv(&c->network.conv, &d->network.conv),
              "preset round trip: %s", rlt_config_errmsg(c));
        /* --set with a flow list, then the canonical layers of a preset and of the same list agree. */
        CHECK(rlt_config_set(d, "network.conv=[{out: 32, kernel: 8, stride: 4}, {out: 64, kernel: 4, stride: 2}, "
                                "{out: 64, kernel: 3}]") == RLT_OK, "--set list: %s", rlt_config_errmsg(d));
        CHECK(d->network.conv.n == 3 && d->network.conv.preset == RLT_CONV_PRESET_EXPLICIT, "--set list stored");
        char la[512], lb[512];
        rlt_text ta = {la, sizeof la, 0}, tb = {lb, sizeof lb, 0};
        config_conv_format_layers(&ta, &c->network.conv);
        config_conv_format_layers(&tb, &d->network.conv);
        CHECK(!strcmp(la, lb), "nature and its list have one layer text: %s vs %s", la, lb);
        CHECK(rlt_config_set(d, "network.conv=none") == RLT_OK && d->network.conv.n == 0, "back to none");
        rlt_config_free(d);
    }
    rlt_config_free(c);
}

/* configs/dqn_minatar_breakout.yaml shows its preset as a list in a comment: that list is the preset. */
static void check_shipped_comment(void) {
    char path[600], line[512], list[512] = "";
    snprintf(path, sizeof path, "%s/configs/dqn_minatar_breakout.yaml", RLT_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        const char *at = strstr(line, "# conv: [");
        if (at) snprintf(list, sizeof list, "%s", at + strlen("# conv: "));
    }
    fclose(f);
    list[strcspn(list, "\r\n")] = '\0';
    CHECK(list[0] == '[', "the config has a '# conv: [...]' comment");
    rlt_config *a = new_config(), *b = new_config();
    if (!a || !b) return;
    char set[600];
    snprintf(set, sizeof set, "network.conv=%s", list);
    CHECK(rlt_config_load_file(a, path) == RLT_OK && rlt_config_load_file(b, path) == RLT_OK, "load: %s",
          rlt_config_errmsg(a));
    CHECK(a->network.conv.preset == RLT_CONV_PRESET_MINATAR, "the file uses the preset");
    CHECK(rlt_config_set(b, set) == RLT_OK, "%s: %s", set, rlt_config_errmsg(b));
    CHECK(b->network.conv.preset == RLT_CONV_PRESET_EXPLICIT && a->network.conv.n == b->network.conv.n &&
              !memcmp(a->network.conv.layer, b->network.conv.layer, sizeof a->network.conv.layer),
          "the commented list (%s) holds the preset's layers", list);
    rlt_config_free(a);
    rlt_config_free(b);
}

typedef struct bad_case {
    const char *yaml;
    const char *needles[3];
} bad_case;

static const bad_case bad_cases[] = {
    {"network:\n  conv:\n    - {out: 32, kernel: 8, stride: 4}\n    - {out: 64, kernel: x, stride: 2}\n",
     {"c.yaml:4:25: key 'network.conv[1].kernel': must be an integer in [1, 1024] (got \"x\")", "the square kernel's size in pixels"}},
    {"network:\n  conv: [{out: 32, kernel: 8, strid: 4}]\n",
     {"c.yaml:2:31: key 'network.conv[0].strid': unknown key; expected out, kernel, stride, pad"}},
    {"network:\n  conv:\n    - out: 32\n      stride: 4\n",
     {"c.yaml:3:7: key 'network.conv[0]': is missing 'kernel'", "stride (default 1) and pad (default 0)"}},
    {"network:\n  conv: [{kernel: 3}]\n", {"c.yaml:2:10: key 'network.conv[0]': is missing 'out'"}},
    {"network:\n  conv: [{out: 8, kernel: 3, stride: 0}]\n",
     {"c.yaml:2:38: key 'network.conv[0].stride': must be an integer in [1, 1024] (got \"0\")"}},
    {"network:\n  conv: [{out: 8, kernel: 3, pad: -1}]\n",
     {"c.yaml:2:35: key 'network.conv[0].pad': must be an integer in [0, 1024] (got \"-1\")"}},
    {"network:\n  conv: [{out: 0, kernel: 3}]\n",
     {"c.yaml:2:16: key 'network.conv[0].out': must be an integer in [1, 65536] (got \"0\")"}},
    {"network:\n  conv: [{out: \"8\", kernel: 3}]\n", {"key 'network.conv[0].out':", "the quoted string \"8\""}},
    {"network:\n  conv: [{out: 8, kernel: 2.5}]\n", {"key 'network.conv[0].kernel': must be an integer"}},
    {"network:\n  conv: [{out: 8, kernel: [3, 3]}]\n",
     {"c.yaml:2:27: key 'network.conv[0].kernel': must be an integer, not a list"}},
    {"network:\n  conv: [{out: 8, kernel: 3, out: 9}]\n",
     {"c.yaml:2:30: key 'network.conv[0].out': duplicate key (first given on line 2)", "give each key of a layer once"}},
    {"network:\n  conv:\n    - ? [a]\n      : 8\n",
     {"c.yaml:3:9: key 'network.conv[0]': a layer's key must be a name, not a list", "write a layer like"}},
    /* The same reader takes network.inputs' items (read_item_key). */
    {"network:\n  inputs: [{name: a, shap: [4]}]\n",
     {"c.yaml:2:22: key 'network.inputs[0].shap': unknown key; expected"}},
    {"network:\n  inputs: [{name: a, name: b, shape: [4]}]\n",
     {"key 'network.inputs[0].name': duplicate key (first given on line 2)", "give each key of an input once"}},
    {"network:\n  conv:\n    - {out: 8, kernel: 3}\n    - {out: 8, kernel: 3}\n    - {out: 8, kernel: 3}\n"
     "    - {out: 8, kernel: 3}\n    - {out: 8, kernel: 3}\n    - {out: 8, kernel: 3}\n    - {out: 8, kernel: 3}\n"
     "    - {out: 8, kernel: 3}\n    - {out: 8, kernel: 3}\n",
     {"c.yaml:11:7: key 'network.conv': has more than 8 layers"}},
    {"network:\n  conv: []\n", {"c.yaml:2:9: key 'network.conv': is an empty list", "none"}},
    {"network:\n  conv: [32, 8, 4]\n", {"c.yaml:2:10: key 'network.conv[0]': expected a layer mapping, got a single value"}},
    {"network:\n  conv: {out: 8, kernel: 3}\n",
     {"c.yaml:2:9: key 'network.conv': expected a preset name or a list of layers, got a mapping"}},
    {"network:\n  conv: atari\n", {"c.yaml:2:9: key 'network.conv': 'atari' is not one of the presets none|nature|minatar"}},
    {"network:\n  conv:\n", {"c.yaml:2:8: key 'network.conv': has no value"}},
    {"network:\n  conv: nature\n  conv: none\n", {"c.yaml:3:3: key 'network.conv': duplicate key"}},
};

static void check_errors(void) {
    rlt_config *c = new_config(), *ref = new_config();
    if (!c || !ref) return;
    /* A non-default value first, so that "unchanged" is not just "still the default". */
    CHECK(rlt_config_set(c, "network.conv=[{out: 4, kernel: 2}]") == RLT_OK && rlt_config_set(ref, "network.conv=[{out: 4, "
          "kernel: 2}]") == RLT_OK, "setup");
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *b = &bad_cases[i];
        int rc = rlt_config_load_string(c, b->yaml, "c.yaml");
        const char *msg = rlt_config_errmsg(c);
        CHECK(rc == RLT_ECONFIG, "case %zu (%s): status %s: %s", i, b->yaml, rlt_status_name(rc), msg);
        for (int j = 0; j < 3 && b->needles[j]; j++)
            CHECK(strstr(msg, b->needles[j]) != NULL, "case %zu (%s): message lacks \"%s\": %s", i, b->yaml,
                  b->needles[j], msg);
        CHECK(same_conv(&c->network.conv, &ref->network.conv), "case %zu changed network.conv", i);
    }
    /* --set: a per-entry path is explained, bad values name the --set text and column. */
    CHECK(rlt_config_set(c, "network.conv[0].kernel=5") == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(c), "unknown key 'network.conv[0].kernel'; --set replaces a list whole"),
          "per-entry --set: %s", rlt_config_errmsg(c));
    CHECK(rlt_config_set(c, "network.conv=[{out: 8, kernel: 0}]") == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(c), "--set network.conv=[{out: 8, kernel: 0}]:1:32: key 'network.conv[0].kernel'"),
          "--set list error: %s", rlt_config_errmsg(c));
    CHECK(same_conv(&c->network.conv, &ref->network.conv), "failed --set changed network.conv");
    rlt_config_free(ref);
    rlt_config_free(c);
}

/* Values written by code: validate checks them as the parser would have made them. */
static void check_validate(void) {
    rlt_config *c = new_config();
    if (!c) return;
    CHECK(rlt_config_set(c, "network.conv=nature") == RLT_OK, "set");
    c->network.conv.layer[2].stride = 2;
    CHECK(rlt_config_validate(c) == RLT_ECONFIG &&
              strstr(rlt_config_errmsg(c), "key 'network.conv': is named 'nature' but does not hold that preset's layers"),
          "altered preset: %s", rlt_config_errmsg(c));
    c->network.conv.preset = RLT_CONV_PRESET_EXPLICIT;
    CHECK(rlt_config_validate(c) == RLT_OK, "the same layers as a list: %s", rlt_config_errmsg(c));
    c->network.conv.layer[1].stride = 0;
    CHECK(rlt_config_validate(c) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), "layer [1] stride is 0"), "stride 0: %s",
          rlt_config_errmsg(c));
    c->network.conv.layer[1].stride = 2;
    c->network.conv.n = 0;
    CHECK(rlt_config_validate(c) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), "has 0 layers"), "empty list: %s",
          rlt_config_errmsg(c));
    c->network.conv.n = RLT_CFG_MAX_CONV + 1;
    CHECK(rlt_config_validate(c) == RLT_ECONFIG, "too many layers");
    rlt_config_free(c);
}

/* ---- the network ------------------------------------------------------------------------------------ */

static const rlt_space atari_obs = {RLT_SPACE_BOX, RLT_DTYPE_U8, 3, {4, 84, 84, 0}, 0, NULL, NULL};
static const rlt_space six_actions = {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 6, NULL, NULL};

static rlt_agent *dqn_agent(const char *conv, const rlt_space *obs, int *rc) {
    rlt_config *c = new_config();
    if (!c) return NULL;
    char set[600];
    snprintf(set, sizeof set, "network.conv=%s", conv);
    CHECK(rlt_config_load_string(c, "algo: dqn\nseed: 7\ntrain: {batch_size: 4}\nreplay: {capacity: 64}\n"
                                    "network: {hidden: [32]}\n", "agent.yaml") == RLT_OK, "config: %s",
          rlt_config_errmsg(c));
    CHECK(rlt_config_set(c, set) == RLT_OK, "%s: %s", set, rlt_config_errmsg(c));
    rlt_agent *ag = NULL;
    *rc = rlt_agent_init(c, obs, &six_actions, &ag);
    rlt_config_free(c);
    return ag;
}

/* Q values of the greedy policy for one observation (the CPU backend: device pointers are host memory). */
static void first_q(rlt_agent *ag, const uint8_t *obs, float q[6]) {
    int32_t action;
    CHECK(rlt_agent_act(ag, obs, 1, 0, &action) == RLT_OK, "act: %s", rlt_agent_errmsg(ag));
    memcpy(q, dqn_state(ag)->act_q, 6 * sizeof(float));
}

static void check_nature_equivalence(const char *dir) {
    const char *nature_list = "[{out: 32, kernel: 8, stride: 4}, {out: 64, kernel: 4, stride: 2, pad: 0}, "
                              "{out: 64, kernel: 3, stride: 1}]";
    /* Same sizes everywhere (the last layer still makes 64 x 7 x 7 from 9 x 9), another network. */
    const char *lookalike = "[{out: 32, kernel: 8, stride: 4}, {out: 64, kernel: 4, stride: 2}, "
                            "{out: 64, kernel: 3, stride: 2, pad: 3}]";
    int rc1, rc2, rc3;
    rlt_agent *a = dqn_agent("nature", &atari_obs, &rc1), *b = dqn_agent(nature_list, &atari_obs, &rc2);
    rlt_agent *l = dqn_agent(lookalike, &atari_obs, &rc3);
    CHECK(rc1 == RLT_OK && rc2 == RLT_OK && rc3 == RLT_OK, "init: %s / %s / %s", rlt_agent_errmsg(a), rlt_agent_errmsg(b),
          rlt_agent_errmsg(l));
    if (rc1 != RLT_OK || rc2 != RLT_OK || rc3 != RLT_OK) goto done;
    const rlt_plan_entry *ea, *eb, *el;
    rlt_plan_summary sa, sb, sl;
    rlt_agent_memory_plan(a, &sa, &ea);
    rlt_agent_memory_plan(b, &sb, &eb);
    rlt_agent_memory_plan(l, &sl, &el);
    CHECK(sa.n_entries == sb.n_entries && !memcmp(ea, eb, (size_t)sa.n_entries * sizeof *ea) &&
              sa.host_bytes == sb.host_bytes, "the list's plan is the preset's, byte for byte");
    /* Every block is a multiple of RLT_PARAM_ALIGN floats already but the output bias (6, padded to 16). */
    CHECK(dqn_state(a)->n_params == dqn_state(b)->n_params && dqn_state(a)->n_params == 1 * (32 * 4 * 64 + 32) + (64 * 32 * 16 + 64) +
                                                                         (64 * 64 * 9 + 64) + (3136 * 32 + 32) + (32 * 6 + 16),
          "parameter count %llu", (unsigned long long)dqn_state(a)->n_params);
    CHECK(!memcmp(dqn_state(a)->params, dqn_state(b)->params, dqn_state(a)->n_params * sizeof(float)), "same initial parameters");
    static uint8_t obs[4 * 84 * 84];
    uint32_t lcg = 99;
    for (size_t i = 0; i < sizeof obs; i++) lcg = lcg * 1664525u + 1013904223u, obs[i] = (uint8_t)(lcg >> 24);
    float qa[6], qb[6], ql[6];
    first_q(a, obs, qa);
    first_q(b, obs, qb);
    first_q(l, obs, ql);
    CHECK(!memcmp(qa, qb, sizeof qa), "same first Q values: %g %g vs %g %g", qa[0], qa[1], qb[0], qb[1]);
    double spread = 0;
    for (int i = 0; i < 6; i++) spread += fabs(qa[i] - qa[0]) + (isfinite(qa[i]) ? 0 : 1e9);
    CHECK(spread > 0 && spread < 1e9, "Q values are finite and not all equal");
    /* The look-alike: same plan sizes and parameter count, but it is another function. */
    CHECK(sl.host_bytes == sa.host_bytes && dqn_state(l)->n_params == dqn_state(a)->n_params, "look-alike has the same sizes");
    CHECK(memcmp(qa, ql, sizeof qa) != 0, "look-alike computes other Q values");
    /* Checkpoints: the preset's loads into the list; the look-alike is refused by name and left unchanged. */
    char path[512];
    snprintf(path, sizeof path, "%s/nature.ckpt", dir);
    CHECK(rlt_agent_save(a, path) == RLT_OK, "save: %s", rlt_agent_errmsg(a));
    CHECK(rlt_agent_load(b, path) == RLT_OK, "preset checkpoint into the equal list: %s", rlt_agent_errmsg(b));
    CHECK(rlt_agent_load(l, path) == RLT_ECHECKPOINT, "look-alike refused");
    CHECK(strstr(rlt_agent_errmsg(l), "the checkpoint's network is 'conv: [{out: 32, kernel: 8, stride: 4, pad: 0}, "
                                      "{out: 64, kernel: 4, stride: 2, pad: 0}, {out: 64, kernel: 3, stride: 1, pad: 0}]; "
                                      "hidden: [32]' but this config builds 'conv: [") &&
              strstr(rlt_agent_errmsg(l), "{out: 64, kernel: 3, stride: 2, pad: 3}]; hidden: [32]'"),
          "message names both networks: %s", rlt_agent_errmsg(l));
    float ql2[6];
    first_q(l, obs, ql2);
    CHECK(!memcmp(ql, ql2, sizeof ql), "the refused load changed nothing");
done:
    rlt_agent_free(a);
    rlt_agent_free(b);
    rlt_agent_free(l);
}

static void check_too_small(void) {
    rlt_err e;
    memset(&e, 0, sizeof e);
    rlt_qnet q;
    rlt_conv_list nature;
    cfg_why why;
    rlt_int_list hidden = {1, {16}};
    CHECK(config_conv_set_preset(&nature, "nature", 6, &why) == 0, "preset");
    rlt_space minatar = {RLT_SPACE_BOX, RLT_DTYPE_U8, 3, {4, 10, 10, 0}, 0, NULL, NULL};
    CHECK(qnet_define(&q, &e, &minatar, &nature, &hidden, 3) == RLT_ECONFIG, "nature on 10x10 refused");
    CHECK(strstr(e.msg, "network.conv[1] (preset nature): kernel 4x4 (stride 2, pad 0) does not fit its input of "
                        "32 x 1 x 1") && strstr(e.msg, "[4, 10, 10]"), "message: %s", e.msg);
    /* Through the agent, an explicit list: the second layer fails after the first leaves 8 x 5 x 5. */
    int rc;
    rlt_space obs = minatar;
    rlt_agent *ag = dqn_agent("[{out: 8, kernel: 6}, {out: 8, kernel: 6}]", &obs, &rc);
    CHECK(rc == RLT_ECONFIG && strstr(rlt_agent_errmsg(ag), "network.conv[1]: kernel 6x6 (stride 1, pad 0) does not "
                                                            "fit its input of 8 x 5 x 5") &&
              strstr(rlt_agent_errmsg(ag), "the output would be 0 x 0"),
          "agent: %s", rlt_agent_errmsg(ag));
    rlt_agent_free(ag);
    /* Padding makes the same kernel fit. */
    ag = dqn_agent("[{out: 8, kernel: 6}, {out: 8, kernel: 6, pad: 1}]", &obs, &rc);
    CHECK(rc == RLT_OK, "padded: %s", rlt_agent_errmsg(ag));
    rlt_agent_free(ag);
    /* A torso needs images. */
    rlt_space vec = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {4, 0, 0, 0}, 0, NULL, NULL};
    ag = dqn_agent("[{out: 8, kernel: 3}]", &vec, &rc);
    CHECK(rc == RLT_ECONFIG && strstr(rlt_agent_errmsg(ag), "needs image observations [c, h, w]; this environment's are "
                                                            "1-D [4]"), "vector: %s", rlt_agent_errmsg(ag));
    rlt_agent_free(ag);
}

/* Eight layers: the training network takes conv slots 0-7, the acting network 8-15. */
static void check_max_layers(void) {
    char list[1024] = "[";
    for (int i = 0; i < RLT_CFG_MAX_CONV; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s{out: 4, kernel: 3, pad: 1}", i ? ", " : "");
    strcat(list, "]");
    int rc;
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_U8, 3, {4, 10, 10, 0}, 0, NULL, NULL};
    rlt_agent *ag = dqn_agent(list, &obs, &rc);
    CHECK(rc == RLT_OK && ag && dqn_state(ag)->net.n_conv == 8 && dqn_state(ag)->net_act.conv_slot0 == 8, "8 layers: %s",
          rlt_agent_errmsg(ag));
    if (rc == RLT_OK) {
        static uint8_t o[400];
        o[17] = 1;
        float q[6];
        first_q(ag, o, q);
        CHECK(isfinite(q[0]) && isfinite(q[5]), "acts");
    }
    rlt_agent_free(ag);
}

/* ---- training ---------------------------------------------------------------------------------------- */

static void check_training(const char *dir) {
    rlt_config *c = new_config();
    if (!c) return;
    char set[600];
    CHECK(rlt_config_load_string(c,
                                 "algo: dqn\nseed: 3\nenv: {name: minatar_breakout}\n"
                                 "train: {total_steps: 400, batch_size: 16, eval_every: 0, eval_episodes: 1,"
                                 " progress_every_s: 100}\n"
                                 "replay: {capacity: 1000}\n"
                                 "dqn: {learning_starts: 200, train_freq: 2, target_update_every: 50}\n"
                                 "network:\n"
                                 "  conv:\n"
                                 "    - {out: 8, kernel: 3, stride: 1, pad: 1}\n"
                                 "    - {out: 8, kernel: 4, stride: 2, pad: 1}\n"
                                 "  hidden: [32]\n", "train.yaml") == RLT_OK,
          "config: %s", rlt_config_errmsg(c));
    snprintf(set, sizeof set, "out_dir=%s/run", dir);
    rlt_config_set(c, set);
    rlt_trainer *tr = NULL;
    int rc = rlt_trainer_init(c, &tr);
    CHECK(rc == RLT_OK, "trainer init: %s", rlt_trainer_errmsg(tr));
    if (rc != RLT_OK) {
        rlt_trainer_free(tr);
        rlt_config_free(c);
        return;
    }
    rlt_agent *ag = rlt_trainer_agent(tr);
    CHECK(dqn_state(ag)->net.n_conv == 2 && dqn_state(ag)->net.conv[0].pad == 1 && dqn_state(ag)->net.conv[1].stride == 2 &&
              dqn_state(ag)->net.conv_oh[1] == 5 && dqn_state(ag)->net.head.dims[0] == 8 * 5 * 5, "the listed torso was built");
    uint64_t n = dqn_state(ag)->n_params;
    static float before[1 << 16];
    CHECK(n <= sizeof before / sizeof before[0], "%llu parameters", (unsigned long long)n);
    if (n > sizeof before / sizeof before[0]) n = sizeof before / sizeof before[0];
    memcpy(before, dqn_state(ag)->params, n * sizeof(float));
    CHECK(rlt_trainer_run(tr, NULL, NULL) == RLT_OK, "run: %s", rlt_trainer_errmsg(tr));
    int64_t steps = 0, updates = 0;
    rlt_agent_counters(ag, &steps, &updates);
    CHECK(steps == 400 && updates == 100, "steps %lld, updates %lld", (long long)steps, (long long)updates);
    float losses[RLT_LOSS_COUNT];
    CHECK(agent_read_losses(ag, losses) == RLT_OK, "losses");
    CHECK(isfinite(losses[RLT_LOSS_Q1]) && losses[RLT_LOSS_Q1] >= 0, "TD loss %g", losses[RLT_LOSS_Q1]);
    /* Every layer learns: some of the parameters of each conv layer and of the head moved (ReLU units that
     * never fire and weights on always-zero inputs keep theirs, so not all of them do). */
    uint64_t bounds[4] = {0, (uint64_t)8 * 4 * 9 + 8, 0, n};
    bounds[2] = bounds[1] + (uint64_t)8 * 8 * 16 + 8;
    uint64_t changed[3] = {0, 0, 0}, finite = 1;
    for (int g = 0; g < 3; g++)
        for (uint64_t i = bounds[g]; i < bounds[g + 1]; i++) {
            changed[g] += dqn_state(ag)->params[i] != before[i];
            finite &= isfinite(dqn_state(ag)->params[i]) != 0;
        }
    CHECK(finite, "parameters finite");
    for (int g = 0; g < 3; g++)
        CHECK(changed[g] * 10 > bounds[g + 1] - bounds[g], "%s: %llu of %llu parameters changed",
              g == 0 ? "conv[0]" : g == 1 ? "conv[1]" : "head", (unsigned long long)changed[g],
              (unsigned long long)(bounds[g + 1] - bounds[g]));
    rlt_trainer_free(tr);

    /* The saved config.yaml reloads to the same network, and the final checkpoint resumes under it. */
    char path[600];
    snprintf(path, sizeof path, "%s/run/config.yaml", dir);
    rlt_config *saved = new_config();
    if (saved) {
        CHECK(rlt_config_load_file(saved, path) == RLT_OK, "reload: %s", rlt_config_errmsg(saved));
        CHECK(same_conv(&saved->network.conv, &c->network.conv), "saved config has the same network.conv");
        snprintf(set, sizeof set, "out_dir=%s/run2", dir);
        rlt_config_set(saved, set);
        rlt_config_set(saved, "train.total_steps=420");
        CHECK(rlt_trainer_init(saved, &tr) == RLT_OK, "init from saved: %s", rlt_trainer_errmsg(tr));
        snprintf(path, sizeof path, "%s/run/final.ckpt", dir);
        CHECK(rlt_trainer_resume(tr, path) == RLT_OK, "resume under the saved config: %s", rlt_trainer_errmsg(tr));
        rlt_trainer_free(tr);
        rlt_config_free(saved);
    }
    rlt_config_free(c);
}

int main(void) {
    const char *dir = test_tmpdir("tmp_conv_list");
    check_parse();
    check_shipped_comment();
    check_errors();
    check_validate();
    check_nature_equivalence(dir);
    check_too_small();
    check_max_layers();
    check_training(dir);
    return test_summary("test_conv_list");
}
