"""rltrain: Python bindings of the native rltrain reinforcement-learning library (ctypes, no compiled code).

>>> import rltrain
>>> cfg = rltrain.Config.from_file("configs/td3_pendulum_fast.yaml")
>>> agent = rltrain.Agent(cfg, rltrain.Space.box(3), rltrain.Space.box(1, low=-2, high=2))
>>> action = agent.act(obs)                      # float32 array within [-2, 2]
>>> agent.observe(obs, action, reward, next_obs, terminated, truncated)
>>> agent.update()

``rltrain.gym.train`` drives a Gymnasium environment with an agent (``python -m rltrain.gym``);
``rltrain.plot`` draws learning curves of run directories (``python -m rltrain.plot``). The library's log
goes to the ``logging`` logger ``"rltrain"``. See bindings/python/README.md.
"""

from ._native import API_VERSION, LIBRARY_PATH, status_name, strerror, version
from .core import Agent, Config, Group, GroupProgress, Progress, Trainer
from .errors import BusyError, CheckpointError, ConfigError, DeviceError, NoFitError, RltError
from .spaces import Space

__version__ = "0.1.0"

__all__ = [
    "API_VERSION",
    "LIBRARY_PATH",
    "Agent",
    "BusyError",
    "CheckpointError",
    "Config",
    "ConfigError",
    "DeviceError",
    "Group",
    "GroupProgress",
    "NoFitError",
    "Progress",
    "RltError",
    "Space",
    "Trainer",
    "status_name",
    "strerror",
    "version",
]
