"""The command line, through click's CliRunner."""
import json

import torch
import yaml
from click.testing import CliRunner

import hpcrl
from hpcrl.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def sets(overrides):
    return [x for o in overrides for x in ("--set", o)]


def test_config_show_prints_resolved_yaml(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("algo:\n  lr: 0.01\n")
    out = invoke("config", "show", f, "--set", "seed=4")
    assert out.exit_code == 0
    data = yaml.safe_load(out.output)
    assert data["algo"]["lr"] == 0.01 and data["seed"] == 4 and data["env"]["id"] == "CartPole-v1"
    docs = invoke("config", "show", "--docs")
    assert "algo.gae_lambda = 0.8" in docs.output and "Discount factor" in docs.output


def test_bad_config_fails_before_training(tmp_path):
    out = invoke("train", "--run-dir", tmp_path / "r", "--set", "algo.lrr=1")
    assert out.exit_code != 0
    assert "did you mean 'algo.lr'" in out.output
    assert not (tmp_path / "r").exists()


def test_train_eval_resume_and_load_policy(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    out = invoke("train", "--run-dir", run, *sets(tiny_overrides + ["train.eval_episodes=2"]))
    assert out.exit_code == 0, out.output
    assert {p.name for p in run.iterdir()} >= {"config.yaml", "progress.csv", "checkpoints",
                                              "eval.json"}
    header = (run / "progress.csv").read_text().splitlines()[0].split(",")
    for col in ("env_steps", "updates", "wall_time_s", "fps", "episode_return_mean",
                "episode_length_mean", "policy_loss", "value_loss", "entropy"):
        assert col in header
    assert "eval over 2 episodes" in out.output

    ev = invoke("eval", run, "--episodes", 3, "--json")
    assert ev.exit_code == 0
    result = json.loads(ev.output)
    assert result["episodes"] == 3 and len(result["returns"]) == 3
    assert {"mean_return", "std_return"} <= result.keys()
    text = invoke("eval", run, "-n", 1)
    assert "mean return" in text.output

    again = invoke("train", "--run-dir", run, *sets(tiny_overrides))
    assert again.exit_code != 0 and "--resume" in again.output

    more = invoke("train", "--resume", run, "--set", "train.total_env_steps=1280")
    assert more.exit_code == 0, more.output
    lines = (run / "progress.csv").read_text().splitlines()
    assert len(lines) == 1 + 20

    policy = hpcrl.load_policy(run)
    assert isinstance(policy, torch.nn.Module)
    action = policy(torch.zeros(4))
    assert action.shape == () and int(action) in (0, 1)
    assert policy(torch.zeros(5, 4)).shape == (5,)
    assert torch.equal(hpcrl.load_policy(run / "checkpoints" / "last.pt")(torch.ones(4)),
                       policy(torch.ones(4)))


def test_resume_without_checkpoint_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    out = invoke("train", "--resume", tmp_path / "empty")
    assert out.exit_code != 0 and "no config.yaml" in out.output
    run = tmp_path / "r"
    run.mkdir()
    (run / "config.yaml").write_text("seed: 0\n")
    out = invoke("train", "--resume", run)
    assert out.exit_code != 0 and "no checkpoint" in out.output


def test_eval_of_a_non_run_is_a_clear_error(tmp_path):
    (tmp_path / "x.pt").write_bytes(b"not a checkpoint")
    out = invoke("eval", tmp_path / "x.pt")
    assert out.exit_code != 0 and "cannot be read safely" in out.output


def test_eval_runs_the_policy_where_device_says_and_refuses_a_missing_gpu(tmp_path,
                                                                          tiny_overrides):
    run = tmp_path / "run"
    assert invoke("train", "--run-dir", run, *sets(tiny_overrides)).exit_code == 0
    on_cpu = invoke("eval", run, "--episodes", "1", "--device", "cpu", "--json")
    assert on_cpu.exit_code == 0 and json.loads(on_cpu.output)["episodes"] == 1
    if not torch.cuda.is_available():
        out = CliRunner().invoke(main, ["eval", str(run), "--device", "cuda"])
        assert out.exit_code != 0 and "CUDA is not available" in out.output
        assert "Traceback" not in out.output


def test_resuming_a_complete_run_says_so_and_how_to_extend_it(tmp_path, tiny_overrides):
    """A finished run resumed as it is trains and evaluates nothing; with a larger budget it
    trains on from its checkpoint."""
    run = tmp_path / "run"
    tiny_overrides = tiny_overrides + ["train.eval_episodes=2"]
    assert invoke("train", "--run-dir", run, *sets(tiny_overrides)).exit_code == 0
    rows, evaluation = (run / "progress.csv").read_text(), (run / "eval.json").read_text()
    budget = hpcrl.make_config(None, tiny_overrides).train.total_env_steps
    again = invoke("train", "--resume", run)
    assert again.exit_code == 0
    assert f"'{run}' is complete" in again.output and "was evaluated" in again.output
    assert "nothing to resume" in again.output
    assert (f"hpcrl train --resume {run} --set train.total_env_steps={2 * budget}"
            in again.output)
    assert "training" not in again.output and "eval over" not in again.output
    assert (run / "progress.csv").read_text() == rows
    assert (run / "eval.json").read_text() == evaluation
    more = invoke("train", "--resume", run, "--set", f"train.total_env_steps={2 * budget}")
    assert more.exit_code == 0 and "eval over" in more.output
    steps = [int(line.split(",")[0]) for line in
             (run / "progress.csv").read_text().splitlines()[1:]]
    assert steps[-1] >= 2 * budget and steps == sorted(steps)
