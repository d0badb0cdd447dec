/* registry.c: the algorithms the agent can run, one line each, and their lookup by name. A new algorithm
 * is its own files in agents/ and one line in `builtin` below. Tests and embedders may add more at run
 * time (algo_registry_add). */
#include <stdio.h>
#include <string.h>

#include "algo.h"

extern const rlt_algo rlt_algo_td3;
extern const rlt_algo rlt_algo_dqn;

static const rlt_algo *const builtin[] = {
    &rlt_algo_td3,
    &rlt_algo_dqn,
};
#define N_BUILTIN ((int32_t)(sizeof builtin / sizeof builtin[0]))

/* Added at run time, after the built-in ones. */
static const rlt_algo *added[RLT_ALGO_MAX - N_BUILTIN];
static int32_t n_added;

int32_t algo_registry_count(void) { return N_BUILTIN + n_added; }

const rlt_algo *algo_registry_at(int32_t i) {
    if (i < 0 || i >= algo_registry_count()) return NULL;
    return i < N_BUILTIN ? builtin[i] : added[i - N_BUILTIN];
}

const rlt_algo *algo_registry_find(const char *name) {
    if (!name) return NULL;
    for (int32_t i = 0; i < algo_registry_count(); i++)
        if (strcmp(algo_registry_at(i)->name, name) == 0) return algo_registry_at(i);
    return NULL;
}

size_t algo_registry_names(char *buf, size_t cap) {
    rlt_text o = {buf, cap, 0};
    if (cap) buf[0] = '\0';
    for (int32_t i = 0; i < algo_registry_count(); i++) rlt_text_add(&o, "%s%s", i ? ", " : "", algo_registry_at(i)->name);
    return o.len;
}

int algo_registry_lookup(const char *name, const rlt_algo **out, rlt_err *e) {
    *out = algo_registry_find(name);
    if (*out) return RLT_OK;
    char names[256];
    algo_registry_names(names, sizeof names);
    RLT_FAIL(e, RLT_ECONFIG, "config: key 'algo': '%s' is not a registered algorithm (registered: %s)", name ? name : "",
             names);
}

int algo_registry_add(const rlt_algo *a) {
    if (!a || !a->name || !a->name[0] || algo_registry_find(a->name) || n_added >= RLT_ALGO_MAX - N_BUILTIN)
        return RLT_EINVAL;
    /* Every hook the run layer calls without checking. */
    if (!a->check_spaces || !a->plan || !a->init_state || !a->update_ops || !a->act || !a->observe || !a->update ||
        !a->param_count || !a->network_text || !a->after_load || !a->loss_values || a->n_variants < 1 ||
        a->n_loss_columns < 0 || a->n_loss_columns > RLT_ALGO_MAX_LOSS_COLUMNS)
        return RLT_EINVAL;
    added[n_added++] = a;
    return RLT_OK;
}
