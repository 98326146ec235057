"""The checks of what comes back after a failure: envs made again (``env.max_restarts``,
``env.restart_window``, ``env.step_timeout_s``) and collector ranks replaced
(``scheme.max_collector_restarts``)."""
from __future__ import annotations

from hpcrl.config.checks import positive
from hpcrl.sections.schema import Config


def check_env_restarts(c: Config) -> list[str]:
    """The bound of env restarts in range, and a subprocess's step timeout that fires before
    the learner gives its collector up (a collector waiting on a hung env sends nothing)."""
    e = c.env
    checks = [positive("env.max_restarts", e.max_restarts, strict=False),
              positive("env.restart_window", e.restart_window),
              positive("env.step_timeout_s", e.step_timeout_s, strict=False)]
    lost_after = c.scheme.collector_timeout_s
    if (e.vectorization == "async" and c.scheme.collectors_per_worker > 0
            and 0 < lost_after <= e.step_timeout_s):
        checks.append(f"config key 'env.step_timeout_s' ({e.step_timeout_s:g}) must be "
                      f"shorter than scheme.collector_timeout_s ({lost_after:g}): a collector "
                      f"waiting on a hung env sends nothing, and its learner would give it up "
                      f"before its env is made again; lower env.step_timeout_s")
    return [msg for msg in checks if msg]
