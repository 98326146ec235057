"""Checks of how a collector steps its envs: ``scheme.env_groups``."""
from __future__ import annotations

from hpcrl.config.schema import Config


def check_env_groups(c: Config) -> str | None:
    """``scheme.env_groups`` is 0 (auto) or a divisor of ``env.num_envs``, and one group is
    all PPO+D's demonstration slots run in."""
    groups, n = c.scheme.env_groups, c.env.num_envs
    if groups < 0:
        return (f"config key 'scheme.env_groups' must be >= 0 (0: auto, 1: no groups), got "
                f"{groups}")
    if groups > 1 and n % groups:
        fits = [g for g in range(1, n + 1) if n % g == 0 and g <= 8]
        return (f"config key 'scheme.env_groups' ({groups}) must divide env.num_envs ({n}): "
                f"every group holds as many envs; use one of {', '.join(map(str, fits))}, or "
                f"0 to let hpcrl choose")
    if groups > 1 and c.algo.ppo.demos:
        return (f"config key 'scheme.env_groups' ({groups}): PPO+D's demonstration slots "
                f"replay in one batch of envs; use scheme.env_groups=1 (or 0, which keeps "
                f"one group with algo.ppo.demos)")
    return None
