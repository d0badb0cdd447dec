#!/usr/bin/env python3
"""td3_reference.py: the TD3 authors' reference implementation (github.com/sfujim/TD3, TD3.py and main.py),
rewritten here with its math unchanged and ported to Gymnasium's terminated / truncated API, so that
rltrain's learning curves on MuJoCo can be compared with it side by side (bench/mujoco_parity.sh).

What it computes (TD3.py and main.py at their latest revision):
  actor  obs -> 256 -> 256 -> act, ReLU, max_action * tanh;  twin critics cat(obs, act) -> 256 -> 256 -> 1, ReLU;
  PyTorch's default nn.Linear initialisation; Adam (lr 3e-4, betas 0.9 / 0.999, eps 1e-8) for the actor and
  one for both critics; discount 0.99, tau 0.005; target policy smoothing N(0, 0.2 max_action) clipped to
  +-0.5 max_action, the noisy target action clipped to [-max_action, max_action]; critic loss
  mse(Q1, y) + mse(Q2, y); every 2nd update (total_it % 2 == 0) the actor step on -mean Q1(s, pi(s)), then
  Polyak averaging of the critic targets and the actor target; exploration N(0, 0.1 max_action) added to
  the policy's action and clipped to the bounds; env.action_space.sample() for the first start_timesteps
  steps, and one update per step from step start_timesteps on (t >= start_timesteps, t counted from 0);
  replay of 1e6 transitions, batches of 256 drawn with replacement (np.random.randint(0, size));
  an evaluation every 5000 steps of 10 episodes of the deterministic policy on a separate environment
  whose first reset of each evaluation is seeded seed + 100 (main.py makes a new environment and seeds it
  for each evaluation, so every evaluation starts from the same 10 initial states).

The Gymnasium port: main.py's done_bool ("0 at the time limit, else done") is exactly `terminated`, so the
replay stores not_done = 1 - terminated; the next observation stored at an episode's end is the real last
observation (env.step's), and the environment is reset after the transition is stored and the update run.
Seeding as main.py: torch.manual_seed, np.random.seed, env.action_space.seed(seed), and the first
env.reset(seed=seed) (gym's env.seed(seed) before the first reset).

Changes that leave the math alone:
  - observations and rewards are stored as float32 (utils.py stores float64 and converts each batch with
    torch.FloatTensor: the same float32 values reach the networks);
  - --graphs (CUDA only) captures the two update variants (critic only; critic + actor + Polyak) as CUDA
    graphs: Adam(capturable=True), the sampled batch copied into static buffers, the target noise drawn by
    torch.randn_like inside the graph (the generator's offset advances on each replay). The first updates
    run eagerly (they are the warm-up the capture needs); the capture executes nothing;
  - evaluation runs the deterministic actor on a float32 NumPy copy of its weights (copied at each
    evaluation): the same function, rounded on the CPU instead of the GPU; training never reads it.

  python3 bench/td3_reference.py --env Hopper-v5 --seed 1 --steps 300000 --start-steps 25000 \
      --out runs/ref/Hopper-v5/seed1.csv --device cuda --graphs
Writes CSV rows env_steps,eval_return,wall_s (one per evaluation, flushed as written).
"""
import argparse
import copy
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Actor(nn.Module):
    def __init__(self, state_dim, action_dim, max_action, hidden=256):
        super().__init__()
        self.l1 = nn.Linear(state_dim, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, action_dim)
        self.max_action = max_action

    def forward(self, state):
        a = F.relu(self.l1(state))
        a = F.relu(self.l2(a))
        return self.max_action * torch.tanh(self.l3(a))


class Critic(nn.Module):
    def __init__(self, state_dim, action_dim, hidden=256):
        super().__init__()
        self.l1 = nn.Linear(state_dim + action_dim, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, 1)
        self.l4 = nn.Linear(state_dim + action_dim, hidden)
        self.l5 = nn.Linear(hidden, hidden)
        self.l6 = nn.Linear(hidden, 1)

    def forward(self, state, action):
        sa = torch.cat([state, action], 1)
        q1 = self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))
        q2 = self.l6(F.relu(self.l5(F.relu(self.l4(sa)))))
        return q1, q2

    def Q1(self, state, action):
        sa = torch.cat([state, action], 1)
        return self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))


class ReplayBuffer:
    """utils.ReplayBuffer: a ring of max_size rows, sampled with replacement by np.random.randint. One row is
    [state | action | next_state | reward | not_done] in one float32 array, so a batch is one gather and one
    host-to-device copy."""

    def __init__(self, state_dim, action_dim, max_size=int(1e6)):
        self.max_size, self.ptr, self.size = max_size, 0, 0
        self.O, self.A = state_dim, action_dim
        self.width = 2 * state_dim + action_dim + 2
        self.rows = np.zeros((max_size, self.width), dtype=np.float32)

    def add(self, state, action, next_state, reward, done):
        O, A = self.O, self.A
        row = self.rows[self.ptr]
        row[:O] = state
        row[O:O + A] = action
        row[O + A:2 * O + A] = next_state
        row[2 * O + A] = reward
        row[2 * O + A + 1] = 1.0 - done
        self.ptr = (self.ptr + 1) % self.max_size
        self.size = min(self.size + 1, self.max_size)

    def sample_into(self, out, batch_size):
        ind = np.random.randint(0, self.size, size=batch_size)
        np.take(self.rows, ind, axis=0, out=out)

    def split(self, t):
        """(state, action, next_state, reward, not_done) views of a batch tensor of rows."""
        O, A = self.O, self.A
        return t[:, :O], t[:, O:O + A], t[:, O + A:2 * O + A], t[:, 2 * O + A:2 * O + A + 1], t[:, 2 * O + A + 1:]


class TD3:
    """TD3.py's TD3 class; train() is its train(), the batch coming from a device tensor of replay rows."""

    def __init__(self, state_dim, action_dim, max_action, device, discount=0.99, tau=0.005, policy_noise=0.2,
                 noise_clip=0.5, policy_freq=2, lr=3e-4, hidden=256, capturable=False):
        self.device = device
        self.actor = Actor(state_dim, action_dim, max_action, hidden).to(device)
        self.actor_target = copy.deepcopy(self.actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=lr, capturable=capturable)
        self.critic = Critic(state_dim, action_dim, hidden).to(device)
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=lr, capturable=capturable)
        self.max_action = max_action
        self.discount, self.tau = discount, tau
        self.policy_noise, self.noise_clip, self.policy_freq = policy_noise, noise_clip, policy_freq
        self.total_it = 0

    def select_action(self, state):
        state = torch.FloatTensor(state.reshape(1, -1)).to(self.device)
        return self.actor(state).cpu().data.numpy().flatten()

    def update(self, batch, split, actor_step):
        """One update on the batch (TD3.py's train body); actor_step says whether total_it % policy_freq == 0."""
        state, action, next_state, reward, not_done = split(batch)
        with torch.no_grad():
            noise = (torch.randn_like(action) * self.policy_noise).clamp(-self.noise_clip, self.noise_clip)
            next_action = (self.actor_target(next_state) + noise).clamp(-self.max_action, self.max_action)
            target_Q1, target_Q2 = self.critic_target(next_state, next_action)
            target_Q = torch.min(target_Q1, target_Q2)
            target_Q = reward + not_done * self.discount * target_Q
        current_Q1, current_Q2 = self.critic(state, action)
        critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
        self.critic_optimizer.zero_grad(set_to_none=False)
        critic_loss.backward()
        self.critic_optimizer.step()
        if actor_step:
            actor_loss = -self.critic.Q1(state, self.actor(state)).mean()
            self.actor_optimizer.zero_grad(set_to_none=False)
            actor_loss.backward()
            self.actor_optimizer.step()
            with torch.no_grad():
                for param, target_param in zip(self.critic.parameters(), self.critic_target.parameters()):
                    target_param.data.copy_(self.tau * param.data + (1 - self.tau) * target_param.data)
                for param, target_param in zip(self.actor.parameters(), self.actor_target.parameters()):
                    target_param.data.copy_(self.tau * param.data + (1 - self.tau) * target_param.data)


class Learner:
    """Runs TD3 updates from the replay, eagerly or through two captured CUDA graphs (--graphs)."""

    WARMUP = 4  # eager updates on a side stream before the capture (they are real updates: total_it counts them)

    def __init__(self, policy, replay, batch_size, graphs):
        self.policy, self.replay, self.batch_size = policy, replay, batch_size
        dev = policy.device
        pin = dev.type == "cuda"
        self.host = torch.zeros((batch_size, replay.width), dtype=torch.float32, pin_memory=pin)
        self.host_np = self.host.numpy()
        self.batch = torch.zeros((batch_size, replay.width), dtype=torch.float32, device=dev)
        self.copied = torch.cuda.Event() if pin else None
        self.graphs = graphs and pin
        self.g = None  # [critic only, critic + actor]

    def _load_batch(self):
        if self.copied is not None:
            self.copied.synchronize()  # the previous copy has read the pinned rows
        self.replay.sample_into(self.host_np, self.batch_size)
        self.batch.copy_(self.host, non_blocking=self.copied is not None)
        if self.copied is not None:
            self.copied.record()

    def train(self):
        p = self.policy
        p.total_it += 1
        actor_step = p.total_it % p.policy_freq == 0
        self._load_batch()
        if not self.graphs:
            p.update(self.batch, self.replay.split, actor_step)
            return
        if self.g is None:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                p.update(self.batch, self.replay.split, actor_step)
            torch.cuda.current_stream().wait_stream(side)
            if p.total_it >= self.WARMUP and actor_step:
                self._capture()
            return
        self.g[int(actor_step)].replay()

    def _capture(self):
        torch.cuda.synchronize()
        self.g = []
        for actor_step in (False, True):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self.policy.update(self.batch, self.replay.split, actor_step)
            self.g.append(g)
        torch.cuda.synchronize()


def numpy_actor(actor):
    """The actor's weights as float32 NumPy arrays, and its forward pass on one observation."""
    W = [(l.weight.detach().cpu().numpy().astype(np.float32), l.bias.detach().cpu().numpy().astype(np.float32))
         for l in (actor.l1, actor.l2, actor.l3)]
    m = np.float32(actor.max_action)

    def act(obs):
        x = np.asarray(obs, dtype=np.float32)
        x = np.maximum(W[0][0] @ x + W[0][1], 0)
        x = np.maximum(W[1][0] @ x + W[1][1], 0)
        return m * np.tanh(W[2][0] @ x + W[2][1])

    return act


def eval_policy(policy, eval_env, seed, eval_episodes=10):
    """main.py's eval_policy: the first reset of each evaluation seeded seed + 100."""
    act = numpy_actor(policy.actor)
    avg_reward = 0.0
    for ep in range(eval_episodes):
        state, _ = eval_env.reset(seed=seed + 100 if ep == 0 else None)
        done = False
        while not done:
            state, reward, terminated, truncated, _ = eval_env.step(act(state))
            avg_reward += reward
            done = terminated or truncated
    return avg_reward / eval_episodes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="HalfCheetah-v5")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=int(1e6), help="max_timesteps")
    ap.add_argument("--start-steps", type=int, default=25000, help="start_timesteps (main.py: 25e3)")
    ap.add_argument("--eval-every", type=int, default=5000, help="eval_freq")
    ap.add_argument("--eval-episodes", type=int, default=10)
    ap.add_argument("--expl-noise", type=float, default=0.1)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=256, help="TD3.py: 256 (the 2018 paper: 400-300, not offered)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--buffer", type=int, default=int(1e6), help="replay capacity (utils.py: 1e6)")
    ap.add_argument("--out", required=True, help="CSV: env_steps,eval_return,wall_s")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--graphs", action="store_true", help="replay the updates as CUDA graphs (same math)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (several runs share the cores)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    import gymnasium as gym

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # pure fp32, as rltrain computes
        torch.backends.cudnn.allow_tf32 = False
    env = gym.make(args.env)
    eval_env = gym.make(args.env)
    env.action_space.seed(args.seed)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    state_dim = env.observation_space.shape[0]
    action_dim = env.action_space.shape[0]
    max_action = float(env.action_space.high[0])
    policy = TD3(state_dim, action_dim, max_action, device, policy_noise=0.2 * max_action,
                 noise_clip=0.5 * max_action, lr=args.lr, hidden=args.hidden,
                 capturable=args.graphs and device.type == "cuda")
    replay = ReplayBuffer(state_dim, action_dim, args.buffer)
    learner = Learner(policy, replay, args.batch_size, args.graphs)

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    out = open(args.out, "w")
    out.write("env_steps,eval_return,wall_s\n")
    out.flush()
    t0 = time.time()
    state, _ = env.reset(seed=args.seed)
    episode_reward, episode_num = 0.0, 0
    for t in range(args.steps):
        if t < args.start_steps:
            action = env.action_space.sample()
        else:
            action = (policy.select_action(np.array(state))
                      + np.random.normal(0, max_action * args.expl_noise, size=action_dim)).clip(-max_action, max_action)
        next_state, reward, terminated, truncated, _ = env.step(action)
        replay.add(state, action, next_state, reward, float(terminated))
        state = next_state
        episode_reward += reward
        if t >= args.start_steps:
            learner.train()
        if terminated or truncated:
            state, _ = env.reset()
            episode_reward, episode_num = 0.0, episode_num + 1
        if (t + 1) % args.eval_every == 0:
            ret = eval_policy(policy, eval_env, args.seed, args.eval_episodes)
            wall = time.time() - t0
            out.write(f"{t + 1},{ret:.6f},{wall:.3f}\n")
            out.flush()
            if not args.quiet:
                print(f"{args.env} seed {args.seed}: step {t + 1} eval {ret:.1f} ({episode_num} episodes, "
                      f"{wall:.0f} s)", flush=True)
    out.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # a deadline's SIGINT: the rows written so far stay in the CSV
        sys.exit(130)
