"""Test-only envs, imported by id as ``hpcrl_testenvs:<Id>`` (tests/placement/mpi is on PYTHONPATH).

The rank an env runs on comes from the launcher's ``PMI_RANK``, so a test can make the
envs of one rank slow (a straggler) or crash, and leave every other rank alone.
"""
from __future__ import annotations

import os
import subprocess
import time

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


def _ranks(var: str) -> set[str]:
    return {r for r in os.environ.get(var, "").split(",") if r}


class SlowCartPole(CartPoleEnv):
    """CartPole that sleeps ``HPCRL_TEST_SLOW_SECONDS`` per step on ``HPCRL_TEST_SLOW_RANKS``."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        slow = os.environ.get("PMI_RANK", "") in _ranks("HPCRL_TEST_SLOW_RANKS")
        self.delay = float(os.environ.get("HPCRL_TEST_SLOW_SECONDS", "0.002")) if slow else 0.0

    def step(self, action):
        if self.delay:
            time.sleep(self.delay)
        return super().step(action)


class RankCrashCartPole(CartPoleEnv):
    """CartPole whose step raises after ``HPCRL_TEST_CRASH_AFTER`` steps on the crash ranks
    (its id is its own: hpcrl_crashing's CrashingCartPole-v0 crashes at random, and a
    process that imports both modules keeps one registration per id)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.crash = os.environ.get("PMI_RANK", "") in _ranks("HPCRL_TEST_CRASH_RANKS")
        self.left = int(os.environ.get("HPCRL_TEST_CRASH_AFTER", "100"))

    def step(self, action):
        if self.crash:
            self.left -= 1
            if self.left < 0:
                raise RuntimeError("test env crashed on purpose")
        return super().step(action)


class ProcessCartPole(CartPoleEnv):
    """CartPole with a process of its own (as ViZDoom's engine is one), started with the
    env; its step raises once that process died."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.process = subprocess.Popen(["sleep", "3600"])

    def step(self, action):
        if self.process.poll() is not None:
            raise RuntimeError(f"the env's process died ({self.process.returncode})")
        return super().step(action)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        super().close()


gym.register("SlowCartPole-v0", entry_point=SlowCartPole, max_episode_steps=500)
gym.register("RankCrashCartPole-v0", entry_point=RankCrashCartPole, max_episode_steps=500)
gym.register("ProcessCartPole-v0", entry_point=ProcessCartPole, max_episode_steps=500)


def _seeds(var: str) -> set[int]:
    return {int(s) for s in os.environ.get(var, "").split(",") if s}


class NonFiniteCartPole(CartPoleEnv):
    """CartPole that turns bad after ``HPCRL_TEST_BAD_AFTER`` steps of its own (counted over
    episodes), when its first reset seed is in ``HPCRL_TEST_BAD_SEEDS`` (a run's env with
    global index ``i`` is seeded ``seed + i``; unset: every env) and, when set, its rank is
    in ``HPCRL_TEST_BAD_RANKS``. ``HPCRL_TEST_BAD_WHAT`` says how: ``obs`` (observations NaN
    from then on, the default), ``reward`` (rewards NaN from then on) or ``huge_reward`` (one
    reward of 1e30 at that step, finite but enough to overflow a value loss)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        ranks = _ranks("HPCRL_TEST_BAD_RANKS")
        self.rank_ok = not ranks or os.environ.get("PMI_RANK", "") in ranks
        self.after = int(os.environ.get("HPCRL_TEST_BAD_AFTER", "100"))
        self.what = os.environ.get("HPCRL_TEST_BAD_WHAT", "obs")
        self.armed: bool | None = None
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        if self.armed is None:
            seeds = _seeds("HPCRL_TEST_BAD_SEEDS")
            self.armed = self.rank_ok and (not seeds or seed in seeds)
        obs, info = super().reset(seed=seed, options=options)
        return self._spoil(obs), info

    def _spoil(self, obs):
        if self.armed and self.what == "obs" and self.steps >= self.after:
            obs = obs * float("nan")
        return obs

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        if self.armed and self.steps >= self.after:
            if self.what == "reward":
                reward = float("nan")
            elif self.what == "huge_reward" and self.steps == self.after:
                reward = 1e30
        return self._spoil(obs), reward, terminated, truncated, info


gym.register("NonFiniteCartPole-v0", entry_point=NonFiniteCartPole, max_episode_steps=500)


class MatchTarget(gym.Env):
    """A contextual bandit with several action components (MultiDiscrete ``[3, 4, 2]`` or
    MultiBinary ``4``): it shows a target choice per component, one-hot, and pays the
    fraction of components the action matches; 8 steps an episode. Random play earns about
    2.9 (MultiDiscrete) or 4 (MultiBinary) an episode, perfect play 8."""

    def __init__(self, binary: bool = False) -> None:
        import numpy as np

        self.nvec = np.array([2, 2, 2, 2] if binary else [3, 4, 2])
        self.action_space = (gym.spaces.MultiBinary(4) if binary
                             else gym.spaces.MultiDiscrete(self.nvec))
        self.observation_space = gym.spaces.Box(0.0, 1.0, (int(self.nvec.sum()),), np.float32)

    def _observe(self):
        import numpy as np

        self.target = self.np_random.integers(self.nvec)
        obs = np.zeros(self.observation_space.shape, np.float32)
        obs[np.concatenate([[0], np.cumsum(self.nvec)[:-1]]) + self.target] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action):
        import numpy as np

        assert self.action_space.contains(action), action
        reward = float(np.mean(np.asarray(action) == self.target))
        self.t += 1
        return self._observe(), reward, False, self.t >= 8, {}


gym.register("MultiDiscreteMatch-v0", entry_point=MatchTarget)
gym.register("MultiBinaryMatch-v0", entry_point=MatchTarget, kwargs={"binary": True})


class DictMatch(gym.Env):
    """A contextual bandit that observes a ``Dict``: an 8x8 uint8 ``image`` with one bright
    pixel in its left or right half, a float ``sign`` in [-1, 1] and a ``Discrete(3)``
    ``phase``. The paying action (``Discrete(4)``) names the image's half and the sign's, so
    a policy must read two keys; 8 steps an episode, 1 a right answer (random play earns 2).
    """

    def __init__(self) -> None:
        import numpy as np

        self.observation_space = gym.spaces.Dict({
            "image": gym.spaces.Box(0, 255, (8, 8, 1), np.uint8),
            "sign": gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
            "phase": gym.spaces.Discrete(3)})
        self.action_space = gym.spaces.Discrete(4)

    def _observe(self):
        import numpy as np

        right, positive = self.np_random.integers(2, size=2)
        image = np.zeros((8, 8, 1), np.uint8)
        image[self.np_random.integers(8), 4 * right + self.np_random.integers(4), 0] = 255
        sign = np.array([self.np_random.uniform(0.2, 1.0) * (1 if positive else -1)],
                        np.float32)
        self.answer = int(2 * right + positive)
        return {"image": image, "sign": sign, "phase": self.t % 3}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action):
        reward = float(int(action) == self.answer)
        self.t += 1
        return self._observe(), reward, False, self.t >= 8, {}


gym.register("DictMatch-v0", entry_point=DictMatch)


class CueMemory(gym.Env):
    """A memory task: the first observation shows a cue (left or right, one-hot), the next
    ``delay`` observations (2 to 6, drawn each episode) show nothing, and the last one asks
    for the cue: action 0 or 1 pays +1 if it names the cue and -1 otherwise, and ends the
    episode. Every earlier action does nothing. Only an agent that remembers the first
    observation can beat chance (an expected 0 a game); perfect recall earns 1."""

    def __init__(self, min_delay: int = 2, max_delay: int = 6) -> None:
        import numpy as np

        self.delays = (min_delay, max_delay)
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)

    def _observe(self):
        import numpy as np

        obs = np.zeros(3, np.float32)
        if self.t == 0:
            obs[self.cue] = 1.0
        elif self.t > self.delay:
            obs[2] = 1.0  # the question
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.cue = 0, int(self.np_random.integers(2))
        self.delay = int(self.np_random.integers(self.delays[0], self.delays[1] + 1))
        return self._observe(), {}

    def step(self, action):
        asked = self.t > self.delay
        self.t += 1
        if asked:
            return self._observe(), 1.0 if int(action) == self.cue else -1.0, True, False, {}
        return self._observe(), 0.0, False, False, {}


gym.register("CueMemory-v0", entry_point=CueMemory)
