"""Pure return and advantage estimators on ``[T, N]`` tensors (time-major, one column per env).

No function here keeps state or touches an environment: each is a reference that storages
and tests call alike.
"""
from __future__ import annotations

import torch


def gae(rewards: torch.Tensor, values: torch.Tensor, terminated: torch.Tensor,
        truncated: torch.Tensor, next_values: torch.Tensor, gamma: float,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation, GAE(lambda), with correct episode boundaries.

    All inputs are ``[T, N]``: step ``t`` of env column ``n``.

    - ``rewards[t]``: reward of the transition from ``s_t``.
    - ``values[t]``: ``V(s_t)``, the value of the observation the action was taken in.
    - ``terminated[t]`` / ``truncated[t]``: the transition ended the episode by reaching a
      terminal state / by a time limit or other cut. Bool or 0/1 floats; both may not be set.
    - ``next_values[t]``: ``V(s_{t+1})`` where ``s_{t+1}`` is the observation that *followed*
      step ``t`` in the same episode: ``values[t+1]`` inside an episode, the value of the
      final observation when the episode was truncated at ``t``, and the value of the
      observation after the last step for ``t = T-1``. Its entry is ignored where
      ``terminated[t]``.

    With ``done = terminated | truncated``:

    - ``delta[t] = rewards[t] + gamma * (1 - terminated[t]) * next_values[t] - values[t]``
      (bootstrap on truncation, not on termination);
    - ``advantages[t] = delta[t] + gamma * lam * (1 - done[t]) * advantages[t+1]``, with the
      recursion started at ``advantages[T] = 0`` (the trace never crosses an episode end);
    - ``returns = advantages + values`` (the lambda-return targets of the value function).

    Returns ``(advantages, returns)``, both ``[T, N]`` in the dtype of ``values``.
    """
    if not (rewards.shape == values.shape == terminated.shape == truncated.shape
            == next_values.shape) or rewards.dim() != 2:
        shapes = [tuple(t.shape) for t in (rewards, values, terminated, truncated, next_values)]
        raise ValueError(f"gae expects [T, N] tensors of one shape; got {shapes}")
    dtype = values.dtype
    term = terminated.to(dtype)
    cut = 1.0 - torch.maximum(term, truncated.to(dtype))
    deltas = rewards.to(dtype) + gamma * (1.0 - term) * next_values.to(dtype) - values
    advantages = torch.empty_like(values)
    running = torch.zeros_like(values[0])
    decay = gamma * lam
    for t in range(values.shape[0] - 1, -1, -1):
        running = deltas[t] + decay * cut[t] * running
        advantages[t] = running
    return advantages, advantages + values


def nstep(rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
          gamma: float, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n-step discounted returns with their bootstrap discount and bootstrap step.

    Inputs are ``[T, N]`` as for :func:`gae` (``terminated``/``truncated`` bool or 0/1).
    The window of step ``t`` holds ``m_t`` steps ``t .. t + m_t - 1``: ``m_t = n``, unless the
    episode ends earlier (the window stops at the first step ``t + k`` with ``terminated`` or
    ``truncated``, which it includes) or the data ends (``t + m_t <= T``).

    - ``returns[t] = sum_{k < m_t} gamma^k * rewards[t + k]``;
    - ``discounts[t] = 0`` when the window stops at a termination, ``gamma^m_t`` otherwise
      (a truncation or the end of the data bootstraps);
    - ``last[t] = t + m_t - 1`` (int64): the step whose *following* observation bootstraps
      the target, i.e. ``next_obs[last[t]]`` in the sense of :func:`gae`'s ``next_values``
      (the final observation when the episode was truncated there).

    The target of a value function is ``returns + discounts * V(next_obs[last])``.
    Returns ``(returns, discounts, last)``, the first two in the dtype of ``rewards``.
    """
    if not (rewards.shape == terminated.shape == truncated.shape) or rewards.dim() != 2:
        raise ValueError("nstep expects [T, N] tensors of one shape; got "
                         f"{[tuple(t.shape) for t in (rewards, terminated, truncated)]}")
    if n < 1:
        raise ValueError(f"nstep needs n >= 1, got {n}")
    steps = rewards.shape[0]
    term = terminated.bool()
    done = term | truncated.bool()
    time = torch.arange(steps, device=rewards.device).unsqueeze(1).expand_as(rewards)
    returns = torch.zeros_like(rewards)
    last = time.clone()
    window = torch.zeros_like(rewards)
    stopped_by_term = torch.zeros_like(term)
    alive = torch.ones_like(term)
    for k in range(n):
        index = time + k
        valid = alive & (index < steps)
        safe = index.clamp(max=steps - 1)
        returns = returns + torch.where(valid, rewards.gather(0, safe) * gamma ** k, 0.0)
        last = torch.where(valid, index, last)
        window = torch.where(valid, float(k + 1), window)
        ended = done.gather(0, safe)
        stopped_by_term = stopped_by_term | (valid & term.gather(0, safe))
        alive = valid & ~ended
    discounts = torch.where(stopped_by_term, 0.0, torch.pow(gamma, window))
    return returns, discounts.to(rewards.dtype), last


def vtrace(log_rhos: torch.Tensor, discounts: torch.Tensor, rewards: torch.Tensor,
           values: torch.Tensor, bootstrap_value: torch.Tensor,
           clip_rho: float | None = 1.0,
           clip_c: float | None = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace targets and policy-gradient advantages (Espeholt et al. 2018, IMPALA).

    Inputs are ``[T, N]`` (``bootstrap_value`` is ``[N]``), step ``t`` of env column ``n``:

    - ``log_rhos[t] = log pi(a_t | x_t) - log mu(a_t | x_t)``: target over behaviour policy;
    - ``discounts[t]``: the discount of the value of ``x_{t+1}``, ``gamma * (1 - done_t)``
      (0 cuts both the bootstrap and the trace at an episode end);
    - ``rewards[t]``: reward of the transition from ``x_t``;
    - ``values[t] = V(x_t)``; ``bootstrap_value = V(x_T)``, the observation after the last step.

    With ``rho_t = min(clip_rho, exp(log_rhos[t]))``, ``c_t = min(clip_c, exp(log_rhos[t]))``
    (``None`` disables a clip) and ``V(x_T) = bootstrap_value``:

    - ``delta_t = rho_t * (rewards[t] + discounts[t] * V(x_{t+1}) - V(x_t))``;
    - ``vs[t] = V(x_t) + delta_t + discounts[t] * c_t * (vs[t+1] - V(x_{t+1}))``, started at
      ``vs[T] = V(x_T)``; this is the paper's
      ``v_s = V(x_s) + sum_{t>=s} (prod_{i<t} discounts_i c_i) delta_t`` over ``i, t`` in
      ``s .. T-1``;
    - ``pg_advantages[t] = rho_t * (rewards[t] + discounts[t] * vs[t+1] - V(x_t))``.

    On-policy (``log_rhos = 0``) with clips >= 1, ``vs`` is the n-step bootstrapped return.
    Returns ``(vs, pg_advantages)``, both ``[T, N]`` and detached (they are targets).
    """
    if not (log_rhos.shape == discounts.shape == rewards.shape == values.shape) \
            or values.dim() != 2 or bootstrap_value.shape != values.shape[1:]:
        raise ValueError("vtrace expects [T, N] log_rhos, discounts, rewards, values and an [N] "
                         "bootstrap_value; got "
                         f"{[tuple(t.shape) for t in (log_rhos, discounts, rewards, values)]} "
                         f"and {tuple(bootstrap_value.shape)}")
    with torch.no_grad():
        rhos = log_rhos.exp()
        clipped_rhos = rhos if clip_rho is None else rhos.clamp(max=clip_rho)
        cs = rhos if clip_c is None else rhos.clamp(max=clip_c)
        next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
        deltas = clipped_rhos * (rewards + discounts * next_values - values)
        decay = discounts * cs
        corrections = torch.empty_like(values)
        running = torch.zeros_like(bootstrap_value)
        for t in range(values.shape[0] - 1, -1, -1):
            running = deltas[t] + decay[t] * running
            corrections[t] = running
        vs = values + corrections
        next_vs = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
        pg_advantages = clipped_rhos * (rewards + discounts * next_vs - values)
    return vs, pg_advantages
