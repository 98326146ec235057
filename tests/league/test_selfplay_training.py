"""Self-play trains, grows its league, evaluates against fixed opponents and resumes exactly
(serial runs; tests/slurm/test_templates.py runs a league job on the Slurm template, with
its collectors' envs in subprocesses)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from kill_resume import rows, whole_then_killed_and_resumed

from hpcrl.cli import main
from hpcrl.config.loader import from_dict
from hpcrl.league.match_log import read_matches
from hpcrl.league.snapshots import snapshots
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir

TICTACTOE = {
    "env": {"id": "pettingzoo.classic.tictactoe_v3", "num_envs": 8,
            "league": {"snapshot_every": 4000}},
    "algo": {"name": "ppo", "num_steps": 64, "lr": 0.001, "gamma": 0.99, "gae_lambda": 0.95,
             "ent_coef": 0.01},
    "actor": {"action_mask": True, "hidden_sizes": [64, 64]},
    "train": {"total_env_steps": 16_000, "eval_episodes": 0},
}


def _config(**train):
    data = {**TICTACTOE, "train": {**TICTACTOE["train"], **train}}
    return from_dict(data)


@pytest.mark.timeout(120)
def test_self_play_beats_random_play_and_grows_a_rated_league(tmp_path: Path):
    run = tmp_path / "run"
    Trainer(_config(), RunDir(run), console=None).train()
    assert [s.name for s in snapshots(run / "league")] == [
        "main-4096", "main-8192", "main-12288", "main-16384"]
    matches = read_matches(run / "league")
    early = [m.outcome for m in matches[:300] if m.opponent == "random"]
    assert len(early) > 100
    cli = CliRunner()
    league = cli.invoke(main, ["league", str(run)])
    assert league.exit_code == 0, league.output
    assert f"{len(matches)} matches" in league.output and "main-4096" in league.output
    assert (run / "league" / "matches.csv").read_text().count("\n") == len(matches) + 1
    played = cli.invoke(main, ["eval", str(run), "-n", "100", "--opponent", "random"])
    assert played.exit_code == 0, played.output
    wins = int(played.output.split("against random: ")[1].split(" wins")[0])
    early_wins = early.count("win") / len(early)
    assert wins >= 70 and wins / 100 > early_wins + 0.15, (wins, early_wins)
    snapshot = cli.invoke(main, ["eval", str(run), "-n", "10", "--opponent", "main-4096"])
    assert snapshot.exit_code == 0 and "against main-4096" in snapshot.output
    wrong = cli.invoke(main, ["eval", str(run), "-n", "1", "--opponent", "main-1"])
    assert wrong.exit_code != 0 and "snapshots: main-12288" in wrong.output
    latest = cli.invoke(main, ["eval", str(run), "-n", "4", "--opponent", "latest"])
    assert latest.exit_code == 0 and "against latest: " in latest.output  # main-16384
    video = tmp_path / "match.gif"  # the game renders its own board
    recorded = cli.invoke(main, ["eval", str(run), "-n", "2", "--video", str(video)])
    assert recorded.exit_code == 0 and video.stat().st_size > 1000, recorded.output
    plotted = cli.invoke(main, ["plot", str(run), "-o", str(tmp_path / "curves.png")])
    assert plotted.exit_code == 0, plotted.output
    assert (tmp_path / "curves-league.png").stat().st_size > 10_000  # rating and league size

    # the trained policy as a frozen member of another run's league, from its start
    rival = tmp_path / "rival"
    config = _config(total_env_steps=2048)
    config.env.league.frozen = {"champion": str(run)}
    Trainer(config, RunDir(rival), console=None).train()
    assert [s.name for s in snapshots(rival / "league")] == ["champion-0", "main-2048"]
    assert {m.opponent for m in read_matches(rival / "league")} == {"random", "champion-0"}
    table = cli.invoke(main, ["league", str(rival)])
    assert table.exit_code == 0 and "champion-0" in table.output, table.output
    against = cli.invoke(main, ["eval", str(rival), "-n", "4", "--opponent", "champion-0"])
    assert against.exit_code == 0 and "against champion-0: " in against.output


@pytest.mark.timeout(120)
def test_a_league_run_killed_mid_run_resumes_exactly(tmp_path: Path, monkeypatch):
    config = _config(total_env_steps=4096, checkpoint_every=3)
    config.env.league.snapshot_every = 1000
    config.scheme.env_groups = 2  # two groups of 4 envs, acting in turn
    whole, cut = whole_then_killed_and_resumed(config, tmp_path, monkeypatch, die_at=7)
    assert rows(cut) == rows(whole)
    assert [s.name for s in snapshots(cut / "league")] == \
        [s.name for s in snapshots(whole / "league")]

    def played(run: Path) -> list[tuple]:
        return [(m.env_seed, m.match, m.opponent, m.player_seat, m.outcome, m.length)
                for m in sorted(read_matches(run / "league"),
                                key=lambda m: (m.env_seed, m.match))]

    assert played(cut) == played(whole)
    last = [torch.load(RunDir(run).checkpoint_path, weights_only=True)["policy"]
            for run in (whole, cut)]
    for name, tensor in last[0]["state_dict"].items():
        assert torch.equal(tensor, last[1]["state_dict"][name]), name
