"""``hpcrl plan --predict``: the cost model's figures beside the rank table."""
import json

import pytest
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.cli.model_inputs import actor_sizes, config_inputs
from hpcrl.config import load_config
from hpcrl.scheme.calibration import measured_calibration, read_progress
from hpcrl.scheme.cost_model import predict
from hpcrl.scheme.links import NETWORKS
from hpcrl.scheme.plan import plan_json, plan_text
from hpcrl.slurm.survival import lost_collector_notes

DDPPO = ["--set", "scheme.preset=ddppo"]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def fake_run(tmp_path, collect=(3.0, 1.0, 1.2, 0.8), compute=(2.0, 0.5, 0.5, 0.5)):
    """A run directory of a 2-rank DD-PPO job: its config and four progress rows."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("scheme:\n  preset: ddppo\n")
    lines = ["env_steps,time_collect_s,time_compute_s"]
    lines += [f"{1024 * (i + 1)},{a},{b}" for i, (a, b) in enumerate(zip(collect, compute,
                                                                        strict=True))]
    (run / "progress.csv").write_text("\n".join(lines) + "\n")
    return run


def test_plan_without_predict_prints_what_it_always_printed():
    cfg = load_config(None, ["scheme.preset=ddppo"])
    assert invoke("plan", *DDPPO).output == plan_text(cfg, lost_collector_notes(cfg.scheme)) + "\n"
    assert json.loads(invoke("plan", *DDPPO, "--json").output) == json.loads(
        json.dumps(plan_json(cfg)))


def test_predict_from_a_run_directory_gives_the_models_figures(tmp_path):
    run = fake_run(tmp_path)
    out = invoke("plan", "--predict", "--calibration", run, "--nodes", 16,
                 "--gpus-per-node", 8, "--network", "ib-ndr", "--json")
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)["prediction"]
    cfg = load_config(str(run / "config.yaml"), ())
    inputs = config_inputs(cfg)
    params, rollout_bytes = actor_sizes(cfg)
    cal = measured_calibration(read_progress(run), inputs.steps_per_collection,
                               inputs.collecting_ranks, params, inputs.gradient_steps,
                               rollout_bytes, "", inputs.vector_steps)
    want = predict(inputs.shape, cal, 128, 8, NETWORKS["ib-ndr"])
    assert got["gpus"] == 128 and got["nodes"] == 16 and got["network"] == "ib-ndr"
    assert got["frames_per_s"] == pytest.approx(want.frames_per_s)
    assert got["efficiency"] == pytest.approx(want.efficiency)
    assert got["measured"] == ["collect_cv", "collect_s", "compute_s"]
    assert cal.collect_s == 1.0 and cal.compute_s == 0.5


def test_predict_text_names_each_figure_measured_or_modelled(tmp_path):
    out = invoke("plan", "--predict", "--calibration", fake_run(tmp_path), "--nodes", 2)
    assert out.exit_code == 0, out.output
    text = out.output
    assert "gradient_worker" in text  # the rank table is still there
    assert "prediction: 2 nodes x 8 GPUs = 16 gradient workers" in text
    lines = {line.split()[0]: line for line in text.splitlines()[-12:] if line.strip()}
    assert lines["collection"].endswith("measured") and lines["compute"].endswith("measured")
    assert "modelled" in lines["communication"] and "modelled" in lines["efficiency"]
    assert "limiting" in lines and "calibration:" in text


def test_predict_without_calibration_is_modelled_throughout():
    out = invoke("plan", "--predict", *DDPPO, "--json")
    got = json.loads(out.output)["prediction"]
    assert got["measured"] == [] and got["calibration"].startswith("modelled")
    assert got["gpus"] == 8  # 1 node of 8 GPUs by default


def test_calibration_asks_for_predict(tmp_path):
    out = invoke("plan", "--calibration", fake_run(tmp_path))
    assert out.exit_code != 0 and "go with --predict" in out.output


@pytest.mark.timeout(240)
def test_calibrate_makes_a_short_run_and_measures_it():
    out = invoke("plan", "--predict", "--calibrate", "--set", "env.num_envs=2",
                 "--set", "algo.num_steps=16", "--set", "algo.ppo.minibatch_size=32", "--json")
    assert out.exit_code == 0, out.output
    got = json.loads(out.output.strip().splitlines()[-1])["prediction"]
    assert got["measured"] == ["collect_cv", "collect_s", "compute_s"]
    assert got["calibration"].startswith("measured in ")
