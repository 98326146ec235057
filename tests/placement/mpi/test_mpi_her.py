"""Hindsight replay on async-sac's layout under a real mpiexec: two collector ranks stream
tagged transitions into the learner rank's replay, which keeps their episodes apart,
relabels with its own env's compute_reward and learns the sparse goal task."""
import json

import numpy as np
import pytest
from mpirun import ROOT, run

from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_async_sac_with_her_learns_the_goal_task_from_two_collectors(tmp_path):
    run_dir = tmp_path / "her"
    # examples/her-sac.yaml on a [64, 64] net and 4000 env steps (8 s here): success rate
    # 0.72 over 50 episodes (serially 0.78 with 3000 steps; plain SAC 0.00)
    done = run(3, ["train", str(ROOT / "examples" / "her-sac.yaml"), "--run-dir",
                   str(run_dir)],
               ["train.tensorboard=false", "train.log_interval_s=60",
                "scheme.preset=async-sac", "train.total_env_steps=4000", "algo.num_steps=500",
                "replay.learning_starts=500", "actor.hidden_sizes=[64,64]",
                "replay.batch_size=128", "train.eval_episodes=50"], timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((run_dir / "eval.json").read_text())
    assert result["success_rate"] >= 0.4, result
    saved = load_checkpoint(RunDir(run_dir).checkpoint_path)
    her = saved["placement"]["updater"]["learner"]["replay"]["her"]
    written, streams = her["written"].numpy(), her["streams"]
    # one stream per collector env, each with at least its first chunk (algo.num_steps): an
    # asynchronous collector that started late on a loaded machine may have sent no more
    assert streams == 2 and np.all(written >= 500) and written.sum() >= 4000
    slot, stream = np.divmod(np.arange(int(her["rows"])), streams)
    held = slot < np.minimum(written, her["per_stream"])[stream]
    first, last = her["ep_first"].numpy()[held], her["ep_last"].numpy()[held]
    closed = last >= 0
    assert closed.mean() > 0.9  # all but the two running episodes
    # every closed episode is one of the env's 50-step episodes, from step 50 * i
    assert np.all(last[closed] - first[closed] == 49) and np.all(first % 50 == 0)
