#!/usr/bin/env python3
"""td3_torch.py: a PyTorch reference implementation of the exact TD3 update that rltrain's native engine
runs (agents/td3.c, agents/mlp.c), timed side by side with bench_td3_update; its printed lines are the
PyTorch reference rows of bench/RESULTS.md.

What one update computes (same as the engine, default sizes HalfCheetah: obs 17, act 6, 256-256, batch 256):
  actor obs->H->H->act (ReLU, tanh out); twin critics (obs+act)->H->H->1 (ReLU); nn.Linear default init;
  Adam lr 3e-4, betas (0.9, 0.999), eps 1e-8, one optimiser for the actor and one for both critics;
  a batch of uniform random indices into a replay of 100,000 float32 transitions held on the device;
  a' = clamp(pi'(s') + clamp(0.2 randn, -0.5, 0.5), -1, 1); y = r + 0.99 (1 - term) min(Q1', Q2')(s', a');
  critic step on mse(Q1, y) + mse(Q2, y); every 2nd update an actor step on -mean Q1(s, pi(s)) and
  Polyak averaging (tau 0.005) of all three targets.

Modes: eager   the TD3 authors' style (github sfujim/TD3, TD3.py), replay on the device, torch.randint
               sampling on the device (no host round trip);
       graphs  the same code captured as one CUDA graph per 2 updates (critic-only, then critic+actor),
               capturable Adam, sampling and noise drawn inside the graph;
       compile torch.compile(mode="reduce-overhead"); skipped with a message when it fails.
--mode all runs each mode in its own process, so that memory figures do not mix, and prints a table.

Precision (--precision, the engine's `precision` key; a comma list runs each in turn in this process):
       fp32    pure fp32 matmuls, TF32 off (the engine's default);
       tf32    torch.backends.cuda.matmul.allow_tf32 = True (set_float32_matmul_precision("high")): fp32 storage,
               matmuls on TF32 tensor cores (the engine's precision: tf32 does this for its large products);
       bf16    torch.autocast(dtype=torch.bfloat16) around the forwards and losses, fp32 master weights and
               optimiser (the engine's precision: bf16 keeps fp32 masters and 16-bit compute copies); the
               autocast cache is off, as CUDA graphs need.

  python3 bench/td3_torch.py [--device cuda:0] [--updates 2000] [--mode all|eager|graphs|compile]
                             [--obs 17 --act 6 --hidden 256 --batch 256] [--precision fp32|tf32|bf16[,...]]
                             [--tf32 (= --precision tf32)] [--json PATH]
"""
import argparse
import contextlib
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

GAMMA, TAU, POLICY_NOISE, NOISE_CLIP, LR = 0.99, 0.005, 0.2, 0.5, 3e-4
MODES = ("eager", "graphs", "compile")
PRECISIONS = ("fp32", "tf32", "bf16")


class Actor(nn.Module):
    def __init__(self, obs, act, hidden):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(obs, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, act)

    def forward(self, state):
        a = F.relu(self.l1(state))
        a = F.relu(self.l2(a))
        return torch.tanh(self.l3(a))  # max_action = 1: actions are normalised to [-1, 1]


class Critic(nn.Module):
    def __init__(self, obs, act, hidden):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(obs + act, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 1)
        self.l4, self.l5, self.l6 = nn.Linear(obs + act, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 1)

    def forward(self, state, action):
        sa = torch.cat([state, action], 1)
        q1 = self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))
        q2 = self.l6(F.relu(self.l5(F.relu(self.l4(sa)))))
        return q1, q2

    def Q1(self, state, action):
        sa = torch.cat([state, action], 1)
        return self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))


class Replay:
    """Synthetic transitions on the device, filled like bench/td3_update.c fills the engine's replay."""

    def __init__(self, size, obs, act, device):
        g = torch.Generator(device="cpu").manual_seed(1)
        self.size = size
        self.obs = (torch.rand(size, obs, generator=g) - 0.5).to(device)
        self.action = (2 * torch.rand(size, act, generator=g) - 1).to(device)
        self.reward = torch.rand(size, 1, generator=g).to(device)
        self.term = ((torch.arange(size) % 500) == 499).float().unsqueeze(1).to(device)
        self.next_obs = (torch.rand(size, obs, generator=g) - 0.5).to(device)


class TD3:
    def __init__(self, args, device, capturable, precision):
        self.batch, self.skip_critic_wgrad = args.batch, args.skip_critic_wgrad
        self.precision, self.device_type = precision, device.type
        self.actor = Actor(args.obs, args.act, args.hidden).to(device)
        self.actor_target = copy.deepcopy(self.actor)
        self.critic = Critic(args.obs, args.act, args.hidden).to(device)
        self.critic_target = copy.deepcopy(self.critic)
        adam = dict(lr=LR, betas=(0.9, 0.999), eps=1e-8, capturable=capturable)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), **adam)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), **adam)
        self.params = list(self.actor.parameters()) + list(self.critic.parameters())
        self.target_params = list(self.actor_target.parameters()) + list(self.critic_target.parameters())

    def amp(self):
        """bf16: autocast around forwards and losses (weights, gradients and Adam stay fp32). The cache of cast
        weights is off: CUDA graphs need that, and the eager mode does the same work for a fair comparison."""
        if self.precision == "bf16":
            return torch.autocast(device_type=self.device_type, dtype=torch.bfloat16, cache_enabled=False)
        return contextlib.nullcontext()

    def update(self, rb, actor_step):
        idx = torch.randint(0, rb.size, (self.batch,), device=rb.obs.device)
        state, action, reward, term, next_state = rb.obs[idx], rb.action[idx], rb.reward[idx], rb.term[idx], rb.next_obs[idx]
        with torch.no_grad(), self.amp():
            noise = (torch.randn_like(action) * POLICY_NOISE).clamp(-NOISE_CLIP, NOISE_CLIP)
            next_action = (self.actor_target(next_state).float() + noise).clamp(-1.0, 1.0)
            target_q1, target_q2 = self.critic_target(next_state, next_action)
            target_q = reward + (1.0 - term) * GAMMA * torch.min(target_q1, target_q2).float()
        with self.amp():
            current_q1, current_q2 = self.critic(state, action)
            critic_loss = F.mse_loss(current_q1.float(), target_q) + F.mse_loss(current_q2.float(), target_q)
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        if not actor_step:
            return critic_loss, None
        # The authors' code also forms critic weight gradients here (discarded at the next critic step);
        # the engine forms only d/da. --skip-critic-wgrad makes PyTorch skip them too.
        if self.skip_critic_wgrad:
            self.critic.requires_grad_(False)
        with self.amp():
            actor_loss = -self.critic.Q1(state, self.actor(state).float()).float().mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
        if self.skip_critic_wgrad:
            self.critic.requires_grad_(True)
        with torch.no_grad():
            if hasattr(torch, "_foreach_lerp_"):
                torch._foreach_lerp_(self.target_params, self.params, TAU)
            else:
                torch._foreach_mul_(self.target_params, 1.0 - TAU)
                torch._foreach_add_(self.target_params, self.params, alpha=TAU)
        return critic_loss, actor_loss


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device, n, step):
    """Runs step() n times between two synchronisations; returns seconds and step's last result."""
    sync(device)
    t0 = time.perf_counter()
    out = None
    for _ in range(n):
        out = step()
    sync(device)
    return time.perf_counter() - t0, out


def run_eager(td3, rb, args, device):
    for i in range(args.warmup):
        td3.update(rb, i % 2 == 1)
    counter = iter(range(args.updates))
    dt, out = timed(device, args.updates, lambda: td3.update(rb, next(counter) % 2 == 1))
    return dt, args.updates, out


def run_graphs(td3, rb, args, device):
    def pair():  # updates 2k (critic only) and 2k+1 (critic + actor + Polyak), as in the engine
        td3.update(rb, False)
        return td3.update(rb, True)

    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm-up on a side stream, which also creates Adam's state
        for _ in range(max(3, args.warmup // 2)):
            pair()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    td3.actor_opt.zero_grad(set_to_none=True)
    td3.critic_opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_out = pair()
    for _ in range(10):
        graph.replay()
    n = (args.updates + 1) // 2
    dt, _ = timed(device, n, graph.replay)
    return dt, 2 * n, static_out


def run_compile(td3, rb, args, device):
    update = torch.compile(td3.update, mode="reduce-overhead")
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)

    def step(i):
        if mark:
            mark()
        return update(rb, i % 2 == 1)

    for i in range(max(20, args.warmup)):
        step(i)
    counter = iter(range(args.updates))
    dt, out = timed(device, args.updates, lambda: step(next(counter)))
    out = tuple(None if t is None else t.detach().clone() for t in out)
    return dt, args.updates, out


def gpu_used_mib():
    """{gpu uuid: used MiB} from nvidia-smi, or {} when it is absent."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=uuid,memory.used", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=30)
        return {u.strip(): float(m) for u, m in (l.split(",") for l in r.stdout.strip().splitlines())}
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}


def process_mib(baseline):
    """This process's device memory as the driver sees it: (MiB or None, how it was measured)."""
    pid = os.getpid()
    try:
        r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=30)
        used = [float(m) for p, m in (l.split(",") for l in r.stdout.strip().splitlines()) if int(p) == pid]
        if used:
            return sum(used), "nvidia-smi pid"
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    try:
        import pynvml
        pynvml.nvmlInit()
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                if p.pid == pid and p.usedGpuMemory:
                    return p.usedGpuMemory / 2**20, "pynvml pid"
    except Exception:
        pass
    # In a container the driver may list host PIDs: fall back to the growth of the busiest GPU's usage.
    now = gpu_used_mib()
    deltas = [now[u] - baseline[u] for u in now if u in baseline]
    if deltas and max(deltas) > 0:
        return max(deltas), "device used delta"
    return None, "unavailable"


def set_tf32(on):
    """TF32 matmuls on or off, through whichever switches this PyTorch has."""
    torch.set_float32_matmul_precision("high" if on else "highest")
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def run_mode(mode, args, precision, baseline):
    """One timed run of `mode` in `precision`; baseline: the GPUs' used memory before this process touched CUDA."""
    device = torch.device(args.device)
    if device.type == "cuda" and torch.cuda.is_initialized():
        torch.cuda.empty_cache()  # an earlier precision's blocks, when a list runs in this process
    torch.manual_seed(args.seed)
    res = dict(mode=mode, precision=precision, device=str(device), torch=torch.__version__, tf32=precision == "tf32",
               obs=args.obs, act=args.act, hidden=args.hidden, batch=args.batch, replay=args.replay,
               skip_critic_wgrad=bool(args.skip_critic_wgrad))
    if device.type == "cuda":
        torch.cuda.set_device(device)
        set_tf32(precision == "tf32")
        torch.cuda.reset_peak_memory_stats(device)
        res["gpu"] = torch.cuda.get_device_name(device)
    elif mode != "eager":
        return dict(res, status="skipped", error=f"{mode} needs a CUDA device")
    try:
        rb = Replay(args.replay, args.obs, args.act, device)
        td3 = TD3(args, device, capturable=mode != "eager", precision=precision)
        runner = {"eager": run_eager, "graphs": run_graphs, "compile": run_compile}[mode]
        dt, n, out = runner(td3, rb, args, device)
        critic_loss, actor_loss = (None if t is None else t.detach() for t in out)
    except Exception as e:  # compile in particular may fail on some versions: report and go on
        return dict(res, status="failed", error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    res.update(status="ok", updates=n, seconds=dt, updates_per_s=n / dt, critic_loss=critic_loss.item(),
               actor_loss=None if actor_loss is None else actor_loss.item())
    if device.type == "cuda":
        res["max_allocated_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
        res["reserved_mib"] = torch.cuda.memory_reserved(device) / 2**20
        res["process_mib"], res["process_source"] = process_mib(baseline)
    return res


def line(r):
    name = f"torch {r['mode']:<8} {r.get('precision', 'fp32'):<5}"
    if r["status"] != "ok":
        return f"{name} {r['status']}: {r.get('error', '')}"
    mib = lambda k: f"{r[k]:.1f} MiB" if r.get(k) is not None else "n/a"
    s = f"{name} updates/s {r['updates_per_s']:>6.0f}  max_allocated {mib('max_allocated_mib')}  reserved {mib('reserved_mib')}"
    if r["device"].startswith("cuda"):
        proc = f"{r['process_mib']:.0f} MiB" if r.get("process_mib") is not None else "n/a"
        s += f"  process {proc}" + ("" if r.get("process_source") == "nvidia-smi pid" else f" ({r.get('process_source')})")
    return s


def child_args(argv, mode, path):
    """argv without --mode/--json/--quiet, then the child's own."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--mode", "--json"):
            skip = True
        elif a.startswith(("--mode=", "--json=")) or a == "--quiet":
            pass
        else:
            out.append(a)
    return out + ["--mode", mode, "--json", path, "--quiet"]


def main():
    ap = argparse.ArgumentParser(description="PyTorch reference for rltrain's TD3 update (bench/RESULTS.md)")
    ap.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--mode", default="all", choices=("all",) + MODES)
    ap.add_argument("--updates", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--obs", type=int, default=17)
    ap.add_argument("--act", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--replay", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--precision", default="fp32",
                    help="fp32 (TF32 off, the engine's default), tf32, or bf16 (autocast, fp32 masters); a comma list "
                         "such as fp32,tf32,bf16 runs each in turn")
    ap.add_argument("--tf32", action="store_true", help="the same as --precision tf32")
    ap.add_argument("--skip-critic-wgrad", action="store_true",
                    help="no critic weight gradients in the actor step (the engine skips them; the authors' code does not)")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    precisions = ["tf32"] if args.tf32 else [p.strip() for p in args.precision.split(",") if p.strip()]
    bad = [p for p in precisions if p not in PRECISIONS]
    if bad or not precisions:
        ap.error(f"--precision: {', '.join(bad) or 'nothing'} is not one of {', '.join(PRECISIONS)}")

    if args.mode != "all":
        baseline = gpu_used_mib() if args.device.startswith("cuda") else {}  # before this process touches CUDA
        results = [run_mode(args.mode, args, p, baseline) for p in precisions]
    else:  # one process per mode: a clean CUDA context and allocator for each memory figure
        modes = MODES if args.device.startswith("cuda") else ("eager",)
        results = []
        for m in modes:
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "r.json")
                rc = subprocess.run([sys.executable, os.path.abspath(__file__)] + child_args(sys.argv[1:], m, path)).returncode
                try:
                    with open(path) as f:
                        results += json.load(f)["results"]
                except (OSError, ValueError, KeyError):
                    results.append(dict(mode=m, device=args.device, status="failed", error=f"child exited {rc}"))
    if not args.quiet:
        gpu = next((r["gpu"] for r in results if r.get("gpu")), args.device)
        print(f"# torch {torch.__version__} on {gpu}: obs {args.obs} act {args.act} hidden {args.hidden}-{args.hidden} "
              f"batch {args.batch} replay {args.replay}, precision {','.join(precisions)} (fp32: TF32 off), "
              f"{args.updates} updates{', critic wgrad skipped in actor step' if args.skip_critic_wgrad else ''}")
        for r in results:
            print(line(r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results}, f, indent=1)
    return 0 if all(r["status"] in ("ok", "skipped") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
