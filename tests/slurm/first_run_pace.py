"""An env wrapper (``env.wrappers: [{"first_run_pace:FirstRunPace": {"seconds": S}}]``) that
makes every step of the first run of a Slurm job take at least S seconds, and adds nothing
once the job has been requeued (``SLURM_RESTART_COUNT`` > 0).

The requeue test waits for the warning that slurmctld itself sends before the time limit,
which comes 30-60 s into a 2-minute job (later on a loaded machine). Paced, the first run
cannot finish before it, however fast the machine is; the resumed run trains at full speed
and finishes long before its own warning. The pace is a sleep: observations, rewards and
random numbers are those of the bare env, so a paced run trains exactly like an unpaced one.
"""
from __future__ import annotations

import os
import time
from typing import Any

import gymnasium as gym

# read once per process, not kept on the wrapper: a resume restores every wrapper's attributes
# from the checkpoint (hpcrl.envs.state), so one set in the first run would come back
FIRST_RUN = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0) == 0


class FirstRunPace(gym.Wrapper):
    """Sleeps ``seconds`` before each step in the first run of a job."""

    def __init__(self, env: gym.Env, seconds: float = 0.0) -> None:
        super().__init__(env)
        self.seconds = seconds

    def step(self, action: Any) -> Any:
        if FIRST_RUN and self.seconds > 0:
            time.sleep(self.seconds)
        return self.env.step(action)
