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
        raise ValueError("gae expects [T, N] tensors of one shape; got "
                         f"{[tuple(t.shape) for t in (rewards, values, terminated, truncated, next_values)]}")
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
