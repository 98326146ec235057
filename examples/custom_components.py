"""Your own network, loss and env wrapper, trained with hpcrl's Python API.

    python examples/custom_components.py                 # one process
    mpiexec -n 2 python examples/custom_components.py    # 2 ranks: DD-PPO, gradients all-reduced
    PYTHONPATH=examples hpcrl train examples/custom_components.yaml   # the same, from YAML

Every rank runs this file; hpcrl records each class by its import path
(``custom_components:KLPenaltyPPO``), so other processes (async env workers, a later
``hpcrl.load_policy``, ``hpcrl eval``) import it from this module: keep the training under
``if __name__ == "__main__":`` and this directory on PYTHONPATH when you load the policy.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import hpcrl


class KLPenaltyPPO(hpcrl.PPO):
    """PPO with an adaptive KL penalty instead of clipping (Schulman et al. 2017, sec. 4)."""

    stat_names = hpcrl.PPO.stat_names + ("kl_beta",)

    def __init__(self, spaces, settings, device="cpu", reducer=None, *,
                 target_kl: float = 0.01) -> None:
        super().__init__(spaces, settings, device, reducer)
        self.target_kl, self.beta = target_kl, 1.0
        self._update_kls: list[float] = []

    def minibatches(self, storage, update, seed, total_envs, count):
        """PPO's minibatches; once the update's last one is trained, beta adapts to the mean
        KL they measured (the paper's rule: once per policy update, never per minibatch,
        where a few small KLs in a row would halve beta towards 0 and let one update run
        away)."""
        self._update_kls = []
        yield from super().minibatches(storage, update, seed, total_envs, count)
        if self._update_kls:
            kl = sum(self._update_kls) / len(self._update_kls)
            if kl > 1.5 * self.target_kl:
                self.beta *= 2.0
            elif kl < self.target_kl / 1.5:
                self.beta /= 2.0

    def loss(self, batch):
        log_probs, entropy, values, batch = self.evaluate(batch)  # sequences too, if recurrent
        adv = self.advantages(batch)  # normalised over the whole job's minibatch
        log_ratio = log_probs - batch.log_probs
        ratio = log_ratio.exp()
        kl = ((ratio - 1) - log_ratio).mean()
        policy_loss = -(ratio * adv).mean()
        value_loss = nn.functional.mse_loss(values, batch.returns)
        # the KL of the whole job's minibatch, the same on every gradient rank
        total = self.reducer.sum_(torch.stack([kl.detach(), kl.new_tensor(1.0)]).double())
        job_kl = float(total[0] / total[1])
        stats = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(),
                 "entropy": entropy.mean().item(), "approx_kl": job_kl, "clip_fraction": 0.0,
                 "kl_beta": self.beta}
        self._update_kls.append(job_kl)
        return policy_loss + self.beta * kl + self.algo.vf_coef * value_loss, stats

    def state_dict(self):  # beta is state: a resumed run goes on with it
        return {**super().state_dict(), "beta": self.beta}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.beta = float(state["beta"])


class SquashEncoder(nn.Module):
    """A network: observations through one layer of ``width`` units (the trunk follows)."""

    def __init__(self, observation_space: gym.spaces.Box, width: int = 64) -> None:
        super().__init__()
        self.features = width
        self.layer = nn.Linear(int(np.prod(observation_space.shape)), width)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.layer(obs.flatten(1)))


class TimePenalty(gym.RewardWrapper):
    """An env wrapper: a constant taken off every reward."""

    def __init__(self, env: gym.Env, penalty: float = 0.0) -> None:
        super().__init__(env)
        self.penalty = penalty

    def reward(self, reward):
        return reward - self.penalty


def main() -> None:
    from mpi4py import MPI  # in the test extra; any MPI job has it

    ranks = MPI.COMM_WORLD.Get_size()
    config = hpcrl.make_config(
        {"algo": {"name": KLPenaltyPPO, "kwargs": {"target_kl": 0.02}},
         "actor": {"network": SquashEncoder, "network_kwargs": {"width": 64},
                   "hidden_sizes": [64]},
         "env": {"id": "CartPole-v1", "num_envs": 8 // ranks,
                 "wrappers": [{TimePenalty: {"penalty": 0.0}}]},
         "train": {"total_env_steps": 40_000, "eval_episodes": 5}},
        sets=[f"scheme.preset={'ddppo' if ranks > 1 else 'serial'}"])
    result = hpcrl.train(config)
    if result.is_leader:
        print(f"{result.run_dir}: eval {result.evaluation['mean_return']:.1f} on {ranks} "
              f"rank(s)")


if __name__ == "__main__":
    main()
