"""Hyperparameter sweeps on Optuna: each worker runs batches of trials as one population (one process, one rltrain
group), reports every evaluation, prunes with Optuna's pruners, and shares the study with other workers through a
journal file or a database. Optuna is an optional extra: ``pip install 'rltrain[sweep]'``.

>>> from rltrain.sweep import sweep
>>> sweep("configs/td3_pendulum_fast.yaml", "space.yaml", trials=32, storage="journal:runs/td3.journal",
...       study="td3", workers_batch=8)

``python -m rltrain.sweep --help`` runs a worker from the command line; ``python -m rltrain.sweep.report STUDY``
writes the table, the best config and the plots. docs/sweeps.md has the details.
"""

from .space import Param, SpaceError, load_space
from .worker import SweepResult, fail_stale_trials, open_storage, sweep

__all__ = ["Param", "SpaceError", "SweepResult", "fail_stale_trials", "load_space", "open_storage", "sweep"]
