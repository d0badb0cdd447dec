/* agent.c: the agent API: plan and reserve everything at init (or fail with a table and hints), then act,
 * observe and update without allocating. Algorithm specifics live in agents/. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "finite.h"
#include "agent.h"
#include "backend_registry.h"
#include "config_inputs.h"
#include "config_schema.h"
#include "env.h"
#include "mem.h"
#include "seed_batch.h"

#define MIB (1024.0 * 1024.0)

static int agent_dispatch_update(rlt_agent *ag, int32_t variant);
static int agent_dispatch_act(rlt_agent *ag, int32_t rows);
/* What the process maps after the plan besides the host arena, held against the host's memory limit
 * (ulimit -v/-d, the memory cgroup): the environment, the trainer's outputs and checkpoint files, stdio, and
 * with cpu.threads >= 2 the worker thread's stack. A TD3 run grows by under 10 MiB over what the plan saw
 * (tests/test_host_limits.c runs the CLI at the smallest limit the plan accepts). */
#define AGENT_HOST_OVERHEAD ((uint64_t)16 << 20)

int agent_read_losses(rlt_agent *ag, float out[RLT_LOSS_COUNT]) {
    rlt_backend *bk = &ag->bk;
    RLT_TRY(bk->ops->copy(bk, ag->losses_host, ag->losses, RLT_LOSS_COUNT * sizeof(float), RLT_COPY_D2H));
    RLT_TRY(bk->ops->sync(bk));
    memcpy(out, ag->losses_host, RLT_LOSS_COUNT * sizeof(float));
    return RLT_OK;
}

int agent_read_amp(rlt_agent *ag, rlt_amp_state *out) {
    memset(out, 0, sizeof *out);
    if (!ag->amp) return RLT_OK;
    rlt_backend *bk = &ag->bk;
    RLT_TRY(bk->ops->copy(bk, ag->amp_host, ag->amp, sizeof *out, RLT_COPY_D2H));
    RLT_TRY(bk->ops->sync(bk));
    *out = *ag->amp_host;
    return RLT_OK;
}

/* The whole plan for one replay placement. Called again with the replay on the host when `auto` finds
 * that the device arena would not fit. */
static int agent_build_plan(rlt_agent *ag, rlt_location replay_loc) {
    rlt_plan *p = &ag->plan;
    rlt_err *e = &ag->err;
    rlt_backend *bk = &ag->bk;
    rlt_host_limit host = p->host; /* read once, when the backend opened (agent_prepare) */
    plan_init(p, bk->device_is_host);
    p->host = host;
    p->host_overhead = AGENT_HOST_OVERHEAD;
    memset(&ag->replay, 0, sizeof ag->replay);
    RLT_TRY(ag->algo->plan(ag));
    RLT_TRY(replay_plan(&ag->replay, p, e, ag->cfg.replay.capacity, replay_loc, RLT_OBSERVE_STAGE_ROWS));
    RLT_TRY(plan_add(p, e, "counters", "counters", RLT_LOC_DEVICE, RLT_CTR_COUNT * sizeof(int64_t), (void **)&ag->counters));
    RLT_TRY(plan_add(p, e, "losses", "counters", RLT_LOC_DEVICE, RLT_LOSS_COUNT * sizeof(float), (void **)&ag->losses));
    /* The update's scalar hyper-parameters (engine/agent_core.h): written from the config, never saved. */
    RLT_TRY(plan_add(p, e, "hparams", "hparams", RLT_LOC_DEVICE, RLT_HP_COUNT * sizeof(float), (void **)&ag->hparams));
    RLT_TRY(plan_add(p, e, "staging.counters", "staging", RLT_LOC_HOST, RLT_CTR_COUNT * sizeof(int64_t),
                     (void **)&ag->counters_host));
    RLT_TRY(plan_add(p, e, "staging.losses", "staging", RLT_LOC_HOST, RLT_LOSS_COUNT * sizeof(float),
                     (void **)&ag->losses_host));
    /* fp16's loss scaler (a zero-size entry, so a NULL pointer, in every other precision). */
    uint64_t amp_bytes = ag->lp == RLT_LP_F16 ? sizeof(rlt_amp_state) : 0;
    RLT_TRY(plan_add(p, e, "amp", "amp", RLT_LOC_DEVICE, amp_bytes, (void **)&ag->amp));
    RLT_TRY(plan_add(p, e, "staging.amp", "staging", RLT_LOC_HOST, amp_bytes, (void **)&ag->amp_host));
    /* Observe converts actions to [-1, 1] and flags to float: one staging row each. */
    ag->io_stage_bytes = ag->io_stage_bytes > (uint64_t)RLT_OBSERVE_STAGE_ROWS * (ag->act_dim + 1) * 4
                             ? ag->io_stage_bytes
                             : (uint64_t)RLT_OBSERVE_STAGE_ROWS * (ag->act_dim + 1) * 4;
    RLT_TRY(plan_add(p, e, "staging.io", "staging", RLT_LOC_HOST, ag->io_stage_bytes, (void **)&ag->io_stage));
    /* A seed group's agents sharing a GPU may run one batched update graph: its table of arena offsets and seeds. */
    uint64_t table = ag->cfg.batch_seeds > 1 && !bk->device_is_host ? seed_batch_table_bytes(ag->cfg.batch_seeds) : 0;
    RLT_TRY(plan_add(p, e, "group.seed_table", "group", RLT_LOC_DEVICE, table, &ag->seed_table));
    /* And the transition store each member holds for the group's next round (the lead runs all of them at once). */
    RLT_TRY(plan_add(p, e, "staging.copy_list", "staging", RLT_LOC_HOST, table ? sizeof(rlt_copy_list) : 0,
                     (void **)&ag->copy_list));
    /* The library workspace from the plan's shapes: none when no op of this plan calls the library (the
     * backend creates the library handles it needs here too, so the measured context below includes them). */
    uint64_t ws = 0;
    RLT_TRY(bk->ops->workspace(bk, NULL, 0, &ws));
    p->use.dense_tf32 = ag->cfg.precision == RLT_PRECISION_TF32; /* the CPU has turned it into fp32 by now */
    if (bk->ops->plan_workspace) RLT_TRY(bk->ops->plan_workspace(bk, &p->use, &ws));
    RLT_TRY(plan_add(p, e, "backend.workspace", "workspace", RLT_LOC_DEVICE, ws, NULL));
    if (!bk->device_is_host && bk->memory_note[0]) plan_note(p, "%s", bk->memory_note);
    ag->replay.size_dev = NULL; /* points into counters after commit */
    plan_layout(p);
    return RLT_OK;
}

static void agent_fill_summary(rlt_agent *ag) {
    rlt_plan_summary *s = &ag->summary;
    rlt_plan *p = &ag->plan;
    memset(s, 0, sizeof *s);
    s->host_bytes = p->arena_bytes[RLT_LOC_HOST];
    s->device_bytes = p->arena_bytes[RLT_LOC_DEVICE];
    s->budget_bytes = (uint64_t)(ag->cfg.memory.budget_mb * MIB);
    s->device_total = ag->bk.device_total;
    s->device_free = ag->bk.device_free;
    s->context_bytes = ag->bk.context_bytes;
    s->handle_bytes = ag->bk.handle_bytes;
    s->n_entries = p->n;
    uint64_t need = p->device_is_host ? s->host_bytes : s->device_bytes;
    /* The process budget: on a GPU the measured context and handles plus the device arena; on the CPU there is
     * no device context, and the budget caps the host arena (the rest of the process is not counted). */
    s->process_bytes = s->context_bytes + need;
    s->process_budget_bytes = (uint64_t)(ag->cfg.memory.process_budget_mb * MIB);
    s->fits = need <= s->budget_bytes && (!s->device_total || need <= s->device_free) &&
              (!s->process_budget_bytes || s->process_bytes <= s->process_budget_bytes) && plan_host_fits(p);
    snprintf(s->device, sizeof s->device, "%s", ag->bk.device_name);
    snprintf(s->precision, sizeof s->precision, "%s", config_precision_name(ag->cfg.precision));
    if (ag->precision_fallback) snprintf(s->note, sizeof s->note, "reduced precision requested; the CPU computes in fp32");
}

/* Appends what to change to the error message when the plan does not fit. */
static void agent_fit_hints(rlt_agent *ag) {
    rlt_plan *p = &ag->plan;
    const rlt_config *c = &ag->cfg;
    int loc = p->device_is_host ? RLT_LOC_HOST : RLT_LOC_DEVICE;
    uint64_t need = p->arena_bytes[loc], budget = ag->summary.budget_bytes;
    if (ag->summary.device_total && ag->summary.device_free < budget) budget = ag->summary.device_free;
    /* Under a process budget the arena has what the context and handles leave of it. */
    uint64_t pbudget = ag->summary.process_budget_bytes, ctx = ag->summary.context_bytes;
    if (pbudget && (pbudget > ctx ? pbudget - ctx : 0) < budget) budget = pbudget > ctx ? pbudget - ctx : 0;
    /* On the CPU the host's memory limit caps the budgeted arena too. */
    if (p->device_is_host && p->host.avail != UINT64_MAX) {
        uint64_t room = p->host.avail > p->host_overhead ? p->host.avail - p->host_overhead : 0;
        if (room < budget) budget = room;
    }
    uint64_t replay = plan_region_bytes(p, "replay", loc);
    uint64_t row = replay_row_bytes(&ag->replay);
    char hint[1024];
    size_t n = 0;
    /* The three groups that set the size, the largest first. */
    typedef struct {
        const char *name;
        uint64_t bytes;
    } fit_group;
    fit_group big[3] = {{"replay", replay},
                {"activations", plan_region_bytes(p, "activations", loc)},
                {"params+grads+adam+target", plan_region_bytes(p, "params", loc) + plan_region_bytes(p, "grads", loc) +
                                                 plan_region_bytes(p, "adam_m", loc) + plan_region_bytes(p, "adam_v", loc) +
                                                 plan_region_bytes(p, "target", loc)}};
    for (int i = 1; i < 3; i++)
        for (int j = i; j > 0 && big[j].bytes > big[j - 1].bytes; j--) {
            fit_group t = big[j];
            big[j] = big[j - 1], big[j - 1] = t;
        }
    n += (size_t)snprintf(hint + n, sizeof hint - n, "\n  largest: %s %.2f MiB, %s %.2f MiB, %s %.2f MiB", big[0].name,
                          big[0].bytes / MIB, big[1].name, big[1].bytes / MIB, big[2].name, big[2].bytes / MIB);
    uint64_t rest = need - replay;
    if (row && rest < budget) {
        /* Alignment padding is at most one RLT_PLAN_ALIGN per replay field. */
        uint64_t cap = (budget - rest - (uint64_t)ag->replay.nf * RLT_PLAN_ALIGN) / row;
        if (cap > 0 && cap < (uint64_t)c->replay.capacity)
            n += (size_t)snprintf(hint + n, sizeof hint - n,
                                  "\n  hint: replay.capacity %lld -> %llu fits (%llu bytes per transition)",
                                  (long long)c->replay.capacity, (unsigned long long)cap, (unsigned long long)row);
    }
    if (!p->device_is_host && replay)
        n += (size_t)snprintf(hint + n, sizeof hint - n,
                              "\n  hint: replay.location: host keeps the replay (%.2f MiB) in pinned host memory", replay / MIB);
    /* When the context alone is over the process budget, no change to the plan helps. */
    if (!pbudget || ctx < pbudget)
        n += (size_t)snprintf(hint + n, sizeof hint - n, "\n  hint: a smaller train.batch_size shrinks activations and batch buffers");
    if (ag->summary.budget_bytes < need)
        n += (size_t)snprintf(hint + n, sizeof hint - n, "\n  hint: memory.budget_mb: %.0f would fit this plan",
                              ceil(need / MIB));
    if (pbudget && ctx >= pbudget)
        n += (size_t)snprintf(hint + n, sizeof hint - n,
                              "\n  hint: the CUDA context, its kernels and library handles alone hold %.0f MiB on %s "
                              "(measured); device: cpu needs no device memory at all",
                              ctx / MIB, ag->bk.device_name);
    if (pbudget && ag->summary.process_bytes > pbudget)
        snprintf(hint + n, sizeof hint - n, "\n  hint: memory.process_budget_mb: %.0f would fit this plan%s",
                 ceil(ag->summary.process_bytes / MIB), ctx ? " (context and handles included)" : "");
    size_t len = strlen(ag->err.msg);
    snprintf(ag->err.msg + len, sizeof ag->err.msg - len, "%s", hint);
}

/* replay.obs_dtype against the observation space, which only the environment knows: float observations may
 * be stored as fp32, fp16 or bf16; uint8 images only as uint8 (they are exact there, and any float type would
 * only cost memory: 2 or 4 times the bytes for the same values). */
static int agent_resolve_obs_dtype(rlt_agent *ag, const rlt_space *obs) {
    rlt_obs_dtype want = ag->cfg.replay.obs_dtype;
    int u8 = obs->dtype == RLT_DTYPE_U8;
    if (obs->kind == RLT_SPACE_DICT) {
        /* A dict row is stored as the bytes it is: its uint8 parts exact, its float32 parts as they came. */
        if (want != RLT_OBS_DTYPE_AUTO && want != RLT_OBS_DTYPE_UINT8)
            RLT_FAIL(&ag->err, RLT_ECONFIG,
                     "config: key 'replay.obs_dtype': %s, but network.inputs makes dict observations, which replay "
                     "stores as their rows of bytes (each part in its own dtype); use replay.obs_dtype: auto",
                     config_obs_dtype_name(want));
        ag->replay_obs_dtype = RLT_DTYPE_U8;
        return RLT_OK;
    }
    if (want == RLT_OBS_DTYPE_AUTO) {
        ag->replay_obs_dtype = u8 ? RLT_DTYPE_U8 : RLT_DTYPE_F32;
    } else if (u8) {
        if (want != RLT_OBS_DTYPE_UINT8)
            RLT_FAIL(&ag->err, RLT_ECONFIG,
                     "config: key 'replay.obs_dtype': %s is for float observations, but this environment's observations "
                     "are uint8 images, which replay stores exactly as uint8 (a float type would only take %s the bytes); "
                     "use replay.obs_dtype: auto or uint8", config_obs_dtype_name(want),
                     want == RLT_OBS_DTYPE_FP32 ? "4 times" : "twice");
        ag->replay_obs_dtype = RLT_DTYPE_U8;
    } else if (want == RLT_OBS_DTYPE_UINT8) {
        RLT_FAIL(&ag->err, RLT_ECONFIG,
                 "config: key 'replay.obs_dtype': uint8 is only for uint8 (image) observations, but this environment's "
                 "observations are float32 and would not survive the cast; use replay.obs_dtype: fp16 or bf16 to store "
                 "them in half the bytes, or auto (fp32)");
    } else {
        ag->replay_obs_dtype = want == RLT_OBS_DTYPE_FP16 ? RLT_DTYPE_F16
                               : want == RLT_OBS_DTYPE_BF16 ? RLT_DTYPE_BF16 : RLT_DTYPE_F32;
    }
    return RLT_OK;
}

/* A dict space against network.inputs: the same row size and number of parts (their names, shapes and dtypes
 * are the config's; an adapter matches them by name). */
static int agent_check_dict(rlt_agent *ag, const rlt_space *obs) {
    rlt_err *e = &ag->err;
    const rlt_input_list *in = &ag->cfg.network.inputs;
    char where[400], lay_text[1024];
    rlt_text t = {lay_text, sizeof lay_text, 0};
    lay_text[0] = '\0';
    config_inputs_layout_text(&t, in);
    rlt_input_layout lay;
    config_inputs_layout(in, &lay);
    if (obs->kind == RLT_SPACE_DICT && in->n == 0)
        RLT_FAIL(e, RLT_ECONFIG, "%s: none, but the observation space is a dict (%d parts, %d bytes a row); declare its "
                 "parts under network.inputs, like [{name: screen, shape: [1, 8, 8], dtype: u8, torso: minatar}, "
                 "{name: stats, shape: [4]}]", config_key_where(&ag->cfg, "network.inputs", where, sizeof where),
                 (int)obs->n, (int)obs->shape[0]);
    if (obs->kind != RLT_SPACE_DICT)
        RLT_FAIL(e, RLT_ECONFIG, "%s: declares a dict observation (%s), but this environment's observations are a %s; "
                 "give the environment a dict observation space (RLT_SPACE_DICT, rlt_config_dict_space) or write "
                 "network.inputs: none", config_key_where(&ag->cfg, "network.inputs", where, sizeof where), lay_text,
                 obs->kind == RLT_SPACE_BOX ? "Box" : "Discrete space");
    if (obs->dtype != RLT_DTYPE_U8 || obs->ndim != 1 || obs->shape[0] != lay.row_bytes || obs->n != lay.n)
        RLT_FAIL(e, RLT_EINVAL, "the dict observation space (dtype %d, ndim %d, %d bytes a row, %d parts) does not "
                 "match network.inputs: %s, %d parts; rlt_config_dict_space fills the space from the config",
                 (int)obs->dtype, (int)obs->ndim, (int)obs->shape[0], (int)obs->n, lay_text, (int)lay.n);
    return RLT_OK;
}

static int agent_check_spaces(rlt_agent *ag, const rlt_space *obs, const rlt_space *act) {
    rlt_err *e = &ag->err;
    if (!obs || !act) RLT_FAIL(e, RLT_EINVAL, "observation and action spaces are required");
    if (obs->kind == RLT_SPACE_DICT || ag->cfg.network.inputs.n > 0) RLT_TRY(agent_check_dict(ag, obs));
    if (obs->ndim < 1 || obs->ndim > 4) RLT_FAIL(e, RLT_EINVAL, "observation space has %d dimensions (1..4)", obs->ndim);
    ag->obs_space = *obs;
    ag->act_space = *act;
    ag->obs_space.low = ag->obs_space.high = NULL;
    ag->act_space.low = ag->act_space.high = NULL;
    int64_t n = 1;
    for (int32_t i = 0; i < obs->ndim; i++) {
        if (obs->shape[i] < 1) RLT_FAIL(e, RLT_EINVAL, "observation dimension %d has size %d", i, obs->shape[i]);
        /* Checked as it grows: four int32 sizes would overflow 64 bits. */
        n *= obs->shape[i];
        if (n > RLT_ENV_MAX_OBS_ELEMS)
            RLT_FAIL(e, RLT_EINVAL, "observations of more than %d elements are too large (dimension %d makes %lld)",
                     RLT_ENV_MAX_OBS_ELEMS, i, (long long)n);
    }
    ag->obs_dim = (int32_t)n;
    RLT_TRY(ag->algo->check_spaces(ag, obs, act));
    return agent_resolve_obs_dtype(ag, obs);
}

/* Builds the plan for the current config; replay.location auto moves the replay to pinned host memory
 * when the device arena would not fit otherwise. */
int agent_plan_current(rlt_agent *ag) {
    rlt_replay_location rl = ag->cfg.replay.location;
    rlt_location replay_loc = rl == RLT_REPLAY_LOCATION_HOST ? RLT_LOC_HOST : RLT_LOC_DEVICE;
    RLT_TRY(agent_build_plan(ag, replay_loc));
    agent_fill_summary(ag);
    if (!ag->summary.fits && rl == RLT_REPLAY_LOCATION_AUTO && !ag->bk.device_is_host) {
        RLT_TRY(agent_build_plan(ag, RLT_LOC_HOST));
        agent_fill_summary(ag);
    }
    return RLT_OK;
}

uint64_t agent_plan_need(const rlt_agent *ag) {
    return ag->plan.arena_bytes[ag->plan.device_is_host ? RLT_LOC_HOST : RLT_LOC_DEVICE];
}

int agent_prepare(rlt_agent *ag, const rlt_space *obs, const rlt_space *act) {
    rlt_err *e = &ag->err;
    if (rlt_config_validate(&ag->cfg) != RLT_OK) {
        rlt_err_copy(e, &ag->cfg.err);
        return e->status;
    }
    RLT_TRY(algo_registry_lookup(ag->cfg.algo, &ag->algo, e));
    if (ag->algo->state_bytes > ag->algo_state_cap)
        RLT_FAIL(e, RLT_ESTATE, "this agent was allocated for another algorithm than '%s'", ag->cfg.algo);
    RLT_TRY(agent_check_spaces(ag, obs, act));
    char why[512] = "";
    ag->bk.lanes = ag->cfg.lanes;
    /* Only the leading agent runs the batched graph: it alone sizes its scratch and library workspace for every
     * seed; the others plan as single runs (their plans differ only in backend.workspace, which the batch ignores). */
    ag->bk.seeds = ag->cfg.arena_slot == 0 ? ag->cfg.batch_seeds : 1;
    ag->bk.span = ag->cfg.batch_seeds > 1 ? ag->cfg.arena_span : NULL;
    ag->bk.span_slot = ag->cfg.arena_slot;
    /* A described GPU (rltrain plan --arch) stands in for `cuda` and `auto`: it plans, and cannot reserve. */
    if (ag->cfg.gpu_desc.arch && config_device(&ag->cfg).kind != RLT_DEVICE_CPU)
        RLT_TRY(rlt_backend_open_described(&ag->bk, e, &ag->cfg.gpu_desc));
    else
        RLT_TRY(rlt_backend_open_device(&ag->bk, e, config_device(&ag->cfg), ag->cfg.cpu.threads, why, sizeof why));
    ag->backend_open = 1;
    /* A data-parallel rank: its gradient averages go through the group's communicator from the first capture. */
    if (ag->cfg.comm)
        RLT_TRY(ag->bk.ops->comm_attach(&ag->bk, ag->cfg.comm, rlt_comm_device(ag->cfg.comm, ag->cfg.rank), ag->cfg.rank,
                                        rlt_comm_size(ag->cfg.comm)));
    /* After the backend opened, so what it mapped (OpenBLAS's buffers, a CUDA context) counts as in use. */
    rlt_host_limit_read(&ag->plan.host);
    if (why[0]) rlt_log(RLT_LOG_INFO, "device auto: using the CPU because %s", why);
    if (ag->cfg.precision != RLT_PRECISION_FP32) {
        /* Reduced precision is a GPU feature (tensor cores); the same config keeps working where `auto`
         * lands on the CPU, which computes in fp32 and says so. */
        if (!ag->bk.device_is_host) {
            /* tf32 keeps fp32 storage (no 16-bit copies): only the backend's library products and its
             * convolutions change (rlt_op_use.dense_tf32, agent_build_plan). */
            if (ag->cfg.precision == RLT_PRECISION_BF16) ag->lp = RLT_LP_BF16;
            else if (ag->cfg.precision == RLT_PRECISION_FP16) ag->lp = RLT_LP_F16;
        } else {
            rlt_log(RLT_LOG_INFO, "precision %s requested; the CPU backend computes in fp32",
                    config_precision_name(ag->cfg.precision));
            ag->cfg.precision = RLT_PRECISION_FP32;
            ag->precision_fallback = 1;
        }
    }
    return agent_plan_current(ag);
}

/* memory.auto_fit: the fewest micro-batches (a divisor of batch_size) whose plan fits. */
static int agent_auto_fit(rlt_agent *ag) {
    int32_t batch = ag->cfg.train.batch_size, first = ag->cfg.train.grad_accum_steps;
    if (ag->summary.fits || !ag->cfg.memory.auto_fit) return RLT_OK;
    for (int32_t n = first + 1; n <= batch; n++) {
        if (batch % n) continue;
        ag->cfg.train.grad_accum_steps = n;
        RLT_TRY(agent_plan_current(ag));
        if (ag->summary.fits) {
            rlt_log(RLT_LOG_INFO, "memory.auto_fit: batch %d runs as %d micro-batches of %d (gradient accumulation) to fit %.1f MiB",
                    batch, n, batch / n, ag->summary.budget_bytes / MIB);
            return RLT_OK;
        }
    }
    /* Nothing fits: report the configured plan. */
    ag->cfg.train.grad_accum_steps = first;
    return agent_plan_current(ag);
}

/* 1 when the process fits memory.process_budget_mb (or there is none); otherwise 0 with ag->err set to RLT_ENOFIT,
 * its message opening with `what` (the plan's figures, or the measured ones after init), and the hints. */
static int agent_process_fits(rlt_agent *ag, const char *what) {
    rlt_plan_summary *s = &ag->summary;
    if (!s->process_budget_bytes || s->process_bytes <= s->process_budget_bytes) return 1;
    uint64_t arena = agent_plan_need(ag), over = s->process_bytes - s->process_budget_bytes;
    if (ag->bk.device_is_host)
        rlt_err_set(&ag->err, RLT_ENOFIT, __FILE__, __LINE__,
                    "the host arena needs %.2f MiB but memory.process_budget_mb allows %.2f MiB (%.2f MiB over; on the "
                    "CPU the process budget caps the host arena)",
                    arena / MIB, s->process_budget_bytes / MIB, over / MIB);
    else
        rlt_err_set(&ag->err, RLT_ENOFIT, __FILE__, __LINE__,
                    "%s %.2f MiB on %s (CUDA context, kernels and library handles %.2f MiB, measured, + device arena "
                    "%.2f MiB) but memory.process_budget_mb allows %.2f MiB (%.2f MiB over)",
                    what, s->process_bytes / MIB, ag->bk.device_name, s->context_bytes / MIB, arena / MIB,
                    s->process_budget_bytes / MIB, over / MIB);
    agent_fit_hints(ag);
    s->fits = 0;
    return 0;
}

/* Reserves the arenas. A device reservation that fails although the plan is within the budget (another
 * process holds the memory) is retried once a second for memory.wait_s; then memory.on_oom: cpu moves
 * the agent to the CPU backend. The reservation itself is the check, so there is no window between
 * "checked free memory" and "allocated". */
static int agent_reserve(rlt_agent *ag) {
    rlt_err *e = &ag->err;
    /* The process budget first, before anything is reserved: no waiting and no CPU fallback, since the
     * context alone may be what does not fit. */
    if (!agent_process_fits(ag, "the whole process needs")) return RLT_ENOFIT;
    if (!plan_host_fits(&ag->plan)) {
        const rlt_host_limit *h = &ag->plan.host;
        uint64_t host = ag->plan.arena_bytes[RLT_LOC_HOST], want = host + ag->plan.host_overhead;
        rlt_err_set(e, RLT_ENOFIT, __FILE__, __LINE__,
                    "the host arena needs %.2f MiB (and about %.0f MiB for the rest of the process) but %s is %.2f MiB "
                    "with %.2f MiB in use, which leaves %.2f MiB (%.2f MiB short); raise the limit or shrink the plan",
                    host / MIB, ag->plan.host_overhead / MIB, h->source, h->limit / MIB, h->used / MIB, h->avail / MIB,
                    (want - (h->avail < want ? h->avail : want)) / MIB);
        agent_fit_hints(ag);
        ag->summary.fits = 0;
        return RLT_ENOFIT;
    }
    double deadline = rlt_now_s() + ag->cfg.memory.wait_s;
    int rc;
    for (int attempt = 0;; attempt++) {
        rc = plan_commit(&ag->plan, e, &ag->bk, ag->summary.budget_bytes);
        int held_elsewhere = rc == RLT_ENOFIT && agent_plan_need(ag) <= ag->summary.budget_bytes;
        if (!held_elsewhere || rlt_now_s() + 1.0 > deadline) break;
        if (attempt == 0)
            rlt_log(RLT_LOG_INFO, "memory.wait_s: the arena could not be reserved (%s); retrying once a second for %.0f s",
                    e->msg, ag->cfg.memory.wait_s);
        struct timespec one = {1, 0};
        nanosleep(&one, NULL);
    }
    if (rc == RLT_ENOFIT && !ag->bk.device_is_host && ag->cfg.memory.on_oom == RLT_ON_OOM_CPU && !ag->cfg.comm) {
        rlt_log(RLT_LOG_WARN, "memory.on_oom cpu: %s; training on the CPU instead", e->msg);
        rlt_backend_close(&ag->bk);
        ag->backend_open = 0;
        RLT_TRY(rlt_backend_open_device(&ag->bk, e, (rlt_device){RLT_DEVICE_CPU, -1}, ag->cfg.cpu.threads, NULL, 0));
        ag->backend_open = 1;
        RLT_TRY(agent_plan_current(ag));
        rc = plan_commit(&ag->plan, e, &ag->bk, ag->summary.budget_bytes);
    }
    if (rc == RLT_ENOFIT) agent_fit_hints(ag);
    if (rc != RLT_OK) ag->summary.fits = 0;
    return rc;
}

uint64_t agent_plan_workspace(const rlt_agent *ag, void **at) {
    uint64_t bytes = 0;
    if (at) *at = NULL;
    for (int32_t i = 0; i < ag->plan.n; i++) {
        const rlt_plan_entry *en = &ag->plan.entries[i];
        if (strcmp(en->name, "backend.workspace") == 0 && en->bytes) {
            if (at && ag->plan.base[en->location]) *at = (unsigned char *)ag->plan.base[en->location] + en->offset;
            bytes = en->bytes;
        }
    }
    return bytes;
}

/* Acting beside the updates (the graph op's ASIDE modes, kernels/backend.h). Where the algorithm says an update variant
 * writes nothing acting reads (act_beside: TD3's critic-only updates), the agent marks lane 0 before the first such
 * update after one that did, and acting until the next such update runs on the aside stream after that mark: the
 * action is back while the update still runs, with the same bits, and the environment steps meanwhile. 1 when this
 * agent may: the backend has an aside stream (not the CPU, not a data-parallel rank), the algorithm has act_beside,
 * and RLT_ACT_ASIDE is not 0 (for A/B). */
static int agent_aside_probe(rlt_agent *ag) {
    const char *env = getenv("RLT_ACT_ASIDE");
    if (!ag->algo->act_beside || (env && strcmp(env, "0") == 0)) return 0;
    if (ag->bk.ops->graph(&ag->bk, RLT_GRAPH_ASIDE_MARK, 0) == RLT_OK) return 1;
    rlt_err_clear(&ag->err);
    return 0;
}

int agent_aside_before(rlt_agent *ag, int ok, int32_t *marked, int32_t variant) {
    if (!ok || !ag->algo->act_beside(ag, variant)) {
        *marked = 0;
        return RLT_OK;
    }
    if (!*marked) RLT_TRY(ag->bk.ops->graph(&ag->bk, RLT_GRAPH_ASIDE_MARK, 0));
    *marked = 1;
    return RLT_OK;
}

static int agent_setup(rlt_agent *ag, const rlt_space *obs, const rlt_space *act) {
    rlt_err *e = &ag->err;
    RLT_TRY(agent_prepare(ag, obs, act));
    RLT_TRY(agent_auto_fit(ag));
    RLT_TRY(agent_reserve(ag));
    ag->replay.size_dev = &ag->counters[RLT_CTR_REPLAY_SIZE];
    void *ws;
    uint64_t ws_bytes = agent_plan_workspace(ag, &ws);
    RLT_TRY(ag->bk.ops->workspace(&ag->bk, ws, ws_bytes, NULL));
    memset(ag->counters_host, 0, RLT_CTR_COUNT * sizeof(int64_t));
    RLT_TRY(agent_put(ag, ag->counters, ag->counters_host, RLT_CTR_COUNT * sizeof(int64_t)));
    RLT_TRY(ag->bk.ops->flat(&ag->bk, RLT_FLAT_FILL, ag->losses, NULL, RLT_LOSS_COUNT, 0.0f));
    RLT_TRY(agent_write_hparams(ag));
    if (ag->amp) {
        rlt_amp_state a0 = {RLT_AMP_INIT_SCALE, 0, 0, 0, 0};
        *ag->amp_host = a0;
        RLT_TRY(agent_put(ag, ag->amp, ag->amp_host, sizeof a0));
    }
    RLT_TRY(ag->algo->init_state(ag));
    rlt_rng_init(&ag->explore_rng, ag->cfg.seed, rlt_rank_stream(RLT_STREAM_EXPLORE, ag->cfg.rank));

    /* Capture every update variant once; training replays them (CUDA graphs). */
    if (ag->bk.ops->graph(&ag->bk, RLT_GRAPH_SUPPORTED, 0)) {
        for (int32_t slot = 0; slot < ag->algo->n_variants; slot++) {
            RLT_TRY(ag->bk.ops->graph(&ag->bk, RLT_GRAPH_BEGIN, slot));
            int urc = ag->algo->update_ops(ag, slot);
            int erc = ag->bk.ops->graph(&ag->bk, RLT_GRAPH_END, slot);
            RLT_TRY(urc);
            RLT_TRY(erc);
        }
        ag->graphs = 1;
    }
    RLT_TRY(ag->bk.ops->sync(&ag->bk));
    ag->aside_ok = agent_aside_probe(ag);
    /* What the process holds now that everything exists (kernels a library loaded at capture, the graphs'
     * resources): the figure the table prints, held to the process budget once more. */
    if (ag->bk.ops->measure_memory) {
        RLT_TRY(ag->bk.ops->measure_memory(&ag->bk));
        ag->summary.context_bytes = ag->bk.context_bytes;
        ag->summary.handle_bytes = ag->bk.handle_bytes;
        ag->summary.process_bytes = ag->summary.context_bytes + agent_plan_need(ag);
        if (!agent_process_fits(ag, "after init, the whole process holds")) return RLT_ENOFIT;
    }
    ag->allocs_at_seal = rlt_mem_alloc_count();
    (void)e;
    return RLT_OK;
}

/* One allocation: [agent | checkpoint writer | checkpoint reader | the algorithm's state], each 64-aligned. */
static uint64_t align64(uint64_t n) { return (n + 63) / 64 * 64; }

rlt_agent *agent_alloc(const rlt_config *cfg) {
    /* The name is bounded here, before validation: a field written directly may lack its NUL. */
    char name[sizeof cfg->algo + 1];
    memcpy(name, cfg->algo, sizeof cfg->algo);
    name[sizeof cfg->algo] = '\0';
    const rlt_algo *a = algo_registry_find(name);
    uint64_t state = a ? align64(a->state_bytes) : 0;
    uint64_t w_off = align64(sizeof(rlt_agent)), r_off = w_off + align64(sizeof(ckpt_writer));
    uint64_t s_off = r_off + align64(sizeof(ckpt_reader));
    unsigned char *base = rlt_mem_alloc(s_off + state, 64);
    if (!base) return NULL;
    rlt_agent *ag = (rlt_agent *)(void *)base;
    ag->ckpt_w = (ckpt_writer *)(void *)(base + w_off);
    ag->ckpt_r = (ckpt_reader *)(void *)(base + r_off);
    ag->algo_state = state ? base + s_off : NULL;
    ag->algo_state_cap = state;
    rlt_err_clear(&ag->err);
    ag->bk.err = &ag->err;
    ag->run_update = agent_dispatch_update;
    ag->run_act = agent_dispatch_act;
    return ag;
}

int rlt_agent_init(const rlt_config *cfg, const rlt_space *obs, const rlt_space *act, rlt_agent **out) {
    if (!out) return RLT_EINVAL;
    *out = NULL;
    if (!cfg) return RLT_EINVAL;
    rlt_agent *ag = agent_alloc(cfg);
    if (!ag) return RLT_ENOMEM;
    *out = ag;
    ag->cfg = *cfg;
    return agent_setup(ag, obs, act);
}

void rlt_agent_free(rlt_agent *ag) {
    if (!ag) return;
    if (ag->backend_open) {
        ag->bk.ops->sync(&ag->bk);
        plan_release(&ag->plan, &ag->bk);
        rlt_backend_close(&ag->bk);
    }
    rlt_mem_free(ag);
}

/* ag->run_update (agent_run_update, engine/agent_core.h): the group's batched launch while this agent is in
 * lock-step, else its own graph, else the algorithm's ops run eagerly. */
static int agent_dispatch_update(rlt_agent *ag, int32_t variant) {
    if (ag->lockstep) return lockstep_update(ag->lockstep, ag, variant);
    RLT_TRY(agent_aside_before(ag, ag->aside_ok, &ag->aside_marked, variant));
    if (ag->graphs) return ag->bk.ops->graph(&ag->bk, RLT_GRAPH_LAUNCH, variant);
    return ag->algo->update_ops(ag, variant);
}

/* ag->run_act (agent_run_act, engine/agent_core.h): the group's batched acting round while this agent is in
 * lock-step and the group captured acting for this many rows; else the algorithm's ops and a sync of this agent's
 * stream. */
static int agent_dispatch_act(rlt_agent *ag, int32_t rows) {
    if (ag->lockstep) {
        int served = 0;
        RLT_TRY(lockstep_act(ag->lockstep, ag, rows, &served));
        if (served) return RLT_OK;
    }
    if (!ag->algo->act_ops)
        RLT_FAIL(&ag->err, RLT_ESTATE, "algorithm %s acts through agent_run_act but has no act_ops", ag->algo->name);
    ag->acts++;
    if (ag->aside_marked && !ag->lockstep) {
        /* Every update since the mark left what acting reads as it was: act beside them. */
        rlt_backend *bk = &ag->bk;
        int rc = bk->ops->graph(bk, RLT_GRAPH_ASIDE_BEGIN, 0);
        if (rc == RLT_OK) rc = ag->algo->act_ops(ag, rows);
        int erc = bk->ops->graph(bk, RLT_GRAPH_ASIDE_END, 0);
        if (rc == RLT_OK && erc == RLT_OK) {
            ag->aside_acts++;
            return RLT_OK;
        }
        if (rc != RLT_ESTATE || erc != RLT_OK) return rc != RLT_OK ? rc : erc;
        /* An op of acting shares lane 0's state (a library product, a convolution): it waits from now on, and
         * this chunk runs again on lane 0 (nothing it issued aside is left running, and it wrote only its own
         * buffers). */
        rlt_log(RLT_LOG_INFO, "acting waits for every update from now on: %s", ag->err.msg);
        rlt_err_clear(&ag->err);
        ag->aside_ok = ag->aside_marked = 0;
    }
    RLT_TRY(ag->algo->act_ops(ag, rows));
    return ag->bk.ops->sync(&ag->bk);
}

/* A NaN or inf that reaches the replay or a forward pass poisons every network it touches (the agent then
 * acts NaN), so the API refuses it where it enters, naming the argument, row and element. uint8
 * observations cannot be non-finite. */
static int agent_check_rows(rlt_agent *ag, const char *fn, const char *arg, const float *x, int32_t rows, int64_t per_row) {
    int64_t bad = rlt_first_implausible(x, (int64_t)rows * per_row);
    if (bad < 0) return RLT_OK;
    char where[64] = "";
    if (per_row > 1) snprintf(where, sizeof where, " element %lld", (long long)(bad % per_row));
    RLT_FAIL(&ag->err, RLT_EINVAL, "%s: %s row %lld%s is %g: inputs must be finite and at most %g in magnitude (a NaN, "
             "an inf or a value whose square overflows float32 would poison the replay and the networks; check what "
             "the environment returned)", fn, arg, (long long)(bad / per_row), where, x[bad], (double)RLT_VALUE_ABS_MAX);
}

/* The float32 parts of dict rows, checked as agent_check_rows checks plain ones. */
static int agent_check_dict_rows(rlt_agent *ag, const char *fn, const char *arg, const void *rows, int32_t n) {
    const rlt_input_list *in = &ag->cfg.network.inputs;
    rlt_input_layout lay;
    config_inputs_layout(in, &lay);
    for (int32_t p = 0; p < lay.n; p++) {
        if (in->in[p].dtype != RLT_DTYPE_F32) continue;
        for (int32_t r = 0; r < n; r++) {
            const float *x = (const float *)(const void *)((const unsigned char *)rows + (int64_t)r * lay.row_bytes +
                                                           lay.offset[p]);
            int64_t bad = rlt_first_implausible(x, lay.elems[p]);
            if (bad >= 0)
                RLT_FAIL(&ag->err, RLT_EINVAL, "%s: %s row %d, input '%s' element %lld is %g: inputs must be finite and "
                         "at most 1e18 in magnitude (a "
                         "NaN or inf would poison the replay and the networks; check what the environment returned)",
                         fn, arg, (int)r, in->in[p].name, (long long)bad, x[bad]);
        }
    }
    return RLT_OK;
}

int rlt_agent_act(rlt_agent *ag, const void *obs, int32_t n, int32_t explore, void *actions) {
    if (!ag) return RLT_EINVAL;
    if (!obs || !actions || n < 0) RLT_FAIL(&ag->err, RLT_EINVAL, "rlt_agent_act: obs and actions must be non-NULL, n >= 0");
    if (!ag->plan.sealed) RLT_FAIL(&ag->err, RLT_ESTATE, "rlt_agent_act on an agent whose init failed");
    if (ag->obs_space.dtype == RLT_DTYPE_F32) RLT_TRY(agent_check_rows(ag, "rlt_agent_act", "obs", obs, n, ag->obs_dim));
    if (ag->obs_space.kind == RLT_SPACE_DICT) RLT_TRY(agent_check_dict_rows(ag, "rlt_agent_act", "obs", obs, n));
    return ag->algo->act(ag, obs, n, explore, actions);
}

int rlt_agent_observe(rlt_agent *ag, const void *obs, const void *actions, const float *rewards, const void *next_obs,
                      const uint8_t *terminated, const uint8_t *truncated, int32_t n) {
    if (!ag) return RLT_EINVAL;
    if (!obs || !actions || !rewards || !next_obs || !terminated || n < 0)
        RLT_FAIL(&ag->err, RLT_EINVAL, "rlt_agent_observe: every array but truncated must be non-NULL, n >= 0");
    if (!ag->plan.sealed) RLT_FAIL(&ag->err, RLT_ESTATE, "rlt_agent_observe on an agent whose init failed");
    /* Every input is checked before any row is stored, so a refused batch leaves the replay as it was. */
    const char *fn = "rlt_agent_observe";
    if (ag->obs_space.dtype == RLT_DTYPE_F32) {
        RLT_TRY(agent_check_rows(ag, fn, "obs", obs, n, ag->obs_dim));
        RLT_TRY(agent_check_rows(ag, fn, "next_obs", next_obs, n, ag->obs_dim));
    }
    if (ag->obs_space.kind == RLT_SPACE_DICT) {
        RLT_TRY(agent_check_dict_rows(ag, fn, "obs", obs, n));
        RLT_TRY(agent_check_dict_rows(ag, fn, "next_obs", next_obs, n));
    }
    RLT_TRY(agent_check_rows(ag, fn, "rewards", rewards, n, 1));
    if (ag->act_space.kind == RLT_SPACE_DISCRETE) {
        const int32_t *a = actions;
        for (int32_t i = 0; i < n; i++)
            if (a[i] < 0 || a[i] >= ag->act_space.n)
                RLT_FAIL(&ag->err, RLT_EINVAL, "%s: actions row %d is %d, outside this Discrete space's 0..%d", fn, (int)i,
                         (int)a[i], (int)ag->act_space.n - 1);
    } else {
        RLT_TRY(agent_check_rows(ag, fn, "actions", actions, n, ag->act_dim));
    }
    RLT_TRY(ag->algo->observe(ag, obs, actions, rewards, next_obs, terminated, truncated, n));
    ag->env_steps += n;
    return RLT_OK;
}

int rlt_agent_update(rlt_agent *ag, int32_t *done) {
    int32_t local = 0;
    if (!done) done = &local;
    *done = 0;
    if (!ag) return RLT_EINVAL;
    if (!ag->plan.sealed) RLT_FAIL(&ag->err, RLT_ESTATE, "rlt_agent_update on an agent whose init failed");
    return ag->algo->update(ag, done);
}

int rlt_agent_memory_plan(const rlt_agent *ag, rlt_plan_summary *summary, const rlt_plan_entry **entries) {
    if (!ag) return RLT_EINVAL;
    if (summary) *summary = ag->summary;
    if (entries) *entries = ag->plan.entries;
    return RLT_OK;
}

size_t rlt_agent_plan_format(const rlt_agent *ag, char *buf, size_t cap) {
    return ag ? plan_format(&ag->plan, &ag->summary, buf, cap) : 0;
}

uint64_t rlt_agent_allocations_after_init(const rlt_agent *ag) {
    return ag && ag->plan.sealed ? rlt_mem_alloc_count() - ag->allocs_at_seal : 0;
}

const char *rlt_agent_errmsg(const rlt_agent *ag) { return ag ? ag->err.msg : "no agent (allocation failed)"; }

int rlt_agent_counters(const rlt_agent *ag, int64_t *env_steps, int64_t *updates) {
    if (!ag) return RLT_EINVAL;
    if (env_steps) *env_steps = ag->env_steps;
    if (updates) *updates = ag->updates;
    return RLT_OK;
}
