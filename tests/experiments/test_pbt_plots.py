"""What `hpcrl plot` draws beyond the training curves: the evaluations during training
beside them, and a population's schedules read from its lineage; and what `hpcrl runs`
says of a population."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.experiments.plots import eval_curve
from hpcrl.experiments.runs_table import summarize
from hpcrl.experiments.schedules import populations, schedules
from hpcrl.population.lineage import Lineage
from hpcrl.runtime.population_dir import PopulationDir

PROGRESS = "env_steps,updates,wall_time_s,episode_return_mean\n"


def fake_run(path: Path, seed: int, steps: list[int], evals: list[tuple[int, float]] | None,
             lr: float = 1e-3) -> Path:
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump({
        "seed": seed, "env": {"id": "CartPole-v1"}, "algo": {"name": "ppo", "lr": lr},
        "train": {"total_env_steps": steps[-1]}}))
    (path / "progress.csv").write_text(PROGRESS + "".join(
        f"{s},{i + 1},{i},{10.0 * (i + 1)}\n" for i, s in enumerate(steps)))
    if evals is not None:
        (path / "eval.csv").write_text("env_steps,updates,wall_time_s,mean_return\n" + "".join(
            f"{s},1,{s / 100},{r}\n" for s, r in evals))
    return path


def test_the_evaluation_curve_is_the_mean_over_seeds_at_the_evaluations(tmp_path):
    a = fake_run(tmp_path / "a", 0, [100, 200, 300], [(100, 1.0), (200, 3.0), (300, 5.0)])
    b = fake_run(tmp_path / "b", 1, [100, 200, 300], [(100, 3.0), (200, 5.0)])
    at, mean = eval_curve([summarize(a), summarize(b)], "env_steps")
    assert at.tolist() == [100.0, 200.0] and mean.tolist() == [2.0, 4.0]  # b ends at 200
    none = fake_run(tmp_path / "c", 0, [100], None)
    assert eval_curve([summarize(none)], "env_steps")[0].size == 0


def population(tmp_path: Path) -> PopulationDir:
    root = PopulationDir(tmp_path / "pop")
    root.path.mkdir()
    root.config_path.write_text(yaml.safe_dump({"pbt": {"members": 3, "mutate": {
        "algo.lr": {"low": 1e-5, "high": 1e-2, "scale": "log"}}}}))
    fake_run(root.member(0), 0, [100, 200, 300, 400], [(200, 7.0)], lr=4e-3)
    fake_run(root.member(1), 1, [100, 200, 300], None, lr=2e-3)
    lineage = Lineage(root.exchange)  # as members record their copies
    lineage.record(0, 1, 200, (0.5, 0.9), {"algo.lr": 0.001}, {"algo.lr": 0.003}, when=1.0)
    lineage.record(0, 1, 300, (0.6, 0.9), {"algo.lr": 0.003}, {"algo.lr": 0.004}, when=2.0)
    lineage.write_merged()
    return root


def test_a_members_schedule_starts_at_its_draw_and_steps_at_each_copy(tmp_path):
    found = schedules(population(tmp_path))
    copier, kept = found["algo.lr"]  # member 2 never started: no schedule
    assert (copier.member, copier.env_steps, copier.values) == (
        0, [0.0, 200.0, 300.0, 400.0], [0.001, 0.003, 0.004, 0.004])
    assert (kept.member, kept.env_steps, kept.values) == (1, [0.0, 300.0], [0.002, 0.002])


def test_hpcrl_plot_of_a_population_draws_its_schedules_and_evaluations(tmp_path):
    pop = population(tmp_path)
    assert populations([pop.path, tmp_path]) == [pop]
    out = CliRunner().invoke(main, ["plot", str(pop.path), "-o", str(tmp_path / "c.png")],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "c.png: 2 curves" in out.output
    assert f"c-schedules.png: the schedules of {pop.path}" in out.output
    assert (tmp_path / "c-schedules.png").stat().st_size > 0


@pytest.mark.parametrize("x", ["env_steps", "wall_time_s"])
def test_the_evaluation_curve_follows_the_x_axis(tmp_path, x):
    run = fake_run(tmp_path / "r", 0, [100, 200], [(100, 1.0), (200, 2.0)])
    at, mean = eval_curve([summarize(run)], x)
    assert np.array_equal(mean, [1.0, 2.0]) and at.size == 2


def test_hpcrl_runs_of_a_population_says_where_each_member_stands(tmp_path):
    from hpcrl.population.workspace import Snapshot, Workspace

    pop = population(tmp_path)
    Workspace(pop.exchange).publish(Snapshot(0, 400, 7.5, {"algo.lr": 0.004}, "x.pt"))
    out = CliRunner().invoke(main, ["runs", str(pop.path)], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    table = out.output.split(f"population {pop.path} (lineage: {pop.lineage_path}):\n")[1]
    lines = table.splitlines()
    assert lines[1].split() == ["0", "400", "7.50", "2", "algo.lr=0.004"]  # 2 copies
    assert lines[2].split()[:4] == ["1", "-", "-", "0"] and lines[3].split()[0] == "2"
