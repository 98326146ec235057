"""A serial run is the job of one rank: the MPI learner loop in one process, one actor, and
progress figures defined as every placement defines them."""
import csv
import subprocess
import sys

import numpy as np

from hpcrl.algorithms.on_policy import OnPolicyAlgorithm
from hpcrl.config import from_dict
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.run_dir import RunDir

FAST = ["train.tensorboard=false", "train.eval_episodes=0", "train.total_env_steps=1024",
        "env.num_envs=4", "algo.num_steps=32", "algo.ppo.num_epochs=2",
        "algo.ppo.minibatch_size=64"]


def test_one_actor_collects_learns_and_is_saved(tmp_path):
    trainer = Trainer(from_dict({}, FAST), RunDir(tmp_path), console=None)
    learner = trainer.learner
    assert learner.updates.source.collector.filler.actor is trainer.actor
    assert learner.algorithm.actor is trainer.actor
    trainer.train()


def test_grad_norm_is_the_mean_norm_before_clipping_of_the_update_steps(tmp_path, monkeypatch):
    norms: list[float] = []
    original = OnPolicyAlgorithm.apply_gradients

    def recording(self, flat_grads, step=0):
        norms.append(float(flat_grads.norm()))
        return original(self, flat_grads, step)

    monkeypatch.setattr(OnPolicyAlgorithm, "apply_gradients", recording)
    # a clip far below the norms: the column must still show the norms before clipping
    Trainer(from_dict({}, FAST + ["algo.max_grad_norm=0.01"]), RunDir(tmp_path),
            console=None).train()
    with open(tmp_path / "progress.csv") as f:
        column = [float(r["grad_norm"]) for r in csv.DictReader(f)]
    steps = len(norms) // len(column)  # minibatches x epochs per update
    assert steps == 4 and len(norms) == steps * len(column)
    want = np.array(norms).reshape(len(column), steps).mean(axis=1)
    np.testing.assert_allclose(column, want, rtol=1e-5)
    assert min(column) > 0.01


def test_each_gradient_is_applied_where_backward_wrote_it(tmp_path, monkeypatch):
    """No copy between computing and applying a gradient: the optimiser is handed the very
    tensor backward accumulated into (on a GPU, no host round trip per minibatch)."""
    handed: list[tuple[int, int]] = []
    original = OnPolicyAlgorithm.apply_gradients

    def recording(self, flat_grads, step=0):
        handed.append((flat_grads.data_ptr(),
                       self.actor.__dict__["_hpcrl_flat_grads"].data_ptr()))
        return original(self, flat_grads, step)

    monkeypatch.setattr(OnPolicyAlgorithm, "apply_gradients", recording)
    Trainer(from_dict({}, FAST), RunDir(tmp_path), console=None).train()
    assert handed and all(given == backward for given, backward in handed)


def test_a_serial_run_loads_no_module_of_a_folder_named_mpi(tmp_path):
    # what only a job of several ranks needs lives in placement/mpi; a run of one process
    # (either family) trains without loading any of it
    runs = {"ppo": FAST + ["algo.ppo.num_epochs=1"],
            "dqn": ["algo.name=dqn", "train.total_env_steps=600", "env.num_envs=2",
                    "algo.num_steps=50", "train.eval_episodes=0", "train.tensorboard=false"]}
    probe = ("import sys\n"
             "from hpcrl.api import train\n"
             f"for name, sets in {runs!r}.items():\n"
             f"    train(sets=sets, run_dir={str(tmp_path)!r} + '/' + name, console=None)\n"
             "print(sorted(m for m in sys.modules if m.startswith('hpcrl') and "
             "'mpi' in m.split('.')[:-1]))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout[-2000:]
