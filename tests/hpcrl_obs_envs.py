"""A tiny env for observation-format tests: Discrete observations, Box actions."""
import gymnasium as gym
import numpy as np


class DiscreteObsBoxAction(gym.Env):
    """Observes a counter in ``Discrete(5)``; acts in ``Box(-1, 1, (1,))``."""

    observation_space = gym.spaces.Discrete(5)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        return self.t % 5, float(action[0]), False, self.t >= 20, {}


gym.register("DiscreteObsBoxAction-v0", entry_point=DiscreteObsBoxAction)
