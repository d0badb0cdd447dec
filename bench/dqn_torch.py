"""dqn_torch.py: the PyTorch reference for rltrain's DQN update benchmark (bench/RESULTS.md).

The same update rltrain's agents/dqn.c performs, written the way a PyTorch user would (CleanRL's dqn.py
and dqn_atari.py style), eager mode, fp32 (TF32 off):
  sample a batch of indices on the GPU from a replay that lives on the GPU (uint8 frames for images),
  double-DQN target with a target network, Huber loss on the taken actions, Adam, gradient-norm clip 10.

Cases (--case): mlp    4 -> 120 -> 84 -> 2, batch 128 (CleanRL's CartPole network)
                nature 4x84x84 uint8, Nature CNN (32@8x8/4, 64@4x4/2, 64@3x3/1, 512), 6 actions, batch 32
Prints updates/s and GPU memory (max allocated, reserved, and the process's total from nvidia-smi).
Usage: python3 bench/dqn_torch.py --case mlp|nature [--updates 2000] [--device cuda:0]
"""
import argparse
import os
import subprocess
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def make_net(case, n_actions):
    if case == "mlp":
        return nn.Sequential(nn.Linear(4, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, n_actions))
    return nn.Sequential(
        nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU(),
        nn.Linear(512, n_actions))


def process_gpu_mib():
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            pid, mib = [x.strip() for x in line.split(",")]
            if int(pid) == os.getpid():
                return f"{int(mib)} MiB"
    except Exception:  # noqa: BLE001 - memory reporting is best effort
        pass
    return "n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=("mlp", "nature"), default="mlp")
    ap.add_argument("--updates", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--replay", type=int, default=100000)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    torch.manual_seed(0)
    if args.case == "mlp":
        n_actions, batch, obs_shape, dtype, scale = 2, 128, (4,), torch.float32, 1.0
    else:
        n_actions, batch, obs_shape, dtype, scale = 6, 32, (4, 84, 84), torch.uint8, 1.0 / 255.0
        args.replay = min(args.replay, 20000)  # 28 KB frames: keep the replay at 560 MB
    q = make_net(args.case, n_actions).to(dev)
    q_target = make_net(args.case, n_actions).to(dev)
    q_target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=2.5e-4)
    n = args.replay
    if dtype == torch.uint8:
        frames = torch.randint(0, 256, (n,) + obs_shape, dtype=torch.uint8, device=dev)
    else:
        frames = torch.rand((n,) + obs_shape, device=dev) - 0.5
    actions = torch.randint(0, n_actions, (n,), device=dev)
    rewards = torch.rand(n, device=dev)
    terms = (torch.rand(n, device=dev) < 0.01).float()

    def update():
        idx = torch.randint(0, n - 1, (batch,), device=dev)
        obs = frames[idx].float() * scale
        nxt = frames[idx + 1].float() * scale
        with torch.no_grad():
            a_star = q(nxt).argmax(dim=1, keepdim=True)
            target = rewards[idx] + 0.99 * (1.0 - terms[idx]) * q_target(nxt).gather(1, a_star).squeeze(1)
        qa = q(obs).gather(1, actions[idx].unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(qa, target)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        nn.utils.clip_grad_norm_(q.parameters(), 10.0)
        opt.step()
        return loss

    for _ in range(args.warmup):
        update()
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    t0 = time.perf_counter()
    for _ in range(args.updates):
        loss = update()
    torch.cuda.synchronize(dev)
    dt = time.perf_counter() - t0
    mib = 1024.0 * 1024.0
    print(f"torch eager dqn-{args.case}  updates/s {args.updates / dt:8.0f}  max_allocated "
          f"{torch.cuda.max_memory_allocated(dev) / mib:.1f} MiB  reserved {torch.cuda.memory_reserved(dev) / mib:.1f} MiB"
          f"  process {process_gpu_mib()}  (batch {batch}, replay {n}, loss {loss.item():.4g}, torch {torch.__version__})")


if __name__ == "__main__":
    main()
