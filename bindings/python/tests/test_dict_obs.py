"""Dict observations (network.inputs) through the Python package: a Dict space matched by key to the config's
inputs (missing and unknown keys refused by name, shapes and dtypes checked), the row of bytes it flattens to,
an Agent acting and learning on dict observations, and rltrain.gym.train on a Gymnasium Dict environment
(skipped without gymnasium)."""

import numpy as np
import pytest

import rltrain
import rltrain.gym
from rltrain.spaces import Space

INPUTS = """
algo: dqn
network:
  hidden: [64]
  inputs:
    - {name: screen, shape: [1, 8, 8], dtype: u8, torso: [{out: 8, kernel: 3}]}
    - {name: stats, shape: [2]}
"""


class FakeBox:
    """What Space.from_gym_dict reads of a Gymnasium Box: shape, dtype and (uint8 parts) the largest value."""

    def __init__(self, shape, dtype, high=255):
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.high = np.full(shape, high)


class FakeDict:
    def __init__(self, **spaces):
        self.spaces = spaces


def config():
    cfg = rltrain.Config()
    cfg.load_string(INPUTS)
    return cfg


def draw(rng):
    """One observation of the test's task: which half the lit pixel is in XOR the sign of stats[0]."""
    px, py, v = rng.integers(8), rng.integers(8), rng.uniform(-1, 1)
    screen = np.zeros((1, 8, 8), np.uint8)
    screen[0, py, px] = 255
    return {"screen": screen, "stats": np.array([v, 0.5], np.float32)}, int((px < 4) == (v > 0))


def test_match_and_flatten():
    space = Space.from_gym_dict(FakeDict(stats=FakeBox((2,), np.float32), screen=FakeBox((1, 8, 8), np.uint8)), config())
    # Parts in network.inputs order, each at its 4-aligned offset: 64 u8 bytes, then 2 floats.
    assert space.kind == "dict" and space.shape == (72,) and [p[:2] for p in space.parts] == [("screen", 0), ("stats", 64)]
    obs, _ = draw(np.random.default_rng(0))
    row = space.flatten(obs)
    assert row[:64].tobytes() == obs["screen"].tobytes() and row[64:72].view(np.float32).tolist() == obs["stats"].tolist()
    with pytest.raises(ValueError, match="'extra' is not one of network.inputs"):
        Space.from_gym_dict(FakeDict(screen=FakeBox((1, 8, 8), np.uint8), stats=FakeBox((2,), np.float32),
                                     extra=FakeBox((1,), np.float32)), config())
    with pytest.raises(ValueError, match="a declared input is missing"):
        Space.from_gym_dict(FakeDict(screen=FakeBox((1, 8, 8), np.uint8)), config())
    with pytest.raises(ValueError, match="'screen' is float32; network.inputs declares it u8"):
        Space.from_gym_dict(FakeDict(screen=FakeBox((1, 8, 8), np.float32), stats=FakeBox((2,), np.float32)), config())
    with pytest.raises(ValueError, match="'stats' has shape \\(3,\\)"):
        Space.from_gym_dict(FakeDict(screen=FakeBox((1, 8, 8), np.uint8), stats=FakeBox((3,), np.float32)), config())
    with pytest.raises(ValueError, match="missing keys \\['stats'\\]"):
        space.flatten({"screen": obs["screen"]})


def test_u8_part_scale_follows_the_space():
    """0/1 planes (a Box whose high is 1) must not be scaled by the default 1/255: the config says high: 1."""
    planes = FakeDict(screen=FakeBox((1, 8, 8), np.uint8, high=1), stats=FakeBox((2,), np.float32))
    with pytest.raises(ValueError, match="largest value is 1 but network.inputs scales it by 1/255: write high: 1"):
        Space.from_gym_dict(planes, config())
    cfg = rltrain.Config()
    cfg.load_string(INPUTS.replace("dtype: u8,", "dtype: u8, high: 1,"))
    assert Space.from_gym_dict(planes, cfg).kind == "dict"


def test_agent_learns_on_dict_observations(tmp_path):
    cfg = config()
    cfg.set("out_dir", str(tmp_path))
    cfg.set("train.batch_size", 32)
    cfg.set("dqn.learning_starts", 300)
    cfg.set("dqn.train_freq", 1)
    cfg.set("dqn.target_update_every", 100)
    space = Space.from_gym_dict(FakeDict(screen=FakeBox((1, 8, 8), np.uint8), stats=FakeBox((2,), np.float32)), cfg)
    agent = rltrain.Agent(cfg, space, Space.discrete(2))
    rng = np.random.default_rng(1)
    obs, best = draw(rng)
    for step in range(2500):
        a = agent.act(obs, explore=True) if step >= 300 else int(rng.integers(2))
        nxt, nbest = draw(rng)
        agent.observe(obs, a, 1.0 if a == best else 0.0, nxt, False, step % 10 == 9)
        agent.update()
        obs, best = nxt, nbest
    right = 0
    for _ in range(200):
        o, b = draw(rng)
        right += agent.act(o, explore=False) == b
    # Blind to either part, a policy is right half the time.
    assert right >= 170, f"{right} of 200 right"
    agent.close()


@pytest.mark.learning
def test_gym_train_dict_env(tmp_path):
    gymnasium = pytest.importorskip("gymnasium")

    class DictEnv(gymnasium.Env):
        def __init__(self):
            self.observation_space = gymnasium.spaces.Dict({
                "screen": gymnasium.spaces.Box(0, 255, (1, 8, 8), np.uint8),
                "stats": gymnasium.spaces.Box(-1, 1, (2,), np.float32),
            })
            self.action_space = gymnasium.spaces.Discrete(2)
            self.t = 0

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            self.obs, self.best = draw(self.np_random)
            return self.obs, {}

        def step(self, action):
            r = 1.0 if int(action) == self.best else 0.0
            self.t += 1
            self.obs, self.best = draw(self.np_random)
            return self.obs, r, False, self.t >= 10, {}

    cfg = config()
    cfg.set("train.batch_size", 32)
    cfg.set("dqn.learning_starts", 500)
    cfg.set("dqn.train_freq", 1)
    cfg.set("dqn.target_update_every", 100)
    cfg.set("dqn.eps_fraction", 0.3)
    result = rltrain.gym.train(DictEnv(), cfg, total_steps=4000, eval_every=1000, eval_episodes=20, seed=1,
                               out_dir=str(tmp_path / "run"), eval_env=DictEnv())
    assert result["final_eval_return"] >= 8.5, result
