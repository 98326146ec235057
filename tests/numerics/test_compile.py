"""``train.compile``: the learner's loss and the inference ranks' forward under torch.compile
train the weights of the uncompiled run, and a CPU without a C++ compiler is refused before
any work. (The graph is traced here with torch's ``aot_eager`` backend, which captures the
forward and backward as inductor does but builds no kernels: inductor's kernels take a minute
to build on this machine; benchmarks/compile_speed.py times them.)"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from hpcrl.build import env_spaces, make_actor
from hpcrl.config import from_dict
from hpcrl.config.loader import ConfigError
from hpcrl.models.actor_engines import TorchEngine
from hpcrl.numerics import compiling
from hpcrl.placement.serial_run import Trainer
from hpcrl.runtime.checkpoint import load_checkpoint
from hpcrl.runtime.run_dir import RunDir

TINY = ["env.num_envs=4", "algo.num_steps=16", "algo.ppo.minibatch_size=32",
        "algo.ppo.num_epochs=2", "train.total_env_steps=512", "train.eval_episodes=0",
        "train.tensorboard=false", "actor.hidden_sizes=[16]"]


@pytest.fixture
def traced(monkeypatch):
    """torch.compile with the aot_eager backend; the functions it compiled."""
    calls = []
    original = torch.compile

    def compile_(fn, **kwargs):
        calls.append((fn, kwargs))
        return original(fn, backend="aot_eager", dynamic=kwargs.get("dynamic"))

    monkeypatch.setattr(compiling.torch, "compile", compile_)
    yield calls
    torch._dynamo.reset()


@pytest.mark.parametrize("agent", [[], ["algo.name=dqn", "replay.learning_starts=64",
                                        "replay.batch_size=16", "algo.num_steps=32"]],
                         ids=["ppo", "dqn"])
def test_a_compiled_learner_trains_the_weights_of_an_uncompiled_one(tmp_path, traced, agent):
    sets = TINY + agent
    if agent:
        sets = [s for s in sets if not s.startswith("algo.ppo.")]
    for name, compile_ in (("plain", "false"), ("compiled", "true")):
        Trainer(from_dict({}, sets + [f"train.compile={compile_}"]), RunDir(tmp_path / name),
                console=None).train()
    assert [fn.__name__ for fn, _ in traced] == ["loss"]  # the learner's, once
    plain = load_checkpoint(RunDir(tmp_path / "plain").checkpoint_path)["policy"]["state_dict"]
    ours = load_checkpoint(RunDir(tmp_path / "compiled").checkpoint_path)["policy"]["state_dict"]
    for key in plain:
        torch.testing.assert_close(ours[key], plain[key], rtol=1e-4, atol=1e-6)


def test_an_inference_engine_compiles_its_forward_for_any_batch(traced):
    cfg = from_dict({}, ["env.id=PongNoFrameskip-v4", "env.preset=atari",
                         "actor.encoder=nature_cnn", "actor.features=32"])
    torch.manual_seed(0)
    actor = make_actor(cfg, env_spaces(cfg))
    plain, fast = TorchEngine(actor), TorchEngine(actor, compile=True)
    assert {kwargs["dynamic"] for _, kwargs in traced} == {True}
    rng = np.random.default_rng(0)
    for rows in (2, 5):  # an inference rank batches whichever requests arrived
        obs = rng.integers(0, 255, (rows, 4, 84, 84), dtype=np.uint8)
        noise = rng.random(rows, dtype=np.float32)
        for a, b in zip(plain.step(obs, noise), fast.step(obs, noise), strict=True):
            if a is not None:
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def test_a_cpu_without_a_cpp_compiler_is_refused(monkeypatch):
    from hpcrl.config import validate_collection

    monkeypatch.setattr(validate_collection.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="needs|C\\+\\+ compiler"):
        from_dict({}, TINY + ["train.compile=true"])
