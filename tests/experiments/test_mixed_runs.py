"""`hpcrl plot` and `hpcrl runs` on a folder of mixed real runs: PPO and DQN on CartPole, SAC
(two learning rates) and TD3 on Pendulum, PPO on Acrobot (too short to finish an episode),
each a second or less of training, made once for the module through `hpcrl train`."""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.cli.text_table import cut_middle, fit
from hpcrl.experiments.runs_table import differences, find_runs, group, summarize, telling_keys

pytest.importorskip("matplotlib")

EXAMPLES = Path(__file__).parents[2] / "examples"
PPO = ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=32", "algo.ppo.num_epochs=2",
       "train.total_env_steps=1024"]
OFF_POLICY = ["train.total_env_steps=400", "algo.num_steps=100", "replay.learning_starts=100",
              "replay.train_freq=50", "replay.gradient_steps=4", "replay.batch_size=32",
              "actor.hidden_sizes=[32,32]"]
RUNS = {
    "cartpole-ppo-lr1e-3-s0": (None, [*PPO, "seed=0", "algo.lr=1e-3"]),
    "cartpole-ppo-lr1e-3-s1": (None, [*PPO, "seed=1", "algo.lr=1e-3"]),
    "cartpole-ppo-lr3e-4-s0": (None, [*PPO, "seed=0", "algo.lr=3e-4"]),
    "cartpole-dqn": ("dqn-cartpole.yaml", OFF_POLICY),
    "pendulum-sac-lr1e-3": ("sac-pendulum.yaml", [*OFF_POLICY, "algo.lr=1e-3"]),
    "pendulum-sac-lr3e-4": ("sac-pendulum.yaml", [*OFF_POLICY, "algo.lr=3e-4"]),
    "pendulum-td3": ("td3-pendulum.yaml", OFF_POLICY),
    "acrobot-ppo": (None, [*PPO, "env.id=Acrobot-v1"]),
}
ENVS = ["Acrobot-v1", "CartPole-v1", "Pendulum-v1"]


def invoke(*args: object, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mixed")
    for name, (config, sets) in RUNS.items():
        args = ["train", *([EXAMPLES / config] if config else []), "--run-dir", root / name]
        for item in [*sets, "train.eval_episodes=1", "train.tensorboard=false"]:
            args += ["--set", item]
        out = invoke(*args)
        assert out.exit_code == 0, out.output
    return root


def plot_quietly(*args: object):
    """`hpcrl plot ARGS`, and every warning it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = invoke("plot", *args)
    return out, [f"{w.category.__name__}: {w.message}" for w in caught]


@pytest.mark.parametrize("options", [[], ["--scheme", "--x", "wall_time_s"]],
                         ids=["curves", "scheme"])
def test_a_plot_of_mixed_runs_has_a_panel_per_env_and_its_legends_inside_the_figure(
        mixed: Path, tmp_path: Path, options: list[str]) -> None:
    from PIL import Image

    from hpcrl.experiments.plots import figure

    out, caught = plot_quietly(mixed, "-o", tmp_path / "x.png", *options)
    assert out.exit_code == 0 and "x.png: 6 curves" in out.output, out.output
    assert caught == []  # no "Tight layout not applied", nor any other

    fig, drawn = figure([mixed], *(["wall_time_s", True] if options else []))
    fig.draw_without_rendering()  # lays it out as savefig does
    with Image.open(tmp_path / "x.png") as png:
        assert png.size == pytest.approx((fig.bbox.width, fig.bbox.height), abs=1)
    columns = 3 if options else 1
    rows = [fig.axes[i:i + columns] for i in range(0, len(fig.axes), columns)]
    assert [row[0].get_title().split(" ")[0] for row in rows] == ENVS
    runs = [summarize(p) for p in find_runs([mixed])]
    for row, env_id in zip(rows, ENVS, strict=False):
        legend = row[-1].get_legend()
        box = legend.get_window_extent()
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1, env_id
        assert fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1, env_id
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent()), env_id  # beside the curves
        here = [r for r in runs if r.config["env"]["id"] == env_id]
        labels = [t.get_text() for t in legend.get_texts()]
        assert len(labels) == len(set(labels)) == len(group(here))
        keys = {k for text in labels for k in re.findall(r"([\w.]+)=", text)}
        if env_id == "Acrobot-v1":
            assert labels == ["seed 0 (no episode finished)"]
        else:  # the two keys that tell this env's configs apart, of the many that differ
            assert keys == {"algo.name", "algo.lr"} and len(differences(here)) > len(keys)


def test_labels_are_the_keys_that_tell_the_configs_apart(mixed: Path) -> None:
    runs = [summarize(p) for p in find_runs([mixed])]
    assert telling_keys(runs) == ["env.id", "algo.name", "algo.lr"]
    pendulum = [r for r in runs if r.config["env"]["id"] == "Pendulum-v1"]
    assert [name for name, _ in group(pendulum)] == [
        "algo.name=sac algo.lr=0.001", "algo.name=sac algo.lr=0.0003",
        "algo.name=td3 algo.lr=0.001"]
    seeds = [r for r in runs if r.path.name.startswith("cartpole-ppo-lr1e-3")]
    assert group(seeds) == [("all runs", seeds)]


@pytest.mark.parametrize("columns", [80, 120])
def test_the_runs_table_fits_the_terminal_and_says_what_it_left_out(
        mixed: Path, columns: int) -> None:
    out = invoke("runs", mixed, env={"COLUMNS": str(columns)})
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert max(len(line) for line in lines) <= columns
    header = lines[0].split()
    runs = [summarize(p) for p in find_runs([mixed])]
    differing = differences(runs)
    shown = [k for k in header if k in differing]
    assert shown[:2] == ["env.id", "algo.name"]  # what is trained comes first
    note = next(line for line in lines if "not shown" in line)
    assert note.startswith(f"{len(differing) - len(shown)} differing keys not shown "
                           "(--wide or --json): ")
    assert len(lines[1:9]) == len(RUNS) and all(line.split()[-1] == "finished"
                                                 for line in lines[1:9])
    if columns >= 120:
        assert "algo.lr" in shown
    else:  # the learning rate gave way, and is the first key the note names
        assert "algo.lr" not in shown and note.split(": ")[1].startswith("algo.lr, ")


def test_wide_and_json_show_every_key_in_which_the_runs_differ(mixed: Path) -> None:
    runs = [summarize(p) for p in find_runs([mixed])]
    differing = differences(runs)
    wide = invoke("runs", mixed, "--wide", env={"COLUMNS": "80"}).output.splitlines()
    assert set(differing) <= set(wide[0].split()) and "not shown" not in "\n".join(wide)
    assert all(str(mixed / name) in "\n".join(wide) for name in RUNS)
    records = json.loads(invoke("runs", mixed, "--json", env={"COLUMNS": "80"}).output)
    assert len(records) == len(RUNS) and all(set(differing) <= set(r) for r in records)


def test_a_table_is_cut_by_its_dropped_columns_then_its_first_column() -> None:
    assert cut_middle("runs/ppo-CartPole-v1-20261201-101500", 20) == "runs/ppo...01-101500"
    assert cut_middle("short", 20) == "short"
    header = ["run", "a", "b", "steps"]
    rows = [["runs/a-very-long-run-directory-name", "1", "22", "100"]]
    lines, left_out = fit(header, rows, 45, drop=[2], shrink=0, min_shrink=10)
    assert left_out == [2] and lines[1] == "runs/a-very-long-run-directory-name  1  100"
    lines, left_out = fit(header, rows, 30, drop=[2], shrink=0, min_shrink=10,
                          then_drop=[1])  # the run cut to 20 makes room for column a
    assert left_out == [2] and lines[1] == "runs/a-v...tory-name  1  100"
    lines, left_out = fit(header, rows, 16, drop=[2], shrink=0, min_shrink=10,
                          then_drop=[1])  # too narrow even then: the lines are cut
    assert left_out == [2, 1] and lines == ["run         step", "run...name  100"]
