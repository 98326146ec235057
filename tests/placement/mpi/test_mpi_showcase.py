"""The showcase recipe at its own layout under a real mpiexec: the world size hpcrl plan
gives, 2 synchronous gradient workers fed by 4 asynchronous collectors each, ViZDoom frames
through the Fixup ResNet and the GRU, a few thousand env steps on a small scenario."""
import json
import subprocess
import sys

import pytest
from mpirun import ROOT, rows, run

pytest.importorskip("vizdoom")

RECIPE = str(ROOT / "examples" / "showcase-vizdoom.yaml")
SMALL = ["env.id=VizdoomBasic-v1", "env.num_envs=2", "env.vizdoom.width=64",
         "env.vizdoom.height=36", "algo.num_steps=16", "algo.ppo.minibatch_size=128",
         "algo.ppo.num_epochs=2", "train.total_env_steps=1024", "train.eval_episodes=1",
         "train.checkpoint_every=100"]


def plan(sets):
    cmd = [sys.executable, "-m", "hpcrl.cli", "plan", RECIPE, "--json"]
    for item in sets:
        cmd += ["--set", item]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.timeout(300)
def test_the_showcase_trains_at_its_layout_on_a_small_scenario(tmp_path):
    layout = plan(SMALL)
    assert layout["world_size"] == 10
    roles = [r["role"] for r in layout["ranks"]]
    assert roles.count("gradient_worker") == 2 and roles.count("collector") == 8
    done = run(layout["world_size"], ["train", RECIPE, "--run-dir", str(tmp_path / "run")],
               ["train.tensorboard=false", "train.log_interval_s=60", *SMALL], timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    progress = rows(tmp_path / "run")
    assert int(progress[-1]["env_steps"]) >= 1024
    assert all(float(r["policy_loss"]) == float(r["policy_loss"]) for r in progress)  # finite
    assert (tmp_path / "run" / "eval.json").exists()
