"""Self-play on collector ranks: every collector's envs draw their opponents from the league
rank 0 publishes, log their matches, and the trained policy learns."""
import json

import pytest
from mpirun import train

from hpcrl.league.match_log import read_matches
from hpcrl.league.snapshots import snapshots

TICTACTOE = ["env.id=pettingzoo.classic.tictactoe_v3", "env.num_envs=8",
             "env.league.snapshot_every=4000", "actor.action_mask=true",
             "actor.hidden_sizes=[64,64]", "algo.num_steps=64", "algo.lr=0.001",
             "algo.gamma=0.99", "algo.gae_lambda=0.95", "algo.ent_coef=0.01",
             "train.total_env_steps=12000", "train.eval_episodes=100",
             "env.vectorization=async"]


@pytest.mark.timeout(150)
def test_self_play_learns_on_collector_ranks_with_subprocess_envs(tmp_path):
    train(3, tmp_path, TICTACTOE + ["scheme.preset=async-ppo", "env.num_envs=4"])
    names = [s.name for s in snapshots(tmp_path / "league")]
    assert len(names) >= 3 and names[0] == "main-4096", names
    matches = read_matches(tmp_path / "league")
    assert {m.env_seed for m in matches} == set(range(8))  # both collectors' 2 x 4 envs
    assert {m.opponent for m in matches} >= {"random", "main-4096"}
    early = [m.outcome for m in matches[:200] if m.opponent == "random"]
    final = (tmp_path / "eval.json").read_text()
    mean = json.loads(final)["mean_return"]  # +1 a win, -1 a loss against random play
    assert mean >= 0.4 and (mean + 1) / 2 > early.count("win") / max(len(early), 1), final
