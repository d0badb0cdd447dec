"""launch.py: ``python -m rltrain.sweep --devices cuda:0,cuda:1 ...``: one worker process per listed device, all on
the one study, from one command. Each worker is ``python -m rltrain.sweep`` with the same arguments and its own
``--device`` (and, when ``--sampler-seed N`` is given, seed N + k for worker k, so that the workers' samplers do not
draw the same points). Their output lines come back prefixed with the worker's device; SIGINT and SIGTERM reach every
worker once (each stops its trials as a lone worker does); the command ends when every worker has, with the most
telling of their exit statuses. A worker outlives no launcher: were the launcher killed outright (SIGKILL), each
worker gets SIGTERM from the kernel (Linux's parent-death signal) and stops its trials as on a signal."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading

# Set in each worker's environment to the launcher's pid (follow_launcher).
LAUNCHER_ENV = "RLTRAIN_SWEEP_LAUNCHER"

# When workers end differently, the status that says most about what to do: a bad config or space (2) first, then
# nothing fitting in memory (3), a failure (1), an interruption (130).
_PRECEDENCE = (2, 3, 1, 130)


def parse_devices(text: str) -> list[str]:
    """The comma-separated device list of --devices; ValueError when it names none or an empty entry."""
    devices = [d.strip() for d in text.split(",")]
    if not text.strip() or any(not d for d in devices):
        raise ValueError(f"--devices {text!r}: give a comma-separated list of devices, e.g. cuda:0,cuda:1")
    return devices


def worst_status(codes: list[int]) -> int:
    """The exit status of the whole command from its workers' (a worker killed by a signal counts as a failure)."""
    codes = [1 if c < 0 else c for c in codes]
    for c in _PRECEDENCE:
        if c in codes:
            return c
    return max(codes) if codes else 0


def follow_launcher() -> None:
    """In a worker started by run_workers: asks the kernel for SIGTERM when the launcher dies (Linux; elsewhere
    nothing), and ends at once if it already has."""
    pid = os.environ.get(LAUNCHER_ENV)
    if not pid or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(pid):  # the launcher died before the request
        os.kill(os.getpid(), signal.SIGTERM)


def _without(argv: list[str], flag: str) -> list[str]:
    """argv less every occurrence of `flag VALUE` and `flag=VALUE`."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return out


def _pump(proc: subprocess.Popen, prefix: str, lock: threading.Lock) -> None:
    for line in proc.stdout:
        with lock:
            sys.stdout.write(f"{prefix} {line}" if line.endswith("\n") else f"{prefix} {line}\n")
            sys.stdout.flush()


def run_workers(argv: list[str], devices: list[str], sampler_seed: int | None) -> int:
    """Runs a worker per device with argv (this command's arguments) less --devices, --device and --sampler-seed;
    returns the command's exit status."""
    rest = _without(_without(_without(argv, "--devices"), "--device"), "--sampler-seed")
    procs: list[subprocess.Popen] = []
    lock = threading.Lock()
    pumps = []
    stop: list[int] = []  # the signal that came, if one did: no worker starts after it

    def forward(signum, _frame):
        stop.append(signum)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            for k, dev in enumerate(devices):
                if stop:
                    break
                cmd = [sys.executable, "-m", "rltrain.sweep", *rest, "--device", dev]
                if sampler_seed is not None:
                    cmd += ["--sampler-seed", str(sampler_seed + k)]
                # A session of its own, so that a terminal's Ctrl-C reaches the worker once, through forward().
                p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                     start_new_session=True, env={**os.environ, LAUNCHER_ENV: str(os.getpid())})
                procs.append(p)
                t = threading.Thread(target=_pump, args=(p, f"[{dev} #{k}]", lock), daemon=True)
                t.start()
                pumps.append(t)
        except OSError:
            forward(signal.SIGTERM, None)  # the workers already started stop as on a signal
            for p in procs:
                p.wait()
            raise
        codes = [p.wait() for p in procs]
        if stop and len(procs) < len(devices):
            codes += [130] * (len(devices) - len(procs))
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    for t in pumps:
        t.join(timeout=5)
    status = worst_status(codes)
    print(f"rltrain.sweep: {len(devices)} workers ({', '.join(devices)}) ended with exit "
          f"{', '.join(str(c) for c in codes)}; exit {status}", file=sys.stderr if status else sys.stdout)
    return status
