"""RND's part of an update's targets: intrinsic rewards, values and the predictor's samples.

The learner computes them when it loads an update's rollouts, so collectors (and inference
ranks) act as for any agent and rollouts carry only one extra field, the observation after
their last step (``last_obs``). For each rollout of ``t`` valid steps:

* the observation each step led to is ``obs[1:t]`` and then ``last_obs``; its raw
  intrinsic reward is the predictor's error on it, normalised with the input statistics of
  the update: the published ones with this update's observations (of every gradient rank,
  summed through the algorithm's reducer) folded in, which is what the updater's statistics
  become when it merges the moments this update sends;
* intrinsic values ``V_int(obs)`` come from the actor's intrinsic head with the weights the
  learner holds, and run on across episode ends: intrinsic returns are non-episodic;
* the raw rewards are divided by the std of raw intrinsic returns, again the published
  statistics with this update's returns folded in. The returns are discounted sums within
  the rollout whose tail is the intrinsic value of ``last_obs`` (in raw units), so the
  learner keeps no per-env state and any placement, and any resume, computes the same;
* which samples train the predictor (``rnd.update_proportion`` of them) is drawn per
  ``(step, global env)`` from the job's seed and the update number, the same for any layout.

Everything is layout independent: one gradient rank holding every env computes what N ranks
holding a share each compute together.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from hpcrl.buffers.returns import gae
from hpcrl.buffers.rollout import Rollout
from hpcrl.models.rnd import merged_stats, moments_of
from hpcrl.numerics.normalization import Moments
from hpcrl.numerics.reducer import Reducer

if TYPE_CHECKING:
    from hpcrl.models.actor import ActorCritic


class IntrinsicPart(NamedTuple):
    """RND's targets of one rollout, each ``[t, N]`` over its valid steps: intrinsic values,
    their GAE returns, the intrinsic advantages weighted by ``rnd.int_coef``, the mask of
    the samples that train the predictor, and the weight (``rnd.ext_coef``) of the extrinsic
    advantages they are added to."""

    values: torch.Tensor
    returns: torch.Tensor
    advantages: torch.Tensor
    mask: torch.Tensor
    ext_coef: float


def _tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


def _summed(reducer: Reducer, count: float, total: torch.Tensor, total_sq: torch.Tensor
            ) -> Moments:
    """The moments of the samples of every rank from each rank's count, sum and sum of
    squares (one reduction)."""
    flat = torch.cat([total.new_tensor([count]), total.reshape(-1), total_sq.reshape(-1)])
    summed = reducer.sum_(flat).cpu().numpy()
    n = total.numel()
    return Moments.from_sums(float(summed[0]), summed[1:1 + n].reshape(total.shape),
                             summed[1 + n:].reshape(total.shape))


def discounted_returns(rewards: torch.Tensor, tail: torch.Tensor, gamma: float) -> torch.Tensor:
    """``G[t] = rewards[t] + gamma * G[t+1]`` over ``[t, N]`` with ``G[t] = tail [N]``."""
    out = torch.empty_like(rewards)
    running = tail
    for step in range(rewards.shape[0] - 1, -1, -1):
        running = rewards[step] + gamma * running
        out[step] = running
    return out


class IntrinsicTargets:
    """Computes an update's :class:`IntrinsicPart` per rollout for an actor with ``rnd``.

    After :meth:`prepare`, :attr:`obs_mean`/:attr:`obs_std` are the input statistics the
    update normalises with (the loss uses them too) and :attr:`moments` the moments of this
    rank's inputs and raw returns, for the gradient to carry to the updater.
    """

    def __init__(self, actor: ActorCritic, reducer: Reducer) -> None:
        if actor.rnd is None:
            raise ValueError("intrinsic targets need an actor with RND")
        self.actor, self.rnd, self.reducer = actor, actor.rnd, reducer
        self.config = actor.rnd.config
        self.obs_mean = self.obs_std = torch.zeros(())
        self.moments: tuple[Moments, Moments] | None = None

    def normalized(self, obs: torch.Tensor) -> torch.Tensor:
        """Carried observations as the update's RND networks take them."""
        return self.rnd.normalized(self.rnd.inputs(obs), self.obs_mean, self.obs_std)

    def _mask(self, rollout: Rollout, seed: int, update: int, total_envs: int,
              device: torch.device) -> torch.Tensor:
        gen = torch.Generator().manual_seed(
            int(np.random.SeedSequence([seed, update, 0x52]).generate_state(1)[0]))
        keys = torch.rand(rollout.layout.num_steps, total_envs, generator=gen)
        first = rollout.env_offset
        cols = keys[:rollout.valid_steps, first:first + rollout.layout.num_envs]
        return (cols < self.config.update_proportion).float().to(device)

    @torch.no_grad()
    def prepare(self, rollouts: Sequence[Rollout], seed: int, update: int, total_envs: int,
                device: torch.device) -> list[IntrinsicPart]:
        """The intrinsic targets of ``rollouts``, update number ``update`` of a job of
        ``total_envs`` envs seeded ``seed`` (on this rank)."""
        rnd, cfg = self.rnd, self.config
        observed, following = [], []
        for r in rollouts:
            t = r.valid_steps
            obs = _tensor(r.obs[:t], device)
            after = torch.cat([obs[1:], _tensor(r.last_obs, device)[None]])
            observed.append(obs)
            following.append(rnd.inputs(after.flatten(0, 1)))
        inputs = torch.cat(following)
        local = moments_of(inputs)
        self.obs_mean, self.obs_std = merged_stats(
            rnd.obs_rms, _summed(self.reducer, *local))
        raw = rnd.errors(rnd.normalized(inputs, self.obs_mean, self.obs_std))
        ret_std = rnd.ret_rms.std().to(device)
        raws, returns, start = [], [], 0
        for r, obs in zip(rollouts, observed, strict=True):
            t, n = obs.shape[:2]
            rewards = raw[start:start + t * n].view(t, n).float()
            start += t * n
            values = self.actor.all_values(obs.flatten(0, 1))[:, 1].view(t, n)
            last = self.actor.all_values(_tensor(r.last_obs, device))[:, 1]
            next_values = torch.cat([values[1:], last[None]])
            returns.append(discounted_returns(rewards.double(), last.double() * ret_std,
                                              cfg.gamma).reshape(-1, 1))
            mask = self._mask(r, seed, update, total_envs, device)
            raws.append((rewards, values, next_values, mask))
        local_ret = moments_of(torch.cat(returns))
        _, std = merged_stats(rnd.ret_rms, _summed(self.reducer, *local_ret))
        scale = float(1.0 / std)
        self.moments = (Moments.from_sums(local[0], local[1].cpu().numpy(),
                                          local[2].cpu().numpy()),
                        Moments.from_sums(local_ret[0], local_ret[1].cpu().numpy()[0],
                                          local_ret[2].cpu().numpy()[0]))
        return [self._part(rewards * scale, values, next_values, mask)
                for rewards, values, next_values, mask in raws]

    def _part(self, rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor,
              mask: torch.Tensor) -> IntrinsicPart:
        """GAE over the whole rollout, no episode end cutting it (non-episodic)."""
        cfg = self.config
        never = torch.zeros_like(rewards)
        advantages, returns = gae(rewards, values, never, never, next_values, cfg.gamma,
                                  cfg.gae_lambda)
        return IntrinsicPart(values, returns, advantages * cfg.int_coef, mask, cfg.ext_coef)
