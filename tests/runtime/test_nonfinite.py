"""NaN and inf never reach a checkpoint: env data stops the run naming the env and its step,
a non-finite loss or gradient stops it or (train.on_nonfinite=skip_update) is dropped and
counted, and a state with non-finite weights is never written over the last good one."""
import csv
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from hpcrl.cli import main
from hpcrl.errors import NonFiniteError
from hpcrl.numerics.gradient_guard import GradientGuard
from hpcrl.runtime.checkpoint import load_checkpoint, save_atomic
from hpcrl.runtime.finite import check_checkpoint_state, check_env_steps, save_finite_checkpoint

TEST_ENVS = Path(__file__).parents[1] / "placement" / "mpi"
BAD_ENV = "env.id=hpcrl_testenvs:NonFiniteCartPole-v0"
SMALL = ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=32",
         "algo.ppo.num_epochs=2",
         "train.checkpoint_every=2", "train.total_env_steps=2048", "train.tensorboard=false",
         "train.eval_episodes=0", "train.log_interval_s=60"]


@pytest.fixture
def bad_env(monkeypatch):
    """The test env module importable, and a function arming it through its env vars."""
    monkeypatch.syspath_prepend(str(TEST_ENVS))

    def arm(after: int, what: str = "obs", seeds: str = "") -> None:
        monkeypatch.setenv("HPCRL_TEST_BAD_AFTER", str(after))
        monkeypatch.setenv("HPCRL_TEST_BAD_WHAT", what)
        monkeypatch.setenv("HPCRL_TEST_BAD_SEEDS", seeds)
        monkeypatch.delenv("HPCRL_TEST_BAD_RANKS", raising=False)
    return arm


def hpcrl(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def train(run: Path, overrides: list[str]):
    return hpcrl("train", "--run-dir", run, *[x for o in overrides for x in ("--set", o)])


def finite_weights(run: Path) -> dict:
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    for name, tensor in state["policy"]["state_dict"].items():
        if tensor.is_floating_point():
            assert torch.isfinite(tensor).all(), name
    return state


def column(run: Path, name: str) -> list[float]:
    with open(run / "progress.csv") as f:
        return [float(r[name]) for r in csv.DictReader(f)]


def test_nan_observations_stop_the_run_and_keep_the_last_good_checkpoint(tmp_path, bad_env):
    bad_env(after=100, seeds="2")  # global env 2 (seed 0 + 2) goes NaN at its step 100
    run = tmp_path / "run"
    out = train(run, SMALL + [BAD_ENV])
    assert out.exit_code != 0
    message = " ".join(out.output.split())
    assert "env 2 (global env index 2) returned a non-finite observation (nan) at its step 100" \
        in message
    # 16 steps x 4 envs per update: step 100 falls in update 7; checkpoints every 2 updates
    assert f"the last good checkpoint is {run / 'checkpoints' / 'last.pt'} (update 6, 384 " \
           f"env steps)" in message
    state = finite_weights(run)
    assert state["counters"]["updates"] == 6
    assert len(column(run, "env_steps")) == 6  # no row of the broken update
    evaluated = hpcrl("eval", run, "--episodes", "2", "--json")
    assert evaluated.exit_code == 0, evaluated.output


def test_a_run_that_breaks_before_its_first_checkpoint_says_none_was_written(tmp_path, bad_env):
    bad_env(after=10)
    run = tmp_path / "run"
    out = train(run, SMALL + [BAD_ENV])
    assert out.exit_code != 0
    assert "no checkpoint was written" in out.output
    assert not (run / "checkpoints" / "last.pt").exists()


def test_an_overflowing_loss_stops_by_default_and_is_skipped_with_skip_update(tmp_path, bad_env):
    bad_env(after=100, what="huge_reward", seeds="1")  # a finite 1e30 reward: the value loss
    stopped = train(tmp_path / "stop", SMALL + [BAD_ENV])  # overflows to inf
    assert stopped.exit_code != 0
    assert "the loss term" in stopped.output and "skip_update" in stopped.output
    finite_weights(tmp_path / "stop")

    run = tmp_path / "skip"
    out = train(run, SMALL + [BAD_ENV, "train.on_nonfinite=skip_update"])
    assert out.exit_code == 0, out.output
    skipped = column(run, "skipped_updates")
    assert len(skipped) == 2048 // 64 and sum(skipped) > 0
    assert skipped[-1] == 0  # training went on after the bad update
    state = finite_weights(run)
    assert state["counters"]["env_steps"] == 2048


def test_nan_rewards_stop_an_offpolicy_run(tmp_path, bad_env):
    bad_env(after=60, what="reward", seeds="1")
    run = tmp_path / "run"
    out = train(run, [BAD_ENV, "algo.name=dqn", "env.num_envs=2", "algo.num_steps=8",
                      "replay.learning_starts=32", "replay.batch_size=16",
                      "train.checkpoint_every=2", "train.total_env_steps=1000",
                      "train.tensorboard=false", "train.eval_episodes=0"])
    assert out.exit_code != 0
    message = " ".join(out.output.split())
    assert "env 1 (global env index 1) returned a non-finite reward (nan) at its step 60" in message
    # 8 steps x 2 envs per update: step 60 falls in update 8; checkpoints every 2 updates
    assert "(update 6, 96 env steps)" in message
    finite_weights(run)


# -- the pieces, one by one --------------------------------------------------------------
def test_env_check_names_the_first_bad_env_and_step():
    values = np.zeros((5, 3, 2), np.float32)
    values[3, 2, 1] = np.inf
    values[4, 0, 0] = np.nan
    with pytest.raises(NonFiniteError, match=r"env 2 \(global env index 10\) returned a "
                       r"non-finite observation \(inf\) at its step 13 \(job env step ~156\)"):
        check_env_steps("observation", values, env_offset=8, first_step=10, total_envs=12)
    check_env_steps("observation", np.zeros((5, 3, 2)), 0, 0, 3)  # finite: nothing


def test_guard_stops_or_skips():
    with pytest.raises(NonFiniteError, match="'value_loss' is nan"):
        GradientGuard("stop").check_loss({"policy_loss": 0.1, "value_loss": math.nan})
    with pytest.raises(NonFiniteError, match="optimiser step 7"):
        GradientGuard("stop").admit(math.inf, 7)
    guard = GradientGuard("skip_update")
    guard.check_loss({"value_loss": math.nan})  # the gradient it makes is dropped instead
    assert guard.admit(1.0, 1) and not guard.admit(math.nan, 2) and not guard.admit(math.inf, 3)
    assert guard.take_skipped() == 2 and guard.take_skipped() == 0


def test_a_dropped_gradient_leaves_weights_and_optimiser_alone(tiny_overrides):
    from hpcrl.algorithms import make_algorithm
    from hpcrl.build import env_spaces
    from hpcrl.config.loader import load_config
    from hpcrl.numerics.flat import contiguous_parameters

    cfg = load_config(None, tiny_overrides + ["train.on_nonfinite=skip_update"])
    algo = make_algorithm(cfg, env_spaces(cfg))
    params = contiguous_parameters(algo.actor)
    grads = torch.ones_like(params)
    algo.apply_gradients(grads)
    before = params.detach().clone(), {k: v.clone() if torch.is_tensor(v) else v
                                       for k, v in algo.optimizer.state_dict().items()}
    grads[3] = math.nan
    stats = algo.apply_gradients(grads)
    assert math.isnan(stats["grad_norm"]) and algo.guard.take_skipped() == 1
    assert torch.equal(params, before[0])
    for key, value in algo.optimizer.state_dict().items():
        if torch.is_tensor(value):
            assert torch.equal(value, before[1][key]), key


def _state(weight: float, moment: float = 0.0, optim: float = 0.0) -> dict:
    return {"counters": {"updates": 3, "env_steps": 30, "wall_time_s": 1.0},
            "policy": {"state_dict": {"w": torch.tensor([1.0, weight]),
                                      "obs_rms.mean": torch.tensor([moment])},
                       "action": {"low": torch.tensor([-math.inf]),  # inf by design: allowed
                                  "high": torch.tensor([math.inf])}},
            "placement": {"updater": {"version": 3,
                                      "algorithm": {"optimizer": {
                                          "exp_avg": torch.tensor([optim])}},
                                      "replay": {"rewards": torch.tensor([math.nan])}},
                          "collectors": []}}


def test_checkpoint_writer_refuses_non_finite_weights_statistics_and_optimiser(tmp_path):
    path = tmp_path / "last.pt"
    save_finite_checkpoint(_state(2.0), path)  # finite (the replay is not the writer's concern)
    good = path.read_bytes()
    for bad, where in [(_state(math.nan), "policy.state_dict.w (1 of 2 values)"),
                       (_state(1.0, moment=math.inf), "policy.state_dict.obs_rms.mean"),
                       (_state(1.0, optim=math.nan), "placement.updater.algorithm.optimizer")]:
        with pytest.raises(NonFiniteError, match="refusing to write a checkpoint") as err:
            save_finite_checkpoint(bad, path)
        assert where in str(err.value)
        assert path.read_bytes() == good  # the last good checkpoint is untouched
    assert load_checkpoint(path)["policy"]["state_dict"]["w"][1] == 2.0
    check_checkpoint_state(_state(3.0))
    save_atomic(_state(math.nan), tmp_path / "raw.pt")  # the plain writer is unchanged


def test_the_raw_observations_the_check_reads_give_the_normaliser_moments():
    from hpcrl.build import env_spaces, make_actor, rollout_layout
    from hpcrl.collection.collector import rollout_collector
    from hpcrl.config import from_dict
    from hpcrl.envs.vector import make_vector_env

    def rollout(normalize: bool):
        cfg = from_dict({}, ["env.num_envs=3", "algo.num_steps=50", "algo.ppo.minibatch_size=30",
                             f"env.normalize_obs={str(normalize).lower()}"])
        spaces = env_spaces(cfg)
        envs = make_vector_env(cfg.env, 3)
        collector = rollout_collector(envs, make_actor(cfg, spaces), cfg.env, cfg.algo.gamma,
                                      cfg.seed)
        r = collector.collect(rollout_layout(cfg, spaces, 3).new())
        envs.close()
        return r

    # fresh statistics (mean 0, std 1) leave CartPole's observations as they are: same actions
    raw, normalised = rollout(False), rollout(True)
    np.testing.assert_allclose(normalised.obs, raw.obs, atol=1e-5)
    count, mean, m2 = normalised.moments()[0]
    obs = raw.obs.astype(np.float64).reshape(-1, raw.obs.shape[-1])
    assert count == 150
    np.testing.assert_allclose(mean, obs.mean(axis=0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(m2, ((obs - obs.mean(axis=0)) ** 2).sum(axis=0), rtol=1e-5)
    assert raw.moments()[0][0] == 0  # no normalising: no moments


def test_a_run_of_an_older_version_resumes_under_its_own_progress_columns(tmp_path):
    from hpcrl.runtime.progress import ProgressLog, columns_for

    old = [c for c in columns_for(("policy_loss",)) if c != "skipped_updates"]
    (tmp_path / "progress.csv").write_text(",".join(old) + "\n" + "1," * (len(old) - 1) + "1\n")
    log = ProgressLog(tmp_path, columns_for(("policy_loss",)), 1, tensorboard=False)
    log.write({name: 2 for name in columns_for(("policy_loss",))})
    log.close()
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == old and all(len(r) == len(old) for r in rows) and rows[2][0] == "2"
