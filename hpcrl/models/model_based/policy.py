"""The acting policy of model-predictive control: a world model and a planner over it.

:class:`PlanningPolicy` is the module MPC publishes. Its parameters and buffers are the
world model's (weights, and the statistics that standardise its inputs and targets), so the
newest model reaches collectors as any policy's weights do; acting is planning over it.

Planning keeps a state per env: the plan ``[H, A]`` its next step starts from (shifted on by
one step after each action) and the count of steps planned in its episode, zero at an
episode's start. Evaluation carries that state as it carries a recurrent actor's
(:attr:`PlanningPolicy.recurrent`, :meth:`PlanningPolicy.initial_state`), and calling the
policy on observations alone plans from a fresh state. The noise of an evaluation step comes
from a generator seeded by the episode's step count, so an evaluation episode plays the same
whatever other episodes are batched with it, and twice the same; collectors draw theirs from
each env's own stream (:class:`~hpcrl.models.model_based.planning_engine.PlanningEngine`).
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from hpcrl.envs.obs_format import ObsInput
from hpcrl.envs.vector import EnvSpaces, as_box
from hpcrl.models.acting import ActedEnvs
from hpcrl.models.continuous_policies import ActionScale
from hpcrl.models.model_based.planners import Planner, draw, make_planner
from hpcrl.models.model_based.planning_engine import PlanningEngine
from hpcrl.models.model_based.rewards import RewardFunction
from hpcrl.models.model_based.world_model import Scales, WorldModel
from hpcrl.sections.algorithm_keys import MpcConfig
from hpcrl.sections.schema import ActorConfig

EVAL_NOISE_STREAM = 0x3C1  # seeds an evaluation step's planning noise


class PlanningPolicy(nn.Module):
    """Plans over a :class:`WorldModel` of ``spaces`` with the planner of ``settings``;
    ``discount`` weighs the planned rewards (``algo.gamma``), ``reward`` scores them (None:
    the model's learned reward)."""

    recurrent = True  # evaluation carries each episode's plan, as a recurrent actor's state

    def __init__(self, spaces: EnvSpaces, actor: ActorConfig, settings: MpcConfig,
                 discount: float, reward: RewardFunction | None) -> None:
        super().__init__()
        self.obs_format = spaces.obs_format
        self.scale = ActionScale(as_box(spaces.action_space))
        self.action_dim = int(np.prod(as_box(spaces.action_space).shape))
        self.features = self.obs_format.features
        self.model = WorldModel(self.features, self.action_dim, settings.ensemble_size,
                                list(actor.hidden_sizes), actor.activation, reward is None)
        self.planner: Planner = make_planner(settings, self.action_dim)
        self.horizon = settings.horizon
        self.discount, self.reward = discount, reward
        self.plan_size = self.horizon * self.action_dim
        self.state_size = self.plan_size + 1  # the plan, then the episode's steps

    def __deepcopy__(self, memo: dict[int, Any]) -> PlanningPolicy:
        """A copy with copies of the model and planner that shares the reward function (an
        env's ``planning_reward`` keeps its env, which a snapshot must not copy)."""
        memo[id(self.reward)] = self.reward
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            clone.__dict__[key] = copy.deepcopy(value, memo)
        return clone

    @property
    def device(self) -> torch.device:
        """Where the model lives (and plans)."""
        return self.model.net.head.weight.device

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zeros ``[batch, state_size]``: an empty plan at an episode's start."""
        return torch.zeros(batch, self.state_size, device=self.device)

    def acting_engine(self, compile: bool = False, envs: ActedEnvs | None = None
                      ) -> PlanningEngine:
        """How a collector acts with it: planning for its ``envs``, whose plans and noise
        streams the engine keeps between steps (:class:`PlanningEngine`; ``compile``
        unused). Only a collector plans: an inference rank holds none of its envs' plans
        (``Capabilities.remote_acting``)."""
        if envs is None:
            raise ValueError("a planning policy acts for a collector's own envs, whose "
                             "plans it keeps: give make_engine the envs (ActedEnvs)")
        return PlanningEngine(self, envs.seed, envs.env_offset, envs.num_envs, envs.groups)

    # -- planning ----------------------------------------------------------------------------
    def returns(self, obs: torch.Tensor, sequences: torch.Tensor, scales: Scales
                ) -> torch.Tensor:
        """Planned returns ``[B, C]`` of action sequences ``[B, C, H, A]`` (in ``[-1, 1]``)
        from features ``obs`` ``[B, features]``: every candidate rolled out by every member
        from its mean predictions, the discounted rewards summed, averaged over members."""
        b, c, h, a = sequences.shape
        e = self.model.members
        x = obs[None, :, None, :].expand(e, b, c, self.features).reshape(e, b * c, -1)
        total = torch.zeros(e, b * c, device=obs.device)
        weight = 1.0
        for t in range(h):
            step = sequences[:, :, t].reshape(1, b * c, a).expand(e, -1, -1)
            next_x, learned = self.model.predict(x, step, scales)
            if self.reward is None:
                assert learned is not None  # a model without a reward function learns it
                rewards = learned
            else:
                env_actions = self.scale.to_env_tensor(step.reshape(-1, a))
                rewards = self.reward(x.reshape(-1, self.features), env_actions,
                                      next_x.reshape(-1, self.features)).reshape(e, b * c)
            total += weight * rewards
            weight *= self.discount
            x = next_x
        return total.mean(dim=0).reshape(b, c)

    def plan(self, obs: torch.Tensor, state: torch.Tensor, noise: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions ``[B, A]`` in ``[-1, 1]`` for features ``obs`` ``[B, features]``, each
        env's ``state`` ``[B, state_size]`` and ``noise`` ``[B, *noise_shape]`` (all on the
        model's device); and the states after the step."""
        scales = self.model.scales()
        plan = state[:, :self.plan_size].reshape(-1, self.horizon, self.action_dim)
        actions, chosen = self.planner.plan(lambda seq: self.returns(obs, seq, scales),
                                            plan, noise)
        after = torch.cat([self.planner.shift(chosen).reshape(len(obs), -1),
                           state[:, self.plan_size:] + 1.0], dim=1)
        return actions, after

    def evaluation_noise(self, steps: torch.Tensor) -> torch.Tensor:
        """Noise ``[B, *noise_shape]`` for rows at these episode steps: each step's from a
        generator seeded by the step alone (one draw per distinct step)."""
        shape = self.planner.noise_shape
        out = torch.empty((len(steps), *shape))
        for step in steps.unique().tolist():
            seed = int(np.random.SeedSequence([EVAL_NOISE_STREAM, int(step)]).generate_state(1)[0])
            rows = steps == step
            out[rows] = draw(self.planner.noise, shape, torch.Generator().manual_seed(seed))
        return out

    @torch.no_grad()
    def forward(self, obs: ObsInput, state: torch.Tensor | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Planned env actions for raw observations (one, as the env returns it, or a
        batch). With ``state`` (``[B, state_size]``, evaluation's), also the states after
        the step; without, each row plans from a fresh state."""
        x, single = self.obs_format.as_batch(obs)
        x = x.to(self.device)
        carried = state is not None
        if state is None:
            state = self.initial_state(len(x))
        noise = self.evaluation_noise(state[:, -1].round().long().cpu()).to(self.device)
        actions, after = self.plan(self.obs_format.encode(x), state, noise)
        env_actions = self.scale.to_env_tensor(actions)
        if single:
            env_actions = env_actions[0]
        return (env_actions, after) if carried else env_actions
