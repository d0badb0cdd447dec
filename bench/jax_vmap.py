#!/usr/bin/env python3
"""jax_vmap.py: the JAX anchor for rltrain's many-seeds benchmark (issue #39, item 4): N independent agents
updated together with jax.vmap over stacked train states, K updates per jitted lax.scan call, in plain JAX
(no flax, no optax: MLPs and CNNs as pytrees of arrays, Adam and Polyak averaging written here).

What one update computes, per agent (each agent has its own parameters, optimiser state, PRNG key and replay):
  td3      CleanRL td3_continuous_action / the TD3 paper: actor obs->H->H->act (ReLU, tanh * max_action 1),
           twin critics cat(obs, act)->H->H->1 (ReLU), target copies of all three; a batch of uniform random
           indices into the agent's replay on the device (drawn inside the jitted call, so sampling is timed);
           a' = clip(pi'(s') + clip(0.2 N(0, 1), -0.5, 0.5), -1, 1); y = r + 0.99 (1 - done) min(Q1', Q2')(s', a');
           critic Adam step on mse(Q1, y) + mse(Q2, y); every 2nd update (policy_delay 2, the 2nd, 4th, ... as
           rltrain's agents/td3.c and the TD3 authors' code count them) an actor Adam step on -mean Q1(s, pi(s))
           after that update's critic step, then Polyak averaging (tau 0.005) of the three targets. lr 3e-4.
  dqn_mlp  CartPole sizes: obs 4 -> 120 -> 84 -> 2 (or --hidden 64 64), batch 128; dqn_cnn: 84x84x4 uint8 frames
           (NHWC), the Nature CNN (32 8x8/4, 64 4x4/2, 64 3x3/1, dense 512), 6 actions, batch 32, frames / 255.
           Both as rltrain's bench_dqn_update runs them (its defaults, agents/dqn.c): double DQN (the online
           network picks the next action, the target rates it), Huber loss (delta 1), global gradient-norm clip
           10, Adam lr 2.5e-4, gamma 0.99, the target network copied every --target-every (500) updates through
           a per-agent counter and a select. --dqn-loss mse --no-double --max-grad-norm 0 gives CleanRL's dqn.py.
  Adam everywhere: betas 0.9 / 0.999, eps 1e-8 added to sqrt(v_hat), bias correction, one optimiser for the
  actor and one for both critics (as CleanRL and rltrain).

Timing: states and replays are made on the device first; the jitted call (jit(vmap(scan of K updates)), the
state donated) runs twice as warm-up (compile excluded), then back to back enough calls to last >= --seconds,
closed by block_until_ready. updates/s aggregate = agents x K x calls / seconds.

Precision: highest = jax_default_matmul_precision 'highest' (exact fp32 products and convolutions); default
leaves JAX's default (on Ampere and Hopper GPUs XLA runs fp32 products on TF32 tensor cores). Several values
run one after another in this process.

  python3 bench/jax_vmap.py --algo td3|dqn_mlp|dqn_cnn [--agents 1 16 64 256] [--hidden 256 | --hidden 120 84]
                            [--batch N] [--precision highest|default ...] [--scan 50] [--seconds 2]
                            [--replay N] [--replay-gb 16] [--json OUT.json [--label NAME]] [--check]
--check verifies, on 2 agents, that the vmapped scan gives each agent exactly what that agent's update run
alone gives (no vmap, no scan, one jitted update at a time), that the agents differ, and the schedule (actor
and targets only on every 2nd TD3 update; the DQN target copied on the counter); it times nothing.
"""
import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

warnings.filterwarnings("ignore", message=".*donated buffers were not usable.*")

tmap = jax.tree_util.tree_map
tleaves = jax.tree_util.tree_leaves

# ---------------------------------------------------------------------------------------------- networks

def dense_init(key, fan_in, fan_out):
    """PyTorch nn.Linear's default: W and b uniform in +-1/sqrt(fan_in); W is (in, out)."""
    kw, kb = jax.random.split(key)
    bound = 1.0 / math.sqrt(fan_in)
    return (jax.random.uniform(kw, (fan_in, fan_out), jnp.float32, -bound, bound),
            jax.random.uniform(kb, (fan_out,), jnp.float32, -bound, bound))


def mlp_init(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [dense_init(k, i, o) for k, i, o in zip(keys, sizes[:-1], sizes[1:])]


def mlp_apply(params, x):
    """ReLU between layers, linear output."""
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i + 1 < len(params):
            x = jax.nn.relu(x)
    return x


# The Nature CNN (Mnih et al. 2015): (out channels, kernel, stride) per convolution, HWIO kernels on NHWC frames.
NATURE_CONV = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
FRAME = (84, 84, 4)


def conv_out_hw(h, convs):
    sizes = []
    for _, k, s in convs:
        h = (h - k) // s + 1
        sizes.append(h)
    return sizes


def cnn_init(key, n_act, hidden):
    keys = jax.random.split(key, len(NATURE_CONV) + 1)
    convs, cin = [], FRAME[2]
    for k, (cout, ks, _) in zip(keys, NATURE_CONV):
        fan_in = cin * ks * ks
        kw, kb = jax.random.split(k)
        bound = 1.0 / math.sqrt(fan_in)
        convs.append((jax.random.uniform(kw, (ks, ks, cin, cout), jnp.float32, -bound, bound),
                      jax.random.uniform(kb, (cout,), jnp.float32, -bound, bound)))
        cin = cout
    hw = conv_out_hw(FRAME[0], NATURE_CONV)[-1]
    return {"conv": convs, "head": mlp_init(keys[-1], [hw * hw * cin] + list(hidden) + [n_act])}


def cnn_apply(params, frames):
    x = frames.astype(jnp.float32) * (1.0 / 255.0)
    for (w, b), (_, _, s) in zip(params["conv"], NATURE_CONV):
        x = lax.conv_general_dilated(x, w, (s, s), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        x = jax.nn.relu(x + b)
    return mlp_apply(params["head"], x.reshape(x.shape[0], -1))


# ---------------------------------------------------------------------------------------------- Adam, Polyak

B1, B2, EPS = 0.9, 0.999, 1e-8


def adam_init(params):
    return {"m": tmap(jnp.zeros_like, params), "v": tmap(jnp.zeros_like, params), "t": jnp.zeros((), jnp.float32)}


def adam_step(params, grads, opt, lr):
    """One Adam step with bias correction: p -= lr m_hat / (sqrt(v_hat) + eps)."""
    t = opt["t"] + 1.0
    m = tmap(lambda m, g: B1 * m + (1.0 - B1) * g, opt["m"], grads)
    v = tmap(lambda v, g: B2 * v + (1.0 - B2) * g * g, opt["v"], grads)
    c1, c2 = 1.0 - B1 ** t, 1.0 - B2 ** t
    params = tmap(lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + EPS), params, m, v)
    return params, {"m": m, "v": v, "t": t}


def polyak(target, online, tau):
    return tmap(lambda t, p: (1.0 - tau) * t + tau * p, target, online)


# ---------------------------------------------------------------------------------------------- FLOP counts
# A dense product of a batch of B rows, in -> out, costs 2 B in out floating-point operations forward, and the
# same again for each of its two backward products (dX = dY W^T, dW = X^T dY). A convolution counts the same
# with B Ho Wo output positions and in = Cin kh kw. Only these products are counted (no bias, activation, loss,
# Adam or Polyak element-wise work): F(L) = sum over layers of 2 B in out, F0(L) its first layer's share.

def dense_flops(batch, layers):
    return [2.0 * batch * i * o for i, o in layers]


def td3_flops(obs, act, hidden, batch):
    """Per update, averaged over the policy delay of 2:
    critic step = F(A) [target actor on s'] + 2 x (F(C) [target critic] + F(C) [critic fwd] + F(C) [dW]
                  + F(C) - F0(C) [dX, none into the input]) = F(A) + 8 F(C) - 2 F0(C);
    actor step  = F(A) [actor fwd] + F(C) [Q1 fwd] + F(C) [Q1 dX down to the action] + F(A) [actor dW]
                  + F(A) - F0(A) [actor dX] = 3 F(A) - F0(A) + 2 F(C);
    per update  = critic step + actor step / 2.
    A = obs -> H1 -> H2 -> act, C = obs + act -> H1 -> H2 -> 1."""
    a = dense_flops(batch, zip([obs] + hidden, hidden + [act]))
    c = dense_flops(batch, zip([obs + act] + hidden, hidden + [1]))
    critic = sum(a) + 8 * sum(c) - 2 * c[0]
    actor = 3 * sum(a) - a[0] + 2 * sum(c)
    return critic + actor / 2


def dqn_layers(algo, obs, hidden, n_act):
    """(B-row multiplier, in, out) per product: convolutions have Ho Wo output positions per sample."""
    if algo == "dqn_mlp":
        return [(1, i, o) for i, o in zip([obs] + hidden, hidden + [n_act])]
    out, cin, hw = [], FRAME[2], conv_out_hw(FRAME[0], NATURE_CONV)
    for (cout, k, _), h in zip(NATURE_CONV, hw):
        out.append((h * h, cin * k * k, cout))
        cin = cout
    flat = hw[-1] * hw[-1] * cin
    return out + [(1, i, o) for i, o in zip([flat] + hidden, hidden + [n_act])]


def dqn_flops(algo, obs, hidden, n_act, batch, double):
    """Per update: Q(s') with the target network F(L), Q(s') with the online network F(L) (double DQN only),
    Q(s) forward F(L), dW F(L), dX F(L) - F0(L) (none into the frames) = (5 or 4) F(L) - F0(L)."""
    f = [2.0 * batch * m * i * o for m, i, o in dqn_layers(algo, obs, hidden, n_act)]
    return (5 if double else 4) * sum(f) - f[0]


# ---------------------------------------------------------------------------------------------- TD3

class TD3:
    """One agent's TD3; every function here is written for one agent and vmapped over the agents."""

    def __init__(self, a):
        self.obs, self.act, self.hidden, self.batch = a.obs, a.act, a.hidden, a.batch
        self.gamma, self.tau, self.lr = 0.99, 0.005, 3e-4
        self.policy_noise, self.noise_clip, self.max_action = 0.2, 0.5, 1.0
        self.replay_n = a.replay
        self.width = 2 * a.obs + a.act + 2  # obs | act | reward | next_obs | done, one float32 row each
        self.delay_mode = a.delay_mode

    def replay_bytes(self):
        return self.replay_n * self.width * 4

    def init(self, key):
        ka, k1, k2, kr = jax.random.split(key, 4)
        actor = mlp_init(ka, [self.obs] + self.hidden + [self.act])
        critic = (mlp_init(k1, [self.obs + self.act] + self.hidden + [1]),
                  mlp_init(k2, [self.obs + self.act] + self.hidden + [1]))
        return {"actor": actor, "actor_t": tmap(jnp.copy, actor), "critic": critic,
                "critic_t": tmap(jnp.copy, critic), "actor_opt": adam_init(actor), "critic_opt": adam_init(critic),
                "key": kr}

    def make_replay(self, key):
        """Random transitions: observations and actions uniform in [-1, 1], rewards in [0, 1], 1 done in 500."""
        ku, kd = jax.random.split(key)
        rows = jax.random.uniform(ku, (self.replay_n, self.width), jnp.float32, -1.0, 1.0)
        done = (jax.random.uniform(kd, (self.replay_n,)) < 0.002).astype(jnp.float32)
        rew_col = self.obs + self.act
        rows = rows.at[:, rew_col].set(jnp.abs(rows[:, rew_col]))
        return rows.at[:, -1].set(done)

    def policy(self, actor, obs):
        return jnp.tanh(mlp_apply(actor, obs)) * self.max_action

    def critic_step(self, s, replay):
        key, k_idx, k_noise = jax.random.split(s["key"], 3)
        rows = jnp.take(replay, jax.random.randint(k_idx, (self.batch,), 0, replay.shape[0]), axis=0)
        o, a = self.obs, self.act
        obs, act, rew = rows[:, :o], rows[:, o:o + a], rows[:, o + a:o + a + 1]
        nobs, done = rows[:, o + a + 1:2 * o + a + 1], rows[:, -1:]
        noise = jnp.clip(jax.random.normal(k_noise, act.shape) * self.policy_noise, -self.noise_clip,
                         self.noise_clip) * self.max_action
        nact = jnp.clip(self.policy(s["actor_t"], nobs) + noise, -self.max_action, self.max_action)
        nq_in = jnp.concatenate([nobs, nact], -1)
        tq = jnp.minimum(mlp_apply(s["critic_t"][0], nq_in), mlp_apply(s["critic_t"][1], nq_in))
        y = rew + self.gamma * (1.0 - done) * tq
        q_in = jnp.concatenate([obs, act], -1)

        def loss(critic):
            return (jnp.mean((mlp_apply(critic[0], q_in) - y) ** 2) + jnp.mean((mlp_apply(critic[1], q_in) - y) ** 2))

        grads = jax.grad(loss)(s["critic"])
        critic, opt = adam_step(s["critic"], grads, s["critic_opt"], self.lr)
        s = dict(s, critic=critic, critic_opt=opt, key=key)
        return s, obs

    def actor_step(self, s, obs):
        """The actor's Adam step on the critic just updated, then Polyak averaging of the three targets."""
        q1 = s["critic"][0]

        def loss(actor):
            return -jnp.mean(mlp_apply(q1, jnp.concatenate([obs, self.policy(actor, obs)], -1)))

        grads = jax.grad(loss)(s["actor"])
        actor, opt = adam_step(s["actor"], grads, s["actor_opt"], self.lr)
        return dict(s, actor=actor, actor_opt=opt, actor_t=polyak(s["actor_t"], actor, self.tau),
                    critic_t=polyak(s["critic_t"], s["critic"], self.tau))

    def update(self, s, replay, with_actor):
        """One update, with_actor a Python bool (the reference path of --check)."""
        s, obs = self.critic_step(s, replay)
        return self.actor_step(s, obs) if with_actor else s

    def scan(self, s, replay, k):
        """k updates (k even), the 1st of each pair critic-only, the 2nd critic + actor + targets.
        delay_mode (all three give the same bits, --check tests it):
          unroll  (default, the fastest correct one: no branch, no wasted work) the scan body is one pair of
                  updates, k / 2 iterations;
          cond    k iterations, lax.cond on the iteration's parity; the predicate is the scan index, the same for
                  every agent, so vmap keeps a real conditional (a batched predicate would run both branches);
          select  k iterations, the actor step computed every time and its results kept every 2nd (jnp.where):
                  the 'compute both and select' form, twice the actor work."""
        if self.delay_mode == "unroll":
            def pair(s, _):
                return self.update(self.update(s, replay, False), replay, True), None
            return lax.scan(pair, s, None, length=k // 2)[0]

        def one(s, i):
            s1, obs = self.critic_step(s, replay)
            actor_on = i % 2 == 1
            if self.delay_mode == "cond":
                return lax.cond(actor_on, lambda s: self.actor_step(s, obs), lambda s: s, s1), None
            s2 = self.actor_step(s1, obs)
            return tmap(lambda x2, x1: jnp.where(actor_on, x2, x1), s2, s1), None
        return lax.scan(one, s, jnp.arange(k))[0]

    def flops(self):
        return td3_flops(self.obs, self.act, self.hidden, self.batch)

    def sizes(self):
        return "obs=%d act=%d hidden=%s batch=%d" % (self.obs, self.act, "-".join(map(str, self.hidden)), self.batch)


# ---------------------------------------------------------------------------------------------- DQN

class DQN:
    """One agent's DQN (MLP or Nature CNN); written for one agent and vmapped over the agents."""

    def __init__(self, a):
        self.algo, self.cnn = a.algo, a.algo == "dqn_cnn"
        self.obs, self.n_act, self.hidden, self.batch = a.obs, a.actions, a.hidden, a.batch
        self.gamma, self.lr, self.target_every = 0.99, 2.5e-4, a.target_every
        self.double, self.loss_kind, self.max_grad_norm = a.double, a.dqn_loss, a.max_grad_norm
        self.replay_n = a.replay

    def replay_bytes(self):
        if self.cnn:  # replay_n + 1 frames (s' of row i is frame i + 1, CleanRL's memory-optimised buffer) + 3 floats
            return (self.replay_n + 1) * int(np.prod(FRAME)) + self.replay_n * 12
        return self.replay_n * (2 * self.obs + 3) * 4

    def init(self, key):
        kp, kr = jax.random.split(key)
        if self.cnn:
            params = cnn_init(kp, self.n_act, self.hidden)
        else:
            params = mlp_init(kp, [self.obs] + self.hidden + [self.n_act])
        return {"params": params, "target": tmap(jnp.copy, params), "opt": adam_init(params),
                "step": jnp.zeros((), jnp.int32), "key": kr}

    def make_replay(self, key):
        """Random transitions: actions uniform, rewards in {-1, 0, 1}, 1 done in 500; MLP observations uniform in
        [-1, 1] (a row: obs | action | reward | next_obs | done), CNN frames uniform uint8."""
        ko, ka, kr, kd = jax.random.split(key, 4)
        act = jax.random.randint(ka, (self.replay_n,), 0, self.n_act).astype(jnp.float32)
        rew = jax.random.randint(kr, (self.replay_n,), -1, 2).astype(jnp.float32)
        done = (jax.random.uniform(kd, (self.replay_n,)) < 0.002).astype(jnp.float32)
        if self.cnn:
            frames = jax.random.bits(ko, (self.replay_n + 1,) + FRAME, jnp.uint8)
            return {"frames": frames, "meta": jnp.stack([act, rew, done], -1)}
        o = jax.random.uniform(ko, (self.replay_n, 2, self.obs), jnp.float32, -1.0, 1.0)
        return jnp.concatenate([o[:, 0], act[:, None], rew[:, None], o[:, 1], done[:, None]], -1)

    def q(self, params, obs):
        return cnn_apply(params, obs) if self.cnn else mlp_apply(params, obs)

    def update(self, s, replay):
        key, k_idx = jax.random.split(s["key"])
        if self.cnn:
            n = replay["meta"].shape[0]
            idx = jax.random.randint(k_idx, (self.batch,), 0, n)
            obs, nobs = jnp.take(replay["frames"], idx, axis=0), jnp.take(replay["frames"], idx + 1, axis=0)
            meta = jnp.take(replay["meta"], idx, axis=0)
            act, rew, done = meta[:, 0], meta[:, 1], meta[:, 2]
        else:
            rows = jnp.take(replay, jax.random.randint(k_idx, (self.batch,), 0, replay.shape[0]), axis=0)
            o = self.obs
            obs, act, rew, nobs, done = rows[:, :o], rows[:, o], rows[:, o + 1], rows[:, o + 2:2 * o + 2], rows[:, -1]
        act = act.astype(jnp.int32)
        q_next_t = self.q(s["target"], nobs)
        if self.double:
            best = jnp.argmax(self.q(s["params"], nobs), axis=-1)
            q_next = jnp.take_along_axis(q_next_t, best[:, None], axis=-1)[:, 0]
        else:
            q_next = jnp.max(q_next_t, axis=-1)
        y = lax.stop_gradient(rew + self.gamma * (1.0 - done) * q_next)

        def loss(params):
            qa = jnp.take_along_axis(self.q(params, obs), act[:, None], axis=-1)[:, 0]
            d = qa - y
            if self.loss_kind == "huber":  # smooth L1, delta 1
                return jnp.mean(jnp.where(jnp.abs(d) < 1.0, 0.5 * d * d, jnp.abs(d) - 0.5))
            return jnp.mean(d * d)

        grads = jax.grad(loss)(s["params"])
        if self.max_grad_norm > 0:  # torch.nn.utils.clip_grad_norm_: scale by max / (norm + 1e-6) when above
            norm = jnp.sqrt(sum(jnp.sum(g * g) for g in tleaves(grads)))
            scale = jnp.minimum(1.0, self.max_grad_norm / (norm + 1e-6))
            grads = tmap(lambda g: g * scale, grads)
        params, opt = adam_step(s["params"], grads, s["opt"], self.lr)
        step = s["step"] + 1
        copy_now = step % self.target_every == 0
        target = tmap(lambda p, t: jnp.where(copy_now, p, t), params, s["target"])
        return {"params": params, "target": target, "opt": opt, "step": step, "key": key}

    def scan(self, s, replay, k):
        return lax.scan(lambda s, _: (self.update(s, replay), None), s, None, length=k)[0]

    def flops(self):
        return dqn_flops(self.algo, self.obs, self.hidden, self.n_act, self.batch, self.double)

    def sizes(self):
        net = ("nature-cnn-" if self.cnn else "obs=%d " % self.obs) + "-".join(map(str, self.hidden))
        return "%s actions=%d batch=%d" % (net, self.n_act, self.batch)


# ---------------------------------------------------------------------------------------------- set-up, timing

def make_algo(a):
    return TD3(a) if a.algo == "td3" else DQN(a)


def make_states_and_replays(alg, n, seed):
    """Stacked states (vmap of the per-agent init over per-agent keys), and the replays filled one agent at a time
    into a stacked buffer (donated, updated in place) so that no all-agents temporary of random bits is made."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 2 * n)
    states = jax.jit(jax.vmap(alg.init))(keys[:n])
    shape = jax.eval_shape(alg.make_replay, keys[n])
    replay = tmap(lambda sd: jnp.zeros((n,) + sd.shape, sd.dtype), shape)

    def put(replay, key, k):
        return tmap(lambda buf, x: lax.dynamic_update_index_in_dim(buf, x, k, 0), replay, alg.make_replay(key))
    put = jax.jit(put, donate_argnums=0)
    for k in range(n):
        replay = put(replay, keys[n + k], k)
    return states, replay


def block(tree):
    for x in tleaves(tree):
        x.block_until_ready()
    return tree


# Dense peaks in TFLOP/s per precision, from the device name (NVIDIA's data sheets; H200 = H100 SXM's chip).
PEAKS = (
    (("H100", "PCIE"), {"highest": 51.0, "default": 378.0, "bf16": 756.0}),
    (("H100", "NVL"), {"highest": 60.0, "default": 417.0, "bf16": 835.0}),
    (("H100",), {"highest": 67.0, "default": 494.0, "bf16": 989.0}),  # SXM (H100 80GB HBM3)
    (("H200",), {"highest": 67.0, "default": 494.0, "bf16": 989.0}),
    (("A100",), {"highest": 19.5, "default": 156.0, "bf16": 312.0}),
)


def device_peak(kind, precision):
    up = kind.upper()
    for words, peaks in PEAKS:
        if all(w in up for w in words):
            return peaks.get(precision)
    return None


def set_precision(p):
    jax.config.update("jax_default_matmul_precision", "highest" if p == "highest" else None)


def bench_one(a, n, precision, dev_kind):
    set_precision(precision)
    alg = make_algo(a)
    states, replay = make_states_and_replays(alg, n, a.seed)
    run = jax.jit(jax.vmap(lambda s, r: alg.scan(s, r, a.scan)), donate_argnums=0)
    t0 = time.perf_counter()
    states = block(run(states, replay))  # compiles
    compile_s = time.perf_counter() - t0
    states = block(run(states, replay))
    t0 = time.perf_counter()
    states = block(run(states, replay))
    calls = max(1, math.ceil(a.seconds / max(time.perf_counter() - t0, 1e-6)))
    while True:
        t0 = time.perf_counter()
        for _ in range(calls):
            states = run(states, replay)
        block(states)
        dt = time.perf_counter() - t0
        if dt >= a.seconds:
            break
        calls = math.ceil(calls * a.seconds / dt * 1.1)
    ups = n * a.scan * calls / dt
    flop_s = alg.flops() * ups
    peak = device_peak(dev_kind, precision)
    rec = {"algo": a.algo, "sizes": alg.sizes(), "agents": n, "precision": precision, "scan": a.scan,
           "updates_per_s": ups, "updates_per_s_per_agent": ups / n, "ms_per_call": 1e3 * dt / calls, "calls": calls,
           "seconds": dt, "compile_s": compile_s, "flop_per_update": alg.flops(), "tflop_s": flop_s / 1e12,
           "peak_tflop_s": peak, "replay_per_agent": alg.replay_n, "device": dev_kind, "jax": jax.__version__}
    if a.algo == "td3":
        rec["delay_mode"] = a.delay_mode
    pk = "  (%.1f%% of %g peak)" % (100 * flop_s / 1e12 / peak, peak) if peak else ""
    print("%-7s %s agents=%-4d precision=%-7s %10.0f updates/s  %8.0f /agent  %8.3f ms/call (K=%d)  %7.2f TFLOP/s%s"
          % (a.algo, alg.sizes(), n, precision, ups, ups / n, rec["ms_per_call"], a.scan, flop_s / 1e12, pk),
          flush=True)
    del states, replay
    return rec


def fit_replay(a, n_max):
    """Caps the per-agent replay so that n_max agents' replays fit in --replay-gb."""
    alg = make_algo(a)
    per = alg.replay_bytes() / alg.replay_n
    cap = int(a.replay_gb * 2 ** 30 / (n_max * per)) - 1
    if cap < a.replay:
        print("replay: %d transitions per agent (--replay %d x %d agents would pass --replay-gb %g)"
              % (cap, a.replay, n_max, a.replay_gb), flush=True)
        a.replay = max(cap, a.batch)


# ---------------------------------------------------------------------------------------------- --check

def check(a):
    """2 agents: the vmapped scan against each agent's updates run alone, one jitted update at a time."""
    set_precision("highest")
    a.replay = min(a.replay, 2000)
    alg = make_algo(a)
    n, k = 2, (a.scan if a.scan % 2 == 0 else a.scan + 1)
    states0, replay = make_states_and_replays(alg, n, a.seed)
    ok = True

    def agent(tree, i):
        return tmap(lambda x: x[i], tree)

    def maxdiff(x, y):
        return max(float(jnp.max(jnp.abs(u - v))) for u, v in zip(tleaves(x), tleaves(y)))

    def same(x, y):
        return all(bool(jnp.all(u == v)) for u, v in zip(tleaves(x), tleaves(y)))

    def report(name, good, detail=""):
        nonlocal ok
        ok &= bool(good)
        print("  %-4s %s%s" % ("ok" if good else "FAIL", name, detail), flush=True)

    print("check %s %s, 2 agents, %d updates, fp32 exact products" % (a.algo, alg.sizes(), k), flush=True)
    if a.algo == "td3":
        one_update = {w: jax.jit(lambda s, r, w=w: alg.update(s, r, w)) for w in (False, True)}
        modes = ("unroll", "cond", "select")
    else:
        one_update = {False: jax.jit(alg.update)}
        modes = (None,)
    # Each agent alone: no vmap, no scan. TD3's 2nd, 4th, ... updates take the actor step (rltrain's count).
    alone, trace = [], []
    for i in range(n):
        s, r, steps = agent(states0, i), agent(replay, i), []
        for u in range(k):
            s = one_update[a.algo == "td3" and u % 2 == 1](s, r)
            steps.append(s)
        alone.append(s)
        trace.append(steps)
    # Summation order may differ between a batched and a plain product (about 1e-8 seen on the CPU, 3e-6 for the
    # grouped convolutions of the CNN); an update that read another agent's data, key or state moves parameters by
    # the order of lr (3e-4 and 2.5e-4), 1e-2 seen: 1e-5 tells them apart.
    tol = 1e-5
    for mode in modes:
        if mode:
            alg.delay_mode = mode
        run = jax.jit(jax.vmap(lambda s, r: alg.scan(s, r, k)))
        out = block(run(states0, replay))
        for i in range(n):
            d = maxdiff(agent(out, i), alone[i])
            report("agent %d: vmapped scan%s equals its updates run alone" % (i, " (%s)" % mode if mode else ""),
                   d <= tol, ": max |diff| %.3g (tolerance %g)%s" % (d, tol, ", bit-identical" if d == 0 else ""))
    report("the two agents' parameters differ", maxdiff(alone[0], alone[1]) > 1e-3)
    s0 = agent(states0, 0)
    if a.algo == "td3":
        t = trace[0]
        report("update 1 changes the critics, not the actor nor any target",
               maxdiff(t[0]["critic"], s0["critic"]) > 0 and same(t[0]["actor"], s0["actor"])
               and same(t[0]["actor_t"], s0["actor_t"]) and same(t[0]["critic_t"], s0["critic_t"]))
        pol = tmap(lambda tt, p: 0.995 * tt + 0.005 * p, t[0]["critic_t"], t[1]["critic"])
        report("update 2 steps the actor and moves the targets by tau 0.005 toward the new networks",
               maxdiff(t[1]["actor"], s0["actor"]) > 0 and maxdiff(t[1]["critic_t"], pol) < 1e-7
               and maxdiff(t[1]["actor_t"], tmap(lambda tt, p: 0.995 * tt + 0.005 * p, s0["actor_t"],
                                                  t[1]["actor"])) < 1e-7)
        report("Adam counts: critic %d, actor %d after %d updates" % (k, k // 2, k),
               float(alone[0]["critic_opt"]["t"]) == k and float(alone[0]["actor_opt"]["t"]) == k // 2)
    else:
        t, every = trace[0], a.target_every
        copied = [u + 1 for u in range(k) if same(t[u]["target"], t[u]["params"])]
        report("the target network is copied on updates %s (every %d)" % (copied, every),
               copied == [u for u in range(1, k + 1) if u % every == 0] and len(copied) > 0)
        report("before the first copy the target is the initial network", same(t[0]["target"], s0["target"]))
    print("check %s" % ("passed" if ok else "FAILED"), flush=True)
    return ok


# ---------------------------------------------------------------------------------------------- main

DEFAULTS = {  # algo: obs, actions, hidden, batch, replay per agent
    "td3": (17, 6, [256], 256, 100000),
    "dqn_mlp": (4, 2, [120, 84], 128, 100000),
    "dqn_cnn": (None, 6, [512], 32, 10000),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--algo", choices=sorted(DEFAULTS), default="td3")
    ap.add_argument("--agents", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--hidden", type=int, nargs="+", help="TD3: H (H-H) or H1 H2; DQN: the dense widths "
                    "(default 256, 120 84, 512)")
    ap.add_argument("--batch", type=int, help="default 256 (td3), 128 (dqn_mlp), 32 (dqn_cnn)")
    ap.add_argument("--obs", type=int, help="observation size (td3 17, dqn_mlp 4)")
    ap.add_argument("--act", type=int, default=6, help="TD3 action size")
    ap.add_argument("--actions", type=int, help="DQN actions (dqn_mlp 2, dqn_cnn 6)")
    ap.add_argument("--precision", nargs="+", choices=("highest", "default"), default=["highest"])
    ap.add_argument("--scan", type=int, default=50, help="updates per jitted lax.scan call (even for td3)")
    ap.add_argument("--seconds", type=float, default=2.0, help="least timed seconds per configuration")
    ap.add_argument("--replay", type=int, help="transitions per agent (td3 and dqn_mlp 100000, dqn_cnn 10000)")
    ap.add_argument("--replay-gb", type=float, default=16.0, help="cap on all agents' replays together, GiB")
    ap.add_argument("--delay-mode", choices=("unroll", "cond", "select"), default="unroll",
                    help="how TD3's policy delay is written in the scan (TD3.scan says each)")
    ap.add_argument("--target-every", type=int, default=500, help="DQN target copy period, in updates")
    ap.add_argument("--dqn-loss", choices=("huber", "mse"), default="huber")
    ap.add_argument("--no-double", dest="double", action="store_false", help="plain DQN target (max over target Q)")
    ap.add_argument("--max-grad-norm", type=float, default=10.0, help="DQN global gradient-norm clip, 0: none")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="append one record per configuration to this JSON list")
    ap.add_argument("--label", help="a name stored in each JSON record (bench/seeds_vs_jax.sh joins on it)")
    ap.add_argument("--check", action="store_true", help="verify the vmapped update on 2 agents, time nothing")
    a = ap.parse_args()
    obs, n_act, hidden, batch, replay = DEFAULTS[a.algo]
    a.obs = a.obs or obs
    a.actions = a.actions or n_act
    a.hidden = a.hidden or hidden
    if a.algo == "td3" and len(a.hidden) == 1:
        a.hidden = a.hidden * 2
    a.batch = a.batch or batch
    a.replay = a.replay or replay
    if a.algo == "td3" and a.scan % 2:
        ap.error("--scan must be even for td3 (policy delay 2)")
    if a.check:
        if a.algo == "dqn_mlp" and "--target-every" not in sys.argv:
            a.target_every = 3
        if a.algo == "dqn_cnn" and "--target-every" not in sys.argv:
            a.target_every = 2
        if "--scan" not in sys.argv:
            a.scan = 6 if a.algo == "td3" else 7
        return 0 if check(a) else 1
    dev = jax.devices()[0]
    dev_kind = dev.device_kind
    print("jax %s on %s (%s); %s" % (jax.__version__, dev_kind, dev.platform,
                                     "TD3 policy delay: " + a.delay_mode if a.algo == "td3" else
                                     "DQN: %s, %s, grad clip %g, target every %d" % (
                                         "double" if a.double else "plain", a.dqn_loss, a.max_grad_norm,
                                         a.target_every)), flush=True)
    fit_replay(a, max(a.agents))
    for p in a.precision:
        for n in a.agents:
            rec = bench_one(a, n, p, dev_kind)
            if a.label:
                rec["label"] = a.label
            if a.json:  # after each configuration, so that a run cut short by a timeout keeps what it measured
                old = []
                if os.path.exists(a.json):
                    with open(a.json) as f:
                        old = json.load(f)
                with open(a.json, "w") as f:
                    json.dump(old + [rec], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
