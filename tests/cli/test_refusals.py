"""Every refusal the CLI makes, met the way a user meets it: one or two lines naming the key
(or option) and the fix, a non-zero exit status, no traceback, and no run directory left
behind. Most run through click's CliRunner in this process (an exception that escaped the
command would be its ``exception``, not a ``SystemExit``); the device refusals, which a user
meets from the shell and under ``mpiexec``, run as real processes."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from refusal_checks import assert_refused, refused_in_process

from hpcrl.cli import main

PLUGINS = '''
import gymnasium as gym
import torch


class NotANetwork:
    """A plain class: no nn.Module, no constructor arguments."""


class TakesNothing(torch.nn.Module):
    def __init__(self):
        super().__init__()


class RaisingNetwork(torch.nn.Module):
    def __init__(self, observation_space, width=8):
        super().__init__()
        raise RuntimeError(f"width {width} is too small")


class RaisingWrapper(gym.Wrapper):
    def __init__(self, env, scale=1.0):
        super().__init__(env)
        raise ValueError("scale must be positive")


class Unbounded(gym.ActionWrapper):
    """Pendulum with the bounds of its actions taken away."""

    def __init__(self, env):
        super().__init__(env)
        self.action_space = gym.spaces.Box(-float("inf"), float("inf"), (1,))

    def action(self, action):
        return action.clip(-2.0, 2.0)


def not_a_class(x):
    return x
'''

NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="refusals of a GPU-less machine")


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module ``refusal_plugins`` of components that break their contracts."""
    (tmp_path / "refusal_plugins.py").write_text(PLUGINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("sets, needles", [
    (["actor.network=refusal_plugins:NotANetwork"],
     ("'actor.network'", "NotANetwork is not a torch.nn.Module",
      "Class(observation_space, **actor.network_kwargs)", "'features'")),
    (["actor.network=refusal_plugins:TakesNothing"],
     ("'actor.network'", "TakesNothing()", "takes 0 positional argument")),
    (["actor.network=refusal_plugins:not_a_class", "env.id=Pendulum-v1",
      "algo.name=ppo"], ("'actor.network'", "not a torch.nn.Module")),
    (["actor.network=refusal_plugins:RaisingNetwork"],
     ("'actor.network'", "refusal_plugins:RaisingNetwork", "failed",
      "RuntimeError: width 8 is too small", "refusal_plugins.py:")),
    (["env.wrappers=[refusal_plugins:NotANetwork]"],
     ("'env.wrappers'", "NotANetwork is not a gymnasium.Wrapper", "Class(env, **kwargs)")),
    (["env.wrappers=[refusal_plugins:RaisingWrapper]"],
     ("'env.wrappers'", "refusal_plugins:RaisingWrapper", "ValueError: scale must be "
      "positive")),
    (["actor.encoder=nature_cnn"],
     ("'actor.encoder' (nature_cnn) takes image observations", "use actor.encoder=mlp")),
    (["actor.encoder=impala_resnet", "algo.name=dqn"],
     ("'actor.encoder' (impala_resnet) takes image observations",)),
    (["algo.name=sac", "env.id=Pendulum-v1", "env.wrappers=[refusal_plugins:Unbounded]"],
     ("'algo.name': sac squashes its actions", "unbounded actions", "ClipAction")),
    (["env.kwargs.gravity_typo=3"],
     ("'env.kwargs'", "gravity_typo", "CartPole-v1")),
])
def test_a_component_or_env_that_breaks_its_contract_is_refused_in_one_line(
        plugins: Path, sets: list[str], needles: tuple[str, ...]) -> None:
    args = ["train", "--run-dir", str(plugins / "run")]
    for item in sets:
        args += ["--set", item]
    refused_in_process(*args, needles=needles)
    assert not (plugins / "run").exists()


def test_a_deterministic_asynchronous_job_is_refused_in_one_line(tmp_path: Path) -> None:
    """``train.deterministic=true`` where timing decides the weights: refused before any
    work, as ``hpcrl plan`` refuses it, naming the cause and both ways out."""
    args = ["--set", "scheme.preset=impala", "--set", "train.deterministic=true"]
    needles = ("config key 'train.deterministic' (true): asynchronous collection",
               "use scheme.collection=sync", "or set train.deterministic=auto")
    refused_in_process("train", "--run-dir", str(tmp_path / "run"), *args, needles=needles)
    refused_in_process("plan", *args, needles=needles)
    assert not (tmp_path / "run").exists()


def test_a_file_that_is_no_checkpoint_is_refused_in_one_line(plugins: Path) -> None:
    refused_in_process("eval", str(plugins / "refusal_plugins.py"),
                       needles=("cannot be read safely as a checkpoint", "refusal_plugins.py"))


HPCRL = str(Path(sys.executable).with_name("hpcrl"))  # the command pip installed


def _hpcrl(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@NO_GPU
@pytest.mark.timeout(200)
@pytest.mark.parametrize("sets, key", [
    (["train.device=cuda"], "config key 'train.device' asks for 'cuda'"),
    (["train.device=cuda:0", "algo.name=sac", "env.id=Pendulum-v1"],
     "config key 'train.device' asks for 'cuda:0'"),
])
def test_a_gpu_asked_for_where_there_is_none_is_refused_in_one_line(
        tmp_path: Path, sets: list[str], key: str) -> None:
    args = [HPCRL, "train", "--run-dir", "run"]
    for item in sets:
        args += ["--set", item]
    done = _hpcrl(*args, cwd=tmp_path)
    assert_refused(done.stderr, done.returncode, key, "use train.device=cpu or auto")
    assert not (tmp_path / "run").exists()


@NO_GPU
@pytest.mark.timeout(200)
def test_eval_on_a_gpu_where_there_is_none_is_refused_naming_the_option(
        tmp_path: Path, tiny_overrides: list[str]) -> None:
    args = ["train", "--run-dir", str(tmp_path / "run")]
    for item in tiny_overrides:
        args += ["--set", item]
    assert CliRunner().invoke(main, args).exit_code == 0
    done = _hpcrl(HPCRL, "eval", "run", "--device", "cuda:1",
                  cwd=tmp_path)
    assert_refused(done.stderr, done.returncode, "--device asks for 'cuda:1'",
                   "use --device cpu or auto")


@NO_GPU
@pytest.mark.timeout(200)
def test_under_mpiexec_the_rank_without_its_gpu_is_named_once(tmp_path: Path) -> None:
    """Two ranks, one of which (the learner) asks for a GPU: rank 0 says which rank, role
    and host, once, and every rank exits before any work."""
    mpiexec = Path(sys.executable).with_name("mpiexec")
    done = _hpcrl(str(mpiexec), "-n", "2", HPCRL, "train",
                  "--run-dir", "run", "--set", "scheme.preset=ddppo",
                  "--set", "train.device=cuda", cwd=tmp_path)
    assert_refused(done.stderr, done.returncode, "rank 0 (gradient worker 0 + collector) on",
                   "config key 'train.device' asks for 'cuda'")
    assert done.stderr.count("asks for") == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("key, meant", [
    ("algo.learning_rate", "'algo.lr'"),
    ("algo.n_steps", "'algo.num_steps'"),
    ("algo.n_epochs", "'algo.ppo.num_epochs'"),
    ("algo.batch_size", "'algo.ppo.minibatch_size' (ppo) or 'replay.batch_size'"),
    ("n_envs", "'env.num_envs'"),
    ("algo.ent_coeff", "'algo.ent_coef'"),      # a typo: spelling finds it
    ("ent_coef", "'algo.ent_coef'"),            # hpcrl's own name in another section
    ("algo.tau", "'replay.tau'"),
])
def test_another_librarys_name_for_a_key_hints_hpcrls_key(key: str, meant: str) -> None:
    refused_in_process("train", "--set", f"{key}=3", needles=(f"unknown config key '{key}'; "
                                                             f"did you mean {meant}",))


def test_every_key_the_foreign_names_point_to_exists() -> None:
    import re

    from hpcrl.config.foreign_names import FOREIGN_NAMES
    from hpcrl.config.loader import all_keys

    named = {k for target, _ in FOREIGN_NAMES.values() for k in re.findall(r"'([\w.]+)'",
                                                                           target)}
    assert named and named <= set(all_keys())


def test_a_refusal_names_every_factor_of_its_arithmetic() -> None:
    """TD3 on async-sac with 4 collectors: 1,000 steps of 1 env on each of 4 collectors make
    an update of 4,000 steps; the refusal says so, factor by factor."""
    example = Path(__file__).parents[2] / "examples" / "td3-pendulum.yaml"
    refused_in_process("train", str(example), "--set", "scheme.preset=async-sac",
                       "--set", "scheme.collectors_per_worker=4",
                       "--set", "train.total_env_steps=3000",
                       needles=("'train.total_env_steps' (3000)", "algo.num_steps x "
                                "env.num_envs x scheme.collectors_per_worker = 1000 x 1 x 4 "
                                "= 4000"))


def test_every_problem_of_a_config_is_reported_at_once(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("envv:\n  id: CartPole-v1\nalgo:\n  lrr: 0.001\n  gamma: abc\n")
    result = CliRunner().invoke(main, ["train", str(bad), "--set", "env.num_envs=2"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    lines = result.output.splitlines()
    assert lines[0] == "Error: 3 problems in the config:"
    assert "unknown config key 'envv.id'; did you mean 'env.id'?" in lines[1]
    assert "unknown config key 'algo.lrr'; did you mean 'algo.lr'?" in lines[2]
    assert "config key 'algo.gamma' must be a number, got 'abc'" in lines[3]
    checks = CliRunner().invoke(main, ["train", "--set", "env.num_envs=0", "--set",
                                       "algo.lr=-1", "--set", "train.device=tpu"])
    assert checks.output.splitlines()[1:] == [
        "  config key 'env.num_envs' must be > 0, got 0",
        "  config key 'algo.lr' must be > 0, got -1.0",
        "  config key 'train.device' must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'tpu'"]


def test_a_constructor_error_raised_inside_torch_is_placed_in_the_users_code(
        plugins: Path) -> None:
    """A network whose constructor makes torch raise (a Linear of negative size) is named
    with the line of the user's file that called torch, not a line of torch."""
    (plugins / "torch_raising.py").write_text(
        "import torch\n\n\nclass Net(torch.nn.Module):\n    def __init__(self, space):\n"
        "        super().__init__()\n        self.fc = torch.nn.Linear(4, -3)\n")
    refused_in_process("train", "--run-dir", str(plugins / "run"), "--set",
                       "actor.network=torch_raising:Net",
                       needles=("'actor.network' (torch_raising:Net)",
                                "(at torch_raising.py:7 in __init__)"))
