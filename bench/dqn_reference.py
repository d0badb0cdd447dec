#!/usr/bin/env python3
"""dqn_reference.py: a reference DQN in PyTorch, written here after CleanRL's dqn.py (github.com/vwxyzjn/cleanrl,
cleanrl/dqn.py) and ported the same way as bench/td3_reference.py, run with the hyper-parameters and the
network of one of rltrain's DQN configs, so that bench/mujoco_parity.sh compares two implementations of the
same settings on CartPole-v1 and MinAtar Breakout.

CleanRL's dqn.py, whose loop this keeps (its defaults, for the record: CartPole-v1, 500,000 steps, Adam 2.5e-4,
replay 10,000, gamma 0.99, tau 1.0, target update every 500 steps, batch 128, epsilon 1.0 -> 0.05 over 50% of
the run, learning starts 10,000, train every 10 steps, MLP 120-84, MSE loss, no gradient clipping, no double DQN):
  for global_step in range(total): epsilon = max(slope * global_step + start_e, end_e);
  a random action (env.action_space.sample()) when random.random() < epsilon, else argmax Q(s);
  store (s, real s', a, r, terminated) (the real last observation at a truncation: handle_timeout_termination
  off, "final_observation"); from global_step > learning_starts: every train_frequency steps an update on a
  batch drawn with replacement (np.random.randint, SB3's ReplayBuffer), and every target_network_frequency
  steps target <- tau * online + (1 - tau) * target.
What the rltrain configs add, and this reference therefore implements (each is SB3's or PyTorch's standard
form): gradient_steps updates per training round (SB3), Huber loss (F.smooth_l1_loss, delta 1), double DQN
(van Hasselt et al.: a* = argmax_a Q(s', a), y = r + gamma (1 - terminated) Q'(s', a*)), gradient-norm
clipping (clip_grad_norm_), convolutional torsos.
The hyper-parameters are read from the rltrain config itself (--config, default by environment):
  CartPole-v1          configs/dqn_cartpole.yaml: RL Baselines3 Zoo's tuned DQN for CartPole-v1 (50k steps,
                       lr 2.3e-3, batch 64, replay 100,000, learning starts 1000, train every 256 steps with 128
                       gradient steps, target copy every 10 steps, epsilon 1.0 -> 0.04 over 16%, MLP 256-256,
                       Huber, gradient clip 10, plain DQN);
  MinAtar/Breakout-v1  configs/dqn_minatar_breakout.yaml: the MinAtar paper's network and DQN settings
                       (16@3x3 conv, 128 units; batch 32, replay 100,000, learning starts 5000, one update per
                       step, target copy every 1000 steps, epsilon 1.0 -> 0.1 over 100,000 steps), with Adam
                       2.5e-4 in place of the paper's RMSProp, double DQN, Huber, gradient clip 10.
Adam has PyTorch's defaults otherwise (betas 0.9 / 0.999, eps 1e-8), as rltrain's. --set KEY=VALUE overrides a
config key as rltrain's --set does (same key names), so both sides get the same override.

Environments: CartPole-v1 from Gymnasium; MinAtar Breakout from the minatar package (Gymnasium id
"MinAtar/Breakout-v1": the minimal action set, sticky actions 0.1), its (10, 10, 4) boolean observation
transposed to (4, 10, 10) and fed as 0/1 floats as MinAtar's examples/dqn.py does (get_state: .float());
--obs-scale 0.00392157 (1/255) feeds them as rltrain's DQN does (agents/dqn.c scales uint8 observations by
1/255). Breakout episodes are cut (truncated) at 10,000 steps, as rltrain's built-in Breakout does.
Evaluation as rltrain's trainer: every train.eval_every steps and at the end, train.eval_episodes episodes
with epsilon dqn.eval_epsilon on a separate environment whose first reset only is seeded seed + 100.

  python3 bench/dqn_reference.py --env CartPole-v1 --seed 1 --out runs/ref/CartPole-v1/seed1.csv --device cpu
Writes CSV rows env_steps,eval_return,wall_s (one per evaluation, flushed as written).
"""
import argparse
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {"CartPole-v1": "configs/dqn_cartpole.yaml", "MinAtar/Breakout-v1": "configs/dqn_minatar_breakout.yaml"}
CONV_PRESETS = {"none": [], "minatar": [dict(out=16, kernel=3, stride=1, pad=0)],
                "nature": [dict(out=32, kernel=8, stride=4, pad=0), dict(out=64, kernel=4, stride=2, pad=0),
                           dict(out=64, kernel=3, stride=1, pad=0)]}
BREAKOUT_MAX_STEPS = 10000  # rltrain's built-in Breakout truncates there (envs/minatar_breakout.c)


def load_config(path, overrides):
    """The rltrain config as nested dicts, with KEY=VALUE overrides (values in YAML flow syntax)."""
    import yaml

    with open(path) as f:
        cfg = yaml.safe_load(f)
    for s in overrides:
        key, _, text = s.partition("=")
        node = cfg
        parts = key.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = yaml.safe_load(text)
    return cfg


class QNetwork(nn.Module):
    """Optional conv torso (ReLU after each layer), then an MLP with ReLU hidden layers and a linear output."""

    def __init__(self, obs_shape, n_actions, conv, hidden):
        super().__init__()
        layers = []
        if conv:
            c, h, w = obs_shape
            for l in conv:
                k, s, p = l["kernel"], l.get("stride", 1), l.get("pad", 0)
                layers += [nn.Conv2d(c, l["out"], k, stride=s, padding=p), nn.ReLU()]
                c, h, w = l["out"], (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            layers.append(nn.Flatten())
            width = c * h * w
        else:
            width = int(np.prod(obs_shape))
        for n in hidden:
            layers += [nn.Linear(width, n), nn.ReLU()]
            width = n
        layers.append(nn.Linear(width, n_actions))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


def linear_schedule(start_e, end_e, duration, t):
    if duration <= 0:
        return end_e
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


class ReplayBuffer:
    """SB3's ReplayBuffer as CleanRL uses it (handle_timeout_termination off): a ring of observations, real next
    observations, actions, rewards and terminated flags, sampled with replacement by np.random.randint.
    Frames [obs | next_obs] share one array in the observation's dtype (uint8 images stay uint8 until the
    device converts them); [action, reward, terminated] are one float32 array."""

    def __init__(self, size, obs_shape, obs_dtype):
        self.size_max, self.pos, self.size = size, 0, 0
        self.O = int(np.prod(obs_shape))
        self.frames = np.zeros((size, 2 * self.O), dtype=obs_dtype)
        self.scalars = np.zeros((size, 3), dtype=np.float32)

    def add(self, obs, next_obs, action, reward, terminated):
        self.frames[self.pos, :self.O] = np.asarray(obs).reshape(-1)
        self.frames[self.pos, self.O:] = np.asarray(next_obs).reshape(-1)
        self.scalars[self.pos] = (action, reward, terminated)
        self.pos = (self.pos + 1) % self.size_max
        self.size = min(self.size + 1, self.size_max)

    def sample_into(self, frames, scalars, batch_size):
        ind = np.random.randint(0, self.size, size=batch_size)
        np.take(self.frames, ind, axis=0, out=frames)
        np.take(self.scalars, ind, axis=0, out=scalars)


class Learner:
    """DQN updates on batches copied into static device buffers, eagerly or as one captured CUDA graph."""

    WARMUP = 3

    def __init__(self, q, target, optimizer, rb, obs_shape, args, hp, graphs):
        self.q, self.target, self.opt, self.rb = q, target, optimizer, rb
        self.obs_shape, self.obs_scale = obs_shape, args.obs_scale
        self.B = hp["batch"]
        self.gamma, self.double, self.huber, self.max_norm = hp["gamma"], hp["double"], hp["huber"], hp["max_norm"]
        dev = next(q.parameters()).device
        pin = dev.type == "cuda"
        self.h_frames = torch.zeros((self.B, 2 * rb.O), dtype=torch.from_numpy(rb.frames[:1]).dtype, pin_memory=pin)
        self.h_scalars = torch.zeros((self.B, 3), dtype=torch.float32, pin_memory=pin)
        self.d_frames = torch.zeros_like(self.h_frames, device=dev)
        self.d_scalars = torch.zeros_like(self.h_scalars, device=dev)
        self.copied = torch.cuda.Event() if pin else None
        self.graphs = graphs and pin
        self.updates = 0
        self.graph = None

    def _update(self):
        O, B = self.rb.O, self.B
        obs = self.d_frames[:, :O].float().mul(self.obs_scale).view(B, *self.obs_shape)
        next_obs = self.d_frames[:, O:].float().mul(self.obs_scale).view(B, *self.obs_shape)
        actions = self.d_scalars[:, 0:1].long()
        rewards, dones = self.d_scalars[:, 1], self.d_scalars[:, 2]
        with torch.no_grad():
            if self.double:
                best = self.q(next_obs).argmax(dim=1, keepdim=True)
                target_q = self.target(next_obs).gather(1, best).squeeze(1)
            else:
                target_q, _ = self.target(next_obs).max(dim=1)
            td_target = rewards + self.gamma * target_q * (1 - dones)
        old_val = self.q(obs).gather(1, actions).squeeze(1)
        loss = F.smooth_l1_loss(old_val, td_target) if self.huber else F.mse_loss(td_target, old_val)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        if self.max_norm > 0:
            nn.utils.clip_grad_norm_(self.q.parameters(), self.max_norm)
        self.opt.step()

    def train(self):
        if self.copied is not None:
            self.copied.synchronize()
        self.rb.sample_into(self.h_frames.numpy(), self.h_scalars.numpy(), self.B)
        nb = self.copied is not None
        self.d_frames.copy_(self.h_frames, non_blocking=nb)
        self.d_scalars.copy_(self.h_scalars, non_blocking=nb)
        if self.copied is not None:
            self.copied.record()
        self.updates += 1
        if not self.graphs:
            self._update()
            return
        if self.graph is not None:
            self.graph.replay()
            return
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._update()
        torch.cuda.current_stream().wait_stream(side)
        if self.updates >= self.WARMUP:
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._update()
            torch.cuda.synchronize()


class Env:
    """One Gymnasium environment with observations as the network takes them (channels first)."""

    def __init__(self, env_id):
        import gymnasium as gym

        if env_id.startswith("MinAtar/"):
            if env_id not in gym.registry:  # minatar registers its ids through an entry point; make sure
                from minatar.gym import register_envs

                register_envs()
            self.env = gym.make(env_id, max_episode_steps=BREAKOUT_MAX_STEPS)
            self.channels_last = True
        else:
            self.env = gym.make(env_id)
            self.channels_last = False
        self.action_space = self.env.action_space
        shape = self.env.observation_space.shape
        self.obs_shape = (shape[2], shape[0], shape[1]) if self.channels_last else shape
        self.obs_dtype = np.uint8 if self.channels_last else np.float32

    def _obs(self, o):
        o = np.asarray(o)
        return np.ascontiguousarray(o.transpose(2, 0, 1)).astype(np.uint8) if self.channels_last else o.astype(np.float32)

    def reset(self, seed=None):
        o, info = self.env.reset(seed=seed)
        return self._obs(o), info

    def step(self, a):
        o, r, term, trunc, info = self.env.step(int(a))
        return self._obs(o), float(r), bool(term), bool(trunc), info


def greedy(q, obs, scale, device):
    with torch.no_grad():
        x = torch.as_tensor(obs, device=device).float().mul(scale).unsqueeze(0)
        return int(q(x).argmax(dim=1).item())


def evaluate(q, env, episodes, epsilon, scale, device, first_seed):
    total = 0.0
    for ep in range(episodes):
        obs, _ = env.reset(seed=first_seed if ep == 0 else None)
        done, ret = False, 0.0
        while not done:
            a = env.action_space.sample() if epsilon > 0 and random.random() < epsilon else greedy(q, obs, scale, device)
            obs, r, term, trunc, _ = env.step(a)
            ret += r
            done = term or trunc
        total += ret
    return total / episodes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="CartPole-v1", help="CartPole-v1 or MinAtar/Breakout-v1")
    ap.add_argument("--config", help="the rltrain config to take the settings from (default: by --env)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (rltrain keys)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, help="train.total_steps (default: the config's)")
    ap.add_argument("--out", required=True, help="CSV: env_steps,eval_return,wall_s")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--graphs", action="store_true", help="replay the update as a CUDA graph (same math)")
    ap.add_argument("--obs-scale", type=float, default=1.0, help="factor on uint8 image observations (MinAtar: 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (several runs share the cores)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cfg_path = args.config or os.path.join(root, CONFIGS[args.env])
    cfg = load_config(cfg_path, args.set)
    train, dqn, net = cfg.get("train", {}), cfg["dqn"], cfg.get("network", {})
    total = int(args.steps or train.get("total_steps", 20000))
    conv = net.get("conv", "none")
    conv = CONV_PRESETS[conv] if isinstance(conv, str) else conv
    hp = dict(batch=int(train.get("batch_size", 256)), gamma=float(dqn.get("gamma", 0.99)),
              double=bool(dqn.get("double", True)), huber=dqn.get("loss", "huber") == "huber",
              max_norm=float(dqn.get("max_grad_norm", 10)))
    lr, tau = float(dqn.get("lr", 2.5e-4)), float(dqn.get("tau", 1.0))
    learning_starts, train_freq = int(dqn.get("learning_starts", 10000)), int(dqn.get("train_freq", 10))
    gradient_steps, target_every = int(dqn.get("gradient_steps", 1)), int(dqn.get("target_update_every", 500))
    eps_start, eps_end = float(dqn.get("eps_start", 1.0)), float(dqn.get("eps_end", 0.05))
    eps_fraction, eval_eps = float(dqn.get("eps_fraction", 0.5)), float(dqn.get("eval_epsilon", 0.05))
    eval_every, eval_episodes = int(train.get("eval_every", 2000)), int(train.get("eval_episodes", 10))
    capacity = int(cfg.get("replay", {}).get("capacity", 100000))

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = True  # CleanRL's torch_deterministic default

    env, eval_env = Env(args.env), Env(args.env)
    env.action_space.seed(args.seed)
    eval_env.action_space.seed(args.seed + 100)
    n_actions = env.action_space.n
    q_network = QNetwork(env.obs_shape, n_actions, conv, net.get("hidden", [120, 84])).to(device)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=lr, capturable=args.graphs and device.type == "cuda")
    target_network = QNetwork(env.obs_shape, n_actions, conv, net.get("hidden", [120, 84])).to(device)
    target_network.load_state_dict(q_network.state_dict())
    rb = ReplayBuffer(capacity, env.obs_shape, env.obs_dtype)
    learner = Learner(q_network, target_network, optimizer, rb, env.obs_shape, args, hp, args.graphs)
    scale = args.obs_scale if env.channels_last else 1.0

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    out = open(args.out, "w")
    out.write("env_steps,eval_return,wall_s\n")
    out.flush()
    t0 = time.time()
    eval_seed = args.seed + 100
    obs, _ = env.reset(seed=args.seed)
    for global_step in range(total):
        epsilon = linear_schedule(eps_start, eps_end, eps_fraction * total, global_step)
        if random.random() < epsilon:
            action = env.action_space.sample()
        else:
            action = greedy(q_network, obs, scale, device)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        rb.add(obs, next_obs, action, reward, float(terminated))  # next_obs is the real last one at an end
        obs = next_obs
        if terminated or truncated:
            obs, _ = env.reset()
        if global_step > learning_starts:
            if global_step % train_freq == 0:
                for _ in range(gradient_steps):
                    learner.train()
            if global_step % target_every == 0:
                with torch.no_grad():
                    for tp, qp in zip(target_network.parameters(), q_network.parameters()):
                        tp.data.copy_(tau * qp.data + (1.0 - tau) * tp.data)
        if (eval_every > 0 and (global_step + 1) % eval_every == 0) or global_step + 1 == total:
            ret = evaluate(q_network, eval_env, eval_episodes, eval_eps, scale, device, eval_seed)
            eval_seed = None  # only the evaluation environment's first reset is seeded
            wall = time.time() - t0
            out.write(f"{global_step + 1},{ret:.6f},{wall:.3f}\n")
            out.flush()
            if not args.quiet:
                print(f"{args.env} seed {args.seed}: step {global_step + 1} eval {ret:.2f} "
                      f"({learner.updates} updates, {wall:.0f} s)", flush=True)
    out.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # a deadline's SIGINT: the rows written so far stay in the CSV
        sys.exit(130)
