"""Short seeded learning tests of the off-policy algorithms and IMPALA: they fail if
learning stops. (The benchmark targets are in benchmarks/offpolicy_vs_sb3.py.)"""
import pytest
from quiet_training import train_quietly

from hpcrl.learning.evaluation import evaluate

DQN = ["algo.name=dqn", "env.num_envs=1", "actor.hidden_sizes=[64,64]", "actor.activation=relu",
       "actor.ortho_init=false", "algo.lr=1e-3", "algo.lr_schedule=constant", "algo.gamma=0.99",
       "algo.max_grad_norm=10", "algo.num_steps=500", "replay.batch_size=64",
       "replay.learning_starts=500", "replay.train_freq=4", "replay.gradient_steps=2",
       "replay.target_update_interval=100", "replay.tau=1.0", "algo.dqn.exploration_fraction=0.2",
       "algo.dqn.exploration_final_eps=0.02", "train.total_env_steps=15000"]
PENDULUM = ["env.id=Pendulum-v1", "env.num_envs=1", "actor.hidden_sizes=[64,64]",
            "actor.activation=relu", "actor.ortho_init=false", "algo.lr=1e-3",
            "algo.lr_schedule=constant", "algo.max_grad_norm=0", "algo.num_steps=1000",
            "replay.batch_size=64"]


def train(tmp_path, overrides):
    return train_quietly(tmp_path, overrides)


# DQN with uniform replay and SAC learn in test_algo_defaults.py (from nothing but their
# names, through the CLI); here the variants those defaults do not run.
def test_prioritized_n_step_dqn_learns_cartpole(tmp_path):
    trainer = train(tmp_path, DQN + ["replay.prioritized=true", "replay.n_step=3"])
    mean_return, _ = trainer.episodes.means()
    assert mean_return >= 80, mean_return  # random play scores about 22


def test_td3_learns_pendulum(tmp_path):
    trainer = train(tmp_path, ["algo.name=td3", *PENDULUM, "algo.gamma=0.98",
                               "replay.learning_starts=1000", "train.total_env_steps=7000"])
    result = evaluate(trainer.actor, trainer.config.env, 5, trainer.config.seed)
    assert result["mean_return"] > -700, result


def test_ddpg_learns_pendulum(tmp_path):
    trainer = train(tmp_path, ["algo.name=ddpg", *PENDULUM, "algo.gamma=0.98",
                               "replay.learning_starts=1000", "train.total_env_steps=5000"])
    result = evaluate(trainer.actor, trainer.config.env, 5, trainer.config.seed)
    assert result["mean_return"] > -900, result


@pytest.mark.slow
def test_mpo_learns_pendulum(tmp_path):
    # 8k steps, seeds 0-2: eval -198 / -196 / -311 (-197 / -332 / -397 before the E-step
    # moved to the next states, 2026-12-06; random play about -1200 to -1500)
    trainer = train(tmp_path, ["algo.name=mpo", *PENDULUM, "algo.gamma=0.98",
                               "replay.learning_starts=1000", "algo.mpo.action_samples=8",
                               "train.total_env_steps=8000"])
    result = evaluate(trainer.actor, trainer.config.env, 5, trainer.config.seed)
    assert result["mean_return"] > -700, result


def test_impala_learns_cartpole(tmp_path):
    trainer = train(tmp_path, ["algo.name=impala", "algo.num_steps=8", "algo.lr=7e-4",
                               "algo.lr_schedule=constant", "algo.optimizer=rmsprop",
                               "algo.gamma=0.99", "algo.ent_coef=0.0",
                               "train.total_env_steps=30000"])
    mean_return, _ = trainer.episodes.means()
    assert mean_return >= 100, mean_return
